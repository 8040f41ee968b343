#!/usr/bin/env python3
"""Benchmark: one epoch of the online learners vs scikit-learn and Vowpal Wabbit.

    .venv/bin/python benchmarks/bench_learners.py                        # 800,000 rows, 3 repeats
    .venv/bin/python benchmarks/bench_learners.py --n-samples 50000 --repeat 1   # smoke test

Two data sets, each split into a training part (timed: one epoch, no shuffle, no
intercept) and a held-out part (test error, 0-1 loss):

``rcv1``     RCV1-like CSR corpus, ``make_rcv1_like(path, n, random_state=0, dtype="float32")``
             (47,236 features, ~75 nnz/row, +-1 labels), generated once into ``--data-dir``
             and reused; the last 10% of the rows are the test set; a float64 copy too.
``fashion``  Fashion-MNIST (``--fashion-dir``), 60,000 x 784 dense raw pixels 0..255,
             10 classes, the official 10,000 test images; float64 and float32.  The four
             gzipped IDX files of Zalando's release
             (https://github.com/zalandoresearch/fashion-mnist); default
             ``$DISTLEARN_FASHION_MNIST``, else Debian's package ``dataset-fashion-mnist``
             (/usr/share/datasets/fashion-mnist) when installed.

Methods (``--methods``, a comma-separated subset):

``Perceptron`` ``GeneralizedPerceptron`` ``MarginPerceptron`` ``ALMA`` ``ROMMA``
``PassiveAggressive`` ``MIRA`` ``LMS``
             ``distlearn.<Rule>(epochs=1, shuffle=False, fit_intercept=False).fit(X, y)``
             (``dtype=`` too when the constructor takes it; PassiveAggressive with
             ``variant="PA-I"``).  A missing class or any exception is reported as
             ``n/a (message)``.  The Perceptron runs in float32 and float64, the other
             rules in ``--rule-dtypes``.
``sklearn``  ``sklearn.linear_model.Perceptron(fit_intercept=False, shuffle=False, max_iter=1,
             tol=None, eta0=1.0, n_jobs=1).fit(X, y)`` (one-vs-rest, one class after another).
``gather-dot`` the floor an epoch can approach: a numba ``@njit(nogil=True)`` loop over the
             training rows computing every score the epoch needs (CSR: ``sum(data[j] *
             w[indices[j]])`` per row; dense: the row's k one-vs-rest scores, each summed in
             feature order) into a preallocated output, no updates.
``plain-loop`` (dense multiclass data only) the reference an epoch of the one-vs-rest perceptron is
             held to: a plain numba ``@njit(nogil=True, fastmath=True)`` loop that keeps ``W`` as
             (k, n_features), computes the row's k scores as k dot products and adds ``y_k x`` to
             every row ``k`` of ``W`` whose score has the wrong sign -- the same model as
             ``Perceptron`` up to the order of the sums (``fastmath`` lets LLVM reassociate them,
             which distlearn's margins may not: they are sequential sums, bit-identical to the
             CSR path's).  Test error from ``argmax(X_test @ W.T)``.
``scipy``    reference: ``X @ w`` (scipy CSR mat-vec; dense: numpy ``X @ W``, BLAS).
``vw``       Vowpal Wabbit 9 CLI (``python -m vowpalwabbit``), one pass over its cache file
             (built untimed from VW text written once); its interpreter + start-up time,
             measured as the same command on a 1-example cache, is subtracted.  Test error
             from ``-t -i model -d test.vw -p preds``.

Every timing is the median of ``--repeat`` runs, interleaved (all jobs, then the
next repeat) so that drift of a noisy machine hits every method alike.  ``--clock cpu``
times the in-process methods by the thread's CPU time (``time.thread_time``) instead of
the wall clock: on a machine shared with other jobs it leaves out the time the process
waited for a core (scipy's dense ``X @ W`` may run BLAS threads, which it then misses).  Learners
run in this process after an untimed warm-up fit on the first rows (numba
compilation is not timed); VW runs as a child process.
"""

from __future__ import annotations

import argparse
import functools
import gc
import gzip
import importlib.util
import inspect
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

RULES = (
    "Perceptron",
    "GeneralizedPerceptron",
    "MarginPerceptron",
    "ALMA",
    "ROMMA",
    "PassiveAggressive",
    "MIRA",
    "LMS",
)
PEERS = ("sklearn", "gather-dot", "plain-loop", "scipy", "vw")
METHODS = RULES + PEERS
DATASETS = ("rcv1", "fashion")
#: extra constructor arguments per rule (passed as given; a rule that refuses them shows the error)
RULE_PARAMS: dict[str, dict[str, Any]] = {"PassiveAggressive": {"variant": "PA-I"}}
VW_FLAGS = {
    "rcv1": ["--binary", "--loss_function", "hinge", "--noconstant", "-b", "18"],
    "fashion": ["--oaa", "10", "--loss_function", "hinge", "--noconstant", "-b", "18"],
}
VW_TEXT_VERSION = 1  # bump when the VW text recipe changes
WARMUP_ROWS = 2000
TEST_FRACTION = 0.1
#: the clock of the in-process timings (``--clock``): wall time, or this thread's CPU time
_clock: Callable[[], float] = time.perf_counter
MiB = float(1 << 20)


