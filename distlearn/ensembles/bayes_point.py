"""Online Bayes Point Machines and permutation Bayes points over any linear rule.

:class:`OBPM` is Algorithm 2 of Harrington et al. (2003): N learners run side
by side, learner ``j`` is shown example ``t`` only when its Bernoulli(tau)
draw ``b_{j,t}`` is 1, and the hypothesis is the average of the N weight
vectors, rescaled to norm at most 1 (step 15).  :class:`PermutationBPM` is
the batch Bayes point of the paper's section 3 (after Herbrich, Graepel &
Campbell 2001): N learners, each trained on its own seeded permutation of the
training set, averaged.

Randomness is counter-based (DESIGN.md decision 2): ``b_{j,t}`` is a pure
function of ``(seed, j, t, epoch)`` (:func:`distlearn.rng.obpm_mask`), with
``t`` the example's global index, so the model is bit-identical for any chunk
size, any split of the learners into groups, any worker count.

All N learners run in one compiled pass per chunk
(:mod:`distlearn.ensembles._kernels`): each example is read once, the margins
of every member come from one sweep of its nonzeros over feature-major
weights, then the members with ``b_{j,t} = 1`` update.
"""

from __future__ import annotations

import copy
import math
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils._available_if import available_if

from .. import rng
from .._validation import Boolean, Integral, Options, Real, is_store
from ..conversions import Average, Last
from ..estimators import (
    ALMA,
    LMS,
    MIRA,
    ROMMA,
    GeneralizedPerceptron,
    MarginPerceptron,
    PassiveAggressive,
    Perceptron,
    _OnlineLinearClassifier,
)
from ..learners.linear import NonFiniteError, Rule, _raise_non_finite
from . import _kernels as EK

__all__ = [
    "OBPM",
    "PermutationBPM",
    "EnsembleState",
    "init_ensemble",
    "learn_ensemble_chunk",
    "margin_bound_weights",
    "BASES",
]

#: Base rule name -> estimator class (``base="alma"`` is ``ALMA(**base_params)``).
BASES: dict[str, type] = {
    "perceptron": Perceptron,
    "generalized": GeneralizedPerceptron,
    "margin": MarginPerceptron,
    "alma": ALMA,
    "romma": ROMMA,
    "pa": PassiveAggressive,
    "mira": MIRA,
    "lms": LMS,
}


class EnsembleState(NamedTuple):
    """N learners with K output columns each: column ``c = j * K + k``.

    The true weights of column ``c`` are ``scale[c] * W[:, c]``; ``W`` is
    feature-major, so feature ``f``'s ``N * K`` values are contiguous.  With a
    running sum, ``sum_c = accP[:, c] + accq[0, c] * W[:, c]`` (the
    single-learner kernels' form, :class:`distlearn.learners.RunningSum`).
    """

    W: np.ndarray              #: (n_features + 1, N * K), weights' dtype
    scale: np.ndarray          #: (N * K,) float64
    sqnorm: np.ndarray         #: (N * K,) float64
    n_updates: np.ndarray      #: (N * K,) int64
    member_rounds: np.ndarray  #: (N,) int64: examples each member was shown
    n_rounds: np.ndarray       #: (1,) int64: examples seen by the ensemble
    accP: np.ndarray           #: (n_features + 1, N * K) float64, or empty
    accq: np.ndarray           #: (2, N * K) float64, or empty

    @property
    def n_learners(self) -> int:
        return len(self.member_rounds)

    @property
    def n_outputs(self) -> int:
        return self.W.shape[1] // len(self.member_rounds)

    def copy(self) -> EnsembleState:
        return EnsembleState(*(a.copy() for a in self))

    def members(self) -> np.ndarray:
        """True member weights, shape (N, K, n_features + 1), bias last."""
        N, K = self.n_learners, self.n_outputs
        full = self.W.astype(np.float64) * self.scale[None, :]
        return full.T.reshape(N, K, -1)

    def member_sums(self) -> np.ndarray:
        """The running sums, shape (N, K, n_features + 1)."""
        N, K = self.n_learners, self.n_outputs
        s = self.accP + self.accq[0][None, :] * self.W.astype(np.float64)
        return s.T.reshape(N, K, -1)


