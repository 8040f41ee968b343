"""Voting and sampling conversions: the distinct online hypotheses with their weights.

Both keep every distinct hypothesis ``h`` of the run with its *weight*, the
number of indices ``i`` of the conversion's set with ``h_i = h`` -- the rounds
it was used for, plus one for the final ``h_m`` (Dekel & Singer sec. 2) -- so
memory is ``(number of updates + 1) x n_outputs x (n_features + 1)`` float64;
``max_hypotheses`` caps it (the heaviest are kept, and what was dropped is
reported).

Capturing each hypothesis needs the learner to stop after every update.  The
kernels do not know about conversions, so the tracker runs each chunk twice:
once on a copy of the state to find where the updates are, then for real, cut
into pieces that end at those updates (the run is deterministic, so both see
the same updates).  The cost is about twice the plain run plus one copy of the
weights per update; the stream is still read once, so ``partial_fit`` works.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..learners.linear import LinearState, RoundLog, learn_chunk
from .core import SuffixTracker, Tracker, _round_loss, hypothesis, update_cuts

__all__ = ["EnsembleSummary", "VotedHypothesis", "SampledHypothesis", "EnsembleTracker", "auto_cap"]

#: ``max_hypotheses="auto"`` keeps at most this many bytes of hypotheses.
AUTO_BYTES = 256 * 2**20


def auto_cap(n_features: int, n_outputs: int) -> int:
    """Hypotheses that fit in 256 MiB (at least 16)."""
    return max(16, AUTO_BYTES // (8 * n_outputs * (n_features + 1)))


@dataclass
class EnsembleSummary:
    """Distinct hypotheses, each keyed by the round it was first used (``starts``),
    with its weight.

    Merge law: the multiset union, where entries with the same start (one
    hypothesis whose rounds were split between two blocks) add their weights,
    then, with a cap, the ``cap`` heaviest are kept (ties: the earlier start).
    Commutative (entries are kept sorted by start), with the empty summary as
    identity; associative without a cap, and with one unless a hypothesis is
    split across blocks: a capped block ranks each part by its own weight before
    the parts meet.  ``dropped`` and ``dropped_weight`` count what the cap removed.
    """

    cap: int | None = None
    H: list[np.ndarray] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    dropped: int = 0
    dropped_weight: float = 0.0

    def add(self, h: np.ndarray, weight: float, start: int) -> None:
        """Add one hypothesis (kept sorted by start; an equal start adds weight)."""
        if weight <= 0:
            return
        i = bisect.bisect_left(self.starts, start)  # O(log n): no list-to-array copy per add
        if i < len(self.starts) and self.starts[i] == start:
            self.weights[i] += weight
        else:
            self.H.insert(i, h)
            self.weights.insert(i, float(weight))
            self.starts.insert(i, int(start))
        self._prune()

    def _prune(self) -> None:
        if self.cap is None:
            return
        while len(self.H) > self.cap:
            # The lightest; among equals the latest start goes first.  O(n) in C
            # (min and a scan for it), no sort.
            w_min = min(self.weights)
            j = len(self.weights) - 1 - self.weights[::-1].index(w_min)
            self.dropped += 1
            self.dropped_weight += self.weights[j]
            del self.H[j], self.weights[j], self.starts[j]

    def merge(self, other: EnsembleSummary) -> EnsembleSummary:
        cap = self.cap if other.cap is None else other.cap if self.cap is None else min(self.cap, other.cap)
        out = EnsembleSummary(None, list(self.H), list(self.weights), list(self.starts),
                              self.dropped + other.dropped, self.dropped_weight + other.dropped_weight)
        for h, w, s in zip(other.H, other.weights, other.starts):
            out.add(h, w, s)
        # Cap the union once (pruning while adding would rank a split hypothesis
        # by one part and make the result depend on the operands' order).
        out.cap = cap
        out._prune()
        return out

    @property
    def n_hypotheses(self) -> int:
        return len(self.H)

    @property
    def total_weight(self) -> float:
        return float(sum(self.weights))

    @property
    def nbytes(self) -> int:
        return sum(h.nbytes for h in self.H)

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        """``(H, w)``: shape (n, n_outputs, n_features + 1) and the weights."""
        if not self.H:
            raise ValueError("empty summary: no rounds were observed")
        return np.stack(self.H), np.asarray(self.weights, dtype=np.float64)

    def average(self) -> np.ndarray:
        """The weighted average of the hypotheses (the averaging conversion over the same set)."""
        H, w = self.stacked()
        return np.tensordot(w, H, axes=1) / w.sum()

    def vote(self) -> VotedHypothesis:
        H, w = self.stacked()
        return VotedHypothesis(H, w)

    def sample(self, seed: int) -> SampledHypothesis:
        H, w = self.stacked()
        return SampledHypothesis(H, w, int(seed))


def _scores(X: Any, H: np.ndarray) -> np.ndarray:
    """Scores of every row under every hypothesis: shape (n_rows, n_hyp, n_outputs)."""
    n_h, k, d1 = H.shape
    W = H[:, :, :-1].reshape(n_h * k, d1 - 1)
    S = X @ W.T
    S = np.asarray(S.toarray() if sp.issparse(S) else S, dtype=np.float64)
    return (S + H[:, :, -1].reshape(-1)[None, :]).reshape(X.shape[0], n_h, k)


def _blocks(n_rows: int, n_h: int, k: int, budget: int = 2**22) -> tuple[int, int]:
    """Row and hypothesis block sizes keeping a score block under ``budget`` floats."""
    hb = max(1, min(n_h, budget // max(1, k * min(n_rows, 4096))))
    rb = max(1, min(max(n_rows, 1), budget // max(1, k * hb)))
    return rb, hb


@dataclass
class VotedHypothesis:
    """The voting conversion's batch hypothesis: each ``H[i]`` casts ``w[i]`` votes
    for the class it predicts (binary: ``classes_[1]`` when its score is >= 0;
    multiclass: the argmax of its scores, the first on ties).

    ``decision_function`` gives the vote shares: binary, ``2 * share(classes_[1]) - 1``
    in [-1, 1] (>= 0 predicts ``classes_[1]``, so an exact tie goes to it);
    multiclass, the share of every class (argmax, first on ties, predicts).
    Cost: O(n_rows x n_hypotheses x nnz) per call, in blocks of bounded memory.
    """

    H: np.ndarray
    w: np.ndarray

    def decision_function(self, X: Any) -> np.ndarray:
        n_h, k, _ = self.H.shape
        n = X.shape[0]
        out = np.zeros((n, max(k, 2) if k > 1 else 1), np.float64)
        total = float(self.w.sum())
        rb, hb = _blocks(n, n_h, k)
        for r0 in range(0, n, rb):
            Xr = X[r0:r0 + rb]
            for h0 in range(0, n_h, hb):
                S = _scores(Xr, self.H[h0:h0 + hb])
                w = self.w[h0:h0 + hb]
                if k == 1:
                    out[r0:r0 + rb, 0] += (S[:, :, 0] >= 0) @ w
                else:
                    win = np.argmax(S, axis=2)  # (rows, hyps)
                    for j in range(win.shape[1]):
                        np.add.at(out[r0:r0 + rb], (np.arange(win.shape[0]), win[:, j]), w[j])
        if k == 1:
            return 2.0 * out[:, 0] / total - 1.0
        return out / total

    @property
    def nbytes(self) -> int:
        return self.H.nbytes + self.w.nbytes


@dataclass
class SampledHypothesis:
    """The sampling conversion's stochastic hypothesis: every prediction draws one
    ``H[i]`` with probability ``w[i] / sum(w)`` and answers with its scores.

    The draw is seeded: by default it is keyed by ``(seed, x)`` -- a seeded
    random projection of the instance, so the same instance gets the same draw,
    predictions do not depend on the batch or its order, and, over seeds, the
    risk is the paper's ``Risk(h^S)``.  Pass ``random_state`` to
    :meth:`draw`/``decision_function`` for fresh independent draws instead.
    """

    H: np.ndarray
    w: np.ndarray
    seed: int

    def draw(self, X: Any, random_state: Any = None) -> np.ndarray:
        """The index of the hypothesis each row uses."""
        n = X.shape[0]
        cdf = np.cumsum(self.w)
        cdf /= cdf[-1]
        if random_state is not None:
            u = np.random.default_rng(random_state).random(n)
        else:
            d = self.H.shape[2] - 1
            r = np.random.default_rng([self.seed, 0x5A3B1E]).normal(size=d)
            z = np.asarray(X @ r, dtype=np.float64).ravel()
            # frac(mantissa(z) * 2^20 + golden ratio): fine-grained in z, uniform in
            # practice, whatever the features' scale (z itself would give u = const
            # for tiny z and a coarse grid, down to u = 0 always, for huge z).
            u = np.mod(np.frexp(z)[0] * 1048576.0 + 0.6180339887498949, 1.0)
        return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)

    def decision_function(self, X: Any, random_state: Any = None) -> np.ndarray:
        idx = self.draw(X, random_state)
        k = self.H.shape[1]
        out = np.zeros((X.shape[0], k), np.float64)
        for i in np.unique(idx):
            rows = np.flatnonzero(idx == i)
            h = self.H[i]
            S = X[rows] @ h[:, :-1].T
            out[rows] = np.asarray(S.toarray() if sp.issparse(S) else S, dtype=np.float64) + h[:, -1]
        return out[:, 0] if k == 1 else out

    @property
    def nbytes(self) -> int:
        return self.H.nbytes + self.w.nbytes


class EnsembleTracker(Tracker):
    """Collects the distinct hypotheses of the conversion's set with their weights.

    ``suffix=False``: the set is ``h_0..h_m`` (one pass, ``partial_fit`` works).
    ``suffix=True``: Dekel & Singer's suffix ``h_a..h_{m-1}``, ``a`` minimising
    beta (pass 1 keeps the losses, pass 2 replays and collects from round ``a``).
    ``kind``: ``"vote"`` or ``"sample"`` (what ``finalize`` returns).
    """

    def __init__(self, kind: str = "vote", cap: int | None = None, suffix: bool = False, C: float = 3.0,
                 loss: str = "zero_one", seed: int = 0) -> None:
        super().__init__(loss)
        self.kind = kind
        self.suffix = bool(suffix)
        self.C = float(C)
        self.seed = int(seed)
        self.passes = 2 if suffix else 1
        self.pass_ = 1
        self.start_ = 0
        self.betas_: np.ndarray | None = None
        self._losses = SuffixTracker(C, loss) if suffix else None
        self.ensemble = EnsembleSummary(cap)
        self._open: np.ndarray | None = None
        self._open_w = 0
        self._open_start = 0

    def _key(self, state: LinearState) -> int:
        """The start key of the current hypothesis: its first round (``n_rounds - age``),
        so a block tracker started mid-stream keys it as the previous block did."""
        return max(self.start_, int(state.n_rounds[0]) - int(state.age[0]))

    @property
    def collecting(self) -> bool:
        return self.pass_ == self.passes

    def plan(self, state: LinearState) -> None:
        self._losses.plan(state)
        self.start_ = int(self._losses.start_)
        self.betas_ = self._losses.betas_
        self.pass_ = 2

    def begin(self, state: LinearState) -> None:
        if self.collecting and int(state.n_rounds[0]) >= self.start_:
            self._open, self._open_w, self._open_start = hypothesis(state), 0, self._key(state)

    def run_chunk(self, rule: Any, state: LinearState, X: Any, y: np.ndarray, order: np.ndarray | None,
                  fit_intercept: bool, sample_weight: np.ndarray | None = None) -> RoundLog:
        if not self.collecting:
            log = learn_chunk(rule, state, X, y, order=order, fit_intercept=fit_intercept, sample_weight=sample_weight)
            self._losses.losses.append(_round_loss(log, self.loss))
            return log
        first = int(state.n_rounds[0])
        if self._open is None and first >= self.start_:
            self._open, self._open_w, self._open_start = hypothesis(state), 0, self._key(state)
        n = X.shape[0] if order is None else len(order)
        if order is None:
            order = np.arange(n, dtype=np.int64)
        cuts = update_cuts(rule, state, X, y, order, fit_intercept, sample_weight)
        lo_cut = self.start_ - first
        cuts = cuts[cuts > lo_cut].tolist()
        if 0 < lo_cut < n:
            cuts.append(lo_cut)
        log = RoundLog(np.zeros(n, np.uint8), np.zeros(n, np.float64), np.zeros(n, np.uint8))

        def on_piece(lo: int, hi: int, age0: int) -> None:
            g_hi = first + hi
            if self._open is None:
                if g_hi == self.start_:
                    self._open, self._open_w, self._open_start = hypothesis(state), 0, g_hi
                return None
            self._open_w += g_hi - max(first + lo, self.start_, self._open_start)
            if hi and log.updated[hi - 1]:
                self.ensemble.add(self._open, self._open_w, self._open_start)
                self._open, self._open_w, self._open_start = hypothesis(state), 0, g_hi
            return None

        learn_chunk(rule, state, X, y, order=order, fit_intercept=fit_intercept, log=log,
                    splits=cuts, on_piece=on_piece, sample_weight=sample_weight)
        return log

    def summary(self, state: LinearState, final: bool = True) -> EnsembleSummary:
        """The collected hypotheses, the open one included.  ``final``: this block ends
        the stream, so the open hypothesis is h_m and gets its extra index (unless
        suffix); ``final=False`` gives a block summary that merges with the next
        block's (which continues the open hypothesis under the same start)."""
        if not self.collecting:
            raise RuntimeError("the suffix vote needs its replay pass (plan(), then run again)")
        out = EnsembleSummary(self.ensemble.cap, list(self.ensemble.H), list(self.ensemble.weights),
                              list(self.ensemble.starts), self.ensemble.dropped, self.ensemble.dropped_weight)
        if self._open is not None:
            out.add(self._open, self._open_w + (1 if final and not self.suffix else 0), self._open_start)
        return out

    def finalize(self, state: LinearState) -> Any:
        s = self.summary(state)
        return s.vote() if self.kind == "vote" else s.sample(self.seed)

    # Reported on the fitted estimator's summary_: those of the final summary (the
    # open hypothesis included, after the cap).
    def _final(self) -> EnsembleSummary:
        return self.summary(None) if self.collecting else self.ensemble  # type: ignore[arg-type]

    @property
    def n_hypotheses_(self) -> int:
        return self._final().n_hypotheses

    @property
    def dropped_(self) -> int:
        return self._final().dropped

    @property
    def dropped_weight_(self) -> float:
        return self._final().dropped_weight
