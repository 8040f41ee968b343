"""Run-parallel mode: grids, repeats and folds as independent tasks.

:func:`run_grid` trains one estimator per *run* -- a parameter setting of a
grid (``tau x N`` for OBPM, ``B x C`` for ALMA ...), a Monte Carlo repeat and,
with ``folds=k``, a cross-validation fold -- each run one pure, seeded task,
and collects the results as plain rows in a :class:`RunTable`.

Reproducibility.  Every random choice comes from ``random_state``: the run of
repeat ``r`` and fold ``f`` trains with
``random_state = hash64(seed, stream_id("runs"), r, f)`` (fold 0 without
folds), the same for every parameter setting -- common random numbers, so two
settings are compared on the same shuffles and draws, not on seed noise.  The
folds are fixed contiguous ranges (no randomness).  A data *factory* (a
callable ``train(seed) -> (X, y)``) is called with
``hash64(seed, stream_id("runs/data"), r)``: each repeat draws a fresh data
set, the paper's Monte Carlo protocol.  A task depends on nothing else, so the
rows are bit-identical in this process, on any cluster, for any worker count
and after retries (only ``fit_seconds`` is a measurement).

Data movement.  A store (a path) is opened by each task on its worker; no
array goes through the scheduler.  In-memory ``(X, y)`` tuples are scattered
once (``client.scatter(..., broadcast=False)``) and every task refers to them.

Folds.  For a store, fold ``f`` of ``k`` is a contiguous run of whole blocks
(the blocks are split into ``k`` runs of sizes differing by at most one), so
the task reads exactly its test blocks, streaming them through ``predict``,
and the other blocks, which it loads into memory (a scipy CSR matrix or a
numpy array) to fit on.  In-memory data is split into ``k`` contiguous row
ranges, as scikit-learn's ``KFold(shuffle=False)`` does.  Contiguous folds
assume the rows are in random order (as generated or shuffled data is).
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._urls import absolute
from .. import rng
from .._validation import did_you_mean
from ..data.store import open_dataset
from ..stream import is_store, open_store, store_token
from . import graph
from .executor import Executor, executor_for
from .run_table import DEFAULT_METRICS, METRICS, RunTable, _scalar

__all__ = ["METRICS", "RunError", "RunTable", "kfold_bounds", "run_grid"]


RUNS_STREAM = rng.stream_id("runs")
DATA_STREAM = rng.stream_id("runs/data")
_RESERVED = ("setting", "repeat", "fold", "seed", "data_seed", "n_train", "n_test", "test_start", "test_stop")
_MASK63 = 0x7FFFFFFFFFFFFFFF


class RunError(RuntimeError):
    """A run of :func:`run_grid` failed; ``setting``, ``params``, ``repeat`` and ``fold`` say which."""

    def __init__(self, message: str, *, setting: int, params: dict[str, Any], repeat: int, fold: int | None) -> None:
        super().__init__(message)
        self.setting, self.params, self.repeat, self.fold = setting, params, repeat, fold


# --------------------------------------------------------------------------- seeds and folds


def run_seed(seed: int, repeat: int, fold: int | None = None) -> int:
    """The ``random_state`` of the run of ``repeat`` and ``fold`` (fold 0 when there are no folds)."""
    return int(rng.hash64(seed, RUNS_STREAM, repeat, 0 if fold is None else fold)) & _MASK63


def data_seed(seed: int, repeat: int) -> int:
    """The seed a data factory is called with in ``repeat``."""
    return int(rng.hash64(seed, DATA_STREAM, repeat)) & _MASK63


def kfold_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """``k`` contiguous ranges ``[start, stop)`` covering ``0 .. n - 1``; the first ``n % k`` are one longer.

    >>> kfold_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    """
    if k < 1 or n < k:
        raise ValueError(f"cannot cut {n} items into {k} non-empty folds")
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


# --------------------------------------------------------------------------- the grid


def _expand_grid(estimator: Any, param_grid: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The settings (list of dicts, grid order) and the parameter names (first-seen order)."""
    if param_grid is None:
        return [{}], []
    grids = [param_grid] if isinstance(param_grid, Mapping) else param_grid
    if not isinstance(grids, Sequence) or isinstance(grids, (str, bytes)):
        raise TypeError(f"param_grid must be a dict of lists or a list of such dicts; got {type(param_grid).__name__}")
    valid = estimator.get_params(deep=True)
    name = type(estimator).__name__
    settings: list[dict[str, Any]] = []
    names: list[str] = []
    for g in grids:
        if not isinstance(g, Mapping):
            raise TypeError(f"param_grid must be a dict of lists or a list of such dicts; got an item {g!r}")
        for p, values in g.items():
            if p not in valid:
                raise ValueError(f"param_grid: {name} has no parameter {p!r}{did_you_mean(p, valid)} "
                                 f"(its parameters: {', '.join(sorted(valid))})")
            if p == "random_state":
                raise ValueError("param_grid: random_state is set per run by run_grid (pass random_state= "
                                 "to run_grid; repeats= draws distinct seeds)")
            if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
                raise TypeError(f"param_grid: the values of {p!r} must be a list (or array); got {values!r}")
            if len(values) == 0:
                raise ValueError(f"param_grid: parameter {p!r} has an empty list of values")
            if p not in names:
                names.append(p)
        keys = list(g)
        for combo in itertools.product(*(list(g[k]) for k in keys)):
            settings.append({k: (v.item() if isinstance(v, np.generic) else v) for k, v in zip(keys, combo)})
    if not settings:
        raise ValueError("param_grid is empty: no parameter setting to run")
    return settings, names


