"""The distlearn data set: a zarr v3 group on disk, dense or CSR, in row blocks.

Layout (format version 1; 2 for a store of class names)::

    STORE.zarr/                     group; attrs["distlearn"] = metadata (below)
        X                           dense: array (n_samples, n_features), chunks (block_rows, n_features)
        X/                          CSR: group in the anndata encoding
            attrs: encoding-type = "csr_matrix", encoding-version = "0.1.0", shape = [n, d]
            data      (nnz,)        float32|float64, chunks of NNZ_CHUNK elements
            indices   (nnz,)        int32 (int64 when d >= 2**31), sorted within each row
            indptr    (n + 1,)      int64, chunks (block_rows,)
        y           (n_samples,)    float64 labels (integral labels are returned as int64); with
                                    class names: their codes 0..k-1 (format version 2, below)
        block_index (n_blocks+1, 2) int64: first row and first stored value of every block
        digests/                    uint32 per piece of every chunk of y, X (X/data, X/indices,
                                    X/indptr) and block_index (``meta["integrity"]["digests"]``)

Class names as labels (``setosa``: a str ``y`` given to the writer, e.g. a CSV's ``species``): ``y``
holds codes into ``meta["class_names"]``, the sorted names (``classes`` is then ``[0 .. k-1]``), and
the store's ``format_version`` is 2, so a distlearn that does not know names refuses it instead of
training on the codes.  Every read (:meth:`Dataset.read_rows`) gives the names back, and
:attr:`Dataset.classes` is the names: estimators, evaluate, views and the Dask modes see names only.
The writer codes names in the order it meets them and, at :meth:`DatasetWriter.close`, rewrites
``y`` (block by block) in the sorted order, so the codes depend neither on the blocks nor on the order
the pieces came in.  Stores of numbers are unchanged (format version 1).

The metadata attribute records ``format_version``, ``layout``, ``n_samples``,
``n_features``, ``nnz``, ``dtype``, ``block_rows``, ``n_blocks``, ``classes``
and ``class_counts``, ``label_kind``, ``source``, ``params`` (how the data was
made), ``codec`` (the compression of its arrays, see :data:`CODECS`; stores
written before it was recorded have none and were written with zarr's default,
``zstd-0``; every array's own ``zarr.json`` names its codecs, which is what
reading follows, so a store of any codec reads the same), ``integrity`` and ``complete``.

``integrity`` (``{"crc32c": true, "fill": "invalid"}``, stores written since issue 26): every
chunk of ``X``, ``y`` and ``block_index`` ends with a crc32c checksum (zarr's ``Crc32cCodec``
after the compressor), every chunk is written, and the fill values are never data (NaN for
values and labels, -1 for indices and pointers).  Older stores (fill 0, no checksums) read alike.
Since safety round four, ``"digests": true`` too: ``digests/`` holds, per array, the digest of
every piece of every chunk (:func:`chunk_digest`: crc32c of the decoded values, the array's path
and length, the piece's index; a piece is a chunk, or ``2**16`` rows of a larger one), written as
the chunks are.  Every read (:meth:`Dataset.read_rows`) refuses a missing chunk (also one deleted
after the store was opened), a chunk that is not the data written at its place (a chunk file
moved or copied), a store replaced since it was opened, and a block that fails
:func:`block_fault`, in one :class:`StoreError` line.

Any block is read from its own chunks and two entries of ``block_index`` --
nothing else -- so many processes can stream different blocks of one store at
once.  Writing is atomic: the store is built under a hidden temporary name in
the same directory, marked complete, and renamed into place only when whole;
a writer that fails (or is killed) never leaves anything that
:func:`open_dataset` accepts.

A store can also live at an fsspec URL (``s3://bucket/x.zarr``, :mod:`distlearn._urls`), read and
written through zarr's ``FsspecStore``: the same layout, the same checks (a missing chunk is an
object that is not there; the write stamp is the root ``zarr.json``'s ETag and time), written
under a temporary prefix beside the target and copied into place with the root ``zarr.json``
last (:func:`distlearn._outputs.replace`).  ``Dataset.path`` is then the URL string.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import math
import os
import shutil
import socket
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import google_crc32c
import numpy as np
import scipy.sparse as sp
import zarr
from numba import njit
from zarr.codecs import Crc32cCodec
from zarr.storage import LocalStore

from .._outputs import check_output, replace
from .._urls import filesystem, is_url, split, zarr_store
from .._version import __version__
from .._config import MAX_CLASSES, NNZ_CHUNK, NUMBA_FLAGS, STORE_FORMAT_VERSION, default_block_rows

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
        elif name != "crc32c":  # the checksum of every chunk (meta["integrity"]), not a compression
            names.append(name)
    return "+".join(names) or "none"
_DTYPES = {"float32": np.float32, "float64": np.float64}
#: Largest chunk a compressor takes (Blosc: 2**31 - 1 bytes, less its header).
_MAX_CHUNK_BYTES = 2**31 - 2**20


def _memory_budget() -> int:
    """A quarter of this machine's memory: the most the rows held for one block may take."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 4
    except (ValueError, OSError, AttributeError):
        return 2 << 30


def _nbytes(X: Any) -> int:
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(np.asarray(X).nbytes)
_PARTIAL = ".partial-"


#: This machine, in the names of the temporary directories of unfinished writes (with the writer's pid).
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _loc(path: str | os.PathLike[str]) -> Any:
    """Where a store is: a ``Path``, or the URL string (checked: known scheme, backend installed)."""
    p = os.fspath(path)
    if is_url(p):
        filesystem(p)
        return p.rstrip("/")
    return Path(p)


def _open_group(p: Any, mode: str) -> Any:
    """The zarr group at a local path or URL."""
    return zarr.open_group(store=zarr_store(p, read_only=mode == "r") if isinstance(p, str) else str(p), mode=mode)


def _exists(p: Any) -> bool:
    if isinstance(p, str):
        fs, q = filesystem(p)
        fs.invalidate_cache(q)
        return bool(fs.exists(q))
    return p.exists()


def _name(p: Any) -> str:
    return split(p)[1] if isinstance(p, str) else p.name


