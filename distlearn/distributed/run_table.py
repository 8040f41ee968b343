"""The results of a run-parallel grid: one row per run, summaries per parameter setting, JSON.

:class:`RunTable` is what :func:`distlearn.distributed.run_grid` returns.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RunTable", "METRICS", "DEFAULT_METRICS", "MAXIMISE"]

#: Metrics a run can record.  Errors are fractions in [0, 1].
METRICS: dict[str, str] = {
    "test_error": "misclassified fraction of the test set (the held-out fold with folds=k)",
    "train_error": "misclassified fraction of the training set, after training",
    "online_error": "progressive mistakes / rounds of the first pass (online_errors_ / t_)",
    "n_updates": "updates made during fit (n_updates_)",
    "n_support": "kernel models: support patterns of the fitted hypothesis (n_support_.sum())",
    "train_margin": "binary linear models: min_i y_i (w.x_i + b) / ||(w, b)|| on the training set",
    "fit_seconds": "wall-clock seconds of fit (a measurement: the only column that is not reproducible)",
}
DEFAULT_METRICS = ("test_error", "online_error", "fit_seconds", "n_updates")

#: Metrics where larger is better (``best`` maximises them).
MAXIMISE = frozenset({"train_margin"})
_MAXIMISE = MAXIMISE


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


def _scalar(v: Any) -> Any:
    """A JSON-ready scalar for a row: numbers and strings as such, anything else as its repr."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


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


