"""The block stream: the one way every learner, in process or on a Dask worker, sees data.

Everything that decides *which rows a learner sees, in which order and in which
form* lives here, once:

* the **order** of an epoch -- for a store, a seeded permutation of its blocks
  and of the rows inside each block (:func:`block_order`, :func:`row_order`);
  for in-memory arrays, a seeded permutation of all rows (:func:`array_order`), which is also
  the permutation of a one-block store's rows, so an array and its one-block store train alike.
  Each is a pure function of ``(seed, epoch[, block])``, so the order does not
  depend on how the work is cut into tasks or on how many workers run them;
* **reading and coercion** of a block (:func:`read_block`, :func:`coerce`): the
  weights' dtype, C order for dense blocks, errors that name the store and block;
* **label encoding** (:func:`classes_of`, :func:`encode_labels`): labels to
  indices into the sorted ``classes_``, the one encoder of the package;
* the **store token** and the per-process **store cache** (:func:`store_token`,
  :func:`open_store`): a worker opens a store once and checks that it is still
  the store the job was planned on;
* the per-process **block cache** (:func:`cached_block`): a block is read,
  decoded and coerced once per process and dtype, then shared by every learner
  group (thread) of that process and kept for the next epochs and jobs while it
  fits in ``DISTLEARN_BLOCK_CACHE_BYTES`` (see :func:`block_cache_bytes`);
* the one-ahead **prefetch** of :func:`epoch_chunks`: block ``b+1`` is read on a
  helper thread while the kernel (which releases the GIL) runs on block ``b``.

:func:`epoch_chunks` puts these together: the chunks of one epoch (or of a
subset of its blocks: a segment of a learner-parallel job, a shard of a
data-parallel one), each ready for a compiled kernel.  The estimators, the
learner-parallel OBPM tasks and the data-parallel shard tasks all read their
data through it; that is what makes their results bit-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from . import rng
from ._config import read_timeout
from ._urls import absolute
from .data.store import Dataset, StoreError, open_dataset

__all__ = [
    "BLOCK_CACHE_ENV",
    "PREFETCH_ENV",
    "Chunk",
    "array_order",
    "block_cache_bytes",
    "block_cache_info",
    "block_order",
    "cached_block",
    "classes_of",
    "clear_block_cache",
    "coerce",
    "encode_labels",
    "epoch_chunks",
    "is_store",
    "open_store",
    "read_block",
    "row_order",
    "store_token",
]


# --------------------------------------------------------------------------- input kinds


def is_store(X: Any) -> bool:
    """True for a distlearn store given as a path or a :class:`~distlearn.data.store.Dataset`."""
    return isinstance(X, (str, os.PathLike, Dataset))


# --------------------------------------------------------------------------- orders


def block_order(seed: int, epoch: int, n_blocks: int, shuffle: bool) -> np.ndarray:
    """The order in which epoch ``epoch`` visits a store's blocks."""
    if not shuffle:
        return np.arange(n_blocks, dtype=np.int64)
    return rng.block_generator(seed, "shuffle-blocks", epoch).permutation(n_blocks).astype(np.int64)


def row_order(seed: int, epoch: int, block: int, n_rows: int, shuffle: bool,
              n_blocks: int = 2) -> np.ndarray | None:
    """The order of the rows inside store block ``block`` of ``n_blocks`` in epoch ``epoch`` (None:
    stored order).  The rows of a store of one block are permuted as an array's (:func:`array_order`)."""
    if not shuffle:
        return None
    if n_blocks == 1:
        return array_order(seed, epoch, n_rows, shuffle)
    return rng.block_generator(seed, "shuffle-rows", epoch * (1 << 32) + int(block)).permutation(n_rows)


def array_order(seed: int, epoch: int, n_rows: int, shuffle: bool) -> np.ndarray | None:
    """The order of an in-memory training set's rows in epoch ``epoch`` (None: given order).

    A store of one block is visited in this order too (:func:`row_order`), so the same data as an
    array and as a one-block store trains the same model.  A store of several blocks is visited
    block by block (:func:`block_order`), each block's rows in their own permutation: not the
    array's permutation of all rows.
    """
    if not shuffle:
        return None
    return rng.block_generator(seed, "shuffle", epoch).permutation(n_rows)


