"""scikit-learn estimators for the online linear rules.

Each estimator is a thin shell over :mod:`distlearn.learners`: ``fit`` checks
the parameters (one declarative table per class), coerces the input once, and
hands whole chunks to the compiled kernels.  ``X`` may be a numpy array, a
scipy.sparse matrix, or a distlearn store (a path or a
:class:`~distlearn.data.store.Dataset`), which is streamed block by block.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import rng
from ._validation import Boolean, Integral, Options, Real, RandomState, check_params, is_store
from .learners import copy_state, init_state, learn_chunk, make_rule, state_coef
from .conversions import make_conversion
from .learners.linear import _raise_non_finite, row_sqnorms

__all__ = [
    "Perceptron",
    "GeneralizedPerceptron",
    "MarginPerceptron",
    "ALMA",
    "ROMMA",
    "PassiveAggressive",
    "MIRA",
    "LMS",
]


def encode_labels(classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Labels -> indices into the sorted ``classes``; unknown labels are named in the error."""
    if y.dtype.kind in "iu" and classes.dtype.kind in "iu" and len(y):
        # Integer labels: a lookup table over [min, max] (one gather) when the
        # range is small, instead of a binary search per label.
        lo, hi = int(y.min()), int(y.max())
        if hi - lo < 1 << 20:
            lut = np.full(hi - lo + 1, -1, np.int64)
            inside = classes[(classes >= lo) & (classes <= hi)]
            lut[inside.astype(np.int64) - lo] = np.searchsorted(classes, inside)
            idx = lut[(y - lo).astype(np.intp)]
            if idx.min() < 0:
                unknown = np.unique(y[idx < 0])[:5]
                raise ValueError(f"y contains labels not in classes_ {classes.tolist()}: {unknown.tolist()}")
            return idx
    idx = np.searchsorted(classes, y)
    idx[idx >= len(classes)] = 0
    bad = classes[idx] != y
    if np.any(bad):
        unknown = np.unique(np.asarray(y)[bad])[:5]
        raise ValueError(f"y contains labels not in classes_ {classes.tolist()}: {unknown.tolist()}")
    return idx.astype(np.int64)


class _ConversionParam:
    def check(self, name: str, value: Any) -> None:
        make_conversion(value)


_COMMON = {
    "epochs": Integral(1, None),
    "shuffle": Boolean(),
    "random_state": RandomState(),
    "fit_intercept": Boolean(),
    "dtype": Options("float64", "float32", np.float64, np.float32),
    "conversion": _ConversionParam(),
}


