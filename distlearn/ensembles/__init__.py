"""Ensembles of linear online learners: the engine of Online Bayes Point Machines.

The estimators built on it (:class:`distlearn.OBPM`, :class:`distlearn.PermutationBPM`)
live in :mod:`distlearn.estimators.bayes_point`.
"""

from .engine import (
    EnsembleState,
    concat_states,
    init_ensemble,
    learn_ensemble_chunk,
    learner_groups,
    margin_bound,
    margin_bound_weights,
)

__all__ = ["EnsembleState", "concat_states", "init_ensemble", "learn_ensemble_chunk", "learner_groups",
           "margin_bound", "margin_bound_weights"]
