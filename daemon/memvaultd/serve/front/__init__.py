"""The front process: the public socket's peer gate and gRPC server.

It relays every call to the core over the link (`link.py`) and holds no key
and no memory. It imports nothing of the daemon outside this folder, so that
the process stays small (tests/test_layers.py checks what it loads).
"""
