"""scikit-learn estimators for the adaptive linear rules (per-feature steps).

:class:`AROW` and :class:`NormalizedGradient` run the kernels of
:mod:`distlearn.learners._adaptive` through the same online loop as the other
linear estimators (:class:`~distlearn.estimators.base.OnlineLinearClassifier`):
arrays, sparse matrices or stores, epochs, shuffles, ``partial_fit`` and every
online-to-batch conversion.  Only the learner state differs: it carries the
per-feature statistics (:class:`~distlearn.learners.adaptive.AdaptiveState`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import rng
from .._validation import Options, Real
from ..learners.adaptive import ADAPTIVE_RULES, init_adaptive_state, make_adaptive_rule
from .base import OnlineLinearClassifier
from .linear import _doc

__all__ = ["ADAPTIVE_ESTIMATORS", "AROW", "AdaptiveLinearClassifier", "NormalizedGradient"]


class AdaptiveLinearClassifier(OnlineLinearClassifier):
    """Online base of the adaptive rules: the state holds per-feature statistics.

    ``_rule(n_classes)`` names a rule of :data:`distlearn.learners.adaptive.ADAPTIVE_RULES`.
    """

    _no_weights_why = "its per-feature statistics (AROW's Sigma, NAG's scales) have no weighted form here"

    def _new_state(self, n_features: int, n_out: int) -> Any:
        return init_adaptive_state(self._rule_obj.name, n_features, n_out, dtype=self._np_dtype)

    def _start(self, classes: np.ndarray, n_features: int) -> None:
        self.classes_ = self._check_classes(classes)
        name, params, _ = self._rule(len(self.classes_))
        self._rule_obj = make_adaptive_rule(name, **params)
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._state = self._new_state(n_features, n_out)
        self.n_updates_ = 0
        self.online_errors_ = 0
        self.n_iter_ = 0
        self.t_ = 0
        self._seed = rng.normalize_seed(self.random_state)

    def _next_pass(self) -> None:
        self._tracker.plan(self._state)
        self._state = self._new_state(self._state.W.shape[0] - 1, self._state.W.shape[1])
        self._pass += 1
        self._tracker.begin(self._state)


@_doc
class AROW(AdaptiveLinearClassifier):
    """AROW, adaptive regularization of weight vectors, with a diagonal covariance.

    Keeps a mean ``w`` and a per-feature variance ``Sigma`` (initially 1).  When
    the hinge loss is positive (``y w.x < 1``)::

        beta    = 1 / (sum_i Sigma_i x_i^2 + r)
        alpha   = (1 - y w.x) * beta
        w_i    += alpha * y * Sigma_i * x_i
        Sigma_i = Sigma_i * (1 - beta * Sigma_i * x_i^2)

    so frequent features take ever smaller steps while rare ones keep large
    ones.  Predictions use the mean ``w``.

    Parameters
    ----------
    r : float, default=1.0
        Regulariser (> 0): the larger, the smaller the steps and the slower
        ``Sigma`` shrinks.  The default was chosen on a validation split of the
        RCV1-like corpus (``benchmarks/bench_adaptive.py``).
    %(common)s

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    sigma_ : ndarray of shape (1, n_features + 1) or (n_classes, n_features + 1)
        The diagonal covariance of the last hypothesis (bias last), in (0, 1].
    classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`~distlearn.Perceptron`.

    Notes
    -----
    ``Sigma_i (1 - beta Sigma_i x_i^2)`` is the paper's diagonal update
    ``Sigma_i - beta Sigma_i^2 x_i^2`` in a form that keeps ``Sigma_i`` in
    (0, 1] in floating point.  Multiclass problems are learnt one-vs-rest, each
    class with its own ``Sigma``.  The bias (``fit_intercept``) is a constant
    feature with its own variance.  ``Sigma`` is kept in float64 whatever
    ``dtype``.

    References
    ----------
    K. Crammer, A. Kulesza, M. Dredze. Adaptive regularization of weight
    vectors. NIPS 2009 (diagonal version, Section 4).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import AROW
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> AROW(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"r": Real(0, math.inf, "neither")}

    def __init__(self, *, r: float = 1.0, epochs: int = 5, shuffle: bool = True, random_state: Any = None,
                 fit_intercept: bool = True, dtype: Any = "float64", conversion: str = "last") -> None:
        self.r = r
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "arow", {"r": self.r}, False

    @property
    def sigma_(self) -> np.ndarray:
        # documented in the class docstring (Attributes): per-feature variances of the current state
        return self._state.A.T.copy()


