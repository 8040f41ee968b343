"""scikit-learn estimators for the online linear rules.

Each estimator is a thin shell over :mod:`distlearn.learners`: it names its
rule and the rule's parameters (one declarative table per class); the loop
over epochs, chunks and conversions is :class:`~distlearn.estimators.base.
OnlineLinearClassifier`'s.  ``X`` may be a numpy array, a scipy.sparse matrix,
or a distlearn store (a path or a :class:`~distlearn.data.store.Dataset`),
which is streamed block by block.
"""

from __future__ import annotations

import math
from typing import Any

from .._validation import Boolean, Options, Real
from ..learners import RULES, make_rule
from .base import OnlineLinearClassifier, WeightedOnlineClassifier, data_radius

__all__ = [
    "Perceptron",
    "GeneralizedPerceptron",
    "MarginPerceptron",
    "ALMA",
    "ROMMA",
    "PassiveAggressive",
    "MIRA",
    "LMS",
    "ESTIMATORS",
]


_COMMON_DOC = """
    epochs : int, default=5
        Passes over the training data in ``fit`` (``partial_fit`` makes one).
    shuffle : bool, default=True
        Visit the examples in a new seeded permutation in each epoch (for a
        store: a permutation of its blocks and of the rows inside each block).
        An array is permuted as a store of one block, so the same data as an
        array and as a one-block store gives the same model for the same
        ``random_state``; a store of several blocks gives another (its rows
        never leave their block's turn).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the shuffles; an int makes ``fit`` reproducible.
    fit_intercept : bool, default=True
        Learn a bias, as the weight of an extra constant feature equal to 1
        (so it enters ``||x||`` and the update like any feature).
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights; the data is used in this type.  A margin's
        products and sum are in this type (float32 weights: float32 sums, as
        scikit-learn's ``WeightVector32``), taken to float64 with the scale; the
        steps, norms and scales are float64.
    conversion : str or conversion object, default="last"
        Online-to-batch conversion (:mod:`distlearn.conversions`): ``"last"``,
        ``"average"``, ``"tree"``, ``"vote"``, ``"sample"`` (one pass),
        ``"suffix"``, ``"interval"``, ``"cutoff"``, ``"survivor"`` (two passes:
        ``fit`` replays the seeded run), or an object such as
        ``Cutoff(delta=0.01)``.  ``summary_`` holds the fitted conversion state
        (e.g. ``summary_.k_`` and ``summary_.bounds_`` for cutoff).  Vote and
        sample are not linear: they have ``hypothesis_`` instead of ``coef_``.
"""


def _doc(cls: type) -> type:
    cls.__doc__ = (cls.__doc__ or "").replace("    %(common)s\n", _COMMON_DOC.strip("\n") + "\n")
    return cls