# ---------------------------------------------------------------------------- small helpers


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("distlearn", "numpy", "scipy", "scikit-learn", "numba", "vowpalwabbit", "zarr"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    mem = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            mem = next((round(int(line.split()[1]) / 2**20, 1) for line in f if line.startswith("MemTotal:")), None)
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "mem_gib": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": _versions(),
    }


def _short(exc: BaseException, limit: int = 70) -> str:
    msg = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _rm(path: str | os.PathLike[str]) -> None:
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()


# ---------------------------------------------------------------------------- kernels


@njit(nogil=True)
def _gather_dot_csr(indptr, indices, data, w, out):  # pragma: no cover - compiled
    """out[i] = sum_j data[j] * w[indices[j]] over row i, summed in stored order."""
    for i in range(out.shape[0]):
        s = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            s += data[j] * w[indices[j]]
        out[i] = s


@functools.lru_cache(maxsize=None)
def _gather_dot_dense(k: int) -> Callable[..., None]:
    """A kernel ``f(X, W, out)``: out[i, c] = sum_j X[i, j] * W[j, c], each sum in feature order.

    The k scores of a row are accumulated side by side (W is n_features x k, C
    order) so that the k dependency chains overlap; every sum still adds its
    terms one after another, as an update loop would.  k is a compile-time
    constant (one kernel per k) so that LLVM can unroll the class loop.
    """

    @njit(nogil=True)
    def kernel(X, W, out):  # pragma: no cover - compiled
        acc = np.zeros(k)
        for i in range(X.shape[0]):
            for c in range(k):
                acc[c] = 0.0
            for j in range(X.shape[1]):
                xj = X[i, j]
                for c in range(k):
                    acc[c] += xj * W[j, c]
            for c in range(k):
                out[i, c] = acc[c]

    return kernel


@njit(nogil=True, fastmath=True)
def _plain_ovr_perceptron(X, y, W):  # pragma: no cover - compiled
    """One epoch of the one-vs-rest perceptron with W as (k, n_features): k dot products per row
    (reassociated by fastmath, so vectorised), then W[c] += y_c x for every column c with
    y_c * score_c <= 0."""
    k, d = W.shape
    s = np.zeros(k)
    for i in range(X.shape[0]):
        for c in range(k):
            a = 0.0
            for j in range(d):
                a += W[c, j] * X[i, j]
            s[c] = a
        for c in range(k):
            yc = 1.0 if y[i] == c else -1.0
            if yc * s[c] <= 0.0:
                for j in range(d):
                    W[c, j] += yc * X[i, j]


@njit(nogil=True)
def _put_uint(buf, pos, v):  # pragma: no cover - compiled
    if v == 0:
        buf[pos] = 48
        return pos + 1
    n = 0
    t = v
    while t > 0:
        n += 1
        t //= 10
    end = pos + n
    while v > 0:
        n -= 1
        buf[pos + n] = 48 + v % 10
        v //= 10
    return end


@njit(nogil=True)
def _vw_text(indptr, indices, data, labels, start, stop, buf):  # pragma: no cover - compiled
    """VW text lines ``label | idx:val ...`` of rows [start, stop) into buf; returns bytes used.

    Values are written in fixed point with 12 decimals, trailing zeros dropped
    (integers come out as integers); callers keep |value| < 1e6.
    """
    pos = 0
    for i in range(start, stop):
        lab = labels[i]
        if lab < 0:
            buf[pos] = 45
            pos += 1
            lab = -lab
        pos = _put_uint(buf, pos, lab)
        buf[pos] = 32
        buf[pos + 1] = 124
        pos += 2
        for j in range(indptr[i], indptr[i + 1]):
            buf[pos] = 32
            pos = _put_uint(buf, pos + 1, np.int64(indices[j]))
            buf[pos] = 58
            pos += 1
            v = np.float64(data[j])
            if v < 0:
                buf[pos] = 45
                pos += 1
                v = -v
            q = np.int64(round(v * 1e12))
            ip = q // 1000000000000
            fr = q % 1000000000000
            pos = _put_uint(buf, pos, ip)
            if fr > 0:
                buf[pos] = 46
                pos += 1
                d = 12
                while fr % 10 == 0:
                    fr //= 10
                    d -= 1
                for e in range(d - 1, -1, -1):
                    buf[pos + e] = 48 + fr % 10
                    fr //= 10
                pos += d
        buf[pos] = 10
        pos += 1
    return pos


