"""What the two permutation Bayes points share: :class:`PermutationBayesPoint`.

:class:`~distlearn.PermutationBPM` (linear members, their weight vectors
averaged) and :class:`~distlearn.KernelPermutationBPM` (kernel members, their
expansions merged into one) are the same algorithm -- the batch Bayes point of
Harrington et al. (2003), section 3, after Herbrich, Graepel & Campbell (2001):
N copies of a base learner, copy ``j`` trained on its own seeded permutation of
the training set in every epoch, averaged.  This base holds what does not depend
on the kind of member: member ``j`` and its seed, the permutation (exact or
blockwise), and the members' run-parallel fit
(:func:`distlearn.distributed.runs.fit_members`).  A subclass says which bases it
runs (``_check_base``), what else a member is given (``_member_params``) and how
the fitted members become its hypothesis (``_combine``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._urls import absolute
from .. import rng
from .._validation import Integral, Options, Scheduler
from ..distributed.runs import fit_members
from ..stream import is_store
from ._base_learners import resolve_base
from .base import ConversionParam, LinearClassifier, OnlineLinearClassifier

__all__ = ["EXACT_PERMUTATION_BYTES", "PermutationBayesPoint"]

#: Data below this many bytes (values + indices) is loaded whole so that the
#: permutations are exact global ones; above it a store is permuted blockwise.
EXACT_PERMUTATION_BYTES = 2 << 30


class PermutationBayesPoint(LinearClassifier):
    """Base of :class:`~distlearn.PermutationBPM` and :class:`~distlearn.KernelPermutationBPM`: N members
    of ``base``, member ``j`` seeded by ``(random_state, j)`` and fitted on its own permutations.

    Hooks of a subclass: ``_check_base(base)``, ``_member_params()`` (parameters a member takes beyond
    ``epochs``, ``shuffle``, ``random_state`` and ``conversion``) and ``_combine(X, yi)``, which turns
    ``estimators_`` into the fitted hypothesis (``X`` as fitted: arrays, or the store; ``yi`` the encoded
    labels of arrays, None for a store).
    """

    _params = {"n_estimators": Integral(1, None), "epochs": Integral(1, None), "conversion": ConversionParam(),
               "permutation": Options("auto", "exact", "blocks"), "n_jobs": Integral(1, None),
               "scheduler": Scheduler()}
    _FITTED = LinearClassifier._FITTED + ("estimators_", "permutation_", "weights_")

    # -- hooks -------------------------------------------------------------------------
    def _check_base(self, base: OnlineLinearClassifier) -> None:
        raise NotImplementedError

    def _member_params(self) -> dict[str, Any]:
        return {}

    def _combine(self, X: Any, yi: np.ndarray | None) -> None:
        raise NotImplementedError

    # -- parameters and members ------------------------------------------------------------
    def _check_params(self) -> None:
        Scheduler().check("scheduler", self.scheduler)
        super()._check_params()
        name = self.conversion if isinstance(self.conversion, str) else type(self.conversion).__name__.lower()
        if name in ("vote", "sample"):
            raise ValueError(f"conversion={self.conversion!r} is not a linear hypothesis, so the members cannot be "
                             "averaged into a Bayes point; use a linear conversion ('last', 'average', 'tree', ...)")
        self._check_base(resolve_base(self.base, self.base_params))

    def _member(self, j: int) -> OnlineLinearClassifier:
        """Member ``j``: the base learner, unfitted, its shuffles keyed by ``(seed, j)``."""
        seed = int(rng.hash64(self._seed, rng.stream_id("permutation-bpm"), j)) & 0x7FFFFFFFFFFFFFFF
        return resolve_base(self.base, self.base_params).set_params(
            epochs=self.epochs, shuffle=True, random_state=seed, conversion=self.conversion, **self._member_params())

    # -- fitting ---------------------------------------------------------------------------------
    def _fit(self, X: Any, y: Any) -> PermutationBayesPoint:
        self._seed = rng.normalize_seed(self.random_state)
        mode = self.permutation
        yi = None
        if is_store(X):
            ds = self._open_store(X, y)
            size = (ds.nnz * (ds.dtype.itemsize + 8) if ds.is_sparse else ds.n_samples * ds.n_features * ds.dtype.itemsize)
            mode = "exact" if mode == "exact" or (mode == "auto" and size <= EXACT_PERMUTATION_BYTES) else "blocks"
            self.classes_ = ds.classes
            self.n_features_in_ = ds.n_features
            train: Any = absolute(ds.path, resolve=True)
        else:
            mode = "exact"
            X, y = self._validate_xy(X, y, reset=True)
            self.classes_ = self._classes(y)
            yi = self._encode(y)
            train = (X, y)
        if len(self.classes_) < 2:
            k = len(self.classes_)
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes; got {k} class"
                             f"{'es' if k != 1 else ''}: {self.classes_.tolist()}")
        self.permutation_ = mode
        members = [self._member(j) for j in range(self.n_estimators)]
        # One run-parallel task per member; a store is opened by path where the task runs
        # and, for exact permutations, loaded whole once per process.
        self.estimators_ = fit_members(members, train, load=mode == "exact", scheduler=self.scheduler,
                                       n_jobs=self.n_jobs)
        self.summary_ = self.estimators_
        self._combine(X, yi)
        return self
