"""The distlearn data set: a zarr v3 group on disk, dense or CSR, in row blocks.

Layout (format version 1)::

    STORE.zarr/                     group; attrs["distlearn"] = metadata (below)
        X                           dense: array (n_samples, n_features), chunks (block_rows, n_features)
        X/                          CSR: group in the anndata encoding
            attrs: encoding-type = "csr_matrix", encoding-version = "0.1.0", shape = [n, d]
            data      (nnz,)        float32|float64, chunks of NNZ_CHUNK elements
            indices   (nnz,)        int32 (int64 when d >= 2**31), sorted within each row
            indptr    (n + 1,)      int64, chunks (block_rows,)
        y           (n_samples,)    float64 labels (integral labels are returned as int64)
        block_index (n_blocks+1, 2) int64: first row and first stored value of every block

The metadata attribute records ``format_version``, ``layout``, ``n_samples``,
``n_features``, ``nnz``, ``dtype``, ``block_rows``, ``n_blocks``, ``classes``
and ``class_counts``, ``label_kind``, ``source``, ``params`` (how the data was
made), ``codec`` (the compression of its arrays, see :data:`CODECS`; stores
written before it was recorded have none and were written with zarr's default,
``zstd-0``; every array's own ``zarr.json`` names its codecs, which is what
reading follows, so a store of any codec reads the same) and ``complete``.

Any block is read from its own chunks and two entries of ``block_index`` --
nothing else -- so many processes can stream different blocks of one store at
once.  Writing is atomic: the store is built under a hidden temporary name in
the same directory, marked complete, and renamed into place only when whole;
a writer that fails (or is killed) never leaves anything that
:func:`open_dataset` accepts.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import socket
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
import zarr

from .._version import __version__
from .._config import MAX_CLASSES, NNZ_CHUNK, STORE_FORMAT_VERSION, default_block_rows

__all__ = [
    "Block",
    "Dataset",
    "DatasetView",
    "DatasetWriter",
    "StoreError",
    "create_dataset",
    "open_dataset",
    "write_dataset",
]

LAYOUTS = ("dense", "csr")

#: The compressions a store's arrays can be written with (``DatasetWriter(codec=)``): ``none``;
#: ``zstd-L`` (zstd at level L, 0 = zstd's default, 3); ``blosc-lz4`` / ``blosc-zstd`` (Blosc with
#: byte shuffle: the bytes of the values grouped by significance before LZ4 or zstd).
CODECS = ("none", "zstd-0", "zstd-1", "zstd-3", "zstd-9", "blosc-lz4", "blosc-zstd")

#: The codec of new stores.  Chosen by ``benchmarks/bench_codecs.py`` on the 800,000-row RCV1-like
#: corpus (benchmarks/README.md): read+decode speed of an epoch against the size on disk.
DEFAULT_CODEC = "blosc-lz4"


def codec_compressors(codec: str) -> Any:
    """The zarr ``compressors=`` of a codec name of :data:`CODECS` (``None``: no compression)."""
    from zarr.codecs import BloscCodec, ZstdCodec

    if codec == "none":
        return None
    if codec.startswith("zstd-") and codec[5:].isdigit():
        return [ZstdCodec(level=int(codec[5:]))]
    if codec in ("blosc-lz4", "blosc-zstd"):
        return [BloscCodec(cname=codec[6:], clevel=5, shuffle="shuffle")]
    raise ValueError(f"codec must be one of {', '.join(CODECS)} (or zstd-LEVEL); got {codec!r}")


def array_codec(array: Any) -> str:
    """The codec name of a stored zarr array, read from its metadata (e.g. ``"zstd-0"``, ``"none"``)."""
    names = []
    for c in getattr(array, "compressors", ()) or ():
        name = type(c).__name__.lower().replace("codec", "")
        if name == "zstd":
            names.append(f"zstd-{int(getattr(c, 'level', 0))}")
        elif name == "blosc":
            cname = getattr(c, "cname", "")
            names.append(f"blosc-{getattr(cname, 'value', cname)}")
        else:
            names.append(name)
    return "+".join(names) or "none"
_DTYPES = {"float32": np.float32, "float64": np.float64}
_PARTIAL = ".partial-"


#: This machine, in the names of the temporary directories of unfinished writes (with the writer's pid).
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def remove_stale_partials(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary directories ``.NAME.partial-HOST-PID-*`` that a killed write to ``path``
    left behind: those written on this machine by a process that no longer runs.  A write still
    running, or one from another machine (which this one cannot check), is left alone."""
    p = Path(path)
    gone = []
    for d in p.parent.glob(f".{p.name}{_PARTIAL}*"):
        parts = d.name[len(f".{p.name}{_PARTIAL}"):].split("-")
        if len(parts) != 3 or parts[0] != _HOST or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            continue  # the writer still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # a live process of another user
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    return gone


class StoreError(ValueError):
    """A store is missing, incomplete, of another format, or inconsistent."""


class Block(NamedTuple):
    """One row block of a data set.

    ``X`` is a dense ``ndarray`` or a ``scipy.sparse.csr_matrix`` (sorted
    indices), ``y`` the labels and ``first_row`` the global index of the
    block's first row.
    """

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    first_row: int


