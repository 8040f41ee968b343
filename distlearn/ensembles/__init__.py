"""Ensembles of linear online learners: Online Bayes Point Machines and permutation Bayes points."""

from .bayes_point import OBPM, PermutationBPM, EnsembleState, init_ensemble, learn_ensemble_chunk, margin_bound_weights

__all__ = ["OBPM", "PermutationBPM", "EnsembleState", "init_ensemble", "learn_ensemble_chunk", "margin_bound_weights"]