# --------------------------------------------------------------------------- the task


def _concat(parts: list[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    return sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)


def _blocks_of(source: Any, rows: tuple[int, int] | None, block_range: tuple[int, int] | None) -> Iterator[tuple[Any, Any]]:
    """``(X, y)`` pieces of a test/evaluation set: store blocks streamed one at a time, or one array piece."""
    kind, obj = source
    if kind == "store":
        lo, hi = block_range if block_range is not None else (0, obj.n_blocks)
        for b in range(lo, hi):
            blk = obj.read_block(b)
            yield blk.X, blk.y
    else:
        X, y = obj
        if rows is None:
            yield X, y
        else:
            yield X[rows[0] : rows[1]], y[rows[0] : rows[1]]


def _resolve(source: Any, dseed: int) -> tuple[str, Any]:
    """("store", Dataset) or ("arrays", (X, y)); a factory is called with the repeat's data seed."""
    if source is None:
        return ("none", None)
    if is_store(source):
        return ("store", open_dataset(source, validate=False))
    if callable(source):
        X, y = _check_xy(source(dseed), "the data factory's result")
        return ("arrays", (X, y))
    return ("arrays", source)


def _check_xy(xy: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(xy, (tuple, list)) or len(xy) != 2:
        raise TypeError(f"{what} must be an (X, y) pair; got {type(xy).__name__}")
    X, y = xy
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    else:
        X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"{what}: X must be 2-D and y 1-D with as many rows; got {X.shape} and {y.shape}")
    return X, y


def _margin(est: Any, pieces: Iterator[tuple[Any, Any]]) -> float | None:
    coef = getattr(est, "coef_", None)
    if coef is None or len(getattr(est, "classes_", ())) != 2:
        return None
    w = np.concatenate([np.asarray(coef, np.float64).ravel(), np.asarray(est.intercept_, np.float64).ravel()])
    norm = float(np.linalg.norm(w))
    if norm == 0.0:
        return None
    lo = math.inf
    for X, y in pieces:
        if X.shape[0]:
            s = np.asarray(est.decision_function(X), np.float64)
            ys = np.where(np.asarray(y) == est.classes_[1], 1.0, -1.0)
            lo = min(lo, float(np.min(ys * s)))
    return lo / norm if math.isfinite(lo) else None


def _error(est: Any, pieces: Iterator[tuple[Any, Any]]) -> tuple[float | None, int]:
    wrong = n = 0
    for X, y in pieces:
        if X.shape[0]:
            wrong += int(np.count_nonzero(est.predict(X) != np.asarray(y)))
            n += X.shape[0]
    return (wrong / n if n else None), n


def _run_task(spec: dict[str, Any], train: Any, test: Any) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """One run: fit ``spec["estimator"]`` (unfitted, parameters and seed set) and measure it.

    Pure: the result depends only on the arguments (store contents included),
    so Dask may run it anywhere and retry it.
    """
    est = spec["estimator"]
    metrics = spec["metrics"]
    fold = spec["fold"]  # None, or {"rows": (r0, r1), "blocks": (b0, b1) or None}
    tr = _resolve(train, spec["data_seed"])
    row = dict(spec["row"])

    # -- the training set
    fit_on_store = tr[0] == "store" and fold is None
    if fit_on_store:
        ds = tr[1]
        Xtr = ytr = None
        n_train = ds.n_samples
    else:
        if tr[0] == "store":  # load the blocks outside the test fold
            ds = tr[1]
            r0, r1 = fold["rows"]
            parts = [ds.read_rows(a, b) for a, b in ((0, r0), (r1, ds.n_samples)) if b > a]
            Xtr, ytr = _concat([p.X for p in parts]), np.concatenate([p.y for p in parts])
        else:
            X, y = tr[1]
            if fold is None:
                Xtr, ytr = X, y
            else:
                r0, r1 = fold["rows"]
                keep = np.r_[0:r0, r1 : X.shape[0]]
                Xtr, ytr = X[keep], y[keep]
        n_train = Xtr.shape[0]

    t0 = time.perf_counter()
    if fit_on_store:
        est.fit(str(ds.path))
    else:
        est.fit(Xtr, ytr)
    fit_seconds = time.perf_counter() - t0

    def train_pieces() -> Iterator[tuple[Any, Any]]:
        if fit_on_store:
            return _blocks_of(tr, None, None)
        return iter([(Xtr, ytr)])

    # -- the test set: the held-out fold, or `test`
    n_test = 0
    test_error = None
    te: tuple[str, Any] | None = None
    te_rows = te_blocks = None
    if fold is not None:
        te, te_rows, te_blocks = tr, fold["rows"], fold["blocks"]
    elif test is not None:
        te = _resolve(test, spec["data_seed"])
    if te is not None:
        test_error, n_test = _error(est, _blocks_of(te, te_rows, te_blocks))
    row["n_train"], row["n_test"] = int(n_train), int(n_test)

    for m in metrics:
        if m == "test_error":
            v: Any = test_error
        elif m == "train_error":
            v = _error(est, train_pieces())[0]
        elif m == "online_error":
            t = int(getattr(est, "t_", 0) or 0)
            v = int(est.online_errors_) / t if t and hasattr(est, "online_errors_") else None
        elif m == "n_updates":
            v = int(est.n_updates_) if hasattr(est, "n_updates_") else None
        elif m == "n_support":
            v = int(np.sum(est.n_support_)) if hasattr(est, "n_support_") else None
        elif m == "train_margin":
            v = _margin(est, train_pieces())
        elif m == "fit_seconds":
            v = fit_seconds
        else:  # pragma: no cover - checked by run_grid
            raise ValueError(f"unknown metric {m!r}")
        row[m] = v

    model = None
    if spec["return_models"]:
        model = {"classes": np.asarray(est.classes_)}
        if getattr(est, "coef_", None) is not None:
            model["coef"] = np.asarray(est.coef_)
            model["intercept"] = np.asarray(est.intercept_)
        if getattr(est, "support_vectors_", None) is not None:  # kernel learners and their Bayes points
            sv = est.support_vectors_
            model["support_vectors"] = sv.toarray() if sp.issparse(sv) else np.asarray(sv)
            model["dual_coef"] = np.asarray(est.dual_coef_)
    return row, model


# --------------------------------------------------------------------------- run_grid


def _describe(source: Any) -> Any:
    if source is None:
        return None
    if is_store(source):
        return {"store": str(getattr(source, "path", source))}
    if callable(source):
        return {"factory": _callable_name(source)}
    X = source[0]
    return {"arrays": list(X.shape), "sparse": bool(sp.issparse(X))}


def _callable_name(f: Any) -> str:
    """A stable name for a data factory (no memory addresses): ``module.qualname``, partials spelled out."""
    if isinstance(f, functools.partial):
        args = [repr(a) for a in f.args] + [f"{k}={v!r}" for k, v in f.keywords.items()]
        return f"{_callable_name(f.func)}({', '.join(args)})"
    name = getattr(f, "__qualname__", None) or type(f).__qualname__
    return f"{getattr(f, '__module__', None) or type(f).__module__}.{name}"


def _prepare_source(source: Any, what: str) -> tuple[Any, Any]:
    """Check a data argument; return (the object tasks get, an opened Dataset or None)."""
    if source is None:
        return None, None
    if is_store(source):
        ds = open_dataset(source)
        if ds.classes is None:
            raise ValueError(f"{what} store {ds.path}: labels are not classes (continuous targets?)")
        return absolute(ds.path, resolve=True), ds
    if callable(source):
        return source, None
    return _check_xy(source, what), None


def run_grid(
    estimator: Any,
    param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] | None = None,
    train: Any = None,
    test: Any = None,
    *,
    repeats: int = 1,
    folds: int | None = None,
    scheduler: Any = None,
    n_workers: int | None = None,
    random_state: int | None | np.random.Generator = 0,
    metrics: Sequence[str] | None = None,
    retries: int = 2,
    progress: bool = False,
    return_models: bool = False,
) -> RunTable:
    """Train ``estimator`` for every parameter setting, repeat and fold, each run a task.

    Parameters
    ----------
    estimator : distlearn estimator
        Unfitted; it is cloned for every run (its own parameters are the base
        that the grid overrides).
    param_grid : dict of lists, list of such dicts, or None
        The settings: the cartesian product of each dict's value lists (like
        scikit-learn's ``ParameterGrid``, but in the order the keys are
        written), the dicts' products concatenated.  None: one setting, the
        estimator as it is.
    train : store path, Dataset, (X, y) tuple, or callable
        Training data.  A store is opened by every task on its worker (the
        path must be visible to the caller and the workers); an ``(X, y)``
        tuple is scattered to the cluster once; a callable ``train(seed) ->
        (X, y)`` is a data *factory* called inside each task with the repeat's
        data seed (a fresh data set per repeat, nothing shipped at all).
    test : same kinds as ``train``, optional
        Test data for ``test_error``.  Not with ``folds``.
    repeats : int, default=1
        Monte Carlo repeats: repeat ``r`` trains with the seed
        ``hash64(seed, stream_id("runs"), r, fold)``, and a data factory is
        called with ``hash64(seed, stream_id("runs/data"), r)``.
    folds : int, default=None
        k-fold cross-validation (k >= 2): the test error of fold ``f`` is
        measured on its contiguous block range (store) or row range (arrays)
        after training on the rest.  For a store a task loads its training
        blocks into memory (scipy CSR or numpy) and streams its test blocks.
    scheduler : None, "local", Client, address or scheduler file
        None runs the tasks here, one after the other (same rows); "local"
        starts a LocalCluster (``n_workers`` processes, default one per core);
        anything else goes to :func:`distlearn.distributed.get_client`.
    n_workers : int, default=None
        LocalCluster size for ``scheduler="local"``.
    random_state : int, None or numpy Generator, default=0
        The seed of every run (None draws one; ``config["random_state"]`` records it).
    metrics : sequence of str, default=None
        Names from :data:`METRICS`.  Default: ``test_error`` (when there is a
        test set or folds), ``online_error``, ``fit_seconds``, ``n_updates``.
    retries : int, default=2
        Dask retries of a task (safe: tasks are pure).
    progress : bool, default=False
        A tqdm bar over completed runs, on stderr.
    return_models : bool, default=False
        Keep each run's ``classes``, ``coef`` and ``intercept`` arrays (kernel
        models: ``support_vectors`` and ``dual_coef``) in ``RunTable.models``
        (never the estimator objects).

    Returns
    -------
    RunTable

    Raises
    ------
    ValueError
        Unknown parameter (named), empty grid or value list, invalid parameter
        value (the setting is named), ``folds < 2`` or more folds than blocks
        / rows, ``test`` together with ``folds``, unknown metric.
    RunError
        A run failed; the message names its parameters, repeat and fold, and
        the original exception is chained.

    Examples
    --------
    >>> from distlearn import ALMA
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> d = make_obpm_artificial(300, 300, n_features=20, random_state=0)
    >>> table = run_grid(ALMA(epochs=1), {"B": [0.5, 1.0], "C": [0.7, 1.4]},
    ...                  (d.X_train, d.y_train), (d.X_test, d.y_test), repeats=2)
    >>> len(table), table.param_names
    (8, ['B', 'C'])
    >>> sorted(table.best("test_error")["params"])
    ['B', 'C']
    """
    from sklearn.base import clone

    if train is None:
        raise TypeError("run_grid needs training data: train= a store path, an (X, y) tuple or a data factory")
    if not hasattr(estimator, "get_params") or not hasattr(estimator, "fit"):
        raise TypeError(f"estimator must be a scikit-learn style estimator; got {type(estimator).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1; got {repeats!r}")
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, numbers.Integral) or folds < 2):
        raise ValueError(f"folds must be an int >= 2 (or None for no cross-validation); got {folds!r}")
    if folds is not None and test is not None:
        raise ValueError("give either test= (a test set) or folds= (cross-validation), not both")
    if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
        raise ValueError(f"retries must be an int >= 0; got {retries!r}")
    has_test = test is not None or folds is not None
    if metrics is None:
        metrics = tuple(m for m in DEFAULT_METRICS if has_test or m != "test_error")
    else:
        metrics = (metrics,) if isinstance(metrics, str) else tuple(metrics)
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metrics {unknown}; choose from {', '.join(METRICS)}")
        if "test_error" in metrics and not has_test:
            raise ValueError("metric 'test_error' needs test= or folds=")
        if len(set(metrics)) != len(metrics):
            raise ValueError(f"metrics has duplicates: {list(metrics)}")
    seed = rng.normalize_seed(random_state)

    base = clone(estimator)
    settings, names = _expand_grid(base, param_grid)
    base_params = base.get_params(deep=True)
    has_seed = "random_state" in base_params
    # Check every setting here, before any work: the error names the setting.
    estimators = []
    for params in settings:
        est = clone(base).set_params(**params)
        if hasattr(est, "_check_params"):
            try:
                est._check_params()
            except (ValueError, TypeError) as e:
                raise ValueError(f"param_grid setting {params!r}: {e}") from e
        estimators.append(est)

    train_obj, train_ds = _prepare_source(train, "train")
    test_obj, _ = _prepare_source(test, "test")

    # Folds: row ranges, and block ranges for a store.
    fold_specs: list[dict[str, Any] | None] = [None]
    if folds is not None:
        if train_ds is not None:
            if train_ds.n_blocks < folds:
                raise ValueError(f"folds={folds} needs at least {folds} blocks, but store {train_ds.path} has "
                                 f"{train_ds.n_blocks}; rewrite it with a smaller block_rows")
            bb = train_ds.block_bounds
            fold_specs = [{"rows": (int(bb[a]), int(bb[b])), "blocks": (a, b)} for a, b in kfold_bounds(train_ds.n_blocks, folds)]
        elif callable(train_obj):
            raise ValueError("folds= with a data factory is not supported: the fold ranges need the data's size "
                             "up front; pass a store or an (X, y) tuple")
        else:
            n = train_obj[0].shape[0]
            if n < folds:
                raise ValueError(f"folds={folds} needs at least {folds} training rows; got {n}")
            fold_specs = [{"rows": r, "blocks": None} for r in kfold_bounds(n, folds)]

    factory = callable(train_obj) or callable(test_obj)
    specs: list[dict[str, Any]] = []
    for i, (params, est0) in enumerate(zip(settings, estimators)):
        used = est0.get_params(deep=True)
        for r in range(repeats):
            for f, fs in enumerate(fold_specs):
                fold = None if fs is None else f
                s_run = run_seed(seed, r, fold)
                est = clone(est0)
                if has_seed:
                    est.set_params(random_state=s_run)
                row: dict[str, Any] = {"setting": i}
                for p in names:  # the value used: the setting's, or the estimator's own
                    row[p] = _scalar(used[p])
                row.update(repeat=r, fold=fold, seed=s_run if has_seed else None)
                if factory:
                    row["data_seed"] = data_seed(seed, r)
                if fs is not None:
                    row["test_start"], row["test_stop"] = fs["rows"]
                specs.append({"estimator": est, "metrics": metrics, "fold": fs, "row": row,
                              "data_seed": data_seed(seed, r), "return_models": bool(return_models),
                              "params": params})

    config = {"estimator": repr(estimator), "repeats": int(repeats), "folds": folds, "random_state": seed,
              "train": _describe(train), "test": _describe(test), "n_runs": len(specs), "retries": int(retries),
              "scheduler": _describe_scheduler(scheduler)}
    t0 = time.perf_counter()
    with executor_for(scheduler, n_workers=n_workers, retries=retries) as ex:
        results = _run_all(ex, specs, train_obj, test_obj, progress, estimator)
    config["elapsed_seconds"] = time.perf_counter() - t0
    rows = [r for r, _ in results]
    models = [m for _, m in results] if return_models else None
    return RunTable(rows, names, settings=settings, metrics=metrics, config=config, models=models)


