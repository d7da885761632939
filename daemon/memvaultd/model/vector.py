"""A memory's vector: float32, unit length, one row of the index's matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def matrix_begun_by(rows: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """The C-contiguous 2-D matrix whose first rows `rows` are (a view of its
    front, as a body read with room leaves them), or None."""
    whole = rows.base
    if (not isinstance(whole, np.ndarray) or whole.ndim != 2 or len(whole) < len(rows)
            or whole.shape[1:] != rows.shape[1:] or whole.dtype != rows.dtype
            or not whole.flags.c_contiguous
            or rows.__array_interface__["data"][0] != whole.__array_interface__["data"][0]):
        return None
    return whole
