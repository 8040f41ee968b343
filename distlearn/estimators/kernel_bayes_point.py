"""The kernel Bayes point machines: :class:`KernelOBPM` and :class:`KernelPermutationBPM`.

:class:`KernelOBPM` is the OBPM of Harrington et al. (2003) over a kernel learner
on a budget, as the paper's section 3 suggests: N members, member ``j`` shown
example ``t`` when its Bernoulli(tau) draw is 1, all of them on one shared pool of
patterns and one kernel row per example (:mod:`distlearn.ensembles.kernel`).  What
it shares with the linear :class:`~distlearn.OBPM` -- the draws, the conversion,
the progressive mistakes -- is their base,
:class:`~distlearn.estimators._online_bayes_point.OnlineBayesPoint`.

:class:`KernelPermutationBPM` is the batch Bayes point of the paper's section 3
over a kernel learner: N members, each trained on its own seeded permutations,
their expansions merged into one.  What it shares with the linear
:class:`~distlearn.PermutationBPM` -- the members, their seeds, the permutations
and the run-parallel fit -- is their base,
:class:`~distlearn.estimators._permutation_bayes_point.PermutationBayesPoint`.
Both predict with one kernel expansion (:class:`KernelExpansion`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import (Boolean, Integral, NJobs, OptionalPath, RandomState, Real, Scheduler, effective_n_jobs,
                           in_memory)
from .._urls import absolute
from ..conversions.kernel import _unique_csr_rows, merge_repeated_patterns, ridge_refit, ridge_sums
from ..data.store import open_dataset
from ..distributed.learner_parallel import KernelObpmJob
from ..distributed.runs import store_sums
from ..ensembles import learner_groups
from ..ensembles.kernel import NO_PROJECTRON, init_kernel_ensemble, learn_kernel_ensemble_chunk
from ..learners.kernel import kernel_decision
from ..stream import encode_labels, epoch_chunks, is_store
from ._base_learners import resolve_base, shown
from ._online_bayes_point import ConversionChoice, OnlineBayesPoint
from ._permutation_bayes_point import PermutationBayesPoint
from .kernel import KERNEL_ESTIMATORS, KernelClassifier, race_gamma

__all__ = ["KernelExpansion", "KernelOBPM", "KernelPermutationBPM", "require_kernel"]


def _refit_sums(kernel: Any, S: np.ndarray, classes: np.ndarray, n_outputs: int, X: Any, y: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~distlearn.conversions.kernel.ridge_sums` of a store block's rows (raw labels ``y``)."""
    return ridge_sums(kernel, S, X, encode_labels(classes, y), n_outputs)


def require_kernel(owner: str, linear: str, value: Any, base: Any) -> None:
    """One line for a ``base`` (as given: ``value``) that is not a kernel learner where ``owner`` runs only
    kernel learners, naming ``linear``, the estimator that runs it."""
    if not isinstance(base, KernelClassifier):
        raise ValueError(f"base={shown(value, base)}: {owner} runs kernel learners "
                         f"({', '.join(sorted(KERNEL_ESTIMATORS))} or their estimators); a linear rule is "
                         f"{linear}(base={shown(value, base)}, ...)")


