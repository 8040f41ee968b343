"""Package-wide defaults: numba flags, chunk sizes, reduction fan-in.

Every module reads its tunables from here so that one place documents them.
"""

from __future__ import annotations

import os

#: The newest store format (the ``format_version`` of a store's ``distlearn`` attribute), which
#: distlearn reads up to: 2 is a store whose labels are class names (``meta["class_names"]``);
#: stores of numbers are still written as 1, as before.
STORE_FORMAT_VERSION = 2

#: Target number of values in one dense row block (about 16 MiB of float32).
DENSE_BLOCK_VALUES = 1 << 22

#: Default rows per block for CSR stores.
SPARSE_BLOCK_ROWS = 16_384

#: Elements per zarr chunk of the CSR ``data``/``indices`` arrays.
NNZ_CHUNK = 1 << 20

#: Bytes of svmlight/CSV text parsed at once by the streaming readers.
TEXT_CHUNK_BYTES = 16 << 20

#: Byte-range size of one parallel svmlight parsing task.
PARALLEL_PART_BYTES = 64 << 20

#: Above this number of distinct label values a store records no class list
#: (the labels are treated as continuous targets).
MAX_CLASSES = 10_000

#: Fan-in of tree reductions (dask's ``split_every``).
SPLIT_EVERY = 8

#: One numba decorator setting for every kernel.  No fastmath: it lets the
#: compiler reorder floating-point sums, and the merge tests compare sums exactly.
NUMBA_FLAGS = {"nogil": True, "cache": os.environ.get("DISTLEARN_NUMBA_CACHE", "1") != "0"}


#: The deadline of one block read seen from a thread that waits for it (the prefetch thread's read,
#: or another thread's read of the same block): ``$DISTLEARN_READ_TIMEOUT`` seconds, default 900.
#: A read stuck on a network file system or an object store then ends the job with one line
#: naming the store and the block, instead of a silent hang.
READ_TIMEOUT_DEFAULT = 900.0


def read_timeout(setting: str | None = None) -> float:
    """Seconds a waiting reader gives one block read (``setting``, else ``$DISTLEARN_READ_TIMEOUT``).

    >>> read_timeout("30"), read_timeout(None) > 0
    (30.0, True)
    """
    raw = setting if setting is not None else os.environ.get("DISTLEARN_READ_TIMEOUT")
    if raw is None or raw == "":
        return READ_TIMEOUT_DEFAULT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"DISTLEARN_READ_TIMEOUT={raw!r}: expected a positive number of seconds")
    return value


def default_block_rows(n_features: int | None, layout: str) -> int:
    """Rows per block: about 16 MiB of values for dense data, a fixed count for CSR."""
    if layout == "dense" and n_features:
        return int(min(65_536, max(256, DENSE_BLOCK_VALUES // max(1, n_features))))
    return SPARSE_BLOCK_ROWS
