"""Compiled rounds of the kernel Online Bayes Point Machine: N kernel learners, one pool.

Harrington et al. (2003, section 3) note that with kernels "the kernel values
K(x, x_t) are the same for all N perceptrons".  This engine runs N members of
one kernel rule (:mod:`distlearn.learners._budget`) over a chunk, sharing:

* one **pool** of cached patterns -- the union of the members' caches.  A
  pattern enters the pool the first time a member inserts it in a round (once
  per round, however many members insert it) and leaves when no member holds
  it (``pref`` counts the members holding it);
* one **kernel row** per example, ``kpool[i] = k(x_pool_i, x_t)`` for the live
  pool, computed ``ROW_BLOCK`` rounds at a time as the single learner does.

Each member keeps its own *slots* exactly like the single learner's cache --
pool index, coefficients ``A[j, s, :]``, incremental scores ``F[j, s, :]``,
self-kernel, class, birth round (its own round counter) -- so its removal
tests, removals and budget are the single learner's, applied to the examples
it was shown: every member is bit for bit the single kernel learner run on its
examples (kernel values are the same bits however they are computed, and every
sum runs over the member's slots in insertion order).  The budget (None,
DistillCache, fixed size) is therefore each member's own; the pool is their
union.

``Abar[i, :]`` is the sum of the members' coefficients of pool pattern ``i``:
the ensemble's margin ``sum_i Abar[i] kpool[i]`` scores the running Bayes
point on every example (the online error) at O(|pool| K) per round.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._config import NUMBA_FLAGS
from ..learners._budget import (
    BUDGET_FIXED,
    BUDGET_VARIABLE,
    REMOVE_MARGIN,
    REMOVE_OLDEST,
    ROW_BLOCK,
    _bound_step,
    _bound_table,
    _grow_bound,
    _kval,
    _next_block,
    _pick_bounded,
    _out_of_range,
    _taus,
)

__all__ = ["learn_kernel_ensemble_block"]


@njit(inline="always", **NUMBA_FLAGS)
def _member_remove(j, v, tj, T, kernel, kp, K, mode, PS, psq, pref, palive, pmeta, Abar, pidx, A, F, labm, alive,
                   died, gdied, mmeta, bounded, ub, keep_scores, cols, Dp, Dn):
    """Member ``j`` removes its slot ``v`` (the single learner's removal, over the pool's rows; with
    ``bounded``, its margin bounds grow as the single learner's do)."""
    pv = pidx[j, v]
    xv = PS[pv]
    nz = 0
    for k in range(K):
        if A[j, v, k] != 0.0:
            cols[nz] = k
            nz += 1
    if bounded:
        _bound_table(mode, K, A[j, v], -1.0, Dp, Dn)
    for i in range(mmeta[j, 0] if keep_scores else 0):
        if alive[j, i] and i != v:
            pi = pidx[j, i]
            kv = _kval(kernel, kp, xv, PS[pi], psq[pv], psq[pi])
            for q in range(nz):
                F[j, i, cols[q]] -= A[j, v, cols[q]] * kv
            if bounded:
                _grow_bound(ub[j], i, _bound_step(Dp, Dn, labm[j, i], kv))
    alive[j, v] = False
    died[j, v] = tj
    gdied[j, v] = T
    mmeta[j, 1] -= 1
    pref[pv] -= 1
    if pref[pv] == 0:
        palive[pv] = False
        pmeta[1] -= 1
        for k in range(K):
            Abar[pv, k] = 0.0
    else:
        for k in range(K):
            Abar[pv, k] -= A[j, v, k]


@njit(**NUMBA_FLAGS)
def learn_kernel_ensemble_block(X, y, order, mask, uniforms, rule, p, beta, kernel, kp, K, mode, budget, n_budget,
                                removal, PS, psq, pkd, plab, pkey, pref, palive, pmeta, Abar, pidx, A, F, kdm,
                                labm, born, died, gborn, gdied, alive, mmeta, kpool, out_margin, out_updates,
                                out_removed, out_size):
    """All rounds of one dense block, in ``order``; member ``j`` is shown round ``ii`` iff ``mask[ii, j]``.

    Pool: rows ``PS``, squared norms ``psq``, self-kernels ``pkd``, classes
    ``plab``, ``pkey`` the ensemble round of insertion, ``pref`` holders,
    ``palive``; ``pmeta = [n_pool_slots, n_pool_alive, T]`` (``T`` the ensemble's
    round counter).  Members: ``(N, slots)`` arrays as in the module docstring,
    ``mmeta[j] = [n_slots, n_alive, t_j]``.  ``uniforms[ii, j]`` is member
    ``j``'s random-removal draw for round ``ii`` (fixed budget, removal 2).  The
    caller guarantees room for ``len(order)`` more pool and member slots.

    Per round: ``out_margin[ii]`` the summed member scores of the example
    before the round (``Abar`` form), ``out_updates`` member insertions,
    ``out_removed`` member removals, ``out_size`` the live pool.  Returns -1,
    or the position of the first round with a non-finite score (not applied).
    """
    d = X.shape[1]
    N = mask.shape[1]
    Xt = np.zeros((d, ROW_BLOCK), dtype=np.float64)
    G = np.zeros((ROW_BLOCK, PS.shape[0]), dtype=np.float64)
    acc = np.zeros(ROW_BLOCK, dtype=np.float64)
    m = np.zeros(K, dtype=np.float64)
    tau = np.zeros(K, dtype=np.float64)
    work = np.zeros(K, dtype=np.float64)
    dummy = np.zeros(0, dtype=np.float64)
    keep_scores = budget == BUDGET_VARIABLE or (budget == BUDGET_FIXED and removal == REMOVE_MARGIN)  # F read only then
    bounded = keep_scores  # removal margins tested against bounds first (_pick_bounded)
    ub = np.full((A.shape[0], A.shape[1]) if bounded else (0, 0), np.inf)
    cols = np.zeros(K, dtype=np.int64)  # the nonzero columns of an update (a zero changes no score)
    cand = np.zeros(A.shape[1] if bounded else 0, dtype=np.int64)  # scratch of _pick_bounded
    Dp = np.zeros(max(K, 2), dtype=np.float64)  # margin-bound growth per unit kernel value, by class
    Dn = np.zeros(max(K, 2), dtype=np.float64)
    n0 = 0
    b0 = 0
    n_order = order.shape[0]
    for ii in range(n_order):
        if ii % ROW_BLOCK == 0:
            b0 = ii
            n0 = pmeta[0]
            _next_block(kernel, kp, X, order, ii, PS, palive, n0, Xt, G, acc)
        r = order[ii]
        x = X[r]
        c = y[r]
        T = pmeta[2]
        sqx = 0.0
        for jj in range(d):
            sqx += x[jj] * x[jj]
        if _out_of_range(sqx, x, 0, d):
            return ii  # ||x||^2 overflowed or underflowed: every kernel value would be 0, 1 or inf
        kxx = _kval(kernel, kp, x, x, sqx, sqx)
        n_pool = pmeta[0]
        gb = G[ii - b0]
        for i in range(n0):
            if palive[i]:
                kpool[i] = gb[i]
        for i in range(n0, n_pool):
            if palive[i]:
                kpool[i] = _kval(kernel, kp, PS[i], x, psq[i], sqx)
        finite = math.isfinite(kxx)
        for k in range(K):
            out_margin[ii, k] = 0.0
        for i in range(n_pool):
            if palive[i]:
                kv = kpool[i]
                for k in range(K):
                    out_margin[ii, k] += Abar[i, k] * kv
        for k in range(K):
            finite = finite and math.isfinite(out_margin[ii, k])
        if not finite:
            return ii
        pt = -1  # the pool slot of x_t once a member inserts it
        n_upd = 0
        n_rem = 0
        for j in range(N):
            if not mask[ii, j]:
                continue
            tj = mmeta[j, 2]
            n_slots = mmeta[j, 0]
            for k in range(K):
                m[k] = 0.0
            for i in range(n_slots):
                if alive[j, i]:
                    kv = kpool[pidx[j, i]]
                    for k in range(K):
                        m[k] += A[j, i, k] * kv
            finite = True
            for k in range(K):
                finite = finite and math.isfinite(m[k])
            if not finite:
                return ii
            fire = _taus(rule, p, beta, mode, K, m, c, kxx, tau, work, dummy)
            if fire:
                if budget == BUDGET_FIXED and mmeta[j, 1] >= n_budget:
                    v = -1
                    if removal == REMOVE_MARGIN:
                        v = _pick_bounded(n_slots, mode, K, A[j], F[j], kdm[j], labm[j], born[j], alive[j], -np.inf,
                                          ub[j], cand)
                    elif removal == REMOVE_OLDEST:
                        for i in range(n_slots):
                            if alive[j, i] and (v < 0 or born[j, i] < born[j, v]):
                                v = i
                    else:
                        pos = int(math.floor(uniforms[ii, j] * mmeta[j, 1]))
                        if pos >= mmeta[j, 1]:
                            pos = mmeta[j, 1] - 1
                        seen = 0
                        for i in range(n_slots):
                            if alive[j, i]:
                                if seen == pos:
                                    v = i
                                    break
                                seen += 1
                    kv = kpool[pidx[j, v]]
                    for k in range(K):
                        m[k] -= A[j, v, k] * kv
                    _member_remove(j, v, tj, T, kernel, kp, K, mode, PS, psq, pref, palive, pmeta, Abar, pidx, A, F,
                                   labm, alive, died, gdied, mmeta, bounded, ub, keep_scores, cols, Dp, Dn)
                    n_rem += 1
                if pt < 0:
                    pt = pmeta[0]
                    for jj in range(d):
                        PS[pt, jj] = x[jj]
                    psq[pt] = sqx
                    pkd[pt] = kxx
                    plab[pt] = c
                    pkey[pt] = T
                    pref[pt] = 0
                    palive[pt] = True
                    kpool[pt] = kxx
                    for k in range(K):
                        Abar[pt, k] = 0.0
                    pmeta[0] = pt + 1
                    pmeta[1] += 1
                elif not palive[pt]:  # an earlier member inserted x_t this round and distilled it away
                    palive[pt] = True
                    pmeta[1] += 1
                s = mmeta[j, 0]
                pidx[j, s] = pt
                kdm[j, s] = kxx
                labm[j, s] = c
                born[j, s] = tj
                died[j, s] = -1
                gborn[j, s] = T
                gdied[j, s] = -1
                for k in range(K):
                    A[j, s, k] = tau[k]
                if keep_scores:
                    nz = 0
                    for k in range(K):
                        if tau[k] != 0.0:
                            cols[nz] = k
                            nz += 1
                    if bounded:
                        _bound_table(mode, K, tau, 1.0, Dp, Dn)
                    for i in range(n_slots):
                        if alive[j, i]:
                            kv = kpool[pidx[j, i]]
                            for q in range(nz):
                                F[j, i, cols[q]] += tau[cols[q]] * kv
                            if bounded:
                                _grow_bound(ub[j], i, _bound_step(Dp, Dn, labm[j, i], kv))
                for k in range(K):
                    F[j, s, k] = m[k] + tau[k] * kxx
                    Abar[pt, k] += tau[k]
                alive[j, s] = True
                pref[pt] += 1
                mmeta[j, 0] = s + 1
                mmeta[j, 1] += 1
                n_upd += 1
                if bounded:
                    ub[j, s] = np.inf
                if budget == BUDGET_VARIABLE:
                    while True:
                        v = _pick_bounded(mmeta[j, 0], mode, K, A[j], F[j], kdm[j], labm[j], born[j], alive[j], beta,
                                          ub[j], cand)
                        if v < 0:
                            break
                        _member_remove(j, v, tj, T, kernel, kp, K, mode, PS, psq, pref, palive, pmeta, Abar, pidx,
                                       A, F, labm, alive, died, gdied, mmeta, bounded, ub, keep_scores, cols, Dp, Dn)
                        n_rem += 1
            mmeta[j, 2] = tj + 1
        out_updates[ii] = n_upd
        out_removed[ii] = n_rem
        out_size[ii] = pmeta[1]
        pmeta[2] = T + 1
    return -1