class _OnlineLinearClassifier(ClassifierMixin, BaseEstimator):
    """Shared machinery: parameters, input handling, epochs, prediction."""

    _params: dict[str, Any] = {}

    # -- per-rule hooks -------------------------------------------------------
    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        """(rule name, rule parameters, native multiclass?) for this problem."""
        raise NotImplementedError

    def _prepare(self, X: Any, n_rows: int, first: bool) -> None:
        """Hook for rules that measure the data before learning (margin perceptron)."""

    # -- parameters and input -------------------------------------------------
    def _check_params(self) -> None:
        check_params(self, {**_COMMON, **self._params})

    @property
    def _np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def _validate_xy(self, X: Any, y: Any, reset: bool) -> tuple[Any, np.ndarray]:
        # No finiteness pass over X here: the kernels notice a NaN or infinity
        # when its row's margin comes out non-finite (before any update from
        # that row), and fit/partial_fit then roll back; see _guard.
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                             reset=reset, ensure_min_samples=1, ensure_all_finite=False)
        y = np.asarray(y)
        if y.dtype.kind not in "iu":  # integer labels are classes already
            check_classification_targets(y)
        return X, y

    @staticmethod
    def _classes(y: np.ndarray) -> np.ndarray:
        if y.dtype.kind in "iu" and len(y):
            lo = int(y.min())
            span = int(y.max()) - lo + 1
            if span <= 1 << 20:
                return np.flatnonzero(np.bincount((y - lo).astype(np.intp), minlength=span)).astype(y.dtype) + lo
        return np.unique(y)

    def _encode(self, y: np.ndarray) -> np.ndarray:
        return encode_labels(self.classes_, y)

    _FITTED = ("classes_", "coef_", "intercept_", "n_features_in_", "feature_names_in_", "n_updates_",
               "online_errors_", "n_iter_", "t_", "_state", "_rule_obj", "_seed", "horizon_", "radius_",
               "eta_", "summary_", "_tracker", "_conv", "_pass", "hypothesis_")

    def _forget(self) -> None:
        """Drop every fitted attribute: a failed fit leaves no model that looks valid."""
        for name in self._FITTED:
            self.__dict__.pop(name, None)

    def _snapshot(self) -> tuple[Any, ...]:
        return (copy_state(self._state), self.n_updates_, self.online_errors_, self.n_iter_, self.t_,
                copy.deepcopy(self._tracker))

    def _restore(self, snap: tuple[Any, ...]) -> None:
        self._state, self.n_updates_, self.online_errors_, self.n_iter_, self.t_, self._tracker = snap

    def _start(self, classes: np.ndarray, n_features: int) -> None:
        classes = np.asarray(classes)
        if classes.ndim != 1 or len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; got {len(np.unique(classes))} class"
                f"{'es' if len(np.unique(classes)) != 1 else ''}: {np.unique(classes).tolist()}"
            )
        if len(np.unique(classes)) != len(classes):
            raise ValueError(f"classes must be unique, got {classes.tolist()}")
        self.classes_ = np.sort(classes)
        name, params, native = self._rule(len(self.classes_))
        self._rule_obj = make_rule(name, **params)
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._state = init_state(n_features, n_out, dtype=self._np_dtype)
        self.n_updates_ = 0
        self.online_errors_ = 0
        self.n_iter_ = 0
        self.t_ = 0
        self._seed = rng.normalize_seed(self.random_state)

    def _make_tracker(self, X: Any) -> Any:
        conv = make_conversion(self.conversion)
        n_out = self._state.W.shape[1]
        d = self._state.W.shape[0] - 1
        if is_store(X):
            from .data.store import open_dataset

            ds = open_dataset(X)
            nnz = d  # unknown without a pass; the dense bound
            if getattr(ds, "layout", None) == "csr" and hasattr(ds, "nnz"):
                nnz = ds.nnz / max(1, ds.n_samples)
        else:
            nnz = X.nnz / max(1, X.shape[0]) if sp.issparse(X) else d
        ctx = {"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": self._seed,
               "radius": lambda: getattr(self, "radius_", None) or _max_row_norm(X, self.fit_intercept)}
        self._conv = conv
        self._tracker = conv.tracker(ctx)
        self._pass = 1
        self._tracker.begin(self._state)

    def _next_pass(self) -> None:
        """Replay: the tracker chooses from pass 1's losses; the learner starts over."""
        self._tracker.plan(self._state)
        self._state = init_state(self._state.W.shape[0] - 1, self._state.W.shape[1], dtype=self._np_dtype)
        self._pass += 1
        self._tracker.begin(self._state)

    def _run(self, X: Any, yi: np.ndarray, order: np.ndarray | None) -> None:
        log = self._tracker.run_chunk(self._rule_obj, self._state, X, yi, order, self.fit_intercept)
        if self._pass == 1:
            self.online_errors_ += int(log.mistake.sum())
            self.n_updates_ += int(log.updated.sum())
            self.t_ += len(log.mistake)

    def _finish(self) -> None:
        H = self._tracker.finalize(self._state)
        self.summary_ = self._tracker
        if not isinstance(H, np.ndarray):
            # Vote or sample: not a linear hypothesis, so no coef_.
            self.hypothesis_ = H
            self.__dict__.pop("coef_", None)
            self.__dict__.pop("intercept_", None)
            return
        self.__dict__.pop("hypothesis_", None)
        dt = self._np_dtype
        self.coef_ = np.ascontiguousarray(H[:, :-1]).astype(dt, copy=False)
        self.intercept_ = H[:, -1].astype(dt) if self.fit_intercept else np.zeros(len(H), dt)

    # -- public API -------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> _OnlineLinearClassifier:
        """Train from scratch for ``epochs`` passes over the data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or a store
            Training data, or a distlearn store (path or ``Dataset``), which is
            streamed block by block with its own labels.
        y : array-like of shape (n_samples,), default=None
            Labels; must be None for a store.

        Returns
        -------
        self
        """
        self._check_params()
        try:
            return self._fit(X, y)
        except BaseException:
            self._forget()
            raise

    def _fit(self, X: Any, y: Any) -> _OnlineLinearClassifier:
        if is_store(X):
            return self._fit_store(X, y)
        X, y = self._validate_xy(X, y, reset=True)
        self._start(self._classes(y), X.shape[1])
        yi = self._encode(y)
        self._prepare(X, X.shape[0] * self.epochs, first=True)
        self._make_tracker(X)
        n = X.shape[0]
        for p in range(self._conv.passes):
            if p:
                self._next_pass()
            for epoch in range(self.epochs):
                order = None
                if self.shuffle:
                    order = rng.block_generator(self._seed, "shuffle", epoch).permutation(n)
                self._run(X, yi, order)
                if p == 0:
                    self.n_iter_ += 1
                if self._tracker.halted:  # the conversion stopped training early
                    break
        self._finish()
        return self

    def partial_fit(self, X: Any, y: Any = None, classes: Any = None) -> _OnlineLinearClassifier:
        """One pass over ``X`` in the given order, continuing from the current weights.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or a store
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All the classes that will ever be seen.  Needed on the first call
            unless this batch already contains every class.

        Returns
        -------
        self
        """
        first = not hasattr(self, "classes_")
        if first:
            self._check_params()
        passes = make_conversion(self.conversion).passes
        if passes > 1:
            raise ValueError(f"conversion={self.conversion!r} replays the data (two passes), which partial_fit "
                             "cannot do; use fit, or a one-pass conversion: 'last', 'average', 'tree', 'vote' or 'sample'")
        snap = None if first else self._snapshot()
        try:
            return self._partial_fit(X, y, classes, first)
        except BaseException:
            # Nothing of a failed call is kept: the model is as before it.
            if snap is None:
                self._forget()
            else:
                self._restore(snap)
                self._finish()
            raise

    def _partial_fit(self, X: Any, y: Any, classes: Any, first: bool) -> _OnlineLinearClassifier:
        if is_store(X):
            return self._fit_store(X, y, partial=True, classes=classes)
        X, y = self._validate_xy(X, y, reset=first)
        if first:
            self._start(self._classes(y) if classes is None else np.asarray(classes), X.shape[1])
            self._prepare(X, X.shape[0], first=True)
            self._make_tracker(X)
        elif classes is not None and not np.array_equal(np.sort(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes={np.asarray(classes).tolist()} differs from the first call's {self.classes_.tolist()}")
        self._run(X, self._encode(y), None)
        self.n_iter_ += 1
        self._finish()
        return self

    def _fit_store(self, X: Any, y: Any, partial: bool = False, classes: Any = None) -> _OnlineLinearClassifier:
        from .data.store import open_dataset

        if y is not None:
            raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
        ds = open_dataset(X)
        if ds.classes is None:
            raise ValueError(f"store {ds.path}: labels are not classes (continuous targets?)")
        first = not partial or not hasattr(self, "classes_")
        if first:
            self._start(ds.classes if classes is None else np.asarray(classes), ds.n_features)
            self.n_features_in_ = ds.n_features
            self._prepare(ds, ds.n_samples * (1 if partial else self.epochs), first=True)
            self._make_tracker(ds)
        elif ds.n_features != self.n_features_in_:
            raise ValueError(f"store {ds.path} has {ds.n_features} features, but {type(self).__name__} "
                             f"is expecting {self.n_features_in_} features as input")
        epochs = 1 if partial else self.epochs
        nb = ds.n_blocks
        dt = self._np_dtype
        for p in range(1 if partial else self._conv.passes):
            if p:
                self._next_pass()
            self._store_epochs(ds, epochs, partial, count=p == 0)
        self._finish()
        return self

    def _store_epochs(self, ds: Any, epochs: int, partial: bool, count: bool) -> None:
        nb = ds.n_blocks
        dt = self._np_dtype
        for epoch in range(epochs):
            shuffle = self.shuffle and not partial
            blocks = np.arange(nb)
            if shuffle:
                # Streaming shuffle: a seeded permutation of the blocks, and of
                # the rows inside each block (a full permutation would need
                # random access across the whole store).
                blocks = rng.block_generator(self._seed, "shuffle-blocks", epoch).permutation(nb)
            for b in blocks:
                block = ds.read_block(int(b))
                Xb = block.X
                if sp.issparse(Xb):
                    Xb = Xb.astype(dt, copy=False)
                else:
                    Xb = np.ascontiguousarray(Xb, dtype=dt)
                order = None
                if shuffle:
                    order = rng.block_generator(self._seed, "shuffle-rows", epoch * (1 << 32) + int(b)).permutation(Xb.shape[0])
                self._run(Xb, self._encode(np.asarray(block.y)), order)
                if self._tracker.halted:
                    break
            if count:
                self.n_iter_ += 1
            if self._tracker.halted:
                break

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores: shape (n_samples,) for two classes (positive means ``classes_[1]``),
        (n_samples, n_classes) otherwise."""
        check_is_fitted(self, "summary_")
        if is_store(X):
            from .data.store import open_dataset

            ds = open_dataset(X)
            k = 1 if len(self.classes_) == 2 else len(self.classes_)
            return np.concatenate([self.decision_function(b.X) for b in ds.iter_blocks()]) if ds.n_samples else \
                np.zeros((0,) if k == 1 else (0, k))
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        if "hypothesis_" in self.__dict__:
            return self.hypothesis_.decision_function(X)
        scores = X @ self.coef_.T.astype(np.float64) + self.intercept_.astype(np.float64)
        scores = np.asarray(scores)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels (``sgn(0) = +1``: a zero score predicts ``classes_[1]``)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores >= 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


_COMMON_DOC = """
    epochs : int, default=5
        Passes over the training data in ``fit`` (``partial_fit`` makes one).
    shuffle : bool, default=True
        Visit the examples in a new seeded permutation in each epoch (for a
        store: a permutation of its blocks and of the rows inside each block).
    random_state : int, RandomState, Generator or None, default=None
        Seed of the shuffles; an int makes ``fit`` reproducible.
    fit_intercept : bool, default=True
        Learn a bias, as the weight of an extra constant feature equal to 1
        (so it enters ``||x||`` and the update like any feature).
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights (margins are always accumulated in
        float64); the data is used in this type.
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
class Perceptron(_OnlineLinearClassifier):
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
    shuffle=False, max_iter=1, tol=None, eta0=1.0)`` bit for bit.

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
class GeneralizedPerceptron(_OnlineLinearClassifier):
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
    Online Bayes Point Machines. PAKDD 2003 (``papers/004``), Section 2.

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
class MarginPerceptron(_OnlineLinearClassifier):
    """The finite-horizon margin-based perceptron of Dekel & Singer (2005), Fig. 1.

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
    O. Dekel, Y. Singer. Data-driven online to batch conversions. NIPS 2005
    (``papers/002``), Figure 1.

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

    def _prepare(self, X: Any, n_rows: int, first: bool) -> None:
        self.horizon_ = int(self.horizon) if self.horizon is not None else max(1, int(n_rows))
        if self.radius is not None:
            self.radius_ = float(self.radius)
        else:
            self.radius_ = max(_max_row_norm(X, self.fit_intercept), 1e-300)
        self._rule_obj = make_rule("margin", horizon=self.horizon_, radius=self.radius_)

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "margin", {"horizon": 1.0, "radius": 1.0}, False  # set for real in _prepare


def _max_row_norm(X: Any, fit_intercept: bool) -> float:
    extra = 1.0 if fit_intercept else 0.0
    if is_store(X):
        from .data.store import open_dataset

        return max((_max_row_norm(b.X, fit_intercept) for b in open_dataset(X).iter_blocks()), default=math.sqrt(extra))
    sq = row_sqnorms(X)
    top = float(sq.max()) if len(sq) else 0.0
    if not math.isfinite(top):
        r = int(np.flatnonzero(~np.isfinite(sq))[0])
        _raise_non_finite(X, r, r)
        raise ValueError(f"row {r} of X has a squared norm that overflows float64; scale the features")
    return math.sqrt(top + extra)


@_doc
class ALMA(_OnlineLinearClassifier):
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
    PAKDD 2003 (``papers/004``), Section 2.

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
class ROMMA(_OnlineLinearClassifier):
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
class PassiveAggressive(_OnlineLinearClassifier):
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
class MIRA(_OnlineLinearClassifier):
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
class LMS(_OnlineLinearClassifier):
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

    def _prepare(self, X: Any, n_rows: int, first: bool) -> None:
        if self.eta == "auto":
            self.eta_ = 1.0 / max(_max_row_norm(X, self.fit_intercept), 1e-150) ** 2
        else:
            self.eta_ = float(self.eta)
        self._rule_obj = make_rule("lms", eta=self.eta_)

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return "lms", {"eta": 1.0}, False  # set for real in _prepare