# --------------------------------------------------------------------------- labels


def classes_of(y: np.ndarray) -> np.ndarray:
    """The sorted distinct labels of ``y`` (one bincount for small integer ranges)."""
    y = np.asarray(y)
    if y.dtype.kind in "iu" and len(y):
        lo = int(y.min())
        span = int(y.max()) - lo + 1
        if span <= 1 << 20:
            return np.flatnonzero(np.bincount((y - lo).astype(np.intp), minlength=span)).astype(y.dtype) + lo
    return np.unique(y)


def encode_labels(classes: np.ndarray, y: np.ndarray, where: str = "") -> np.ndarray:
    """Labels -> int64 indices into the sorted ``classes``; unknown labels are named in the error.

    ``where`` (e.g. ``"store s.zarr, block 3"``) starts the error message.

    >>> encode_labels(np.array([-1, 1]), np.array([1, -1, 1])).tolist()
    [1, 0, 1]
    """
    y = np.asarray(y)
    classes = np.asarray(classes)
    prefix = f"{where}: " if where else ""
    if y.dtype.kind in "iu" and classes.dtype.kind in "iu" and len(y):
        # Integer labels: a lookup table over [min, max] (one gather) when the
        # range is small, instead of a binary search per label.
        lo, hi = int(y.min()), int(y.max())
        if hi - lo < 1 << 20:
            lut = np.full(hi - lo + 1, -1, np.int64)
            inside = classes[(classes >= lo) & (classes <= hi)]
            lut[inside.astype(np.int64) - lo] = np.searchsorted(classes, inside)
            idx = lut[(y - lo).astype(np.intp)]
            if idx.min() < 0:
                unknown = np.unique(y[idx < 0])[:5]
                raise ValueError(f"{prefix}y contains labels not in classes_ {classes.tolist()}: {unknown.tolist()}")
            return idx
    idx = np.searchsorted(classes, y)
    idx[idx >= len(classes)] = 0
    bad = classes[idx] != y if len(classes) else np.ones(len(y), bool)
    if np.any(bad):
        unknown = np.unique(y[bad])[:5]
        raise ValueError(f"{prefix}y contains labels not in classes_ {classes.tolist()}: {unknown.tolist()}")
    return idx.astype(np.int64)


# --------------------------------------------------------------------------- stores


def store_token(ds: Dataset) -> str:
    """A fingerprint of a store's content: a hash of its metadata (shape, nnz, creation time ...).

    A job records it when it is planned; a task that opens the store on a worker
    checks it, so a store rewritten in between is an error, not a silent mix.
    """
    meta = {k: v for k, v in ds.meta.items() if k != "class_counts"}
    return hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


_STORES: OrderedDict[tuple[str, str], Dataset] = OrderedDict()
_STORES_LOCK = threading.Lock()
_STORES_MAX = 8


def open_store(path: str | os.PathLike[str], token: str | None = None) -> Dataset:
    """The store at ``path``, opened once per process and kept (at most 8 stores, least recent dropped).

    With ``token`` the store must still have that :func:`store_token`.
    """
    key = (absolute(path), token or "")  # a URL as it is: each process opens it itself
    with _STORES_LOCK:
        ds = _STORES.get(key)
        if ds is not None:
            _STORES.move_to_end(key)
    # A store rewritten in place since it was opened (same metadata, new files) is opened again,
    # so that the block cache, keyed by the write (Dataset.stamp), never serves the old blocks.
    if ds is not None and ds.stamp == _disk_stamp(ds):
        return ds
    ds = open_dataset(key[0])
    if token is not None and store_token(ds) != token:
        raise StoreError(f"{key[0]}: the store changed after the job was planned (its metadata differs)")
    with _STORES_LOCK:
        _STORES[key] = ds
        while len(_STORES) > _STORES_MAX:
            _STORES.popitem(last=False)
    return ds


def _disk_stamp(ds: Dataset) -> Any:
    from .data.store import _stamp

    return _stamp(ds._base.path if hasattr(ds, "_base") else ds.path)


