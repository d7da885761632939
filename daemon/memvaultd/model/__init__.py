"""Plain values and their rules: a memory, an operation, what callers ask.

`memory.py` (the record and its limits), `operations.py` (what the log and
the remote carry), `commands.py` (a request in the domain's own terms),
`drafts.py` (validating what callers send), `scopes.py` (whose a memory
is, and what a caller may reach), `secrets.py` (credentials in a
text), `id_prefix.py` (a memory named by the first characters of its id),
`hlc.py` (the hybrid logical clock), `stamps.py` (which operation last
wrote each field of a memory), `heat.py` (how warm a memory is) and
`vector.py`. It imports only the base package and `crypto` (for ids):
every room may import it.
"""