@_doc
class NormalizedGradient(AdaptiveLinearClassifier):
    """Normalised adaptive gradient descent (NAG): per-feature, scale-free steps.

    Algorithm 2 of Ross, Mineiro & Langford (2013).  Per feature it keeps the
    largest ``|x_i|`` seen, ``s_i``, and the sum of squared gradients ``G_i``;
    globally the round ``t`` and ``N = sum ||x / s||^2``.  On each example:
    for every feature whose ``|x_i|`` exceeds ``s_i``, ``w_i *= s_i / |x_i|``
    (when ``s_i > 0``) and ``s_i = |x_i|``; ``N += sum_i (x_i / s_i)^2``; with
    ``p = w.x`` and the loss's derivative ``l'(p, y)``, ``g_i = l' x_i``::

        G_i += g_i^2
        w_i -= eta * sqrt(t / N) * g_i / (s_i * sqrt(G_i))

    The result does not change when a feature is multiplied by a positive
    constant (its weight is divided by it): no feature scaling is needed.

    Parameters
    ----------
    loss : {"logistic", "hinge"}, default="logistic"
        ``log(1 + exp(-y p))`` (a step on every example) or ``max(0, 1 - y p)``
        (a step when ``y p < 1``).
    eta : float, default=1.0
        Learning rate (> 0).  The default was chosen on a validation split of
        the RCV1-like corpus (``benchmarks/bench_adaptive.py``).
    %(common)s

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`~distlearn.Perceptron`.

    Notes
    -----
    This is the paper's NAG.  Vowpal Wabbit's default learner (``--adaptive
    --normalized --invariant``) computes the same per-feature rate,
    ``sqrt(t / N) / (s_i sqrt(G_i))`` with the same rescale of ``w_i`` on a new
    maximum, but differs in what surrounds it:

    * its default loss is the squared loss (``--loss_function hinge`` or
      ``logistic`` select the other two), its default ``eta`` (``-l``) is 0.5;
    * its steps are importance-invariant (Karampatziakis & Langford 2011,
      ``--invariant``): the step follows the loss along the update direction
      (using ``sum_i x_i^2 * rate_i``) instead of one gradient step, so it
      never overshoots the loss's minimum;
    * it hashes the features into ``2^b`` float32 weights (``-b 18`` by
      default), clamps tiny ``x_i^2``, and adds a constant feature unless
      ``--noconstant`` (``fit_intercept`` here).

    (From VW 9's ``gd.cc`` as we read it; ``benchmarks/bench_adaptive.py``
    compares the two on the same data.)

    The progressive loss logged for the conversions is that of the weights
    before the round (before the rescale); the step uses the paper's prediction
    after it.  Multiclass problems are learnt one-vs-rest (``s``, ``t`` and
    ``N`` shared by the classes, ``G`` per class).  Statistics are float64.

    References
    ----------
    S. Ross, P. Mineiro, J. Langford. Normalized online learning. UAI 2013,
    Algorithm 2 (NAG).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import NormalizedGradient
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> NormalizedGradient(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"loss": Options("logistic", "hinge"), "eta": Real(0, math.inf, "neither")}

    def __init__(self, *, loss: str = "logistic", eta: float = 1.0, epochs: int = 5, shuffle: bool = True,
                 random_state: Any = None, fit_intercept: bool = True, dtype: Any = "float64",
                 conversion: str = "last") -> None:
        self.loss = loss
        self.eta = eta
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "nag", {"loss": self.loss, "eta": self.eta}, False


#: Adaptive rule name -> its estimator class (:data:`distlearn.learners.adaptive.ADAPTIVE_RULES`).
ADAPTIVE_ESTIMATORS: dict[str, type[AdaptiveLinearClassifier]] = {
    name: globals()[spec.estimator] for name, spec in ADAPTIVE_RULES.items()}
