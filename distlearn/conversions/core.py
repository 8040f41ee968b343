"""Online-to-batch conversions as mergeable summaries, and the trackers that feed them.

The learner runs over rounds ``t = 1..m``; round ``t`` uses hypothesis ``h_{t-1}``
and logs its loss on example ``t`` (0-1 or hinge) and whether the rule updated.
Hypothesis indices therefore run ``0..m-1`` for the rounds, plus the final
``h_m``.  A *tracker* rides along one learner run: it tells the driver where to
split chunks (tree leaves, capture points), which running sum of hypotheses the
kernels should keep (:class:`~distlearn.learners.linear.RunningSum`), and turns
the per-chunk logs into a *summary*.  A summary is plain data: ``merge(other)``
combines two (its law is in each class's docstring), ``finalize()`` returns
the batch hypothesis as an array of shape (n_outputs, n_features + 1), bias
last, and ``nbytes`` its memory.

Conversions that need the whole loss sequence before they can choose their
hypotheses (suffix, cutoff, survivor) run the learner twice: the first pass
records losses only (O(m) scalars for suffix, O(sqrt m) groups for cutoff,
O(1) for survivor), the second replays the learner -- every random choice in
distlearn is seeded, so the replay produces the same hypotheses -- and
accumulates just the chosen ones in O(d) memory.  ``passes`` says which.
Cutoff's first pass also records the round of every update, and its second
replays only those rounds (:class:`CutoffTracker`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..learners._adaptive import FIRST_ADAPTIVE
from ..learners.linear import (
    GroupSums,
    LinearState,
    RoundLog,
    RunningSum,
    copy_state,
    learn_chunk,
    running_sum,
    running_value,
    step_sums,
)
from ..learners._kernels import MARGIN_FREE_STEP_RULES

__all__ = [
    "LOSSES",
    "beta",
    "eq3",
    "cutoff_bounds",
    "CutoffSummary",
    "AverageSummary",
    "TreeNode",
    "TreeSummary",
    "CutoffGroups",
    "Tracker",
    "StopTraining",
    "update_cuts",
    "LastTracker",
    "AverageTracker",
    "TreeTracker",
    "SuffixTracker",
    "CutoffTracker",
    "SurvivorTracker",
    "hypothesis",
]

LOSSES = ("zero_one", "hinge")
_SHORT_PIECE = 32  # rounds: below this a tracker's piece is observed in plain Python


def hypothesis(state: LinearState) -> np.ndarray:
    """The current hypothesis as (n_outputs, n_features + 1), true units, bias last."""
    out = np.empty((state.W.shape[1], state.W.shape[0]), dtype=np.float64)
    np.multiply(state.W.T, state.scale[:, None], out=out, dtype=np.float64)  # one pass, same products
    return out


def _round_loss(log: RoundLog, loss: str, lo: int = 0, hi: int | None = None) -> np.ndarray:
    if loss == "zero_one":
        return log.mistake[lo:hi].astype(np.float64)
    return np.asarray(log.hinge[lo:hi], dtype=np.float64)


def _add_repeated(q: float, s: float, n: int) -> float:
    """``q + s + s + ... + s`` (``n`` additions, one at a time, as the kernels add them): a
    ufunc's ``accumulate`` adds strictly in order (no pairwise summation), in blocks."""
    while n > 0:
        b = min(n, 1 << 16)
        terms = np.full(b + 1, s)
        terms[0] = q
        q = float(np.add.accumulate(terms)[-1])
        n -= b
    return q


# -- the data-driven criterion ---------------------------------------------------
def beta(loss_sum: float, count: int, C: float) -> float:
    """Dekel & Singer's eq. 2: ``L(J) + C |J|^(-1/2)`` with ``L`` the mean loss."""
    if count <= 0:
        return math.inf
    return loss_sum / count + C / math.sqrt(count)


@dataclass
class TreeNode:
    """A node of the tree-based conversion: the chosen set J's hypothesis sum,
    its loss sum and size, at ``level`` (a leaf block is level 0)."""

    level: int
    total: np.ndarray
    loss: float
    count: int


def eq3(left: TreeNode, right: TreeNode, C: float) -> TreeNode:
    """Eq. 3 of Dekel & Singer: keep the left set, the right set or their union,
    whichever has the smallest beta; ties in the order the equation lists them."""
    bl = beta(left.loss, left.count, C)
    br = beta(right.loss, right.count, C)
    bu = beta(left.loss + right.loss, left.count + right.count, C)
    level = max(left.level, right.level) + 1
    if bl <= br and bl <= bu:
        return TreeNode(level, left.total, left.loss, left.count)
    if br <= bl and br <= bu:
        return TreeNode(level, right.total, right.loss, right.count)
    return TreeNode(level, left.total + right.total, left.loss + right.loss, left.count + right.count)


