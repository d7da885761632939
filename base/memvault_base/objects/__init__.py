"""Objects on a remote: the names a vault's objects may take, and the stores that hold them.

`names.py` is the key layout and its rules; `store.py` the contract of a
put-if-absent store; `directory.py` and `s3.py` its two implementations, on a
local directory and on an S3-compatible bucket. memvault-server keeps its
vaults in one, and the daemon's `file://` and `s3://` remotes are built on
one; the server and the daemon check names with the same `names.py`.
Imported only by the daemon and the server: `s3.py` needs obstore, which the
light client's install does not have.
"""
