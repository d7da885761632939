"""The vault: the domain service every caller goes through.

`vault.py` composes the parts, each an object with its own state: `core.py`
(the commit: logged and fsynced, then applied), `access.py` (recall's
access marks), `snapshots.py` (with `deltas.py`: what a stop seals),
`writes.py`, `reads.py`, `upkeep.py` and `replication.py` (what sync asks
of the vault). `state.py` is the state as a function of the operations. It
may import config, recall, upkeep, embedding, index, storage, model and
crypto; it knows nothing of gRPC, files being watched or the sync worker,
which it reaches only through a callback.
"""