def write_vw(path: str | os.PathLike[str], X: Any, y: np.ndarray, *, block_rows: int = 65536) -> int:
    """Write (X, y) as Vowpal Wabbit text, features ``index:value`` (0-based), zeros skipped."""
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    if X.nnz and float(np.abs(X.data).max()) >= 1e6:
        raise ValueError("write_vw keeps values below 1e6 in magnitude")
    labels = np.asarray(y).astype(np.int64)
    indptr = X.indptr.astype(np.int64)
    total = 0
    with open(path, "wb") as f:
        for start in range(0, X.shape[0], block_rows):
            stop = min(start + block_rows, X.shape[0])
            nnz = int(indptr[stop] - indptr[start])
            buf = np.empty(40 * nnz + 32 * (stop - start), dtype=np.uint8)
            n = _vw_text(indptr, X.indices, X.data, labels, start, stop, buf)
            f.write(buf[:n].tobytes())
            total += n
    return total


# ---------------------------------------------------------------------------- data


@dataclass
class Data:
    name: str
    X_train: dict[str, Any]  # dtype name -> matrix
    y_train: np.ndarray
    X_test: dict[str, Any]
    y_test: np.ndarray
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_classes(self) -> int:
        return int(np.unique(self.y_train).shape[0])


def rcv1_store(n_samples: int, data_dir: str | os.PathLike[str]) -> tuple[Any, float | None]:
    """The benchmarks' RCV1-like store of ``n_samples`` rows in ``data_dir``, reused when its generator
    parameters match, else (re)generated: ``(dataset, seconds spent generating or None)``.  Every
    benchmark on this corpus (learners, OBPM, codecs, distributed, tau, adaptive) reads it here."""
    from distlearn.data import open_dataset
    from distlearn.data.synthetic import make_rcv1_like

    path = Path(data_dir) / f"rcv1like-{n_samples}.zarr"
    want = {"n_samples": n_samples, "random_state": 0, "dtype": "float32"}
    ds = None
    if path.exists():
        try:
            ds = open_dataset(path)
            params = ds.info().get("params") or {}
            if any(params.get(k) != v for k, v in want.items()):
                ds = None
        except Exception as exc:  # an unreadable or stale store is regenerated
            print(f"# {path} not reusable ({_short(exc)})")
            ds = None
    gen_s = None
    if ds is None:
        print(f"# generating {path} ({n_samples:,} rows) ...", flush=True)
        t0 = time.perf_counter()
        ds = make_rcv1_like(path, n_samples, random_state=0, dtype="float32", overwrite=True)
        gen_s = time.perf_counter() - t0
        print(f"# generated in {gen_s:.1f} s", flush=True)
    else:
        print(f"# reusing {path}")
    return ds, gen_s


def load_rcv1(args: argparse.Namespace) -> Data:
    ds, gen_s = rcv1_store(args.n_samples, args.data_dir)
    path = ds.path
    X, y = ds.to_scipy()
    n_test = int(round(X.shape[0] * TEST_FRACTION))
    n_train = X.shape[0] - n_test
    X32 = {"train": X[:n_train], "test": X[n_train:]}
    del X
    Xtr = {"float32": X32["train"], "float64": X32["train"].astype(np.float64)}
    Xte = {"float32": X32["test"], "float64": X32["test"].astype(np.float64)}
    facts = {
        "store": str(path),
        "generated_s": gen_s,
        "n_samples": args.n_samples,
        "n_train": n_train,
        "n_test": n_test,
        "n_features": int(Xtr["float32"].shape[1]),
        "nnz_train": int(Xtr["float32"].nnz),
        "nnz_test": int(Xte["float32"].nnz),
        "index_dtype": str(Xtr["float32"].indices.dtype),
        "classes": [int(c) for c in np.unique(y)],
        "layout": "csr",
    }
    return Data("rcv1", Xtr, np.asarray(y[:n_train]), Xte, np.asarray(y[n_train:]), facts)


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\0\0" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    arr = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {arr.size} values for shape {shape}")
    return arr.reshape(shape[0], -1) if ndim > 1 else arr


def load_fashion(args: argparse.Namespace) -> Data:
    d = Path(args.fashion_dir)
    Xtr = _read_idx(d / "train-images-idx3-ubyte.gz")
    ytr = _read_idx(d / "train-labels-idx1-ubyte.gz").astype(np.int64)
    Xte = _read_idx(d / "t10k-images-idx3-ubyte.gz")
    yte = _read_idx(d / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    dtypes = ("float32", "float64")
    facts = {
        "dir": str(d),
        "n_train": int(Xtr.shape[0]),
        "n_test": int(Xte.shape[0]),
        "n_features": int(Xtr.shape[1]),
        "nonzero_fraction": float(np.count_nonzero(Xtr) / Xtr.size),
        "classes": [int(c) for c in np.unique(ytr)],
        "layout": "dense",
    }
    return Data(
        "fashion",
        {t: np.ascontiguousarray(Xtr, dtype=t) for t in dtypes},
        ytr,
        {t: np.ascontiguousarray(Xte, dtype=t) for t in dtypes},
        yte,
        facts,
    )


# ---------------------------------------------------------------------------- jobs


@dataclass
class Job:
    """One (data set, method, dtype) cell of the table."""

    data: str
    method: str
    dtype: str
    run: Callable[[], float] | None = None  # one timed run; returns seconds
    finish: Callable[[], dict[str, Any]] | None = None  # after the last run: test error etc.
    error: str | None = None
    walls: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.data}/{self.method}/{self.dtype}"


