"""Where the public data sets used by the examples and benchmarks are found.

distlearn ships no third-party data.  The examples that reproduce the papers on
real data look for it here, in this order: the path given on the command line,
an environment variable, the cache that ``distlearn data fetch`` downloads into
(:func:`distlearn.data.fetch.cache_dir`), then a system location a package
manager installs to.

Fashion-MNIST
    The four gzipped IDX files of Zalando's release,
    https://github.com/zalandoresearch/fashion-mnist (``train-images-idx3-ubyte.gz``,
    ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``,
    ``t10k-labels-idx1-ubyte.gz``).  Debian's package ``dataset-fashion-mnist``
    installs them in :data:`FASHION_DEBIAN`.  Environment: ``$DISTLEARN_FASHION_MNIST``.
LETTER
    The 20,000 UCI Letter Recognition examples as one svmlight/LIBSVM file
    (https://archive.ics.uci.edu/dataset/59/letter+recognition, or LIBSVM's
    ``letter.scale`` and ``letter.scale.t`` concatenated).  Environment:
    ``$DISTLEARN_LETTER``.  ``distlearn data fetch letter`` writes UCI's file in
    this form (``letter.svm``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .fetch import DATASETS, cache_dir

__all__ = [
    "FASHION_ENV",
    "FASHION_DEBIAN",
    "FASHION_FILES",
    "FASHION_HELP",
    "LETTER_ENV",
    "fashion_mnist_dir",
    "letter_file",
    "load_fashion_mnist",
    "no_fashion_message",
    "no_letter_message",
]

FASHION_ENV = "DISTLEARN_FASHION_MNIST"
FASHION_DEBIAN = Path("/usr/share/datasets/fashion-mnist")
FASHION_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
FASHION_HELP = (
    f"directory with the four gzipped Fashion-MNIST IDX files ({', '.join(FASHION_FILES)}) of Zalando's "
    "release, https://github.com/zalandoresearch/fashion-mnist, or of Debian's package dataset-fashion-mnist "
    f"(default: ${FASHION_ENV}, else the cache of `distlearn data fetch fashion-mnist`, else {FASHION_DEBIAN} "
    "if it exists)"
)
LETTER_ENV = "DISTLEARN_LETTER"


def fetched_fashion_dir() -> Path | None:
    """The directory ``distlearn data fetch fashion-mnist`` fills, if it holds the four files."""
    d = cache_dir() / DATASETS["fashion-mnist"].subdir
    return d if all((d / f).is_file() for f in FASHION_FILES) else None


def fetched_letter_file() -> Path | None:
    """The ``letter.svm`` ``distlearn data fetch letter`` writes, if it is there."""
    ds = DATASETS["letter"]
    f = cache_dir() / ds.subdir / ds.derived[0]  # type: ignore[index]
    return f if f.is_file() else None


def fashion_mnist_dir(path: str | os.PathLike | None = None) -> Path | None:
    """``path``, else ``$DISTLEARN_FASHION_MNIST``, else the fetched copy, else Debian's directory if
    installed, else None."""
    if path is not None:
        return Path(path)
    if os.environ.get(FASHION_ENV):
        return Path(os.environ[FASHION_ENV])
    return fetched_fashion_dir() or (FASHION_DEBIAN if FASHION_DEBIAN.is_dir() else None)


def no_fashion_message(option: str) -> str:
    """The one line a command prints when it finds no Fashion-MNIST files."""
    return (
        f"no Fashion-MNIST data: run `distlearn data fetch fashion-mnist` (into {cache_dir()}), or pass "
        f"{option} DIR, set {FASHION_ENV}=DIR, or install Debian's package dataset-fashion-mnist; the files are "
        "at https://github.com/zalandoresearch/fashion-mnist"
    )


def letter_file(path: str | os.PathLike | None = None) -> Path | None:
    """``path``, else ``$DISTLEARN_LETTER``, else the fetched copy, else None."""
    if path is not None:
        return Path(path)
    if os.environ.get(LETTER_ENV):
        return Path(os.environ[LETTER_ENV])
    return fetched_letter_file()


def no_letter_message(option: str) -> str:
    """The one line a command prints when it finds no LETTER file."""
    return (
        f"no LETTER data: run `distlearn data fetch letter` (into {cache_dir()}), or pass {option} FILE or set "
        f"{LETTER_ENV}=FILE (the 20,000 UCI examples as one svmlight file: https://archive.ics.uci.edu/dataset/59)"
    )


def load_fashion_mnist(path: str | os.PathLike | None = None, *, dtype: str = "float64"):
    """Fashion-MNIST as arrays ``(X_train, y_train, X_test, y_test)``: 60,000 and 10,000 rows of
    784 raw pixel values (0..255) read with distlearn's IDX reader, labels 0..9.

    ``path`` as :func:`fashion_mnist_dir`; a missing directory is a ``FileNotFoundError``
    that says where the files are found.
    """
    import numpy as np

    from ._idx import IdxReader

    d = fashion_mnist_dir(path)
    if d is None or not d.is_dir():
        raise FileNotFoundError(no_fashion_message("path"))

    def read(prefix: str):
        parts = list(IdxReader(d / f"{prefix}-images-idx3-ubyte.gz", d / f"{prefix}-labels-idx1-ubyte.gz",
                               dtype=dtype))
        return np.concatenate([X for X, _ in parts]), np.concatenate([y for _, y in parts]).astype(np.int64)

    return (*read("train"), *read("t10k"))
