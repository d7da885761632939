"""The client's sync calls: set up end-to-end encrypted sync, run it, watch it.

`Client` inherits these; they live apart because sync is its own concept
(docs/architecture.md, "sync"). The daemon does the work; these ask it to.
"""

from __future__ import annotations

from memvault.connection import Connection
from memvault.types import (
    DeviceInfo,
    InitResult,
    JoinResult,
    LeaveResult,
    RotateResult,
    SyncInfo,
    SyncVerdict,
)
from memvault_base.errors import ForkDetected
from memvault_base.v1 import memory_pb2 as pb

__all__ = ["SyncCalls"]


class SyncCalls(Connection):
    """Mixed into `Client`, which calls `_sync_stubs` from its `_make_stubs`."""

    def _sync_stubs(self) -> None:
        self._init_sync = self._unary("InitSync", pb.InitSyncRequest, pb.InitSyncReply)
        self._join_sync = self._unary("JoinSync", pb.JoinSyncRequest, pb.JoinSyncReply)
        self._sync_now = self._unary("SyncNow", pb.SyncStatusRequest, pb.SyncStatusReply)
        self._sync_status = self._unary("SyncStatus", pb.SyncStatusRequest, pb.SyncStatusReply)
        self._sync_repair = self._unary("SyncRepair", pb.SyncRepairRequest, pb.SyncStatusReply)
        self._sync_verify = self._unary("SyncVerify", pb.VerifySyncRequest, pb.VerifySyncReply)
        self._sync_witness = self._unary("SyncWitness", pb.InitSyncRequest,
                                         pb.SyncStatusReply)
        self._sync_leave = self._unary("SyncLeave", pb.SyncLeaveRequest, pb.SyncLeaveReply)
        self._sync_move = self._unary("SyncMove", pb.InitSyncRequest, pb.InitSyncReply)
        self._list_devices = self._unary("ListDevices", pb.ListDevicesRequest,
                                         pb.ListDevicesReply)
        self._rename_device = self._unary("RenameDevice", pb.RenameDeviceRequest,
                                          pb.ListDevicesReply)
        self._rotate_keys = self._unary("RotateKeys", pb.RotateKeysRequest,
                                        pb.RotateKeysReply)

    def init_sync(self, remote: str, *, token: str | None = None,
                  allow_cleartext_token: bool = False) -> InitResult:
        """Set up sync with an empty remote; returns the recovery key, once.

        A token goes to another host over `grpc://` (no TLS) only with
        `allow_cleartext_token`; use `grpcs://` instead."""
        reply = self._call(self._init_sync, pb.InitSyncRequest(
            remote=remote, token=token or "", allow_cleartext_token=allow_cleartext_token))
        return InitResult(reply.vault_id, reply.recovery_key)

    def join_sync(self, remote: str, recovery_key: str, *, token: str | None = None,
                  allow_cleartext_token: bool = False) -> JoinResult:
        """Join the vault the recovery key names; this device's memories are kept.
        `allow_cleartext_token` as for `init_sync`."""
        reply = self._call(self._join_sync, pb.JoinSyncRequest(
            remote=remote, token=token or "", recovery_key=recovery_key,
            allow_cleartext_token=allow_cleartext_token), timeout=600.0)
        return JoinResult(reply.vault_id, reply.memory_count)

    def sync_now(self) -> SyncInfo:
        """Pull and push at once, then report."""
        return _sync_info(self._call(self._sync_now, pb.SyncStatusRequest(), timeout=600.0))

    def sync_status(self) -> SyncInfo:
        return _sync_info(self._call(self._sync_status, pb.SyncStatusRequest()))

    def sync_repair(self, *, confirm: bool) -> SyncInfo:
        """Move a stopped vault to a fresh chain on its remote, keeping every
        memory; the other devices follow. `confirm` must be True: the user
        agreed (docs/cli.md, `memvault sync repair`)."""
        return _sync_info(self._call(self._sync_repair, pb.SyncRepairRequest(confirm=confirm),
                                     timeout=600.0))

    def verify_sync(self, other: str | None = None) -> SyncVerdict:
        """This device's fingerprint of the chain, compared with `other`
        (another device's, as it printed it) when given. Raises
        ForkDetected when the two differ: the remote showed the devices
        different histories or withheld versions from this one, and sync
        stopped here. Catching up first may take a round of sync."""
        reply = self._call(self._sync_verify, pb.VerifySyncRequest(fingerprint=other or ""),
                           timeout=600.0)
        if reply.forked:
            raise ForkDetected(f"{reply.forked}. This device's fingerprint: "
                               f"{reply.fingerprint}. Sync stopped; `memvault sync repair` "
                               "moves the vault to a fresh chain")
        return SyncVerdict(reply.fingerprint, reply.chain, reply.head, reply.agreed,
                           reply.compared_at, reply.undecided)

    def witness_sync(self, remote: str, *, token: str | None = None,
                     allow_cleartext_token: bool = False) -> SyncInfo:
        """Record what this device has seen on a second remote, a witness,
        and check the other devices' records there at every round (a fork
        then needs both remotes); one round runs before it returns.
        `allow_cleartext_token` as for `init_sync`."""
        return _sync_info(self._call(self._sync_witness, pb.InitSyncRequest(
            remote=remote, token=token or "", allow_cleartext_token=allow_cleartext_token),
            timeout=600.0))

    def leave_sync(self) -> LeaveResult:
        """Stop syncing: the vault stays whole here (every memory, its key),
        the remote keeps what it holds. `init` or `join` may follow."""
        # A round in progress ends first: up to the remote's 60 s deadline.
        reply = self._call(self._sync_leave, pb.SyncLeaveRequest(), timeout=120.0)
        return LeaveResult(reply.remote, reply.pending)

    def move_sync(self, remote: str, *, token: str | None = None,
                  allow_cleartext_token: bool = False) -> InitResult:
        """Sync to another, empty remote from now on: the vault starts a
        fresh chain there with every memory; returns its recovery key, once.
        The old remote keeps its data; other devices `sync leave`, then
        `join` the new one. `allow_cleartext_token` as for `init_sync`."""
        reply = self._call(self._sync_move, pb.InitSyncRequest(
            remote=remote, token=token or "", allow_cleartext_token=allow_cleartext_token),
            timeout=600.0)
        return InitResult(reply.vault_id, reply.recovery_key)

    def devices(self) -> list[DeviceInfo]:
        """The vault's registered devices, oldest first, this one marked."""
        return _devices(self._call(self._list_devices, pb.ListDevicesRequest(), timeout=120.0))

    def rename_device(self, old: str, new: str) -> list[DeviceInfo]:
        """Name the device called `old` (or whose id starts with it) `new`,
        for every device of the vault; returns the devices."""
        return _devices(self._call(self._rename_device, pb.RenameDeviceRequest(
            old_name=old, new_name=new), timeout=120.0))


    def rotate_keys(self, revoke: str = "") -> RotateResult:
        """Start a new key epoch: a new vault key for every registered device
        but `revoke` (a name or id prefix; "" for none) and a new recovery
        key, returned once. The other devices move to it at their next sync.
        After a rotation cut short before its answer, `recovery-key rotate`
        (no `revoke`) returns that rotation's key instead, `recovered` set."""
        reply = self._call(self._rotate_keys, pb.RotateKeysRequest(revoke=revoke),
                           timeout=120.0)
        return RotateResult(reply.recovery_key, reply.epoch, reply.revoked_device,
                            reply.token_revoked, reply.token_note, reply.recovered)


def _devices(reply: pb.ListDevicesReply) -> list[DeviceInfo]:
    return [DeviceInfo(d.device_id, d.name, d.sign_key, d.receive_key, d.added, d.last_seen,
                       d.this_device, d.revoked) for d in reply.devices]


def _sync_info(reply: pb.SyncStatusReply) -> SyncInfo:
    return SyncInfo(reply.configured, reply.remote, reply.state, reply.head, reply.pushed_seq,
                    reply.pending, reply.last_push, reply.last_pull, reply.last_error,
                    reply.bad_version, reply.withheld_head, reply.repush, reply.chain,
                    reply.snapshot, tuple((device.device, device.last_seen)
                                          for device in reply.silent), reply.freeze_bound_s,
                    reply.witness, tuple((r.number, r.reason) for r in reply.refused),
                    reply.unshown_recovery_key, reply.unshown_recovery_epoch,
                    reply.witness_error)
