"""The fingerprint of what a device has seen of the chain (`memvault sync verify`).

Two devices compare fingerprints as Signal users compare safety numbers: read
aloud, pasted in a chat, typed in. Equal prefixes of one history give equal
fingerprints; a remote that showed the two devices different histories
cannot make them agree, since it lacks the key.

    text   := chain "-" head "-" 6 groups of 5 decimal digits, "-"-separated
              e.g. 1-42-07395-18266-40418-93712-55030-21847
    digits := the first 29 digits of
                int(HMAC-SHA256(key, "memvault/fingerprint" | format:u8 |
                                vault_id:16 | chain:u32 | len(scope):u8 | scope |
                                head:u64 | hash:32), big-endian) mod 10^29
              then one Luhn check digit over chain:10 | head:20 | those 29
              (each number zero-padded to that many decimal digits)
    key    := HKDF(vault key, "sync/fingerprint/v1")

`hash` is the sha256 of version `head`'s object as the remote gave it (32
zero bytes at head 0). The chain and head numbers are in the clear: the
remote knows them anyway, and the device that is ahead needs them to
recompute its own fingerprint at the other's head (`SyncWorker.hash_at`),
so that two devices agree whenever one's history is a prefix of the
other's. 29 digits are 96 bits of the HMAC: the remote, without the key,
can only guess them. The check digit catches a mistyped digit (and most
swapped pairs) before it could be taken for a fork.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
from dataclasses import dataclass

from memvault_base.errors import InvalidArgument
from memvaultd.crypto.kdf import derive_key

__all__ = ["Fingerprint", "FingerprintKey"]

FORMAT = 1
_DIGITS = 29
_GROUP = 5
_TEXT = re.compile(r"^(\d{1,10})-(\d{1,20})-(\d{5})-(\d{5})-(\d{5})-(\d{5})-(\d{5})-(\d{5})$")


@dataclass(frozen=True)
class Fingerprint:
    chain: int
    head: int
    digits: str  # 30 decimal digits, the last a check digit

    def text(self) -> str:
        groups = [self.digits[i : i + _GROUP] for i in range(0, len(self.digits), _GROUP)]
        return "-".join([str(self.chain), str(self.head), *groups])

    @classmethod
    def parse(cls, text: str) -> Fingerprint:
        """The fingerprint another device printed, as the user typed or
        pasted it (spaces or dashes between the groups)."""
        found = _TEXT.match("-".join(re.split(r"[\s\-]+", text.strip())))
        if found is None:
            raise InvalidArgument(f"{text!r} is not a memvault fingerprint: it reads like "
                                  "1-42-07395-18266-40418-93712-55030-21847 (chain, version, "
                                  "then six groups of five digits)")
        chain, head = int(found.group(1)), int(found.group(2))
        digits = "".join(found.groups()[2:])
        if _check_digit(chain, head, digits[:-1]) != digits[-1]:
            raise InvalidArgument(f"{text!r}: a digit is mistyped (its check digit does not "
                                  "match); copy the other device's fingerprint again")
        return cls(chain, head, digits)


class FingerprintKey:
    """Computes this vault's fingerprints; the key never leaves the daemon."""

    def __init__(self, vault_key: bytes, vault_id: bytes) -> None:
        self._key = derive_key(vault_key, purpose="sync/fingerprint/v1")
        self._vault_id = vault_id

    def of(self, chain: int, scope: str, head: int, head_hash: bytes) -> Fingerprint:
        """The fingerprint of having seen version `head` of `chain` (under
        `scope` on the remote), whose object hashes to `head_hash`."""
        scope_bytes = scope.encode()
        message = (b"memvault/fingerprint" + bytes([FORMAT]) + self._vault_id
                   + struct.pack(">IB", chain, len(scope_bytes)) + scope_bytes
                   + struct.pack(">Q", head) + (head_hash or bytes(32)))
        mac = hmac.new(self._key, message, hashlib.sha256).digest()
        digits = str(int.from_bytes(mac, "big") % 10**_DIGITS).zfill(_DIGITS)
        return Fingerprint(chain, head, digits + _check_digit(chain, head, digits))


def _check_digit(chain: int, head: int, digits: str) -> str:
    """Luhn's check digit (ISO/IEC 7812-1) over the numbers and digits."""
    payload = f"{chain:010d}{head:020d}{digits}"
    total = 0
    for place, char in enumerate(reversed(payload)):
        value = int(char) * (2 if place % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return str(-total % 10)
