"""Train and evaluate by name: what ``distlearn train`` does, as library calls.

:func:`make_estimator` builds an estimator from a model name (``"obpm"`` or a
rule of the registry :data:`distlearn.learners.RULES`) and a parameter dict,
optionally data-parallel; :func:`evaluate` measures any fitted classifier (or
a saved :class:`~distlearn.model.LinearModel`) on arrays or a store, streamed
block by block; :func:`fit_summary` reports what a fit did, with the same
keys for every estimator.

>>> from distlearn.data.synthetic import make_obpm_artificial
>>> d = make_obpm_artificial(500, 500, n_features=20, random_state=0)
>>> est = make_estimator("alma", {"C": 1.0}, seed=0).fit(d.X_train, d.y_train)
>>> r = evaluate(est, d.X_test, d.y_test)
>>> r["n"], r["error"] < 0.1
(500, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .data.store import open_dataset
from .estimators import ESTIMATORS, KERNEL_ESTIMATORS, OBPM, ParameterMixing
from .learners import RULES
from .stream import is_store

__all__ = ["MODELS", "evaluate", "fit_summary", "make_estimator"]

#: Model name -> one line: ``"obpm"``, every rule of the registry, and the kernel learners.
MODELS: dict[str, str] = {"obpm": "Online Bayes Point Machine over any rule (--param base=NAME)",
                          **{name: spec.summary for name, spec in RULES.items()},
                          "kernel-perceptron": "kernel (aggressive) perceptron on a budget: --param kernel=rbf "
                                               "gamma=scale beta=0.1 budget=variable|N removal=margin|oldest|random",
                          "kernel-mira": "kernel MIRA on a budget, the budget paper's learner (same --param as "
                                         "kernel-perceptron; beta=0.01)",
                          "kernel-pa": "kernel passive-aggressive PA/PA-I/PA-II, single-prototype multiclass "
                                       "(--param variant=PA C=1 kernel=rbf budget=...)"}


def _check_names(est: Any, params: dict[str, Any]) -> None:
    valid = est.get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"parameter {unknown[0]!r} is not a parameter of {type(est).__name__}; "
                         f"it has: {', '.join(sorted(valid))}")


def make_estimator(model: str, params: dict[str, Any] | None = None, *, shards: int | None = None,
                   mixing: str = "uniform", seed: int | None = None, epochs: int | None = None) -> Any:
    """An unfitted estimator for ``model`` with ``params`` set.

    ``shards``: train data-parallel (:class:`~distlearn.ParameterMixing` over the
    rule, any model but ``"obpm"``, which is parallel over its learners);
    ``params`` then holds the rule's parameters and the shared ``epochs``,
    ``fit_intercept``, ``dtype``, ``conversion``.  ``seed`` and ``epochs`` set
    ``random_state`` and ``epochs``.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(sorted(MODELS))}")
    params = dict(params or {})
    est: Any = OBPM() if model == "obpm" else (KERNEL_ESTIMATORS[model]() if model in KERNEL_ESTIMATORS
                                               else ESTIMATORS[model]())
    _check_names(est, params)
    if shards:
        if model == "obpm":
            raise ValueError("shards apply to single learners; OBPM parallelises over its learners "
                             "(--workers/--scheduler)")
        if model in KERNEL_ESTIMATORS:
            raise ValueError("shards (parameter mixing) apply to linear learners; a kernel model trains in one "
                             "pass over its cache")
        shared = {k: params.pop(k) for k in ("epochs", "fit_intercept", "dtype", "conversion") if k in params}
        est = ParameterMixing(base=model, base_params=params or None, n_shards=shards, mixing=mixing)
        params = shared
    if seed is not None:
        params["random_state"] = seed
    if epochs:
        params["epochs"] = epochs
    return est.set_params(**params)


def evaluate(est: Any, X: Any, y: Any = None) -> dict[str, Any]:
    """Test error of a fitted classifier on arrays, or on a store streamed block by block (``y`` None).

    Returns ``{"n": rows, "errors": misclassified rows, "error": their fraction}``.
    """
    if is_store(X):
        if y is not None:
            raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
        pieces = ((b.X, b.y) for b in open_dataset(X).iter_blocks())
    else:
        pieces = iter([(X, y)])
    wrong = n = 0
    for Xb, yb in pieces:
        if Xb.shape[0]:
            wrong += int(np.count_nonzero(est.predict(Xb) != np.asarray(yb)))
            n += Xb.shape[0]
    return {"n": n, "errors": wrong, "error": wrong / n if n else None}


def fit_summary(est: Any) -> dict[str, Any]:
    """What a fit did, the same keys for every distlearn estimator.

    ``online_error`` is the progressive error of the first epoch (the papers'
    online error): ``epoch_online_errors_[0]`` over the rows of one epoch where
    the estimator keeps per-epoch counts, else ``online_errors_ / t_``.
    """
    epochs = int(getattr(est, "n_iter_", 1) or 1)
    out: dict[str, Any] = {"model": type(est).__name__, "epochs": epochs,
                           "n_updates": int(getattr(est, "n_updates_", 0))}
    per_epoch = getattr(est, "epoch_online_errors_", None)
    t = int(getattr(est, "t_", 0))
    if per_epoch is not None:
        rows = t // epochs if isinstance(est, ParameterMixing) else t  # OBPM's t_ counts the first epoch
        out["epoch_online_errors"] = [int(v) for v in per_epoch]
        out["online_errors"] = int(per_epoch[0])
        out["online_rows"] = rows
        out["online_scope"] = "first epoch"
    else:
        out["online_errors"] = int(getattr(est, "online_errors_", 0))
        out["online_rows"] = t
        out["online_scope"] = "all epochs"
    out["online_error"] = out["online_errors"] / max(1, out["online_rows"])
    if hasattr(est, "n_support_"):
        out["n_support"] = int(np.sum(est.n_support_))
        out["n_removed"] = int(getattr(est, "n_removed_", 0))
    if hasattr(est, "job_"):
        out["job"] = est.job_
    return out