@_doc
class Perceptron(WeightedOnlineClassifier):
    """The classic perceptron (Rosenblatt): update ``w += eta * y * x`` when ``y * w.x <= 0``.

    Parameters
    ----------
    eta : float, default=1.0
        Step size (it only rescales ``w`` when ``fit_intercept=False``).
    %(common)s

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    n_updates_ : int
        Rounds on which the rule updated (in any one-vs-rest column).
    online_errors_ : int
        Progressive mistakes: examples that the hypothesis of the moment
        misclassified before learning from them, summed over epochs.
    n_iter_ : int
        Epochs (``fit``) or calls (``partial_fit``) run.
    t_ : int
        Rounds (examples) seen.

    Notes
    -----
    Multiclass problems are learnt one-vs-rest, all classes in one pass over
    each chunk.  With ``fit_intercept=False, shuffle=False, epochs=1`` the
    weights equal scikit-learn's ``Perceptron(fit_intercept=False,
    shuffle=False, max_iter=1, tol=None, eta0=1.0)`` bit for bit; with
    ``shuffle=False`` and ``epochs=max_iter`` the weights of ``fit(X, y,
    sample_weight=w)`` equal its ``fit(X, y, sample_weight=w)`` (an update is
    scaled by the row's weight; a weight of 0 makes no update, though the row
    is still scored and counted in ``t_`` and ``online_errors_``).

    References
    ----------
    F. Rosenblatt. The perceptron: a probabilistic model for information
    storage and organization in the brain. Psychological Review 65(6), 1958.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import Perceptron
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> clf = Perceptron(random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    _params = {"eta": Real(0, math.inf, "neither")}

    def __init__(self, *, eta: float = 1.0, epochs: int = 5, shuffle: bool = True,
                 random_state: Any = None, fit_intercept: bool = True, dtype: Any = "float64",
                 conversion: str = "last") -> None:
        self.eta = eta
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "perceptron", {"eta": self.eta}, False


@_doc
class GeneralizedPerceptron(WeightedOnlineClassifier):
    """The generalised perceptron of Harrington et al. (2003), Algorithm 1.

    Update ``w += eta_k * y * x`` when ``y * (w.x) / ||w|| <= rho_k``, where k
    counts updates from 1 and each of ``rho_k``, ``eta_k`` is constant or
    decays as ``1/sqrt(k)``.  ``rho = 0`` with constant steps is the classic
    perceptron.

    Parameters
    ----------
    rho : float, default=0.0
        Update margin (on the normalised margin ``y w.x / ||w||``; taken as 0
        while ``w = 0``).
    eta : float, default=1.0
        Step size.
    rho_schedule, eta_schedule : {"constant", "inv_sqrt"}, default="constant"
        ``rho_k = rho`` or ``rho / sqrt(k)``; likewise ``eta_k``.
    %(common)s

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    References
    ----------
    E. Harrington, R. Herbrich, J. Kivinen, J. Platt, R. C. Williamson.
    Online Bayes Point Machines. PAKDD 2003, Section 2.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import GeneralizedPerceptron
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> GeneralizedPerceptron(rho=0.1, random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"rho": Real(0, math.inf, "left"), "eta": Real(0, math.inf, "neither"),
               "rho_schedule": Options("constant", "inv_sqrt"), "eta_schedule": Options("constant", "inv_sqrt")}

    def __init__(self, *, rho: float = 0.0, eta: float = 1.0, rho_schedule: str = "constant",
                 eta_schedule: str = "constant", epochs: int = 5, shuffle: bool = True,
                 random_state: Any = None, fit_intercept: bool = True, dtype: Any = "float64",
                 conversion: str = "last") -> None:
        self.rho = rho
        self.eta = eta
        self.rho_schedule = rho_schedule
        self.eta_schedule = eta_schedule
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "generalized", {"rho": self.rho, "eta": self.eta, "rho_schedule": self.rho_schedule,
                               "eta_schedule": self.eta_schedule}, False


