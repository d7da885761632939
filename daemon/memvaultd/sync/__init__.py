"""End-to-end encrypted sync: the version chain on a remote that sees only ciphertext."""
