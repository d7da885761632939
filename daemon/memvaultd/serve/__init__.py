"""Serving the `memvault.v1.Memory` API.

`front/` is the front process that owns the public socket: its gate,
gRPC, health and reflection; the only room of the daemon that speaks gRPC.
The rest is the core's side, which imports no grpc: the endpoint that
starts the front and answers it (`endpoint.py`), the link's core end
(`link_server.py`), the dispatch that runs each call on the loop or a
worker and turns errors into status codes (`dispatch.py`), and the
servicer that turns each request into a call on the vault and back
(`servicer.py`). It may import the vault, sync, upkeep, recall and model
rooms; the vault never imports it.
"""
