"""Online-to-batch conversions (Dekel & Singer 2005; Dekel 2008).

Pass one of these to an estimator's ``conversion=`` (or its name as a string,
with the papers' defaults)::

    >>> import numpy as np, distlearn
    >>> from distlearn.conversions import Cutoff
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 5)); y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    >>> clf = distlearn.Perceptron(conversion=Cutoff(delta=0.05), random_state=0).fit(X, y)
    >>> clf.summary_.k_ >= 0
    True

====================  =======  ========================================================
name                  passes   batch hypothesis
====================  =======  ========================================================
``"last"``            1        h_m
``"average"``         1        (1/(m+1)) sum_{i=0}^{m} h_i (kernels' running sum, O(K)/round)
``"tree"``            1        Dekel & Singer's eq. 3 over leaf blocks, O(log m) live nodes
``"suffix"``          2        average of h_a..h_{m-1}, a minimising beta (eq. 2)
``"cutoff"``          2 (1)    Dekel's cutoff averaging, k by the Theorem 2 bound (1 pass: ``mode="groups"``)
``"survivor"``        2        the hypothesis used for the most consecutive rounds
``"vote"``            1 (2)    majority vote of h_0..h_m (of the beta-suffix with ``Vote(suffix=True)``)
``"sample"``          1 (2)    a stochastic hypothesis: each prediction draws one h_i
``"interval"``        2        average of h_a..h_b, at most ``max_updates`` updates, minimising beta
====================  =======  ========================================================

Two-pass conversions replay the learner (the same seed gives the same hypotheses),
so they need ``fit`` (the data is read twice), not ``partial_fit``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import did_you_mean
from .core import (
    AverageSummary,
    AverageTracker,
    CutoffGroups,
    CutoffSummary,
    CutoffTracker,
    LastTracker,
    SuffixTracker,
    SurvivorTracker,
    TreeNode,
    TreeSummary,
    TreeTracker,
    beta,
    cutoff_bounds,
    eq3,
    hypothesis,
)
from .ensemble import EnsembleSummary, EnsembleTracker, SampledHypothesis, VotedHypothesis, auto_cap
from .interval import IntervalTracker, best_interval

__all__ = [
    "NAMES", "Last", "Average", "Tree", "Suffix", "Cutoff", "Survivor", "Vote", "Sample", "Interval",
    "make_conversion", "AverageSummary", "EnsembleSummary", "VotedHypothesis", "SampledHypothesis", "best_interval", "TreeSummary", "TreeNode", "CutoffGroups", "CutoffSummary", "beta", "eq3", "cutoff_bounds", "hypothesis",
]


def _check_loss(loss: str) -> None:
    if loss not in ("zero_one", "hinge"):
        raise ValueError(f"loss must be 'zero_one' or 'hinge', got {loss!r}")


def _check_pos(name: str, v: Any, *, zero_ok: bool = False) -> None:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or math.isnan(v) or v < 0 or (v == 0 and not zero_ok):
        raise ValueError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} number, got {v!r}")


@dataclass(frozen=True)
class Last:
    """The last hypothesis h_m."""

    passes = 1

    def tracker(self, ctx: dict[str, Any]) -> LastTracker:
        return LastTracker()


@dataclass(frozen=True)
class Average:
    """``(1/(m+1)) sum_{i=0}^{m} h_i``, h_0 included, as in both papers."""

    passes = 1

    def tracker(self, ctx: dict[str, Any]) -> AverageTracker:
        return AverageTracker()


@dataclass(frozen=True)
class Tree:
    """Tree-based conversion (Dekel & Singer eq. 3).

    ``leaf_size``: consecutive hypotheses per leaf; 1 is the paper's tree over
    single hypotheses (a leaf costs O(n_features x n_outputs), so this is for
    small models); ``"auto"`` takes 1 when the model has at most 4096 weights,
    else ``ceil(16 (d + 1) / nnz per row)`` so leaves cost a few percent of the
    epoch.  ``loss``: the loss in beta, ``"zero_one"`` or ``"hinge"``.
    """

    C: float = 3.0
    leaf_size: int | str = "auto"
    loss: str = "zero_one"
    passes = 1

    def __post_init__(self) -> None:
        _check_pos("C", self.C, zero_ok=True)
        _check_loss(self.loss)
        if not (isinstance(self.leaf_size, str) and self.leaf_size == "auto") and (
                isinstance(self.leaf_size, (bool, np.bool_)) or not isinstance(self.leaf_size, numbers.Integral)
                or self.leaf_size < 1):
            raise ValueError(f"leaf_size must be a positive int or 'auto', got {self.leaf_size!r}")

    def tracker(self, ctx: dict[str, Any]) -> TreeTracker:
        leaf = self.leaf_size
        if leaf == "auto":
            d1, k = ctx["n_features"] + 1, ctx["n_outputs"]
            leaf = 1 if d1 * k <= 4096 else max(1, math.ceil(16 * d1 / max(1.0, ctx["nnz_per_row"])))
        return TreeTracker(self.C, int(leaf), self.loss)


@dataclass(frozen=True)
class Suffix:
    """Suffix averaging (Dekel & Singer sec. 3), by replay: O(m) loss scalars, O(d) weights."""

    C: float = 3.0
    loss: str = "zero_one"
    passes = 2

    def __post_init__(self) -> None:
        _check_pos("C", self.C, zero_ok=True)
        _check_loss(self.loss)

    def tracker(self, ctx: dict[str, Any]) -> SuffixTracker:
        return SuffixTracker(self.C, self.loss)


@dataclass(frozen=True)
class Cutoff:
    """Cutoff averaging (Dekel 2008) for conservative learners.

    ``C`` bounds the loss: None takes 1 for the 0-1 loss and ``R + 1`` for the
    hinge loss (R = max ||x||, bias included: the margin perceptron keeps
    ||w|| <= 1).  ``delta``: confidence; the bound uses delta/m for the union
    over k.

    ``mode``: ``"replay"`` (two passes, O(n_features) memory plus 8 bytes per update of
    the first pass; the second runs only the updating rounds) or ``"groups"``
    (one pass, so ``partial_fit`` works, and ``summary_.hypothesis(state, k)``
    gives the cutoff-k hypothesis at any time; keeps one weight vector per
    survival time, at most sqrt(2m) of them; with one output column and a
    binary rule an update costs O(nnz x groups) in the kernel, otherwise a
    copy of the weights per update).  ``stop_below``: stop training
    at the first check, every ``check_every`` rounds, where the Theorem 2 bound
    of the best k is below this value (``summary_.stopped_``,
    ``summary_.stop_round_``); in groups mode later ``partial_fit`` calls then
    run no rounds.
    """

    delta: float = 0.05
    C: float | None = None
    loss: str = "zero_one"
    mode: str = "replay"
    stop_below: float | None = None
    check_every: int = 1000

    def __post_init__(self) -> None:
        if isinstance(self.delta, (bool, np.bool_)) or not (isinstance(self.delta, numbers.Real) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if self.C is not None:
            _check_pos("C", self.C)
        _check_loss(self.loss)
        if self.mode not in ("replay", "groups"):
            raise ValueError(f"mode must be 'replay' or 'groups', got {self.mode!r}")
        if self.stop_below is not None:
            _check_pos("stop_below", self.stop_below)
        if isinstance(self.check_every, (bool, np.bool_)) or not isinstance(self.check_every, numbers.Integral) \
                or self.check_every < 1:
            raise ValueError(f"check_every must be a positive int, got {self.check_every!r}")

    @property
    def passes(self) -> int:
        return 2 if self.mode == "replay" else 1

    def tracker(self, ctx: dict[str, Any]) -> CutoffTracker:
        C = self.C
        if C is None:
            C = 1.0 if self.loss == "zero_one" else ctx["radius"]() + 1.0
        return CutoffTracker(self.delta, float(C), self.loss, self.mode,
                             None if self.stop_below is None else float(self.stop_below), int(self.check_every))


@dataclass(frozen=True)
class Survivor:
    """Longest survivor (pocket): the hypothesis used for the most consecutive rounds."""

    passes = 2

    def tracker(self, ctx: dict[str, Any]) -> SurvivorTracker:
        return SurvivorTracker()


def _check_cap(v: Any) -> None:
    if v is None or (isinstance(v, str) and v == "auto"):
        return
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < 1:
        raise ValueError(f"max_hypotheses must be a positive int, 'auto' or None, got {v!r}")


def _cap(v: Any, ctx: dict[str, Any]) -> int | None:
    return auto_cap(ctx["n_features"], ctx["n_outputs"]) if isinstance(v, str) else (None if v is None else int(v))


@dataclass(frozen=True)
class Vote:
    """Majority vote of the online hypotheses (Dekel & Singer sec. 2; Freund &
    Schapire's voted perceptron), weighted by how many indices each distinct
    hypothesis holds.

    ``suffix=True``: vote over the suffix ``h_a..h_{m-1}`` minimising beta (sec. 3;
    two passes).  ``max_hypotheses``: memory cap; ``"auto"`` keeps at most 256 MiB
    of hypotheses (``(n_features + 1) x n_outputs x 8`` bytes each), None keeps
    every one; over the cap the heaviest are kept and ``summary_.dropped_`` /
    ``dropped_weight_`` say what was lost.  Prediction costs O(hypotheses x nnz)
    per row.  The vote is a 0-1-loss conversion: ``decision_function`` returns
    vote shares, there is no ``coef_``.
    """

    suffix: bool = False
    C: float = 3.0
    loss: str = "zero_one"
    max_hypotheses: int | str | None = "auto"

    def __post_init__(self) -> None:
        _check_pos("C", self.C, zero_ok=True)
        _check_loss(self.loss)
        _check_cap(self.max_hypotheses)

    @property
    def passes(self) -> int:
        return 2 if self.suffix else 1

    def tracker(self, ctx: dict[str, Any]) -> EnsembleTracker:
        return EnsembleTracker("vote", _cap(self.max_hypotheses, ctx), self.suffix, self.C, self.loss,
                               ctx.get("seed", 0))


@dataclass(frozen=True)
class Sample:
    """The sampling conversion (Dekel & Singer sec. 2): a stochastic hypothesis that
    answers each prediction with one h_i drawn with probability proportional to
    its weight.  ``random_state``: the draws' seed (None: the estimator's);
    draws are keyed by the instance (see :class:`SampledHypothesis`).  Memory and
    ``suffix`` as for :class:`Vote`.
    """

    suffix: bool = False
    C: float = 3.0
    loss: str = "zero_one"
    max_hypotheses: int | str | None = "auto"
    random_state: int | None = None

    def __post_init__(self) -> None:
        _check_pos("C", self.C, zero_ok=True)
        _check_loss(self.loss)
        _check_cap(self.max_hypotheses)
        if self.random_state is not None and (isinstance(self.random_state, (bool, np.bool_)) or not isinstance(
                self.random_state, numbers.Integral) or self.random_state < 0):
            raise ValueError(f"random_state must be a non-negative int or None, got {self.random_state!r}")

    @property
    def passes(self) -> int:
        return 2 if self.suffix else 1

    def tracker(self, ctx: dict[str, Any]) -> EnsembleTracker:
        seed = ctx.get("seed", 0) if self.random_state is None else int(self.random_state)
        return EnsembleTracker("sample", _cap(self.max_hypotheses, ctx), self.suffix, self.C, self.loss, seed)


@dataclass(frozen=True)
class Interval:
    """Interval averaging (Dekel & Singer sec. 3): the average of ``h_a..h_b`` with at
    most ``max_updates`` updates inside, minimising beta; for a learner with budget
    B/2, ``max_updates = B/2`` keeps the result within B support patterns.  Default
    500, as in the paper's experiments.  Two passes; the search is exact
    (:func:`best_interval`)."""

    max_updates: int = 500
    C: float = 3.0
    loss: str = "zero_one"
    passes = 2

    def __post_init__(self) -> None:
        _check_pos("C", self.C, zero_ok=True)
        _check_loss(self.loss)
        if isinstance(self.max_updates, (bool, np.bool_)) or not isinstance(self.max_updates, numbers.Integral) \
                or self.max_updates < 0:
            raise ValueError(f"max_updates must be a non-negative int, got {self.max_updates!r}")

    def tracker(self, ctx: dict[str, Any]) -> IntervalTracker:
        return IntervalTracker(int(self.max_updates), self.C, self.loss)


#: Conversion name -> its class (what ``conversion="cutoff"`` and the like mean).
NAMES = {"last": Last, "average": Average, "vote": Vote, "sample": Sample, "survivor": Survivor,
         "suffix": Suffix, "interval": Interval, "tree": Tree, "cutoff": Cutoff}


def make_conversion(spec: Any) -> Any:
    """A conversion object from a name or an object (returned as is)."""
    if isinstance(spec, str):  # case ignored: "Average" is "average"
        name = {n.lower(): n for n in NAMES}.get(spec.lower())
        if name is None:
            raise ValueError(f"conversion must be one of {', '.join(map(repr, NAMES))} or a conversion "
                             f"object; got {spec!r}{did_you_mean(spec, NAMES)}")
        return NAMES[name]()
    if isinstance(spec, tuple(NAMES.values())):
        return spec
    raise ValueError(f"conversion must be one of {', '.join(map(repr, NAMES))} or a conversion object "
                     f"from distlearn.conversions; got {spec!r}")
