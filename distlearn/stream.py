"""The block stream: the one way every learner, in process or on a Dask worker, sees data.

Everything that decides *which rows a learner sees, in which order and in which
form* lives here, once:

* the **order** of an epoch -- for a store, a seeded permutation of its blocks
  and of the rows inside each block (:func:`block_order`, :func:`row_order`);
  for in-memory arrays, a seeded permutation of all rows (:func:`array_order`).
  Each is a pure function of ``(seed, epoch[, block])``, so the order does not
  depend on how the work is cut into tasks or on how many workers run them;
* **reading and coercion** of a block (:func:`read_block`, :func:`coerce`): the
  weights' dtype, C order for dense blocks, errors that name the store and block;
* **label encoding** (:func:`classes_of`, :func:`encode_labels`): labels to
  indices into the sorted ``classes_``, the one encoder of the package;
* the **store token** and the per-process **store cache** (:func:`store_token`,
  :func:`open_store`): a worker opens a store once and checks that it is still
  the store the job was planned on.

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
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from . import rng
from .data.store import Dataset, StoreError, open_dataset

__all__ = [
    "Chunk",
    "array_order",
    "block_order",
    "classes_of",
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


def row_order(seed: int, epoch: int, block: int, n_rows: int, shuffle: bool) -> np.ndarray | None:
    """The order of the rows inside store block ``block`` in epoch ``epoch`` (None: stored order)."""
    if not shuffle:
        return None
    return rng.block_generator(seed, "shuffle-rows", epoch * (1 << 32) + int(block)).permutation(n_rows)


def array_order(seed: int, epoch: int, n_rows: int, shuffle: bool) -> np.ndarray | None:
    """The order of an in-memory training set's rows in epoch ``epoch`` (None: given order)."""
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
    key = (os.path.abspath(os.fspath(path)), token or "")
    with _STORES_LOCK:
        ds = _STORES.get(key)
        if ds is not None:
            _STORES.move_to_end(key)
            return ds
    ds = open_dataset(key[0])
    if token is not None and store_token(ds) != token:
        raise StoreError(f"{key[0]}: the store changed after the job was planned (its metadata differs)")
    with _STORES_LOCK:
        _STORES[key] = ds
        while len(_STORES) > _STORES_MAX:
            _STORES.popitem(last=False)
    return ds


def coerce(X: Any, dtype: Any) -> Any:
    """A block in the weights' dtype: CSR values cast (no copy when they already are), dense in C order."""
    dt = np.dtype(dtype)
    if sp.issparse(X):
        return X.astype(dt, copy=False)
    return np.ascontiguousarray(X, dtype=dt)


def read_block(ds: Dataset, b: int) -> Any:
    """Block ``b`` of ``ds``; a failure to read it names the store and the block."""
    try:
        return ds.read_block(int(b))
    except (IndexError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a corrupt or missing chunk: one line naming the store, block and rows
        lo, hi = (int(v) for v in ds.block_bounds[int(b):int(b) + 2])
        raise StoreError(f"{ds.path}: block {int(b)} (rows {lo}..{hi - 1}) cannot be read: "
                         f"{type(exc).__name__}: {exc}") from exc


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
    """
    order = block_order(seed, epoch, ds.n_blocks, shuffle)
    if blocks is not None:
        keep = np.zeros(ds.n_blocks, bool)
        keep[np.asarray(blocks, dtype=np.int64)] = True
        order = order[keep[order]]
    for b in order:
        b = int(b)
        block = read_block(ds, b)
        Xb = coerce(block.X, dtype)
        yb = encode_labels(classes, np.asarray(block.y), where=f"store {ds.path}, block {b}")
        yield Chunk(Xb, yb, row_order(seed, epoch, b, Xb.shape[0], shuffle), b, int(block.first_row))
