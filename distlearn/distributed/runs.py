"""Run-parallel mode (DESIGN.md decision 7b): grids, repeats and folds as independent tasks.

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

import difflib
import functools
import itertools
import json
import math
import numbers
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import rng

__all__ = ["METRICS", "RunError", "RunTable", "kfold_bounds", "run_grid"]

#: Metrics a run can record.  Errors are fractions in [0, 1].
METRICS: dict[str, str] = {
    "test_error": "misclassified fraction of the test set (the held-out fold with folds=k)",
    "train_error": "misclassified fraction of the training set, after training",
    "online_error": "progressive mistakes / rounds of the first pass (online_errors_ / t_)",
    "n_updates": "updates made during fit (n_updates_)",
    "train_margin": "binary linear models: min_i y_i (w.x_i + b) / ||(w, b)|| on the training set",
    "fit_seconds": "wall-clock seconds of fit (a measurement: the only column that is not reproducible)",
}
DEFAULT_METRICS = ("test_error", "online_error", "fit_seconds", "n_updates")
#: Metrics where larger is better (``best`` maximises them).
_MAXIMISE = frozenset({"train_margin"})

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


def _is_store(x: Any) -> bool:
    from ..data.store import Dataset

    return isinstance(x, (str, os.PathLike, Dataset))


def _scalar(v: Any) -> Any:
    """A JSON-ready scalar for a row: numbers and strings as such, anything else as its repr."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


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
                close = difflib.get_close_matches(str(p), list(valid), n=3)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                raise ValueError(f"param_grid: {name} has no parameter {p!r}{hint} "
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
    if _is_store(source):
        from ..data.store import open_dataset

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
    return row, model


# --------------------------------------------------------------------------- the table


def _mean_std(values: list[Any]) -> tuple[float | None, float | None, int]:
    v = [float(x) for x in values if x is not None]
    if not v:
        return None, None, 0
    a = np.asarray(v, np.float64)
    std = float(a.std(ddof=1)) if len(a) > 1 else 0.0
    return float(a.mean()), std, len(a)


def _fmt_param(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _decimals(values: list[float], digits: int) -> int:
    top = max((abs(v) for v in values if v is not None and math.isfinite(v)), default=0.0)
    if top == 0.0:
        return digits
    return int(min(8, max(0, digits - 1 - math.floor(math.log10(top)))))


class RunTable:
    """The rows of a :func:`run_grid` call, one per run, and their summary per parameter setting.

    Attributes
    ----------
    rows : list of dict
        One per run, in grid order (setting, then repeat, then fold): the
        ``setting`` index, the parameter values (scalars; other objects as
        their ``repr``), ``repeat``, ``fold`` (None without folds), ``seed``
        (the run's ``random_state``), ``data_seed`` (data factories only),
        ``n_train``, ``n_test``, ``test_start``/``test_stop`` (folds: the
        held-out rows) and one entry per metric (None when not defined, e.g.
        no ``n_updates_``).
    param_names : list of str
        The grid's parameter names.
    settings : list of dict
        The parameter settings as given (estimator objects kept).
    metrics : tuple of str
    config : dict
        How the runs were made (estimator, repeats, folds, random_state, data).
    models : list of dict or None
        With ``return_models=True``: per row, ``classes`` and (linear models)
        ``coef`` and ``intercept`` arrays.
    """

    def __init__(self, rows: list[dict[str, Any]], param_names: Sequence[str], *,
                 settings: list[dict[str, Any]] | None = None, metrics: Sequence[str] = DEFAULT_METRICS,
                 config: dict[str, Any] | None = None, models: list[dict[str, np.ndarray] | None] | None = None) -> None:
        self.rows = list(rows)
        self.param_names = list(param_names)
        if settings is None:
            seen: dict[int, dict[str, Any]] = {}
            for r in self.rows:
                seen.setdefault(r["setting"], {p: r[p] for p in self.param_names})
            settings = [seen[k] for k in sorted(seen)]
        self.settings = settings
        self.metrics = tuple(metrics)
        self.config = dict(config or {})
        self.models = models

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]

    def __repr__(self) -> str:
        return (f"<RunTable: {len(self.rows)} runs, {len(self.settings)} settings of "
                f"{', '.join(self.param_names) or '(no parameters)'}; metrics {', '.join(self.metrics)}>")

    def __str__(self) -> str:
        return self.format()

    # -- aggregation
    def summary(self) -> list[dict[str, Any]]:
        """One dict per setting (grid order): ``setting``, the parameters, ``runs``, and
        ``<metric>_mean`` / ``<metric>_std`` over its repeats and folds (sample standard
        deviation, 0 for one run; None where the metric is undefined)."""
        by: dict[int, list[dict[str, Any]]] = {}
        for r in self.rows:
            by.setdefault(r["setting"], []).append(r)
        out = []
        for s in sorted(by):
            rows = by[s]
            entry: dict[str, Any] = {"setting": s, **{p: rows[0].get(p) for p in self.param_names}, "runs": len(rows)}
            for m in self.metrics:
                mean, std, _ = _mean_std([r.get(m) for r in rows])
                entry[f"{m}_mean"], entry[f"{m}_std"] = mean, std
            out.append(entry)
        return out

    def best(self, metric: str = "test_error", *, maximize: bool | None = None) -> dict[str, Any]:
        """The setting with the best mean ``metric`` (lowest; highest for margins, or with
        ``maximize=True``); ties go to the first in grid order.

        Returns its :meth:`summary` entry plus ``params``, the setting as given
        (ready for ``estimator.set_params(**best["params"])``), ``mean`` and ``std``.
        """
        if metric not in self.metrics:
            raise ValueError(f"metric {metric!r} was not recorded; the table has {', '.join(self.metrics)}")
        if maximize is None:
            maximize = metric in _MAXIMISE
        cands = [s for s in self.summary() if s[f"{metric}_mean"] is not None]
        if not cands:
            raise ValueError(f"no run has a value for {metric!r}")
        sign = -1.0 if maximize else 1.0
        top = min(cands, key=lambda s: sign * s[f"{metric}_mean"])  # min keeps the first of ties
        params = self.settings[top["setting"]] if top["setting"] < len(self.settings) else {}
        return {**top, "params": dict(params), "metric": metric, "mean": top[f"{metric}_mean"],
                "std": top[f"{metric}_std"]}

    # -- output
    def format(self, metrics: Sequence[str] | None = None, *, digits: int = 4) -> str:
        """An aligned text table: one line per setting, ``mean ± std`` of each metric over
        its repeats and folds (``digits`` significant digits for the column's largest mean)."""
        metrics = tuple(self.metrics if metrics is None else metrics)
        unknown = [m for m in metrics if m not in self.metrics]
        if unknown:
            raise ValueError(f"metrics {unknown} were not recorded; the table has {', '.join(self.metrics)}")
        summ = self.summary()
        header = [*self.param_names, "runs", *metrics]
        body: list[list[str]] = []
        dec = {m: _decimals([s[f"{m}_mean"] for s in summ], digits) for m in metrics}
        for s in summ:
            cells = [_fmt_param(s[p]) for p in self.param_names] + [str(s["runs"])]
            for m in metrics:
                mean, std = s[f"{m}_mean"], s[f"{m}_std"]
                cells.append("-" if mean is None else f"{mean:.{dec[m]}f} ± {std:.{dec[m]}f}")
            body.append(cells)
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
        n_par = len(self.param_names)

        def line(cells: list[str]) -> str:
            return "  ".join(c.ljust(w) if i < n_par else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in body)])

    def to_dict(self, *, models: bool = False) -> dict[str, Any]:
        """A JSON-ready dict: ``param_names``, ``metrics``, ``settings`` (scalars, other
        values as repr), ``config``, ``rows``, ``summary``; ``models`` (nested lists) on request."""
        d: dict[str, Any] = {
            "format": "distlearn.RunTable",
            "version": 1,
            "param_names": list(self.param_names),
            "metrics": list(self.metrics),
            "settings": [{k: _scalar(v) for k, v in s.items()} for s in self.settings],
            "config": self.config,
            "rows": [dict(r) for r in self.rows],
            "summary": self.summary(),
        }
        if models and self.models is not None:
            d["models"] = [None if m is None else {k: np.asarray(v).tolist() for k, v in m.items()}
                           for m in self.models]
        return d

    def to_json(self, path: str | os.PathLike[str] | None = None, *, models: bool = False, indent: int | None = 1) -> str:
        """:meth:`to_dict` as JSON text (NaN and infinities as null); written to ``path`` when given."""
        text = json.dumps(_json_safe(self.to_dict(models=models)), indent=indent, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunTable:
        """Rebuild a table from :meth:`to_dict` / parsed :meth:`to_json` output."""
        if d.get("format") != "distlearn.RunTable":
            raise ValueError("not a distlearn.RunTable dict (no format='distlearn.RunTable')")
        models = d.get("models")
        if models is not None:
            models = [None if m is None else {k: np.asarray(v) for k, v in m.items()} for m in models]
        return cls(d["rows"], d["param_names"], settings=d.get("settings"), metrics=d["metrics"],
                   config=d.get("config"), models=models)


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


# --------------------------------------------------------------------------- run_grid


def _describe(source: Any) -> Any:
    if source is None:
        return None
    if _is_store(source):
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
    if _is_store(source):
        from ..data.store import open_dataset

        ds = open_dataset(source)
        if ds.classes is None:
            raise ValueError(f"{what} store {ds.path}: labels are not classes (continuous targets?)")
        return str(ds.path.resolve()), ds
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
        Keep each run's ``classes``, ``coef`` and ``intercept`` arrays in
        ``RunTable.models`` (never the estimator objects).

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
    if scheduler is None:
        results = _run_here(specs, train_obj, test_obj, progress)
    else:
        from .cluster import get_client

        with get_client(None if scheduler == "local" else scheduler, n_workers=n_workers) as client:
            results = _run_on(client, specs, train_obj, test_obj, progress, retries, estimator)
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


def _run_here(specs: list[dict[str, Any]], train: Any, test: Any, progress: bool) -> list[Any]:
    out = []
    with _bar(len(specs), progress) as bar:
        for spec in specs:
            try:
                out.append(_run_task(spec, train, test))
            except Exception as e:
                raise _failure(spec, e) from e
            bar.update(1)
    return out


def _run_on(client: Any, specs: list[dict[str, Any]], train: Any, test: Any, progress: bool, retries: int,
            estimator: Any) -> list[Any]:
    from dask.base import tokenize
    from distributed import as_completed

    def ship(obj: Any) -> tuple[Any, Any]:
        """(what tasks get, what identifies it in the keys): arrays are scattered once."""
        if isinstance(obj, tuple):
            fut = client.scatter([obj], broadcast=False, hash=True)[0]
            return fut, fut.key
        if isinstance(obj, str):
            from ..data.store import open_dataset

            return obj, (obj, open_dataset(obj, validate=False).meta.get("created"))
        return obj, obj

    train_arg, train_id = ship(train)
    test_arg, test_id = ship(test)
    cls = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    futures = []
    for spec in specs:
        row = spec["row"]
        # The key is a function of everything the task computes from (pure): the same
        # run submitted again is the same key; the prefix keeps duplicate settings apart.
        token = tokenize(cls, repr(spec["estimator"].get_params(deep=False)), spec["fold"], spec["data_seed"],
                         spec["metrics"], spec["return_models"], train_id, test_id)
        fold = "x" if row["fold"] is None else row["fold"]
        key = f"distlearn-run-s{row['setting']}-r{row['repeat']}-f{fold}-{token}"
        futures.append(client.submit(_run_task, spec, train_arg, test_arg, key=key, pure=True, retries=retries))
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    try:
        with _bar(len(futures), progress) as bar:
            for fut in as_completed(futures):
                i = index[fut.key]
                if fut.status == "error":
                    raise _failure(specs[i], fut.exception()) from fut.exception()
                results[i] = fut.result()
                bar.update(1)
    finally:
        client.cancel([f for f in futures if not f.done()])
    return results
