"""The adaptive linear rules: per-feature steps (AROW, normalised adaptive gradient).

Their kernels are in :mod:`distlearn.learners._adaptive`; they run through the
same chunk driver as the classic rules (:func:`~distlearn.learners.linear.learn_chunk`,
which dispatches on the rule code), so every online-to-batch conversion and
the store stream work unchanged.  Their state, :class:`AdaptiveState`, is
:class:`~distlearn.learners.linear.LinearState`'s arrays plus the per-feature
statistics.

They have their own registry, :data:`ADAPTIVE_RULES`, rather than entries in
:data:`~distlearn.learners.linear.RULES`: that registry also feeds OBPM's and
ParameterMixing's ``base=`` and the ensemble kernel, which keep no per-feature
statistics.

>>> import numpy as np
>>> rule = make_adaptive_rule("arow", r=1.0)
>>> state = init_adaptive_state("arow", n_features=2, n_outputs=1)
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
>>> log = learn_chunk(rule, state, X, np.array([1, 0, 1]))
>>> log.updated.tolist()           # each round's hinge loss is positive (y w.x = 0, 0, 0)
[1, 1, 1]
>>> bool(((state.A > 0) & (state.A <= 1)).all())     # Sigma stays in (0, 1]
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import check_allocation
from . import _adaptive as A
from .linear import Built, Rule, RuleSpec, learn_chunk, rule_vector

__all__ = ["ADAPTIVE_RULES", "AdaptiveState", "init_adaptive_state", "learn_chunk", "make_adaptive_rule"]

AdaptiveState = A.AdaptiveState


def _pos(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def _arow(r: float = 1.0) -> Built:
    return A.AROW, {A.P_AROW_R: _pos("r", r)}


def _nag(loss: str = "logistic", eta: float = 1.0) -> Built:
    codes = {"hinge": A.NAG_HINGE, "logistic": A.NAG_LOGISTIC}
    if loss not in codes:
        raise ValueError(f"loss must be 'hinge' or 'logistic', got {loss!r}")
    return codes[loss], {A.P_NAG_ETA: _pos("eta", eta)}


#: The adaptive rules, by name: (name, parameters -> (code, {slot: value}),
#: estimator class name, one-line summary).  ``native`` is always False
#: (multiclass is one-vs-rest).
ADAPTIVE_RULES: dict[str, RuleSpec] = {r.name: r for r in (
    RuleSpec("arow", _arow, "AROW", "AROW, diagonal (Crammer, Kulesza & Dredze 2009): per-feature confidence"),
    RuleSpec("nag", _nag, "NormalizedGradient",
             "normalised adaptive gradient NAG (Ross, Mineiro & Langford 2013), hinge or logistic loss"),
)}


def make_adaptive_rule(name: str, **params: Any) -> Rule:
    """Build the :class:`~distlearn.learners.linear.Rule` of an adaptive rule:
    ``arow(r=1)``, ``nag(loss="logistic", eta=1)``."""
    try:
        make: Callable[..., Built] = ADAPTIVE_RULES[name].make
    except KeyError:
        raise ValueError(f"unknown adaptive rule {name!r}; choose one of {sorted(ADAPTIVE_RULES)}") from None
    code, p = make(**params)
    return Rule(name, int(code), rule_vector(p), False)


def init_adaptive_state(name: str, n_features: int, n_outputs: int, *, dtype: Any = np.float64) -> AdaptiveState:
    """Zero weights and the rule's initial statistics (AROW: Sigma = 1; NAG: s = G = t = N = 0)."""
    if name not in ADAPTIVE_RULES:
        raise ValueError(f"unknown adaptive rule {name!r}; choose one of {sorted(ADAPTIVE_RULES)}")
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    d1, k = int(n_features) + 1, int(n_outputs)
    check_allocation("the weights and their statistics", (d1, k), dt.itemsize + 8)
    return AdaptiveState(
        W=np.zeros((d1, k), dtype=dt),
        scale=np.ones(k, dtype=np.float64),
        sqnorm=np.zeros(k, dtype=np.float64),
        n_updates=np.zeros(k, dtype=np.int64),
        n_rounds=np.zeros(1, dtype=np.int64),
        age=np.zeros(1, dtype=np.int64),
        A=np.full((d1, k), 1.0 if name == "arow" else 0.0, dtype=np.float64),
        S=np.zeros(d1 if name == "nag" else 0, dtype=np.float64),
        T=np.zeros(2, dtype=np.float64),
    )
