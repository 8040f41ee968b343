"""Compiled rounds of the kernel Online Bayes Point Machine: N kernel learners, one pool.

Harrington et al. (2003, section 3) note that with kernels "the kernel values
K(x, x_t) are the same for all N perceptrons".  This engine runs N members of
one kernel rule (:mod:`distlearn.learners._budget`) over a chunk, sharing:

* one **pool** of cached patterns -- the union of the members' caches.  A
  pattern enters the pool the first time a member inserts it in a round (once
  per round, however many members insert it) and leaves when no member holds
  it (``pref`` counts the members holding it);
* one **kernel row** per example, ``kpool[i] = k(x_pool_i, x_t)`` for the live
  pool, computed ``ROW_BLOCK`` rounds at a time as the single learner does (up to ``SUB_BLOCKS`` of
  them at a block's start without a budget: each member's coefficients are then read once per
  six of the ~38 rounds of 128 it is shown).

Each member keeps its own *slots* exactly like the single learner's cache --
pool index, coefficients ``A[j, s, :]``, incremental scores ``F[j, s, :]``,
self-kernel, class, birth round (its own round counter) -- so its removal
tests, removals and budget are the single learner's, applied to the examples
it was shown: every member is bit for bit the single kernel learner run on its
examples (a kernel value is one function of its pair, the same bits whichever
block or pool slot computes it -- :func:`~distlearn.learners._budget._block_rows` -- and every
sum runs over the member's slots in insertion order).  The budget (None,
DistillCache, fixed size) is therefore each member's own; the pool is their
union.

``Abar[i, :]`` is the sum of the members' coefficients of pool pattern ``i``:
the ensemble's margin ``sum_i Abar[i] kpool[i]`` scores the running Bayes
point on every example (the online error) at O(|pool| K) per round.

The entry point takes the state as one record (:class:`EnsembleCache`: the :class:`Pool` and
the :class:`Members`) and the rule, kernel and budget as the single learner's records
(:class:`~distlearn.learners._budget.StepRule`, ``KernelParams``, ``BudgetSpec``).  Round
counters: ``t_pool`` the ensemble's (``pool.meta[2]``, keys ``pool.key``, ``gborn``, ``gdied``),
``t_member`` member ``j``'s own (``members.meta[j, 2]``, keys ``born``, ``died``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .._config import NUMBA_FLAGS
from ..learners._budget import (
    BUDGET_FIXED,
    BUDGET_NONE,
    BUDGET_VARIABLE,
    REMOVE_MARGIN,
    REMOVE_RANDOM,
    ROW_BLOCK,
    SLOT_BLOCK,
    Mirror,
    _gathered_sums,
    _insert_scores,
    _block_nonzeros,
    _fill_block,
    _slot_dot_row,
    _kfin,
    _mirror_nonzeros,
    _mirror_row,
    _next_block,
    _next_mirrored,
    csr_work_rows,
    _pick_bounded,
    _remove_scores,
    _round_self_kernel,
    _steps,
    _victim,
)

__all__ = ["Pool", "Members", "EnsembleCache", "KernelEnsembleLog", "learn_kernel_ensemble_block"]

#: Kernel-row blocks (of ``ROW_BLOCK`` rounds) per block of the members' score sums without a budget: each
#: member's coefficients are read once per ``GATHER_ROWS`` of the rounds of the block it is shown (about
#: tau * 128), not once per 16 rounds (``benchmarks/README.md``, "Round 6").  With a budget a removal voids the
#: block's later sums, and the block stays ``ROW_BLOCK`` rounds.
SUB_BLOCKS = 8
#: The block's kernel rows against the pool (``blocks * ROW_BLOCK`` rows of the pool's capacity) take at most
#: this many bytes: a pool too large for ``SUB_BLOCKS`` gets fewer (at least one).
BLOCK_ROW_BYTES = 1 << 25
#: ... and at most ``SUB_DIM // n_features`` kernel-row blocks: a round computes the kernel values of the
#: patterns the pool gained since the block began one by one, a cost that grows with the block and the
#: features (LETTER, d = 16: 8 blocks best; Fashion-MNIST, d = 784: 1-2 blocks, 8 were 10 % slower).
SUB_DIM = 128


class Pool(NamedTuple):
    """The patterns the members hold, each once (module docstring)."""

    S: np.ndarray      #: (pool, d) the patterns; (pool, 0) for a sparse store (the mirror ``Z`` holds every one)
    sq: np.ndarray     #: (pool,) their squared norms
    kd: np.ndarray     #: (pool,) their self-kernels
    lab: np.ndarray    #: (pool,) classes
    key: np.ndarray    #: (pool,) the ensemble round of insertion
    ref: np.ndarray    #: (pool,) members holding the pattern
    alive: np.ndarray  #: (pool,) bool
    meta: np.ndarray   #: int64 [n_pool_slots, n_pool_alive, t_pool]
    Abar: np.ndarray   #: (pool, K) the members' coefficients summed
    Z: Mirror          #: the patterns' nonzeros by pool slot (on for sparse rows: kernel rows cost them, not d)
    tid: np.ndarray    #: (pool,) int64 the global index of the slot's training row (-1: unknown)
    canon: np.ndarray  #: (pool,) int64 the first live slot holding the same row (itself: its kernel values computed)


class Members(NamedTuple):
    """The members' slots: row ``j`` of each array is member ``j``'s cache, as the single learner's."""

    pidx: np.ndarray   #: (N, slots) pool index of the slot's pattern
    A: np.ndarray      #: (N, slots, K) coefficients
    F: np.ndarray      #: (N, slots, K) scores (kept under margin removal)
    kd: np.ndarray     #: (N, slots) self-kernels
    lab: np.ndarray    #: (N, slots) classes
    born: np.ndarray   #: (N, slots) insertion, in the member's rounds
    died: np.ndarray   #: (N, slots) removal, in the member's rounds (-1 while live)
    gborn: np.ndarray  #: (N, slots) insertion, in the ensemble's rounds
    gdied: np.ndarray  #: (N, slots) removal, in the ensemble's rounds
    alive: np.ndarray  #: (N, slots) bool
    meta: np.ndarray   #: int64 (N, 3): [n_slots, n_alive, t_member]


