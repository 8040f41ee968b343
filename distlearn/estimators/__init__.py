"""The scikit-learn estimators.

- :mod:`.base`: the batch base (:class:`LinearClassifier`) and the online base
  (:class:`OnlineLinearClassifier`, with ``partial_fit``);
- :mod:`.linear`: one estimator per linear rule of the registry
  (:data:`distlearn.learners.RULES`);
- :mod:`.adaptive`: the adaptive rules (:class:`AROW`, :class:`NormalizedGradient`), with
  per-feature statistics in their state (:data:`distlearn.learners.adaptive.ADAPTIVE_RULES`);
- :mod:`.bayes_point`: :class:`OBPM` (online, linear rules) and :class:`PermutationBPM` (batch);
- :mod:`.kernel_bayes_point`: :class:`KernelOBPM` (online, kernel learners on one shared pool) and
  :class:`KernelPermutationBPM` (batch, kernel members on their own permutations);
  both OBPMs derive from ``_online_bayes_point.OnlineBayesPoint``, both permutation Bayes points
  from ``_permutation_bayes_point.PermutationBayesPoint``, and every ensemble reads
  ``base=`` through ``_base_learners.resolve_base``;
- :mod:`.kernel`: the kernel learners on a budget (:class:`KernelPerceptron`,
  :class:`KernelMIRA`, :class:`KernelPA`);
- :mod:`.mixing`: :class:`ParameterMixing` (batch, data-parallel).
"""

from __future__ import annotations

from .adaptive import ADAPTIVE_ESTIMATORS, AROW, AdaptiveLinearClassifier, NormalizedGradient
from .base import LinearClassifier, OnlineLinearClassifier
from .bayes_point import OBPM, PermutationBPM
from .kernel import KERNEL_ESTIMATORS, KernelClassifier, KernelMIRA, KernelPA, KernelPerceptron
from .kernel_bayes_point import KernelOBPM, KernelPermutationBPM
from .linear import (
    ALMA,
    ESTIMATORS,
    LMS,
    MIRA,
    ROMMA,
    GeneralizedPerceptron,
    MarginPerceptron,
    PassiveAggressive,
    Perceptron,
)
from .mixing import ParameterMixing

__all__ = [
    "ADAPTIVE_ESTIMATORS",
    "ALMA",
    "AROW",
    "AdaptiveLinearClassifier",
    "ESTIMATORS",
    "KERNEL_ESTIMATORS",
    "LMS",
    "MIRA",
    "OBPM",
    "ROMMA",
    "GeneralizedPerceptron",
    "KernelClassifier",
    "KernelMIRA",
    "KernelOBPM",
    "KernelPA",
    "KernelPerceptron",
    "KernelPermutationBPM",
    "LinearClassifier",
    "MarginPerceptron",
    "NormalizedGradient",
    "OnlineLinearClassifier",
    "ParameterMixing",
    "PassiveAggressive",
    "Perceptron",
    "PermutationBPM",
]
