"""memvault-server: the self-hosted sync endpoint. It stores opaque ciphertext
objects and never holds a key: nothing in this package can decrypt."""

__version__ = "0.1.0"