# -- summaries ---------------------------------------------------------------------
@dataclass
class AverageSummary:
    """Sum and number of hypotheses, plus the block's final hypothesis.

    Merge law (blocks of one stream, in order): sums and counts add, the final
    hypothesis is the right block's; associative, with the empty summary as
    identity; commutative in everything but ``last``.  ``finalize`` is the
    paper's ``(1/(m+1)) sum_{i=0}^{m} h_i`` (h_0 included).
    """

    total: np.ndarray | None = None
    count: int = 0
    last: np.ndarray | None = None

    def merge(self, other: AverageSummary) -> AverageSummary:
        if self.total is None:
            return other
        if other.total is None:
            return self
        return AverageSummary(self.total + other.total, self.count + other.count,
                              other.last if other.last is not None else self.last)

    def finalize(self) -> np.ndarray:
        if self.last is None:
            raise ValueError("empty summary: no rounds were observed")
        return (self.total + self.last) / (self.count + 1)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.total, self.last) if a is not None)


@dataclass
class TreeSummary:
    """The tree-based conversion's live nodes (a binary counter over leaf blocks).

    Merge law: the right summary's nodes are pushed, in order, onto the left's
    stack, and equal-or-lower levels are combined by eq. 3.  When the left
    block holds a multiple of ``2**L`` leaves (``L`` the right's top level) --
    blocks of equal power-of-two leaf counts, as the distributed reduction uses
    -- this is exactly the tree over the concatenated leaves; otherwise it is
    eq. 3 over the nodes as given.  Associative in the aligned case; not
    commutative.  ``finalize`` pads with infinite-loss virtual hypotheses (so
    a partial right subtree is kept as it is) and folds the stack right to left.
    """

    C: float = 3.0
    nodes: list[TreeNode] = field(default_factory=list)
    peak_nodes: int = 0

    def push(self, node: TreeNode) -> None:
        self.nodes.append(node)
        while len(self.nodes) >= 2 and self.nodes[-2].level <= self.nodes[-1].level:
            right = self.nodes.pop()
            left = self.nodes.pop()
            self.nodes.append(eq3(left, right, self.C))
        self.peak_nodes = max(self.peak_nodes, len(self.nodes))

    def merge(self, other: TreeSummary) -> TreeSummary:
        out = TreeSummary(self.C, list(self.nodes), max(self.peak_nodes, other.peak_nodes))
        for node in other.nodes:
            out.push(node)
        return out

    def chosen(self) -> TreeNode:
        if not self.nodes:
            raise ValueError("empty summary: no rounds were observed")
        acc = self.nodes[-1]
        for node in reversed(self.nodes[:-1]):
            acc = eq3(node, acc, self.C)
        return acc

    def finalize(self) -> np.ndarray:
        node = self.chosen()
        return node.total / node.count

    @property
    def nbytes(self) -> int:
        return sum(n.total.nbytes for n in self.nodes)


@dataclass
class CutoffGroups:
    """Hypotheses grouped by survival time: for each time ``s``, how many hypotheses
    survived exactly ``s`` rounds and the loss they suffered on their last round.

    Also the loss of ``h_0`` on round 1 (``h_0`` is always in the ensemble, Dekel's
    B_0 = 1) and losses suffered on rounds *without* an update at position ``j`` of
    a hypothesis' life (empty for a learner that is conservative for this loss).

    Merge law (consecutive blocks of one stream, each observed with the learner's
    running age, so a hypothesis open across a block boundary is recorded, whole,
    by the block where it ends): counts and loss sums add per survival time,
    ``m`` adds, ``loss0`` is the first non-empty block's.  Associative, with the
    empty summary as identity; commutative except for ``loss0``.  Memory: one
    entry per distinct survival time, at most sqrt(2m).
    """

    counts: dict[int, int] = field(default_factory=dict)
    last_loss: dict[int, float] = field(default_factory=dict)
    extra: dict[int, float] = field(default_factory=dict)
    loss0: float = 0.0
    m: int = 0

    def add(self, s: int, loss: float) -> None:
        self.counts[s] = self.counts.get(s, 0) + 1
        if loss:
            self.last_loss[s] = self.last_loss.get(s, 0.0) + loss

    @property
    def n_groups(self) -> int:
        return len(self.counts)

    def merge(self, other: CutoffGroups) -> CutoffGroups:
        def add(a: dict, b: dict) -> dict:
            out = dict(a)
            for key, v in b.items():
                out[key] = out.get(key, 0) + v
            return out

        return CutoffGroups(add(self.counts, other.counts), add(self.last_loss, other.last_loss),
                            add(self.extra, other.extra), self.loss0 if self.m else other.loss0,
                            self.m + other.m)


