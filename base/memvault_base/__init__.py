"""What every memvault process agrees on: the client, the daemon and the server.

`errors.py` (the one error tree and its status codes), `paths.py` (where
config, data and the socket live), `durable.py` (fsynced renames), `rpc.py`
(the gRPC edge both servers share), `objects/` (the remote object layout and
the directory and S3 stores) and `v1/` (the generated gRPC stubs, from
`proto/`). It imports no other memvault package, and nothing that can
decrypt.
"""
