"""Sealed bytes on disk: the operation log, snapshots, the vault key, `vault.json`.

Every file is written once or appended to, sealed with a key derived for its
purpose, and fsynced before it counts (docs/format.md). It may import model
and crypto.
"""
