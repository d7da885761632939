"""Where the server keeps its bytes: a `Store` (`memvault_base.objects.store`).

    DirectoryStore  a local directory, `DATA/store/`; the default
    S3Store         an S3-compatible bucket (`--store s3://bucket/prefix`),
                    shareable by several server replicas

Keys are `memvault_base.objects.names`' layout (`<vault>/objects/<name>`,
`<vault>/versions/<n>`, `<vault>/owner`). A store knows nothing of vaults,
accounts or chains: the chain's rules live in `chain.py` on top of
put-if-absent, so the S3 store is as safe with many replicas as the directory
store is with one server.
"""

from __future__ import annotations

from pathlib import Path

from memvault_base.errors import InvalidArgument
from memvault_base.objects.store import Store


def open_store(spec: str | None, data_dir: Path) -> Store:
    """`--store` as given: None (the directory `data_dir/store`) or `s3://bucket/prefix`."""
    if spec is None or spec == "":
        from memvault_base.objects.directory import DirectoryStore

        root = data_dir / "store"
        # One server per data directory: it caches heads (not shared), and
        # whatever is in .tmp/ when it starts was left by a crash.
        return DirectoryStore(root, tmp=root / ".tmp", shared=False, stale_after=0.0)
    if spec.startswith("s3://"):
        from memvault_base.objects.s3 import open_s3_store

        return open_s3_store(spec)
    raise InvalidArgument(f"--store {spec!r}: use s3://bucket/prefix, or leave it out for "
                          f"the data directory")
