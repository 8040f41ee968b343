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
``"cutoff"``          2        Dekel's cutoff averaging, k by the Theorem 2 bound
``"survivor"``        2        the hypothesis used for the most consecutive rounds
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

from .core import (
    AverageSummary,
    AverageTracker,
    CutoffGroups,
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

__all__ = [
    "NAMES", "Last", "Average", "Tree", "Suffix", "Cutoff", "Survivor", "make_conversion",
    "AverageSummary", "TreeSummary", "TreeNode", "CutoffGroups", "beta", "eq3", "cutoff_bounds", "hypothesis",
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
    """

    delta: float = 0.05
    C: float | None = None
    loss: str = "zero_one"
    passes = 2

    def __post_init__(self) -> None:
        if isinstance(self.delta, (bool, np.bool_)) or not (isinstance(self.delta, numbers.Real) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        if self.C is not None:
            _check_pos("C", self.C)
        _check_loss(self.loss)

    def tracker(self, ctx: dict[str, Any]) -> CutoffTracker:
        C = self.C
        if C is None:
            C = 1.0 if self.loss == "zero_one" else ctx["radius"]() + 1.0
        return CutoffTracker(self.delta, float(C), self.loss)


@dataclass(frozen=True)
class Survivor:
    """Longest survivor (pocket): the hypothesis used for the most consecutive rounds."""

    passes = 2

    def tracker(self, ctx: dict[str, Any]) -> SurvivorTracker:
        return SurvivorTracker()


NAMES = {"last": Last, "average": Average, "tree": Tree, "suffix": Suffix, "cutoff": Cutoff, "survivor": Survivor}


def make_conversion(spec: Any) -> Any:
    """A conversion object from a name or an object (returned as is)."""
    if isinstance(spec, str):
        if spec not in NAMES:
            raise ValueError(f"conversion must be one of {', '.join(map(repr, NAMES))} or a conversion "
                             f"object; got {spec!r}")
        return NAMES[spec]()
    if isinstance(spec, tuple(NAMES.values())):
        return spec
    raise ValueError(f"conversion must be one of {', '.join(map(repr, NAMES))} or a conversion object "
                     f"from distlearn.conversions; got {spec!r}")