def _describe_scheduler(scheduler: Any) -> str:
    if scheduler is None:
        return "in-process"
    if hasattr(scheduler, "submit"):
        return "client"
    return str(scheduler)


def _failure(spec: dict[str, Any], exc: BaseException) -> RunError:
    row = spec["row"]
    where = f"repeat {row['repeat']}" + ("" if row["fold"] is None else f", fold {row['fold']}")
    return RunError(f"run failed: setting {row['setting']} {spec['params']!r}, {where} (seed {row['seed']}): "
                    f"{type(exc).__name__}: {exc}", setting=row["setting"], params=spec["params"],
                    repeat=row["repeat"], fold=row["fold"])


def _bar(total: int, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="runs", unit="run", disable=not progress, file=sys.stderr, leave=True)


def _run_all(ex: Executor, specs: list[dict[str, Any]], train: Any, test: Any, progress: bool,
             estimator: Any) -> list[Any]:
    """Every run as one task on ``ex``; results in grid order, the first failure as a :class:`RunError`."""
    from dask.base import tokenize

    def ship(obj: Any) -> tuple[Any, Any]:
        """(what tasks get, what identifies it in the keys): arrays are scattered once."""
        if isinstance(obj, tuple):
            h = ex.scatter(obj)
            return h, getattr(h, "key", None) or tokenize(obj)
        if isinstance(obj, str):
            return obj, (obj, open_dataset(obj, validate=False).meta.get("created"))
        return obj, obj

    train_arg, train_id = ship(train)
    test_arg, test_id = ship(test)
    cls = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    handles = []
    for spec in specs:
        row = spec["row"]
        # The key is a function of everything the task computes from (pure): the same
        # run submitted again is the same key; the prefix keeps duplicate settings apart.
        token = tokenize(cls, repr(spec["estimator"].get_params(deep=False)), spec["fold"], spec["data_seed"],
                         spec["metrics"], spec["return_models"], train_id, test_id) if ex.kind == "dask" else ""
        fold = "x" if row["fold"] is None else row["fold"]
        key = f"distlearn-run-s{row['setting']}-r{row['repeat']}-f{fold}-{token}"
        handles.append(ex.submit(key, _run_task, spec, train_arg, test_arg))
    results: list[Any] = [None] * len(handles)
    try:
        with _bar(len(handles), progress) as bar:
            for i, h in ex.as_completed(handles):
                try:
                    results[i] = ex.result(h)
                except Exception as e:
                    raise _failure(specs[i], e) from e
                bar.update(1)
    finally:
        ex.cancel(handles)
    return results


