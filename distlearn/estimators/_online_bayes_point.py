"""What the two online Bayes point machines share: :class:`OnlineBayesPoint`.

:class:`~distlearn.OBPM` (linear members in the fused ensemble kernel) and
:class:`~distlearn.KernelOBPM` (kernel members on one shared pool) are the same
algorithm -- Algorithm 2 of Harrington et al. (2003): N members of a base
learner, member ``j`` shown example ``t`` when its Bernoulli(tau) draw is 1, the
Bayes point their mean -- over two engines.  This base holds what does not
depend on the engine: the base learner (resolved by
:func:`~distlearn.estimators._base_learners.resolve_base`, checked by the
subclass), the conversion ("last" or "average", run inside the engine), and the
progressive mistakes of the ensemble per tau group, from which the kept tau
is chosen.  A subclass says which bases it runs (``_check_base``), builds its
engine's state (``_new_state``), runs a chunk (``_learn_members``) and turns
the state into its fitted hypothesis (``_finish``).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import numpy as np

from .._urls import absolute
from .._validation import effective_n_jobs
from ..conversions import Average, Last
from ..distributed import learner_parallel
from ..distributed.executor import executor_for
from ..stream import store_token
from ._base_learners import resolve_base
from .base import OnlineLinearClassifier

__all__ = ["ConversionChoice", "OnlineBayesPoint", "conversion_name"]


def conversion_name(value: Any) -> str:
    """``"last"`` or ``"average"`` for a Bayes point ensemble's ``conversion`` (a name or the object)."""
    if isinstance(value, Last) or (isinstance(value, str) and value == "last"):
        return "last"
    if isinstance(value, Average) or (isinstance(value, str) and value == "average"):
        return "average"
    raise ValueError(
        f"conversion must be 'last' or 'average' for a Bayes point ensemble, got {value!r}: both are linear in "
        "the members, so they run inside the fused kernel; the data-driven conversions choose among one "
        "learner's own hypotheses (use them on a single learner, or on PermutationBPM's members)")


class ConversionChoice:
    """``conversion``: ``"last"`` or ``"average"`` (or their objects)."""

    def check(self, name: str, value: Any) -> None:
        conversion_name(value)


