"""Ensembles of online learners: the engines of Online Bayes Point Machines.

:mod:`~distlearn.ensembles.engine` runs N linear learners in one compiled pass;
:mod:`~distlearn.ensembles.kernel` runs N kernel learners on one shared pool of
patterns with one kernel row per example.

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