class KernelExpansion:
    """Prediction of a kernel Bayes point: one expansion ``dual_coef_ @ k(support_vectors_, x)`` (mixed
    in before a :class:`~distlearn.estimators.base.LinearClassifier`, which runs a store block by block)."""

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores ``dual_coef_ @ k(support_vectors_, x)``: shape (n_samples,) for two classes
        (positive means ``classes_[1]``), (n_samples, n_classes) otherwise."""
        check_is_fitted(self, "summary_")
        if is_store(X):
            return super().decision_function(X)  # type: ignore[misc]  # block by block, each through this method
        X = validate_data(self, in_memory(X), accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        scores = kernel_decision(self._kernel_obj, self.support_vectors_, self.dual_coef_.T, X)
        return scores.ravel() if scores.shape[1] == 1 else scores


class KernelOBPM(KernelExpansion, OnlineBayesPoint):
    """Kernel Online Bayes Point Machine (Harrington et al. 2003, Algorithm 2 and section 3).

    ``n_estimators`` kernel learners of the ``base`` learner run side by side;
    learner ``j`` is shown example ``t`` when its Bernoulli(``tau``) draw
    ``b_{j,t}`` is 1 (the draws of :class:`OBPM` with the same seed).  The N
    members share one pool of cached patterns -- the union of their caches; a
    pattern enters it once when members insert it and leaves when no member
    holds it -- and one kernel row per example, as the paper suggests ("the
    kernel values K(x, x_t) are the same for all N perceptrons"); each member
    keeps its own coefficients and incremental scores.  The base's budget
    applies to every member's own cache, so each member is bit for bit the base
    learner run on the examples it was shown (its random removals seeded by
    :func:`distlearn.ensembles.kernel.member_seed`).  The Bayes point is one
    kernel expansion over the pool, the mean of the members' coefficients
    (``"average"``: over the ensemble's rounds).  It fits in float64.  Arrays
    fit in this process on one pool.  ``fit`` on a store is learner-parallel,
    as :class:`OBPM`'s: the members split into ``learner_groups`` contiguous
    groups, each a task chain over the store's blocks (in this process or on
    ``scheduler``) with its own pool of its members' patterns, so a worker
    holds its members' budgets, one block and one kernel row, never the data;
    the pools merge at the end.  Every member, and so the Bayes point, is the
    same bits for any number of groups and wherever they ran.  To run many
    fits on a cluster use :func:`distlearn.run_grid`.

    Parameters
    ----------
    n_estimators : int, default=20
        N, the number of members.
    tau : float, default=0.3
        Probability that a member is shown an example, in (0, 1] (the paper's
        0.3).  One value: the members share one pool, so taus are compared by
        separate fits (:func:`distlearn.run_grid`).
    base : str or distlearn kernel estimator, default="kernel-perceptron"
        The members' learner: ``"kernel-perceptron"``, ``"kernel-mira"``,
        ``"kernel-pa"``, or an unfitted ``KernelPerceptron``, ``KernelMIRA``,
        ``KernelPA`` whose kernel, rule, ``beta``, ``budget`` (not
        ``"projectron"``: each member would need its own inverse Gram matrix)
        and ``removal`` are used (``"auto"`` is ``"margin"`` here, ``"merge"`` is refused: a merged
        pattern is not a row of the shared pool; its ``epochs``, ``shuffle``, ``conversion``
        ... are ignored).  A linear rule is :class:`OBPM`'s base.
    base_params : dict, default=None
        Parameters of the base estimator (``{"gamma": 0.5, "budget": "variable"}``).  A base of
        ``gamma="auto"`` races its widths once, alone, over the first chunk the members see (arrays:
        the first rows of the first epoch, in its order, so the width is the one a single fit of the
        base with this ``random_state`` keeps; a store: its first block, so blocks of at least 4096
        rows race in full), and every member takes the winner, ``gamma_``.
    epochs : int, default=10
        Passes over the training data in ``fit``; each epoch draws fresh ``b_{j,t}``.
    shuffle : bool, default=True
        Visit the examples in a seeded permutation in each epoch of ``fit``
        (``partial_fit`` keeps the stream's order).
    conversion : {"last", "average"}, default="average"
        ``"last"``: the members' final expansions.  ``"average"``: the
        average of the ensemble's hypotheses over the rounds (h_0 included).
    record_online : bool, default=False
        Keep ``online_mistakes_``, the per-round progressive mistakes of the
        Bayes point (one byte per round).
    random_state : int, RandomState, Generator or None, default=None
        Seed of every draw ``b_{j,t}``, of the shuffles and of random removals.
    scheduler : None, str or distributed.Client, default=None
        Where ``fit`` on a *store* runs, as :class:`OBPM`'s
        (:func:`distlearn.distributed.executor_for`): ``None`` this process
        (``n_jobs`` threads), ``"local"``, an address, a scheduler file or a
        Client.  Arrays always fit in this process.
    learner_groups : int, default=None
        Store fits: the members split into this many contiguous groups, each
        with its own pool (default: ``n_jobs`` in this process, one per worker
        on Dask).  The model does not depend on it; the work per round is
        about the group's pool size times ``n_features``.
    n_jobs : int or None, default=1
        Threads running the learner groups of an in-process store fit.
    checkpoint : str or path, default=None
        Store fits: a directory where every group's state is saved after
        every ``checkpoint_every`` blocks (as :class:`OBPM`'s).
    checkpoint_every : int, default=8
        Blocks per task (and per checkpoint).
    resume : bool, default=False
        Continue from the last complete checkpoint in ``checkpoint``.
    progress : bool, default=False
        A progress bar over blocks x groups for store fits.

    Attributes
    ----------
    support_vectors_ : ndarray of shape (n_patterns, n_features)
    dual_coef_ : ndarray of shape (n_outputs, n_patterns)
        The Bayes point: ``decision_function(x) = dual_coef_ @ k(support_vectors_, x)``.
    n_support_ : ndarray of shape (n_classes,)
    gamma_ : float
        The kernel width used.
    gammas_, gamma_online_errors_, gamma_race_rows_
        The base's ``gamma="auto"`` race, as on the kernel learners.
    job_ : dict
        Store fits: ``group_blocks``, ``groups``, ``runner``, ``resumed_from`` and ``seconds``.
    pool_size_ : int
        ``n_patterns``, the patterns of the shared pool (the union of the members' caches).
    member_n_support_ : ndarray of shape (n_estimators,)
        Each member's cache size.
    member_rounds_ : ndarray of shape (n_estimators,)
        Examples each member was shown (about ``tau * t_``).
    n_removed_ : int
        Removals from the members' caches, summed.
    weights_ : ndarray of shape (n_outputs, n_estimators)
        ``1 / N``.
    online_errors_, epoch_online_errors_, online_mistakes_, n_updates_
        Progressive mistakes of the Bayes point (first epoch; per epoch; per
        round with ``record_online``), and member updates, summed.
    tau_, taus_, classes_, t_, n_iter_, n_features_in_

    References
    ----------
    E. Harrington, R. Herbrich, J. Kivinen, J. Platt, R. C. Williamson.
    Online Bayes Point Machines. PAKDD 2003, LNAI 2637, pp. 241-252.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from distlearn import KernelOBPM, KernelMIRA
    >>> X, y = make_moons(n_samples=300, noise=0.1, random_state=0)
    >>> clf = KernelOBPM(n_estimators=10, base=KernelMIRA(gamma=2.0, budget="variable"), epochs=2,
    ...                  random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    _common = {"epochs": Integral(1, None), "shuffle": Boolean(), "random_state": RandomState()}
    _params = {"n_estimators": Integral(1, None), "tau": Real(0.0, 1.0, "right"), "conversion": ConversionChoice(),
               "record_online": Boolean(), "scheduler": Scheduler(), "n_jobs": NJobs(), "checkpoint": OptionalPath(),
               "checkpoint_every": Integral(1, None), "resume": Boolean(), "progress": Boolean()}
    _FITTED = OnlineBayesPoint._FITTED + ("support_vectors_", "dual_coef_", "n_support_", "gamma_", "_kernel_obj",
                                          "pool_size_", "member_n_support_", "n_removed_", "gammas_",
                                          "gamma_online_errors_", "gamma_race_rows_", "_gamma_pending", "job_")
    #: a kernel expansion has no bias and computes in float64
    fit_intercept = False
    dtype = "float64"

    def __init__(self, *, n_estimators: int = 20, tau: float = 0.3, base: Any = "kernel-perceptron",
                 base_params: dict[str, Any] | None = None, epochs: int = 10, shuffle: bool = True,
                 conversion: Any = "average", record_online: bool = False, random_state: Any = None,
                 scheduler: Any = None, learner_groups: int | None = None, n_jobs: int = 1, checkpoint: Any = None,
                 checkpoint_every: int = 8, resume: bool = False, progress: bool = False) -> None:
        self.n_estimators = n_estimators
        self.tau = tau
        self.base = base
        self.base_params = base_params
        self.epochs = epochs
        self.shuffle = shuffle
        self.conversion = conversion
        self.record_online = record_online
        self.random_state = random_state
        self.scheduler = scheduler
        self.learner_groups = learner_groups
        self.n_jobs = n_jobs
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.resume = resume
        self.progress = progress

    # -- parameters and the base learner -------------------------------------------------
    def _check_params(self) -> None:
        super()._check_params()
        if self.learner_groups is not None:
            Integral(1, None).check("learner_groups", self.learner_groups)

    def _check_base(self, base: Any) -> None:
        require_kernel("KernelOBPM", "OBPM", self.base, base)
        base._check_params()
        if base.budget == "projectron":
            raise ValueError(f"base={shown(self.base, base)}: budget='projectron' {NO_PROJECTRON}")

    @property
    def _taus(self) -> tuple[float, ...]:
        return (float(self.tau),)

    def _prepare(self, X: Any, n_rows: int) -> None:
        b = self._base_est
        b._set_gamma(b._measure_gamma(X), race=False)  # the base measures gamma="scale" on the data
        self.gamma_, self._kernel_obj = b.gamma_, b._kernel_obj
        self.gammas_ = b.gammas_
        self.gamma_online_errors_, self.gamma_race_rows_ = b.gamma_online_errors_, b.gamma_race_rows_
        self._gamma_pending = len(b.gammas_) > 1  # gamma="auto": chosen on the first chunk

    def _member_base(self, base: Any) -> Any:
        """The members' removal: ``"auto"`` is ``"margin"`` here (members share a pool of training rows, so
        they cannot merge), resolved once so that every rule that reads the removal (KernelMIRA's
        ``beta="auto"``, the gamma race) sees the one the members run."""
        return base.set_params(removal="margin") if base.removal == "auto" else base

    def _choose_gamma(self, X: Any, yi: np.ndarray, order: np.ndarray | None) -> None:
        """gamma="auto": the base's race, alone, over the first chunk's rows in the order the members see them;
        every member then takes the winner."""
        order = np.arange(X.shape[0], dtype=np.int64) if order is None else order
        b = self._base_est
        r = race_gamma(b, X, yi, self.classes_, seed=self._seed, order=order, anchor=b.gamma_)
        self.gamma_, self._kernel_obj = r.gamma_, r._kernel_obj
        self.gammas_, self.gamma_online_errors_, self.gamma_race_rows_ = (r.gammas_, r.gamma_online_errors_,
                                                                         r.gamma_race_rows_)
        self._gamma_pending = False

    def _before_store_job(self, ds: Any) -> None:
        """gamma="auto" on a store fit: the race over the first chunk of the first epoch, in the order
        the members see it (as the streaming fit races), before the groups' job takes the width."""
        if self._gamma_pending:
            chunks = epoch_chunks(ds, seed=self._seed, epoch=0, shuffle=bool(self.shuffle), classes=self.classes_,
                                  dtype="float64")
            try:
                first = next(chunks)
            finally:
                chunks.close()
            self._choose_gamma(first.X, first.y, first.order)

    # -- the shared-pool engine ----------------------------------------------------------------
    def _new_state(self, n_features: int, n_outputs: int) -> Any:
        self.n_removed_ = 0
        native = self._base_est._rule(len(self.classes_))[2]
        return init_kernel_ensemble(n_features, self.n_estimators, n_outputs, native=native,
                                    keep_retired=self._averaging)

    def _snapshot(self) -> tuple[Any, ...]:
        return (*super()._snapshot(), self.n_removed_)

    def _restore(self, snap: tuple[Any, ...]) -> None:
        super()._restore(snap[:-1])
        self.n_removed_ = snap[-1]

    def _learn_members(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray,
                       epoch: int) -> tuple[np.ndarray, np.ndarray]:
        b = self._base_est
        if self._gamma_pending:
            self._choose_gamma(X, yi, order)
        log = learn_kernel_ensemble_chunk(self._rule_obj, self._kernel_obj, self._state, X, yi, tids,
                                          seed=self._seed, tau=float(self.tau), epoch=epoch, order=order,
                                          beta=b._beta(), budget=b.budget, removal=b.removal)
        self.n_removed_ += int(log.removed.sum())
        return log.margin[:, None, :], log.updates[:, None]  # one tau group

    def _store_job(self, common: dict[str, Any], n_groups: int) -> KernelObpmJob:
        """The learner-parallel job of a store fit: groups of members, each on its own pool."""
        b = self._base_est
        return KernelObpmJob(**common, rule=self._rule_obj, tau=float(self.tau), fit_intercept=False, acc_mode=0,
                             dtype="float64", n_learners=self.n_estimators,
                             groups=tuple(learner_groups(self.n_estimators, n_groups)), kernel=self._kernel_obj,
                             beta=float(b._beta()), budget=b.budget, removal=b.removal, native=self._state.native,
                             keep_retired=self._averaging)

    def _finish(self) -> None:
        """The kernel Bayes point: one expansion, the mean of the members' coefficients per pattern."""
        self.n_removed_ = self._state.n_removed
        self._choose_tau()
        st = self._state
        S, coef, lab = merge_repeated_patterns(*st.bayes_point(average=self._averaging))
        self.support_vectors_ = S
        self.dual_coef_ = np.ascontiguousarray(coef.T)
        self.n_support_ = np.bincount(lab, minlength=len(self.classes_)).astype(np.int64)
        self.member_rounds_ = st.member_rounds
        self.member_n_support_ = st.mmeta[:, 1].copy()
        self.pool_size_ = st.pool_size
        self.weights_ = np.full((st.n_outputs, st.n_members), 1.0 / st.n_members)
        self.summary_ = self._conv


class KernelPermutationBPM(KernelExpansion, PermutationBayesPoint):
    """The kernel Bayes point by permutations (Harrington et al. 2003, section 3).

    N copies of the kernel ``base`` learner are trained, copy ``j`` on its own
    seeded permutation of the training set in every epoch (the permutations of
    :class:`PermutationBPM` with the same seed), and averaged: the Bayes point is
    one kernel expansion, the members' expansions with their coefficients over N,
    in which a pattern several members keep (the same training row) appears once.
    Each member is an ordinary kernel estimator, so every conversion with a
    kernel form works per member (``"last"``, ``"average"``).  Unlike
    :class:`KernelOBPM`, the members keep their own caches, so any budget runs
    (``"projectron"`` included).

    Parameters
    ----------
    n_estimators : int, default=10
        N, the number of permutations (members).
    base : str or distlearn kernel estimator, default="kernel-perceptron"
        The members' learner: ``"kernel-perceptron"``, ``"kernel-mira"``,
        ``"kernel-pa"``, or an unfitted ``KernelPerceptron``, ``KernelMIRA``,
        ``KernelPA`` (its ``epochs``, ``shuffle``, ``conversion`` and
        ``random_state`` are this estimator's).  A linear rule is
        :class:`PermutationBPM`'s base.
    base_params : dict, default=None
        Parameters of the base estimator (``{"gamma": 0.5, "budget": "variable"}``).  A base of
        ``gamma="auto"`` races its widths once before the members train, as a fit of the base seeded
        by ``random_state`` runs the race (arrays: its first rows in that fit's order; a store: its
        first blocks), and every member takes the winner, ``gamma_``.
    epochs : int, default=3
        Passes of each member over its permutation (a fresh permutation per epoch).
    conversion : str or conversion object, default="average"
        Each member's online-to-batch conversion; one with a kernel form.
    permutation : {"auto", "exact", "blocks"}, default="auto"
        As in :class:`PermutationBPM`: exact for arrays and for stores under
        2 GiB, a permutation of a store's blocks and of the rows inside each
        block otherwise.  ``permutation_`` says which was used.
    n_jobs : int or None, default=1
        Threads training members at once; -1 every core, -2 all but one, None 1.
    random_state : int, RandomState, Generator or None, default=None
        Member ``j``'s permutations are keyed by ``(seed, j, epoch)``.
    scheduler : None, str or distributed.Client, default=None
        For a store: where the members train (one task per member), as in
        :class:`PermutationBPM`.  The model is the same bits wherever they train, with ``refit``
        too (in this process, on one worker or on many).
    refit : float or None, default=None
        None: the Bayes point is the members' average.  A number ``alpha >= 0``: the members
        choose the patterns and one more pass over the training rows fits their coefficients,
        kernel ridge regression restricted to the span of the Bayes point's patterns (+-1
        targets per class, the ridge ``alpha`` per training row on the RKHS norm:
        :func:`~distlearn.conversions.kernel.ridge_refit`).  The pass is data-parallel: with a
        store, its blocks are cut into at most 64 consecutive ranges (fixed by the store, not by
        the workers), each range is a task of ``scheduler`` that sums its rows' normal equations,
        and the parts are added in a reduction tree of fan-in 2
        (:func:`~distlearn.distributed.runs.store_sums`), so the coefficients are the same bits
        on any number of workers.  One part's sums are ``|S|^2 + |S| K`` floats (``|S|``
        patterns, ``K`` outputs; float64: 126 MB at 4,000 patterns): a worker holds two (a task)
        or three (a merge) beside one block of rows and its kernel rows (~4 Mi floats), and its
        finished parts until their merge runs, never the data; the driver receives one and solves it (``O(|S|^3)``; in this process it folds the
        parts as they finish, about ``log2(parts) + 2 n_jobs`` at once).  BLAS runs on one thread
        in the sums.  Measured on Fashion-MNIST (``benchmarks/bench_kernel_scale.py``): ``1e-6``.

    Attributes
    ----------
    support_vectors_ : ndarray of shape (n_patterns, n_features)
    dual_coef_ : ndarray of shape (n_outputs, n_patterns)
        The Bayes point: ``decision_function(x) = dual_coef_ @ k(support_vectors_, x)``.
    n_support_ : ndarray of shape (n_classes,)
    gamma_ : float
        The kernel width used (the members', measured on the data for ``gamma="scale"``,
        raced once for ``"auto"``).
    gammas_, gamma_online_errors_, gamma_race_rows_
        The ``gamma="auto"`` race, as on the kernel learners (else the first member's).
    estimators_ : list of fitted base estimators
    weights_ : ndarray of shape (n_outputs, n_estimators)
        ``1 / N``.
    permutation_ : {"exact", "blocks"}
    refit_ : dict
        With ``refit``: ``alpha``, ``n`` (the training rows summed) and ``patterns``.
    classes_, n_features_in_

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from distlearn import KernelPermutationBPM, KernelPerceptron
    >>> X, y = make_moons(n_samples=300, noise=0.1, random_state=0)
    >>> clf = KernelPermutationBPM(n_estimators=5, base=KernelPerceptron(gamma=2.0, budget=50),
    ...                            random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    _common = {"random_state": RandomState()}
    _params = {**PermutationBayesPoint._params, "refit": Real(0, math.inf, "left", none_ok=True)}
    _FITTED = PermutationBayesPoint._FITTED + ("support_vectors_", "dual_coef_", "n_support_", "gamma_",
                                               "_kernel_obj", "gammas_", "gamma_online_errors_", "gamma_race_rows_",
                                               "_member_gamma", "refit_")

    def __init__(self, *, n_estimators: int = 10, base: Any = "kernel-perceptron",
                 base_params: dict[str, Any] | None = None, epochs: int = 3, conversion: Any = "average",
                 permutation: str = "auto", n_jobs: int = 1, random_state: Any = None, scheduler: Any = None,
                 refit: float | None = None) -> None:
        self.n_estimators = n_estimators
        self.base = base
        self.base_params = base_params
        self.epochs = epochs
        self.conversion = conversion
        self.permutation = permutation
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.scheduler = scheduler
        self.refit = refit

    def _check_base(self, base: Any) -> None:
        require_kernel("KernelPermutationBPM", "PermutationBPM", self.base, base)
        base.set_params(conversion=self.conversion)._check_params()  # a conversion with a kernel form

    def _fit(self, X: Any, y: Any) -> KernelPermutationBPM:
        """gamma="auto": the base's race once, as a fit of the base seeded by ``random_state`` runs it (arrays: its
        first rows in that fit's order; a store: its first blocks), then every member takes the winner."""
        self._member_gamma = None
        base = resolve_base(self.base, self.base_params)
        if base.gamma == "auto" and base.kernel != "linear":
            if is_store(X):
                r = race_gamma(base, X, None, self._open_store(X, y).classes, seed=self.random_state)
            else:
                Xv, yv = self._validate_xy(X, y, reset=True)
                classes = self._classes(yv)
                r = race_gamma(base, Xv, encode_labels(classes, yv), classes, seed=self.random_state)
            self._member_gamma = r.gamma_
            self.gammas_, self.gamma_online_errors_, self.gamma_race_rows_ = (r.gammas_, r.gamma_online_errors_,
                                                                             r.gamma_race_rows_)
        return super()._fit(X, y)

    def _member_params(self) -> dict[str, Any]:
        return {} if self._member_gamma is None else {"gamma": self._member_gamma}

    def _combine(self, X: Any, yi: np.ndarray | None) -> None:
        """The kernel Bayes point: the members' expansions with their coefficients over N, as one
        expansion in which a pattern several members keep (the same training row) appears once."""
        N = len(self.estimators_)
        first = self.estimators_[0]
        self.gamma_, self._kernel_obj = first.gamma_, first._kernel_obj
        if self._member_gamma is None:
            self.gammas_, self.gamma_online_errors_, self.gamma_race_rows_ = (first.gammas_, first.gamma_online_errors_,
                                                                             first.gamma_race_rows_)
        parts = [e.support_vectors_ for e in self.estimators_]
        A = np.concatenate([e.dual_coef_ for e in self.estimators_], axis=1).T / N
        lab = np.concatenate([e._support_lab for e in self.estimators_])
        if any(sp.issparse(p) for p in parts):  # members fitted on sparse rows: CSR patterns, in first-seen order
            uniq, first_at, inv = _unique_csr_rows(sp.vstack([sp.csr_matrix(p) for p in parts], format="csr"))
        else:
            uniq, first_at, inv = np.unique(np.concatenate(parts), axis=0, return_index=True, return_inverse=True)
        coef = np.zeros((uniq.shape[0], A.shape[1]))
        np.add.at(coef, inv.ravel(), A)
        self.support_vectors_ = uniq
        self.dual_coef_ = np.ascontiguousarray(coef.T)
        self.n_support_ = np.bincount(lab[first_at], minlength=len(self.classes_)).astype(np.int64)
        self.weights_ = np.full((self.dual_coef_.shape[0], N), 1.0 / N)
        self.__dict__.pop("refit_", None)
        if self.refit is not None:
            self._refit(X, yi)

    def _refit(self, X: Any, yi: np.ndarray | None) -> None:
        """``refit``: the coefficients of the Bayes point's patterns by kernel ridge over the training rows, the
        normal equations summed block by block (a store: fixed ranges of blocks as tasks of ``scheduler``,
        added in a tree)."""
        S, k = self.support_vectors_, self.dual_coef_.shape[0]
        if is_store(X):
            ds = open_dataset(X)
            fn = functools.partial(_refit_sums, self._kernel_obj, S, self.classes_, k)
            G, R = store_sums(fn, str(absolute(ds.path, resolve=True)), scheduler=self.scheduler,
                              n_jobs=effective_n_jobs(self.n_jobs))
            n = ds.n_samples
        else:
            G, R = ridge_sums(self._kernel_obj, S, X, yi, k)
            n = X.shape[0]
        alpha = float(self.refit)
        self.dual_coef_ = np.ascontiguousarray(ridge_refit(self._kernel_obj, S, G, R, n, alpha).T)
        self.refit_ = {"alpha": alpha, "n": int(n), "patterns": int(S.shape[0])}
