"""End-to-end encrypted sync: the version chain on a remote that sees only ciphertext.

`worker.py` pushes and pulls, `setup.py` is `init`, `join`, `sync move` and
`sync leave` (with `vault_keys.py` and `pending_setup.py`: the vault's first
objects on a remote), `envelope.py` seals what leaves the device,
`high_water.py` keeps the newest version this device has seen, `recovery.py`
wraps the vault key under the recovery key, `devices.py` is the vault's
registry of devices and `signatures.py` the signature every version carries,
and `remotes/` are the places a chain can live. It reaches the vault only
through the `SyncedVault` protocol (`vault_side.py`); it may import storage,
model, crypto and the base package.
"""