def init_ensemble(n_features: int, n_learners: int, n_outputs: int, *, dtype: Any = np.float64,
                  running_sum: bool = False) -> EnsembleState:
    """Zero weights for ``n_learners`` members of ``n_outputs`` columns each."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    nk = int(n_learners) * int(n_outputs)
    d1 = int(n_features) + 1
    if running_sum:
        accP = np.zeros((d1, nk), np.float64)
        accq = np.vstack([np.zeros(nk), np.ones(nk)])
    else:
        accP, accq = np.zeros((0, 0), np.float64), np.zeros((0, 0), np.float64)
    return EnsembleState(np.zeros((d1, nk), dt), np.ones(nk), np.zeros(nk), np.zeros(nk, np.int64),
                         np.zeros(int(n_learners), np.int64), np.zeros(1, np.int64), accP, accq)


def _groups(n_learners: int, groups: int) -> list[tuple[int, int]]:
    """Contiguous learner ranges: ``groups`` of them, sizes as equal as possible."""
    g = max(1, min(int(groups), n_learners))
    edges = np.linspace(0, n_learners, g + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def learn_ensemble_chunk(
    rule: Rule,
    state: EnsembleState,
    X: Any,
    y: np.ndarray,
    tids: np.ndarray,
    *,
    seed: int,
    tau: float,
    epoch: int = 0,
    order: np.ndarray | None = None,
    fit_intercept: bool = False,
    bias: float = 1.0,
    acc_mode: int = EK.ACC_NONE,
    groups: int = 1,
    n_jobs: int = 1,
    first_learner: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Run every member over one chunk (rows ``order`` of X, in that order).

    ``tids[r]`` is the global example index of row ``r``: with ``seed``,
    ``epoch`` and the learner index it decides ``b_{j,t}``.  The learners run
    in ``groups`` contiguous groups (on ``n_jobs`` threads; the kernel releases
    the GIL); the weights do not depend on either.  ``first_learner`` is the
    ensemble index of ``state``'s first learner (for the draws): a Dask task
    holding learners ``a .. b - 1`` of a larger ensemble passes their columns
    as ``state`` and ``first_learner=a``.

    Returns ``(margin_sum, n_updates)``: per round, the sum of the members'
    margins (shape (n, K), true units) and the number of members that updated.
    """
    n_rows = X.shape[0]
    order = np.arange(n_rows, dtype=np.int64) if order is None else np.ascontiguousarray(order, dtype=np.int64)
    n = order.shape[0]
    y = np.ascontiguousarray(y, dtype=np.int64)
    tids = np.ascontiguousarray(tids, dtype=np.int64)
    N, K = state.n_learners, state.n_outputs
    if y.shape != (n_rows,) or tids.shape != (n_rows,):
        raise ValueError(f"y and tids need one entry per row of X ({n_rows}); got {y.shape} and {tids.shape}")
    if X.shape[1] != state.W.shape[0] - 1:
        raise ValueError(f"X has {X.shape[1]} features; the ensemble has {state.W.shape[0] - 1}")
    if n and (order.min() < 0 or order.max() >= n_rows):
        raise ValueError(f"order has row indices outside [0, {n_rows - 1}]")
    if K > 1 and n and (y.min() < 0 or y.max() >= K):
        raise ValueError(f"class indices must be in [0, {K - 1}] for {K} output columns")
    if rule.native and K < 3:
        raise ValueError(f"native multiclass rule {rule.name!r} needs at least 3 output columns, got {K}")
    if acc_mode != EK.ACC_NONE and state.accP.shape != state.W.shape:
        raise ValueError("this ensemble state keeps no running sum (init_ensemble(..., running_sum=True))")
    dt = state.W.dtype
    Xc = X.tocsr() if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
    if not Xc.has_canonical_format:
        Xc = Xc.copy()
        Xc.sum_duplicates()
    data = Xc.data if Xc.data.dtype == dt else Xc.data.astype(dt)
    indptr, indices = Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64)
    key = np.uint64(rng.epoch_key(seed, epoch))
    thr = rng.mask_threshold(tau)
    ranges = _groups(N, groups)
    outs = [(np.zeros(n * K), np.zeros(n, np.int32)) for _ in ranges]
    accP = state.accP.reshape(-1)
    accq = state.accq.reshape(-1)
    if acc_mode == EK.ACC_NONE:
        accP, accq = np.zeros(0), np.zeros(0)

    def run(g: int) -> int:
        a, b = ranges[g]
        return EK._obpm_csr(indptr, indices, data, y, order, tids, key, thr, a * K, b * K, K, rule.code,
                            rule.params, bool(fit_intercept), float(bias), state.W, state.scale, state.sqnorm,
                            state.n_updates, state.member_rounds, outs[g][0], outs[g][1], 0, acc_mode,
                            accP, accq, int(first_learner))

    if n_jobs > 1 and len(ranges) > 1:
        with ThreadPoolExecutor(min(n_jobs, len(ranges))) as pool:
            bad = list(pool.map(run, range(len(ranges))))
    else:
        bad = [run(g) for g in range(len(ranges))]
    first_bad = min((b for b in bad if b >= 0), default=-1)
    if first_bad >= 0:
        r = int(order[first_bad])
        _raise_non_finite(Xc, r, first_bad)
        raise NonFiniteError(
            f"the weights overflowed: the margin of row {r} (round {first_bad} of this chunk) is not finite "
            "although the row is; use a smaller step size or scale the features", r, first_bad)
    state.n_rounds[0] += n
    margin = outs[0][0]
    upd = outs[0][1]
    for m2, u2 in outs[1:]:
        margin = margin + m2
        upd = upd + u2
    return margin.reshape(n, K), upd


def margin_bound(gamma: np.ndarray, G: np.ndarray, alpha: np.ndarray) -> float:
    """The right-hand side of eq. (2): ``sum_j a_j gamma_j / sqrt(a' G a)``."""
    q = float(alpha @ G @ alpha)
    return float(alpha @ gamma) / math.sqrt(q) if q > 0 else -math.inf