def cutoff_bounds(groups: CutoffGroups, C: float, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Theorem 2 of Dekel (cutoff averaging) for every cutoff ``k = 0..max s``.

    Returns ``(bound, sum_B, sum_L)`` indexed by ``k``: with ``delta / m`` for the
    union over k, ``bound = Lbar + sqrt(2 C ln(m^2/delta) Lbar / sum_B) + 7 C ln(m^2/delta) / sum_B``
    where ``Lbar = sum_L / sum_B``.
    """
    m = groups.m
    s = np.array(sorted(groups.counts), dtype=np.int64)
    smax = int(s[-1]) if len(s) else 1
    ks = np.arange(smax + 1)
    n = np.array([groups.counts[v] for v in s], dtype=np.float64)
    ll = np.array([groups.last_loss.get(int(v), 0.0) for v in s], dtype=np.float64)
    # Suffix sums over groups with s > k: sum n, sum n*s, sum last losses.
    order_n = np.concatenate([np.cumsum((n)[::-1])[::-1], [0.0]])
    order_ns = np.concatenate([np.cumsum((n * s)[::-1])[::-1], [0.0]])
    order_l = np.concatenate([np.cumsum(ll[::-1])[::-1], [0.0]])
    first = np.searchsorted(s, ks, side="right")  # groups with s > k start here
    sum_b = order_ns[first] - ks * order_n[first]
    # The last round of a hypothesis with s > k is at position s-1 >= k: counted.
    sum_l = order_l[first].copy()
    if groups.extra:
        pos = np.array(sorted(groups.extra), dtype=np.int64)
        val = np.array([groups.extra[p] for p in pos])
        tail = np.concatenate([np.cumsum(val[::-1])[::-1], [0.0]])
        sum_l += tail[np.searchsorted(pos, ks, side="left")]
    # B_0 = 1 always: h_0 (position 0 of the first hypothesis) joins when k > 0.
    sum_b = sum_b + (ks > 0)
    sum_l = sum_l + np.where(ks > 0, groups.loss0, 0.0)
    log_term = math.log(max(m, 1) ** 2 / delta)
    lbar = sum_l / sum_b
    bound = lbar + np.sqrt(2.0 * C * log_term * lbar / sum_b) + 7.0 * C * log_term / sum_b
    return bound, sum_b, sum_l


# -- trackers ----------------------------------------------------------------------
@dataclass
class CutoffSummary:
    """Cutoff averaging's survival-time groups, with the hypothesis sum of each group.

    ``groups`` counts, per survival time ``s``, the hypotheses used for exactly
    ``s`` rounds and their last-round losses (:class:`CutoffGroups`); ``G[s]``
    is the sum of those hypotheses; ``h0`` is the hypothesis of the stream's
    first round (Dekel's ``B_0 = 1``).  A shard's epoch is a stream of its own:
    it starts from a new (mixed) hypothesis and the hypothesis open at its end
    is closed there.

    Merge law (streams in order): groups and ``G`` add per survival time,
    ``h0`` and ``loss0`` are the first non-empty stream's.  Associative, with
    the empty summary as identity; commutative except for ``h0``.  ``finalize``
    picks ``k*`` minimising the Theorem 2 bound and returns
    ``(sum_{s>k} (s - k) G_s + [k > 0] h0) / sum_B(k)``.  Memory: one weight
    vector per distinct survival time, at most ``sqrt(2 m)``.
    """

    C: float = 1.0
    delta: float = 0.05
    groups: CutoffGroups = field(default_factory=CutoffGroups)
    G: dict[int, np.ndarray] = field(default_factory=dict)
    h0: np.ndarray | None = None
    k_: int | None = None
    bounds_: np.ndarray | None = None

    def merge(self, other: CutoffSummary) -> CutoffSummary:
        G = dict(self.G)
        for s, v in other.G.items():
            G[s] = G[s] + v if s in G else v
        h0 = self.h0 if self.groups.m else other.h0
        return CutoffSummary(self.C, self.delta, self.groups.merge(other.groups), G, h0)

    def choose(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``(k*, bound per k, sum_B per k)``."""
        if self.groups.m == 0:
            raise ValueError("empty summary: no rounds were observed")
        bounds, sum_b, _ = cutoff_bounds(self.groups, self.C, self.delta)
        return int(np.argmin(bounds)), bounds, sum_b

    def finalize(self) -> np.ndarray:
        k, bounds, sum_b = self.choose()
        self.k_, self.bounds_ = k, bounds
        total = np.zeros_like(self.h0)
        for s in sorted(self.G):
            if s > k:
                total += (s - k) * self.G[s]
        if k > 0:
            total += self.h0
        return total / sum_b[k]

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.G.values()) + (self.h0.nbytes if self.h0 is not None else 0)


class StopTraining(Exception):
    """Raised by a tracker's ``observe`` to end the run after the current piece."""


def update_cuts(rule: Any, state: LinearState, X: Any, y: np.ndarray, order: np.ndarray,
                fit_intercept: bool, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Positions right after every update of a chunk (``1 + index`` of each updating
    round), found by a probe run on a copy of ``state``: the run is deterministic,
    so the real run updates at the same rounds."""
    probe = learn_chunk(rule, copy_state(state), X, y, order=order, fit_intercept=fit_intercept,
                        sample_weight=sample_weight)
    return np.flatnonzero(probe.updated) + 1


class Tracker:
    """Rides along one learner run (one pass); subclasses say what they keep.

    ``capture_updates``: the driver cuts the chunk after every update (found by a
    probe run), so ``observe`` sees each distinct hypothesis.  ``halted``: the
    tracker stopped the current pass early (:class:`StopTraining`); ``frozen``:
    training is over, further chunks run no rounds.
    """

    passes = 1
    capture_updates = False

    def __init__(self, loss: str = "zero_one") -> None:
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.loss = loss
        self.acc: RunningSum | None = None
        self.halted = False
        self.frozen = False

    # hooks
    def begin(self, state: LinearState) -> None:
        """Called once before the first round of each pass."""

    def boundaries(self, first_round: int, n: int) -> list[int]:
        """Split points inside a chunk of ``n`` rounds whose first round uses hypothesis
        ``first_round`` (positions 1..n-1)."""
        return []

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        """Called after rounds ``log[lo:hi]`` ran; ``age0`` was the hypothesis age
        before them.  May raise :class:`StopTraining`."""

    def finalize(self, state: LinearState) -> np.ndarray:
        raise NotImplementedError

    # the driver
    def run_chunk(self, rule: Any, state: LinearState, X: Any, y: np.ndarray, order: np.ndarray | None,
                  fit_intercept: bool, sample_weight: np.ndarray | None = None) -> RoundLog:
        n_rows = X.shape[0]
        if order is None:
            order = np.arange(n_rows, dtype=np.int64)
        n = 0 if self.frozen else len(order)
        log = RoundLog(np.zeros(n, np.uint8), np.zeros(n, np.float64), np.zeros(n, np.uint8))
        if n == 0:
            return log
        splits = self.boundaries(int(state.n_rounds[0]), n)
        if self.capture_updates:
            splits = [*splits, *update_cuts(rule, state, X, y, order, fit_intercept, sample_weight).tolist()]
        done = [0]

        def on_piece(lo: int, hi: int, age0: int) -> RunningSum | None:
            done[0] = hi
            self.observe(state, log, lo, hi, age0)
            return self.acc

        try:
            learn_chunk(rule, state, X, y, order=order, fit_intercept=fit_intercept, log=log, acc=self.acc,
                        splits=splits, on_piece=on_piece, sample_weight=sample_weight)
        except StopTraining:
            self.halted = True
            k = done[0]
            return RoundLog(log.mistake[:k], log.hinge[:k], log.updated[:k])
        return log


class LastTracker(Tracker):
    """h_m, the last hypothesis (no memory beyond the learner's)."""

    def finalize(self, state: LinearState) -> np.ndarray:
        return hypothesis(state)


class AverageTracker(Tracker):
    """``(1/(m+1)) sum_{i=0}^{m} h_i``: the kernels' running sum, O(K) per round."""

    def begin(self, state: LinearState) -> None:
        self.acc = running_sum(state)

    def summary(self, state: LinearState) -> AverageSummary:
        return AverageSummary(running_value(self.acc, state), self.acc.count, hypothesis(state))

    def finalize(self, state: LinearState) -> np.ndarray:
        return self.summary(state).finalize()


class TreeTracker(Tracker):
    """The tree-based conversion over leaf blocks of ``leaf_size`` consecutive
    hypotheses (``leaf_size=1``: exactly Dekel & Singer's tree over single
    hypotheses).  A leaf costs one O(d K) read of the running sum."""

    def __init__(self, C: float = 3.0, leaf_size: int = 1, loss: str = "zero_one") -> None:
        super().__init__(loss)
        self.C = float(C)
        self.leaf_size = int(leaf_size)
        self.tree = TreeSummary(self.C)
        self._leaf_loss = 0.0
        self._leaf_start = 0

    def begin(self, state: LinearState) -> None:
        self.acc = running_sum(state)
        self._leaf_start = int(state.n_rounds[0])

    def boundaries(self, first_round: int, n: int) -> list[int]:
        b = self.leaf_size
        first = (-first_round) % b
        return list(range(first if first else b, n, b))

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        self._leaf_loss += float(_round_loss(log, self.loss, lo, hi).sum())
        if int(state.n_rounds[0]) % self.leaf_size == 0:
            self._close_leaf(state)

    def _close_leaf(self, state: LinearState) -> None:
        count = self.acc.count
        if count == 0:
            return
        self.tree.push(TreeNode(0, running_value(self.acc, state), self._leaf_loss, count))
        self.acc = running_sum(state)
        self._leaf_loss = 0.0

    def summary(self, state: LinearState) -> TreeSummary:
        """The tree so far; a partial last leaf counts as a leaf (the rest of its
        block is virtual, infinitely lossy, and never chosen)."""
        out = TreeSummary(self.C, list(self.tree.nodes), self.tree.peak_nodes)
        if self.acc is not None and self.acc.count:
            out.push(TreeNode(0, running_value(self.acc, state), self._leaf_loss, self.acc.count))
        return out

    def finalize(self, state: LinearState) -> np.ndarray:
        return self.summary(state).finalize()


class SuffixTracker(Tracker):
    """Suffix averaging (Dekel & Singer sec. 3) by replay: pass 1 keeps the m
    per-round losses, picks ``a`` minimising ``beta({a..m-1})``; pass 2 replays
    the learner and averages ``h_a .. h_{m-1}`` with the kernels' running sum."""

    passes = 2

    def __init__(self, C: float = 3.0, loss: str = "zero_one") -> None:
        super().__init__(loss)
        self.C = float(C)
        self.losses: list[np.ndarray] = []
        self.start_: int | None = None
        self.betas_: np.ndarray | None = None
        self.pass_ = 1

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        if self.pass_ == 1:
            self.losses.append(_round_loss(log, self.loss, lo, hi))

    def plan(self, state: LinearState) -> None:
        loss = np.concatenate(self.losses) if self.losses else np.zeros(0)
        m = len(loss)
        if m == 0:
            raise ValueError("empty summary: no rounds were observed")
        tail = np.cumsum(loss[::-1])[::-1]  # sum of loss[a:]
        size = m - np.arange(m)
        self.betas_ = tail / size + self.C / np.sqrt(size)
        self.start_ = int(np.argmin(self.betas_))  # first a on ties: the longest suffix
        self.losses = []
        self.pass_ = 2

    def begin(self, state: LinearState) -> None:
        if self.pass_ == 2:
            self.acc = running_sum(state, start=self.start_)

    def finalize(self, state: LinearState) -> np.ndarray:
        if self.pass_ != 2 or self.acc is None:
            raise RuntimeError("suffix averaging needs its replay pass (plan(), then run again)")
        return running_value(self.acc, state) / self.acc.count


class CutoffTracker(Tracker):
    """Cutoff averaging (Dekel 2008).

    Both modes group the hypotheses by survival time (O(sqrt m) groups) and
    compute the Theorem 2 bound for every cutoff k; k* is the minimiser (the
    first on ties).

    ``mode="replay"`` (two passes, O(d) memory): pass 2 replays the learner and
    accumulates ``sum_i B_i h_i`` for k* with the kernels' running sum (B_i = 1
    when h_i has already been used k* rounds, or i = 0).  Pass 1 also records the
    round of every update (8 bytes each, at most ``max_events`` of them); pass 2
    then runs the learner on the updating rounds only (the rounds between them
    leave the state as it is, so the kernel sees the same weights, margins and
    steps), each round adding its hypothesis to the running sum once for every
    counted round of that hypothesis' life, ``(s - k*)+`` (+1 for ``h_0`` when
    k* > 0): O(updates x nnz) instead of an epoch of margins, the same additions
    in the same order, so the same bits as the full replay.  Adaptive rules
    (per-feature statistics) and a pass with more than ``max_events`` updates
    replay every round.

    ``mode="groups"`` (one pass, ``partial_fit``): also keeps, per survival time
    s, the sum ``G_s`` of the hypotheses that survived exactly s rounds (each
    added when it ends), so the cutoff-k hypothesis
    ``(sum_{s>k} (s-k) G_s + [k>0] h_0) / sum_B(k)`` is available at any time for
    every k (:meth:`hypothesis`).  Memory: groups x n_outputs x (n_features + 1)
    floats, at most sqrt(2m) groups.  With one output column and a binary rule the
    kernels keep the sums in update-event form (:class:`~distlearn.learners.linear.GroupSums`:
    an update costs O(nnz x groups), a chunk runs in one call); otherwise the driver cuts
    the chunk after every update (found by a probe run) and each ended hypothesis is copied
    into its group, O(n_features) per update.

    ``stop_below``: end training at the first check (every ``check_every``
    rounds) where the best bound is below it; the replay stops at the same round.
    """

    #: Pass 1's update record holds at most this many rounds (8 bytes each: 64 MiB); beyond it
    #: the record is dropped and pass 2 replays every round.
    max_events = 1 << 23

    def __init__(self, delta: float = 0.05, C: float = 1.0, loss: str = "zero_one", mode: str = "replay",
                 stop_below: float | None = None, check_every: int = 1000) -> None:
        super().__init__(loss)
        if mode not in ("replay", "groups"):
            raise ValueError(f"mode must be 'replay' or 'groups', got {mode!r}")
        self.delta = float(delta)
        self.C = float(C)
        self.mode = mode
        self.passes = 2 if mode == "replay" else 1
        self.capture_updates = mode == "groups"
        self.stop_below = stop_below
        self.check_every = int(check_every)
        self.groups = CutoffGroups()
        self.pass_ = 1
        self.k_: int | None = None
        self.bounds_: np.ndarray | None = None
        self.sum_b_: np.ndarray | None = None
        self.peak_groups = 0
        self.stopped_ = False
        self.stop_round_: int | None = None
        # mode="groups"
        self.G: dict[int, np.ndarray] = {}
        self._h0: np.ndarray | None = None
        self._open: np.ndarray | None = None
        self._kg: GroupSums | None = None  # the kernels' group sums (binary rounds)
        # mode="replay": pass 1's update rounds (pieces, then one array), and pass 2's position in it
        self._ev: list[np.ndarray] | np.ndarray | None = [] if mode == "replay" else None
        self._n_ev = 0
        self._ev_at = 0
        self._round2 = 0  # pass 2's rounds so far
        self._by_events: str | None = None  # how pass 2 ran: "rounds" (updating rounds), "steps" (step_sums)
        self._final: LinearState | None = None  # pass 1's final state ("steps" keeps it)
        self._tail_added = False  # finalize added the rounds after pass 2's last update

    def run_chunk(self, rule: Any, state: LinearState, X: Any, y: np.ndarray, order: np.ndarray | None,
                  fit_intercept: bool, sample_weight: np.ndarray | None = None) -> RoundLog:
        if (self.mode == "groups" and self._kg is None and not self.G and self.groups.m == 0
                and state.W.shape[1] == 1 and not rule.native and rule.code < FIRST_ADAPTIVE):
            # Binary rounds: the kernels keep the group sums, no per-update pieces.
            self._kg = GroupSums(state.W.shape[0])
            self._kg.q[-1] = state.scale[0]
            self.acc = self._kg
            self.capture_updates = False
        if self.pass_ == 2 and isinstance(self._ev, np.ndarray) and rule.code < FIRST_ADAPTIVE:
            if self._by_events is None:  # the first chunk of pass 2 decides how it runs
                self._by_events = "steps" if (rule.code in MARGIN_FREE_STEP_RULES and state.W.shape[1] == 1
                                              and self._final is not None
                                              and float(self._final.scale[0]) == 1.0) else "rounds"
                if self._by_events == "steps":  # the weights are pass 1's: put them back
                    for have, want in zip(state, self._final):
                        have[...] = want
            return self._replay_events(rule, state, X, y, order, fit_intercept, sample_weight)
        return super().run_chunk(rule, state, X, y, order, fit_intercept, sample_weight)

    def _replay_events(self, rule: Any, state: LinearState, X: Any, y: np.ndarray, order: np.ndarray | None,
                       fit_intercept: bool, sample_weight: np.ndarray | None) -> RoundLog:
        """Pass 2 on a chunk from pass 1's update rounds: the learner runs on the updating rows
        only, each adding its hypothesis ``reps`` times to the running sum (see the class
        docstring); the state ends as the full replay's (rounds, age).  The returned log is
        empty (pass 2's rounds are not counted)."""
        n = X.shape[0] if order is None else len(order)
        first = self._round2
        if self.stop_round_ is not None:
            n = max(0, min(n, self.stop_round_ - first))
        ev = self._ev
        a = self._ev_at
        b = int(np.searchsorted(ev, first + n, side="left"))
        pos = ev[a:b] - first
        sub = pos if order is None else np.asarray(order)[pos]
        prev = ev[a - 1] if a else -1
        life = np.diff(ev[a:b], prepend=prev)  # s of the hypothesis each update ends
        k = self.k_
        reps = np.maximum(life - k, 0)
        if a == 0 and b > a and k > 0:
            reps[0] += 1  # h_0's first round (B_0 = 1)
        if b > a and self._by_events == "steps":
            step_sums(rule, state, X, y, sub, reps, self.acc, n_updates=a, fit_intercept=fit_intercept,
                      sample_weight=sample_weight)
        elif b > a:
            log = learn_chunk(rule, state, X, y, order=sub, fit_intercept=fit_intercept, acc=self.acc,
                              sample_weight=sample_weight, reps=reps)
            if not log.updated.all():
                raise RuntimeError("cutoff averaging's event replay diverged from pass 1 "
                                   f"(round {first + int(pos[np.argmin(log.updated)])} did not update)")
        self._ev_at = b
        self._round2 = first + n
        if self._by_events == "rounds":
            last = ev[b - 1] if b else -1
            state.n_rounds[0] = first + n
            state.age[0] = first + n - 1 - last
        if self.stop_round_ is not None and first + n == self.stop_round_:
            self.halted = True
        return RoundLog(np.zeros(0, np.uint8), np.zeros(0, np.float64), np.zeros(0, np.uint8))

    def _group_items(self, state: LinearState, above: int = 0) -> list[tuple[int, np.ndarray]]:
        """``(s, G_s)`` of the closed hypotheses with ``s > above``, in order of first appearance."""
        if self._kg is None:
            return [(sv, Gs) for sv, Gs in self.G.items() if sv > above]
        slots = [g for g, sv in enumerate(self._kg.surv.tolist()) if sv > above]
        return list(zip(self._kg.surv[slots].tolist(), self._kg.values(state, slots)))

    def begin(self, state: LinearState) -> None:
        self.halted = False
        if self.pass_ == 1 and self.mode == "groups" and self._open is None:
            self._h0 = hypothesis(state)
            self._open = self._h0
        if self.pass_ == 2:
            self.acc = running_sum(state, cut=self.k_)
            self._ev_at = 0
            self._round2 = 0
            self._by_events = None
            self._tail_added = False

    def boundaries(self, first_round: int, n: int) -> list[int]:
        if self.pass_ == 2:
            return [self.stop_round_ - first_round] if self.stop_round_ is not None else []
        if self.stop_below is None:
            return []
        b = self.check_every
        first = (-first_round) % b
        return list(range(first if first else b, n, b))

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        if self.pass_ != 1:
            if self.stop_round_ is not None and int(state.n_rounds[0]) == self.stop_round_:
                raise StopTraining
            return
        g = self.groups
        upd = log.updated[lo:hi]
        loss = _round_loss(log, self.loss, lo, hi)
        at = np.flatnonzero(upd) if hi - lo > _SHORT_PIECE or isinstance(self._ev, list) else None
        if isinstance(self._ev, list) and hi > lo:
            if len(at):
                self._n_ev += len(at)
                if self._n_ev > self.max_events:
                    self._ev = None  # too many: pass 2 replays every round
                else:
                    self._ev.append(at + (int(state.n_rounds[0]) - (hi - lo)))
        if g.m == 0 and hi > lo:
            g.loss0 = float(loss[0])
        if hi - lo <= _SHORT_PIECE:
            self._observe_short(upd.tolist(), loss.tolist(), age0)
        else:
            self._observe_long(upd, loss, age0, at)
        g.m += hi - lo
        if self.mode == "groups" and self._kg is None and hi > lo and upd[-1]:
            # The piece ends at an update (the driver cuts there): the open
            # hypothesis survived age0 + (hi - lo) rounds.
            sv = age0 + (hi - lo)
            if sv in self.G:
                self.G[sv] += self._open
            else:
                self.G[sv] = self._open.copy()
            self._open = hypothesis(state)
        self.peak_groups = max(self.peak_groups, g.n_groups)
        if self.stop_below is not None and int(state.n_rounds[0]) % self.check_every == 0:
            bounds, _, _ = cutoff_bounds(self._final_groups(state), self.C, self.delta)
            if float(bounds.min()) < self.stop_below:
                self.stopped_ = True
                self.stop_round_ = int(state.n_rounds[0])
                if self.mode == "groups":
                    self.frozen = True
                raise StopTraining

    def _observe_short(self, upd: list[int], loss: list[float], age: int) -> None:
        """:meth:`_observe_long` for a few rounds (groups mode cuts at every update) without numpy's
        per-call costs; per-survival sums are formed in round order first, as ``bincount`` does."""
        g = self.groups
        ended: dict[int, list[float]] = {}
        quiet: dict[int, float] = {}
        for u, ls in zip(upd, loss):
            if u:
                e = ended.setdefault(age + 1, [0, 0.0])
                e[0] += 1
                e[1] += ls
                age = 0
            else:
                if ls != 0:
                    quiet[age] = quiet.get(age, 0.0) + ls
                age += 1
        for sv in sorted(ended):
            c, ls = ended[sv]
            g.counts[sv] = g.counts.get(sv, 0) + c
            if ls:
                g.last_loss[sv] = g.last_loss.get(sv, 0.0) + ls
        for pv in sorted(quiet):
            g.extra[pv] = g.extra.get(pv, 0.0) + quiet[pv]

    def _observe_long(self, upd: np.ndarray, loss: np.ndarray, age0: int, ends: np.ndarray) -> None:
        """The piece's ended hypotheses (``ends``: its updating rounds) and quiet losses into the
        groups, from the update positions alone (O(updates) beyond one scan of the rounds)."""
        g = self.groups
        if len(ends):
            lives = np.diff(ends, prepend=-1 - age0)  # survival of the hypothesis each update ends
            if int(lives.max()) <= 4 * len(ends) + 1024:  # small: count by value, no sort
                cnt = np.bincount(lives)
                surv = np.flatnonzero(cnt)
                cnt = cnt[surv]
                lsum = np.bincount(lives, weights=loss[ends])[surv]
            else:
                surv, inv = np.unique(lives, return_inverse=True)
                cnt = np.bincount(inv)
                lsum = np.bincount(inv, weights=loss[ends])
            for sv, c, ls in zip(surv.tolist(), cnt.tolist(), lsum.tolist()):
                g.counts[sv] = g.counts.get(sv, 0) + c
                if ls:
                    g.last_loss[sv] = g.last_loss.get(sv, 0.0) + ls
        # Losses on rounds without an update (none for a conservative learner), by their age.
        quiet = np.flatnonzero((upd == 0) & (loss != 0))
        if len(quiet):
            before = np.searchsorted(ends, quiet)  # updates before each quiet round
            prev = np.where(before > 0, ends[np.maximum(before - 1, 0)] if len(ends) else 0, -1 - age0)
            pos, inv = np.unique(quiet - prev - 1, return_inverse=True)
            for pv, ls in zip(pos.tolist(), np.bincount(inv, weights=loss[quiet]).tolist()):
                g.extra[pv] = g.extra.get(pv, 0.0) + ls

    def summary(self, state: LinearState) -> CutoffSummary:
        """This stream's mergeable summary (``mode="groups"``): the hypothesis open at the end
        of the stream is closed there, with its age so far."""
        groups = self._final_groups(state)
        G = dict(self._group_items(state))
        age = int(state.age[0])
        if age > 0:
            h = hypothesis(state) if self._kg is not None else self._open
            G[age] = G[age] + h if age in G else h.copy()
        return CutoffSummary(self.C, self.delta, groups, G, self._h0 if groups.m else None)

    def _final_groups(self, state: LinearState) -> CutoffGroups:
        """The groups with the open hypothesis counted as surviving its age so far."""
        g = self.groups
        final = CutoffGroups(dict(g.counts), dict(g.last_loss), dict(g.extra), g.loss0, g.m)
        if int(state.age[0]) > 0:
            final.add(int(state.age[0]), 0.0)
        return final

    def _choose(self, state: LinearState) -> None:
        if self.groups.m == 0:
            raise ValueError("empty summary: no rounds were observed")
        self.bounds_, self.sum_b_, _ = cutoff_bounds(self._final_groups(state), self.C, self.delta)
        self.k_ = int(np.argmin(self.bounds_))

    def plan(self, state: LinearState) -> None:
        self._choose(state)
        if isinstance(self._ev, list):
            self._ev = np.concatenate(self._ev) if self._ev else np.zeros(0, np.int64)
            # Pass 1's final weights, for a pass 2 that does not run the rule ("steps")
            self._final = copy_state(state) if isinstance(state, LinearState) else None
        self.pass_ = 2

    def hypothesis(self, state: LinearState, k: int | None = None) -> np.ndarray:
        """``mode="groups"``: the cutoff-``k`` hypothesis of the rounds so far (k*
        when None), shape (n_outputs, n_features + 1)."""
        if self.mode != "groups":
            raise RuntimeError("intermediate cutoff hypotheses need Cutoff(mode='groups')")
        self._choose(state)
        k = self.k_ if k is None else int(k)
        if not 0 <= k < len(self.sum_b_):
            raise ValueError(f"k must be in [0, {len(self.sum_b_) - 1}], got {k}")
        total = np.zeros_like(self._h0)
        for sv, Gs in self._group_items(state, k):
            total += (sv - k) * Gs
        age = int(state.age[0])
        if age > k:
            total += (age - k) * (hypothesis(state) if self._kg is not None else self._open)
        if k > 0:
            total += self._h0
        return total / self.sum_b_[k]

    def finalize(self, state: LinearState) -> np.ndarray:
        if self.mode == "groups":
            return self.hypothesis(state)
        if self.pass_ != 2 or self.acc is None:
            raise RuntimeError("cutoff averaging needs its replay pass (plan(), then run again)")
        if not self._by_events:
            return running_value(self.acc, state) / self.acc.count
        # The event replay: the rounds after the last update (the open hypothesis), added as the
        # full replay adds them, one at a time, once (finalize may be called again), so that
        # acc.count is the number of hypotheses added, as after a full replay.
        if not self._tail_added:
            age, k = int(state.age[0]), self.k_
            n_add = max(age - k, 0) + (1 if k > 0 and not len(self._ev) and self.groups.m > 0 else 0)
            q = self.acc.q[0]
            for col in range(len(q)):
                q[col] = _add_repeated(float(q[col]), float(state.scale[col]), n_add)
            self.acc.cfg[3] += n_add
            self._tail_added = True
        total = (self.acc.P + self.acc.q[0][None, :] * state.W.astype(np.float64)).T
        return total / self.acc.count

    @property
    def nbytes(self) -> int:
        extra = [a for a in (self._h0, self._open) if a is not None]
        if len(extra) == 2 and extra[0] is extra[1]:
            extra = extra[:1]
        kg = self._kg.nbytes if self._kg is not None else 0
        return sum(a.nbytes for a in self.G.values()) + sum(a.nbytes for a in extra) + kg


class SurvivorTracker(Tracker):
    """Longest survivor (Gallant's pocket): the hypothesis used for the most
    consecutive rounds (the earliest on ties).  Pass 1 finds its first round
    from the update log in O(1) memory; pass 2 replays up to it and copies it."""

    passes = 2

    def __init__(self, loss: str = "zero_one") -> None:
        super().__init__(loss)
        self.pass_ = 1
        self.best_len = -1
        self.best_start = 0
        self._cur_start = 0
        self._captured: np.ndarray | None = None

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        if self.pass_ == 2:
            if int(state.n_rounds[0]) == self.best_start and self._captured is None:
                self._captured = hypothesis(state)
            return
        upd = log.updated[lo:hi]
        base = int(state.n_rounds[0]) - (hi - lo)
        ends = np.flatnonzero(upd) + base + 1  # first round of each new hypothesis
        if len(ends):
            starts = np.concatenate([[self._cur_start], ends[:-1]])
            lengths = ends - starts
            i = int(np.argmax(lengths))  # the first of the longest
            if lengths[i] > self.best_len:
                self.best_len, self.best_start = int(lengths[i]), int(starts[i])
            self._cur_start = int(ends[-1])

    def plan(self, state: LinearState) -> None:
        length = int(state.n_rounds[0]) - self._cur_start
        if length > self.best_len:
            self.best_len, self.best_start = length, self._cur_start
        self.pass_ = 2

    def begin(self, state: LinearState) -> None:
        if self.pass_ == 2 and self.best_start == 0:
            self._captured = hypothesis(state)

    def boundaries(self, first_round: int, n: int) -> list[int]:
        if self.pass_ == 2:
            return [self.best_start - first_round]
        return []

    def finalize(self, state: LinearState) -> np.ndarray:
        if self._captured is None:
            if self.pass_ == 2 and self.best_start == int(state.n_rounds[0]):
                return hypothesis(state)
            raise RuntimeError("the longest survivor needs its replay pass (plan(), then run again)")
        return self._captured
