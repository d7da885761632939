"""Upkeep: the forgetting sweep and consolidation (docs/upkeep.md).

Pure decisions over memories; the vault turns them into ordinary
operations (forget, put, update) through the log, so they are durable
before they are acknowledged and sync like any write. It may import index
and model; the background schedule that runs the sweep is the composition
root's (`app/sweep_schedule.py`).
"""
