"""Data-parallel training of one linear learner: the :class:`ParameterMixing` estimator.

The plan -- shards, the shard task, the mixing and summary trees -- is
:mod:`distlearn.distributed.mixing`; this is the scikit-learn shell that
checks the parameters, cuts the data into shards and reads the results.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._urls import absolute
from .. import rng
from .._config import SPLIT_EVERY
from .._validation import Integral, Options, Scheduler
from ..conversions import Average, Cutoff, Last, Tree, make_conversion
from ..conversions.core import AverageSummary, hypothesis
from ..distributed.executor import executor_for
from ..distributed.mixing import (
    CONVERSIONS,
    ArrayShard,
    MixSpec,
    ShardStats,
    StoreShard,
    run_ipm,
    shard_edges,
)
from ..learners import LinearState
from ..stream import is_store, store_token
from .base import LinearClassifier, OnlineLinearClassifier, data_radius
from ._base_learners import refuse_adaptive, resolve_base
from .kernel import KernelClassifier

__all__ = ["ParameterMixing"]


def _conversion_spec(value: Any) -> Any:
    conv = make_conversion(value)  # names and objects, validated there
    if not isinstance(conv, (Last, Average, Tree, Cutoff)):
        raise ValueError(f"conversion must be one of {', '.join(map(repr, CONVERSIONS))} (or Last/Average/Tree/Cutoff "
                         f"objects) for parameter mixing: their summaries merge across shards; got {value!r}")
    if isinstance(conv, Cutoff) and conv.stop_below is not None:
        raise ValueError("Cutoff(stop_below=...) cannot stop a data-parallel run early (the shards run a whole "
                         "epoch each); leave stop_below=None")
    return conv


class _ConversionParam:
    def check(self, name: str, value: Any) -> None:
        _conversion_spec(value)


class ParameterMixing(LinearClassifier):
    """One online linear learner trained data-parallel by iterative parameter mixing.

    The training set is cut into ``n_shards`` contiguous shards (runs of a
    store's blocks, or of an array's rows).  Each epoch, every shard trains a
    copy of the ``base`` rule for one pass over its own data, starting from
    the mixed weights of the previous epoch; the shards' weights are then
    averaged into the next start (McDonald et al. 2010).  Shard tasks read
    their blocks themselves (a store by path), and all merges are reduction
    trees of fan-in ``split_every``.

    Parameters
    ----------
    base : str or distlearn linear estimator, default="perceptron"
        The rule: a name (``"perceptron"``, ``"alma"``, ``"pa"``, ...) or an
        estimator such as ``ALMA(alpha=0.8)``; its ``shuffle`` and rule
        parameters are used, its ``epochs``, ``random_state``, ``conversion``,
        ``fit_intercept`` and ``dtype`` are replaced by this estimator's.
        The adaptive learners (AROW, NormalizedGradient) are refused: mixing
        their per-feature statistics is not defined.
    base_params : dict, default=None
        Parameters set on the base estimator.
    n_shards : int, default=8
        Shards S.  A store needs at least S blocks (a shard is a run of whole
        blocks); an array at least S rows.
    epochs : int, default=5
        Mixing rounds: each is one pass of every shard over its data.
    mixing : {"uniform", "updates"}, default="uniform"
        The weights ``mu_s``: proportional to the shard's rows (uniform over
        examples), or -- McDonald's error-based mixing -- to the updates the
        shard made in the epoch, per output column.  A column that no shard
        updated keeps its start value (what any convex mix of identical
        vectors gives).
    conversion : {"last", "average", "tree", "cutoff"} or conversion object, default="last"
        ``"last"``: the final mixed weights.  ``"average"``: the average of
        every hypothesis that predicted a round -- on any shard, in any epoch
        (each shard's run starts from the mixed vector) -- and of the final
        mixed vector: ``(sum_{e,s} sum_t h^{(e,s)}_{t-1} + w^{(E)}) / (E n + 1)``;
        with one shard this is the base estimator's ``"average"`` (the same
        sum, added per epoch).  ``"tree"``: Dekel & Singer's eq. 3 over the
        leaves of every shard's epoch, in (epoch, shard) order, merged in the
        reduction tree (exactly the tree over the concatenated leaves when
        the shards hold equal power-of-two leaf counts and the tree's groups
        are powers of two; otherwise eq. 3 over the nodes as the tree meets
        them).  ``"cutoff"``: Dekel's cutoff averaging in its one-pass groups
        form (``Cutoff(mode="groups")`` whatever the mode asked), every shard's
        epoch being a stream whose hypotheses start at the mixed vector and end
        at the epoch's end; the survival-time groups and their hypothesis sums
        merge by adding.
    scheduler : None, "local", str or distributed.Client, default=None
        Where the plan runs, as everywhere in distlearn
        (:func:`distlearn.distributed.executor_for`): None runs it in this
        process, with the same reduction grouping (bit-identical to a Dask
        run); ``"local"`` starts a LocalCluster for the fit; an address (or
        scheduler file) or a Client runs on that cluster.
    split_every : int, default=8
        Fan-in of the reduction trees.
    retries : int, default=0
        Dask retries of a failed task (safe: the tasks are pure).
    random_state : int, RandomState, Generator or None, default=None
        The seed of the stream orders (the base estimator's permutations).
    fit_intercept : bool, default=True
        Learn a bias as the weight of a constant feature.
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_, n_features_in_
    n_iter_ : int
        Epochs run.
    online_errors_ : int
        Progressive mistakes of the shard learners, summed over the shards
        and the epochs (as a single learner's ``online_errors_``).
    epoch_online_errors_ : ndarray of shape (epochs,), int64
        The same per epoch.
    epoch_updates_ : ndarray of shape (epochs,)
        Rounds on which a shard learner updated, summed over the shards.
    shard_errors_, shard_updates_ : ndarray of shape (epochs, n_shards)
    shard_bounds_ : ndarray of shape (n_shards, 2)
        Each shard's blocks (a store) or rows (an array), ``[first, stop)``.
    mixing_weights_ : ndarray of shape (epochs, n_shards, n_outputs)
        The ``mu_s`` used per output column (rows share for a column that no
        shard updated, which is left as it was).
    n_updates_, t_ : int
        Updating rounds and rounds in all.
    summary_ : AverageSummary, TreeSummary, CutoffSummary or None
        The merged conversion summary.

    Notes
    -----
    Every task is a pure function of (shard, epoch, start weights, seed), and
    the trees' grouping depends only on ``n_shards``, ``epochs`` and
    ``split_every``: the model is the same for any number of workers, after
    retries, and in-process.  With ``n_shards=1`` the weights are the base
    estimator's own run, bit for bit.

    References
    ----------
    R. McDonald, K. Hall, G. Mann. Distributed training strategies for the
    structured perceptron. NAACL-HLT 2010.

    Examples
    --------
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> from distlearn import ParameterMixing
    >>> d = make_obpm_artificial(2000, 500, random_state=0)
    >>> clf = ParameterMixing(n_shards=4, epochs=5, random_state=0).fit(d.X_train, d.y_train)
    >>> clf.score(d.X_test, d.y_test) > 0.9
    True
    """

    _params = {"n_shards": Integral(1, None), "epochs": Integral(1, None), "mixing": Options("uniform", "updates"),
               "conversion": _ConversionParam(), "scheduler": Scheduler(), "split_every": Integral(2, None),
               "retries": Integral(0, None)}
    _FITTED = LinearClassifier._FITTED + (
        "epoch_updates_", "shard_errors_", "shard_updates_", "shard_bounds_", "mixing_weights_",
        "base_estimator_", "_state")

    def __init__(self, *, base: Any = "perceptron", base_params: dict[str, Any] | None = None, n_shards: int = 8,
                 epochs: int = 5, mixing: str = "uniform", conversion: Any = "last", scheduler: Any = None,
                 split_every: int = SPLIT_EVERY, retries: int = 0, random_state: Any = None,
                 fit_intercept: bool = True, dtype: Any = "float64") -> None:
        self.base = base
        self.base_params = base_params
        self.n_shards = n_shards
        self.epochs = epochs
        self.mixing = mixing
        self.conversion = conversion
        self.scheduler = scheduler
        self.split_every = split_every
        self.retries = retries
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype

    def _check_params(self) -> None:
        Scheduler().check("scheduler", self.scheduler)
        super()._check_params()
        base = resolve_base(self.base, self.base_params)
        if isinstance(base, KernelClassifier):
            raise ValueError("ParameterMixing mixes the weight vectors of linear learners; a kernel learner has "
                             "none (use PermutationBPM or KernelOBPM with the kernel base)")
        refuse_adaptive("ParameterMixing", self.base, base, "mixes weight vectors only, and how to mix "
                        "per-feature statistics (AROW's Sigma, NAG's scales and gradient sums) across shards is "
                        "not defined",
                        "train {name} alone, or use PermutationBPM(base={name}(...)) to train {name} learners "
                        "in parallel")

    def _base_estimator(self, seed: int) -> OnlineLinearClassifier:
        est = resolve_base(self.base, self.base_params)
        est.set_params(epochs=self.epochs, random_state=seed, conversion="last", fit_intercept=self.fit_intercept,
                       dtype=self.dtype)
        est._check_params()
        return est

    def _plan(self, X: Any, y: Any) -> tuple[list[Any], MixSpec, np.ndarray]:
        seed = rng.normalize_seed(self.random_state)
        self._seed = seed
        base = self._base_estimator(seed)
        S = int(self.n_shards)
        dt = np.dtype(self.dtype)
        if is_store(X):
            ds = self._open_store(X, y)
            nb = ds.n_blocks
            if S > nb:
                raise ValueError(f"n_shards={S} is more than the {nb} blocks of store {ds.path}: a shard is a run of "
                                 f"whole blocks; use n_shards <= {nb}, or rewrite the store with a smaller block_rows")
            base._start(ds.classes, ds.n_features)
            self.n_features_in_ = ds.n_features
            base._prepare(ds, ds.n_samples * self.epochs)
            edges = shard_edges(nb, S)
            path, token = absolute(ds.path, resolve=True), store_token(ds)
            sources: list[Any] = [StoreShard(path, token, int(edges[s]), int(edges[s + 1]), nb) for s in range(S)]
            nnz = ds.nnz / max(1, ds.n_samples) if ds.is_sparse else ds.n_features
            data: Any = ds
        else:
            X, y = self._validate_xy(X, y, reset=True)
            n = X.shape[0]
            base._start(self._classes(y), X.shape[1])  # first: a one-class input is the error to report
            if S > n:
                raise ValueError(f"n_shards={S} is more than the {n} training rows; use n_shards <= {n}")
            self.classes_ = base.classes_
            yi = self._encode(y)
            base._prepare(X, n * self.epochs)
            if sp.issparse(X):
                X = X.astype(dt)  # a copy: canonical form may be imposed below
                if not X.has_canonical_format:
                    X.sum_duplicates()
            else:
                X = np.ascontiguousarray(X, dtype=dt)
            edges = shard_edges(n, S)
            sources = [ArrayShard(X[edges[s]:edges[s + 1]], yi[edges[s]:edges[s + 1]], int(edges[s]), n)
                       for s in range(S)]
            nnz = X.nnz / max(1, n) if sp.issparse(X) else X.shape[1]
            data = X
        self.classes_ = base.classes_
        self.base_estimator_ = base
        n_out = base._state.W.shape[1]
        d = base._state.W.shape[0] - 1
        conv = _conversion_spec(self.conversion)
        if isinstance(conv, Last):
            cspec: tuple = ("last",)
        elif isinstance(conv, Average):
            cspec = ("average",)
        elif isinstance(conv, Tree):
            tr = conv.tracker({"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": seed})
            cspec = ("tree", tr.C, tr.leaf_size, tr.loss)
        else:
            tr = conv.tracker({"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": seed,
                               "radius": lambda: getattr(base, "radius_", None) or data_radius(data, self.fit_intercept)})
            cspec = ("cutoff", tr.delta, tr.C, tr.loss)
        spec = MixSpec(base._rule_obj, d, n_out, dt.name, bool(self.fit_intercept), seed, bool(base.shuffle),
                       self.mixing, cspec, np.asarray(self.classes_))
        return sources, spec, np.stack([edges[:-1], edges[1:]], axis=1)

    def _fit(self, X: Any, y: Any) -> ParameterMixing:
        sources, spec, bounds = self._plan(X, y)
        self.shard_bounds_ = bounds
        with executor_for(self.scheduler, retries=int(self.retries)) as ex:
            state, summary, stats = run_ipm(ex, sources, spec, int(self.epochs), split_every=int(self.split_every),
                                            run=uuid.uuid4().hex[:12])
        self._set_results(spec, state, summary, stats)
        return self

    def _set_results(self, spec: MixSpec, state: LinearState, summary: Any, stats: list[ShardStats]) -> None:
        E, S, K = int(self.epochs), int(self.n_shards), spec.n_outputs
        rows = np.zeros((E, S), np.int64)
        errs = np.zeros((E, S), np.int64)
        upd = np.zeros((E, S), np.int64)
        col = np.zeros((E, S, K), np.int64)
        for st in stats:
            rows[st.epoch, st.shard] = st.rows
            errs[st.epoch, st.shard] = st.mistakes
            upd[st.epoch, st.shard] = st.updated_rounds
            col[st.epoch, st.shard] = st.updates
        share = rows[:, :, None] / rows.sum(axis=1)[:, None, None]
        if self.mixing == "updates":
            tot = col.sum(axis=1, keepdims=True)
            mu = np.where(tot > 0, col / np.maximum(tot, 1), share)
        else:
            mu = np.broadcast_to(share, (E, S, K)).copy()
        self.mixing_weights_ = mu
        self.epoch_online_errors_ = errs.sum(axis=1)
        self.online_errors_ = int(errs.sum())
        self.epoch_updates_ = upd.sum(axis=1)
        self.shard_errors_ = errs
        self.shard_updates_ = upd
        self.n_updates_ = int(upd.sum())
        self.t_ = int(rows.sum())
        self.n_iter_ = E
        self._state = state
        self.summary_ = summary
        kind = spec.conversion[0]
        if kind == "last":
            H = hypothesis(state)
        elif kind == "average":
            H = AverageSummary(summary.total, summary.count, hypothesis(state)).finalize()
        else:
            H = summary.finalize()
        self._set_hypothesis(H)