def _fit_job(data: Data, method: str, dtype: str, make: Callable[[], Any]) -> Job:
    """Time ``make().fit(X_train, y_train)``; test error from ``predict(X_test)`` of the last fit."""
    job = Job(data.name, method, dtype)
    X, y = data.X_train[dtype], data.y_train
    state: dict[str, Any] = {}

    def fit(rows: int | None = None) -> float:
        est = make()
        Xs, ys = (X, y) if rows is None else (X[:rows], y[:rows])
        gc.collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning from max_iter=1 and the like
            t0 = _clock()
            est.fit(Xs, ys)
            wall = _clock() - t0
        state["est"] = est
        return wall

    def finish() -> dict[str, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = np.asarray(state["est"].predict(data.X_test[dtype]))
        return {"test_error": float(np.mean(pred != data.y_test)), "pred": pred}

    try:
        fit(WARMUP_ROWS)  # numba compilation, first-call imports: not timed
    except Exception as exc:
        job.error = _short(exc)
        return job
    job.run, job.finish = fit, finish
    return job


def distlearn_job(data: Data, rule: str, dtype: str) -> Job:
    try:
        import distlearn

        cls = getattr(distlearn, rule, None)
        if cls is None:  # not (yet) re-exported at the top level: the estimators module
            import distlearn.estimators

            cls = getattr(distlearn.estimators, rule)
    except Exception as exc:
        job = Job(data.name, rule, dtype)
        job.error = f"distlearn.{rule} missing" if isinstance(exc, (AttributeError, ImportError)) else _short(exc)
        return job
    kwargs: dict[str, Any] = {"epochs": 1, "shuffle": False, "fit_intercept": False, **RULE_PARAMS.get(rule, {})}
    try:
        params = inspect.signature(cls).parameters
        if "dtype" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs["dtype"] = dtype
    except (TypeError, ValueError):
        pass
    job = _fit_job(data, rule, dtype, lambda: cls(**kwargs))
    job.extra["params"] = {k: str(v) for k, v in kwargs.items()}
    job.extra["class"] = f"{cls.__module__}.{cls.__qualname__}"
    return job


def sklearn_job(data: Data, dtype: str) -> Job:
    from sklearn.linear_model import Perceptron

    def make() -> Any:
        return Perceptron(fit_intercept=False, shuffle=False, max_iter=1, tol=None, eta0=1.0, n_jobs=1)

    return _fit_job(data, "sklearn", dtype, make)


def gather_dot_job(data: Data, dtype: str) -> Job:
    X = data.X_train[dtype]
    k = 1 if data.n_classes <= 2 else data.n_classes
    job = Job(data.name, "gather-dot", dtype, extra={"scores_per_row": k})
    rng = np.random.default_rng(0)
    if sp.issparse(X):
        w = rng.standard_normal(X.shape[1]).astype(dtype)
        out = np.empty(X.shape[0])

        def kernel(rows: int) -> None:
            _gather_dot_csr(X.indptr, X.indices, X.data, w, out[:rows])

    else:
        W = np.ascontiguousarray(rng.standard_normal((X.shape[1], k)).astype(dtype))
        out = np.empty((X.shape[0], k))
        dense = _gather_dot_dense(k)

        def kernel(rows: int) -> None:
            dense(X[:rows], W, out[:rows])

    kernel(min(WARMUP_ROWS, X.shape[0]))  # compile

    def run() -> float:
        gc.collect()
        t0 = _clock()
        kernel(X.shape[0])
        return _clock() - t0

    job.run = run
    return job


def plain_loop_job(data: Data, dtype: str) -> Job:
    X = data.X_train[dtype]
    job = Job(data.name, "plain-loop", dtype)
    if sp.issparse(X) or data.n_classes <= 2:
        job.error = "dense multiclass data only"
        return job
    k = data.n_classes
    y = np.ascontiguousarray(data.y_train, dtype=np.int64)
    state: dict[str, Any] = {}
    _plain_ovr_perceptron(X[:WARMUP_ROWS], y[:WARMUP_ROWS], np.zeros((k, X.shape[1]), dtype=X.dtype))  # compile

    def run() -> float:
        W = np.zeros((k, X.shape[1]), dtype=X.dtype)
        gc.collect()
        t0 = _clock()
        _plain_ovr_perceptron(X, y, W)
        wall = _clock() - t0
        state["W"] = W
        return wall

    def finish() -> dict[str, Any]:
        pred = np.asarray(data.X_test[dtype] @ state["W"].T).argmax(axis=1)
        return {"test_error": float(np.mean(pred != data.y_test)), "pred": pred}

    job.run, job.finish = run, finish
    return job


def scipy_job(data: Data, dtype: str) -> Job:
    X = data.X_train[dtype]
    k = 1 if data.n_classes <= 2 else data.n_classes
    rng = np.random.default_rng(0)
    w = rng.standard_normal(X.shape[1]).astype(dtype) if k == 1 else rng.standard_normal((X.shape[1], k)).astype(dtype)
    job = Job(data.name, "scipy", dtype, extra={"scores_per_row": k})
    _ = X[:WARMUP_ROWS] @ w

    def run() -> float:
        gc.collect()
        t0 = _clock()
        _ = X @ w
        return _clock() - t0

    job.run = run
    return job


# ---------------------------------------------------------------------------- Vowpal Wabbit


def _vw_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "vowpalwabbit", "--quiet", *args]


