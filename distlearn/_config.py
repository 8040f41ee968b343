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

#: One numba decorator setting for every kernel (``NUMBA_FLAGS``, through :func:`__getattr__`).  No fastmath: it
#: lets the compiler reorder floating-point sums, and the merge tests compare sums exactly.
_NUMBA_FLAGS = {"nogil": True, "cache": os.environ.get("DISTLEARN_NUMBA_CACHE", "1") != "0"}


def __getattr__(name: str) -> object:
    """``NUMBA_FLAGS``: read by every module that compiles, so the package's cache stamp
    (:func:`_stamp_numba_caches`) is installed before the first decoration, and importing this module alone
    imports no numba."""
    if name == "NUMBA_FLAGS":
        if _NUMBA_FLAGS["cache"]:
            _stamp_numba_caches()
        return _NUMBA_FLAGS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def package_source_stamp(root: str | os.PathLike[str] | None = None) -> bytes:
    """sha256 of every ``.py`` file of the package (``root``: its directory), by relative path and content.

    The freshness stamp of every cached compiled function of the package (:func:`_stamp_numba_caches`).
    numba stamps a cached function by its own file's content alone, but the engines inline helpers from other
    files (``ensembles/_budget.py`` compiles ``learners/_budget.py``'s ``_next_mirrored`` into its own code):
    a changed helper left the inlining engine's cached machine code in use, silently computing with the old
    helper (seen: the kernel OBPM's kernel rows, after an edit of the helper alone).  One stamp over all the
    sources retires every cached function whenever any source changes (a new version, an edit)."""
    import hashlib
    from pathlib import Path

    base = Path(root) if root is not None else Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(base.rglob("*.py")):
        h.update(f.relative_to(base).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.digest()


def _stamp_numba_caches() -> None:
    """Make numba's cache stamp the package's compiled functions with :func:`package_source_stamp`: each locator
    numba would choose for a file of this package (``$NUMBA_CACHE_DIR``, else ``__pycache__``: the places do not
    change) answers the package's stamp instead of its own file's.  Functions of other packages are untouched;
    ``$NUMBA_CACHE_LOCATOR_CLASSES`` (the user's own locators) bypasses this, as it bypasses numba's.  A numba
    without the locator list turns the cache off (every process compiles: slower, never stale)."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - numba is a dependency
        return
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    if impl is None or not isinstance(getattr(impl, "_locator_classes", None), list):
        _NUMBA_FLAGS["cache"] = False  # a numba whose cache cannot be stamped: compile afresh, never run stale code
        return
    if any(getattr(c, "_distlearn", False) for c in impl._locator_classes):
        return
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    bases = list(impl._locator_classes)
    stamp: list[bytes] = []

    class _PackageStamped:
        _distlearn = True

        @classmethod
        def from_function(cls, py_func, py_file):  # type: ignore[no-untyped-def]
            if not os.path.abspath(py_file).startswith(here):
                return None
            for base in bases:
                loc = base.from_function(py_func, py_file)
                if loc is not None:
                    if not stamp:
                        stamp.append(package_source_stamp())
                    loc.get_source_stamp = lambda: stamp[0]
                    return loc
            return None

    impl._locator_classes = [_PackageStamped, *bases]



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
