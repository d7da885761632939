"""The front process: the public socket's peer gate, gRPC, health and reflection.

It relays every call to the core over the link (`link.py`, whose codec
the core shares: it imports no grpc) and holds no key and no memory. It
imports nothing of the daemon outside this folder, so that the process
stays small (tests/test_layers.py checks what it loads). `socket_guard.py`
is the socket's directory rules, which the core applies before it starts
the front. gRPC is imported here and nowhere else in the daemon (but the
memvault-server remote of sync).
"""