class EnsembleCache(NamedTuple):
    """The kernel OBPM's state as the engine takes it."""

    pool: Pool
    members: Members


class KernelEnsembleLog(NamedTuple):
    """Per round of a chunk: the ensemble's summed member scores before the round (``(rounds, K)``),
    member insertions, member removals and the live pool size after the round."""

    margin: np.ndarray
    updates: np.ndarray
    removed: np.ndarray
    pool_size: np.ndarray


@njit(inline="always", **NUMBA_FLAGS)
def _member_remove(j, v, t_member, t_pool, kern, mode, pool, mem, bounded, ub, keep_scores, cols, Dp, Dn, xw):
    """Member ``j`` removes its slot ``v`` (the single learner's removal, over the pool's rows; with
    ``bounded``, its margin bounds grow as the single learner's do).  ``xw``: ``d`` zeros, the scratch row a
    sparse store's removed pattern is densified into (empty otherwise)."""
    K = mem.A.shape[2]
    A = mem.A
    pv = mem.pidx[j, v]
    # with the pool's mirror on, the removed pattern's kernel row costs the other patterns' nonzeros (the same
    # bits); a sparse store's pattern goes through the scratch row (learners/_budget.py: _remove_scores)
    _remove_scores(v, mem.meta[j, 0] if keep_scores else 0, kern, mode, K, pool.S, pool.sq, mem.pidx[j], A[j], mem.F[j],
                   mem.lab[j], mem.alive[j], bounded, ub[j], cols, Dp, Dn, pool.Z, xw)
    mem.alive[j, v] = False
    mem.died[j, v] = t_member
    mem.gdied[j, v] = t_pool
    mem.meta[j, 1] -= 1
    pool.ref[pv] -= 1
    if pool.ref[pv] == 0:
        pool.alive[pv] = False
        pool.meta[1] -= 1
        for k in range(K):
            pool.Abar[pv, k] = 0.0
        if pool.canon[pv] == pv:  # the copies of its row read their kernel values from the next live one
            first = -1
            for q in range(pv + 1, pool.meta[0]):
                if pool.alive[q] and pool.canon[q] == pv:
                    if first < 0:
                        first = q
                    pool.canon[q] = first
    else:
        for k in range(K):
            pool.Abar[pv, k] -= A[j, v, k]