def coerce(X: Any, dtype: Any) -> Any:
    """A block in the weights' dtype: CSR values cast (no copy when they already are), dense in C order."""
    dt = np.dtype(dtype)
    if sp.issparse(X):
        return X.astype(dt, copy=False)
    return np.ascontiguousarray(X, dtype=dt)


def read_block(ds: Dataset, b: int) -> Any:
    """Block ``b`` of ``ds``, checked (:meth:`Dataset.read_rows`: every chunk present and intact,
    the store not replaced since it was opened, indices in range and sorted, values and labels
    finite); a failure to read it is one :class:`StoreError` line naming the store and the block."""
    try:
        return ds.read_block(int(b))
    except (IndexError, KeyboardInterrupt, StoreError):
        raise
    except Exception as exc:  # a corrupt or missing chunk: one line naming the store, block and rows
        lo, hi = (int(v) for v in ds.block_bounds[int(b):int(b) + 2])
        raise StoreError(f"{ds.path}: block {int(b)} (rows {lo}..{hi - 1}) cannot be read: "
                         f"{type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- the block cache

#: Environment variable: the byte budget of the per-process block cache.  An integer number of
#: bytes, a size with a unit (``"512MiB"``, ``"2GB"``), a percentage of the memory this process
#: may use (``"25%"``, the default in a Dask worker), or ``0`` to keep nothing (the default in any
#: other process, so that a fit in a user's process keeps no decoded blocks after it; blocks are
#: still shared by the groups reading them at the same time).
BLOCK_CACHE_ENV = "DISTLEARN_BLOCK_CACHE_BYTES"
#: Environment variable: ``0`` turns off the one-ahead prefetch of :func:`epoch_chunks`.
PREFETCH_ENV = "DISTLEARN_PREFETCH"
_BLOCK_CACHE_DEFAULT = "25%"
_BLOCK_CACHE_STORES = 8
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _worker_limit() -> int:
    """The ``memory_limit`` of this process's Dask worker(s), or 0 outside a worker."""
    if "distributed" in sys.modules:  # never imported for this
        try:
            from distributed.worker import Worker, get_worker

            try:
                workers = [get_worker()]
            except ValueError:  # not in a task's context (a prefetch thread): the workers of this process
                workers = list(Worker._instances)
            limits = [int(w.memory_manager.memory_limit or 0) for w in workers]
            if limits and min(limits) > 0:
                return min(limits)
        except (AttributeError, ImportError, TypeError):  # not a worker process
            pass
    return 0


def _memory_limit() -> int:
    """The memory this process may use: its Dask worker's ``memory_limit``, else the machine's RAM."""
    limit = _worker_limit()
    if limit:
        return limit
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def block_cache_bytes(setting: str | None = None) -> int:
    """The block cache's byte budget in this process: ``setting``, else ``$DISTLEARN_BLOCK_CACHE_BYTES``,
    else, in a Dask worker, 25 % of its ``memory_limit``, and 0 in any other process (a fit in the
    user's process keeps no decoded blocks after it; set the variable, e.g. ``25%`` of the RAM, to
    keep them across epochs there too).

    >>> block_cache_bytes("512MiB"), block_cache_bytes("2GB"), block_cache_bytes("0")
    (536870912, 2000000000, 0)
    """
    text = (setting if setting is not None else os.environ.get(BLOCK_CACHE_ENV, "")).strip() or (
        _BLOCK_CACHE_DEFAULT if _worker_limit() else "0")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(%|[a-zA-Z]*)", text)
    unit = m.group(2).lower() if m else None
    if m is None or (unit != "%" and unit not in _UNITS):
        raise ValueError(f"{BLOCK_CACHE_ENV}={text!r}: expected bytes (e.g. 2000000000, 512MiB, 2GB), "
                         "a percentage of the memory (25%) or 0")
    value = float(m.group(1))
    if unit == "%":
        return int(_memory_limit() * value / 100)
    return int(value * _UNITS[unit])


def _nbytes(value: Any) -> int:
    X, y, _ = value
    if hasattr(X, "indptr"):
        n = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    else:
        n = X.nbytes
    return int(n + y.nbytes + 200)


def _wait_read(fut: Future, where: str) -> Any:
    """The result of a block read another thread runs, within :func:`~distlearn._config.read_timeout`:
    a read that does not finish in time is one :class:`StoreError` line naming the block."""
    limit = read_timeout()
    try:
        return fut.result(timeout=limit)
    except FutureTimeout:
        raise StoreError(f"{where} was not read within {limit:g} s (a stuck file system or object store? "
                         "DISTLEARN_READ_TIMEOUT sets the deadline)") from None


class _BlockCache:
    """Decoded blocks of this process, keyed by (store write, block, dtype); thread-safe.

    *Shared*: a block that several threads ask for at once is read once (the others wait for it).
    *Kept*: within the byte budget a store keeps the **first blocks that fit** -- its blocks are
    never evicted for another of its own blocks, which for epochs that visit every block in a
    shuffled order keeps a fixed share of them (an LRU would keep almost none once the store
    outgrows the budget).  A store that needs room evicts the blocks of the stores used least
    recently (whole stores; at most 8 stores are kept).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: OrderedDict[Any, dict[Any, tuple[Any, int]]] = OrderedDict()
        self._loading: dict[Any, Future] = {}
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, skey: Any, bkey: Any, load: Callable[[], Any], where: str = "a block") -> Any:
        with self._lock:
            blocks = self._stores.get(skey)
            if blocks is not None:
                self._stores.move_to_end(skey)
                hit = blocks.get(bkey)
                if hit is not None:
                    self.hits += 1
                    return hit[0]
            fut = self._loading.get((skey, bkey))
            owner = fut is None
            if owner:
                fut = Future()
                self._loading[(skey, bkey)] = fut
                self.misses += 1
        if not owner:
            return _wait_read(fut, where)
        try:
            value = load()
        except BaseException as exc:
            with self._lock:
                del self._loading[(skey, bkey)]
            fut.set_exception(exc)
            raise
        try:
            budget = block_cache_bytes()
        except ValueError:
            with self._lock:
                del self._loading[(skey, bkey)]
            fut.set_result(value)
            raise
        with self._lock:
            del self._loading[(skey, bkey)]
            self._admit(skey, bkey, value, _nbytes(value), budget)
        fut.set_result(value)
        return value

    def _admit(self, skey: Any, bkey: Any, value: Any, nbytes: int, budget: int) -> None:
        if nbytes > budget:
            return
        while self.bytes + nbytes > budget or (skey not in self._stores and len(self._stores) >= _BLOCK_CACHE_STORES):
            other = next((k for k in self._stores if k != skey), None)
            if other is None:
                return  # the store's own first blocks stay; this one is not kept
            self._drop(other)
        self._stores.setdefault(skey, {})[bkey] = (value, nbytes)
        self._stores.move_to_end(skey)
        self.bytes += nbytes

    def _drop(self, skey: Any) -> None:
        for _v, n in self._stores.pop(skey).values():
            self.bytes -= n

    def clear(self) -> None:
        with self._lock:
            self._stores.clear()
            self.bytes = 0
            self.hits = self.misses = 0

    def info(self) -> dict[str, Any]:
        with self._lock:
            return {"bytes": self.bytes, "blocks": sum(len(v) for v in self._stores.values()),
                    "stores": len(self._stores), "hits": self.hits, "misses": self.misses}


_BLOCK_CACHE = _BlockCache()


def clear_block_cache() -> None:
    """Forget every decoded block kept by this process (and its hit/miss counts)."""
    _BLOCK_CACHE.clear()


def block_cache_info() -> dict[str, Any]:
    """This process's block cache: ``bytes``, ``blocks`` and ``stores`` kept, ``hits``, ``misses``."""
    return _BLOCK_CACHE.info()


def _store_key(ds: Dataset) -> Any:
    """Which store *and which write of it* ``ds`` is (its path, token and file stamp)."""
    key = getattr(ds, "_block_cache_key", None)
    if key is None:
        key = (str(ds.path), store_token(ds), getattr(ds, "stamp", None))
        ds._block_cache_key = key  # type: ignore[attr-defined]
    return key


def _load_block(ds: Dataset, b: int, dtype: np.dtype) -> tuple[Any, np.ndarray, int]:
    block = read_block(ds, b)
    return coerce(block.X, dtype), np.asarray(block.y), int(block.first_row)


def cached_block(ds: Dataset, b: int, dtype: Any) -> tuple[Any, np.ndarray, int]:
    """Block ``b`` of ``ds`` as ``(X in dtype, labels, first row)``, through the block cache.

    The arrays are shared with every other reader of the block in this process: read only.
    """
    dt = np.dtype(dtype)
    return _BLOCK_CACHE.get(_store_key(ds), (int(b), dt.name), lambda: _load_block(ds, int(b), dt),
                            where=f"{ds.path}: block {int(b)}")


_PREFETCH: tuple[int, ThreadPoolExecutor] | None = None
_PREFETCH_LOCK = threading.Lock()


def _prefetch_pool() -> ThreadPoolExecutor | None:
    """The process's prefetch threads (a new pool in a forked child), or None when turned off."""
    global _PREFETCH
    if os.environ.get(PREFETCH_ENV, "1").strip() == "0":
        return None
    with _PREFETCH_LOCK:
        if _PREFETCH is None or _PREFETCH[0] != os.getpid():
            _PREFETCH = (os.getpid(), ThreadPoolExecutor(4, thread_name_prefix="distlearn-prefetch"))
        return _PREFETCH[1]


class Chunk(NamedTuple):
    """One block of an epoch, ready for a kernel."""

    X: Any                    #: the block's rows in the weights' dtype (CSR or C-ordered dense)
    y: np.ndarray             #: int64 class indices
    order: np.ndarray | None  #: the rows in visiting order (None: stored order)
    block: int                #: the block's index in the store
    first_row: int            #: the store row of the block's first row

    @property
    def tids(self) -> np.ndarray:
        """The store row of every row of the block (OBPM's example index ``t``)."""
        return np.arange(self.first_row, self.first_row + self.X.shape[0], dtype=np.int64)

    @property
    def where(self) -> str:
        return f"block {self.block} (first row {self.first_row})"


def epoch_chunks(ds: Dataset, *, seed: int, epoch: int, shuffle: bool, classes: np.ndarray, dtype: Any,
                 blocks: Sequence[int] | np.ndarray | None = None) -> Iterator[Chunk]:
    """The chunks of epoch ``epoch`` over ``ds``, in stream order.

    ``blocks`` restricts the epoch to these blocks, visited in the order the
    whole epoch visits them (a learner-parallel segment passes a slice of
    :func:`block_order`; a data-parallel shard passes its run of blocks).

    Blocks come through the block cache (:func:`cached_block`; ``X`` is shared,
    read only), and the next block is read on a prefetch thread while the
    caller works on this one (``DISTLEARN_PREFETCH=0``: read here, in turn).
    A block that cannot be read raises its :class:`StoreError` when the stream
    reaches it, after the chunks before it.
    """
    order = block_order(seed, epoch, ds.n_blocks, shuffle)
    if blocks is not None:
        keep = np.zeros(ds.n_blocks, bool)
        keep[np.asarray(blocks, dtype=np.int64)] = True
        order = order[keep[order]]
    dt = np.dtype(dtype)
    pool = _prefetch_pool() if len(order) > 1 else None
    ahead: Future | None = None
    try:
        for i, b in enumerate(order):
            b = int(b)
            if pool is None:
                Xb, y, first = cached_block(ds, b, dt)
            else:
                cur = ahead if ahead is not None else pool.submit(cached_block, ds, b, dt)
                ahead = pool.submit(cached_block, ds, int(order[i + 1]), dt) if i + 1 < len(order) else None
                Xb, y, first = _wait_read(cur, f"{ds.path}: block {b}")
            yb = encode_labels(classes, y, where=f"store {ds.path}, block {b}")
            yield Chunk(Xb, yb, row_order(seed, epoch, b, Xb.shape[0], shuffle, ds.n_blocks), b, first)
    finally:
        if ahead is not None:
            ahead.cancel()  # a stream left early: the read still queued is dropped