@_doc
class MarginPerceptron(WeightedOnlineClassifier):
    """The finite-horizon margin-based perceptron of Dekel (2008), Fig. 1.

    When the hinge loss ``1 - y w.x`` is positive: ``w' = w + y x / (sqrt(m) R)``,
    then ``w = w' / max(1, ||w'||)``.

    Parameters
    ----------
    horizon : int, default=None
        m, the number of rounds the learner will see.  None: measured —
        ``n_samples * epochs`` in ``fit`` (the size of the first batch in a
        first ``partial_fit``).
    radius : float, default=None
        R, an upper bound on ``||x||`` (the bias feature included).  None:
        measured as the largest row norm of the training data (of the first
        batch for ``partial_fit``).
    %(common)s

    Attributes
    ----------
    horizon_ : int
    radius_ : float
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    References
    ----------
    O. Dekel. From online to batch learning with cutoff-averaging. NIPS 2008,
    Figure 1.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import MarginPerceptron
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> MarginPerceptron(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"horizon": Real(0, math.inf, "neither", none_ok=True),
               "radius": Real(0, math.inf, "neither", none_ok=True)}

    def __init__(self, *, horizon: int | None = None, radius: float | None = None, epochs: int = 5,
                 shuffle: bool = True, random_state: Any = None, fit_intercept: bool = True,
                 dtype: Any = "float64", conversion: str = "last") -> None:
        self.horizon = horizon
        self.radius = radius
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _prepare(self, X: Any, n_rows: int) -> None:
        self.horizon_ = int(self.horizon) if self.horizon is not None else max(1, int(n_rows))
        if self.radius is not None:
            self.radius_ = float(self.radius)
        else:
            self.radius_ = max(data_radius(X, self.fit_intercept), 1e-300)
        self._rule_obj = make_rule("margin", horizon=self.horizon_, radius=self.radius_)

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "margin", {"horizon": 1.0, "radius": 1.0}, False  # set for real in _prepare


@_doc
class ALMA(OnlineLinearClassifier):
    """ALMA_2, Gentile's Approximate Large Margin Algorithm (p = 2).

    With k counting updates from 1: update when ``y w.x <= (1 - alpha) B / sqrt(k)``:
    ``w' = w + (C / sqrt(k)) y x``, then ``w = w' / max(1, ||w'||)``.  The
    analysis assumes normalised instances (``||x|| = 1``).

    Parameters
    ----------
    alpha : float, default=0.9
        In (0, 1]: the fraction of the maximal margin sought.
    B : float, default=None
        Margin scale; ``1 / alpha`` when None (Gentile's choice).
    C : float, default=sqrt(2)
        Step scale.
    %(common)s

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    Notes
    -----
    This is the paper's rule and river's ``ALMAClassifier``, except that river
    updates when the margin is strictly below the threshold; here (as in the
    papers) equality also updates.

    References
    ----------
    C. Gentile. A new approximate maximal margin classification algorithm.
    JMLR 2:213-242, 2001.  Harrington et al., Online Bayes Point Machines,
    PAKDD 2003, Section 2.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import ALMA
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> ALMA(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"alpha": Real(0, 1, "right"), "B": Real(0, math.inf, "neither", none_ok=True),
               "C": Real(0, math.inf, "neither")}

    def __init__(self, *, alpha: float = 0.9, B: float | None = None, C: float = math.sqrt(2.0),
                 epochs: int = 5, shuffle: bool = True, random_state: Any = None,
                 fit_intercept: bool = True, dtype: Any = "float64", conversion: str = "last") -> None:
        self.alpha = alpha
        self.B = B
        self.C = C
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "alma", {"alpha": self.alpha, "B": self.B, "C": self.C}, False


@_doc
class ROMMA(OnlineLinearClassifier):
    """ROMMA, the Relaxed Online Maximum Margin Algorithm (Li & Long, 2002).

    On a mistake (``aggressive``: whenever ``y w.x < 1``) the new ``w`` is the
    smallest vector in the intersection of ``{v : v.w >= ||w||^2}`` and
    ``{v : y v.x >= 1}``: ``w <- c w + d x`` with
    ``c = (||x||^2 ||w||^2 - y w.x) / (||x||^2 ||w||^2 - (w.x)^2)`` and
    ``d = ||w||^2 (y - w.x) / (||x||^2 ||w||^2 - (w.x)^2)``; the first update
    is ``w = y x / ||x||^2``.

    Parameters
    ----------
    aggressive : bool, default=False
        Aggressive ROMMA: update whenever the margin is below 1.
    %(common)s

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    Notes
    -----
    When ``x`` is parallel to ``w`` the two half-spaces leave no segment to
    project on; the update then falls back to the projection onto
    ``y v.x >= 1``.

    References
    ----------
    Y. Li, P. M. Long. The relaxed online maximum margin algorithm. Machine
    Learning 46:361-387, 2002.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import ROMMA
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> ROMMA(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"aggressive": Boolean()}

    def __init__(self, *, aggressive: bool = False, epochs: int = 5, shuffle: bool = True,
                 random_state: Any = None, fit_intercept: bool = True, dtype: Any = "float64",
                 conversion: str = "last") -> None:
        self.aggressive = aggressive
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "romma", {"aggressive": bool(self.aggressive)}, False


@_doc
class PassiveAggressive(OnlineLinearClassifier):
    """Passive-Aggressive classifiers PA, PA-I and PA-II (Crammer et al., 2006).

    With the hinge loss ``l = max(0, 1 - y w.x)``: ``w += tau y x`` where
    ``tau = l / ||x||^2`` (PA), ``min(C, l / ||x||^2)`` (PA-I) or
    ``l / (||x||^2 + 1 / (2C))`` (PA-II).

    Parameters
    ----------
    variant : {"PA", "PA-I", "PA-II"}, default="PA-I"
    C : float, default=1.0
        Aggressiveness (PA-I, PA-II).
    multiclass : {"ovr", "native"}, default="ovr"
        One-vs-rest, or the single-prototype multiclass PA: with s the
        highest-scoring wrong class and ``l = max(0, 1 - (w_y.x - w_s.x))``,
        ``w_y += tau x`` and ``w_s -= tau x`` with ``||x||^2`` doubled in
        ``tau``.
    %(common)s

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    Notes
    -----
    With ``fit_intercept=False, shuffle=False, epochs=1``, PA-I equals
    scikit-learn's ``PassiveAggressiveClassifier(C=C, loss="hinge",
    fit_intercept=False, shuffle=False, max_iter=1, tol=None)`` bit for bit.
    With ``fit_intercept=True`` the bias is a feature (it counts in
    ``||x||^2``), whereas scikit-learn and river leave it out of the norm.

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz, Y. Singer. Online
    passive-aggressive algorithms. JMLR 7:551-585, 2006.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import PassiveAggressive
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> PassiveAggressive(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"variant": Options("PA", "PA-I", "PA-II"), "C": Real(0, math.inf, "neither"),
               "multiclass": Options("ovr", "native")}

    def __init__(self, *, variant: str = "PA-I", C: float = 1.0, multiclass: str = "ovr",
                 epochs: int = 5, shuffle: bool = True, random_state: Any = None,
                 fit_intercept: bool = True, dtype: Any = "float64", conversion: str = "last") -> None:
        self.variant = variant
        self.C = C
        self.multiclass = multiclass
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        native = self.multiclass == "native" and n_classes > 2
        return "pa", {"variant": self.variant, "C": self.C, "native": native}, native


@_doc
class MIRA(OnlineLinearClassifier):
    """MIRA, the Margin Infused Relaxed Algorithm (Crammer & Singer, 2003).

    Binary: when ``y w.x <= beta``, ``w += tau y x`` with
    ``tau = min(1, (beta - y w.x) / ||x||^2)``.  Multiclass (native, one
    prototype per class), when ``w_y.x - beta <= max_{r != y} w_r.x``: the
    ultraconservative update that solves
    ``min 1/2 sum_r ||w_r + tau_r x||^2`` subject to ``tau_r <= [r = y]`` and
    ``sum_r tau_r = 0``, with the true class's score lowered by ``beta``.

    Parameters
    ----------
    beta : float, default=0.01
        Margin.  ``beta = 0`` is Crammer & Singer's rule exactly, which never
        leaves ``w = 0`` (every step is 0 there); 0.01 is the value of the
        budget paper (Crammer, Kandola & Singer 2003).
    multiclass : {"native", "ovr"}, default="native"
        The multiclass MIRA update, or binary MIRA one-vs-rest.
    %(common)s

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    References
    ----------
    K. Crammer, Y. Singer. Ultraconservative online algorithms for multiclass
    problems. JMLR 3:951-991, 2003.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import MIRA
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> MIRA(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"beta": Real(0, math.inf, "left"), "multiclass": Options("native", "ovr")}

    def __init__(self, *, beta: float = 0.01, multiclass: str = "native", epochs: int = 5,
                 shuffle: bool = True, random_state: Any = None, fit_intercept: bool = True,
                 dtype: Any = "float64", conversion: str = "last") -> None:
        self.beta = beta
        self.multiclass = multiclass
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        native = self.multiclass == "native" and n_classes > 2
        return "mira", {"beta": self.beta, "native": native}, native


@_doc
class LMS(WeightedOnlineClassifier):
    """LMS (Widrow-Hoff) regression used as a classifier: ``w += eta (y - w.x) x``,
    predicting the sign of ``w.x``.

    Parameters
    ----------
    eta : float or "auto", default="auto"
        Step size.  LMS converges in the mean square for ``0 < eta < 2 / lambda_max``
        and diverges once ``eta * ||x||^2 >= 2`` on many examples; ``"auto"`` takes
        ``1 / R^2`` with ``R = max ||x||`` (bias included) measured on the first
        ``fit``/``partial_fit`` data, stable whatever the feature scale.  A
        diverging run stops with an error naming the row.
    %(common)s

    Attributes
    ----------
    eta_ : float
        The step size used.
    coef_, intercept_, classes_, n_features_in_, n_updates_, online_errors_, n_iter_, t_
        As in :class:`Perceptron`.

    References
    ----------
    B. Widrow, M. E. Hoff. Adaptive switching circuits. IRE WESCON
    Convention Record, 1960.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from distlearn import LMS
    >>> X, y = make_classification(n_samples=500, class_sep=2.0, flip_y=0, random_state=0)
    >>> LMS(random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _params = {"eta": Real(0, math.inf, "neither", also=("auto",))}

    def __init__(self, *, eta: float | str = "auto", epochs: int = 5, shuffle: bool = True,
                 random_state: Any = None, fit_intercept: bool = True, dtype: Any = "float64",
                 conversion: str = "last") -> None:
        self.eta = eta
        self.epochs = epochs
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.conversion = conversion

    def _prepare(self, X: Any, n_rows: int) -> None:
        if self.eta == "auto":
            self.eta_ = 1.0 / max(data_radius(X, self.fit_intercept), 1e-150) ** 2
        else:
            self.eta_ = float(self.eta)
        self._rule_obj = make_rule("lms", eta=self.eta_)

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "lms", {"eta": 1.0}, False  # set for real in _prepare


#: Rule name -> its estimator class, read from the rule registry (:data:`distlearn.learners.RULES`).
ESTIMATORS: dict[str, type[OnlineLinearClassifier]] = {name: globals()[spec.estimator] for name, spec in RULES.items()}
