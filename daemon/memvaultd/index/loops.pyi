# Types of the compiled module built from loops.pyx (which documents it).
from typing import Any

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.int64]
Matrix = npt.NDArray[np.float32]

VNNI: bool

def probed_lists(codes: npt.NDArray[np.int8], order: Rows, starts: Rows, ends: Rows,
                 query: Matrix, *, widest: bool = True) -> tuple[Rows, Matrix]: ...
def ivf_search(centroids: Matrix, offsets: Rows, codes: npt.NDArray[np.int8], order: Rows,
               tail_codes: npt.NDArray[np.int8], tail_rows: Rows, scale: Matrix,
               query: Matrix, probe: int, matrix: Matrix | npt.NDArray[np.float16] | None,
               best: int, *, widest: bool = True) -> tuple[Rows, Matrix, Rows, Matrix]: ...
def exact(matrix: Matrix, rows: Rows, query: Matrix) -> Matrix: ...
def half_products(bits: npt.NDArray[np.uint16], rows: Rows, query: Matrix) -> Matrix: ...
def half_widen(bits: npt.NDArray[np.uint16], rows: Rows, out: Matrix) -> None: ...
# Term counts: uint8, uint16, uint32 or uint64 (`keyword._narrowest`).
Counts = npt.NDArray[np.unsignedinteger[Any]]

# Document lengths in terms, 0 for a removed document: uint16 or uint32.
Lengths = npt.NDArray[np.unsignedinteger[Any]]

def bm25_sums(ords: npt.NDArray[np.int32], tfs: Counts, bounds: Rows,
              idfs: npt.NDArray[np.float64], lengths: Lengths, average: float,
              ordinal_count: int, k1: float, b: float
              ) -> tuple[Rows, npt.NDArray[np.float64]]: ...
def bm25_at(wanted: Rows, ords: npt.NDArray[np.int32], tfs: Counts, bounds: Rows,
            idfs: npt.NDArray[np.float64], lengths: Lengths, average: float, k1: float,
            b: float) -> npt.NDArray[np.float64]: ...
def term_ids(hashes: npt.NDArray[np.int64], keys: list[int]) -> list[int]: ...
def best_first(scores: npt.NDArray[np.float64], pool: Rows, window: int) -> Rows: ...
