"""Online Bayes Point Machines and permutation Bayes points over any linear rule.

:class:`OBPM` is Algorithm 2 of Harrington, Herbrich, Kivinen, Platt &
Williamson (2003) over a linear rule: N learners run side by side, learner ``j``
is shown example ``t`` only when its Bernoulli(tau) draw ``b_{j,t}`` is 1, and
the hypothesis is the average of the N weight vectors, rescaled to norm at most
1 (step 15).  The learners run in the ensemble engine (:mod:`distlearn.ensembles`);
a fit on a store is a learner-parallel job
(:mod:`distlearn.distributed.learner_parallel`) in this process or on Dask.  What
it shares with the kernel OBPM (:class:`~distlearn.KernelOBPM`) is their base,
:class:`~distlearn.estimators._online_bayes_point.OnlineBayesPoint`.

:class:`PermutationBPM` is the batch Bayes point of the paper's section 3
(after Herbrich, Graepel & Campbell 2001): N learners, each trained on its own
seeded permutation of the training set, averaged; its members train as
run-parallel tasks (:mod:`distlearn.distributed.runs`).  What it shares with the
kernel one (:class:`~distlearn.KernelPermutationBPM`) is their base,
:class:`~distlearn.estimators._permutation_bayes_point.PermutationBayesPoint`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import Boolean, Integral, NJobs, OptionalPath, Options, Real, Scheduler, effective_n_jobs
from ..data.store import open_dataset
from ..distributed import learner_parallel
from ..ensembles import _kernels as EK
from ..ensembles import init_ensemble, learn_ensemble_chunk, learner_groups, margin_bound_weights
from ..ensembles import engine
from ..stream import is_store
from ._base_learners import refuse_adaptive, shown
from ._online_bayes_point import ConversionChoice, OnlineBayesPoint
from ._permutation_bayes_point import PermutationBayesPoint
from .base import LinearClassifier, OnlineLinearClassifier
from .kernel import KernelClassifier

__all__ = ["OBPM", "PermutationBPM", "TAU_GRID"]

#: The taus that ``OBPM(tau="auto")`` tries: the OBPM paper's values (0.05 and
#: 0.2 on the splice sites, 0.3 elsewhere) and their neighbours.
TAU_GRID = (0.05, 0.1, 0.2, 0.3, 0.5)


class TauChoice:
    """``tau``: a real number in (0, 1], ``"auto"`` (:data:`TAU_GRID`), or a sequence of distinct ones."""

    def check(self, name: str, value: Any) -> None:
        if isinstance(value, str) and value == "auto":
            return
        one = Real(0.0, 1.0, "right")
        if isinstance(value, (tuple, list, np.ndarray)) and not isinstance(value, str):
            vals = list(value)
            if not vals:
                raise ValueError(f"{name} must be a real number in (0, 1], 'auto' or a non-empty sequence of them; "
                                 "got an empty sequence")
            for v in vals:
                one.check(f"every value of {name}", v)
            if len({float(v) for v in vals}) != len(vals):
                raise ValueError(f"{name} has repeated values: {list(map(float, vals))}")
            return
        try:
            one.check(name, value)
        except ValueError:
            raise ValueError(f"{name} must be a real number in (0, 1], 'auto' or a sequence of such numbers; "
                             f"got {value!r}") from None


def _tau_values(tau: Any) -> tuple[float, ...]:
    """The tau groups of an OBPM: one value, or the grid of ``"auto"``/a sequence."""
    if isinstance(tau, str) and tau == "auto":
        return TAU_GRID
    if isinstance(tau, (tuple, list, np.ndarray)):
        return tuple(float(t) for t in tau)
    return (float(tau),)


def _iter_xy(X: Any, yi: np.ndarray | None):
    """Blocks ``(X, y)`` of an in-memory matrix (y given) or of a store (y read)."""
    if is_store(X):
        for b in open_dataset(X).iter_blocks():
            yield b.X, b.y
        return
    step = max(1, (1 << 22) // max(1, X.shape[1]))
    for s in range(0, X.shape[0], step):
        yield X[s : s + step], yi[s : s + step]


def bound_weights(est: LinearClassifier, members: np.ndarray, X: Any, yi: np.ndarray | None) -> None:
    """``weights="margin_bound"``: eq. (2) of the OBPM paper maximised per output column on the
    training set; sets ``weights_``, ``bound_`` and ``bound_uniform_`` on ``est``."""
    N, K, _ = members.shape
    mins = np.full((K, N), np.inf)
    norms = np.linalg.norm(members, axis=2)  # (N, K)
    norms[norms == 0] = 1.0
    Wn = members / norms[:, :, None]
    for Xb, yb in _iter_xy(X, yi):
        yb = est._encode(np.asarray(yb)) if yi is None else yb
        for k in range(K):
            s = Xb @ Wn[:, k, :-1].T + (Wn[:, k, -1][None, :] if est.fit_intercept else 0.0)
            yk = np.where((yb == 1) if K == 1 else (yb == k), 1.0, -1.0)
            mins[k] = np.minimum(mins[k], np.min(yk[:, None] * np.asarray(s), axis=0))
    weights = np.empty((K, N))
    bounds = np.empty(K)
    uni = np.empty(K)
    for k in range(K):
        weights[k], bounds[k], uni[k] = margin_bound_weights(members[:, k, :], mins[k])
    est.weights_ = weights
    est.bound_ = bounds if K > 1 else float(bounds[0])
    est.bound_uniform_ = uni if K > 1 else float(uni[0])


def _average_members(est: LinearClassifier, members: np.ndarray) -> np.ndarray:
    """``sum_j weights_[k, j] members[j, k]`` per column, normalised (:func:`_normalized`)."""
    return _normalized(est, np.einsum("kn,nkd->kd", est.weights_, members))


def _normalized(est: LinearClassifier, H: np.ndarray) -> np.ndarray:
    """With ``normalize``, every column of ``H`` divided by ``max(1, max_k ||H_k||)``: one factor for all
    columns, so that no prediction changes (a factor per column would change the one-vs-rest argmax)."""
    if est.normalize:
        norms = np.linalg.norm(H if est.fit_intercept else H[:, :-1], axis=1)
        H = H / max(1.0, float(norms.max(initial=0.0)))
    return H



class OBPM(OnlineBayesPoint):
    """Online Bayes Point Machine (Harrington et al. 2003, Algorithm 2).

    ``n_estimators`` learners of the ``base`` rule run side by side; learner
    ``j`` is shown example ``t`` when its Bernoulli(``tau``) draw ``b_{j,t}``
    is 1.  The hypothesis is the average ``w~`` of the members' weights,
    rescaled to ``w~ / max(1, ||w~||)`` when ``normalize`` (step 15).

    Parameters
    ----------
    n_estimators : int, default=20
        N, the number of learners (with several taus: per tau value, and the
        Bayes point averages the chosen value's N).  The defaults (20 per tau,
        ``tau="auto"``: 100 learners in all, the cost of ``OBPM(n_estimators=100,
        tau=0.3)``) were chosen by measurement against a tuned LinearSVC
        (``benchmarks/bench_defaults.py``; README, "Defaults").
    tau : float, "auto" or sequence of float, default="auto"
        Probability that a learner is shown an example, in (0, 1].  The draw
        uses 32 random bits: ``P(b = 1) = round(tau * 2**32) / 2**32``.
        ``"auto"`` (the values of :data:`TAU_GRID`) or a sequence of values
        chooses tau from the data, as the paper does by training error: a
        group of ``n_estimators`` members per value runs in the same fused
        pass, and the group whose Bayes point makes the fewest progressive
        (online) mistakes, summed over the fit's epochs, is kept (ties: the
        earlier value).  Group ``g`` draws exactly as ``OBPM(tau=taus[g])``
        with the same seed, so it *is* that model, bit for bit; the cost is
        that of one OBPM with ``len(taus) * n_estimators`` members.  Rules
        whose parameters depend on the horizon (``"margin"``) take it from
        the largest tau.
    base : str or distlearn linear estimator, default="perceptron"
        The members' rule: ``"perceptron"`` (eta = 1, the paper's choice),
        ``"generalized"``, ``"margin"``, ``"alma"``, ``"romma"``, ``"pa"``,
        ``"mira"``, ``"lms"``, or an unfitted estimator such as
        ``ALMA(B=1.11, C=0.71)`` whose rule parameters are used (its
        ``epochs``, ``shuffle``, ``conversion`` ... are ignored).  A kernel
        learner (``KernelMIRA(...)``, ``"kernel-mira"``, ...) is refused:
        the kernel OBPM is its own estimator, :class:`KernelOBPM`, with the
        same ``base=``.  The adaptive learners (``"arow"``,
        ``"nag"``, ``AROW``, ``NormalizedGradient``) are refused: the fused
        ensemble kernel keeps no per-feature statistics (use
        :class:`PermutationBPM` with them).
    base_params : dict, default=None
        Parameters of the base estimator (``{"B": 1.11, "C": 0.71}``).
    epochs : int, default=10
        Passes over the training data in ``fit``.  Each epoch draws fresh
        ``b_{j,t}`` (the epoch is part of the key).  The paper's protocol is
        one epoch with ``conversion="last"``; the defaults (10 epochs,
        ``"average"``) were chosen by measurement against a tuned LinearSVC
        (``benchmarks/bench_defaults.py``; README, "Defaults").
    shuffle : bool, default=True
        Visit the examples in a seeded permutation in each epoch of ``fit``
        (for a store: its blocks, and the rows inside each block, permuted).
        ``partial_fit`` keeps the stream's order: example ``i`` of a call is the
        stream's example ``t = t_ + i``, so the draws do not depend on how the
        stream is cut into calls.
    normalize : bool, default=True
        Rescale the output hypothesis to norm at most 1 (step 15; bias weight
        included).  With several output columns, all are divided by the same
        factor, ``max(1, max_k ||w~_k||)``, so it changes no prediction, only
        the scale of ``decision_function``.
    conversion : {"last", "average"}, default="average"
        ``"last"``: the members' final weights (the paper's).  ``"average"``: the average
        of the hypotheses over the rounds (h_0 included), kept as a running
        sum inside the kernel at O(N K) per round.
    conversion_scope : {"ensemble", "members"}, default="ensemble"
        ``"ensemble"``: average the ensemble hypotheses ``w~_0 .. w~_T`` over
        every round.  ``"members"``: each member averages its own hypotheses
        over the examples it was shown, and the members' averages are
        averaged.  (Identical for ``"last"``.)
    keep_members : "auto", True or False, default="auto"
        Keep ``members_``, every member's weights after the conversion.  With
        ``conversion="average"`` and scope ``"ensemble"`` that means a running
        sum per member (a second array as large as the weights, written on
        every member update); without it the members' running sums are
        *pooled*: one per pool of 50 consecutive members of a tau group (two
        for 100 members), written once per nonzero for all of a pool's members
        that update on a row, so the average costs about 1.15x "last" instead
        of 1.5-1.8x (``benchmarks/README.md``, issue 30).  The Bayes point is the
        same, ``(1/N) sum_j (1/(T+1)) sum_t w_{j,t}`` (uniform weights), summed
        in another order: equal to the per-member form to rounding (about
        1e-15 relative), and the same bits for any learner groups, chunking,
        resume or scheduler.  ``"auto"``: pooled unless something needs the
        members' averages -- ``weights="margin_bound"`` keeps them; with
        ``"last"`` or scope ``"members"`` they are kept anyway.  ``True``:
        always kept.  ``False``: never (``members_`` is not set), refused with
        ``weights="margin_bound"``.  ``members_`` of a pooled fit raises an
        AttributeError naming this parameter; ``distlearn train --save-members``
        sets it to True.  A learner group starts at a pool, so pooled sums allow
        at most one group per 50 members (two for 100): a fit asking for more
        with ``learner_groups=`` says so in a warning (the default, one group per
        worker, quietly runs one per pool; ``job_["groups"]`` lists them);
        ``keep_members=True`` splits at any member.
    weights : {"uniform", "margin_bound"}, default="uniform"
        Member weights: the paper's ``1/N``, or the convex weights that
        maximise the margin lower bound eq. (2) on the training set (batch
        only: computed at the end of ``fit``; ``weights_`` and ``bound_``
        report them).
    learner_groups : int, default=None
        Split the learners into this many contiguous groups, each run as its
        own compiled pass over every chunk; defaults to ``n_jobs``.  The weights
        do not depend on it.
    n_jobs : int or None, default=1
        Threads running the learner groups (the kernel releases the GIL);
        scikit-learn's convention: -1 every core, -2 all but one, None 1.
    record_online : bool, default=False
        Keep ``online_mistakes_``, the per-round progressive mistakes of
        ``w~_{t-1}`` (one byte per round).
    random_state : int, RandomState, Generator or None, default=None
        Seed of every draw ``b_{j,t}`` and of the shuffles.
    fit_intercept : bool, default=True
        A bias, as an extra constant feature (the paper's footnote).
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights; a margin is summed in it, the steps and scales in float64.
    scheduler : None, str or distributed.Client, default=None
        Where ``fit`` on a *store* runs (arrays always train in this process),
        as everywhere in distlearn (:func:`distlearn.distributed.executor_for`):
        ``None`` or ``"in-process"``: this process, ``n_jobs`` threads;
        ``"local"``: a LocalCluster for this fit, closed after it; a scheduler
        address (``"tcp://10.0.0.1:8786"``, ``"tls://..."`` with TLS from
        dask's config) or scheduler file (``*.json``); or a
        ``distributed.Client``.  On Dask the learners run as
        ``learner_groups`` task chains (default: one per worker thread) over
        the store's blocks; workers open the store by path.  The weights are
        bit-identical wherever the fit runs.
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
    epoch_online_errors_ : ndarray of shape (epochs,), int64
        ``fit``: the progressive mistakes of ``w~_{t-1}`` in every epoch
        (``online_errors_`` is the first epoch's).
    tau_ : float
        The tau of the kept members (``tau`` itself unless it chose).
    taus_ : ndarray of shape (n_taus,)
        The taus tried (one value unless ``tau`` is ``"auto"`` or a sequence).
    tau_online_errors_ : ndarray of shape (n_taus,), int64
        Per tau group, the progressive mistakes of its Bayes point summed over
        the epochs of ``fit`` (over every call of ``partial_fit``): what chose
        ``tau_``.
    job_ : dict
        Store fits: ``group_blocks`` (block passes run by this fit, summed
        over learner groups; a resumed fit runs fewer), ``groups``,
        ``runner``, ``resumed_from`` and ``seconds``.
    members_ : ndarray of shape (n_estimators, n_outputs, n_features + 1)
        The members' true weights (bias last) after the conversion, before
        averaging (not with pooled running sums: see ``keep_members``).
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
    .

    Examples
    --------
    >>> from distlearn import OBPM
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> d = make_obpm_artificial(1000, 1000, random_state=0)
    >>> clf = OBPM(n_estimators=100, tau=0.35, random_state=0).fit(d.X_train, d.y_train)
    >>> clf.score(d.X_test, d.y_test) > 0.98
    True
    """

    _params = {
        "n_estimators": Integral(1, None),
        "tau": TauChoice(),
        "normalize": Boolean(),
        "conversion": ConversionChoice(),
        "conversion_scope": Options("ensemble", "members"),
        "keep_members": Options("auto", True, False),
        "weights": Options("uniform", "margin_bound"),
        "n_jobs": NJobs(),
        "record_online": Boolean(),
        "scheduler": Scheduler(),
        "checkpoint": OptionalPath(),
        "checkpoint_every": Integral(1, None),
        "resume": Boolean(),
        "progress": Boolean(),
    }
    _FITTED = OnlineBayesPoint._FITTED + ("members_", "bound_", "bound_uniform_", "job_")

    def __init__(self, *, n_estimators: int = 20, tau: Any = "auto", base: Any = "perceptron",
                 base_params: dict[str, Any] | None = None, epochs: int = 10, shuffle: bool = True,
                 normalize: bool = True, conversion: Any = "average", conversion_scope: str = "ensemble",
                 keep_members: Any = "auto", weights: str = "uniform", learner_groups: int | None = None, n_jobs: int = 1,
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
        self.keep_members = keep_members
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

    # -- parameters and the base rule ---------------------------------------------------
    def _check_params(self) -> None:
        super()._check_params()  # the parameter table, then _check_base
        if self.learner_groups is not None:
            Integral(1, None).check("learner_groups", self.learner_groups)
        if min(_tau_values(self.tau)) <= 0.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau!r}: with tau = 0 no learner sees any example")
        if self.keep_members is False and self.weights == "margin_bound":
            raise ValueError("keep_members=False: weights='margin_bound' weighs every member's own hypothesis "
                             "(members_); use keep_members='auto' or True")

    def __getattr__(self, name: str) -> Any:
        if name == "members_" and "coef_" in self.__dict__:
            raise AttributeError(
                f"members_ was not kept: this OBPM was fitted with keep_members={self.keep_members!r}"
                + (", which pools the members' running sums of conversion='average'" if self._pooled else "")
                + "; fit with keep_members=True to keep every member's hypothesis")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _check_base(self, base: OnlineLinearClassifier) -> None:
        refuse_adaptive("OBPM", self.base, base, "runs its members in one fused ensemble kernel, which keeps "
                        "no per-feature statistics (AROW's Sigma, NAG's scales and gradient sums)",
                        "use PermutationBPM(base={name}(...)) for a Bayes point of {name} learners, or a rule "
                        "without per-feature statistics as OBPM's base (e.g. 'pa')")
        if isinstance(base, KernelClassifier):
            raise ValueError(f"base={shown(self.base, base)}: OBPM runs linear rules; the kernel OBPM is "
                             f"KernelOBPM(base={shown(self.base, base)}, ...) (distlearn train --model kernel-obpm)")

    def _check_partial(self) -> None:
        if self.weights != "uniform":
            raise ValueError("weights='margin_bound' needs the whole training set (batch); partial_fit uses 1/N")

    @property
    def _keeps_members(self) -> bool:
        """Whether ``members_`` is set: ``keep_members``, with "auto" pooling only where nothing needs them."""
        if self.keep_members == "auto" and not isinstance(self.keep_members, bool):
            return self.weights == "margin_bound" or not self._averaging or self.conversion_scope == "members"
        return bool(self.keep_members)

    @property
    def _pooled(self) -> bool:
        """The ensemble average in pooled running sums (ACC_POOLED): nothing needs a sum per member."""
        return self._averaging and self.conversion_scope == "ensemble" and not self._keeps_members

    @property
    def _acc_mode(self) -> int:
        if not self._averaging:
            return EK.ACC_NONE
        if self.conversion_scope == "members":
            return EK.ACC_MEMBERS
        return EK.ACC_POOLED if self._pooled else EK.ACC_ENSEMBLE

    def _pools(self) -> np.ndarray:
        """The pool of every learner (``ACC_POOLED``; :func:`~distlearn.ensembles.engine.member_pools`)."""
        n = self.n_estimators * len(self._taus)
        return engine.member_pools(n, self.n_estimators if len(self._taus) > 1 else None)

    @property
    def _groups(self) -> int:
        return self.learner_groups if self.learner_groups is not None else effective_n_jobs(self.n_jobs)

    @property
    def _taus(self) -> tuple[float, ...]:
        return _tau_values(self.tau)

    def _prepare(self, X: Any, n_rows: int) -> None:
        super()._prepare(X, n_rows)
        if hasattr(self._base_est, "_rule_obj"):  # a rule measured from the data (margin perceptron, LMS)
            self._rule_obj = self._base_est._rule_obj

    # -- the fused ensemble kernel ----------------------------------------------------------
    def _new_state(self, n_features: int, n_outputs: int) -> Any:
        return init_ensemble(n_features, self.n_estimators * len(self._taus), n_outputs, dtype=self._np_dtype,
                             running_sum=self._acc_mode != EK.ACC_NONE,
                             pools=int(self._pools()[-1]) + 1 if self._pooled else None)

    def _learn_members(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray,
                       epoch: int) -> tuple[np.ndarray, np.ndarray]:
        return learn_ensemble_chunk(
            self._rule_obj, self._state, X, yi, tids, seed=self._seed, tau=self._taus, epoch=epoch,
            order=order, fit_intercept=self.fit_intercept, acc_mode=self._acc_mode, groups=self._groups,
            n_jobs=effective_n_jobs(self.n_jobs), tau_block=self.n_estimators)

    def _finish(self) -> None:
        st = self._state
        g = self._choose_tau()
        N, K = self.n_estimators, st.n_outputs
        keep = slice(g * N, (g + 1) * N)  # the kept tau group's members
        members = st.members()[keep]  # (N, K, d + 1)
        self.member_rounds_ = st.member_rounds[keep].copy()
        self.summary_ = self._conv
        self.__dict__.pop("members_", None)
        if self._acc_mode == EK.ACC_POOLED:
            # (1/N) sum_j (1/(T+1)) (sum_t<T w_j,t + w_j,T): the kept tau group's pools, then its members
            pools = self._pools()
            S = st.pool_sums(pools)[np.unique(pools[keep])].sum(axis=0) + members.sum(axis=0)
            self.weights_ = np.full((K, N), 1.0 / N)
            self._set_hypothesis(_normalized(self, S / (N * (int(st.n_rounds[0]) + 1.0))))
            return
        if self._acc_mode == EK.ACC_ENSEMBLE:
            members = (st.member_sums()[keep] + members) / (int(st.n_rounds[0]) + 1)
        elif self._acc_mode == EK.ACC_MEMBERS:
            members = (st.member_sums()[keep] + members) / (st.member_rounds[keep, None, None] + 1.0)
        if "weights_" not in self.__dict__ or self.weights == "uniform" or np.shape(self.weights_) != (K, N):
            self.weights_ = np.full((K, N), 1.0 / N)
        self._set_hypothesis(_average_members(self, members))
        if self._keeps_members:
            self.members_ = members

    def _after_fit(self, X: Any, yi: np.ndarray | None) -> None:
        super()._after_fit(X, yi)
        if self.weights == "margin_bound":
            bound_weights(self, self.members_, X, yi)
            self._finish()

    # -- fit on a store: the learner-parallel job (OnlineBayesPoint._fit_store) ---------------
    def _store_job(self, common: dict[str, Any], n_groups: int) -> learner_parallel.ObpmJob:
        groups = tuple(learner_groups(self._state.n_learners, n_groups, taus=np.repeat(self._taus, self.n_estimators)
                                      if len(self._taus) > 1 else None, bounds=self._pool_starts()))
        if self.learner_groups is not None and len(groups) < min(n_groups, self._state.n_learners):
            import warnings

            warnings.warn(f"OBPM: {len(groups)} learner group{'s' if len(groups) > 1 else ''} run, not {n_groups}: "
                          f"keep_members={self.keep_members!r} pools the running sums of {engine.POOL_MEMBERS} "
                          "members and a group starts at a pool; keep_members=True splits at any member",
                          stacklevel=3)
        return learner_parallel.ObpmJob(
            **common, rule=self._rule_obj, tau=self._taus[0] if len(self._taus) == 1 else self._taus,
            tau_block=None if len(self._taus) == 1 else self.n_estimators,
            fit_intercept=bool(self.fit_intercept), acc_mode=self._acc_mode, dtype=np.dtype(self._np_dtype).name,
            pool_members=engine.POOL_MEMBERS if self._pooled else None,
            n_learners=self._state.n_learners, groups=groups)

    def _pool_starts(self) -> np.ndarray | None:
        """The learners a learner group may start at: the first of each pool (pooled running sums)."""
        if not self._pooled:
            return None
        p = self._pools()
        return np.flatnonzero(np.r_[True, p[1:] != p[:-1]])


class PermutationBPM(PermutationBayesPoint):
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
        As in :class:`OBPM`; the adaptive learners are members too
        (``"arow"``, ``"nag"``, ``AROW(r=...)``, ``NormalizedGradient(...)``):
        each member is the base estimator fitted on its permutation.  A kernel
        learner (``KernelPerceptron(...)``, ``"kernel-mira"``, ...) is refused:
        the kernel permutation Bayes point is its own estimator,
        :class:`KernelPermutationBPM`, with the same ``base=``.
    epochs : int, default=3
        Passes of each member over its permutation (a fresh permutation per
        epoch).  The defaults (3 epochs, ``"average"``) were chosen by
        measurement: within 1 point of a tuned LinearSVC on every data set of
        ``benchmarks/bench_defaults.py`` (README, "Defaults").
    conversion : str or conversion object, default="average"
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
        Rescale the averaged hypothesis to norm at most 1, all columns by the same factor (as
        :class:`OBPM`), so no prediction changes.
    n_jobs : int or None, default=1
        Threads training members at once (the kernels release the GIL); -1
        every core, -2 all but one, None 1 (scikit-learn's convention).
    random_state, fit_intercept, dtype
        Member ``j``'s permutations are keyed by ``(seed, j, epoch)``.
    scheduler : None, str or distributed.Client, default=None
        For a store: where the members train (run-parallel, one Dask task per
        member; workers open the store by path, and load it once per process
        for exact permutations), with the meanings of
        :func:`distlearn.distributed.executor_for` (``None``: this process).
        The members, and so the model, are the same bits wherever they train.

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

    _params = {**PermutationBayesPoint._params, "weights": Options("uniform", "margin_bound"), "normalize": Boolean()}
    _FITTED = PermutationBayesPoint._FITTED + ("members_", "bound_", "bound_uniform_")

    def __init__(self, *, n_estimators: int = 10, base: Any = "perceptron", base_params: dict[str, Any] | None = None,
                 epochs: int = 3, conversion: Any = "average", permutation: str = "auto", weights: str = "uniform",
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

    def _check_base(self, base: OnlineLinearClassifier) -> None:
        if isinstance(base, KernelClassifier):
            raise ValueError(f"base={shown(self.base, base)}: PermutationBPM averages weight vectors; the kernel "
                             f"permutation Bayes point is KernelPermutationBPM(base={shown(self.base, base)}, ...)")

    def _member_params(self) -> dict[str, Any]:
        return {"fit_intercept": self.fit_intercept, "dtype": self.dtype}

    def _combine(self, X: Any, yi: np.ndarray | None) -> None:
        self.members_ = np.stack([np.concatenate([e.coef_.astype(np.float64), e.intercept_.astype(np.float64)[:, None]],
                                                 axis=1) for e in self.estimators_])
        K = self.members_.shape[1]
        self.weights_ = np.full((K, self.n_estimators), 1.0 / self.n_estimators)
        if self.weights == "margin_bound":
            bound_weights(self, self.members_, X, yi)
        self._set_hypothesis(_average_members(self, self.members_))