# --------------------------------------------------------------------------- members of an ensemble


@functools.lru_cache(maxsize=2)
def _loaded(path: str, token: str) -> tuple[Any, np.ndarray]:
    ds = open_store(path, token)
    return ds.to_scipy() if ds.is_sparse else ds.to_numpy()


def _store_arrays(path: str) -> tuple[Any, np.ndarray]:
    """A store's rows in memory (scipy CSR or numpy), loaded once per process (two stores kept)."""
    return _loaded(str(path), store_token(open_store(path)))


def _fit_member(est: Any, train: Any, load: bool) -> Any:
    """Fit one unfitted, seeded estimator on ``train``: arrays, a store streamed block by block,
    or (``load``) a store loaded whole once per process (exact permutations)."""
    if isinstance(train, tuple):
        return est.fit(*train)
    if load:
        return est.fit(*_store_arrays(train))
    return est.fit(train)


def fit_members(estimators: Sequence[Any], train: Any, *, load: bool = False, scheduler: Any = None,
                n_jobs: int = 1, retries: int = 1) -> list[Any]:
    """Fit independent, seeded estimators (an ensemble's members) as run-parallel tasks.

    ``train`` is an ``(X, y)`` pair (scattered once) or a store path (opened where
    each task runs).  Returns the fitted estimators in order; the same bits
    wherever they ran (``scheduler`` as in :func:`executor_for`).
    """
    import uuid

    nonce = uuid.uuid4().hex[:12]
    with executor_for(scheduler, n_jobs=n_jobs, retries=retries) as ex:
        data = ex.scatter(train) if isinstance(train, tuple) else train
        handles = [ex.submit((f"distlearn-member-{nonce}", j), _fit_member, est, data, load)
                   for j, est in enumerate(estimators)]
        ex.wait(handles)
        return [ex.result(h) for h in handles]