def margin_bound_weights(members: np.ndarray, margins: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Convex weights maximising the margin lower bound, eq. (2) of the OBPM paper.

    ``members``: (N, D) weight vectors (normalised here to unit length, as the
    bound assumes); ``margins``: their training-set margins ``gamma_z(w_j)``
    (of the normalised vectors).  The bound ``a'gamma / sqrt(a' G a)`` is
    scale-free in ``a``, so it is maximised by minimising ``a' G a`` subject to
    ``a'gamma = 1, a >= 0`` (a convex QP, SLSQP) and normalising ``a`` to sum 1.
    When no member has a positive margin the bound says nothing; the uniform
    weights ``1/N`` are returned.

    Returns ``(alpha, bound(alpha), bound(uniform))``.
    """
    from scipy.optimize import minimize

    Wn = np.asarray(members, np.float64)
    norms = np.linalg.norm(Wn, axis=1)
    norms[norms == 0] = 1.0
    Wn = Wn / norms[:, None]
    G = Wn @ Wn.T
    N = len(Wn)
    uniform = np.full(N, 1.0 / N)
    b_uni = margin_bound(margins, G, uniform)
    if N == 1 or not np.any(margins > 0):
        return uniform, b_uni, b_uni
    pos = margins > 0
    x0 = np.where(pos, 1.0, 0.0)
    x0 /= x0 @ margins
    res = minimize(lambda a: a @ G @ a, x0, jac=lambda a: 2.0 * (G @ a), method="SLSQP",
                   bounds=[(0.0, None)] * N, constraints=[{"type": "eq", "fun": lambda a: a @ margins - 1.0,
                                                           "jac": lambda a: margins}],
                   options={"maxiter": 500, "ftol": 1e-12})
    a = np.clip(res.x, 0.0, None)
    if not np.isfinite(a).all() or a.sum() <= 0:
        return uniform, b_uni, b_uni
    a /= a.sum()
    b = margin_bound(margins, G, a)
    if b < b_uni:  # the optimiser did worse than its start: keep what is better
        return uniform, b_uni, b_uni
    return a, b, b_uni


def _resolve_base(base: Any, base_params: dict[str, Any] | None) -> _OnlineLinearClassifier:
    if isinstance(base, str):
        try:
            cls = BASES[base]
        except KeyError:
            raise ValueError(f"base must be one of {sorted(BASES)} or a distlearn linear estimator; got {base!r}") from None
        est = cls()
    elif isinstance(base, _OnlineLinearClassifier):
        est = clone(base)
    else:
        raise ValueError(f"base must be one of {sorted(BASES)} or a distlearn linear estimator; got {base!r}")
    if base_params:
        if not isinstance(base_params, dict):
            raise ValueError(f"base_params must be a dict of the base estimator's parameters, got {base_params!r}")
        valid = est.get_params()
        bad = sorted(set(base_params) - set(valid))
        if bad:
            raise ValueError(f"base_params: {type(est).__name__} has no parameter(s) {bad}; "
                             f"it has {sorted(valid)}")
        est.set_params(**base_params)
    return est


class _ConversionChoice:
    def check(self, name: str, value: Any) -> None:
        _conversion_name(value)


def _conversion_name(value: Any) -> str:
    if isinstance(value, Last) or value == "last":
        return "last"
    if isinstance(value, Average) or value == "average":
        return "average"
    raise ValueError(
        f"conversion must be 'last' or 'average' for a Bayes point ensemble, got {value!r}: both are linear in "
        "the members, so they run inside the fused kernel; the data-driven conversions choose among one "
        "learner's own hypotheses (use them on a single learner, or on PermutationBPM's members)")


_OBPM_PARAMS = {
    "n_estimators": Integral(1, None),
    "tau": Real(0.0, 1.0, "right"),
    "epochs": Integral(1, None),
    "shuffle": Boolean(),
    "normalize": Boolean(),
    "conversion": _ConversionChoice(),
    "conversion_scope": Options("ensemble", "members"),
    "weights": Options("uniform", "margin_bound"),
    "learner_groups": Integral(1, None),
    "n_jobs": Integral(1, None),
    "record_online": Boolean(),
    "fit_intercept": Boolean(),
    "checkpoint_every": Integral(1, None),
    "resume": Boolean(),
    "progress": Boolean(),
}


class _SchedulerParam:
    def check(self, name: str, value: Any) -> None:
        if value is None or isinstance(value, str) or hasattr(value, "submit"):
            return
        raise ValueError(f"{name} must be None, 'in-process', 'local', a scheduler address or file, or a "
                         f"distributed.Client; got {value!r}")


class _PathParam:
    def check(self, name: str, value: Any) -> None:
        import os

        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{name} must be None or a directory path, got {value!r}")


class OBPM(_OnlineLinearClassifier):
    """Online Bayes Point Machine (Harrington et al. 2003, Algorithm 2).

    ``n_estimators`` learners of the ``base`` rule run side by side; learner
    ``j`` is shown example ``t`` when its Bernoulli(``tau``) draw ``b_{j,t}``
    is 1.  The hypothesis is the average ``w~`` of the members' weights,
    rescaled to ``w~ / max(1, ||w~||)`` when ``normalize`` (step 15).

    Parameters
    ----------
    n_estimators : int, default=100
        N, the number of learners.
    tau : float, default=0.3
        Probability that a learner is shown an example, in (0, 1].  The draw
        uses 32 random bits: ``P(b = 1) = round(tau * 2**32) / 2**32``.
    base : str or distlearn linear estimator, default="perceptron"
        The members' rule: ``"perceptron"`` (eta = 1, the paper's choice),
        ``"generalized"``, ``"margin"``, ``"alma"``, ``"romma"``, ``"pa"``,
        ``"mira"``, ``"lms"``, or an unfitted estimator such as
        ``ALMA(B=1.11, C=0.71)`` whose rule parameters are used (its
        ``epochs``, ``shuffle``, ``conversion`` ... are ignored).
    base_params : dict, default=None
        Parameters of the base estimator (``{"B": 1.11, "C": 0.71}``).
    epochs : int, default=1
        Passes over the training data in ``fit``.  Each epoch draws fresh
        ``b_{j,t}`` (the epoch is part of the key).
    shuffle : bool, default=True
        Visit the examples in a seeded permutation in each epoch of ``fit``
        (for a store: its blocks, and the rows inside each block, permuted).
        ``partial_fit`` keeps the stream's order: example ``i`` of a call is the
        stream's example ``t = t_ + i``, so the draws do not depend on how the
        stream is cut into calls.
    normalize : bool, default=True
        Rescale the output hypothesis to norm at most 1, per output column
        (bias weight included).  It changes no prediction, only the scale of
        ``decision_function``.
    conversion : {"last", "average"}, default="last"
        ``"last"``: the members' final weights.  ``"average"``: the average
        of the hypotheses over the rounds (h_0 included), kept as a running
        sum inside the kernel at O(N K) per round.
    conversion_scope : {"ensemble", "members"}, default="ensemble"
        ``"ensemble"``: average the ensemble hypotheses ``w~_0 .. w~_T`` over
        every round.  ``"members"``: each member averages its own hypotheses
        over the examples it was shown, and the members' averages are
        averaged.  (Identical for ``"last"``.)
    weights : {"uniform", "margin_bound"}, default="uniform"
        Member weights: the paper's ``1/N``, or the convex weights that
        maximise the margin lower bound eq. (2) on the training set (batch
        only: computed at the end of ``fit``; ``weights_`` and ``bound_``
        report them).
    learner_groups : int, default=None
        Split the learners into this many contiguous groups, each run as its
        own compiled pass over every chunk; defaults to ``n_jobs``.  The weights
        do not depend on it.
    n_jobs : int, default=1
        Threads running the learner groups (the kernel releases the GIL).
    record_online : bool, default=False
        Keep ``online_mistakes_``, the per-round progressive mistakes of
        ``w~_{t-1}`` (one byte per round).
    random_state : int, RandomState, Generator or None, default=None
        Seed of every draw ``b_{j,t}`` and of the shuffles.
    fit_intercept : bool, default=True
        A bias, as an extra constant feature (the paper's footnote).
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights (margins accumulate in float64).
    scheduler : None, str or distributed.Client, default=None
        Where ``fit`` on a *store* runs (arrays always train in this process).
        ``None``: a LocalCluster sized to the machine for large jobs (more
        than 1e10 multiply-adds, N x nnz x epochs), this process otherwise;
        ``"in-process"``; ``"local"`` (a LocalCluster for this fit, closed
        after it); a scheduler address (``"tcp://10.0.0.1:8786"``,
        ``"tls://..."`` with TLS from dask's config) or scheduler file
        (``*.json``); or a ``distributed.Client``.  On Dask the learners run
        as ``learner_groups`` task chains (default: one per worker thread)
        over the store's blocks; workers open the store by path.  The weights
        are bit-identical wherever the fit runs.
    checkpoint : str or path, default=None
        A directory (zarr group) where the state of every learner group is
        saved after every ``checkpoint_every`` blocks (store fits only).
        It must be reachable from every worker.
    checkpoint_every : int, default=8
        Blocks per task (and per checkpoint).  Each task copies its group's
        weights once, so fewer, longer tasks cost less; more, shorter ones
        lose less work to a failure.
    resume : bool, default=False
        Continue from the last complete checkpoint in ``checkpoint`` (same
        data and parameters; ``epochs`` may be larger than before) instead
        of starting over.  Without a checkpoint it starts from scratch.
    progress : bool, default=False
        A progress bar over blocks x groups for store fits, the per-epoch
        progressive error and, on Dask, the cluster and dashboard link.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    epoch_online_errors_ : list of int
        Store fits: the progressive mistakes of ``w~_{t-1}`` in every epoch
        (``online_errors_`` is the first epoch's).
    job_ : dict
        Store fits: ``group_blocks`` (block passes run by this fit, summed
        over learner groups; a resumed fit runs fewer), ``groups``,
        ``runner``, ``resumed_from`` and ``seconds``.
    members_ : ndarray of shape (n_estimators, n_outputs, n_features + 1)
        The members' true weights (bias last) after the conversion, before
        averaging.
    weights_ : ndarray of shape (n_estimators,) or (n_outputs, n_estimators)
    bound_ : float or ndarray
        Eq. (2) at ``weights_`` (``weights="margin_bound"`` only).
    online_errors_ : int
        Progressive mistakes of the running average ``w~_{t-1}`` on example
        ``t`` (first epoch of ``fit``, every call of ``partial_fit``).
    online_mistakes_ : ndarray of uint8
        Those mistakes round by round (``record_online=True``).
    n_updates_ : int
        Member updates, summed over members.
    member_rounds_ : ndarray of shape (n_estimators,)
        Examples each member was shown (about ``tau * t_``).
    t_, n_iter_, n_features_in_ : int

    Notes
    -----
    ``online_errors_`` sums the members' margins group by group; a split into
    a different number of learner groups can round that sum differently, so a
    margin within rounding of 0 may flip one online mistake.  The weights are
    bit-identical for every split.

    References
    ----------
    E. Harrington, R. Herbrich, J. Kivinen, J. Platt, R. C. Williamson.
    Online Bayes Point Machines. PAKDD 2003, LNAI 2637, pp. 241-252
    (``papers/004``).

    Examples
    --------
    >>> from distlearn import OBPM
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> d = make_obpm_artificial(1000, 1000, random_state=0)
    >>> clf = OBPM(n_estimators=100, tau=0.35, random_state=0).fit(d.X_train, d.y_train)
    >>> clf.score(d.X_test, d.y_test) > 0.98
    True
    """

    _FITTED = _OnlineLinearClassifier._FITTED + ("members_", "weights_", "bound_", "bound_uniform_",
                                                 "online_mistakes_", "member_rounds_", "_base_est",
                                                 "epoch_online_errors_", "job_")

    def __init__(self, *, n_estimators: int = 100, tau: float = 0.3, base: Any = "perceptron",
                 base_params: dict[str, Any] | None = None, epochs: int = 1, shuffle: bool = True,
                 normalize: bool = True, conversion: Any = "last", conversion_scope: str = "ensemble",
                 weights: str = "uniform", learner_groups: int | None = None, n_jobs: int = 1,
                 record_online: bool = False, random_state: Any = None, fit_intercept: bool = True,
                 dtype: Any = "float64", scheduler: Any = None, checkpoint: Any = None,
                 checkpoint_every: int = 8, resume: bool = False, progress: bool = False) -> None:
        self.n_estimators = n_estimators
        self.tau = tau
        self.base = base
        self.base_params = base_params
        self.epochs = epochs
        self.shuffle = shuffle
        self.normalize = normalize
        self.conversion = conversion
        self.conversion_scope = conversion_scope
        self.weights = weights
        self.learner_groups = learner_groups
        self.n_jobs = n_jobs
        self.record_online = record_online
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.scheduler = scheduler
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.resume = resume
        self.progress = progress

    # -- parameters ---------------------------------------------------------------
    def _check_params(self) -> None:
        from .._validation import RandomState, check_params

        table = dict(_OBPM_PARAMS)
        table["random_state"] = RandomState()
        table["dtype"] = Options("float64", "float32", np.float64, np.float32)
        table["scheduler"] = _SchedulerParam()
        table["checkpoint"] = _PathParam()
        if self.learner_groups is not None:
            table["learner_groups"] = Integral(1, None)
        else:
            table.pop("learner_groups")
        check_params(self, table)
        if float(self.tau) <= 0.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau!r}: with tau = 0 no learner sees any example")
        _resolve_base(self.base, self.base_params)

    @property
    def _acc_mode(self) -> int:
        if _conversion_name(self.conversion) == "last":
            return EK.ACC_NONE
        return EK.ACC_ENSEMBLE if self.conversion_scope == "ensemble" else EK.ACC_MEMBERS

    # -- the base rule --------------------------------------------------------------
    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return self._base_est._rule(n_classes)

    def _prepare(self, X: Any, n_rows: int, first: bool) -> None:
        # A member sees about tau * n_rows examples (the margin perceptron's horizon).
        self._base_est._prepare(X, max(1, int(round(float(self.tau) * n_rows))), first)
        if hasattr(self._base_est, "_rule_obj"):
            self._rule_obj = self._base_est._rule_obj

    # -- state ------------------------------------------------------------------------
    def _start(self, classes: np.ndarray, n_features: int) -> None:
        self._base_est = _resolve_base(self.base, self.base_params)
        self._base_est.fit_intercept = self.fit_intercept
        self._base_est.__dict__.pop("_rule_obj", None)
        super()._start(classes, n_features)  # classes_, _rule_obj, counters, _seed
        n_out = 1 if len(self.classes_) == 2 else len(self.classes_)
        self._state = init_ensemble(n_features, self.n_estimators, n_out, dtype=self._np_dtype,
                                    running_sum=self._acc_mode != EK.ACC_NONE)
        self.online_mistakes_ = np.zeros(0, np.uint8)

    def _make_tracker(self, X: Any) -> None:
        self._conv = Last() if _conversion_name(self.conversion) == "last" else Average()
        self._tracker = None
        self._pass = 1

    def _snapshot(self) -> tuple[Any, ...]:
        return (self._state.copy(), self.n_updates_, self.online_errors_, self.n_iter_, self.t_,
                self.online_mistakes_)

    def _restore(self, snap: tuple[Any, ...]) -> None:
        (self._state, self.n_updates_, self.online_errors_, self.n_iter_, self.t_,
         self.online_mistakes_) = snap

    # -- running ------------------------------------------------------------------------
    def _run_epoch_chunk(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray, epoch: int,
                         count: bool) -> None:
        groups = self.learner_groups if self.learner_groups is not None else self.n_jobs
        margin, upd = learn_ensemble_chunk(
            self._rule_obj, self._state, X, yi, tids, seed=self._seed, tau=float(self.tau), epoch=epoch,
            order=order, fit_intercept=self.fit_intercept, acc_mode=self._acc_mode, groups=groups,
            n_jobs=self.n_jobs)
        if not count:
            return
        yo = yi if order is None else yi[order]
        if margin.shape[1] == 1:
            mistakes = (margin[:, 0] >= 0.0) != (yo == 1)
        else:
            mistakes = np.argmax(margin, axis=1) != yo
        self.online_errors_ += int(mistakes.sum())
        self.n_updates_ += int(upd.sum())
        self.t_ += len(yo)
        if self.record_online:
            self.online_mistakes_ = np.concatenate([self.online_mistakes_, mistakes.astype(np.uint8)])

    def _finish(self) -> None:
        st = self._state
        N, K = st.n_learners, st.n_outputs
        members = st.members()  # (N, K, d + 1)
        if self._acc_mode == EK.ACC_ENSEMBLE:
            members = (st.member_sums() + members) / (int(st.n_rounds[0]) + 1)
        elif self._acc_mode == EK.ACC_MEMBERS:
            members = (st.member_sums() + members) / (st.member_rounds[:, None, None] + 1.0)
        self.members_ = members
        self.member_rounds_ = st.member_rounds.copy()
        if "weights_" not in self.__dict__ or self.weights == "uniform" or np.shape(self.weights_) != (K, N):
            self.weights_ = np.full((K, N), 1.0 / N)
        H = np.einsum("kn,nkd->kd", self.weights_, members)
        if self.normalize:
            norms = np.linalg.norm(H if self.fit_intercept else H[:, :-1], axis=1)
            H = H / np.maximum(1.0, norms)[:, None]
        self.summary_ = self._conv
        self.__dict__.pop("hypothesis_", None)
        dt = self._np_dtype
        self.coef_ = np.ascontiguousarray(H[:, :-1]).astype(dt, copy=False)
        self.intercept_ = H[:, -1].astype(dt) if self.fit_intercept else np.zeros(K, dt)

    def _bound_weights(self, X: Any, yi: np.ndarray | None) -> None:
        """``weights="margin_bound"``: eq. (2) maximised per output column on the training set."""
        members = self.members_  # (N, K, d + 1)
        N, K, d1 = members.shape
        mins = np.full((K, N), np.inf)
        norms = np.linalg.norm(members, axis=2)  # (N, K)
        norms[norms == 0] = 1.0
        Wn = members / norms[:, :, None]
        blocks = _iter_xy(X, yi)
        for Xb, yb in blocks:
            yb = self._encode(np.asarray(yb)) if yi is None else yb
            for k in range(K):
                s = Xb @ Wn[:, k, :-1].T + (Wn[:, k, -1][None, :] if self.fit_intercept else 0.0)
                yk = np.where((yb == 1) if K == 1 else (yb == k), 1.0, -1.0)
                mins[k] = np.minimum(mins[k], np.min(yk[:, None] * np.asarray(s), axis=0))
        weights = np.empty((K, N))
        bounds = np.empty(K)
        uni = np.empty(K)
        for k in range(K):
            weights[k], bounds[k], uni[k] = margin_bound_weights(members[:, k, :], mins[k])
        self.weights_ = weights
        self.bound_ = bounds if K > 1 else float(bounds[0])
        self.bound_uniform_ = uni if K > 1 else float(uni[0])

    # -- fit ------------------------------------------------------------------------------
    def _fit(self, X: Any, y: Any) -> OBPM:
        if is_store(X):
            self._fit_store_jobs(X, y)
            if self.weights == "margin_bound":
                self._bound_weights(X, None)
                self._finish()
            return self
        X, y = self._validate_xy(X, y, reset=True)
        self._start(self._classes(y), X.shape[1])
        yi = self._encode(y)
        n = X.shape[0]
        self._prepare(X, n * self.epochs, first=True)
        self._make_tracker(X)
        tids = np.arange(n, dtype=np.int64)
        for epoch in range(self.epochs):
            order = None
            if self.shuffle:
                order = rng.block_generator(self._seed, "shuffle", epoch).permutation(n)
            self._run_epoch_chunk(X, yi, order, tids, epoch, count=epoch == 0)
            self.n_iter_ += 1
        self._finish()
        if self.weights == "margin_bound":
            self._bound_weights(X, yi)
            self._finish()
        return self

    def _partial_fit(self, X: Any, y: Any, classes: Any, first: bool) -> OBPM:
        if self.weights != "uniform":
            raise ValueError("weights='margin_bound' needs the whole training set (batch); partial_fit uses 1/N")
        if is_store(X):
            return self._fit_store(X, y, partial=True, classes=classes)
        X, y = self._validate_xy(X, y, reset=first)
        if first:
            self._start(self._classes(y) if classes is None else np.asarray(classes), X.shape[1])
            self._prepare(X, X.shape[0], first=True)
            self._make_tracker(X)
        elif classes is not None and not np.array_equal(np.sort(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes={np.asarray(classes).tolist()} differs from the first call's {self.classes_.tolist()}")
        t0 = self.t_
        self._run_epoch_chunk(X, self._encode(y), None, np.arange(t0, t0 + X.shape[0], dtype=np.int64), 0, True)
        self.n_iter_ += 1
        self._finish()
        return self

    def _fit_store_jobs(self, X: Any, y: Any) -> None:
        """``fit`` on a store: the learner-parallel job, in process or on Dask."""
        from ..data.store import open_dataset
        from ..distributed import execute, learner_parallel, tasks

        if y is not None:
            raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
        ds = open_dataset(X)
        if ds.classes is None:
            raise ValueError(f"store {ds.path}: labels are not classes (continuous targets?)")
        if self.resume and self.checkpoint is None:
            raise ValueError("resume=True needs checkpoint= (the directory to resume from)")
        self._start(ds.classes, ds.n_features)
        self.n_features_in_ = ds.n_features
        self._prepare(ds, ds.n_samples * self.epochs, first=True)
        self._make_tracker(ds)
        work = float(self.n_estimators) * float(ds.nnz) * float(self.epochs)
        with execute.runner_for(self.scheduler, n_jobs=self.n_jobs, work=work) as runner:
            G = self.learner_groups if self.learner_groups is not None else (
                self.n_jobs if runner.kind == "in-process" else runner.n_workers)
            job = tasks.ObpmJob(
                path=str(ds.path.resolve()), token=tasks.store_token(ds), n_samples=ds.n_samples,
                n_features=ds.n_features, n_blocks=ds.n_blocks,
                block_bounds=tuple(int(v) for v in ds.block_bounds), classes=np.asarray(self.classes_),
                n_outputs=self._state.n_outputs, rule=self._rule_obj, seed=int(self._seed), tau=float(self.tau),
                fit_intercept=bool(self.fit_intercept), acc_mode=self._acc_mode, dtype=np.dtype(self._np_dtype).name,
                n_learners=self.n_estimators, groups=tuple(_groups(self.n_estimators, G)), epochs=self.epochs,
                shuffle=bool(self.shuffle), segment_blocks=int(self.checkpoint_every),
                checkpoint=None if self.checkpoint is None else str(Path(self.checkpoint).resolve()))
            where = runner.describe()
            if self.progress:
                print(f"distlearn: OBPM on {where}", file=sys.stderr)
            out = learner_parallel.run_obpm(job, runner, resume=self.resume, progress=self.progress,
                                            record=self.record_online)
        self._state = out["state"]
        self.online_errors_ = int(out["epoch_errors"][0])
        self.n_updates_ = int(out["epoch_updates"][0])
        self.t_ = int(out["epoch_rows"][0])
        self.n_iter_ = self.epochs
        self.epoch_online_errors_ = [int(v) for v in out["epoch_errors"]]
        if self.record_online:
            self.online_mistakes_ = out["mistakes"]
        self.job_ = {"group_blocks": int(out["group_blocks"]), "groups": [list(g) for g in job.groups],
                     "runner": where, "resumed_from": out["resumed_from"],
                     "seconds": float(out["seconds"])}
        self._finish()

    def _store_epochs(self, ds: Any, epochs: int, partial: bool, count: bool) -> None:
        nb = ds.n_blocks
        dt = self._np_dtype
        bounds = ds.block_bounds
        for epoch in range(epochs):
            shuffle = self.shuffle and not partial
            blocks = np.arange(nb)
            if shuffle:
                blocks = rng.block_generator(self._seed, "shuffle-blocks", epoch).permutation(nb)
            for b in blocks:
                block = ds.read_block(int(b))
                Xb = block.X
                Xb = Xb.astype(dt, copy=False) if sp.issparse(Xb) else np.ascontiguousarray(Xb, dtype=dt)
                order = None
                if shuffle:
                    order = rng.block_generator(self._seed, "shuffle-rows",
                                                epoch * (1 << 32) + int(b)).permutation(Xb.shape[0])
                if partial:
                    t0 = self.t_
                    tids = np.arange(t0, t0 + Xb.shape[0], dtype=np.int64)
                else:
                    tids = np.arange(int(bounds[b]), int(bounds[b + 1]), dtype=np.int64)
                self._run_epoch_chunk(Xb, self._encode(np.asarray(block.y)), order, tids,
                                      0 if partial else epoch, count=partial or epoch == 0)
            if count:
                self.n_iter_ += 1


def _iter_xy(X: Any, yi: np.ndarray | None):
    """Blocks ``(X, y)`` of an in-memory matrix (y given) or of a store (y read)."""
    if is_store(X):
        from ..data.store import open_dataset

        for b in open_dataset(X).iter_blocks():
            yield b.X, b.y
        return
    step = max(1, (1 << 22) // max(1, X.shape[1]))
    for s in range(0, X.shape[0], step):
        yield X[s : s + step], yi[s : s + step]


#: Data below this many bytes (values + indices) is loaded whole so that the
#: permutations are exact global ones; above it a store is permuted blockwise.
EXACT_PERMUTATION_BYTES = 2 << 30


class PermutationBPM(_OnlineLinearClassifier):
    """The batch Bayes point by permutations (Harrington et al. 2003, section 3).

    N copies of the ``base`` learner are trained, copy ``j`` on its own seeded
    permutation of the training set in every epoch, and their weights are
    averaged (or weighted by the margin bound, eq. 2).  Each member is an
    ordinary distlearn estimator, so every *linear* conversion works per
    member (``"last"``, ``"average"``, ``"tree"``, ``"suffix"``,
    ``"interval"``, ``"cutoff"``, ``"survivor"``).

    Parameters
    ----------
    n_estimators : int, default=10
        N, the number of permutations (members).
    base, base_params
        As in :class:`OBPM`.
    epochs : int, default=1
        Passes of each member over its permutation (a fresh permutation per
        epoch).
    conversion : str or conversion object, default="last"
        Each member's online-to-batch conversion.
    permutation : {"auto", "exact", "blocks"}, default="auto"
        ``"exact"``: a uniform permutation of all rows (the data is held in
        memory).  ``"blocks"``: for a store, a permutation of its blocks and
        of the rows inside each block (streaming; not uniform over all
        permutations).  ``"auto"``: exact for arrays and for stores under
        2 GiB, blocks otherwise.  ``permutation_`` says which was used.
    weights : {"uniform", "margin_bound"}, default="uniform"
        ``1/N``, or the convex weights maximising eq. (2) on the training set.
    normalize : bool, default=False
        Rescale the averaged hypothesis to norm at most 1 per column.
    n_jobs : int, default=1
        Threads training members at once (the kernels release the GIL).
    random_state, fit_intercept, dtype
        Member ``j``'s permutations are keyed by ``(seed, j, epoch)``.
    scheduler : None, str or distributed.Client, default=None
        For a store: where the members train (run-parallel, one Dask task per
        member; workers open the store by path, and load it once per process
        for exact permutations).  ``None`` or ``"in-process"``: this process;
        ``"local"``, an address, a scheduler file or a ``Client``: Dask.  The
        members, and so the model, are the same bits wherever they train.

    Attributes
    ----------
    coef_, intercept_, classes_, n_features_in_
    estimators_ : list of fitted base estimators
    members_ : ndarray of shape (n_estimators, n_outputs, n_features + 1)
    weights_ : ndarray of shape (n_outputs, n_estimators)
    bound_ : float or ndarray (``weights="margin_bound"``)
    permutation_ : {"exact", "blocks"}

    Examples
    --------
    >>> from distlearn import PermutationBPM
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> d = make_obpm_artificial(1000, 1000, random_state=0)
    >>> clf = PermutationBPM(n_estimators=10, random_state=0).fit(d.X_train, d.y_train)
    >>> clf.score(d.X_test, d.y_test) > 0.95
    True
    """

    _FITTED = _OnlineLinearClassifier._FITTED + ("members_", "weights_", "bound_", "bound_uniform_",
                                                 "estimators_", "permutation_")

    def __init__(self, *, n_estimators: int = 10, base: Any = "perceptron", base_params: dict[str, Any] | None = None,
                 epochs: int = 1, conversion: Any = "last", permutation: str = "auto", weights: str = "uniform",
                 normalize: bool = False, n_jobs: int = 1, random_state: Any = None, fit_intercept: bool = True,
                 dtype: Any = "float64", scheduler: Any = None) -> None:
        self.n_estimators = n_estimators
        self.base = base
        self.base_params = base_params
        self.epochs = epochs
        self.conversion = conversion
        self.permutation = permutation
        self.weights = weights
        self.normalize = normalize
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.scheduler = scheduler

    def _check_params(self) -> None:
        from .._validation import RandomState, check_params
        from ..estimators import _ConversionParam

        _SchedulerParam().check("scheduler", self.scheduler)
        check_params(self, {
            "n_estimators": Integral(1, None), "epochs": Integral(1, None), "conversion": _ConversionParam(),
            "permutation": Options("auto", "exact", "blocks"), "weights": Options("uniform", "margin_bound"),
            "normalize": Boolean(), "n_jobs": Integral(1, None), "random_state": RandomState(),
            "fit_intercept": Boolean(), "dtype": Options("float64", "float32", np.float64, np.float32)})
        name = self.conversion if isinstance(self.conversion, str) else type(self.conversion).__name__.lower()
        if name in ("vote", "sample"):
            raise ValueError(f"conversion={self.conversion!r} is not a linear hypothesis, so the members cannot be "
                             "averaged into a Bayes point; use a linear conversion ('last', 'average', 'tree', ...)")
        _resolve_base(self.base, self.base_params)

    def _member(self, j: int) -> _OnlineLinearClassifier:
        est = _resolve_base(self.base, self.base_params)
        seed = int(rng.hash64(self._seed, rng.stream_id("permutation-bpm"), j)) & 0x7FFFFFFFFFFFFFFF
        return est.set_params(epochs=self.epochs, shuffle=True, random_state=seed, conversion=self.conversion,
                              fit_intercept=self.fit_intercept, dtype=self.dtype)

    def fit(self, X: Any, y: Any = None) -> PermutationBPM:
        """Train the N members, each on its own permutations, and average them."""
        self._check_params()
        try:
            return self._fit(X, y)
        except BaseException:
            self._forget()
            raise

    # Batch only: permuting needs the whole training set (OBPM is the online
    # counterpart), so there is no partial_fit at all (hasattr is False).
    @available_if(lambda self: False)
    def partial_fit(self, X: Any, y: Any = None, classes: Any = None) -> PermutationBPM:  # pragma: no cover
        raise AssertionError("unreachable")

    def _fit(self, X: Any, y: Any) -> PermutationBPM:
        self._seed = rng.normalize_seed(self.random_state)
        data = X
        yi = None
        mode = self.permutation
        on_dask = is_store(X) and self.scheduler not in (None, "in-process", "sync", "threads")
        if is_store(X):
            from ..data.store import open_dataset

            if y is not None:
                raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
            ds = open_dataset(X)
            size = (ds.nnz * (ds.dtype.itemsize + 8) if ds.is_sparse else ds.n_samples * ds.n_features * ds.dtype.itemsize)
            if mode == "exact" or (mode == "auto" and size <= EXACT_PERMUTATION_BYTES):
                mode = "exact"
                if not on_dask:  # on Dask each worker loads the store itself
                    Xs, ys = ds.to_scipy() if ds.is_sparse else ds.to_numpy()
                    data, y = Xs, ys
            else:
                mode = "blocks"
        else:
            mode = "exact"
        if not is_store(data):
            data, y = self._validate_xy(data, y, reset=True)
            self.classes_ = self._classes(y)
            yi = self._encode(y)
        else:
            ds = open_dataset(data)
            self.classes_ = ds.classes
            self.n_features_in_ = ds.n_features
        if len(self.classes_) < 2:
            k = len(self.classes_)
            raise ValueError(f"PermutationBPM needs samples of at least 2 classes; got {k} class"
                             f"{'es' if k != 1 else ''}: {self.classes_.tolist()}")
        self.permutation_ = mode

        def fit_one(j: int) -> _OnlineLinearClassifier:
            est = self._member(j)
            return est.fit(data) if is_store(data) else est.fit(data, y)

        if on_dask:
            from ..distributed import execute, tasks

            path = str(open_dataset(X).path.resolve())
            with execute.runner_for(self.scheduler) as runner:
                nonce = uuid.uuid4().hex[:12]
                futs = [runner.submit((f"pbpm-member-{nonce}", j), tasks.fit_member, self._member(j), path,
                                      mode == "exact") for j in range(self.n_estimators)]
                runner.wait(futs)
                self.estimators_ = [runner.result(f) for f in futs]
        elif self.n_jobs > 1:
            with ThreadPoolExecutor(self.n_jobs) as pool:
                self.estimators_ = list(pool.map(fit_one, range(self.n_estimators)))
        else:
            self.estimators_ = [fit_one(j) for j in range(self.n_estimators)]
        self.members_ = np.stack([np.concatenate([e.coef_.astype(np.float64), e.intercept_.astype(np.float64)[:, None]],
                                                 axis=1) for e in self.estimators_])
        K = self.members_.shape[1]
        self.weights_ = np.full((K, self.n_estimators), 1.0 / self.n_estimators)
        if self.weights == "margin_bound":
            OBPM._bound_weights(self, data, yi)  # same eq. (2) fit on the members_
        self._finish()
        return self

    def _finish(self) -> None:
        H = np.einsum("kn,nkd->kd", self.weights_, self.members_)
        if self.normalize:
            norms = np.linalg.norm(H if self.fit_intercept else H[:, :-1], axis=1)
            H = H / np.maximum(1.0, norms)[:, None]
        dt = self._np_dtype
        self.summary_ = self.estimators_
        self.coef_ = np.ascontiguousarray(H[:, :-1]).astype(dt, copy=False)
        self.intercept_ = H[:, -1].astype(dt) if self.fit_intercept else np.zeros(len(H), dt)