def _vw_call(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"vw exit {proc.returncode}: {' / '.join(tail)}")
    return wall


def vw_job(data: Data, args: argparse.Namespace) -> Job:
    """One VW pass from its cache; start-up (same command, 1-example cache) subtracted."""
    job = Job(data.name, "vw", "float32")
    flags = list(VW_FLAGS[data.name])
    job.extra["flags"] = " ".join(flags)
    if importlib.util.find_spec("vowpalwabbit") is None:
        job.error = "vowpalwabbit not installed (pip install -e '.[bench]')"
        return job
    d = Path(args.data_dir) / f"vw-{data.name}-{data.facts.get('n_samples', data.n_train + len(data.y_test))}"
    d.mkdir(parents=True, exist_ok=True)
    side = d / "recipe.json"
    y_tr = data.y_train if data.name == "rcv1" else data.y_train + 1  # VW: -1/+1, or 1..k for --oaa
    y_te = data.y_test if data.name == "rcv1" else data.y_test + 1
    want = {
        "version": VW_TEXT_VERSION,
        "facts": {k: v for k, v in data.facts.items() if k != "generated_s"},
        "flags": flags,
    }
    try:
        have = json.loads(side.read_text()) if side.exists() else {}
        if have.get("recipe") != want or not all((d / f).exists() for f in ("train.cache", "one.cache", "test.vw")):
            _rm(side)
            t0 = time.perf_counter()
            X = data.X_train["float32"]
            n_bytes = write_vw(d / "train.vw", X, y_tr)
            write_vw(d / "one.vw", X[:1], y_tr[:1])
            write_vw(d / "test.vw", data.X_test["float32"], y_te)
            t1 = time.perf_counter()
            # the cache is written during a first pass over the text
            for name in ("train", "one"):
                _vw_call(_vw_cmd("-d", str(d / f"{name}.vw"), "--cache_file", str(d / f"{name}.cache"), "-k",
                                 "--passes", "1", "-f", str(d / "model"), *flags))  # fmt: skip
            t2 = time.perf_counter()
            _rm(d / "train.vw")  # only the cache is read from now on
            have = {"recipe": want, "text_bytes": n_bytes, "text_s": t1 - t0, "cache_s": t2 - t1}
            side.write_text(json.dumps(have, indent=2) + "\n")
            print(f"# VW text ({n_bytes / MiB:.0f} MiB) in {t1 - t0:.1f} s, caches in {t2 - t1:.1f} s", flush=True)
        job.extra.update({k: v for k, v in have.items() if k != "recipe"})
        job.extra["cache_mib"] = (d / "train.cache").stat().st_size / MiB
        startup: list[float] = []
        job.extra["startup"] = startup
        train_cmd = _vw_cmd("--cache_file", str(d / "train.cache"), "--passes", "1", "-f", str(d / "model"), *flags)
        one_cmd = _vw_cmd("--cache_file", str(d / "one.cache"), "--passes", "1", "-f", str(d / "model1"), *flags)
        _vw_call(one_cmd)  # warm the page cache and the interpreter's .pyc files
    except Exception as exc:
        job.error = _short(exc)
        return job

    def run() -> float:
        startup.append(_vw_call(one_cmd))
        return _vw_call(train_cmd)

    def finish() -> dict[str, Any]:
        preds = d / "preds.txt"
        _vw_call(_vw_cmd("-t", "-i", str(d / "model"), "-d", str(d / "test.vw"), "-p", str(preds)))
        p = np.loadtxt(preds, usecols=0, ndmin=1)
        pred = p.astype(np.int64) if data.name == "rcv1" else p.astype(np.int64) - 1
        return {"test_error": float(np.mean(pred != data.y_test)), "pred": pred}

    job.run, job.finish = run, finish
    return job


# ---------------------------------------------------------------------------- reporting