def _check_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.name not in _DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {dt.name!r}")
    return dt


# --------------------------------------------------------------------------- writing


class _ChunkedAppender:
    """Append to a 1-D zarr array, writing only whole chunks until ``close``.

    Whole-chunk writes never read a chunk back, so appending costs one
    compressed write per chunk whatever the sizes of the appended pieces.
    """

    def __init__(self, array: zarr.Array, chunk: int) -> None:
        self.array = array
        self.chunk = chunk
        self.written = 0
        self._pending: list[np.ndarray] = []
        self._n_pending = 0

    def append(self, values: np.ndarray) -> None:
        if values.size:
            self._pending.append(values)
            self._n_pending += values.size
        if self._n_pending >= self.chunk:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        if not self._n_pending:
            return
        buf = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        n = buf.size if final else (buf.size // self.chunk) * self.chunk
        if n:
            stop = self.written + n
            self.array.resize((stop,))
            self.array[self.written : stop] = buf[:n]
            self.written = stop
        rest = buf[n:]
        self._pending = [rest] if rest.size else []
        self._n_pending = rest.size

    def close(self) -> int:
        self._flush(final=True)
        return self.written


def _put(group: zarr.Group, name: str, v: np.ndarray, chunk: int) -> None:
    chunks = (min(chunk, max(len(v), 1)),) + v.shape[1:]
    if v.dtype.kind == "U":  # variable-length UTF-8, the string type zarr v3 specifies
        a = group.create_array(name, shape=v.shape, chunks=chunks, dtype=str)
        if len(v):
            a[:] = v
    else:
        group.create_array(name, data=v, chunks=chunks)


class DatasetWriter:
    """Write a data set to a zarr store, block by block, in constant memory.

    Rows are appended in pieces of any size with :meth:`append`; they are
    re-cut into blocks of ``block_rows`` rows.  :meth:`close` finishes the
    store and moves it into place; :meth:`abort` (or any exception inside a
    ``with`` block) deletes everything written.

    Parameters
    ----------
    path : str or Path
        Where the store goes (conventionally ``*.zarr``).
    layout : {"csr", "dense"}, default="csr"
        Storage of ``X``.
    n_features : int, default=None
        Number of columns.  Required for ``layout="dense"``; for CSR it may be
        left out and is then one more than the largest index seen.  When it is
        given, a row with an index beyond it is an error.
    dtype : {"float32", "float64"}, default="float32"
        Storage type of the values.
    block_rows : int, default=None
        Rows per block; by default about 16 MiB of dense values, or 16,384 rows for CSR.
    source : str, default=""
        Where the data came from (file name, generator).
    params : dict, default=None
        JSON-serialisable creation parameters, stored in the metadata.
    overwrite : bool, default=False
        Replace an existing store at ``path`` (only once the new one is whole).
    codec : str, default=None
        The compression of the arrays, one of :data:`CODECS` (default :data:`DEFAULT_CODEC`);
        recorded in the metadata as ``codec``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        layout: str = "csr",
        n_features: int | None = None,
        dtype: Any = "float32",
        block_rows: int | None = None,
        source: str = "",
        params: dict[str, Any] | None = None,
        overwrite: bool = False,
        nnz_chunk: int = NNZ_CHUNK,
        codec: str | None = None,
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}; got {layout!r}")
        if n_features is not None and (not isinstance(n_features, (int, np.integer)) or n_features < 1):
            raise ValueError(f"n_features must be a positive int; got {n_features!r}")
        if layout == "dense" and n_features is None:
            raise ValueError("a dense store needs n_features up front")
        if block_rows is None:
            block_rows = default_block_rows(n_features, layout)
        if not isinstance(block_rows, (int, np.integer)) or block_rows < 1:
            raise ValueError(f"block_rows must be a positive int; got {block_rows!r}")
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise FileExistsError(f"{self.path} already exists; pass overwrite=True (--overwrite) to replace it")
        self.layout = layout
        self.n_features = None if n_features is None else int(n_features)
        self.dtype = _check_dtype(dtype)
        self.block_rows = int(block_rows)
        self.source = source
        self.params = dict(params or {})
        self.overwrite = overwrite
        self.index_dtype = np.dtype(np.int64 if (n_features or 0) >= 2**31 else np.int32)
        self.codec = DEFAULT_CODEC if codec is None else str(codec)
        comp = codec_compressors(self.codec)

        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_partials(self.path)
        self._tmp = self.path.parent / f".{self.path.name}{_PARTIAL}{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._group = zarr.open_group(store=str(self._tmp), mode="w-")
        self._closed = False

        self._n_rows = 0  # rows flushed into blocks
        self._nnz = 0  # stored values flushed
        self._max_index = -1
        self._label_counts: dict[float, int] | None = {}
        self._label_integral = True
        self._block_index: list[tuple[int, int]] = [(0, 0)]
        self._pending: list[tuple[Any, np.ndarray]] = []
        self._pending_offset = 0
        self._n_pending = 0
        #: Names of the label values (``{"0": "CCAT", ...}``), stored in the metadata when set.
        self.label_names: dict[str, str] | None = None

        g = self._group
        self._y = g.create_array("y", shape=(0,), chunks=(self.block_rows,), dtype="float64", compressors=comp)
        if layout == "dense":
            self._X = g.create_array(
                "X", shape=(0, self.n_features), chunks=(self.block_rows, self.n_features), dtype=self.dtype,
                compressors=comp,
            )
        else:
            xg = g.create_group("X")
            self._xgroup = xg
            self._data = _ChunkedAppender(
                xg.create_array("data", shape=(0,), chunks=(nnz_chunk,), dtype=self.dtype, compressors=comp),
                nnz_chunk,
            )
            self._indices = _ChunkedAppender(
                xg.create_array("indices", shape=(0,), chunks=(nnz_chunk,), dtype=self.index_dtype,
                                compressors=comp),
                nnz_chunk,
            )
            self._indptr = _ChunkedAppender(
                xg.create_array("indptr", shape=(0,), chunks=(self.block_rows,), dtype="int64", compressors=comp),
                self.block_rows,
            )
            self._indptr.append(np.zeros(1, dtype=np.int64))

    # -- context manager: abort on any exception, KeyboardInterrupt included
    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()

    @property
    def n_rows(self) -> int:
        """Rows appended so far (flushed or pending)."""
        return self._n_rows + self._n_pending

    def append(self, X: Any, y: Any) -> None:
        """Append rows: ``X`` dense 2-D array or scipy sparse matrix, ``y`` labels."""
        if self._closed:
            raise RuntimeError("writer is closed")
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if sp.issparse(X):
            X = sp.csr_matrix(X)
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D; got shape {X.shape}")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
        if X.shape[0] == 0:
            return
        if self.n_features is not None and X.shape[1] > self.n_features and not sp.issparse(X):
            raise ValueError(f"X has {X.shape[1]} columns but the store has n_features={self.n_features}")
        self._pending.append((X, y))
        self._n_pending += X.shape[0]
        while self._n_pending >= self.block_rows:
            self._flush_block(self.block_rows)

    def _take(self, n: int) -> tuple[list[Any], np.ndarray]:
        # Pending pieces are consumed through an offset into the first one:
        # slicing off only the rows taken keeps a large append linear in its
        # size (re-slicing "the rest" at every block would be quadratic).
        parts, ys, got = [], [], 0
        while got < n:
            X, y = self._pending[0]
            off = self._pending_offset
            k = min(n - got, X.shape[0] - off)
            parts.append(X[off : off + k])
            ys.append(y[off : off + k])
            if off + k == X.shape[0]:
                self._pending.pop(0)
                self._pending_offset = 0
            else:
                self._pending_offset = off + k
            got += k
        self._n_pending -= n
        return parts, np.concatenate(ys)

    def _flush_block(self, n: int) -> None:
        parts, y = self._take(n)
        first = self._n_rows
        if not np.all(np.isfinite(y)):
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise ValueError(f"row {first + bad}: label {y[bad]} is not finite")
        self._count_labels(y)
        if self.layout == "dense":
            d = self.n_features
            blocks = []
            for p in parts:
                if sp.issparse(p):
                    if p.shape[1] > d:
                        if p.nnz and p.indices.max() >= d:
                            raise ValueError(
                                f"block at row {first}: feature index {int(p.indices.max())} "
                                f"is beyond n_features={d}"
                            )
                        p = p[:, :d]
                    p = p.toarray()
                if p.shape[1] < d:  # narrower input: pad with zero columns
                    p = np.pad(p, ((0, 0), (0, d - p.shape[1])))
                blocks.append(np.asarray(p, dtype=self.dtype))
            Xb = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
            if not np.all(np.isfinite(Xb)):
                r, c = np.argwhere(~np.isfinite(Xb))[0]
                raise ValueError(f"row {first + r}, column {c}: value {Xb[r, c]} is not finite")
            stop = first + n
            self._X.resize((stop, d))
            self._X[first:stop] = Xb
            self._nnz += int(np.count_nonzero(Xb))
        else:
            parts = [sp.csr_matrix(p) for p in parts]
            if len(parts) > 1:
                # pieces of one file may differ in width (the largest index seen so far)
                width = max(p.shape[1] for p in parts)
                parts = [p if p.shape[1] == width else sp.csr_matrix((p.data, p.indices, p.indptr), shape=(p.shape[0], width)) for p in parts]
                Xb = sp.vstack(parts, format="csr")
            else:
                Xb = parts[0]
            self._append_csr(Xb, first)
        self._y.resize((first + n,))
        self._y[first : first + n] = y
        self._n_rows += n
        self._block_index.append((self._n_rows, self._nnz))

    def _append_csr(self, Xb: sp.csr_matrix, first: int) -> None:
        Xb.sort_indices()
        indptr = Xb.indptr.astype(np.int64)
        indices = Xb.indices
        data = np.asarray(Xb.data, dtype=self.dtype)
        if indices.size:
            if indices.min() < 0:
                raise ValueError(f"block at row {first}: negative feature index")
            # duplicates: equal neighbours that are not separated by a row start
            same = np.diff(indices) == 0
            if same.any():
                row_of = np.repeat(np.arange(Xb.shape[0]), np.diff(indptr))
                dup = np.flatnonzero(same & (row_of[1:] == row_of[:-1]))
                if dup.size:
                    r = int(row_of[dup[0]])
                    raise ValueError(f"row {first + r}: duplicate feature index {int(indices[dup[0]])}")
            mx = int(indices.max())
            if self.n_features is not None and mx >= self.n_features:
                row_of = np.repeat(np.arange(Xb.shape[0]), np.diff(indptr))
                r = int(row_of[np.flatnonzero(indices >= self.n_features)[0]])
                raise ValueError(
                    f"row {first + r}: feature index {mx} is beyond n_features={self.n_features}"
                )
            self._max_index = max(self._max_index, mx)
            if not np.all(np.isfinite(data)):
                row_of = np.repeat(np.arange(Xb.shape[0]), np.diff(indptr))
                k = int(np.flatnonzero(~np.isfinite(data))[0])
                raise ValueError(f"row {first + int(row_of[k])}: value {data[k]} is not finite")
        self._data.append(data)
        self._indices.append(indices.astype(self.index_dtype, copy=False))
        self._indptr.append(indptr[1:] + self._nnz)
        self._nnz += int(indptr[-1])

    def _count_labels(self, y: np.ndarray) -> None:
        if self._label_integral and not np.all(y == np.round(y)):
            self._label_integral = False
        if self._label_counts is None:
            return
        vals, counts = np.unique(y, return_counts=True)
        for v, c in zip(vals.tolist(), counts.tolist()):
            self._label_counts[v] = self._label_counts.get(v, 0) + c
        if len(self._label_counts) > MAX_CLASSES:
            self._label_counts = None  # a continuous target: no class list

    def add_array(self, name: str, values: np.ndarray, *, chunks: int | None = None) -> None:
        """Store a per-row or side array ``name`` next to ``X`` and ``y`` (e.g. ``docid``)."""
        self._check_extra(name)
        _put(self._group, name, np.asarray(values), int(chunks or len(values) or 1))

    def add_group(self, name: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any] | None = None) -> None:
        """Store a group of side arrays (``targets``, ``vocabulary``) with JSON attributes."""
        self._check_extra(name)
        g = self._group.create_group(name)
        for k, v in arrays.items():
            _put(g, k, np.asarray(v), 1 << 20)
        if attrs:
            g.attrs.update(attrs)

    def _check_extra(self, name: str) -> None:
        if self._closed:
            raise RuntimeError("writer is closed")
        if name in ("X", "y", "block_index") or name in self._group:
            raise ValueError(f"the store already has an array or group named {name!r}")

    def abort(self) -> None:
        """Delete everything written; the target path is left as it was."""
        self._closed = True
        shutil.rmtree(self._tmp, ignore_errors=True)

    def close(self) -> Dataset:
        """Flush the last block, write the metadata, and move the store into place."""
        if self._closed:
            raise RuntimeError("writer is closed")
        try:
            if self._n_pending:
                self._flush_block(self._n_pending)
            if self._n_rows == 0:
                raise ValueError("no rows were written; an empty data set is not stored")
            meta = self._finish()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._move_into_place()
        return Dataset(self.path, _meta=meta)

    def _finish(self) -> dict[str, Any]:
        n = self._n_rows
        if self.layout == "csr":
            self._data.close()
            self._indices.close()
            self._indptr.close()
            d = self.n_features if self.n_features is not None else self._max_index + 1
            d = max(d, 1)
            self._xgroup.attrs.update(
                {"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [n, d]}
            )
        else:
            d = self.n_features
        bi = np.asarray(self._block_index, dtype=np.int64)
        self._group.create_array("block_index", data=bi, chunks=bi.shape)
        if self._label_counts is not None:
            keys = sorted(self._label_counts)
            conv = int if self._label_integral else float
            classes: list[Any] | None = [conv(k) for k in keys]
            counts: list[int] | None = [self._label_counts[k] for k in keys]
        else:
            classes = counts = None
        meta = {
            "format_version": STORE_FORMAT_VERSION,
            "layout": self.layout,
            "n_samples": n,
            "n_features": int(d),
            "nnz": int(self._nnz),
            "dtype": self.dtype.name,
            "index_dtype": self.index_dtype.name if self.layout == "csr" else None,
            "block_rows": self.block_rows,
            "n_blocks": len(self._block_index) - 1,
            "classes": classes,
            "class_counts": counts,
            "label_kind": "integer" if self._label_integral else "float",
            "source": self.source,
            "params": self.params,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "distlearn_version": __version__,
            "codec": self.codec,
            "complete": True,
        }
        if self.label_names is not None:
            meta["label_names"] = dict(self.label_names)
        # The metadata goes last: a store without it is never accepted.
        self._group.attrs["distlearn"] = meta
        return meta

    def _move_into_place(self) -> None:
        target = self.path
        old = None
        if target.exists() or target.is_symlink():
            if not self.overwrite:
                shutil.rmtree(self._tmp, ignore_errors=True)
                raise FileExistsError(f"{target} appeared while writing; not replaced")
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
            os.rename(target, old)
        os.rename(self._tmp, target)
        if old is not None:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()


def write_dataset(
    path: str | os.PathLike[str],
    parts: Iterable[tuple[Any, Any]],
    **kwargs: Any,
) -> Dataset:
    """Write an iterable of ``(X_part, y_part)`` pieces to a store; see :class:`DatasetWriter`."""
    with DatasetWriter(path, **kwargs) as w:
        for X, y in parts:
            w.append(X, y)
        return w.close()


def create_dataset(
    path: str | os.PathLike[str],
    X: Any,
    y: Any,
    *,
    layout: str | None = None,
    **kwargs: Any,
) -> Dataset:
    """Store an in-memory data set.

    ``layout`` defaults to ``"csr"`` for scipy sparse input and ``"dense"``
    otherwise; other keywords go to :class:`DatasetWriter`.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from distlearn.data import create_dataset
    >>> X = np.eye(5, dtype=np.float32); y = np.array([1, -1, 1, -1, 1])
    >>> ds = create_dataset(os.path.join(tempfile.mkdtemp(), "eye.zarr"), X, y, block_rows=2)
    >>> ds.n_samples, ds.n_features, ds.n_blocks, ds.classes.tolist()
    (5, 5, 3, [-1, 1])
    >>> ds.read_block(1).first_row
    2
    """
    if layout is None:
        layout = "csr" if sp.issparse(X) else "dense"
    if layout == "dense" and kwargs.get("n_features") is None:
        kwargs["n_features"] = int(np.shape(X)[1])
    if layout == "csr" and kwargs.get("n_features") is None:
        kwargs["n_features"] = int(X.shape[1])
    with DatasetWriter(path, layout=layout, **kwargs) as w:
        w.append(X, y)
        return w.close()


# --------------------------------------------------------------------------- reading


class Dataset:
    """A complete, validated distlearn store opened for reading.

    Use :func:`open_dataset` to get one.  Blocks are read lazily and
    independently; the object pickles as its path, so Dask tasks reopen the
    store on their worker instead of shipping arrays through the scheduler.
    """

    def __init__(self, path: str | os.PathLike[str], *, _meta: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._group = zarr.open_group(store=str(self.path), mode="r")
        self.meta = _meta if _meta is not None else dict(self._group.attrs["distlearn"])
        self.layout: str = self.meta["layout"]
        self._y = self._group["y"]
        if self.layout == "dense":
            self._X = self._group["X"]
        else:
            xg = self._group["X"]
            self._data, self._indices, self._indptr = xg["data"], xg["indices"], xg["indptr"]
        self.block_index = np.asarray(self._group["block_index"][:], dtype=np.int64)
        self.stamp = _stamp(self.path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open_dataset, (str(self.path),))

    def __repr__(self) -> str:
        return (
            f"<distlearn.Dataset {str(self.path)!r}: {self.n_samples} x {self.n_features} "
            f"{self.layout} {self.dtype}, {self.n_blocks} blocks>"
        )

    # -- metadata
    @property
    def n_samples(self) -> int:
        return int(self.meta["n_samples"])

    @property
    def n_features(self) -> int:
        return int(self.meta["n_features"])

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_samples, self.n_features)

    @property
    def nnz(self) -> int:
        return int(self.meta["nnz"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.meta["dtype"])

    @property
    def n_blocks(self) -> int:
        return int(self.meta["n_blocks"])

    @property
    def is_sparse(self) -> bool:
        return self.layout == "csr"

    @property
    def label_dtype(self) -> np.dtype:
        return np.dtype(np.int64 if self.meta["label_kind"] == "integer" else np.float64)

    @property
    def classes(self) -> np.ndarray | None:
        c = self.meta.get("classes")
        return None if c is None else np.asarray(c, dtype=self.label_dtype)

    @property
    def class_counts(self) -> np.ndarray | None:
        c = self.meta.get("class_counts")
        return None if c is None else np.asarray(c, dtype=np.int64)

    @property
    def codec(self) -> str:
        """The compression of ``X``: the recorded ``codec``, else read from the array's metadata."""
        c = self.meta.get("codec")
        if c:
            return str(c)
        x = self._group["X"]
        return array_codec(x if self.layout == "dense" else x["data"])

    @property
    def block_bounds(self) -> np.ndarray:
        """Row offsets of the blocks, shape ``(n_blocks + 1,)``."""
        return self.block_index[:, 0]

    # -- reads
    def _labels(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self._y[start:stop]).astype(self.label_dtype, copy=False)

    def read_rows(self, start: int, stop: int) -> Block:
        """Rows ``start:stop`` (any range, not only a block)."""
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(f"rows {start}:{stop} out of range for {self.n_samples} samples")
        y = self._labels(start, stop)
        if self.layout == "dense":
            return Block(np.asarray(self._X[start:stop]), y, start)
        indptr = np.asarray(self._indptr[start : stop + 1], dtype=np.int64)
        n0, n1 = int(indptr[0]), int(indptr[-1])
        X = sp.csr_matrix(
            (np.asarray(self._data[n0:n1]), np.asarray(self._indices[n0:n1]), indptr - n0),
            shape=(stop - start, self.n_features),
        )
        X.has_sorted_indices = True
        return Block(X, y, start)

    def read_block(self, i: int) -> Block:
        """Block ``i`` as ``(X_block, y_block, first_row)``; reads only that block's chunks."""
        n = self.n_blocks
        if not -n <= i < n:
            raise IndexError(f"block {i} out of range for {n} blocks")
        i %= n
        # A block is a row range; its values sit in that block's chunks only.
        return self.read_rows(int(self.block_index[i, 0]), int(self.block_index[i + 1, 0]))

    def iter_blocks(self, order: Sequence[int] | np.ndarray | None = None) -> Iterator[Block]:
        """Blocks in storage order, or in the given block order."""
        idx = range(self.n_blocks) if order is None else order
        for i in idx:
            yield self.read_block(int(i))

    def __iter__(self) -> Iterator[Block]:
        return self.iter_blocks()

    def __len__(self) -> int:
        return self.n_samples

    def to_scipy(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """The whole data set as ``(csr_matrix, y)``; for data that fits in memory."""
        if self.layout == "dense":
            X, y, _ = self.read_rows(0, self.n_samples)
            return sp.csr_matrix(X), y
        return tuple(self.read_rows(0, self.n_samples)[:2])  # type: ignore[return-value]

    def to_numpy(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole data set as a dense ``(ndarray, y)``; for data that fits in memory."""
        X, y, _ = self.read_rows(0, self.n_samples)
        return (X.toarray() if sp.issparse(X) else X), y

    def info(self) -> dict[str, Any]:
        """A JSON-ready summary: shape, nnz, density, classes with counts, blocks, dtype, source."""
        n, d = self.shape
        classes = self.meta.get("classes")
        return {
            "path": str(self.path),
            "n_samples": n,
            "n_features": d,
            "layout": self.layout,
            "dtype": self.meta["dtype"],
            "nnz": self.nnz,
            "density": self.nnz / (n * d) if n * d else 0.0,
            "n_classes": None if classes is None else len(classes),
            "classes": classes,
            "class_counts": self.meta.get("class_counts"),
            "label_kind": self.meta["label_kind"],
            "label_names": self.meta.get("label_names"),
            "topics": self._topic_names(),
            "n_blocks": self.n_blocks,
            "block_rows": self.meta["block_rows"],
            "bytes_stored": _du(self.path),
            "codec": self.codec,
            "source": self.meta.get("source", ""),
            "params": self.meta.get("params", {}),
            "created": self.meta.get("created"),
            "format_version": self.meta["format_version"],
        }

    # -- validation
    def validate(self, *, full: bool = False) -> None:
        """Check shapes and dtypes; with ``full=True`` also every index, pointer and value."""
        p = self.path
        n, d = self.shape
        if self._y.shape != (n,):
            raise StoreError(f"{p}: y has shape {self._y.shape}, expected ({n},)")
        bi = self.block_index
        if bi.ndim != 2 or bi.shape != (self.n_blocks + 1, 2) or bi[0, 0] != 0 or bi[-1, 0] != n:
            raise StoreError(f"{p}: block_index is inconsistent with n_samples={n}")
        if np.any(np.diff(bi[:, 0]) <= 0) or np.any(np.diff(bi[:, 1]) < 0):
            raise StoreError(f"{p}: block_index is not increasing")
        if self.layout == "dense":
            if self._X.shape != (n, d):
                raise StoreError(f"{p}: X has shape {self._X.shape}, expected ({n}, {d})")
            if self._X.dtype != self.dtype:
                raise StoreError(f"{p}: X has dtype {self._X.dtype}, metadata says {self.dtype}")
        else:
            shape = self._group["X"].attrs.get("shape")
            if list(shape or []) != [n, d]:
                raise StoreError(f"{p}: X shape attribute {shape} != [{n}, {d}]")
            if self._indptr.shape != (n + 1,) or self._indptr.dtype != np.int64:
                raise StoreError(f"{p}: X/indptr must be int64 of length {n + 1}")
            if self._data.shape != (self.nnz,) or self._indices.shape != (self.nnz,):
                raise StoreError(f"{p}: X/data and X/indices must have length nnz={self.nnz}")
            if self._data.dtype != self.dtype:
                raise StoreError(f"{p}: X/data has dtype {self._data.dtype}, metadata says {self.dtype}")
            if bi[-1, 1] != self.nnz:
                raise StoreError(f"{p}: block_index ends at {bi[-1, 1]} values, nnz={self.nnz}")
        if not full:
            return
        for i in range(self.n_blocks):
            r0 = int(bi[i, 0])
            try:
                X, y, _ = self.read_block(i)
            except Exception as e:  # a corrupt chunk
                raise StoreError(f"{p}: block {i} (rows {r0}..) cannot be read: {e}") from e
            if not np.all(np.isfinite(y)):
                raise StoreError(f"{p}: block {i}: non-finite label")
            if self.layout == "dense":
                if not np.all(np.isfinite(X)):
                    raise StoreError(f"{p}: block {i}: non-finite value")
                continue
            if X.indptr[0] != 0 or np.any(np.diff(X.indptr) < 0) or X.indptr[-1] != bi[i + 1, 1] - bi[i, 1]:
                raise StoreError(f"{p}: block {i}: X/indptr is inconsistent with block_index")
            if X.indices.size and (X.indices.min() < 0 or X.indices.max() >= d):
                raise StoreError(f"{p}: block {i}: feature index out of range [0, {d})")
            row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            if np.any((np.diff(X.indices) <= 0) & (row_of[1:] == row_of[:-1])):
                raise StoreError(f"{p}: block {i}: indices not sorted and unique within a row")
            if not np.all(np.isfinite(X.data)):
                raise StoreError(f"{p}: block {i}: non-finite value")


    # -- side arrays
    def side_array(self, name: str) -> np.ndarray | None:
        """A side array stored next to ``X`` (``docid``, ``vocabulary/terms``, ...), or ``None``."""
        try:
            return np.asarray(self._group[name][:])
        except KeyError:
            return None

    def topics(self) -> tuple[list[str], sp.csr_matrix] | None:
        """The multi-label targets: ``(names, indicator)`` with one CSR row per sample, or ``None``."""
        try:
            g = self._group["targets"]
        except KeyError:
            return None
        names = list(g.attrs["names"])
        indptr = np.asarray(g["indptr"][:], dtype=np.int64)
        indices = np.asarray(g["indices"][:])
        ind = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=(len(indptr) - 1, len(names)))
        return names, ind

    def _topic_names(self) -> list[str] | None:
        try:
            return list(self._group["targets"].attrs["names"])
        except KeyError:
            return None

    def target_names(self) -> list[str]:
        """Everything ``target=`` accepts besides ``A-vs-B``: label names (or class values) and topics."""
        t = self.topics()
        return self._label_names() + ([] if t is None else [n for n in t[0] if n not in self._label_names()])

    def _label_names(self) -> list[str]:
        names = self.meta.get("label_names")
        if names:
            return [v for _k, v in sorted(names.items(), key=lambda kv: float(kv[0]))]
        return [] if self.classes is None else [str(c) for c in self.classes.tolist()]


class DatasetView(Dataset):
    """A binary problem over a store's rows, chosen by ``target=``: read-only, no copy of ``X``.

    ``"A-vs-B"``: the rows whose label is ``A`` (+1) or ``B`` (-1); ``A`` and ``B`` are label
    names (``meta["label_names"]``, e.g. ``CCAT``) or class values.  ``"T"``: every row, +1
    where the row has topic ``T`` in the store's ``targets`` (or, without targets, label ``T``),
    -1 elsewhere.  The view's path is ``STORE#TARGET``, so Dask tasks reopen the same view by
    path; its blocks are the store's blocks with the unselected rows left out (empty ones
    dropped).  Labels are ``-1``/``+1``.
    """

    def __init__(self, base: Dataset, target: str) -> None:
        self._base = base
        self.target = target
        self.path = Path(f"{base.path}#{target}")
        self.layout = base.layout
        self._group = base._group
        self.stamp = base.stamp
        sel, lab, view = _resolve_target(base, target)
        self._sel = sel
        self._lab = lab
        bounds = base.block_index[:, 0]
        per_block = np.diff(np.searchsorted(sel, bounds))
        keep = np.flatnonzero(per_block > 0)
        if base.is_sparse:
            ip = np.asarray(base._indptr[:], dtype=np.int64)
            nnz_rows = (ip[sel + 1] - ip[sel]) if len(sel) else np.zeros(0, np.int64)
        else:
            nnz_rows = np.full(len(sel), base.n_features, dtype=np.int64)
        rows = np.concatenate([[0], np.cumsum(per_block[keep])]).astype(np.int64)
        vals = np.concatenate([[0], np.cumsum(nnz_rows)])[rows]
        self.block_index = np.stack([rows, vals], axis=1)
        pos = int((lab == 1).sum())
        self.meta = {**base.meta, "n_samples": int(len(sel)), "nnz": int(nnz_rows.sum()), "n_blocks": int(len(keep)),
                     "classes": [-1, 1], "class_counts": [int(len(sel)) - pos, pos], "label_kind": "integer",
                     "view": view}
        self.meta.pop("label_names", None)

    def __repr__(self) -> str:
        return f"<distlearn.DatasetView {str(self.path)!r}: {self.n_samples} x {self.n_features}, {self.n_blocks} blocks>"

    def read_rows(self, start: int, stop: int) -> Block:
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(f"rows {start}:{stop} out of range for {self.n_samples} samples")
        rows = self._sel[start:stop]
        y = self._lab[start:stop]
        if len(rows) == 0:
            X = (sp.csr_matrix((0, self.n_features), dtype=self.dtype) if self.is_sparse
                 else np.zeros((0, self.n_features), dtype=self.dtype))
            return Block(X, y, start)
        lo = int(rows[0])
        X = self._base.read_rows(lo, int(rows[-1]) + 1).X[rows - lo]
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.has_sorted_indices = True
        return Block(X, y, start)

    def side_array(self, name: str) -> np.ndarray | None:
        """As :meth:`Dataset.side_array`; a per-row array (``docid``) is cut to the view's rows."""
        a = self._base.side_array(name)
        return a[self._sel] if a is not None and len(a) == self._base.n_samples else a

    def topics(self) -> tuple[list[str], sp.csr_matrix] | None:
        t = self._base.topics()
        return None if t is None else (t[0], t[1][self._sel])

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["bytes_stored"] = _du(self._base.path)
        out["view"] = self.meta["view"]
        return out

    def validate(self, *, full: bool = False) -> None:
        self._base.validate(full=full)


def _resolve_target(ds: Dataset, target: str) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Rows (increasing) and +-1 labels of ``target`` over ``ds``; see :class:`DatasetView`."""
    y = np.asarray(ds._y[:], dtype=np.float64)
    names = ds.meta.get("label_names") or {}
    by_name = {v: float(k) for k, v in names.items()}

    def label_value(name: str) -> float | None:
        if name in by_name:
            return by_name[name]
        if not names:
            try:
                v = float(name)
            except ValueError:
                return None
            if ds.classes is not None and v in set(np.asarray(ds.classes, dtype=np.float64).tolist()):
                return v
        return None

    def refuse(what: str) -> StoreError:
        avail = ds.target_names()
        shown = ", ".join(avail[:30]) + (f", ... ({len(avail)} in all)" if len(avail) > 30 else "")
        return StoreError(f"{ds.path}: target {target!r}: {what}; this store has {shown or 'no labels'} "
                          "(use A-vs-B for a pair of labels, or one topic/label against the rest)")

    if "-vs-" in target:
        a, b = target.split("-vs-", 1)
        va, vb = label_value(a), label_value(b)
        for name, v in ((a, va), (b, vb)):
            if v is None:
                raise refuse(f"{name!r} is not a label of the store")
        if va == vb:
            raise refuse("the two sides are the same label")
        sel = np.flatnonzero((y == va) | (y == vb)).astype(np.int64)
        lab = np.where(y[sel] == va, 1, -1).astype(np.int64)
        view = {"target": target, "positive": a, "negative": b, "of": ds.n_samples}
    else:
        t = ds.topics()
        if t is not None and target in t[0]:
            col = t[1][:, t[0].index(target)].toarray().ravel() > 0
        else:
            v = label_value(target)
            if v is None:
                raise refuse("no such topic or label")
            col = y == v
        sel = np.arange(ds.n_samples, dtype=np.int64)
        lab = np.where(col, 1, -1).astype(np.int64)
        view = {"target": target, "positive": target, "negative": "rest", "of": ds.n_samples}
    if len(sel) == 0:
        raise refuse("no rows have these labels")
    return sel, lab, view


def _stamp(path: Path) -> tuple[int, int, int]:
    """Which write of the store at ``path`` this is: (device, inode, mtime in ns) of its ``zarr.json``.

    A store rewritten in place (even with the same metadata) has a new ``zarr.json``, so caches of
    decoded blocks (:mod:`distlearn.stream`) never serve an older write's blocks."""
    try:
        st = os.stat(path / "zarr.json")
    except OSError:
        return (0, 0, 0)
    return (int(st.st_dev), int(st.st_ino), int(st.st_mtime_ns))


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def open_dataset(path: str | os.PathLike[str] | Dataset, *, validate: bool | str = True,
                 target: str | None = None) -> Dataset:
    """Open a distlearn store for reading, or a binary view of it.

    Parameters
    ----------
    path : str, Path or Dataset
        The store (a ``Dataset`` is returned as is).  ``STORE#TARGET`` opens the view ``TARGET``.
    validate : bool or "full", default=True
        ``True`` checks the metadata, shapes and dtypes (cheap); ``"full"``
        also reads every block and checks index ranges, sortedness and
        finiteness; ``False`` skips the shape checks.
    target : str, default=None
        A binary problem over the store's rows without copying them (:class:`DatasetView`):
        ``"CCAT-vs-GCAT"`` (two labels by name or value) or ``"C15"`` (a topic, or a label, against
        the rest).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    StoreError
        Not a distlearn store, written by a newer format, or incomplete
        (a write that failed or is still running), or inconsistent.
    """
    if isinstance(path, Dataset):
        if target is None:
            return path
        if isinstance(path, DatasetView):
            raise StoreError(f"{path.path}: already a view; open the store itself with target={target!r}")
        return DatasetView(path, target)
    p = Path(path)
    if target is None and not p.exists() and "#" in p.name:
        base, _, target = os.fspath(p).rpartition("#")
        p = Path(base)
    if target is not None and not target:
        raise StoreError(f"{p}: empty target after '#'")
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such store")
    if _PARTIAL in p.name:
        raise StoreError(f"{p}: this is the temporary directory of an unfinished write")
    try:
        group = zarr.open_group(store=str(p), mode="r")
    except Exception as e:
        raise StoreError(f"{p}: not a zarr group ({type(e).__name__}: {e})") from e
    meta = group.attrs.get("distlearn")
    if not isinstance(meta, dict):
        raise StoreError(f"{p}: not a distlearn store (no 'distlearn' metadata attribute)")
    version = meta.get("format_version")
    if not isinstance(version, int) or version > STORE_FORMAT_VERSION:
        raise StoreError(
            f"{p}: store format version {version!r} is not supported by this distlearn "
            f"(reads versions <= {STORE_FORMAT_VERSION}); upgrade distlearn"
        )
    if meta.get("complete") is not True:
        raise StoreError(f"{p}: the store is incomplete (its write did not finish)")
    if meta.get("layout") not in LAYOUTS:
        raise StoreError(f"{p}: unknown layout {meta.get('layout')!r}")
    try:
        ds = Dataset(p, _meta=dict(meta))
    except KeyError as e:
        raise StoreError(f"{p}: missing array {e}") from e
    if validate:
        ds.validate(full=validate == "full")
    return ds if target is None else DatasetView(ds, target)
