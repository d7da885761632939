"""The composition root: what starts memvaultd, in which order, and stops it.

`main.py` reads the configuration, builds every part (embedder, vault, sync,
note watcher, serving), wires them to each other through their declared
interfaces and runs the background drivers (`sweep_schedule.py`, the live
`config.toml` in `live_config.py`, the service manager's `notify.py`).
It may import every other room of the daemon; nothing imports it.
"""
