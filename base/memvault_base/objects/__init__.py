"""Objects on a remote: the names a vault's objects may take, and the stores that hold them.

`names.py` is the key layout and its rules; `directory.py` and `s3.py` are
put-if-absent stores on a local directory and on an S3-compatible bucket,
used by memvault-server and by the daemon's `file://` and `s3://` remotes.
"""