def _summarise(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {"data": job.data, "method": job.method, "dtype": job.dtype, "error": job.error}
    out.update({k: v for k, v in job.extra.items() if k not in ("pred", "startup")})
    if job.walls:
        med = statistics.median(job.walls)
        out.update({"runs_s": job.walls, "median_s": med, "min_s": min(job.walls)})
        if job.method == "vw":
            su = statistics.median(job.extra["startup"])
            out.update({"raw_median_s": med, "startup_median_s": su, "startup_runs_s": job.extra["startup"]})
            out["median_s"] = max(med - su, 1e-9)
            out["min_s"] = max(min(job.walls) - su, 1e-9)
    return out


def _ours(results: list[dict[str, Any]], data: str, dtype: str) -> float | None:
    for r in results:
        if r["data"] == data and r["method"] == "Perceptron" and r["dtype"] == dtype and "median_s" in r:
            return r["median_s"]
    return None


def _find(results: list[dict[str, Any]], data: str, method: str, dtype: str) -> dict[str, Any] | None:
    return next((r for r in results if r["data"] == data and r["method"] == method and r["dtype"] == dtype), None)


def _table(results: list[dict[str, Any]], n_train: dict[str, int]) -> str:
    head = ("data", "method", "dtype", "median s", "min s", "rows/s", "test err", "time / Perceptron")
    rows = [head]
    for r in results:
        if "median_s" not in r:
            why = r["error"] or "not run"
            rows.append((r["data"], r["method"], r["dtype"], f"n/a ({why})", "", "", "", ""))
            continue
        ours = _ours(results, r["data"], r["dtype"])
        err = r.get("test_error")
        rows.append(
            (
                r["data"],
                r["method"],
                r["dtype"],
                f"{r['median_s']:.3f}",
                f"{r['min_s']:.3f}",
                f"{n_train[r['data']] / r['median_s']:,.0f}",
                "-" if err is None else f"{err:.4f}",
                f"{r['median_s'] / ours:.2f}x" if ours else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows if not (i == 3 and r[3].startswith("n/a"))) for i in range(len(head))]
    lines = []
    for k, r in enumerate(rows):
        if r[3].startswith("n/a"):
            cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]), r[3]]
            lines.append("| " + " | ".join(cells) + " |" + " |" * (len(head) - 4))
            continue
        cells = [c.ljust(w) for c, w in zip(r[:3], widths[:3])] + [c.rjust(w) for c, w in zip(r[3:], widths[3:])]
        lines.append("| " + " | ".join(cells) + " |")
        if k == 0:
            rules = ("-" * (w + 2) if i < 3 else "-" * (w + 1) + ":" for i, w in enumerate(widths))
            lines.append("|" + "|".join(rules) + "|")
    return "\n".join(lines)


def _ratio_lines(results: list[dict[str, Any]], datasets: list[str], dtypes: dict[str, list[str]]) -> list[str]:
    lines = []
    for data in datasets:
        vw = _find(results, data, "vw", "float32")
        for dt in dtypes[data]:
            ours = _ours(results, data, dt)
            parts = []
            for label, other, inv in (
                ("sklearn/ours", _find(results, data, "sklearn", dt), False),
                ("ours/gather-dot", _find(results, data, "gather-dot", dt), True),
                ("ours/plain-loop", _find(results, data, "plain-loop", dt), True),
                ("ours/scipy", _find(results, data, "scipy", dt), True),
                ("VW/ours", vw, False),
            ):
                if ours and other and "median_s" in other:
                    v = ours / other["median_s"] if inv else other["median_s"] / ours
                    parts.append(f"{label} {v:.2f}x")
                else:
                    parts.append(f"{label} n/a")
            lines.append(f"{data} {dt}: " + ", ".join(parts))
    return lines