def _mistakes_of(margin: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Progressive mistakes from summed member margins, (n, T, K) -> (n, T): per tau group."""
    if margin.shape[-1] == 1:
        return (margin[..., 0] >= 0.0) != (y == 1)[:, None]
    return np.argmax(margin, axis=-1) != y[:, None]


class OnlineBayesPoint(OnlineLinearClassifier):
    """Base of :class:`~distlearn.OBPM` and :class:`~distlearn.KernelOBPM`: N members of ``base``,
    Bernoulli(tau) draws, progressive mistakes per tau group, conversion "last" or "average".

    Hooks of a subclass: ``_taus`` (the tau groups it runs), ``_check_base(base)``,
    ``_new_state(n_features, n_outputs)``, ``_learn_members(X, yi, order, tids, epoch)`` -> summed
    member margins ``(n, T, K)`` and updates ``(n, T)`` of the rows in the order run, and ``_finish``.
    """

    _no_weights_why = ("its members learn from Bernoulli-drawn subsets of the stream in one fused kernel, which "
                       "has no per-row step scale")

    _FITTED = OnlineLinearClassifier._FITTED + ("_base_est", "member_rounds_", "weights_", "online_mistakes_",
                                                "_epoch_errors", "tau_", "taus_", "tau_online_errors_",
                                                "_tau_epoch", "_tau_online", "_tau_updates", "_tau_mistakes")

    # -- hooks -------------------------------------------------------------------------
    @property
    def _taus(self) -> tuple[float, ...]:
        raise NotImplementedError

    def _check_base(self, base: OnlineLinearClassifier) -> None:
        raise NotImplementedError

    def _new_state(self, n_features: int, n_outputs: int) -> Any:
        raise NotImplementedError

    def _learn_members(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray,
                       epoch: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # -- parameters and the base learner -------------------------------------------------
    def _check_params(self) -> None:
        super()._check_params()
        self._check_base(resolve_base(self.base, self.base_params))

    @property
    def _averaging(self) -> bool:
        return conversion_name(self.conversion) == "average"

    def _rule(self, n_classes: int) -> tuple[str, dict[str, Any], bool]:
        return self._base_est._rule(n_classes)

    def _prepare(self, X: Any, n_rows: int) -> None:
        # A member sees about tau * n_rows examples (the margin perceptron's horizon).
        self._base_est._prepare(X, max(1, int(round(max(self._taus) * n_rows))))

    # -- state ----------------------------------------------------------------------------
    def _member_base(self, base: Any) -> Any:
        """Hook: the base learner as the members run it (kernel OBPM resolves its removal here)."""
        return base

    def _start(self, classes: np.ndarray, n_features: int) -> None:
        self._base_est = self._member_base(resolve_base(self.base, self.base_params))
        self._base_est.fit_intercept = self.fit_intercept
        super()._start(classes, n_features)  # classes_, _rule_obj, counters, _seed
        self._state = self._new_state(n_features, 1 if len(self.classes_) == 2 else len(self.classes_))
        T = len(self._taus)
        self.taus_ = np.asarray(self._taus, np.float64)
        # per tau group: mistakes per epoch, first-epoch (online) mistakes and updates, recorded mistakes
        self._tau_epoch = np.zeros((self.epochs, T), np.int64)
        self._tau_online = np.zeros(T, np.int64)
        self._tau_updates = np.zeros(T, np.int64)
        self._tau_mistakes = np.zeros((0, T), np.uint8)

    def _make_tracker(self, X: Any) -> None:
        self._conv = Average() if self._averaging else Last()
        self._tracker = None  # the conversion runs inside the engine
        self._pass = 1

    def _snapshot(self) -> tuple[Any, ...]:
        return (copy.deepcopy(self._state), self.n_iter_, self.t_, self._tau_epoch.copy(), self._tau_online.copy(),
                self._tau_updates.copy(), self._tau_mistakes)

    def _restore(self, snap: tuple[Any, ...]) -> None:
        (self._state, self.n_iter_, self.t_, self._tau_epoch, self._tau_online, self._tau_updates,
         self._tau_mistakes) = snap

    # -- running ------------------------------------------------------------------------------
    def _learn(self, X: Any, yi: np.ndarray, order: np.ndarray | None, tids: np.ndarray, epoch: int,
               count: bool) -> None:
        margin, upd = self._learn_members(X, yi, order, tids, epoch)
        yo = yi if order is None else yi[order]
        mistakes = _mistakes_of(margin, yo)  # (n, T): per tau group
        if epoch < len(self._tau_epoch):
            self._tau_epoch[epoch] += mistakes.sum(axis=0)
        if not (count and epoch == 0):  # the online counters are the first epoch's (the paper's)
            return
        self._tau_online += mistakes.sum(axis=0)
        self._tau_updates += upd.sum(axis=0)
        self.t_ += len(yo)
        if self.record_online:
            self._tau_mistakes = np.concatenate([self._tau_mistakes, mistakes.astype(np.uint8)])

    def _choose_tau(self) -> int:
        """Keep the tau group of fewest progressive mistakes; sets the counters from its own."""
        errs = self._tau_epoch.sum(axis=0)  # partial_fit's calls all count as epoch 0
        g = int(np.argmin(errs))
        self.tau_online_errors_ = errs.astype(np.int64)
        self.tau_ = float(self._taus[g])
        self.online_errors_ = int(self._tau_online[g])
        self.n_updates_ = int(self._tau_updates[g])
        self._epoch_errors = self._tau_epoch[:, g].copy()
        self.online_mistakes_ = self._tau_mistakes[:, g].copy()
        return g

    def _after_fit(self, X: Any, yi: np.ndarray | None) -> None:
        self.epoch_online_errors_ = self._epoch_errors.copy()

    # -- fit on a store: the learner-parallel job ----------------------------------------
    def _store_job(self, common: dict[str, Any], n_groups: int) -> learner_parallel.ObpmJob:
        """The subclass's job (:class:`~distlearn.distributed.learner_parallel.ObpmJob` or its kernel
        form) from the fields every job shares and the number of learner groups."""
        raise NotImplementedError

    def _before_store_job(self, ds: Any) -> None:
        """What the subclass decides from the data before the job is built (the kernel width's race)."""

    def _fit_store(self, X: Any, y: Any, partial: bool = False, classes: Any = None) -> None:
        """``fit`` on a store: the learner-parallel job (:mod:`distlearn.distributed.learner_parallel`), in
        this process or on ``scheduler``; ``partial_fit`` streams through this process."""
        if partial:
            return super()._fit_store(X, y, partial=partial, classes=classes)
        ds = self._open_store(X, y)
        if self.resume and self.checkpoint is None:
            raise ValueError("resume=True needs checkpoint= (the directory to resume from)")
        self._begin(ds.classes, ds.n_features, ds, ds.n_samples * self.epochs)
        self.n_features_in_ = ds.n_features
        with executor_for(self.scheduler, n_jobs=effective_n_jobs(self.n_jobs)) as ex:
            G = self.learner_groups if self.learner_groups is not None else (
                effective_n_jobs(self.n_jobs) if ex.kind == "in-process" else ex.n_workers)
            common = dict(
                path=absolute(ds.path, resolve=True), token=store_token(ds), n_samples=ds.n_samples,
                n_features=ds.n_features, n_blocks=ds.n_blocks, block_bounds=tuple(int(v) for v in ds.block_bounds),
                classes=np.asarray(self.classes_), n_outputs=self._state.n_outputs, seed=int(self._seed),
                epochs=self.epochs, shuffle=bool(self.shuffle), segment_blocks=int(self.checkpoint_every),
                checkpoint=None if self.checkpoint is None else absolute(self.checkpoint, resolve=True))
            self._before_store_job(ds)
            job = self._store_job(common, G)
            where = ex.describe()
            if self.progress:
                print(f"distlearn: {type(self).__name__} on {where}", file=sys.stderr)
            out = learner_parallel.run_obpm(job, ex, resume=self.resume, progress=self.progress,
                                            record=self.record_online)
        self._state = out["state"]
        T = len(self._taus)  # per tau group (a single tau: one group)
        self._tau_epoch = np.asarray(out["epoch_errors"], np.int64).reshape(self.epochs, T)
        self._tau_online = self._tau_epoch[0].copy()
        self._tau_updates = np.asarray(out["epoch_updates"][0], np.int64).reshape(T)
        self.t_ = int(out["epoch_rows"][0])
        self.n_iter_ = self.epochs
        if self.record_online:
            self._tau_mistakes = np.asarray(out["mistakes"], np.uint8).reshape(-1, T)
        self.job_ = {"group_blocks": int(out["group_blocks"]), "groups": [list(g) for g in job.groups],
                     "runner": where, "resumed_from": out["resumed_from"],
                     "seconds": float(out["seconds"])}
        self._finish()
