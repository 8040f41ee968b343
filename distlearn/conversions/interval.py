"""Interval conversion (Dekel & Singer 2005, sec. 3): the average of ``h_a..h_b``,
the interval with at most ``max_updates`` updates inside it that minimises beta.

For a budgeted kernel learner run with budget B/2, ``max_updates = B/2`` keeps
the averaged hypothesis within B support patterns.  Here it works for any
learner: pass 1 records every round's loss and update flag (9 bytes a round);
the search below finds the interval; pass 2 replays the learner and sums
``h_a..h_b`` with the kernels' running sum (O(d) memory).
"""

from __future__ import annotations

import math
import numba
import numpy as np

from ..learners.linear import LinearState, RoundLog, running_sum, running_value
from .core import Tracker, _round_loss

__all__ = ["best_interval", "IntervalTracker"]


_BLOCK = 64  #: starts per block of the lower-bound pass


@numba.njit(cache=True, nogil=True)
def _best_interval(loss: np.ndarray, upd: np.ndarray, max_updates: int, C: float) -> tuple[int, int, float, int]:
    m = loss.shape[0]
    Q = np.zeros(m + 1, np.int64)
    P = np.zeros(m + 1, np.float64)
    for i in range(m):
        Q[i + 1] = Q[i] + upd[i]
        P[i + 1] = P[i] + loss[i]
    # The last round of the longest interval from every start a (updates in
    # rounds a..b-1 are Q[b] - Q[a]).
    bmax = np.empty(m, np.int64)
    b_hi = 0
    for a in range(m):
        if b_hi < a:
            b_hi = a
        while b_hi + 1 < m and Q[b_hi + 1] - Q[a] <= max_updates:
            b_hi += 1
        bmax[a] = b_hi
    # Lower bound of beta over every interval starting in a block [a0, a1): an
    # interval of length n from a in the block has loss sum
    # P[a+n] - P[a] >= P[a0+n] - P[a1] (losses are >= 0).
    n_blocks = (m + _BLOCK - 1) // _BLOCK
    lb = np.empty(n_blocks, np.float64)
    for k in range(n_blocks):
        a0 = k * _BLOCK
        a1 = min(m, a0 + _BLOCK)
        nb = 0
        for a in range(a0, a1):
            nb = max(nb, bmax[a] - a + 1)
        nb = min(nb, m - a0)
        low = math.inf
        for n in range(1, nb + 1):
            lo_sum = P[a0 + n] - P[a1]
            v = (lo_sum if lo_sum > 0.0 else 0.0) / n + C / math.sqrt(n)
            if v < low:
                low = v
        lb[k] = low
    # Exact scans, most promising blocks first, until no block can win.
    best = math.inf
    ba = 0
    bb = 0
    evaluated = 0
    for k in np.argsort(lb, kind="mergesort"):
        # 1e-12 slack: the bound and the scan round differently.
        if lb[k] * (1.0 - 1e-12) > best:
            break
        for a in range(k * _BLOCK, min(m, (k + 1) * _BLOCK)):
            b_hi = bmax[a]
            nmax = b_hi - a + 1
            tail = C / math.sqrt(nmax)
            if tail > best:  # every interval from a has beta >= C / sqrt(n) >= this
                continue
            s = 0.0
            for b in range(a, b_hi + 1):
                s += loss[b]
                n = b - a + 1
                v = s / n + C / math.sqrt(n)
                evaluated += 1
                if v < best or (v == best and (a < ba or (a == ba and b < bb))):
                    best = v
                    ba = a
                    bb = b
                # Longer intervals from a have a loss sum >= s and n <= nmax, so
                # beta >= s / nmax + C / sqrt(nmax) (exactly so in floating point).
                if s / nmax + tail > best:
                    break
    return ba, bb, best, evaluated


def best_interval(loss: np.ndarray, updated: np.ndarray, max_updates: int, C: float) -> tuple[int, int, float]:
    """``(a, b, beta)``: the interval ``{a..b}`` of hypotheses (rounds ``a+1..b+1``)
    with at most ``max_updates`` updates among ``h_a..h_b`` (``sum(updated[a:b])``)
    minimising ``beta = mean(loss[a:b+1]) + C / sqrt(b - a + 1)``; the first in
    (a, b) order on ties.

    Exact, by branch and bound: a lower bound of beta for every block of 64
    starts (O(m W / 64), W the rounds spanned by ``max_updates + 1``
    hypotheses), then exact scans of the blocks, most promising first, until no
    remaining block's bound beats the best; inside a block, a start whose
    longest interval cannot win is skipped and a scan stops once no longer
    interval can.  Worst case O(m W).
    """
    loss = np.ascontiguousarray(loss, dtype=np.float64)
    upd = np.ascontiguousarray(updated, dtype=np.uint8)
    if len(loss) == 0:
        raise ValueError("empty summary: no rounds were observed")
    if len(upd) != len(loss):
        raise ValueError(f"{len(upd)} update flags for {len(loss)} losses")
    if max_updates < 0:
        raise ValueError(f"max_updates must be non-negative, got {max_updates!r}")
    # More than m updates never binds; clamping keeps a huge int within int64.
    a, b, v, _ = _best_interval(loss, upd, int(min(max_updates, len(loss))), float(C))
    return int(a), int(b), float(v)


class IntervalTracker(Tracker):
    """Interval averaging by replay: pass 1 keeps losses and update flags and
    chooses ``[start_, stop_]``; pass 2 sums ``h_start_ .. h_stop_``."""

    passes = 2

    def __init__(self, max_updates: int = 500, C: float = 3.0, loss: str = "zero_one") -> None:
        super().__init__(loss)
        self.max_updates = int(max_updates)
        self.C = float(C)
        self.pass_ = 1
        self._loss: list[np.ndarray] = []
        self._upd: list[np.ndarray] = []
        self.start_: int | None = None
        self.stop_: int | None = None
        self.beta_: float | None = None
        self.n_updates_in_: int | None = None
        self._value: np.ndarray | None = None

    def observe(self, state: LinearState, log: RoundLog, lo: int, hi: int, age0: int) -> None:
        if self.pass_ == 1:
            self._loss.append(_round_loss(log, self.loss, lo, hi))
            self._upd.append(log.updated[lo:hi].copy())
        elif self.acc is not None and int(state.n_rounds[0]) == self.stop_ + 1:
            self._value = running_value(self.acc, state) / self.acc.count
            self.acc = None  # nothing more to sum

    def plan(self, state: LinearState) -> None:
        loss = np.concatenate(self._loss) if self._loss else np.zeros(0)
        upd = np.concatenate(self._upd) if self._upd else np.zeros(0, np.uint8)
        self.start_, self.stop_, self.beta_ = best_interval(loss, upd, self.max_updates, self.C)
        self.n_updates_in_ = int(upd[self.start_:self.stop_].sum())
        self._loss, self._upd = [], []
        self.pass_ = 2

    def begin(self, state: LinearState) -> None:
        if self.pass_ == 2:
            self.acc = running_sum(state, start=self.start_)
            self._value = None

    def boundaries(self, first_round: int, n: int) -> list[int]:
        if self.pass_ == 2:
            return [self.stop_ + 1 - first_round]
        return []

    def finalize(self, state: LinearState) -> np.ndarray:
        if self._value is None:
            raise RuntimeError("interval averaging needs its replay pass (plan(), then run again)")
        return self._value

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._loss) + sum(a.nbytes for a in self._upd)