def _goals(results: list[dict[str, Any]], datasets: list[str], rule_dtypes: list[str]) -> list[str]:
    """The issue's goals as PASS / FALL SHORT lines (never assertions)."""
    out = []

    def line(ok: bool | None, text: str) -> None:
        out.append(f"{'PENDING' if ok is None else ('PASS' if ok else 'FALL SHORT'):10s} {text}")

    def med(data: str, method: str, dt: str) -> float | None:
        r = _find(results, data, method, dt)
        return r.get("median_s") if r else None

    for dt in ("float64", "float32"):
        if "rcv1" not in datasets:
            break
        ours, skl, gd = med("rcv1", "Perceptron", dt), med("rcv1", "sklearn", dt), med("rcv1", "gather-dot", dt)
        if skl:
            line(ours and skl / ours >= 1.5, f"rcv1 {dt}: Perceptron >= 1.5x faster than sklearn "
                 f"(sklearn/ours = {f'{skl / ours:.2f}x' if ours else 'n/a'})")  # fmt: skip
        if gd:
            line(ours and ours / gd <= 1.4, f"rcv1 {dt}: Perceptron <= 1.4x a compiled gather-dot "
                 f"(ours/gather-dot = {f'{ours / gd:.2f}x' if ours else 'n/a'})")  # fmt: skip
    if "fashion" in datasets:
        for dt in ("float64", "float32"):
            ours, skl = med("fashion", "Perceptron", dt), med("fashion", "sklearn", dt)
            if not skl:
                continue
            ro, rs = _find(results, "fashion", "Perceptron", dt), _find(results, "fashion", "sklearn", dt)
            same = None
            if ours and ro and rs and "test_error" in ro and "test_error" in rs:
                same = ro["test_error"] == rs["test_error"]
            err_ours = f"{ro['test_error']:.4f}" if ro and "test_error" in ro else "n/a"
            err_skl = f"{rs['test_error']:.4f}" if rs and "test_error" in rs else "n/a"
            text = (f"fashion {dt}: 10-class Perceptron >= 8x faster than sklearn with identical test error "
                    f"(sklearn/ours = {f'{skl / ours:.2f}x' if ours else 'n/a'}; test error {err_ours} vs {err_skl}")
            if ro and "pred_diff_vs_sklearn" in ro:
                text += f", {ro['pred_diff_vs_sklearn']} test predictions differ"
            text += ")"
            line(None if not ours else (skl / ours >= 8 and bool(same)), text)
            line(None if not ours else skl / ours >= 5, f"fashion {dt}: 10-class Perceptron >= 5x faster than "
                 f"sklearn (sklearn/ours = {f'{skl / ours:.2f}x' if ours else 'n/a'})")  # fmt: skip
        for dt in ("float64", "float32"):
            ours, pl = med("fashion", "Perceptron", dt), med("fashion", "plain-loop", dt)
            if pl:
                line(None if not ours else ours / pl <= 1.2, f"fashion {dt}: 10-class Perceptron <= 1.2x the plain "
                     f"(k, d) numba loop (ours/plain-loop = {f'{ours / pl:.2f}x' if ours else 'n/a'})")  # fmt: skip
    for data in datasets:
        vw = med(data, "vw", "float32")
        if not vw:
            continue
        for dt in ("float32", "float64"):
            ours = med(data, "Perceptron", dt)
            line(ours and vw / ours >= 5, f"{data} {dt}: Perceptron >= 5x faster than VW "
                 f"(VW/ours = {f'{vw / ours:.2f}x' if ours else 'n/a'})")  # fmt: skip
    for data in datasets:
        for dt in rule_dtypes:
            ours = med(data, "Perceptron", dt)
            rules = [r for r in results if r["data"] == data and r["dtype"] == dt and r["method"] in RULES[1:]]
            if not rules:
                continue
            have = [(r["method"], r["median_s"] / ours) for r in rules if ours and "median_s" in r]
            missing = [r["method"] for r in rules if "median_s" not in r]
            ok: bool | None = None if (not ours or missing) else all(v <= 2 for _, v in have)
            worst = max(have, key=lambda t: t[1]) if have else None
            text = f"{data} {dt}: every rule <= 2x the Perceptron epoch"
            if worst:
                text += f" (slowest {worst[0]} {worst[1]:.2f}x)"
            if missing:
                text += f" ({len(missing)} rule(s) n/a)"
                if have and any(v > 2 for _, v in have):
                    ok = False
            line(ok, text)
    return out


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n-samples", type=int, default=800_000, help="rows of the RCV1-like corpus (default 800,000)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per method (default 3); medians are reported")
    p.add_argument("--data-dir", default="bench-output", help="corpus store and VW files (default bench-output)")
    p.add_argument("--fashion-dir", default=None,
                   help="directory with the four gzipped Fashion-MNIST IDX files of Zalando's release, "
                        "https://github.com/zalandoresearch/fashion-mnist (default: $DISTLEARN_FASHION_MNIST, "
                        "else /usr/share/datasets/fashion-mnist from Debian's dataset-fashion-mnist)")  # fmt: skip
    p.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated subset of {','.join(DATASETS)}")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    p.add_argument("--rule-dtypes", default="float64",
                   help="dtypes of the other rules (default float64; or float32,float64)")  # fmt: skip
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time the in-process methods by the wall clock (default) or by this thread's CPU time")
    args = p.parse_args(argv)

    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    rule_dtypes = [d.strip() for d in args.rule_dtypes.split(",") if d.strip()]
    for what, got, allowed in (("dataset", datasets, DATASETS), ("method", methods, METHODS),
                               ("dtype", rule_dtypes, ("float32", "float64"))):  # fmt: skip
        bad = [x for x in got if x not in allowed]
        if bad:
            p.error(f"unknown {what}(s) {bad}; choose from {allowed}")
    if args.repeat < 1 or args.n_samples < 10:
        p.error("--repeat must be positive and --n-samples at least 10")
    if "fashion" in datasets:
        debian = Path("/usr/share/datasets/fashion-mnist")
        args.fashion_dir = args.fashion_dir or os.environ.get("DISTLEARN_FASHION_MNIST") or (
            str(debian) if debian.is_dir() else None)
        if args.fashion_dir is None:
            p.error("no Fashion-MNIST data: pass --fashion-dir DIR, set DISTLEARN_FASHION_MNIST=DIR or install "
                    "Debian's dataset-fashion-mnist (https://github.com/zalandoresearch/fashion-mnist); "
                    "or run --datasets rcv1")
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    global _clock
    _clock = time.thread_time if args.clock == "cpu" else time.perf_counter

    machine = _machine()
    print(f"# machine: {machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable), "
          f"{machine['mem_gib']} GiB, {machine['platform']}")  # fmt: skip
    print("# python " + machine["python"] + "; " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))

    loaded: dict[str, Data] = {}
    for name in datasets:
        t0 = time.perf_counter()
        loaded[name] = load_rcv1(args) if name == "rcv1" else load_fashion(args)
        f = loaded[name].facts
        extra = ""
        if "nnz_train" in f:
            extra = f", {f['nnz_train']:,} nnz in train ({f['nnz_train'] / f['n_train']:.1f}/row)"
        print(f"# {name}: {f['n_train']:,} train + {f['n_test']:,} test rows x {f['n_features']:,} features "
              f"({f['layout']}), classes {f['classes']}{extra}; loaded in {time.perf_counter() - t0:.1f} s",
              flush=True)  # fmt: skip

    jobs: list[Job] = []
    for name, data in loaded.items():
        for m in methods:
            if m in RULES:
                for dt in ("float32", "float64") if m == "Perceptron" else rule_dtypes:
                    jobs.append(distlearn_job(data, m, dt))
            elif m == "sklearn":
                jobs += [sklearn_job(data, dt) for dt in ("float32", "float64")]
            elif m == "gather-dot":
                jobs += [gather_dot_job(data, dt) for dt in ("float32", "float64")]
            elif m == "plain-loop":
                jobs += [plain_loop_job(data, dt) for dt in ("float32", "float64")]
            elif m == "scipy":
                jobs += [scipy_job(data, dt) for dt in ("float32", "float64")]
            elif m == "vw":
                jobs.append(vw_job(data, args))
    for job in jobs:
        if job.error:
            print(f"#   {job.key}: n/a ({job.error})", flush=True)

    for rep in range(args.repeat):
        for job in jobs:
            if job.run is None:
                continue
            try:
                wall = job.run()
            except Exception as exc:
                job.error, job.run, job.walls = _short(exc), None, []
                print(f"#   {job.key}: n/a ({job.error})", flush=True)
                continue
            job.walls.append(wall)
            su = f" (start-up {job.extra['startup'][-1]:.3f} s)" if job.method == "vw" else ""
            print(f"#   run {rep + 1}/{args.repeat} {job.key}: {wall:.3f} s{su}", flush=True)
    for job in jobs:
        if job.run is not None and job.finish is not None:
            try:
                job.extra.update(job.finish())
            except Exception as exc:
                job.extra["test_error_failed"] = _short(exc)

    # do our predictions agree with scikit-learn's, point by point?
    by_key = {j.key: j for j in jobs}
    for job in jobs:
        if job.method == "Perceptron" and "pred" in job.extra:
            ref = by_key.get(f"{job.data}/sklearn/{job.dtype}")
            if ref is not None and "pred" in ref.extra:
                job.extra["pred_diff_vs_sklearn"] = int(np.sum(job.extra["pred"] != ref.extra["pred"]))

    results = [_summarise(j) for j in jobs]
    n_train = {name: d.n_train for name, d in loaded.items()}
    print()
    print(_table(results, n_train))
    print()
    print(f"median/min s: one epoch over the training rows, {'thread CPU time' if args.clock == 'cpu' else 'wall'} "
          "(VW: one pass from its cache minus its start-up, wall);")
    print("rows/s: training rows per second of the median; test err: 0-1 loss on the held-out rows;")
    print("time / Perceptron: this row's median over distlearn.Perceptron's in the same data set and dtype.")
    for r in results:
        if r["method"] == "vw" and "median_s" in r:
            print(f"VW {r['data']}: flags '{r['flags']}', one pass from a {r['cache_mib']:.0f} MiB cache: "
                  f"{r['raw_median_s']:.3f} s median wall minus {r['startup_median_s']:.3f} s start-up "
                  f"(same command on a 1-example cache).")  # fmt: skip
    for r in results:
        if r["method"] == "Perceptron" and "pred_diff_vs_sklearn" in r:
            print(f"{r['data']} {r['dtype']}: distlearn and sklearn Perceptron predictions differ on "
                  f"{r['pred_diff_vs_sklearn']} of {len(loaded[r['data']].y_test):,} test rows.")  # fmt: skip
    dtypes = {name: ["float64", "float32"] for name in loaded}
    print()
    print("Ratios (> 1 means ours is faster, except ours/x: > 1 means ours is slower than x):")
    for line in _ratio_lines(results, list(loaded), dtypes):
        print("  " + line)
    print()
    print("Goals (the issue's targets; PASS / FALL SHORT / PENDING when a distlearn row is n/a):")
    goals = _goals(results, list(loaded), rule_dtypes)
    for line in goals:
        print("  " + line)

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (MiB if sys.platform == "darwin" else 1024)
    print(f"# peak RSS of this process (all data sets, both dtypes, every in-process method): {rss:,.0f} MiB")
    if args.json:
        rec = {
            "machine": machine,
            "peak_rss_mib": rss,
            "args": vars(args),
            "data": {name: d.facts for name, d in loaded.items()},
            "results": results,
            "goals": goals,
        }
        Path(args.json).write_text(json.dumps(rec, indent=2, default=str) + "\n")
        print(f"# wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
