"""memvaultd: the per-user memvault daemon."""

__version__ = "0.1.0"
