"""The two estimator bases: batch-only linear classifiers, and online ones with ``partial_fit``.

:class:`LinearClassifier` holds what every distlearn classifier shares: the
declarative parameter table checked before any work, input validation, the
label encoding of :mod:`distlearn.stream`, the rule that a failed ``fit``
leaves no model that looks valid, and prediction from ``coef_``/``intercept_``
(or from ``hypothesis_`` for the non-linear vote and sample conversions).
Batch-only estimators (:class:`~distlearn.PermutationBPM`,
:class:`~distlearn.ParameterMixing`) derive from it: they have no
``partial_fit`` at all.

:class:`OnlineLinearClassifier` adds the online learning loop: ``fit`` for
``epochs`` passes, ``partial_fit`` for one pass in the given order, over
arrays, sparse matrices or stores (streamed through
:func:`distlearn.stream.epoch_chunks`), with the online-to-batch conversion
watching every round.  A subclass says which rule it runs (``_rule``) and, if
it needs to, measures the data first (``_prepare``); ensembles replace the
per-chunk step (``_learn``) and the state (``_start``, ``_finish``).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .. import rng
from .._validation import Boolean, Integral, Options, RandomState, check_params, in_memory, plain_scheduler
from ..conversions import make_conversion
from ..data.store import check_matrix, open_dataset
from ..learners import RULES, NonFiniteError, copy_state, init_state, make_rule, max_row_norm
from ..learners.linear import UNWEIGHTED_WHY
from ..stream import array_order, classes_of, encode_labels, epoch_chunks, is_store

__all__ = ["ConversionParam", "LinearClassifier", "OnlineLinearClassifier", "WeightedOnlineClassifier", "data_radius"]


class ConversionParam:
    """A conversion name or object (checked by :func:`distlearn.conversions.make_conversion`)."""

    def check(self, name: str, value: Any) -> None:
        make_conversion(value)


DTYPE = Options("float64", "float32", np.float64, np.float32)

#: Parameters every online estimator has.
ONLINE_PARAMS = {
    "epochs": Integral(1, None),
    "shuffle": Boolean(),
    "random_state": RandomState(),
    "fit_intercept": Boolean(),
    "dtype": DTYPE,
    "conversion": ConversionParam(),
}


def data_radius(X: Any, fit_intercept: bool) -> float:
    """``max ||x||`` over an array, a sparse matrix or a store (streamed), bias feature included."""
    if is_store(X):
        extra = math.sqrt(1.0 if fit_intercept else 0.0)
        return max((max_row_norm(b.X, fit_intercept) for b in open_dataset(X).iter_blocks()), default=extra)
    return max_row_norm(X, fit_intercept)


class LinearClassifier(ClassifierMixin, BaseEstimator):
    """Batch base: parameters, input, fitted-state hygiene and prediction.  No ``partial_fit``."""

    #: The parameters this class adds to ``_common`` (name -> constraint).
    _params: dict[str, Any] = {}
    _common: dict[str, Any] = {"random_state": RandomState(), "fit_intercept": Boolean(), "dtype": DTYPE}

    _FITTED: tuple[str, ...] = ("classes_", "coef_", "intercept_", "n_features_in_", "feature_names_in_",
                                "n_updates_", "online_errors_", "epoch_online_errors_", "n_iter_", "t_",
                                "summary_", "hypothesis_", "_seed")

    # -- parameters and input -------------------------------------------------
    def _check_params(self) -> None:
        check_params(self, {**self._common, **self._params})

    @property
    def _np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def _validate_xy(self, X: Any, y: Any, reset: bool) -> tuple[Any, np.ndarray]:
        # No finiteness pass over X here: the kernels notice a NaN or infinity
        # when its row's margin comes out non-finite (before any update from
        # that row), and fit/partial_fit then roll back.
        X, y = validate_data(self, in_memory(X), in_memory(y), accept_sparse="csr", dtype=[np.float64, np.float32],
                             reset=reset, ensure_min_samples=1, ensure_all_finite=False)
        check_matrix(X)  # pointers and indices the kernels can use (a store's blocks are checked as read)
        y = np.asarray(y)
        if y.dtype.kind not in "iu":  # integer labels are classes already
            check_classification_targets(y)
        return X, y

    @staticmethod
    def _classes(y: np.ndarray) -> np.ndarray:
        return classes_of(y)

    def _encode(self, y: np.ndarray) -> np.ndarray:
        return encode_labels(self.classes_, y)

    def _open_store(self, X: Any, y: Any) -> Any:
        """The training store, checked: no separate ``y``, class labels."""
        if y is not None:
            raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
        ds = open_dataset(X)
        if ds.classes is None:
            raise ValueError(f"store {ds.path}: labels are not classes (continuous targets?)")
        return ds

    def _check_classes(self, classes: np.ndarray) -> np.ndarray:
        classes = np.asarray(classes)
        uniq = np.unique(classes)
        if classes.ndim != 1 or len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; got {len(uniq)} class"
                f"{'es' if len(uniq) != 1 else ''}: {uniq.tolist()}")
        if len(uniq) != len(classes):
            raise ValueError(f"classes must be unique, got {classes.tolist()}")
        return np.sort(classes)

    def _forget(self) -> None:
        """Drop every fitted attribute: a failed fit leaves no model that looks valid."""
        for name in self._FITTED:
            self.__dict__.pop(name, None)

    # -- sample weights ---------------------------------------------------------------
    #: Why this estimator takes no ``sample_weight`` (the one-line refusal says it).
    _no_weights_why = "its learners have no per-row step that a weight could scale"

    def _refuse_fit_params(self, fit_params: dict[str, Any], method: str = "fit") -> None:
        """``fit``/``partial_fit`` keyword arguments of an estimator without sample weights: refused in
        one line (``sample_weight``: why, and which estimators take it; anything else: unknown)."""
        for name in fit_params:
            if name != "sample_weight":
                raise TypeError(f"{type(self).__name__}.{method}() got an unexpected keyword argument {name!r}")
            if fit_params[name] is not None:
                takers = ", ".join(r.estimator for r in RULES.values() if r.weighted)
                raise ValueError(f"sample_weight: {type(self).__name__} takes no sample weights "
                                 f"({self._no_weights_why}); the estimators that do: {takers}")

    # -- fitting ------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, **fit_params: Any) -> LinearClassifier:
        """Train from scratch.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features), or a store
            Training data (numpy, scipy.sparse, dask arrays, pandas or dask
            DataFrames), or a distlearn store (path or ``Dataset``), which is
            streamed block by block with its own labels.
        y : array-like of shape (n_samples,), default=None
            Labels (a pandas or dask Series too); must be None for a store.
        **fit_params
            ``sample_weight`` is refused in one line (this estimator has no weighted
            form; :class:`~distlearn.Perceptron` and the rules like it take it).

        Returns
        -------
        self
        """
        self._check_params()
        self._refuse_fit_params(fit_params)
        return self._fit_safely(X, y)

    def _fit_safely(self, X: Any, y: Any, **kw: Any) -> LinearClassifier:
        """``_fit``, leaving no fitted attribute behind when it fails."""
        try:
            return self._fit(X, y, **kw)
        except BaseException:
            self._forget()
            raise

    def _fit(self, X: Any, y: Any) -> LinearClassifier:
        raise NotImplementedError

    def _set_hypothesis(self, H: Any) -> None:
        """The fitted hypothesis: a (K, n_features + 1) array (bias last) becomes ``coef_`` and
        ``intercept_``; anything else (vote, sample) is kept as ``hypothesis_``."""
        if not isinstance(H, np.ndarray):
            self.hypothesis_ = H
            self.__dict__.pop("coef_", None)
            self.__dict__.pop("intercept_", None)
            return
        self.__dict__.pop("hypothesis_", None)
        dt = self._np_dtype
        self.coef_ = np.ascontiguousarray(H[:, :-1]).astype(dt, copy=False)
        self.intercept_ = H[:, -1].astype(dt) if self.fit_intercept else np.zeros(len(H), dt)

    # -- prediction -----------------------------------------------------------------
    def decision_function(self, X: Any) -> np.ndarray:
        """Scores: shape (n_samples,) for two classes (positive means ``classes_[1]``),
        (n_samples, n_classes) otherwise."""
        check_is_fitted(self, "summary_")
        if is_store(X):
            ds = open_dataset(X)
            k = 1 if len(self.classes_) == 2 else len(self.classes_)
            return np.concatenate([self.decision_function(b.X) for b in ds.iter_blocks()]) if ds.n_samples else \
                np.zeros((0,) if k == 1 else (0, k))
        X = validate_data(self, in_memory(X), accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        check_matrix(X)
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

    # -- copies hold plain data -------------------------------------------------
    # A ``scheduler=`` Client is a live connection (it cannot be deep-copied or pickled):
    # clones (GridSearchCV), pickles and get_params see its address instead
    # (:func:`distlearn._validation.plain_scheduler`); ``fit`` on this object still uses the client.
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        params = super().get_params(deep=deep)
        if "scheduler" in params:
            params["scheduler"] = plain_scheduler(params["scheduler"])
        return params

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        if "scheduler" in state:
            state = {**state, "scheduler": plain_scheduler(state["scheduler"])}
        return state


class OnlineLinearClassifier(LinearClassifier):
    """Online base: ``fit`` for ``epochs`` passes and ``partial_fit`` for one, over any input.

    Hooks (override what the learner needs):

    ``_rule(n_classes)``
        ``(rule name, rule parameters, native multiclass?)`` for this problem.
    ``_prepare(X, n_rows)``
        Measure the data before learning (the margin perceptron's radius).
    ``_start``, ``_make_tracker``, ``_learn``, ``_finish``, ``_snapshot``, ``_restore``
        The state, the conversion, the per-chunk step and the fitted
        attributes (replaced by ensembles).
    ``_after_fit(X, yi)``
        Work that needs the whole training set once the learners are done
        (OBPM's margin-bound weights).
    """

    _common = ONLINE_PARAMS
    _FITTED = LinearClassifier._FITTED + ("_state", "_rule_obj", "horizon_", "radius_", "eta_", "_tracker",
                                          "_conv", "_pass")

    # -- per-rule hooks -------------------------------------------------------
    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        raise NotImplementedError

    def _prepare(self, X: Any, n_rows: int) -> None:
        """Hook for rules that measure the data before learning (margin perceptron, LMS)."""

    def _check_partial(self) -> None:
        """Hook: refuse ``partial_fit`` settings that need the whole training set."""
        passes = make_conversion(self.conversion).passes
        if passes > 1:
            raise ValueError(f"conversion={self.conversion!r} replays the data (two passes), which partial_fit "
                             "cannot do; use fit, or a one-pass conversion: 'last', 'average', 'tree', 'vote' or "
                             "'sample'")

    def _after_fit(self, X: Any, yi: np.ndarray | None) -> None:
        """Hook run at the end of ``fit`` with the training data (``yi`` None for a store)."""

    def _n_epochs(self, n_rows: int) -> int:
        """Hook: the passes ``fit`` makes over ``n_rows`` rows (``epochs``; kernel learners resolve "auto")."""
        return int(self.epochs)

    @property
    def _no_weights_why(self) -> str:  # type: ignore[override]
        return UNWEIGHTED_WHY.get(self._rule(2)[0], "its step has no weighted form")

    def _sample_weight(self, sample_weight: Any, X: Any) -> np.ndarray | None:
        """``sample_weight`` for the rows of ``X`` (validated ``X``): None, or float64 of shape
        (n_samples,), finite and >= 0 (a scalar is every row's weight)."""
        if sample_weight is None:
            return None
        # scikit-learn's check: the shape, finite values, none negative (its messages name sample_weight;
        # weights all zero are refused too)
        return _check_sample_weight(in_memory(sample_weight), X, dtype=np.float64, ensure_non_negative=True)

    # -- state ------------------------------------------------------------------
    def _snapshot(self) -> tuple[Any, ...]:
        return (copy_state(self._state), self.n_updates_, self.online_errors_, self.n_iter_, self.t_,
                copy.deepcopy(self._tracker))

    def _restore(self, snap: tuple[Any, ...]) -> None:
        self._state, self.n_updates_, self.online_errors_, self.n_iter_, self.t_, self._tracker = snap

    def _start(self, classes: np.ndarray, n_features: int) -> None:
        self.classes_ = self._check_classes(classes)
        name, params, native = self._rule(len(self.classes_))
        self._rule_obj = make_rule(name, **params)
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._state = init_state(n_features, n_out, dtype=self._np_dtype)
        self.n_updates_ = 0
        self.online_errors_ = 0
        self.n_iter_ = 0
        self.t_ = 0
        self._seed = rng.normalize_seed(self.random_state)

    def _begin(self, classes: np.ndarray, n_features: int, X: Any, n_rows: int) -> None:
        """Start a model: state, the data measured for the rule, the conversion."""
        self._start(classes, n_features)
        self._prepare(X, n_rows)
        self._make_tracker(X)

    def _make_tracker(self, X: Any) -> None:
        conv = make_conversion(self.conversion)
        n_out = self._state.W.shape[1]
        d = self._state.W.shape[0] - 1
        if is_store(X):
            ds = open_dataset(X)
            nnz = ds.nnz / max(1, ds.n_samples) if ds.is_sparse else d
        else:
            nnz = X.nnz / max(1, X.shape[0]) if sp.issparse(X) else d
        ctx = {"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": self._seed,
               "radius": lambda: getattr(self, "radius_", None) or data_radius(X, self.fit_intercept)}
        self._conv = conv
        self._tracker = conv.tracker(ctx)
        self._pass = 1
        self._tracker.begin(self._state)

    @property
    def _passes(self) -> int:
        """Passes over the data: the conversion's, or one where no tracker replays (``_tracker`` None)."""
        return 1 if self._tracker is None else self._conv.passes

    @property
    def _halted(self) -> bool:
        return self._tracker is not None and self._tracker.halted

    def _next_pass(self) -> None:
        """Replay: the tracker chooses from pass 1's losses; the learner starts over."""
        self._tracker.plan(self._state)
        self._state = init_state(self._state.W.shape[0] - 1, self._state.W.shape[1], dtype=self._np_dtype)
        self._pass += 1
        self._tracker.begin(self._state)

    def _learn(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray, epoch: int,
               count: bool, sample_weight: np.ndarray | None = None) -> None:
        """One chunk: rows ``order`` of X (``tids``: their example indices; ``count``: add to the
        online counters; ``sample_weight``: the rows' step scales, :class:`WeightedOnlineClassifier`)."""
        log = self._tracker.run_chunk(self._rule_obj, self._state, X, yi, order, self.fit_intercept,
                                      sample_weight=sample_weight)
        if count:
            self.online_errors_ += int(log.mistake.sum())
            self.n_updates_ += int(log.updated.sum())
            self.t_ += len(log.mistake)

    def _finish(self) -> None:
        H = self._tracker.finalize(self._state)
        self.summary_ = self._tracker
        self._set_hypothesis(H)

    # -- fit --------------------------------------------------------------------------
    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> OnlineLinearClassifier:
        if is_store(X):
            _refuse_store_weights(X, sample_weight)
            self._fit_store(X, y)
            self._after_fit(X, None)
            return self
        X, y = self._validate_xy(X, y, reset=True)
        n = X.shape[0]
        sw = self._sample_weight(sample_weight, X)
        weights = {} if sw is None else {"sample_weight": sw}
        epochs = self._n_epochs(n)
        self._begin(self._classes(y), X.shape[1], X, n * epochs)
        yi = self._encode(y)
        tids = np.arange(n, dtype=np.int64)
        for p in range(self._passes):
            if p:
                self._next_pass()
            for epoch in range(epochs):
                self._learn(X, yi, array_order(self._seed, epoch, n, self.shuffle), tids, epoch, count=p == 0,
                            **weights)
                if p == 0:
                    self.n_iter_ += 1
                if self._halted:  # the conversion stopped training early
                    break
        self._finish()
        self._after_fit(X, yi)
        return self

    def partial_fit(self, X: Any, y: Any = None, classes: Any = None, **fit_params: Any) -> OnlineLinearClassifier:
        """One pass over ``X`` in the given order, continuing from the current weights.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features), or a store
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All the classes that will ever be seen.  Needed on the first call
            unless this batch already contains every class.
        **fit_params
            ``sample_weight`` is refused in one line, as in ``fit``.

        Returns
        -------
        self
        """
        self._refuse_fit_params(fit_params, "partial_fit")
        return self._partial_fit_safely(X, y, classes)

    def _partial_fit_safely(self, X: Any, y: Any, classes: Any, **kw: Any) -> OnlineLinearClassifier:
        first = not hasattr(self, "classes_")
        if first:
            self._check_params()
        self._check_partial()
        snap = None if first else self._snapshot()
        try:
            return self._partial_fit(X, y, classes, first, **kw)
        except BaseException:
            # Nothing of a failed call is kept: the model is as before it.
            if snap is None:
                self._forget()
            else:
                self._restore(snap)
                self._finish()
            raise

    def _partial_fit(self, X: Any, y: Any, classes: Any, first: bool,
                     sample_weight: Any = None) -> OnlineLinearClassifier:
        if is_store(X):
            _refuse_store_weights(X, sample_weight)
            self._fit_store(X, y, partial=True, classes=classes)
            return self
        X, y = self._validate_xy(X, y, reset=first)
        sw = self._sample_weight(sample_weight, X)
        if first:
            self._begin(self._classes(y) if classes is None else np.asarray(classes), X.shape[1], X, X.shape[0])
        elif classes is not None and not np.array_equal(np.sort(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes={np.asarray(classes).tolist()} differs from the first call's "
                             f"{self.classes_.tolist()}")
        t0 = self.t_
        self._learn(X, self._encode(y), None, np.arange(t0, t0 + X.shape[0], dtype=np.int64), 0, True,
                    **({} if sw is None else {"sample_weight": sw}))
        self.n_iter_ += 1
        self._finish()
        return self

    def _fit_store(self, X: Any, y: Any, partial: bool = False, classes: Any = None) -> None:
        ds = self._open_store(X, y)
        first = not partial or not hasattr(self, "classes_")
        epochs = 1 if partial else self._n_epochs(ds.n_samples)
        if first:
            self._begin(ds.classes if classes is None else np.asarray(classes), ds.n_features, ds,
                        ds.n_samples * epochs)
            self.n_features_in_ = ds.n_features
        elif ds.n_features != self.n_features_in_:
            raise ValueError(f"store {ds.path} has {ds.n_features} features, but {type(self).__name__} "
                             f"is expecting {self.n_features_in_} features as input")
        for p in range(1 if partial else self._passes):
            if p:
                self._next_pass()
            self._store_epochs(ds, epochs, partial, count=p == 0)
        self._finish()

    def _store_epochs(self, ds: Any, epochs: int, partial: bool, count: bool) -> None:
        """Stream ``epochs`` epochs of ``ds`` (``partial``: one pass in stored order, the examples
        numbered from ``t_``)."""
        shuffle = self.shuffle and not partial
        for epoch in range(epochs):
            for ch in epoch_chunks(ds, seed=self._seed, epoch=epoch, shuffle=shuffle, classes=self.classes_,
                                   dtype=self._np_dtype):
                tids = np.arange(self.t_, self.t_ + ch.X.shape[0], dtype=np.int64) if partial else ch.tids
                try:
                    self._learn(ch.X, ch.y, ch.order, tids, epoch, count)
                except NonFiniteError as exc:  # name the store, block and store row, as OBPM's tasks do
                    row = ch.first_row + int(exc.row)
                    raise NonFiniteError(f"store {ds.path}, block {ch.block}, store row {row} (epoch {epoch}): {exc}",
                                         row, exc.round) from None
                if self._halted:
                    break
            if count:
                self.n_iter_ += 1
            if self._halted:
                break


def _refuse_store_weights(X: Any, sample_weight: Any) -> None:
    if sample_weight is not None:
        raise ValueError(f"sample_weight with a store ({X}): a store holds no weights; fit arrays with "
                         "sample_weight, or leave it out")


class WeightedOnlineClassifier(OnlineLinearClassifier):
    """An online rule whose step a weight scales: ``fit``/``partial_fit`` take ``sample_weight``.

    scikit-learn's ``SGDClassifier``/``Perceptron`` semantics: row ``i``'s update is multiplied
    by ``sample_weight[i]`` (``w += sample_weight[i] * eta * y x`` for the perceptron).  A row of
    weight 0 makes no update but is still a round: the hypothesis of the moment is scored on it
    (``online_errors_`` and the conversions' losses count it, ``t_`` counts it, an average
    includes that round), as scikit-learn's averaged SGD counts it.  Weight 1 is the unweighted
    round, bit for bit.  A weight is not a repetition: the rule does not re-check the margin
    within a row, so weight 2 differs from showing the row twice.
    """

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> WeightedOnlineClassifier:
        """Train from scratch.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features), or a store
            Training data (numpy, scipy.sparse, dask arrays, pandas or dask
            DataFrames), or a distlearn store (path or ``Dataset``), which is
            streamed block by block with its own labels.
        y : array-like of shape (n_samples,), default=None
            Labels (a pandas or dask Series too); must be None for a store.
        sample_weight : array-like of shape (n_samples,) or float, default=None
            Scales each row's update (0: no update; the row is still scored).
            Not for stores.

        Returns
        -------
        self
        """
        self._check_params()
        return self._fit_safely(X, y, **({} if sample_weight is None else {"sample_weight": sample_weight}))

    def partial_fit(self, X: Any, y: Any = None, classes: Any = None,  # type: ignore[override]
                    sample_weight: Any = None) -> WeightedOnlineClassifier:
        """One pass over ``X`` in the given order, continuing from the current weights.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features), or a store
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            All the classes that will ever be seen.  Needed on the first call
            unless this batch already contains every class.
        sample_weight : array-like of shape (n_samples,) or float, default=None
            As in ``fit``.

        Returns
        -------
        self
        """
        return self._partial_fit_safely(X, y, classes,
                                        **({} if sample_weight is None else {"sample_weight": sample_weight}))
