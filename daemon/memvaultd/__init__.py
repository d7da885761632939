"""memvaultd: the per-user memvault daemon.

Its rooms, top floor first; a module imports only from its own room and the
rooms below it (tests/test_layers.py holds the floors):

    app/                 the composition root: start, stop, background drivers
    serve/, notes/       gRPC (only in serve/front/, a process of its own) and
                         watched note folders
    vault/, sync/        the domain service and the sync worker, which meet
                         only through sync/vault_side.py's protocols
    config/              settings from config.toml
    recall/, upkeep/,    query planning and ranking, the sweep and
    embedding/           consolidation rules, the model
    index/, storage/     vectors and keywords in memory; sealed bytes on disk
    model/               plain values and their rules
    crypto/              sealing and key derivation

docs/architecture.md walks a remember, a recall, a start and a sync through them.
"""

__version__ = "0.1.0"
