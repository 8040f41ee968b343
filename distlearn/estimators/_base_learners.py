"""The base learners an ensemble runs: :func:`resolve_base` and :func:`refuse_adaptive`.

OBPM, KernelOBPM, PermutationBPM and ParameterMixing all take ``base=`` (a
learner's name or an unfitted distlearn learner) and ``base_params=``; this
module turns the pair into an unfitted estimator, so that every ensemble
reads the same names and none imports another ensemble's module.  Which
bases an ensemble can run is that ensemble's own check.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import clone

from ..learners import RULES
from .adaptive import ADAPTIVE_ESTIMATORS, AdaptiveLinearClassifier
from .base import OnlineLinearClassifier
from .kernel import KERNEL_ESTIMATORS, KernelClassifier
from .linear import ESTIMATORS

__all__ = ["refuse_adaptive", "resolve_base", "shown"]

#: The kinds of single learners an ensemble can be built from (an ensemble is none of them).
LEARNERS: tuple[type, ...] = (*ESTIMATORS.values(), AdaptiveLinearClassifier, KernelClassifier)


def resolve_base(base: Any, base_params: dict[str, Any] | None) -> OnlineLinearClassifier:
    """An unfitted base estimator from ``base`` (a rule name of :data:`distlearn.learners.RULES`, an
    adaptive rule's name ``"arow"``, ``"nag"``, a kernel learner's name ``"kernel-perceptron"``,
    ``"kernel-mira"``, ``"kernel-pa"``, or a distlearn linear, adaptive or kernel estimator, cloned)
    with ``base_params`` set."""
    names = sorted(RULES) + sorted(ADAPTIVE_ESTIMATORS) + sorted(KERNEL_ESTIMATORS)
    registry = {**ESTIMATORS, **ADAPTIVE_ESTIMATORS, **KERNEL_ESTIMATORS}
    if isinstance(base, str) and base in registry:
        est = registry[base]()
    elif isinstance(base, LEARNERS):
        est = clone(base)
    else:
        raise ValueError(f"base must be one of {names}, or a distlearn linear or kernel estimator "
                         f"(e.g. KernelMIRA(budget='variable')); got {base!r}")
    if base_params:
        if not isinstance(base_params, dict):
            raise ValueError(f"base_params must be a dict of the base estimator's parameters, got {base_params!r}")
        valid = est.get_params()
        bad = sorted(set(base_params) - set(valid))
        if bad:
            raise ValueError(f"base_params: {type(est).__name__} has no parameter(s) {bad}; "
                             f"it has {sorted(valid)}")
        est.set_params(**base_params)
    return est


def shown(value: Any, base: Any) -> str:
    """``base=`` as the user wrote it, for a message: a name as given, an estimator as ``Name(...)``."""
    return repr(value) if isinstance(value, str) else f"{type(base).__name__}(...)"


def refuse_adaptive(owner: str, value: Any, base: Any, why: str, instead: str) -> None:
    """One line for an adaptive base (AROW, NormalizedGradient) where ``owner`` cannot run one: the
    parameter as given (``value``, resolved to ``base``), why, and what to use instead (``{name}`` in
    ``instead`` is the base's class name)."""
    if isinstance(base, AdaptiveLinearClassifier):
        name = type(base).__name__
        raise ValueError(f"base={shown(value, base)}: {owner} {why}; {instead.format(name=name)}")
