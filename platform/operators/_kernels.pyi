# Types of the compiled kernels (platform/operators/_kernels.c).
import numpy as np

def consolidate(
    cols: np.ndarray, counts: np.ndarray, k: int, n: int, out_cols: np.ndarray, out_counts: np.ndarray
) -> int: ...
