"""Online learners: linear update rules as compiled chunk kernels.

See :mod:`distlearn.learners.linear` for the rules, their state and the chunk
driver; the scikit-learn estimators built on them live in
:mod:`distlearn.estimators`.
"""

from __future__ import annotations

from .linear import (
    NonFiniteError,
    RULES,
    RunningSum,
    running_sum,
    running_value,
    LinearState,
    Rule,
    RoundLog,
    copy_state,
    init_state,
    learn_chunk,
    make_rule,
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
    "RoundLog",
    "copy_state",
    "init_state",
    "learn_chunk",
    "make_rule",
    "state_coef",
]
