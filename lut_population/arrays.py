"""Array type used throughout the package."""

from __future__ import annotations

from typing import Any

import numpy as np

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
"""A float64 numpy array of any shape."""