def remove_stale_partials(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary directories ``.NAME.partial-HOST-PID-*`` that a killed write to ``path``
    left behind: those written on this machine by a process that no longer runs.  A write still
    running, or one from another machine (which this one cannot check), is left alone."""
    if is_url(os.fspath(path)):
        fs, q = filesystem(os.fspath(path))
        parent, name = q.rpartition("/")[::2]
        fs.invalidate_cache(parent)
        cands = [Path(d) for d in fs.glob(f"{parent}/.{name}{_PARTIAL}*")]
    else:
        p = Path(path)
        name, cands = p.name, list(p.parent.glob(f".{p.name}{_PARTIAL}*"))
    gone = []
    for d in cands:
        parts = d.name[len(f".{name}{_PARTIAL}"):].split("-")
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
        if is_url(os.fspath(path)):
            fs.rm(str(d), recursive=True)  # our own temporary prefix (its name says so)
        else:
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


#: The group of a store's chunk digests (``meta["integrity"]["digests"]``), one uint32 array per
#: digested array, named by its path with ``.`` for ``/`` (``X.data``), whose attribute ``rows`` is the
#: length of the pieces digested (:func:`digest_rows`).
DIGESTS = "digests"

#: The longest piece of a chunk digested alone: a read of rows that cut a chunk (the values of a CSR
#: block, whose chunks of ``2**20`` values straddle the blocks) reads whole pieces of at most this many
#: rows around them, not whole chunks.
DIGEST_ROWS = 1 << 16


def digest_rows(chunk: int) -> int:
    """The rows of the pieces a chunk of ``chunk`` rows is digested in: the chunk itself up to
    :data:`DIGEST_ROWS`, else its largest divisor up to that (not below 1/64 of it: else the chunk)."""
    if chunk <= DIGEST_ROWS:
        return chunk
    best = max(d for d in range(1, DIGEST_ROWS + 1) if chunk % d == 0)
    return best if best * 64 >= chunk else chunk


def _values_crc(values: np.ndarray) -> int:
    """crc32c of an array's values as a chunk holds them decoded (little-endian, C order)."""
    v = np.ascontiguousarray(values)
    if v.dtype.byteorder == ">":
        v = v.astype(v.dtype.newbyteorder("<"))
    v = v.view()
    v.flags.writeable = False  # google_crc32c takes read-only buffers (no copy)
    return int(google_crc32c.value(v))


def _seal(crc: int, name: str, length: int, index: int) -> int:
    """A chunk's values' crc32c continued over where it belongs: the array, its length, the chunk."""
    return int(google_crc32c.extend(crc, f"\0{name}\0{length}\0{index}".encode()))


def chunk_digest(name: str, length: int, index: int, values: np.ndarray) -> int:
    """The digest of piece ``index`` (of :func:`digest_rows` rows; a whole chunk but for large ones) of
    the array ``name`` (its path in the store, e.g. ``X/data``) of ``length`` rows: crc32c over the
    piece's decoded values (the last only as far as the array goes), then the name, the length and
    the index.  A chunk file copied to another position, another array, or another store whose array
    has another length, does not match."""
    return _seal(_values_crc(values), name, length, index)


class _ChunkedAppender:
    """Append to a 1-D zarr array, writing only whole chunks until ``close``.

    Whole-chunk writes never read a chunk back, so appending costs one
    compressed write per chunk whatever the sizes of the appended pieces.
    ``record(array, at, values)`` is told of every write (the writer's chunk digests).
    """

    def __init__(self, array: zarr.Array, chunk: int, record: Callable[..., None] | None = None) -> None:
        self.array = array
        self.chunk = chunk
        self.record = record
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
            if self.record is not None:
                self.record(self.array, self.written, buf[:n])
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
        Where the store goes (conventionally ``*.zarr``): a local path or an fsspec URL.
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
        recorded in the metadata as ``codec``.  Every chunk also carries a crc32c checksum.
    allow_underflow : bool, default=False
        Store non-zero values that become 0 in ``dtype`` (float32 below about 1e-45) as 0.  By
        default such a value is refused in one line that says how many there are.
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
        allow_underflow: bool = False,
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
        self.path = _loc(path)
        check_output(self.path, "store", overwrite=overwrite)
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

        remove_stale_partials(self.path)
        tmp_name = f".{_name(self.path)}{_PARTIAL}{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if isinstance(self.path, str):
            self._tmp: Any = f"{split(self.path)[0]}/{tmp_name}"
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = self.path.parent / tmp_name
        self._group = _open_group(self._tmp, "w-")
        self._closed = False

        self._n_rows = 0  # rows flushed into blocks
        self._nnz = 0  # stored values flushed
        self._max_index = -1
        self._label_counts: dict[float, int] | None = {}
        self._label_integral = True
        #: Class names met so far -> their code (in the order met; sorted at close); None: numbers.
        self._name_codes: dict[str, int] | None = None
        self._block_index: list[tuple[int, int]] = [(0, 0)]
        self._pending: list[tuple[Any, np.ndarray]] = []
        self._pending_offset = 0
        self._n_pending = 0
        #: Names of the label values (``{"0": "CCAT", ...}``), stored in the metadata when set.
        self.label_names: dict[str, str] | None = None

        # Every chunk ends with its crc32c checksum (a flipped byte is a decode error), every chunk
        # is written (even one equal to the fill value), and the fill values are invalid data (NaN
        # values and labels, -1 indices and pointers): a chunk that goes missing can never be read
        # as plausible data, even by a reader that does not look for it (meta["integrity"]).
        self._comp = [*(comp or []), Crc32cCodec()]
        self._nnz_chunk = int(nnz_chunk)
        self.allow_underflow = bool(allow_underflow)
        self._arrays = False  # created at the first block, their chunks cut to the rows present
        #: The crc32c of every chunk written, per array path and chunk index (sealed into the chunk
        #: digests at close, when the arrays' lengths are known: meta["integrity"]["digests"]).
        self._crcs: dict[str, dict[int, int]] = {}

    def _record(self, a: Any, at: int, values: np.ndarray) -> None:
        """Remember the crc32c of the pieces (:func:`digest_rows`) of ``a`` just written from row ``at``
        (a chunk's first)."""
        c = a.chunks[0]
        if at % c:
            raise RuntimeError(f"{a.path}: a write at row {at} does not start a chunk of {c} rows")
        crcs = self._crcs.setdefault(a.path, {})
        values = np.asarray(values, dtype=a.dtype)
        r = digest_rows(c)
        for k in range(0, len(values), r):
            crcs[(at + k) // r] = _values_crc(values[k:k + r])

    def _array(self, group: zarr.Group, name: str, shape: tuple[int, ...], chunks: tuple[int, ...],
               dtype: Any) -> Any:
        dt = np.dtype(dtype)
        return group.create_array(name, shape=shape, chunks=chunks, dtype=dt, compressors=self._comp,
                                  fill_value=np.nan if dt.kind == "f" else -1,
                                  config={"write_empty_chunks": True})

    def _create_arrays(self, rows: int) -> None:
        """The arrays, at the first block (of ``rows`` rows: ``block_rows``, or all the rows there are
        when fewer), so that a ``block_rows`` larger than the data never sizes a chunk buffer."""
        rows = min(self.block_rows, rows)
        per_row = 8 * (2 if self.layout == "csr" else 1) + (self.dtype.itemsize * self.n_features
                                                          if self.layout == "dense" else 0)
        if rows * max(8, per_row - 8) > _MAX_CHUNK_BYTES:
            raise ValueError(f"block_rows={self.block_rows} (--block-rows): a chunk of {rows} rows would take "
                             f"{rows * max(8, per_row - 8) / 2**30:.1f} GiB, over the 2 GiB a compressed zarr "
                             "chunk can hold; use a smaller --block-rows")
        g = self._group
        self._y = self._array(g, "y", (0,), (rows,), "float64")
        if self.layout == "dense":
            self._X = self._array(g, "X", (0, self.n_features), (rows, self.n_features), self.dtype)
        else:
            xg = g.create_group("X")
            self._xgroup = xg
            c = self._nnz_chunk
            rec = self._record
            self._data = _ChunkedAppender(self._array(xg, "data", (0,), (c,), self.dtype), c, rec)
            self._indices = _ChunkedAppender(self._array(xg, "indices", (0,), (c,), self.index_dtype), c, rec)
            self._indptr = _ChunkedAppender(self._array(xg, "indptr", (0,), (rows,), "int64"), rows, rec)
            self._indptr.append(np.zeros(1, dtype=np.int64))
        self._arrays = True

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
        y = self._code_names(np.asarray(y).reshape(-1))
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
        if self._n_pending:
            held = sum(_nbytes(X) + y.nbytes for X, y in self._pending)
            if held > _memory_budget():
                raise ValueError(
                    f"block_rows={self.block_rows} (--block-rows): the {self._n_pending} rows held for one "
                    f"block already take {held / 2**30:.1f} GiB, over a quarter of this machine's memory "
                    f"({4 * _memory_budget() / 2**30:.1f} GiB); use a smaller --block-rows")

    def _code_names(self, y: np.ndarray) -> np.ndarray:
        """Labels as the float64 ``y`` holds them: numbers as they are, class names (a str array) as
        their codes in the order met (sorted at :meth:`close`).  One store holds numbers or names."""
        names = y.dtype.kind in "US"
        if len(y) and self._name_codes is not None and not names:
            raise ValueError(f"row {self.n_rows}: labels are numbers, but the rows before are class names "
                             "(labels are all numbers or all names)")
        if not names:
            return np.asarray(y, dtype=np.float64)
        if self._name_codes is None:
            if self.n_rows:
                raise ValueError(f"row {self.n_rows}: labels are class names, but the rows before are numbers "
                                 "(labels are all numbers or all names)")
            self._name_codes = {}
        codes = self._name_codes
        uniq, inv = np.unique(y, return_inverse=True)
        for u in uniq.tolist():
            if u not in codes:
                if not u:
                    raise ValueError(f"row {self.n_rows}: an empty class name")
                if len(codes) >= MAX_CLASSES:
                    raise ValueError(f"more than {MAX_CLASSES:,} class names: not class labels")
                codes[u] = len(codes)
        return np.array([codes[u] for u in uniq.tolist()], dtype=np.float64)[inv.reshape(-1)]

    def _sort_names(self) -> list[str]:
        """Recode ``y`` so that code ``i`` is the ``i``-th name in sorted order (block by block)."""
        assert self._name_codes is not None
        names = sorted(self._name_codes)
        recode = np.empty(len(names), dtype=np.float64)
        for new, name in enumerate(names):
            recode[self._name_codes[name]] = new
        if np.any(recode != np.arange(len(names))):
            step = max(1, self.block_rows)
            for lo in range(0, self._n_rows, step):
                hi = min(lo + step, self._n_rows)
                self._y[lo:hi] = codes = recode[np.asarray(self._y[lo:hi], dtype=np.int64)]
                self._record(self._y, lo, codes)
            if self._label_counts is not None:
                self._label_counts = {float(recode[int(k)]): c for k, c in self._label_counts.items()}
        return names

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
        if not self._arrays:
            if self.layout == "csr" and self.n_features is None:  # the first block decides the index width
                top = max((int(p.indices.max()) for p in parts if sp.issparse(p) and p.nnz), default=0)
                if top >= 2**31:
                    self.index_dtype = np.dtype(np.int64)
            self._create_arrays(n)
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
                q = self._narrow(p, first)
                blocks.append(q)
            Xb = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
            if not np.all(np.isfinite(Xb)):
                r, c = np.argwhere(~np.isfinite(Xb))[0]
                raise ValueError(f"row {first + r}, column {c}: value {Xb[r, c]} is not finite")
            stop = first + n
            self._X.resize((stop, d))
            self._X[first:stop] = Xb
            self._record(self._X, first, Xb)
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
        self._record(self._y, first, y)
        self._n_rows += n
        self._block_index.append((self._n_rows, self._nnz))

    def _append_csr(self, Xb: sp.csr_matrix, first: int) -> None:
        Xb.sort_indices()
        indptr = Xb.indptr.astype(np.int64)
        indices = Xb.indices
        data = self._narrow(Xb.data, first, Xb.indptr)
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
            if mx > np.iinfo(self.index_dtype).max:  # never wrapped: 64-bit only when known up front
                raise ValueError(
                    f"block at row {first}: feature index {mx} does not fit the store's {self.index_dtype.name} "
                    f"indices (chosen from the first block); pass n_features (--n-features) above {mx} "
                    "for 64-bit indices, or hash the features (--hash-bits)")
            self._max_index = max(self._max_index, mx)
            if not np.all(np.isfinite(data)):
                row_of = np.repeat(np.arange(Xb.shape[0]), np.diff(indptr))
                k = int(np.flatnonzero(~np.isfinite(data))[0])
                raise ValueError(f"row {first + int(row_of[k])}: value {data[k]} is not finite")
        self._data.append(data)
        self._indices.append(indices.astype(self.index_dtype, copy=False))
        self._indptr.append(indptr[1:] + self._nnz)
        self._nnz += int(indptr[-1])

    # -- CSR rows whose values are written elsewhere (workers sharing this file system)
    def begin_parts(self, n_rows: int, nnz: int) -> dict[str, Any]:
        """Lay out a CSR store of exactly ``n_rows`` rows and ``nnz`` stored values whose parts are
        written by other processes (:func:`write_part_chunks`), then added here in row order with
        :meth:`append_part`.  Returns the plain-data target those processes take.

        The store is the one :meth:`append` would write, chunk for chunk: ``X/data`` and
        ``X/indices`` get their final length now, a part writes the whole chunks inside its range
        of stored values, and the chunks two parts share are assembled here from the parts' edges;
        ``y``, ``X/indptr`` and ``block_index`` are written here.  Local stores only (the parts
        write through the file system); ``n_features`` must be given."""
        if self.layout != "csr" or self.n_features is None or isinstance(self.path, str):
            raise ValueError("begin_parts needs a local CSR store with n_features")
        if self._arrays or self._n_pending or n_rows < 1 or nnz < 1:
            raise ValueError("begin_parts comes first, for at least one row and one stored value")
        self._create_arrays(int(n_rows))
        for app in (self._data, self._indices):
            app.array.resize((int(nnz),))
        self._parts = {"rows": int(n_rows), "nnz": int(nnz), "at": 0, "data": [], "indices": [],
                       "y": _ChunkedAppender(self._y, self._indptr.chunk, self._record)}
        return {"path": os.fspath(self._tmp), "chunk": self._nnz_chunk, "nnz": int(nnz),
                "dtype": self.dtype.name, "index_dtype": self.index_dtype.name}

    def append_part(self, indptr: np.ndarray, y: Any, head: tuple[np.ndarray, np.ndarray],
                    tail: tuple[np.ndarray, np.ndarray], max_index: int,
                    crcs: dict[str, dict[int, int]] | None = None) -> None:
        """Add the next part written by :func:`write_part_chunks`: its rows' ``indptr`` (from 0),
        labels ``y``, the ``(data, indices)`` edges it returned, its largest column and the
        crc32c of the whole chunks it wrote (``crcs``, its third return value)."""
        P = getattr(self, "_parts", None)
        if P is None or self._closed:
            raise RuntimeError("append_part needs begin_parts (and an open writer)")
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        indptr = np.asarray(indptr, dtype=np.int64)
        n, first, z0 = len(y), self._n_rows, self._nnz
        if len(indptr) != n + 1 or indptr[0] != 0 or first + n > P["rows"] or z0 + int(indptr[-1]) > P["nnz"]:
            raise ValueError(f"part at row {first}: {n} rows and {int(indptr[-1])} values do not fit the "
                             f"layout of {P['rows']} rows and {P['nnz']} values")
        if not np.all(np.isfinite(y)):
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise ValueError(f"row {first + bad}: label {y[bad]} is not finite")
        self._count_labels(y)
        if max_index >= self.n_features:
            raise ValueError(f"part at row {first}: feature index {max_index} is beyond n_features={self.n_features}")
        self._max_index = max(self._max_index, int(max_index))
        for name, got in (crcs or {}).items():
            self._crcs.setdefault(name, {}).update({int(i): int(v) for i, v in got.items()})
        z1 = z0 + int(indptr[-1])
        self._edge(z0, *head)
        self._edge(z1 - len(tail[0]), *tail)
        P["y"].append(y)
        self._indptr.append(indptr[1:] + z0)
        R = self.block_rows
        for k in range(first // R + 1, (first + n) // R + 1):
            self._block_index.append((k * R, z0 + int(indptr[k * R - first])))
        self._n_rows, self._nnz = first + n, z1

    def _edge(self, at: int, data: np.ndarray, indices: np.ndarray) -> None:
        """Buffer a part's piece of a chunk it shares; write the chunk once whole."""
        if not len(data):
            return
        P = self._parts
        if not P["data"]:
            P["at"] = at
        held = sum(len(d) for d in P["data"])
        if P["at"] + held != at or at // self._nnz_chunk != (at + len(data) - 1) // self._nnz_chunk:
            raise ValueError(f"a part's edge at stored value {at} does not continue the chunk being assembled")
        P["data"].append(np.asarray(data, dtype=self.dtype))
        P["indices"].append(np.asarray(indices, dtype=self.index_dtype))
        end = at + len(data)
        if end % self._nnz_chunk == 0 or end == P["nnz"]:
            for app, part in ((self._data, P["data"]), (self._indices, P["indices"])):
                values = np.concatenate(part)
                app.array[P["at"]:end] = values
                self._record(app.array, P["at"], values)
            P["data"], P["indices"] = [], []

    def _finish_parts(self) -> None:
        P = self._parts
        if self._n_rows != P["rows"] or self._nnz != P["nnz"] or P["data"]:
            raise ValueError(f"the parts gave {self._n_rows} rows and {self._nnz} values; the layout has "
                             f"{P['rows']} and {P['nnz']}")
        P["y"].close()
        if self._n_rows % self.block_rows:
            self._block_index.append((self._n_rows, self._nnz))
        self._data.written = self._indices.written = self._nnz  # written by the parts and _edge

    def _narrow(self, wide: np.ndarray, first: int, indptr: np.ndarray | None = None) -> np.ndarray:
        """``wide`` in the store's dtype; a finite value that overflows it (1e39 in float32) is refused
        naming its row, instead of numpy's warning and an "inf is not finite" about a value the file
        never held; one that underflows to 0 as :meth:`_refuse_underflow` says."""
        with np.errstate(over="ignore"):
            narrow = np.asarray(wide, dtype=self.dtype)
        if wide.dtype.kind == "f" and wide.dtype.itemsize > self.dtype.itemsize:
            over = ~np.isfinite(narrow) & np.isfinite(wide)
            if over.any():
                k = int(np.flatnonzero(over.reshape(-1))[0])
                row = first + (int(np.searchsorted(indptr, k, side="right") - 1) if indptr is not None
                               else k // max(1, wide.shape[1]))
                raise ValueError(f"row {row}: value {float(wide.reshape(-1)[k])!r} overflows {self.dtype.name}; "
                                 "store it with --dtype float64 (dtype='float64') or scale the features")
            self._refuse_underflow(wide, narrow, first, indptr)
        return narrow

    def _refuse_underflow(self, wide: np.ndarray, narrow: np.ndarray, first: int,
                          indptr: np.ndarray | None = None) -> None:
        """Refuse non-zero values that became 0 in the store's dtype (unless ``allow_underflow``)."""
        if self.allow_underflow:
            return
        lost = (narrow == 0) & (wide != 0)
        n = int(np.count_nonzero(lost))
        if not n:
            return
        k = int(np.flatnonzero(lost.reshape(-1))[0])
        row = first + (int(np.searchsorted(indptr, k, side="right") - 1) if indptr is not None
                       else k // max(1, wide.shape[1]))
        raise ValueError(
            f"row {row}: {n} non-zero value{'s' if n > 1 else ''} of the block from row {first} "
            f"(e.g. {float(wide.reshape(-1)[k])!r}) become{'' if n > 1 else 's'} 0 in {self.dtype.name}; store them "
            "with --dtype float64 (dtype='float64') or scale the features")

    def _count_labels(self, y: np.ndarray) -> None:
        # Integer labels come back as int64: only those float64 holds exactly (|y| <= 2^53) are
        # integers; a label like 1e19 stays a float instead of wrapping to a negative int64.
        if self._label_integral and not (np.all(y == np.round(y)) and np.all(np.abs(y) <= 2.0**53)):
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
        if name in ("X", "y", "block_index", DIGESTS) or name in self._group:
            raise ValueError(f"the store already has an array or group named {name!r}")

    def abort(self) -> None:
        """Delete everything written; the target path is left as it was."""
        self._closed = True
        _rmtree(self._tmp)

    def close(self) -> Dataset:
        """Flush the last block, write the metadata, and move the store into place."""
        if self._closed:
            raise RuntimeError("writer is closed")
        try:
            if getattr(self, "_parts", None) is not None:
                self._finish_parts()
            elif self._n_pending:
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
        block_index = self._group.create_array("block_index", data=bi, chunks=bi.shape, compressors=self._comp)
        self._record(block_index, 0, bi)
        class_names = None if self._name_codes is None else self._sort_names()
        self._write_digests([self._y, block_index, *((self._X,) if self.layout == "dense" else
                                                     (self._data.array, self._indices.array, self._indptr.array))])
        if self._label_counts is not None:
            keys = sorted(self._label_counts)
            conv = int if self._label_integral else float
            classes: list[Any] | None = [conv(k) for k in keys]
            counts: list[int] | None = [self._label_counts[k] for k in keys]
        else:
            classes = counts = None
        meta = {
            "format_version": 1 if class_names is None else STORE_FORMAT_VERSION,
            "layout": self.layout,
            "n_samples": n,
            "n_features": int(d),
            "nnz": int(self._nnz),
            "dtype": self.dtype.name,
            "index_dtype": self.index_dtype.name if self.layout == "csr" else None,
            "block_rows": min(self.block_rows, n),
            "n_blocks": len(self._block_index) - 1,
            "classes": classes,
            "class_counts": counts,
            "label_kind": "integer" if self._label_integral else "float",
            "source": self.source,
            "params": self.params,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "distlearn_version": __version__,
            "codec": self.codec,
            # What a reader may rely on: every chunk written, ending with a crc32c checksum, fill
            # values that are never data (NaN, -1), so a missing chunk is never read as zeros, and
            # the digest of every chunk at its position (a chunk file moved or copied is refused).
            "integrity": {"crc32c": True, "fill": "invalid", "digests": True},
            "complete": True,
        }
        if self.label_names is not None:
            meta["label_names"] = dict(self.label_names)
        if class_names is not None:
            meta["class_names"] = class_names
        # The metadata goes last: a store without it is never accepted.
        self._group.attrs["distlearn"] = meta
        return meta

    def _write_digests(self, arrays: list[Any]) -> None:
        """The group ``digests``: the digest (:func:`chunk_digest`) of every piece of every chunk of every
        array, sealed now that the lengths are known; a piece written by no recorded path is a writer's
        bug, refused."""
        g = self._group.create_group(DIGESTS)
        g.attrs["digest"] = "crc32c(values of `rows` rows, array path, array length, piece index)"
        for a in arrays:
            n, r = a.shape[0], digest_rows(a.chunks[0])
            k = -(-n // r)
            crcs = self._crcs.get(a.path, {})
            if sorted(crcs) != list(range(k)):
                raise RuntimeError(f"{a.path}: digests recorded for pieces {sorted(set(range(k)) - set(crcs))[:5]} "
                                   f"missing (of {k})")
            d = np.array([_seal(crcs[i], a.path, n, i) for i in range(k)], dtype=np.uint32)
            arr = g.create_array(_digest_name(a.path), data=d, chunks=(max(k, 1),), compressors=[Crc32cCodec()])
            arr.attrs["rows"] = r

    def _move_into_place(self) -> None:
        try:
            there = _exists(self.path) if isinstance(self.path, str) else os.path.lexists(self.path)
            if there and not self.overwrite:
                raise FileExistsError(f"{self.path} appeared while writing; not replaced")
            replace(self._tmp, self.path, "store", overwrite=self.overwrite)  # the old one removed only if still ours
        except BaseException:
            _rmtree(self._tmp)
            raise


def write_part_chunks(target: dict[str, Any], at: int, data: np.ndarray, indices: np.ndarray
                      ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray],
                                 dict[str, dict[int, int]]] | None:
    """Write a part's stored values ``at:at + len(data)`` of a store laid out by
    :meth:`DatasetWriter.begin_parts` (``target``): the whole chunks of ``X/data`` and ``X/indices``
    inside that range, in any process that sees the store's file system.  Returns the
    ``(data, indices)`` before the first and after the last whole chunk (the edges, which the
    writer assembles with the neighbouring parts' into the chunks they share) and the crc32c of
    every whole chunk written (``{"X/data": {chunk: crc}, "X/indices": ...}``, for
    :meth:`DatasetWriter.append_part`), or ``None`` when the write was abandoned (its temporary
    store is gone: the writer aborted).

    Writing the same part again writes the same bytes (a retried task is harmless).  A write
    that raced the writer's abort removes the temporary directory it recreated."""
    C, total = int(target["chunk"]), int(target["nnz"])
    z0, z1 = int(at), int(at) + len(data)
    h1 = z0 if z0 % C == 0 else min(z1, (z0 // C + 1) * C)
    t0 = z1 if (z1 % C == 0 or z1 == total) else max(h1, (z1 // C) * C)
    head = (data[:h1 - z0], indices[:h1 - z0])
    tail = (data[t0 - z0:], indices[t0 - z0:])
    crcs: dict[str, dict[int, int]] = {"X/data": {}, "X/indices": {}}
    if t0 <= h1:
        return head, tail, crcs
    tmp = Path(target["path"])
    marks = [tmp / "X" / name / "zarr.json" for name in ("data", "indices")]
    if not all(m.exists() for m in marks):
        return None
    try:
        for name, values, dt in (("data", data, target["dtype"]), ("indices", indices, target["index_dtype"])):
            a = zarr.open_array(store=str(tmp / "X" / name), mode="r+")
            a[h1:t0] = whole = np.asarray(values[h1 - z0:t0 - z0], dtype=dt)
            r = digest_rows(C)
            crcs[f"X/{name}"] = {(h1 + k) // r: _values_crc(whole[k:k + r]) for k in range(0, t0 - h1, r)}
    except FileNotFoundError:
        pass
    if not all(m.exists() for m in marks):  # aborted meanwhile: our chunks recreated its directories
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    return head, tail, crcs


def _digest_name(path: str) -> str:
    """The name of an array's digests in the group ``digests``: its path, ``.`` for ``/``."""
    return path.replace("/", ".")


def _rmtree(p: Any) -> None:
    """Remove a temporary directory (or prefix) this process wrote."""
    if isinstance(p, str):
        fs, q = filesystem(p)
        try:
            fs.rm(q, recursive=True)
        except FileNotFoundError:
            pass
        fs.invalidate_cache(q)
    else:
        shutil.rmtree(p, ignore_errors=True)


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


def _invalid_fill(a: Any) -> bool:
    """Whether the array ``a`` has the fill value only stores with checksums have (``meta["integrity"]``'s
    ``"fill": "invalid"``): NaN for floats, -1 for integers (older stores: 0)."""
    fill = a.metadata.fill_value
    try:
        return bool(np.isnan(fill)) if a.dtype.kind == "f" else int(fill) == -1
    except (TypeError, ValueError):
        return False


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


# --------------------------------------------------------------------------- block checks
#
# Every block read passes Dataset.read_rows, and every block it returns has passed this check, so
# no kernel (in process, on a Dask worker, in predict/evaluate) ever sees an index it cannot use
# or a value that a missing chunk made up.  One compiled pass over the block's arrays.

#: Turn the content check of blocks off (``False``) -- for benchmarks/bench_validation.py only.
_CHECK_BLOCKS = True

_PTR_START, _PTR_DOWN, _PTR_BEYOND, _INDEX_RANGE, _INDEX_ORDER, _VALUE, _LABEL = range(1, 8)


@njit(**NUMBA_FLAGS)
def _csr_fault(indptr, indices, data, y, base, n_features, sorted_, finite, narrow):  # type: ignore[no-untyped-def]
    """The first fault of a CSR block as ``(code, row, position)``, ``(0, 0, 0)`` when sound.

    Row ``r`` holds ``indices[indptr[r] - base : indptr[r + 1] - base]`` (and the same of ``data``);
    ``y`` (empty: not checked) holds one label per row.  The pointers are checked row by row; the
    indices and values in flat, branch-free passes over the block's slice (vectorised: about
    0.2 ns a value), and only a block found faulty is walked again to say where."""
    n = indptr.shape[0] - 1
    m = min(indices.shape[0], data.shape[0])
    if n < 0:
        return 0, 0, 0
    p0 = indptr[0] - base
    if p0 < 0:
        return _PTR_START, 0, 0
    ptr = 0  # branch-free: the pointers of every row, then (only if one is wrong) which
    for r in range(n):
        lo = indptr[r] - base
        hi = indptr[r + 1] - base
        ptr += (hi < lo) | (hi > m)
    if ptr:
        for r in range(n):
            if indptr[r + 1] < indptr[r]:
                return _PTR_DOWN, r, 0
            if indptr[r + 1] - base > m:
                return _PTR_BEYOND, r, 0
    starts = 0  # rows that begin below their predecessor's last index (not a fault)
    if sorted_ and n > 1 and indptr[n] - base > p0 + 1:
        last = indptr[n] - base - 1
        for r in range(1, n):
            lo = indptr[r] - base
            k = min(max(lo, p0 + 1), last)  # clamped: read in bounds whether or not it counts
            starts += (lo > p0) & (lo < indptr[r + 1] - base) & (indices[k] <= indices[k - 1])
    p1 = indptr[n] - base
    ix = indices[p0:p1]  # sliced: loops over 0..len vectorise, loops over p0..p1 do not
    v = data[p0:p1]
    d = np.uint64(n_features)
    bad = 0
    down = 0  # positions whose index is not above the one before
    if ix.shape[0]:
        bad += np.uint64(ix[0]) >= d
        bad += finite and (v[0] - v[0]) != 0
    if finite and narrow:  # int32 indices and n_features <= 2^31: a negative index is >= 2^31 as uint32,
        d32 = np.uint32(n_features)  # so 32-bit lanes decide the same (17 % faster than 64-bit ones)
        for k in range(1, ix.shape[0]):
            j = ix[k]
            bad += np.uint32(j) >= d32
            down += j <= ix[k - 1]
            bad += (v[k] - v[k]) != 0
    elif finite:  # one fused pass: the block's arrays are read once (memory-bound on large blocks)
        for k in range(1, ix.shape[0]):
            j = ix[k]
            bad += np.uint64(j) >= d  # a negative index is a huge unsigned one
            down += j <= ix[k - 1]
            bad += (v[k] - v[k]) != 0  # NaN and infinities only
    else:
        for k in range(1, ix.shape[0]):
            j = ix[k]
            bad += np.uint64(j) >= d
            down += j <= ix[k - 1]
    if sorted_:
        bad += down - starts
    if bad:  # which one, and where
        for r in range(n):
            lo = indptr[r] - base
            for k in range(lo, indptr[r + 1] - base):
                j = indices[k]
                if j < 0 or j >= n_features:
                    return _INDEX_RANGE, r, k
                if sorted_ and k > lo and j <= indices[k - 1]:
                    return _INDEX_ORDER, r, k
                if finite and (data[k] - data[k]) != 0:
                    return _VALUE, r, k
    nf = 0
    for r in range(y.shape[0]):
        nf += (y[r] - y[r]) != 0
    if nf:
        for r in range(y.shape[0]):
            if (y[r] - y[r]) != 0:
                return _LABEL, r, 0
    return 0, 0, 0


@njit(**NUMBA_FLAGS)
def _dense_fault(X, y):  # type: ignore[no-untyped-def]
    """The first non-finite value of a dense block ``(code, row, column)``, ``(0, 0, 0)`` when sound."""
    for r in range(X.shape[0]):
        bad = False
        for c in range(X.shape[1]):
            v = X[r, c]
            bad |= (v - v) != 0
        if bad:
            for c in range(X.shape[1]):
                if (X[r, c] - X[r, c]) != 0:
                    return _VALUE, r, c
    for r in range(y.shape[0]):
        if (y[r] - y[r]) != 0:
            return _LABEL, r, 0
    return 0, 0, 0


_NO_LABELS = np.zeros(0, np.float64)


def block_fault(X: Any, y: np.ndarray | None = None, *, indptr_base: int = 0, sorted_indices: bool = True,
                finite: bool = True, first_row: int = 0) -> tuple[int, str] | None:
    """The first fault of a block, as ``(row, what)`` (``row`` counted from ``first_row``), or ``None``.

    ``X`` is a dense 2-D array, a scipy CSR matrix, or a tuple ``(indptr, indices, data, n_features)``
    whose ``indptr`` counts from ``indptr_base``.  Checked in one compiled pass: ``indptr`` never
    below its base and non-decreasing, within ``indices`` and ``data``; every index in
    ``[0, n_features)`` and (``sorted_indices``) strictly increasing within its row; with ``finite``
    every value finite; every label of ``y`` finite.  The one checker of the package: store blocks
    (:meth:`Dataset.read_rows`), ``Dataset.validate(full=True)`` and the estimators' in-memory input.
    """
    yy = _NO_LABELS if y is None else np.ascontiguousarray(y, dtype=np.float64)
    if sp.issparse(X) or isinstance(X, tuple):
        if isinstance(X, tuple):
            indptr, indices, data, d = X
        else:
            indptr, indices, data, d = X.indptr, X.indices, X.data, X.shape[1]
        if yy.size and yy.size != len(indptr) - 1:
            raise ValueError(f"{yy.size} labels for {len(indptr) - 1} rows")
        narrow = np.asarray(indices).dtype == np.int32 and 0 < int(d) <= 2**31
        code, r, k = _csr_fault(indptr, indices, data, yy, np.int64(indptr_base), np.int64(d),
                                bool(sorted_indices), bool(finite), narrow)
        if code == 0:
            return None
        row = first_row + int(r)
        what = {
            _PTR_START: lambda: f"X/indptr starts at {int(indptr[0])}, before {indptr_base}",
            _PTR_DOWN: lambda: f"X/indptr decreases at row {row} ({int(indptr[r])} -> {int(indptr[r + 1])})",
            _PTR_BEYOND: lambda: (f"X/indptr of row {row} points past the {len(indices)} stored indices "
                                  f"({int(indptr[r + 1]) - indptr_base})"),
            _INDEX_RANGE: lambda: f"feature index {int(indices[k])} of row {row} is outside [0, {int(d)})",
            _INDEX_ORDER: lambda: (f"feature indices of row {row} are not strictly increasing "
                                   f"({int(indices[k - 1])}, {int(indices[k])})"),
            _VALUE: lambda: f"value {data[k]} of row {row} is not finite",
            _LABEL: lambda: f"label {yy[r]} of row {row} is not finite",
        }[code]()
        return row, what
    Xd = np.asarray(X)
    if Xd.ndim != 2:
        raise ValueError(f"X must be 2-D; got shape {Xd.shape}")
    if Xd.dtype.kind != "f":  # integers are finite
        Xd = Xd[:, :0]
    code, r, c = _dense_fault(Xd, yy)
    if code == 0:
        return None
    row = first_row + int(r)
    if code == _VALUE:
        return row, f"value {Xd[r, c]} of row {row}, column {int(c)} is not finite"
    return row, f"label {yy[r]} of row {row} is not finite"


def check_matrix(X: Any, where: str = "X") -> None:
    """Refuse an in-memory sparse matrix that would make a kernel read or write out of bounds:
    a one-line ``ValueError`` naming the row (see :func:`block_fault`; values are not checked)."""
    if not sp.issparse(X):
        return
    X = X if X.format == "csr" else X.tocsr()
    if len(X.indptr) != X.shape[0] + 1:
        raise ValueError(f"{where}: indptr has {len(X.indptr)} entries for {X.shape[0]} rows")
    fault = block_fault(X, sorted_indices=False, finite=False)
    if fault is not None:
        raise ValueError(f"{where}: {fault[1]}")


# --------------------------------------------------------------------------- reading


class Dataset:
    """A complete, validated distlearn store opened for reading.

    Use :func:`open_dataset` to get one.  Blocks are read lazily and
    independently; the object pickles as its path, so Dask tasks reopen the
    store on their worker instead of shipping arrays through the scheduler.
    """

    def __init__(self, path: str | os.PathLike[str], *, _meta: dict[str, Any] | None = None,
                 _stamp_: tuple[int, int, int] | None = None) -> None:
        self.path = _loc(path)
        # The write stamp is taken before anything is read: a store replaced after this point
        # (even while the metadata is read) is refused at the next block read, never mixed.
        self.stamp = _stamp(self.path) if _stamp_ is None else _stamp_
        self._group = _open_group(self.path, "r")
        self.meta = _meta if _meta is not None else dict(self._group.attrs["distlearn"])
        self.layout: str = self.meta["layout"]
        self._y = self._group["y"]
        X = self._group["X"]
        if isinstance(X, zarr.Array) != (self.layout == "dense"):  # a lying layout: never read as the other
            raise StoreError(f"{self.path}: X is a zarr {'array' if isinstance(X, zarr.Array) else 'group'}, but the "
                             f"store's metadata says layout {self.layout!r} (damaged or edited)")
        if self.layout == "dense":
            self._X = X
        else:
            self._data, self._indices, self._indptr = X["data"], X["indices"], X["indptr"]
        arrays = (self._y, *((X,) if self.layout == "dense" else (self._data, self._indices, self._indptr)))
        self._check_integrity(arrays)
        self._chunk_grids: dict[str, Any] = {}
        bi = self._group["block_index"]
        #: Every chunk's digest per array path (meta["integrity"]["digests"]), or None (older stores).
        self._digests = self._load_digests((*arrays, bi))
        self.block_index = np.asarray(bi[:], dtype=np.int64)
        if self._digests is not None and chunk_digest(bi.path, bi.shape[0], 0, self.block_index.astype(bi.dtype)
                                                      ) != self._digests[bi.path][1][0]:
            raise StoreError(f"{self.path}: chunk block_index/c/0/0 is not the data written there (its digest "
                             "differs: copied from another store, or rewritten)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (open_dataset, (str(self.path),))

    def _check_integrity(self, arrays: tuple[Any, ...]) -> None:
        """Refuse a store whose checksums were hidden by an edit, before any read.

        A store written with a checksum in every chunk says so three times: the root's
        ``meta["integrity"]``, every array's crc32c codec, and every array's fill value (NaN for
        values and labels, -1 for indices and pointers; stores written before had 0).  Any one of
        them makes the others required: ``integrity`` without an array's codec, or a codec or an
        "invalid" fill without ``integrity`` (an edit that removed the record and the codecs, so a
        flipped byte would read silently, as in a pre-checksum store), is one :class:`StoreError`
        naming the store and the array.  A store with none of the three (fill 0, no codec, no record)
        reads as written before checksums: an edit that also sets every fill value back to 0 is
        indistinguishable from one, and reads as one."""
        if (self.meta.get("integrity") or {}).get("crc32c"):  # every chunk was written with its checksum:
            for a in arrays:
                if not any(isinstance(c, Crc32cCodec) for c in a.metadata.codecs):  # not dropped by an edit
                    raise StoreError(f"{self.path}: {a.path} has no crc32c codec, but the store was written "
                                     "with a checksum in every chunk (damaged or edited metadata)")
            return
        for a in arrays:
            if any(isinstance(c, Crc32cCodec) for c in a.metadata.codecs):
                why = "its crc32c codec"
            elif _invalid_fill(a):
                why = f"its fill value {'NaN' if a.dtype.kind == 'f' else -1}, never data"
            else:
                continue
            raise StoreError(f"{self.path}: the store's metadata has no integrity record, but {a.path} was written "
                             f"with a checksum in every chunk ({why}): damaged or edited metadata")

    def _load_digests(self, arrays: tuple[Any, ...]) -> dict[str, tuple[int, np.ndarray]] | None:
        """The chunk digests of ``arrays`` (``meta["integrity"]["digests"]``), checked whole, or None:
        per array path, the rows of a piece (:func:`digest_rows`) and the digest of every piece.

        A store written with them must have them all, one per piece of every array, themselves
        read through their crc32c checksum; a store whose record says nothing of digests but which
        has them (an edit that removed the record) is refused too -- in one :class:`StoreError` line
        naming the store and what is wrong, before any block is read."""
        p = self.path
        if not (self.meta.get("integrity") or {}).get("digests"):
            if DIGESTS in self._group:
                raise StoreError(f"{p}: the store's integrity record says nothing of chunk digests, but the store has "
                                 f"them ({DIGESTS}/): damaged or edited metadata")
            return None
        try:
            g = self._group[DIGESTS]
        except KeyError:
            raise StoreError(f"{p}: the store was written with a digest of every chunk, but {DIGESTS}/ is missing "
                             "(damaged or edited)") from None
        out = {}
        for a in arrays:
            where = f"{DIGESTS}/{_digest_name(a.path)}"
            try:
                d = g[_digest_name(a.path)]
            except KeyError:
                raise StoreError(f"{p}: {where}, the digests of {a.path}'s chunks, is missing (damaged or edited)") from None
            r = digest_rows(a.chunks[0])
            k = -(-a.shape[0] // r)
            if (not isinstance(d, zarr.Array) or d.dtype != np.uint32 or d.shape != (k,) or d.attrs.get("rows") != r
                    or tuple(a.chunks[1:]) != a.shape[1:]):
                raise StoreError(f"{p}: {where} does not hold one digest per piece of {a.path} ({k} pieces of {r} rows; "
                                 f"it has shape {getattr(d, 'shape', None)}, rows {d.attrs.get('rows')!r}): damaged or edited")
            if not any(isinstance(c, Crc32cCodec) for c in d.metadata.codecs):
                raise StoreError(f"{p}: {where} has no crc32c codec (damaged or edited metadata)")
            key = self._missing_chunk(d, 0, k)
            if key is not None:
                raise StoreError(f"{p}: chunk {key} is missing (the digests of {a.path}'s chunks)")
            out[a.path] = (r, np.asarray(d[:], dtype=np.uint32))
        return out

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
        """The sorted class labels (numbers, or the class names of a store of names), or None."""
        names = self.class_names
        if names is not None:
            return names
        c = self.meta.get("classes")
        return None if c is None else np.asarray(c, dtype=self.label_dtype)

    @property
    def class_names(self) -> np.ndarray | None:
        """A store of class names: the sorted names (``y`` holds codes into them), else None."""
        names = self.meta.get("class_names")
        return None if names is None else np.asarray(names, dtype=str)

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
    def _where(self, row: int) -> str:
        """``STORE: block B (rows a..b)``: the block that holds ``row``."""
        bounds = self.block_index[:, 0]
        b = int(min(max(np.searchsorted(bounds, row, side="right") - 1, 0), max(self.n_blocks - 1, 0)))
        return f"{self.path}: block {b} (rows {int(bounds[b])}..{int(bounds[b + 1]) - 1})"

    def _check_stamp(self, row: int) -> None:
        """Refuse to go on when the store at ``self.path`` is no longer the one opened."""
        if _stamp(self.path) != self.stamp:
            b = self._where(row).rsplit(": block ", 1)[1].split(" ")[0]
            raise StoreError(f"{self.path}: the store was replaced while it was being read (block {b}); "
                             "rerun on the new store")

    def _missing_chunk(self, a: Any, lo: int, hi: int) -> str | None:
        """The key of the first chunk of ``a`` that its rows ``lo:hi`` need and the store lacks.

        zarr reads a missing chunk as the fill value (zeros in stores written before
        ``meta["integrity"]``), so it is looked for before the read: a file under the array's
        ``c/`` directory for a local store (zarr v3 keys, ``c/0/1``), ``store.exists`` otherwise."""
        if hi <= lo:
            return None
        grid = self._chunk_grids.get(a.path)
        if grid is None:
            store, base = a.store_path.store, a.store_path.path
            rest = list(itertools.product(*(range(-(-n // c)) for n, c in zip(a.shape[1:], a.chunks[1:]))))
            root = str(store.root) if isinstance(store, LocalStore) else None
            grid = self._chunk_grids[a.path] = (a.chunks[0], rest, base, root, store, a.metadata)
        c0, rest, base, root, store, meta = grid
        for i in range(lo // c0, (hi - 1) // c0 + 1):
            for r in rest:
                key = f"{base}/{meta.encode_chunk_key((i, *r))}".lstrip("/")
                if root is not None:
                    there = os.path.exists(os.path.join(root, key))
                else:
                    from zarr.core.sync import sync

                    there = sync(store.exists(key))
                if not there:
                    return key
        return None

    def _refuse_missing(self, a: Any, lo: int, hi: int, row: int) -> None:
        """Refuse, naming the block of ``row``, a chunk that ``a[lo:hi]`` needs and the store lacks."""
        key = self._missing_chunk(a, lo, hi)
        if key is not None:
            old = "" if self.meta.get("integrity") else (
                "; this store predates per-chunk checksums, when zarr did not write chunks that were all "
                "zeros: if that is the case, convert it again")
            raise StoreError(f"{self._where(row)}: chunk {key} is missing{old}")

    def _chunk_key(self, a: Any, i: int) -> str:
        return f"{a.path}/{a.metadata.encode_chunk_key((i,) + (0,) * (a.ndim - 1))}"

    def _get(self, a: Any, lo: int, hi: int, row: int, moved: list[tuple[Any, int]] | None = None) -> np.ndarray:
        """``a[lo:hi]``, refused in one line (naming the block of ``row``) when a chunk is missing, or
        (a store with chunk digests) holds what was not written at its place.

        With digests the read takes the whole digested pieces it touches (:func:`digest_rows`: whole
        chunks, or pieces of ``2**16`` rows of larger ones) and checks each one's digest (a missing chunk
        reads as the fill value, whose digest never matches: the store is not asked for every chunk
        first); ``moved`` collects the chunks whose pieces do not match, else the first is refused
        here -- as missing when it is, else as not the data written there.  Without digests every
        chunk is looked for before the read."""
        digests = None if self._digests is None else self._digests.get(a.path)
        if digests is None or hi <= lo:
            if digests is None:
                self._refuse_missing(a, lo, hi, row)
            return np.asarray(a[lo:hi])
        (r, dig), c, n = digests, a.chunks[0], a.shape[0]
        j0, j1 = lo // r, (hi - 1) // r + 1
        w0 = j0 * r
        v = np.asarray(a[w0:min(j1 * r, n)])
        for j in range(j0, j1):
            if chunk_digest(a.path, n, j, v[(j - j0) * r:(j - j0 + 1) * r]) != dig[j]:
                if moved is None:
                    self._refuse_moved([(a, j * r // c)], row)
                if not any(m is a and i == j * r // c for m, i in moved):
                    moved.append((a, j * r // c))
        if v.shape[0] - (hi - lo) > hi - lo:  # a few rows of a large piece: not a view that keeps it in memory
            return v[lo - w0:hi - w0].copy()
        return v[lo - w0:hi - w0]

    def _refuse_moved(self, moved: list[tuple[Any, int]], row: int, line: str | None = None) -> None:
        """Refuse the first chunk of ``moved`` whose digest did not match: missing, or not its data
        (added to ``line``, the refusal of what the read found wrong in the values, when there is one)."""
        for a, i in moved:
            c = a.chunks[0]
            self._refuse_missing(a, i * c, min((i + 1) * c, a.shape[0]), row)
        a, i = moved[0]
        what = (f"chunk {self._chunk_key(a, i)} is not the data written there (its digest differs: a chunk file moved, "
                "copied or rewritten)")
        raise StoreError(f"{self._where(row)}: {what}" if line is None else f"{line}; {what}")

    def _refuse_any_missing(self, start: int, stop: int) -> None:
        """After a read of rows ``start:stop`` that failed: a chunk it needs that is missing (deleted
        since it was read, or before: a store with digests is not asked first) is what is said."""
        row = min(start, self.n_samples - 1)
        self._refuse_missing(self._y, start, stop, row)
        if self.layout == "dense":
            self._refuse_missing(self._X, start, stop, row)
            return
        self._refuse_missing(self._indptr, start, stop + 1, row)
        bounds = self.block_index[:, 0]
        b0 = int(min(max(np.searchsorted(bounds, start, side="right") - 1, 0), self.n_blocks - 1))
        b1 = int(min(max(np.searchsorted(bounds, max(stop - 1, start), side="right") - 1, 0), self.n_blocks - 1))
        n0, n1 = int(self.block_index[b0, 1]), int(self.block_index[b1 + 1, 1])
        self._refuse_missing(self._indices, n0, n1, row)
        self._refuse_missing(self._data, n0, n1, row)

    def _read(self, start: int, stop: int, moved: list[tuple[Any, int]] | None = None) -> tuple[Any, np.ndarray]:
        """The raw arrays of rows ``start:stop``: ``(X, y)`` with CSR as ``(indptr, indices, data)``;
        ``moved`` collects the chunks whose digest does not match (see :meth:`_get`)."""
        y = self._get(self._y, start, stop, start, moved)
        if self.layout == "dense":
            return self._get(self._X, start, stop, start, moved), y
        indptr = np.asarray(self._get(self._indptr, start, stop + 1, start, moved), dtype=np.int64)
        # indptr against block_index at every block boundary of the range: a block's pointers start
        # at its recorded offset and end at its recorded number of values.
        bounds = self.block_index[:, 0]
        at = np.flatnonzero((bounds >= start) & (bounds <= stop))
        off = np.flatnonzero(indptr[bounds[at] - start] != self.block_index[at, 1])
        if off.size:
            k = int(at[off[0]])
            row = min(int(bounds[k]), self.n_samples - 1)
            raise StoreError(f"{self._where(row)}: X/indptr at row {int(bounds[k])} "
                             f"is {int(indptr[bounds[k] - start])}, block_index says {int(self.block_index[k, 1])}")
        n0, n1 = int(indptr[0]), int(indptr[-1])
        if not 0 <= n0 <= n1 <= self.nnz:
            raise StoreError(f"{self._where(start)}: X/indptr runs from {n0} to {n1}, outside [0, nnz={self.nnz}]")
        return (indptr, self._get(self._indices, n0, n1, start, moved), self._get(self._data, n0, n1, start, moved)), y

    def read_rows(self, start: int, stop: int) -> Block:
        """Rows ``start:stop`` (any range, not only a block), checked.

        Every chunk they need must exist (a missing chunk is an error, never zeros), decode (its
        crc32c checksum, in stores that have one) and, in stores with chunk digests, be the data
        written at its place (every chunk the rows touch is read whole and its digest checked: a
        chunk file moved or copied is refused); the store must still be the one opened
        (:attr:`stamp`); and the block must be sound (:func:`block_fault`: pointers, indices in
        ``[0, n_features)`` and sorted within a row, finite values and labels).  Any failure is one
        :class:`StoreError` line ``STORE: block B (rows a..b): what``; when a chunk the rows need is
        missing (even deleted after it was looked for), that is what it says."""
        if not 0 <= start <= stop <= self.n_samples:
            raise IndexError(f"rows {start}:{stop} out of range for {self.n_samples} samples")
        moved: list[tuple[Any, int]] = []
        try:
            X, y = self._read(start, stop, moved)
        except StoreError as e:
            self._check_stamp(start)  # a failure because the store was swapped says so
            self._refuse_any_missing(start, stop)
            if moved:
                self._refuse_moved(moved, start, str(e))
            raise
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as e:  # a chunk that does not decode (a checksum that does not match, ...)
            self._check_stamp(start)
            self._refuse_any_missing(start, stop)
            msg = " ".join(str(e).split())
            raise StoreError(f"{self._where(start)} cannot be read: {type(e).__name__}: {msg}") from e
        self._check_stamp(start)
        if self.layout == "dense":
            fault = block_fault(X, y, first_row=start) if _CHECK_BLOCKS else None
        else:
            indptr, indices, data = X
            fault = block_fault((indptr, indices, data, self.n_features), y, indptr_base=int(indptr[0]),
                                first_row=start) if _CHECK_BLOCKS else None
        if fault is not None or moved:  # a chunk deleted since it was looked for reads as the fill value
            self._refuse_any_missing(start, stop)
            line = None if fault is None else f"{self._where(fault[0])}: {fault[1]}"
            if moved:
                self._refuse_moved(moved, start, line)
            raise StoreError(line)
        if self.layout != "dense":
            X = sp.csr_matrix((data, indices, indptr - indptr[0]), shape=(stop - start, self.n_features))
            X.has_sorted_indices = True
        y = y.astype(self.label_dtype, copy=False)
        names = self.class_names
        if names is not None:  # codes -> the names: what every reader of the store sees
            bad = np.flatnonzero((y < 0) | (y >= len(names)))
            if bad.size:
                r = start + int(bad[0])
                raise StoreError(f"{self._where(r)}: row {r}'s label code {int(y[bad[0]])} is not one of the "
                                 f"store's {len(names)} class names (damaged or edited)")
            y = names[y]
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
        classes = self.meta.get("classes") if self.class_names is None else self.class_names.tolist()
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
        # Every block through the one checked read: every chunk present and decoded (its crc32c
        # checksum verified), block_index, pointers, indices, values and labels.
        classes = self.classes
        for i in range(self.n_blocks):
            y = self.read_block(i).y
            if classes is not None and len(y):
                unknown = np.setdiff1d(np.unique(y), classes)
                if unknown.size:
                    lo, hi = (int(v) for v in self.block_bounds[i:i + 2])
                    raise StoreError(f"{p}: block {i} (rows {lo}..{hi - 1}): labels {unknown[:5].tolist()} are not "
                                     f"among the metadata's classes {classes.tolist()[:10]}")


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
        names = _label_names_map(self.meta)
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
        self.path = _loc(f"{base.path}#{target}")
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
            ip = np.asarray(base._get(base._indptr, 0, base.n_samples + 1, 0), dtype=np.int64)
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
        self.meta.pop("class_names", None)  # a view's labels are -1/+1

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
    y = np.asarray(ds._get(ds._y, 0, ds.n_samples, 0), dtype=np.float64)
    names = _label_names_map(ds.meta)
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


def _label_names_map(meta: dict[str, Any]) -> dict[str, str]:
    """The names of the stored label values, ``{"0": "CCAT", ...}``: RCV1's ``label_names``, or the
    codes of a store of class names (``class_names``), which views select by name."""
    if meta.get("class_names") is not None:
        return {str(i): n for i, n in enumerate(meta["class_names"])}
    return dict(meta.get("label_names") or {})


def _stamp(path: Any) -> tuple[Any, ...]:
    """Which write of the store at ``path`` this is: (device, inode, mtime in ns) of its ``zarr.json``;
    at a URL its (ETag, modification time, size), ``("", "", -1)`` when it is gone.

    A store rewritten in place (even with the same metadata) has a new ``zarr.json``, so caches of
    decoded blocks (:mod:`distlearn.stream`) never serve an older write's blocks."""
    if isinstance(path, str):
        fs, q = filesystem(path)
        try:
            fs.invalidate_cache(q)
            info = fs.info(f"{q}/zarr.json")
        except (OSError, ValueError):
            return ("", "", -1)
        tag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("crc32c") or ""
        when = info.get("LastModified") or info.get("mtime") or info.get("updated") or info.get("created") or ""
        return (str(tag), str(when), int(info.get("size") or 0))
    try:
        st = os.stat(path / "zarr.json")
    except OSError:
        return (0, 0, 0)
    return (int(st.st_dev), int(st.st_ino), int(st.st_mtime_ns))


def _du(path: Any) -> int:
    if isinstance(path, str):
        fs, q = filesystem(path)
        return int(fs.du(q))
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: What every key of a store's ``distlearn`` metadata must hold (every store format version writes
#: these); a damaged or edited value is refused when the store is opened, not used.
_META_SCHEMA: dict[str, tuple[Callable[[Any], bool], str]] = {
    "n_samples": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "n_features": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "nnz": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "dtype": (lambda v: v in _DTYPES, f"one of {sorted(_DTYPES)}"),
    "block_rows": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "n_blocks": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "classes": (lambda v: v is None or (isinstance(v, list) and all(_is_number(c) for c in v)
                                        and v == sorted(set(v))), "null or a sorted list of distinct numbers"),
    "class_counts": (lambda v: v is None or (isinstance(v, list) and all(_is_int(c) and c >= 0 for c in v)),
                     "null or a list of counts"),
    "label_kind": (lambda v: v in ("integer", "float"), "'integer' or 'float'"),
}


def _check_meta(p: Path, meta: dict[str, Any]) -> None:
    """Refuse, in one line, a store whose metadata is missing a key or holds a value of the wrong kind."""
    for key, (ok, what) in _META_SCHEMA.items():
        if key not in meta:
            raise StoreError(f"{p}: the store's metadata has no {key!r} (damaged or edited)")
        if not ok(meta[key]):
            raise StoreError(f"{p}: the store's metadata {key}={meta[key]!r} is not {what} (damaged or edited)")
    counts = meta["class_counts"]
    if (meta["classes"] is None) != (counts is None) or (counts is not None and (
            len(counts) != len(meta["classes"]) or sum(counts) != meta["n_samples"])):
        raise StoreError(f"{p}: the store's metadata classes and class_counts disagree (damaged or edited)")
    if meta.get("index_dtype") not in (None, "int32", "int64"):
        raise StoreError(f"{p}: the store's metadata index_dtype={meta['index_dtype']!r} is not int32 or int64")
    names = meta.get("class_names")
    if names is not None and not (
            isinstance(names, list) and all(isinstance(n, str) and n for n in names) and names == sorted(set(names))
            and meta["classes"] == list(range(len(names))) and meta["format_version"] >= 2):
        raise StoreError(f"{p}: the store's metadata class_names is not a sorted list of distinct names, one per "
                         "class code 0..k-1 of a format-2 store (damaged or edited)")


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
    p = _loc(path)
    if target is None and "#" in _name(p) and not _exists(p):
        base, _, target = os.fspath(p).rpartition("#")
        p = _loc(base)
    if target is not None and not target:
        raise StoreError(f"{p}: empty target after '#'")
    try:
        there = _exists(p)
    except OSError as e:  # object storage: credentials, endpoint, network -- one line naming the store
        if not isinstance(p, str):
            raise
        raise StoreError(f"{p}: cannot be reached ({type(e).__name__}: {' '.join(str(e).split())})") from e
    if not there:
        raise FileNotFoundError(f"{p}: no such store")
    if _PARTIAL in _name(p):
        raise StoreError(f"{p}: this is the temporary directory of an unfinished write")
    if isinstance(p, (str, os.PathLike)) and os.path.isfile(p):  # a store is a directory: this is a data file
        raise StoreError(f"{p}: a file, not a store (a directory distlearn convert writes): read it into memory with "
                         f"distlearn.data.readers.read_arrays({os.fspath(p)!r}) and fit the arrays, or convert it once "
                         f"(distlearn convert {os.fspath(p)} STORE.zarr) and stream the store")
    stamp = _stamp(p)  # before the metadata is read: see Dataset.__init__
    try:
        group = _open_group(p, "r")
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
    _check_meta(p, meta)
    try:
        ds = Dataset(p, _meta=dict(meta), _stamp_=stamp)
    except KeyError as e:
        raise StoreError(f"{p}: missing array {e}") from e
    except (MemoryError, KeyboardInterrupt, StoreError):
        raise
    except Exception as e:  # block_index that does not decode (its checksum), an array's metadata ...
        msg = " ".join(str(e).split())
        raise StoreError(f"{p}: cannot be opened: {type(e).__name__}: {msg}") from e
    if validate:
        ds.validate(full=validate == "full")
    return ds if target is None else DatasetView(ds, target)
