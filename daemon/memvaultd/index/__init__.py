"""The in-memory index: what recall searches.

`memory_index.py` (the records beside one float32 matrix), `columns.py` (the
fields recall filters and ranks by, a column each), `ivf.py` (the inverted
file over the matrix, above 20k memories), `keyword.py` (incremental BM25),
`layer.py` (vectors, keywords, topics and session order kept in step) and
`compiled.py` (numba loops). It may import model only.
"""
