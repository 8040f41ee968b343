"""Streaming svmlight / LIBSVM reader.

The happy path is a numba parser of plain lines over the chunk's bytes (below: it takes a chunk
only when every number in it is exact in one float64 step, so the values are scikit-learn's to the
bit); any other chunk goes to scikit-learn's compiled parser
(:func:`sklearn.datasets.load_svmlight_file` on the in-memory bytes).  When that
rejects a chunk -- or when our own checks after it fail (a non-finite value,
an index beyond ``n_features``) -- the chunk is scanned again line by line in
Python.  That scan exists to give precise diagnostics (file, line, token) and
to accept what scikit-learn refuses but we allow: indices out of order within
a line are sorted, not fatal.  Files whose every line is unsorted therefore
parse at the slow path's speed (see ``benchmarks/``).

Format (http://svmlight.joachims.org/, LIBSVM): one example per line,
``<label> [qid:<int>] <index>:<value> ...  [# comment]``; indices are 1-based
unless ``zero_based=True``; ``qid`` is ignored; blank and comment-only lines
are skipped.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._config import NUMBA_FLAGS, TEXT_CHUNK_BYTES
from .._outputs import check_output, replace
from ._errors import InputFormatError
from ._io import iter_line_chunks, open_binary, strip_bom

__all__ = ["SvmlightReader", "parse_svmlight_bytes", "parse_svmlight_range", "line_aligned_ranges"]


#: Indices are int64 from the parser on (the store keeps them 64-bit when ``n_features >= 2**31``,
#: ``DatasetWriter.index_dtype``); the width ``max index + 1`` must fit int64 too.
_INDEX_LIMIT = 2**63 - 1


def _tok(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _scan(
    chunk: bytes,
    *,
    path: str,
    first_line: int,
    zero_based: bool,
    n_features: int | None,
    dtype: np.dtype,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Line-by-line parse with exact error messages; sorts unsorted rows."""
    off = 0 if zero_based else 1
    labels: list[float] = []
    indptr = [0]
    all_idx: list[int] = []
    all_val: list[float] = []
    for k, raw in enumerate(chunk.split(b"\n")):
        line = first_line + k
        toks = raw.split(b"#", 1)[0].split()
        if not toks:
            continue

        def fail(msg: str, token: bytes | None = None) -> InputFormatError:
            return InputFormatError(path, msg, line=line, token=None if token is None else _tok(token))

        if b":" in toks[0]:
            raise fail(f"line starts with {_tok(toks[0])!r}: the label is missing", toks[0])
        try:
            label = float(toks[0])
        except ValueError:
            hint = " (multilabel files are not supported)" if b"," in toks[0] else ""
            raise fail(f"label {_tok(toks[0])!r} is not a number{hint}", toks[0]) from None
        if not math.isfinite(label):
            raise fail(f"label {_tok(toks[0])!r} is not finite", toks[0])
        feats = toks[1:]
        if feats and feats[0].startswith(b"qid:"):
            feats = feats[1:]
        idx_row: list[int] = []
        val_row: list[float] = []
        for t in feats:
            i_s, sep, v_s = t.partition(b":")
            if i_s == b"qid":
                raise fail(f"token {_tok(t)!r}: qid must come right after the label", t)
            if not sep or not i_s or not v_s:
                raise fail(f"malformed token {_tok(t)!r}: expected INDEX:VALUE", t)
            try:
                idx = int(i_s)
            except ValueError:
                raise fail(f"token {_tok(t)!r}: feature index {_tok(i_s)!r} is not an integer", t) from None
            if idx < 0:
                raise fail(f"token {_tok(t)!r}: negative feature index {idx}", t)
            if idx - off >= _INDEX_LIMIT:
                raise fail(f"token {_tok(t)!r}: feature index {idx} does not fit a 64-bit index "
                           f"(at most {_INDEX_LIMIT - 1 + off}): hash the features (--hash-bits)", t)
            if idx == 0 and not zero_based:
                raise fail(
                    f"token {_tok(t)!r}: feature index 0 in a 1-based file "
                    "(pass --zero-based / zero_based=True if the file counts from 0)",
                    t,
                )
            try:
                val = float(v_s)
            except ValueError:
                raise fail(f"token {_tok(t)!r}: value {_tok(v_s)!r} is not a number", t) from None
            if not math.isfinite(val):
                raise fail(f"token {_tok(t)!r}: value {_tok(v_s)!r} is not finite", t)
            if n_features is not None and idx - off >= n_features:
                raise fail(
                    f"token {_tok(t)!r}: feature index {idx} is beyond n_features={n_features} (--n-features)",
                    t,
                )
            idx_row.append(idx - off)
            val_row.append(val)
        if idx_row:
            order = np.argsort(idx_row, kind="stable")
            srt = np.asarray(idx_row)[order]
            dup = np.flatnonzero(np.diff(srt) == 0)
            if dup.size:
                j = int(srt[dup[0]]) + off
                raise fail(f"duplicate feature index {j} in one line", str(j).encode())
            all_idx.extend(srt.tolist())
            all_val.extend(np.asarray(val_row)[order].tolist())
        labels.append(label)
        indptr.append(len(all_idx))
    width = max(all_idx, default=-1) + 1
    if n_features is not None:
        width = n_features
    X = sp.csr_matrix(
        (np.asarray(all_val, dtype=dtype), np.asarray(all_idx, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
        shape=(len(labels), width),
    )
    return X, np.asarray(labels, dtype=np.float64)


# =========================================================================== compiled happy path
#
# The plain lines of real files (``label idx:value ...``, indices increasing, decimal numbers) are
# parsed in numba over the chunk's bytes.  A number is taken only when it is exact in one step
# (Clinger's fast path: at most 2**53 as an integer mantissa and a power of ten up to 1e22, which
# float64 holds exactly), so its double is the correctly rounded one that ``float()`` (scikit-learn's
# parser) gives, then cast to the dtype as scikit-learn does.  Anything else in a chunk -- a comment,
# ``qid:``, another spelling of a number, an unsorted or repeated index, index 0 in a 1-based file,
# more digits -- makes the chunk go the old way (scikit-learn's parser, then the line scan with its
# exact errors), so what is accepted and every message are unchanged.

_TWO53 = 1 << 53
_POW10 = np.array([10.0 ** k for k in range(23)])


@njit(inline="always", **NUMBA_FLAGS)
def _blank(c: np.uint8) -> bool:
    return c == 32 or 9 <= c <= 13  # bytes.split(): space, \t \n \v \f \r


@njit(inline="always", **NUMBA_FLAGS)
def _number(buf: np.ndarray, p: int, e: int, pow10: np.ndarray) -> tuple[bool, float]:
    """``buf[p:e]`` as ``[+-]digits[.digits][(e|E)[+-]digits]`` exact in one float64 step, or ``(False, 0)``."""
    neg = False
    if p < e and (buf[p] == 43 or buf[p] == 45):
        neg = buf[p] == 45
        p += 1
    m = 0
    digits = 0
    scale = 0
    seen = False
    while p < e and 48 <= buf[p] <= 57:
        if m > _TWO53:
            return False, 0.0
        m = m * 10 + (buf[p] - 48)
        digits += 1
        p += 1
    if digits:
        seen = True
    if p < e and buf[p] == 46:
        p += 1
        while p < e and 48 <= buf[p] <= 57:
            if m > _TWO53:
                return False, 0.0
            m = m * 10 + (buf[p] - 48)
            scale -= 1
            seen = True
            p += 1
    if not seen:
        return False, 0.0
    if p < e and (buf[p] == 101 or buf[p] == 69):
        p += 1
        eneg = False
        if p < e and (buf[p] == 43 or buf[p] == 45):
            eneg = buf[p] == 45
            p += 1
        if p == e:
            return False, 0.0
        x = 0
        while p < e and 48 <= buf[p] <= 57:
            if x > 1000:
                return False, 0.0
            x = x * 10 + (buf[p] - 48)
            p += 1
        scale += -x if eneg else x
    if p != e or m > _TWO53 or scale > 22 or scale < -22:
        return False, 0.0
    v = float(m)
    v = v * pow10[scale] if scale >= 0 else v / pow10[-scale]
    return True, -v if neg else v


@njit(**NUMBA_FLAGS)
def _parse_plain(buf: np.ndarray, off: int, pow10: np.ndarray
                 ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(status, labels, indptr, indices, values)`` of plain svmlight lines; status 1: not plain."""
    n = buf.shape[0]
    cap_rows = 1
    cap_nnz = 1
    for k in range(n):
        if buf[k] == 10:
            cap_rows += 1
        elif buf[k] == 58:
            cap_nnz += 1
    labels = np.empty(cap_rows, dtype=np.float64)
    indptr = np.zeros(cap_rows + 1, dtype=np.int64)
    indices = np.empty(cap_nnz, dtype=np.int64)
    values = np.empty(cap_nnz, dtype=np.float64)
    rows = 0
    w = 0
    p = 0
    while p < n:
        q = p
        while q < n and buf[q] != 10:
            q += 1
        # the line is buf[p:q]
        a = p
        while a < q and _blank(buf[a]):
            a += 1
        if a < q:
            b = a
            while b < q and not _blank(buf[b]):
                b += 1
            ok, lab = _number(buf, a, b, pow10)
            if not ok:
                return 1, labels, indptr, indices, values
            prev = -1
            a = b
            while True:
                while a < q and _blank(buf[a]):
                    a += 1
                if a == q:
                    break
                b = a
                colon = -1
                while b < q and not _blank(buf[b]):
                    if buf[b] == 58:
                        if colon >= 0:
                            return 1, labels, indptr, indices, values
                        colon = b
                    b += 1
                if colon <= a or colon == b - 1:
                    return 1, labels, indptr, indices, values
                idx = 0
                for k in range(a, colon):
                    c = buf[k]
                    if c < 48 or c > 57 or idx > (1 << 58):
                        return 1, labels, indptr, indices, values
                    idx = idx * 10 + (c - 48)
                idx -= off
                if idx < 0 or idx <= prev:
                    return 1, labels, indptr, indices, values
                ok, v = _number(buf, colon + 1, b, pow10)
                if not ok:
                    return 1, labels, indptr, indices, values
                indices[w] = idx
                values[w] = v
                w += 1
                prev = idx
                a = b
            labels[rows] = lab
            rows += 1
            indptr[rows] = w
        p = q + 1
    return 0, labels[:rows], indptr[:rows + 1], indices[:w], values[:w]


def _compiled(chunk: bytes, zero_based: bool, n_features: int | None, dtype: np.dtype
              ) -> tuple[sp.csr_matrix, np.ndarray] | None:
    """The chunk through :func:`_parse_plain`, or None when it is not plain (or has no nonzero)."""
    status, y, indptr, indices, values = _parse_plain(np.frombuffer(chunk, dtype=np.uint8), 0 if zero_based else 1,
                                                      _POW10)
    if status or not len(indices):
        return None
    width = int(indices.max()) + 1
    if n_features is not None:
        if width > n_features:
            return None
        width = n_features
    data = values.astype(dtype)
    if not np.all(np.isfinite(data)):  # beyond float32: the old way decides
        return None
    X = sp.csr_matrix((data, indices, indptr), shape=(len(y), width))
    X.has_sorted_indices = True
    return X, y


def parse_svmlight_bytes(
    chunk: bytes,
    *,
    path: str = "<bytes>",
    first_line: int = 1,
    zero_based: bool = False,
    n_features: int | None = None,
    dtype: Any = np.float32,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Parse whole svmlight lines held in memory; ``first_line`` numbers the first one.

    Returns a canonical CSR matrix (sorted, unique indices) and float64 labels.
    Raises :class:`InputFormatError` naming ``path`` and the line for any bad input.
    """
    dtype = np.dtype(dtype)
    fast = _compiled(chunk, zero_based, n_features, dtype)
    if fast is not None:
        return fast
    try:
        from sklearn.datasets import load_svmlight_file  # here: importing scikit-learn takes a worker ~1 s

        X, y = load_svmlight_file(io.BytesIO(chunk), dtype=dtype, zero_based=zero_based)
    except Exception:
        # Rejected: the scan either explains why (and raises) or parses what
        # scikit-learn refuses but we accept (unsorted indices).
        return _scan(chunk, path=path, first_line=first_line, zero_based=zero_based, n_features=n_features, dtype=dtype)
    if (
        (n_features is not None and X.shape[1] > n_features)
        or not np.all(np.isfinite(X.data))
        or not np.all(np.isfinite(y))
        or (X.nnz and X.indices.min() < 0)
    ):
        return _scan(chunk, path=path, first_line=first_line, zero_based=zero_based, n_features=n_features, dtype=dtype)
    X = sp.csr_matrix(X)
    X.indptr = X.indptr.astype(np.int64, copy=False)
    X.indices = X.indices.astype(np.int64, copy=False)
    if n_features is not None and X.shape[1] < n_features:
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return X, y


def line_aligned_ranges(path: str | os.PathLike[str], part_bytes: int, *, boundary: bytes = b"\n"
                        ) -> list[tuple[int, int]]:
    """Cut an uncompressed file into byte ranges that start and end at line starts.

    With ``boundary`` (e.g. ``b"\n.I"``, RCV1-v2 documents) a range starts only after a newline
    that begins ``boundary``.
    """
    size = os.path.getsize(path)
    cuts = [0]
    with open(path, "rb") as f:
        pos = part_bytes
        while pos < size:
            f.seek(pos - 1)
            base, window, nxt = pos - 1, b"", size
            while True:  # the first boundary at or after pos - 1
                more = f.read(1 << 16)
                if not more:
                    break
                window += more
                k = window.find(boundary)
                if k >= 0:
                    nxt = base + k + 1
                    break
                drop = len(window) - (len(boundary) - 1)
                if drop > 0:
                    base, window = base + drop, window[drop:]
            if nxt >= size:
                break
            if nxt > cuts[-1]:
                cuts.append(nxt)
            pos = max(nxt, pos) + part_bytes
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def parse_svmlight_range(
    path: str,
    start: int,
    stop: int,
    *,
    zero_based: bool = False,
    n_features: int | None = None,
    dtype: str = "float32",
) -> dict[str, Any]:
    """Dask task: parse bytes ``[start, stop)`` of an uncompressed svmlight file.

    Pure function of its arguments.  Returns the CSR pieces, the labels and
    the number of newlines in the range; bad input is *returned* as
    ``{"error": (local_line, message, token)}`` so the caller can turn the
    range-local line number into the file's (it knows the preceding ranges).
    """
    with open(path, "rb") as f:
        f.seek(start)
        chunk = f.read(stop - start)
    if start == 0:
        chunk = strip_bom(chunk)
    try:
        X, y = parse_svmlight_bytes(chunk, path=path, first_line=1, zero_based=zero_based, n_features=n_features, dtype=dtype)
    except InputFormatError as e:
        return {"error": (e.line, e.reason, e.token), "start": start}
    return {
        "indptr": X.indptr,
        "indices": X.indices,
        "data": X.data,
        "n_cols": X.shape[1],
        "y": y,
        "n_lines": chunk.count(b"\n"),
        "n_bytes": stop - start,
    }


def count_lines_before(path: str | os.PathLike[str], offset: int) -> int:
    """Newlines in the first ``offset`` bytes of an uncompressed file."""
    n = 0
    with open(path, "rb") as f:
        left = offset
        while left > 0:
            buf = f.read(min(left, 16 << 20))
            if not buf:
                break
            n += buf.count(b"\n")
            left -= len(buf)
    return n


class SvmlightReader:
    """Stream an svmlight / LIBSVM file as ``(csr_chunk, y_chunk)`` pieces.

    Parameters
    ----------
    path : str or Path
        The file; gzip, bz2 and xz compression are detected from the content.
    zero_based : bool, default=False
        Indices count from 0 (default: from 1, as svmlight and LIBSVM write them).
    n_features : int, default=None
        Column count.  Left out, it is the largest index seen; given, an index
        beyond it is an error naming the line.
    dtype : {"float32", "float64"}, default="float32"
        Value type.
    chunk_bytes : int, default=16 MiB
        Text parsed at once; memory stays proportional to it.
    """

    format = "svmlight"
    default_layout = "csr"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        zero_based: bool = False,
        n_features: int | None = None,
        dtype: Any = "float32",
        chunk_bytes: int = TEXT_CHUNK_BYTES,
    ) -> None:
        self.path = str(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"{self.path}: no such file")
        self.size_bytes = os.path.getsize(self.path)
        if self.size_bytes == 0:
            raise InputFormatError(self.path, "the file is empty")
        self.zero_based = bool(zero_based)
        self.n_features = n_features
        self.n_samples: int | None = None
        self.dtype = np.dtype(dtype)
        self.chunk_bytes = int(chunk_bytes)
        self.bytes_read = 0
        with open_binary(self.path) as f:
            self.compression = getattr(f, "compression", None)
        self.params = {"zero_based": self.zero_based}

    def __iter__(self) -> Iterator[tuple[sp.csr_matrix, np.ndarray]]:
        n_rows = 0
        with open_binary(self.path) as f:
            for chunk, first_line in iter_line_chunks(f, self.chunk_bytes, path=self.path):
                self.bytes_read = f.raw_tell()
                X, y = parse_svmlight_bytes(
                    chunk,
                    path=self.path,
                    first_line=first_line,
                    zero_based=self.zero_based,
                    n_features=self.n_features,
                    dtype=self.dtype,
                )
                if X.shape[0]:
                    n_rows += X.shape[0]
                    yield X, y
        if n_rows == 0:
            raise InputFormatError(self.path, "no examples: the file holds only blank or comment lines")
        self.n_samples = n_rows


def _format_rows(X: sp.csr_matrix, y: np.ndarray, *, zero_based: bool) -> bytes:
    """svmlight text of a CSR block: integral labels as integers, values with just enough digits.

    ``%.9g`` round-trips float32 exactly and ``%.17g`` float64 (shorter than
    scikit-learn's fixed ``%.16g`` for float32 data, like real corpora's files).
    """
    vfmt = "%.9g" if X.dtype == np.float32 else "%.17g"
    off = 0 if zero_based else 1
    integral = bool(np.all(y == np.round(y)))
    labels = [str(int(v)) for v in y.tolist()] if integral else [repr(float(v)) for v in y.tolist()]
    indices = (X.indices.astype(np.int64) + off).tolist()
    values = X.data.tolist()
    indptr = X.indptr.tolist()
    pair = f"%d:{vfmt}"
    out = []
    for r, lab in enumerate(labels):
        a, b = indptr[r], indptr[r + 1]
        feats = " ".join([pair % iv for iv in zip(indices[a:b], values[a:b])])
        out.append(f"{lab} {feats}\n" if feats else f"{lab}\n")
    return "".join(out).encode("ascii")


def write_svmlight(
    path: str | os.PathLike[str],
    parts: Any,
    *,
    zero_based: bool = False,
    overwrite: bool = False,
) -> dict[str, int]:
    """Write ``(X, y)`` pieces as one svmlight file, atomically (temporary name, then rename).

    Indices are 1-based unless ``zero_based``; values use ``%.9g`` for float32
    and ``%.17g`` otherwise (both exact); integral labels are written as integers.
    Returns ``{"n_samples", "n_features", "nnz", "bytes"}``.
    """
    path = os.fspath(path)
    check_output(path, "svmlight", overwrite=overwrite)  # replaces only a previous svmlight file
    tmp = f"{path}.partial-{os.getpid()}"
    n = nnz = width = 0
    try:
        with open(tmp, "wb") as f:
            for X, y in parts:
                X = sp.csr_matrix(X)
                X.sort_indices()
                y = np.asarray(y, dtype=np.float64).reshape(-1)
                f.write(_format_rows(X, y, zero_based=zero_based))
                n += X.shape[0]
                nnz += X.nnz
                width = max(width, X.shape[1])
        replace(tmp, path, "svmlight", overwrite=overwrite)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {"n_samples": n, "n_features": width, "nnz": nnz, "bytes": os.path.getsize(path)}
