"""Recall: the pure logic that picks and orders memories for a query.

`engine.py` runs one recall over a layer of the index: the channels and their
fusion (`hybrid.py`, `columnar.py`), what the request may see
(`visibility.py`, `filter/`), and the final order (`ranking.py`). No I/O and
no locks: the vault feeds it decrypted records and vectors. It may import
index and model.
"""
