"""Serving the `memvault.v1.Memory` API: the only room that speaks gRPC.

`front/` is the front process that owns the public socket (its gate, grpc,
reflection); the rest is the core's side: the link it answers on, and the
servicer that turns each request into a call on the vault and back. It may
import the vault, sync, upkeep, recall and model rooms; the vault never
imports it.
"""
