# Types of the compiled kernels (platform/operators/_kernels.c).
import numpy as np

def consolidate(
    cols: np.ndarray, counts: np.ndarray, k: int, n: int, out_cols: np.ndarray, out_counts: np.ndarray
) -> int: ...
def join_small(
    probe: np.ndarray,
    kp: int,
    n: int,
    p_idx: np.ndarray,
    keys: np.ndarray,
    m: int,
    extra: np.ndarray,
    ke: int,
    probe_counts: np.ndarray,
    rel_counts: np.ndarray,
    out_cols: np.ndarray,
    out_counts: np.ndarray,
) -> int: ...
def count_merge(
    pk: np.ndarray,
    pn: np.ndarray,
    n: int,
    dk: np.ndarray,
    dn: np.ndarray,
    nd: int,
    out_k: np.ndarray,
    out_n: np.ndarray,
    ch_k: np.ndarray,
    ch_s: np.ndarray,
) -> tuple[int, int] | None: ...
