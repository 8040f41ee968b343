"""``distlearn warmup``: compile the common kernels into numba's cache ahead of any training.

The kernels are compiled by numba for the argument types they meet (store layout, dtypes, one
column or several, the rule's kernel) and cached on disk (``cache=True``, :mod:`distlearn._config`),
so a compilation is paid once per installation, by the first run that needs it.  This module runs
each common configuration once on a tiny generated store, through the same estimator ``fit`` as
``distlearn train``, so the very signatures a real run meets are compiled and written to the cache;
``run.py setup`` and ``cluster/Dockerfile`` call it after installing.

Where the cache is (numba's rules): ``$NUMBA_CACHE_DIR`` when set; otherwise ``__pycache__`` next to
the package's sources when that directory is writable (an editable install, or a virtual
environment the user owns); otherwise a per-user directory (``~/.cache/numba``).  A read-only
installation (a system site-packages, an image run as another user) therefore keeps its cache per
user: run ``distlearn warmup`` as the user who trains, or point ``NUMBA_CACHE_DIR`` at a writable
directory shared by the warmup and the runs.  An entry is valid for the source file it was compiled
from (its modification time and size), the numba version and the CPU it was compiled for; anything
else is a cache miss and compiles again (never a wrong kernel).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._compile import watch

__all__ = ["JOBS", "WarmupJob", "cache_dir", "warmup"]


@dataclass(frozen=True)
class WarmupJob:
    """One configuration to compile: a model fitted on a tiny store of one kind."""

    store: str  #: "sparse" (CSR, like convert/generate rcv1) or "dense" (like generate obpm)
    model: str  #: the estimator (a name of distlearn train --model)
    params: tuple[tuple[str, Any], ...]
    covers: str  #: what a later run finds compiled
    default: bool = True  #: run without --all


#: The configurations, by name.  The linear rules share one kernel per layout (the rule is a
#: run-time code), so "perceptron" compiles every binary linear rule; OBPM has a pass compiled
#: for the perceptron base (its default) and one for every other base.
JOBS: dict[str, WarmupJob] = {
    "linear-sparse": WarmupJob("sparse", "perceptron", (), "train --model perceptron|pa|alma|mira|... on a "
                               "binary sparse store (convert, generate rcv1)"),
    "obpm-sparse": WarmupJob("sparse", "obpm", (), "train --model obpm (perceptron base) on a binary sparse store"),
    "linear-dense": WarmupJob("dense", "perceptron", (), "train --model perceptron|pa|alma|... on a binary dense "
                              "store (generate obpm)"),
    "obpm-dense": WarmupJob("dense", "obpm", (), "train --model obpm (perceptron base) on a binary dense store"),
    "obpm-base-sparse": WarmupJob("sparse", "obpm", (("base", "alma"),), "train --model obpm --param base=alma|pa|... "
                                  "on a binary sparse store", default=False),
    "linear-multiclass": WarmupJob("multiclass", "perceptron", (), "train --model perceptron|... (one-vs-rest) on a "
                                   "dense multiclass store (LETTER, Fashion-MNIST)", default=False),
}


def _make_store(kind: str, where: Path) -> str:
    """A tiny store of ``kind``, written as ``distlearn generate`` writes its stores."""
    import numpy as np

    from .data import _generate as generate
    from .data.store import create_dataset

    path = where / f"{kind}.zarr"
    if not path.exists():
        if kind == "sparse":
            generate.run("rcv1", path, n_samples=200, n_features=500, seed=0)
        elif kind == "dense":
            generate.run("obpm", path, n_samples=200, n_features=20, seed=0)
        else:  # LETTER-like: 16 dense float32 features, 4 classes
            rng = np.random.default_rng(0)
            X = rng.random((200, 16), dtype=np.float32)
            create_dataset(path, X, np.argmax(X[:, :4], axis=1))
    return str(path)


def _estimator(job: WarmupJob) -> Any:
    from .estimators import ESTIMATORS, OBPM

    params = {"epochs": 1, "random_state": 0, **dict(job.params)}
    est = OBPM() if job.model == "obpm" else ESTIMATORS[job.model]()
    return est.set_params(**params)


def cache_dir(kernel: Any = None) -> str | None:
    """The directory numba caches the linear kernels in (or ``kernel``'s), or ``None`` when
    caching is off."""
    from .learners import _kernels

    cache = getattr(kernel if kernel is not None else _kernels._learn_csr, "_cache", None)
    path = getattr(cache, "_cache_path", None)
    return str(path) if path else None


def warmup(jobs: Sequence[str] | None = None, *, every: bool = False,
           log: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Compile the kernels of ``jobs`` (names of :data:`JOBS`; default: those marked default,
    every job with ``every``) into numba's cache.

    Returns ``{"cache_dir", "jobs": [{"job", "covers", "compiled", "seconds"}...], "seconds"}``:
    per job the kernels compiled now (empty when the cache had them) and the wall seconds spent.
    ``log(name, row)`` is called after each job.
    """
    from ._config import NUMBA_FLAGS

    names = list(jobs) if jobs else [n for n, j in JOBS.items() if every or j.default]
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        raise ValueError(f"unknown warmup job(s) {', '.join(map(repr, unknown))}; choose from {', '.join(JOBS)}")
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="distlearn-warmup-") as tmp:
        for name in names:
            job = JOBS[name]
            t0 = time.perf_counter()
            store = _make_store(job.store, Path(tmp))
            with watch() as compiled:
                _estimator(job).fit(store)
            row = {"job": name, "covers": job.covers, "compiled": compiled.kernels,
                   "compile_seconds": round(compiled.seconds, 3), "seconds": round(time.perf_counter() - t0, 3)}
            rows.append(row)
            if log is not None:
                log(name, row)
    return {"cache_dir": cache_dir() if NUMBA_FLAGS["cache"] else None, "cache_on": bool(NUMBA_FLAGS["cache"]),
            "numba_cache_dir_env": os.environ.get("NUMBA_CACHE_DIR") or None,
            "jobs": rows, "seconds": round(time.perf_counter() - t_all, 3)}
