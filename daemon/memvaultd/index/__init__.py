"""The in-memory index: what recall searches.

`memory_index.py` (the records beside one matrix: float32, float16 from
20k rows, `half.py`), `columns.py` (the fields recall filters and ranks by,
a column each), `ivf.py` (the inverted file over the matrix, above 20k
memories), `keyword.py` (incremental BM25),
`layer.py` (vectors, keywords, topics and session order kept in step) and
`loops.pyx` (the search's loops in C, built at install: `kernels.h`). It
may import model only.
"""