#: The most parts :func:`store_sums` cuts a store's blocks into (consecutive ranges, a function of the number
#: of blocks only): the parallelism of the pass, and the number of partial sums the reduction tree moves.
SUMS_PARTS = 64
#: Fan-in of :func:`store_sums`' reduction tree: a merge holds two parts and their sum.
SUMS_SPLIT_EVERY = 2


def sum_cuts(n_blocks: int, parts: int = SUMS_PARTS) -> list[int]:
    """The block boundaries of :func:`store_sums`' parts: ``P = min(n_blocks, parts)`` consecutive ranges of
    ``n_blocks // P`` or one more blocks (a function of the store only, never of the workers).

    >>> sum_cuts(5), sum_cuts(130)[:4], len(sum_cuts(130)) - 1
    ([0, 1, 2, 3, 4, 5], [0, 2, 4, 6], 64)
    """
    n = max(1, min(int(n_blocks), int(parts)))
    return [i * n_blocks // n for i in range(n + 1)]


def _block_range_sums(fn: Any, path: str, lo: int, hi: int) -> tuple[Any, ...]:
    """``fn(X, y)`` summed over the blocks ``lo .. hi - 1`` of the store at ``path`` in block order, one block
    read at a time (the running sums updated in place: two sums and one block in memory)."""
    ds = open_store(path)
    total: tuple[Any, ...] | None = None
    for b in range(lo, hi):
        blk = ds.read_block(b)
        part = fn(blk.X, blk.y)
        if total is None:
            total = part
        else:
            for a, p in zip(total, part):
                a += p
    assert total is not None  # lo < hi
    return total


def store_sums(fn: Any, path: str, *, scheduler: Any = None, n_jobs: int = 1) -> tuple[Any, ...]:
    """``fn(X, y)`` (a tuple of float arrays) summed over every block of the store at ``path``, data-parallel,
    with the same bits wherever it runs.

    The blocks are cut into at most :data:`SUMS_PARTS` consecutive ranges (:func:`sum_cuts`: a function
    of the store's block count, not of the workers); each range is one task (``scheduler`` as in
    :func:`executor_for`) that streams its blocks in order, and the parts are added in a reduction tree
    of fan-in :data:`SUMS_SPLIT_EVERY` (:meth:`Executor.tree`; in this process :func:`graph.fold` over the
    parts as they finish, the same grouping).  So the sums, and what is solved from them, are the same bits
    in this process, on one worker or on a hundred, whatever the retries; ``fn`` itself must give the same
    bits everywhere (e.g. BLAS on one thread).  Memory, counted in one part's sums: a task holds two (its
    running sums and one block's) beside one block, a merge three, and a worker keeps its finished parts
    until their merge runs; the driver receives one (Dask) or holds about ``log2(parts) + 2 n_jobs`` (in
    this process).  ``fn`` must be picklable (a module-level function or a :func:`functools.partial` of
    one)."""
    import uuid

    cuts = sum_cuts(open_store(path).n_blocks)
    jobs = [(str(path), lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if lo < hi]
    with executor_for(scheduler, n_jobs=n_jobs) as ex:
        if ex.kind != "dask":  # parts as they finish (at most 2 n_jobs ahead), folded at once; BLAS on one
            # thread set here, in the calling thread, for the whole pass (the pool's threads then share it:
            # OpenBLAS 0.3.31 was seen to ignore a limit set from another thread)
            from ..conversions.kernel import _one_blas_thread

            with _one_blas_thread():
                parts = ex.map_ordered(functools.partial(_block_range_sums, fn), jobs)
                return graph.fold(parts, graph.sum_tuples, split_every=SUMS_SPLIT_EVERY)
        nonce = uuid.uuid4().hex[:12]
        shared = ex.scatter(fn)  # what fn carries (e.g. an expansion's patterns) shipped once
        handles = [ex.submit((f"distlearn-sums-{nonce}", i), _block_range_sums, shared, *job)
                   for i, job in enumerate(jobs)]
        # the merges first once their parts are ready, so finished parts do not wait on the workers
        root = ex.tree(f"distlearn-sums-merge-{nonce}", handles, graph.sum_tuples, SUMS_SPLIT_EVERY, priority=1)
        del handles  # a part held here stays in its worker's memory after its merge (12 parts: +800 MiB)
        try:
            return ex.result(root)
        finally:
            ex.cancel([root])  # its parts, wanted by nothing else, go with it
