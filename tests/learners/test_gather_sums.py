"""``gather_sums`` (learners/_simd.py, LLVM IR): every lane the sequential sum over the live slots in order."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from distlearn.learners._budget import _gathered_sums
from distlearn.learners._simd import GATHER_ROWS


@njit
def _call(A, idx, alive, n, g, offs, lo, hi, out):
    _gathered_sums(A, idx, alive, n, g, offs, lo, hi, out)


def _reference(A, idx, alive, n, g, offs, lo, hi):
    """The per-round loop: out[r, k] = sum over live i < n in order of A[i, k] * g[offs[r] + idx[i]], from +0.0."""
    K = A.shape[1]
    out = np.zeros((hi - lo, K))
    for r in range(lo, hi):
        for k in range(K):
            s = 0.0
            for i in range(n):
                if alive[i]:
                    s = s + float(A[i, k]) * float(g[offs[r] + idx[i]])
            out[r - lo, k] = s
    return out


# K across the column groups (8 lanes; the last group 2 lanes wide when it holds at most 2 columns: K = 17..26)
@pytest.mark.parametrize("K", [1, 3, 8, 9, 16, 17, 20, 24, 25, 26, 27, 32, 33, 45])
def test_gathered_sums_equal_the_sequential_sum_bit_for_bit(K):
    rs = np.random.default_rng(K)
    n, pool, rows = 37, 90, GATHER_ROWS + 3  # more rows than one pass holds
    A = rs.normal(size=(n + 5, K)) * np.exp(rs.normal(scale=8, size=(n + 5, K)))  # wide exponents: roundings matter
    idx = np.sort(rs.choice(pool, size=n + 5, replace=False))
    alive = rs.random(n + 5) < 0.8
    A[~alive] = np.nan  # a dead slot is skipped, not multiplied
    g = rs.normal(size=rows * pool)
    offs = np.arange(rows) * pool
    out = np.full((rows, K), 7.0)
    _call(A, idx, alive, n, g, offs, 1, rows, out.reshape(-1))
    ref = _reference(A, idx, alive, n, g, offs, 1, rows)
    assert out[0].tolist() == [7.0] * K  # rows outside [lo, hi) untouched
    assert np.array_equal(out[1:].view(np.int64), ref.view(np.int64))  # the same bits
