"""Feature hashing: feature indices (and RCV1 tokens) into ``2**bits`` columns.

The hash is MurmurHash3 (x86, 32-bit, seed 0), the one scikit-learn's
``HashingVectorizer``/``FeatureHasher`` and Vowpal Wabbit use:

* a **token** (a byte string, e.g. an RCV1 stem) goes to column ``|h(token)| mod 2**bits``,
  ``h`` the signed 32-bit hash of its UTF-8 bytes -- the column scikit-learn's
  ``HashingVectorizer(n_features=2**bits, alternate_sign=False)`` gives the same token;
* an integer **feature index** ``i`` *as written in the file* (svmlight, 1-based unless
  ``zero_based``; RCV1 vector files' term ids) goes to ``|h(b)| mod 2**bits``, ``b`` the 8
  little-endian bytes of ``i`` as a signed 64-bit integer.

Values of features that land in the same column of a row are added (no alternating sign, as
in Vowpal Wabbit).  A store records ``hash_bits`` and the hash in its ``params``; the mapping
cannot be inverted, so a hashed store keeps no vocabulary.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._config import NUMBA_FLAGS

__all__ = ["HASH", "MAX_HASH_BITS", "check_hash_bits", "hash_index", "hash_token", "hash_columns", "token_column"]

HASH = "murmurhash3_x86_32, seed 0; column = |h| mod 2**bits; int indices hashed as 8 little-endian bytes"
MAX_HASH_BITS = 31


def check_hash_bits(bits: object) -> int:
    """``bits`` as an int in 1..31, or a ValueError naming the parameter."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= int(bits) <= MAX_HASH_BITS:
        raise ValueError(f"hash_bits (--hash-bits) must be an integer in 1..{MAX_HASH_BITS}, got {bits!r}")
    return int(bits)


@njit(inline="always", **NUMBA_FLAGS)
def _rotl(x: np.uint32, r: int) -> np.uint32:
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@njit(inline="always", **NUMBA_FLAGS)
def _mix_block(h: np.uint32, k: np.uint32) -> np.uint32:
    k = np.uint32(k * np.uint32(0xCC9E2D51))
    k = _rotl(k, 15)
    k = np.uint32(k * np.uint32(0x1B873593))
    h = np.uint32(h ^ k)
    h = _rotl(h, 13)
    return np.uint32(h * np.uint32(5) + np.uint32(0xE6546B64))


@njit(inline="always", **NUMBA_FLAGS)
def _fmix(h: np.uint32) -> np.uint32:
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    return np.uint32(h ^ (h >> np.uint32(16)))


@njit(**NUMBA_FLAGS)
def _hash_int64(keys: np.ndarray, mask: np.int64, out: np.ndarray) -> None:
    for i in range(keys.shape[0]):
        u = np.uint64(keys[i])
        h = _mix_block(np.uint32(0), np.uint32(u & np.uint64(0xFFFFFFFF)))
        h = _mix_block(h, np.uint32(u >> np.uint64(32)))
        h = _fmix(np.uint32(h ^ np.uint32(8)))
        s = np.int64(h) - np.int64(1 << 32) if h >= np.uint32(1 << 31) else np.int64(h)
        out[i] = (s if s >= 0 else -s) & mask


@njit(inline="always", **NUMBA_FLAGS)
def token_column(buf: np.ndarray, start: int, stop: int, mask: np.int64) -> np.int64:
    """The column of the token ``buf[start:stop]`` (uint8 bytes): :func:`hash_token` in compiled code."""
    h = np.uint32(0)
    n = stop - start
    p = start
    for _ in range(n // 4):
        k = np.uint32(np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << np.uint32(8))
                      | (np.uint32(buf[p + 2]) << np.uint32(16)) | (np.uint32(buf[p + 3]) << np.uint32(24)))
        h = _mix_block(h, k)
        p += 4
    r = n & 3
    if r:
        k = np.uint32(0)
        if r == 3:
            k = np.uint32(k ^ (np.uint32(buf[p + 2]) << np.uint32(16)))
        if r >= 2:
            k = np.uint32(k ^ (np.uint32(buf[p + 1]) << np.uint32(8)))
        k = np.uint32(k ^ np.uint32(buf[p]))
        k = np.uint32(k * np.uint32(0xCC9E2D51))
        k = _rotl(k, 15)
        k = np.uint32(k * np.uint32(0x1B873593))
        h = np.uint32(h ^ k)
    h = _fmix(np.uint32(h ^ np.uint32(n)))
    s = np.int64(h) - np.int64(1 << 32) if h >= np.uint32(1 << 31) else np.int64(h)
    return (s if s >= 0 else -s) & mask


def hash_index(indices: np.ndarray, bits: int) -> np.ndarray:
    """The columns of integer feature indices (module docstring)."""
    keys = np.ascontiguousarray(indices, dtype=np.int64)
    out = np.empty(keys.shape[0], dtype=np.int64)
    _hash_int64(keys, np.int64((1 << bits) - 1), out)
    return out


def hash_token(token: bytes, bits: int) -> int:
    """The column of one token (its UTF-8 bytes), as scikit-learn's HashingVectorizer maps it."""
    from sklearn.utils import murmurhash3_32

    return abs(int(murmurhash3_32(token, seed=0))) & ((1 << bits) - 1)


def hash_columns(X: sp.csr_matrix, bits: int, offset: int = 0) -> sp.csr_matrix:
    """CSR rows with every column index ``j`` hashed as the feature index ``j + offset`` (1 for a
    1-based file, whose reader counts columns from 0); values that meet in a column of a row are
    added and each row's columns come out sorted."""
    X = sp.csr_matrix(X)
    cols = hash_index(X.indices.astype(np.int64) + offset, bits)
    # copies: sum_duplicates works in place, and the input's arrays stay the caller's
    out = sp.csr_matrix((X.data.copy(), cols, X.indptr.copy()), shape=(X.shape[0], 1 << bits))
    out.sum_duplicates()  # adds the collisions and sorts each row's columns
    out.indices = out.indices.astype(np.int32 if bits < 31 else np.int64, copy=False)
    return out
