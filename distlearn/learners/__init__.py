"""Online learners: linear update rules as compiled chunk kernels, and the rule registry.

See :mod:`distlearn.learners.linear` for the rules (:data:`RULES`), their state
and the chunk driver; the scikit-learn estimators built on them live in
:mod:`distlearn.estimators`.
"""

from __future__ import annotations

from .linear import (
    RULES,
    LinearState,
    NonFiniteError,
    RoundLog,
    Rule,
    RuleSpec,
    RunningSum,
    copy_state,
    init_state,
    learn_chunk,
    make_rule,
    max_row_norm,
    raise_non_finite,
    row_sqnorms,
    running_sum,
    running_value,
    state_coef,
)

__all__ = [
    "NonFiniteError",
    "RULES",
    "RunningSum",
    "running_sum",
    "running_value",
    "LinearState",
    "Rule",
    "RuleSpec",
    "RoundLog",
    "copy_state",
    "init_state",
    "learn_chunk",
    "make_rule",
    "max_row_norm",
    "raise_non_finite",
    "row_sqnorms",
    "state_coef",
]
