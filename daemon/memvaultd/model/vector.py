"""A memory's vector: float32, unit length, one row of the index's matrix."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
