"""Pure-Python oracles of the adaptive linear rules (tests only).

Each rule is transcribed from its paper's algorithm box, one example at a time,
with Python floats and no numba, in the conventions of ``tests/naive.py``
(the bias is an extra constant feature, last; margins are sequential sums in
column order; one weight list per output column; one-vs-rest with K columns).

* AROW, diagonal -- Crammer, Kulesza & Dredze, "Adaptive regularization of
  weight vectors" (NIPS 2009), Fig. 1 with a diagonal Sigma (init 1): when
  ``y w.x < 1``: ``beta = 1 / (x^T Sigma x + r)``, ``alpha = (1 - y w.x) beta``,
  ``w += alpha y Sigma x``, ``Sigma_i -= beta Sigma_i^2 x_i^2`` (computed as
  ``Sigma_i (1 - beta Sigma_i x_i^2)``, the same number up to rounding).
* NAG -- Ross, Mineiro & Langford, "Normalized online learning" (UAI 2013),
  Algorithm 2: per round, new maxima ``s_i`` (rescaling ``w_i`` by
  ``s_i / |x_i|``), ``N += sum_i x_i^2 / s_i^2``, prediction, then
  ``G_i += g_i^2`` and ``w_i -= eta sqrt(t/N) g_i / (s_i sqrt(G_i))`` for the
  hinge or logistic loss.

Logged per round: the mistake and hinge loss of the weights *before* the round
(for NAG: before the rescale, see :mod:`distlearn.learners._adaptive`), and
whether any weight changed.  Every run also returns the weights after every
round (``trace``), which the kernel tests compare round by round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from tests.naive import sparse_row

__all__ = ["ADAPTIVE_ORACLES", "AdaptiveRun", "naive_adaptive_run"]


class AdaptiveRun(NamedTuple):
    coef: list[list[float]]          #: (K, d) final weights
    intercept: list[float]           #: (K,) final bias weights
    stats: list[list[float]]         #: (K, d + 1): AROW's Sigma, NAG's G (bias last)
    s: list[float]                   #: NAG's max |x_i| (d + 1), empty for AROW
    tN: tuple[float, float]          #: NAG's t and N
    mistake: list[int]
    hinge: list[float]
    updated: list[int]
    n_updates: list[int]
    trace: list[list[list[float]]]   #: weights (K, d + 1) after every round
    average: list[list[float]]       #: (1 / (m + 1)) sum_{i=0}^{m} h_i, (K, d + 1)


def _dot(w: list[float], x: list[tuple[int, float]]) -> float:
    s = 0.0
    for j, v in x:
        s += w[j] * v
    return s


def _arow_step(w, sig, x, y, m, *, r):
    """One column of AROW; returns whether it updated."""
    z = y * m
    if not (1.0 - z > 0.0):
        return False
    v = 0.0
    for j, xv in x:
        v += sig[j] * (xv * xv)
    beta = 1.0 / (v + r)
    alpha = (1.0 - z) * beta
    for j, xv in x:
        sj = sig[j]
        w[j] = w[j] + alpha * y * (sj * xv)
        sig[j] = sj * (1.0 - beta * sj * (xv * xv))
    return True


def _nag_step(w, G, s, x, y, m, t, N, *, loss, eta):
    """One column of NAG's gradient step (after the rescale); returns whether a weight changed."""
    z = y * m
    if loss == "hinge":
        lp = -y if z < 1.0 else 0.0
    else:
        lp = -y / (1.0 + math.exp(z))
    if lp == 0.0 or N <= 0.0:
        return False
    c = eta * math.sqrt(t / N)
    changed = False
    for j, xv in x:
        g = lp * xv
        G[j] += g * g
        old = w[j]
        w[j] = old - c * g / (s[j] * math.sqrt(G[j]))
        changed = changed or w[j] != old
    return changed


def naive_adaptive_run(name: str, params: dict[str, Any], X_rows: Sequence[Sequence[Any]], y: Sequence[int],
                       n_outputs: int, fit_intercept: bool = False, bias: float = 1.0) -> AdaptiveRun:
    """Run ``arow(r)`` or ``nag(loss, eta)`` over dense rows in order, from zero weights."""
    X_rows = [[float(v) for v in row] for row in X_rows]
    d = len(X_rows[0])
    K = int(n_outputs)
    W = [[0.0] * (d + 1) for _ in range(K)]
    stats = [[1.0 if name == "arow" else 0.0] * (d + 1) for _ in range(K)]
    s = [0.0] * (d + 1) if name == "nag" else []
    t = 0.0
    N = 0.0
    n_updates = [0] * K
    mistake: list[int] = []
    hinge: list[float] = []
    updated: list[int] = []
    trace = []
    total = [[0.0] * (d + 1) for _ in range(K)]
    for row, label in zip(X_rows, y):
        label = int(label)
        x = sparse_row(row, fit_intercept, bias)
        if name == "nag":
            x = [(j, v) for j, v in x if v != 0.0]
        for k in range(K):
            for j in range(d + 1):
                total[k][j] += W[k][j]
        m = [_dot(W[k], x) for k in range(K)]
        ys = [(1.0 if label == 1 else -1.0)] if K == 1 else [1.0 if label == k else -1.0 for k in range(K)]
        if K == 1:
            mistake.append(int((1.0 if m[0] >= 0.0 else -1.0) != ys[0]))
            hinge.append(max(0.0, 1.0 - ys[0] * m[0]))
        else:
            best = max(range(K), key=lambda r: (m[r], -r))
            other = max(m[r] for r in range(K) if r != label)
            mistake.append(int(best != label))
            hinge.append(max(0.0, 1.0 - (m[label] - other)))
        upd = False
        if name == "arow":
            for k in range(K):
                if _arow_step(W[k], stats[k], x, ys[k], m[k], r=params["r"]):
                    n_updates[k] += 1
                    upd = True
        else:
            t += 1.0
            nx = 0.0
            for j, v in x:
                if abs(v) > s[j]:
                    if s[j] > 0.0:
                        for k in range(K):
                            if W[k][j] != 0.0:
                                W[k][j] = W[k][j] * (s[j] / abs(v))
                                upd = True
                    s[j] = abs(v)
                nx += (v / s[j]) ** 2
            N += nx
            m = [_dot(W[k], x) for k in range(K)]  # the paper's prediction, after the rescale
            for k in range(K):
                if _nag_step(W[k], stats[k], s, x, ys[k], m[k], t, N, loss=params["loss"], eta=params["eta"]):
                    n_updates[k] += 1
                    upd = True
        updated.append(int(upd))
        trace.append([list(wk) for wk in W])
    n = len(X_rows)
    avg = [[(total[k][j] + W[k][j]) / (n + 1) for j in range(d + 1)] for k in range(K)]
    return AdaptiveRun([wk[:d] for wk in W], [wk[d] for wk in W], stats, s, (t, N), mistake, hinge, updated,
                       n_updates, trace, avg)


#: The oracle of every adaptive rule (distlearn.learners.adaptive.ADAPTIVE_RULES), by name.
ADAPTIVE_ORACLES = {"arow": _arow_step, "nag": _nag_step}