@njit(inline="always", **NUMBA_FLAGS)
def _add_terms(out, K, A, alive, idx, kv, lo, hi):
    """``out[k] += A[i, k] kv[idx[i]]`` for the live slots ``lo <= i < hi`` in order (a score sum's tail, or all
    of it); returns whether every ``out[k]`` is finite."""
    for i in range(lo, hi):
        if alive[i]:
            v = kv[idx[i]]
            for k in range(K):
                out[k] += A[i, k] * v
    ok = True
    for k in range(K):
        ok = ok and math.isfinite(out[k])
    return ok


@njit(inline="always", **NUMBA_FLAGS)
def _block_sum(out, blocked, K, A, alive, idx, kv, at, hi):
    """A score sum over the live slots ``< hi``: ``out`` holds the block's sum over the slots ``< at``
    (``blocked``), to which the slots since are added; else, or when that is not finite (a dead slot's
    non-finite coefficient times 0), the sum over the live slots one by one.  Returns whether it is finite."""
    if not blocked:
        for k in range(K):
            out[k] = 0.0
    if blocked and _add_terms(out, K, A, alive, idx, kv, at, hi):
        return True
    for k in range(K):
        out[k] = 0.0
    return _add_terms(out, K, A, alive, idx, kv, 0, hi)


@njit(**NUMBA_FLAGS)
def learn_kernel_ensemble_block(X, y, order, mask, uniforms, rule, kern, budget, mode, e, log, R, rtid):
    """All rounds of one block, in ``order``; member ``j`` is shown round ``ii`` iff ``mask[ii, j]``.

    ``rtid[ii]``: the global index of round ``ii``'s row.  The pool holds a row once per pooling (members
    insert it in different rounds and passes: 1,500 text rows, 10 passes, 20 members: 8,249 slots of 1,470
    rows), so a slot whose row a live earlier slot holds (``pool.canon``) copies that slot's kernel values
    instead of computing them: the same bits (a kernel value is one function of its pair).

    ``R`` (:class:`~distlearn.learners._budget.Rows`): empty for dense rows ``X``; else the rounds' CSR rows,
    read by their nonzeros as the single learner reads them (a mirrored pool only: kernel rows over the
    nonzeros, ``X`` the ``ROW_BLOCK``-row scratch each block of rounds is densified into, :func:`_fill_block`),
    so no piece of ``d``-wide rows is ever built.

    ``e`` the state (:class:`EnsembleCache`), ``rule``, ``kern``, ``budget`` the single learner's
    records, ``mode`` its score mode (K = the columns of ``members.A``).  ``uniforms[ii, j]`` is
    member ``j``'s random-removal draw for round ``ii`` (fixed budget, random removal; read only
    then).  The caller guarantees room for ``len(order)`` more pool and member slots.

    Per round (:class:`KernelEnsembleLog`): ``margin[ii]`` the summed member scores of the example
    before the round (``Abar`` form), ``updates`` member insertions, ``removed`` member removals,
    ``pool_size`` the live pool.  Returns -1, or the position of the first round with a non-finite
    score (not applied), or ``-2 - i`` when round ``i``'s row has no room in a sparse store's mirror (not
    applied; the driver reserves the room first, so this is a broken invariant, never a silent zero row).
    """
    pool, mem = e.pool, e.members
    PS, palive, pmeta, Abar = pool.S, pool.alive, pool.meta, pool.Abar
    A, F, pidx, alive, mmeta = mem.A, mem.F, mem.pidx, mem.alive, mem.meta
    d = X.shape[1]
    N = mask.shape[1]
    K = A.shape[2]
    # rounds per block: without a budget up to SUB_BLOCKS kernel-row blocks (no removal voids a block's sums, and
    # a member shown ~tau * 128 rounds reads its coefficients once per GATHER_ROWS of them); with one, ROW_BLOCK
    nsub = 1
    if budget.code == BUDGET_NONE:
        nsub = max(1, min(SUB_BLOCKS, SUB_DIM // max(1, d),
                          BLOCK_ROW_BYTES // (ROW_BLOCK * 8 * max(1, PS.shape[0]))))
    blk = nsub * ROW_BLOCK
    Z = pool.Z
    mirrored = Z.m[1] > 0
    store = PS.shape[1] == 0  # a sparse store: the mirror alone holds the patterns
    csr = R.p.shape[0] > 0
    # as the single learner's engine: with CSR rows the gathered block has a row per nonzero of a block (and the
    # zero row, last), and the column map and the removal's scratch row are the caller's (no call costs d)
    Xt = np.zeros((csr_work_rows(_block_nonzeros(R, order.shape[0]), d) if csr and mirrored else d + 1, ROW_BLOCK),
                  dtype=np.float64)
    if csr:
        xw = R.xw if store else R.xw[:0]
        cmap = R.cmap if mirrored else R.cmap[:0]  # _next_mirrored's column positions (-1: none)
    else:
        xw = np.zeros(d if store else 0, dtype=np.float64)
        cmap = np.full(d if mirrored else 0, -1, dtype=np.int32)
    used = np.zeros(Xt.shape[0] if mirrored else 0, dtype=np.int64)
    sqt = np.zeros(ROW_BLOCK, dtype=np.float64)
    G = np.zeros((blk, PS.shape[0]), dtype=np.float64)
    acc = np.zeros((SLOT_BLOCK, ROW_BLOCK), dtype=np.float64)
    live = np.zeros(PS.shape[0], dtype=np.int64)
    calc = np.zeros(PS.shape[0], dtype=np.bool_)  # the live slots whose kernel values are computed (canonical)
    dups = np.zeros(PS.shape[0], dtype=np.int64)  # the live slots that copy theirs
    canon = pool.canon
    kpool = G[0]  # the round's kernel row against the pool (a row of G, the slots since the block's start added)
    m = np.zeros(K, dtype=np.float64)
    steps = np.zeros(K, dtype=np.float64)
    work = np.zeros(K, dtype=np.float64)
    dummy = np.zeros(0, dtype=np.float64)
    # F read only under margin removal, whose margins are tested against bounds first (_pick_bounded)
    keep_scores = budget.code == BUDGET_VARIABLE or (budget.code == BUDGET_FIXED and budget.removal == REMOVE_MARGIN)
    bounded = keep_scores
    random_removal = budget.code == BUDGET_FIXED and budget.removal == REMOVE_RANDOM
    ub = np.full((A.shape[0], A.shape[1]) if bounded else (0, 0), np.inf)
    cols = np.zeros(K, dtype=np.int64)  # the nonzero columns of an update (a zero changes no score)
    cand = np.zeros(A.shape[1] if bounded else 0, dtype=np.int64)  # scratch of _pick_bounded
    Dp = np.zeros(max(K, 2), dtype=np.float64)  # margin-bound growth per unit kernel value, by class
    Dn = np.zeros(max(K, 2), dtype=np.float64)
    n0 = 0
    b0 = 0
    n_order = order.shape[0]
    # Score sums a block at a time (each bit for bit the per-round sum, as the single learner's,
    # :func:`~distlearn.learners._budget._score_rows`): at a block's start, the ensemble margins of its rows
    # over the live pool (Me) and each member's scores of its shown rows over its live slots (Mj), each read of
    # Abar or A[j] feeding up to GATHER_ROWS = 6 rounds, a member's kernel values gathered from the pool's rows
    # through pidx (_gathered_sums); a round adds the slots appended since.  A removal (which moves
    # Abar of a pool slot and takes a member slot out of the middle of its order) ends the block sums of the
    # ensemble and of that member: their later rounds in the block sum over the slots one by one.
    Me = np.zeros((blk, K), dtype=np.float64)
    Mj = np.zeros((N, blk, K), dtype=np.float64)
    Mt = np.zeros(blk * K, dtype=np.float64)
    gflat = G.reshape(blk * PS.shape[0])  # the block's kernel rows, row b at b * pool capacity
    offs_all = np.arange(blk) * PS.shape[0]
    offs = np.zeros(blk, dtype=np.int64)
    rows_j = np.zeros(blk, dtype=np.int64)
    me_ok = False
    mj_ok = np.zeros(N, dtype=np.bool_)
    mj_at = np.zeros(N, dtype=np.int64)
    ident = np.arange(PS.shape[0])  # pool slot i's kernel value is kpool[i]
    for ii in range(n_order):
        if ii % blk == 0:
            b0 = ii
            n0 = pmeta[0]
            nb = min(blk, n_order - ii)
            nd = 0
            for i in range(n0):
                calc[i] = palive[i] and canon[i] == i
                if palive[i] and canon[i] != i:
                    dups[nd] = i
                    nd += 1
            for sb in range(0, nb, ROW_BLOCK):  # the kernel rows against the pool as it stands at the block's start
                if mirrored:  # each pattern's nonzeros against the block's columns: the same bits
                    _next_mirrored(kern, X, order, ii + sb, PS, pool.sq, calc, n0, Z, sqt, G[sb:sb + ROW_BLOCK], Xt,
                                   acc, cmap, used, R)
                else:
                    _next_block(kern, X, order, ii + sb, PS, pool.sq, calc, n0, Xt, sqt, G[sb:sb + ROW_BLOCK], acc,
                                live)
            for q in range(nd):  # a copy of a row: its canonical slot's values (canonical slots come first)
                i = dups[q]
                for b in range(nb):
                    G[b, i] = G[b, canon[i]]
            # the ensemble margins over the live pool, and each member's scores of its shown rows over its live
            # slots, their kernel values gathered from the pool's rows (_gathered_sums: one read of Abar, of A[j],
            # per six rows)
            _gathered_sums(Abar, ident, palive, n0, gflat, offs_all, 0, nb, Me.reshape(blk * K))
            me_ok = True
            for j in range(N):
                nr = 0
                for b in range(nb):
                    if mask[ii + b, j]:
                        rows_j[nr] = b
                        offs[nr] = offs_all[b]
                        nr += 1
                mj_ok[j] = nr > 0
                if nr == 0:
                    continue
                nj = mmeta[j, 0]
                mj_at[j] = nj
                _gathered_sums(A[j], pidx[j], alive[j], nj, gflat, offs, 0, nr, Mt)
                for q in range(nr):
                    for k in range(K):
                        Mj[j, rows_j[q], k] = Mt[q * K + k]
        if csr and ii % ROW_BLOCK == 0 and not store:  # a store reads its rows from R alone (_slot_dot_row)
            _fill_block(R.buf, R, ii, n_order)  # R.buf is X: this block's rows, densified
        r = order[ii]
        x = X[r]
        yc = y[R.order[ii] if csr else r]
        t_pool = pmeta[2]
        ok, sqx, kxx = _round_self_kernel(kern, x, R, ii, csr)
        if not ok:
            return ii
        if store and Z.i.shape[0] - Z.m[0] < d:  # room for the row in the mirror before any member acts
            nz = 0
            if csr:
                nz = R.p[R.order[ii] + 1] - R.p[R.order[ii]]
            else:
                for jj in range(d):
                    if x[jj] != 0.0:
                        nz += 1
            if Z.i.shape[0] - Z.m[0] < nz:
                return -2 - ii
        n_pool = pmeta[0]
        kpool = G[ii - b0]  # the round's kernel row against the pool: the block's values for the live slots < n0
        for i in range(n0, n_pool):
            if palive[i]:
                if canon[i] != i:  # its row's canonical slot is earlier: already in kpool
                    kpool[i] = kpool[canon[i]]
                else:
                    kpool[i] = _kfin(kern, _slot_dot_row(Z, i, PS, x, R, R.order[ii] if csr else 0), pool.sq[i],
                                     sqx)  # _kval's bits
        finite = math.isfinite(kxx)
        if me_ok:
            for k in range(K):
                log.margin[ii, k] = Me[ii - b0, k]
        finite = _block_sum(log.margin[ii], me_ok, K, Abar, palive, ident, kpool, n0, n_pool) and finite
        if not finite:
            return ii
        pt = -1  # the pool slot of x_t once a member inserts it
        n_upd = 0
        n_rem = 0
        for j in range(N):
            if not mask[ii, j]:
                continue
            t_member = mmeta[j, 2]
            n_slots = mmeta[j, 0]
            if mj_ok[j]:
                for k in range(K):
                    m[k] = Mj[j, ii - b0, k]
            if not _block_sum(m, mj_ok[j], K, A[j], alive[j], pidx[j], kpool, mj_at[j], n_slots):
                return ii
            fire = _steps(rule, mode, K, m, yc, kxx, steps, work, dummy)
            if fire:
                if budget.code == BUDGET_FIXED and mmeta[j, 1] >= budget.size:
                    u = uniforms[ii, j] if random_removal else 0.0
                    v = _victim(budget.removal, n_slots, mmeta[j, 1], u, mode, K, A[j], F[j], mem.kd[j], mem.lab[j],
                                mem.born[j], alive[j], ub[j], cand)
                    for k in range(K):
                        m[k] -= A[j, v, k] * kpool[pidx[j, v]]
                    _member_remove(j, v, t_member, t_pool, kern, mode, pool, mem, bounded, ub, keep_scores, cols,
                                   Dp, Dn, xw)
                    n_rem += 1
                    mj_ok[j] = False
                    me_ok = False
                if pt < 0:
                    pt = pmeta[0]
                    if not store:
                        for jj in range(d):
                            PS[pt, jj] = x[jj]
                    if csr and store:  # a store has room (checked at the round's start)
                        _mirror_nonzeros(Z, pt, R.j, R.k, R.v, R.p[R.order[ii]], R.p[R.order[ii] + 1])
                    else:
                        _mirror_row(Z, pt, x)
                    pool.sq[pt] = sqx
                    pool.kd[pt] = kxx
                    pool.lab[pt] = yc
                    pool.key[pt] = t_pool
                    pool.ref[pt] = 0
                    pool.tid[pt] = rtid[ii]
                    pool.canon[pt] = pt
                    for q in range(pt):  # an earlier live slot of the same row: its kernel values serve this one
                        if palive[q] and pool.tid[q] == rtid[ii] and canon[q] == q and rtid[ii] >= 0:
                            pool.canon[pt] = q
                            break
                    palive[pt] = True
                    kpool[pt] = kxx
                    for k in range(K):
                        Abar[pt, k] = 0.0
                    pmeta[0] = pt + 1
                    pmeta[1] += 1
                elif not palive[pt]:  # an earlier member inserted x_t this round and distilled it away
                    palive[pt] = True
                    pmeta[1] += 1
                    pool.canon[pt] = pt  # its canonical slot may have left since: look again
                    for q in range(pt):
                        if palive[q] and pool.tid[q] == rtid[ii] and canon[q] == q and rtid[ii] >= 0:
                            pool.canon[pt] = q
                            break
                s = mmeta[j, 0]
                pidx[j, s] = pt
                mem.kd[j, s] = kxx
                mem.lab[j, s] = yc
                mem.born[j, s] = t_member
                mem.died[j, s] = -1
                mem.gborn[j, s] = t_pool
                mem.gdied[j, s] = -1
                for k in range(K):
                    A[j, s, k] = steps[k]
                if keep_scores:
                    _insert_scores(n_slots, mode, K, steps, kpool, pidx[j], F[j], mem.lab[j], alive[j], bounded, ub[j],
                                   cols, Dp, Dn)
                for k in range(K):
                    Abar[pt, k] += steps[k]
                if keep_scores:  # else F is stale (the driver's scores_kept) and its pages stay untouched
                    for k in range(K):
                        F[j, s, k] = m[k] + steps[k] * kxx
                alive[j, s] = True
                pool.ref[pt] += 1
                mmeta[j, 0] = s + 1
                mmeta[j, 1] += 1
                n_upd += 1
                if bounded:
                    ub[j, s] = np.inf
                if budget.code == BUDGET_VARIABLE:
                    while True:
                        v = _pick_bounded(mmeta[j, 0], mode, K, A[j], F[j], mem.kd[j], mem.lab[j], mem.born[j],
                                          alive[j], rule.beta, ub[j], cand)
                        if v < 0:
                            break
                        _member_remove(j, v, t_member, t_pool, kern, mode, pool, mem, bounded, ub, keep_scores,
                                       cols, Dp, Dn, xw)
                        n_rem += 1
                        mj_ok[j] = False
                        me_ok = False
            mmeta[j, 2] = t_member + 1
        log.updates[ii] = n_upd
        log.removed[ii] = n_rem
        log.pool_size[ii] = pmeta[1]
        pmeta[2] = t_pool + 1
    return -1
