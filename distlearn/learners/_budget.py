"""Compiled rounds of the kernel online learners on a budget (one engine, rules by code).

The hypothesis is a cache of support patterns in *slots*: slot ``i`` holds the
row ``S[i]``, its self-kernel ``kd[i] = k(x_i, x_i)``, its squared norm
``sq[i]``, its class ``lab[i]``, its coefficients ``A[i, :]`` (one per output
column), and ``F[i, :]``, the current scores ``f(x_i)`` of the whole
hypothesis on it -- kept incrementally: an insertion adds ``u * k(x_t, x_i)``
(the kernel row the prediction of ``x_t`` computed anyway), a removal
subtracts ``a_v * k(x_v, x_i)`` (one kernel row of the removed pattern).  So
every removal test is O(1) per cached pattern and a budget round costs
O(|C|) kernel evaluations per insertion or removal, never O(|C|^2).

``F`` is kept only where a removal test reads it (DistillCache, a fixed cache removing by
margin); otherwise it is not updated and the driver marks it stale.

Slots are only appended within a call (``meta[0]`` is the high-water mark);
removed slots stay, marked dead with their death round, until the Python driver
compacts them between calls -- the averaged hypothesis needs their lifetimes.

The removal margin of a cached pattern ``p`` is its margin under the
hypothesis without its own term, ``g_k = F[p, k] - A[p, k] * kd[p]``:

* binary: ``mu_p = s_p * g_0`` (``s_p = +1`` for class 1, ``-1`` for class 0);
* native multiclass: ``mu_p = g_{c_p} - max_{r != c_p} g_r``;
* one-vs-rest: ``mu_p = min_{k : A[p, k] != 0} s_{p,k} * g_k``.

Budget codes: 0 none; 1 variable (DistillCache: after an insertion remove,
one at a time, the pattern of largest ``mu >= beta`` -- ties, within a relative
``TIE_RTOL``, to the earliest inserted -- until none is left); 2 fixed size
``n`` (before inserting into a full cache remove one pattern: removal 0 =
largest ``mu`` (Fig. 3), 1 = the oldest, 2 = the one at position
``floor(u_t * n)`` in insertion order, ``u_t`` the round's uniform draw; removal 3 =
merge, RBF only: *after* inserting into a full cache, replace two patterns by one,
:func:`_merge` -- BSGD's budget maintenance, Wang, Crammer & Vucetic 2012).

**The budget's average.**  Beside its coefficients ``A[i]`` each slot keeps ``Ac[i]``, the sum
over the hypotheses before its birth of the coefficients it inherited: 0 for an inserted example;
for a row updated while cached (it leaves and returns in one slot with the summed coefficients),
the leaving slot's sum ``Ac[v] + A[v] (t - born[v])``; for a merged pattern ``z``,
``(Ac[m] + A[m] (t - born[m])) k(x_m, z) + (Ac[n] + A[n] (t - born[n])) k(x_n, z)`` -- the merge's
projection applied to the summed coefficients.  A pattern born at round ``b`` is in the hypotheses
``h_{b+1} ..``, so after ``T`` rounds a live slot's sum over ``h_0 .. h_T`` is
``Ac[i] + A[i] (T - born[i])``, and dividing by ``T + 1`` gives an average of the online hypotheses
whose expansion is the cache's own patterns: without a budget, the average itself; with merging,
the average with every merge applied to the sums as it was to the coefficients; a pattern
*removed* (by margin, age, draw or DistillCache) takes its sum with it.  Only insertions and merges
write ``Ac`` (one ``K``-vector each): the rounds cost what they did.  Not defined for the Projectron,
whose projections change cached coefficients.  (Measured on LETTER it loses to the average projected
onto the final cache after the pass, which the estimators use: ``benchmarks/README.md``.)

The entry point takes records, read by name: the cache (:class:`Cache`), the rule
(:class:`StepRule`: ``rule.eta``, ``rule.beta``), the kernel (:class:`KernelParams`:
``kern.gamma``, ``kern.degree``, ``kern.coef0``), the budget (:class:`BudgetSpec`) and the
per-round outputs (:class:`BudgetLog`).  Names: ``steps[k]`` are the coefficients an update
gives the new pattern (``tau`` is OBPM's Bernoulli probability, nothing here); ``t`` is a round
counter.  The kernel OBPM (:mod:`distlearn.ensembles._budget`) runs the same round on each
member's slots through the helpers :func:`_self_kernel`, :func:`_steps`, :func:`_victim`,
:func:`_insert_scores`, :func:`_remove_scores` and :func:`_pick_bounded`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .._config import NUMBA_FLAGS
from ._kernels import (
    MC_MIRA,
    MC_PA,
    MC_PA1,
    MC_PA2,
    MIRA,
    PA,
    PA1,
    PA2,
    PERCEPTRON,
    _binary_step,
    _native_taus,
    _out_of_range,
)
from ._simd import GATHER_LANES, GATHER_ROWS, gather_sums

LINEAR_KERNEL = 0
POLY_KERNEL = 1
RBF_KERNEL = 2

MODE_BINARY = 0
MODE_OVR = 1
MODE_NATIVE = 2

BUDGET_NONE = 0
BUDGET_VARIABLE = 1
BUDGET_FIXED = 2
BUDGET_PROJECTRON = 3

REMOVE_MARGIN = 0
REMOVE_OLDEST = 1
REMOVE_RANDOM = 2
REMOVE_MERGE = 3

__all__ = [
    "LINEAR_KERNEL", "POLY_KERNEL", "RBF_KERNEL", "MODE_BINARY", "MODE_OVR", "MODE_NATIVE",
    "BUDGET_NONE", "BUDGET_VARIABLE", "BUDGET_FIXED", "BUDGET_PROJECTRON",
    "REMOVE_MARGIN", "REMOVE_OLDEST", "REMOVE_RANDOM", "REMOVE_MERGE", "GS_ITERS", "merge_step",
    "PERCEPTRON", "MIRA", "PA", "PA1", "PA2", "MC_MIRA", "MC_PA", "MC_PA1", "MC_PA2",
    "KernelParams", "StepRule", "BudgetSpec", "Cache", "Mirror", "Rows", "csr_work_rows", "fill_mirror", "BudgetLog", "learn_budget_block", "shared_dots", "shared_csr_dots", "key_columns", "rekey_table",
    "kernel_vote_counts", "kernel_finish", "kernel_scores",
]


# The records the compiled entry points take (numba types a NamedTuple by its fields: each call
# passes the same values the positional arguments did, read by name instead of by position).


class KernelParams(NamedTuple):
    """A kernel as the engine reads it: ``linear`` ``x.x'``, ``poly`` ``(gamma x.x' + coef0)^degree``,
    ``rbf`` ``exp(-gamma ||x - x'||^2)``."""

    code: int       #: LINEAR_KERNEL, POLY_KERNEL or RBF_KERNEL
    gamma: float
    degree: float
    coef0: float


class StepRule(NamedTuple):
    """A kernel rule's step as the engine reads it."""

    code: int           #: the linear registry's rule code (PERCEPTRON, MIRA, PA, ..., MC_PA2)
    params: np.ndarray  #: the registry's parameter vector, read by the shared steps of ``_kernels``
    eta: float          #: the perceptron's step (its coefficient is ``y eta``); unused by the other rules
    beta: float         #: the perceptron's update margin, and DistillCache's removal threshold


class BudgetSpec(NamedTuple):
    """What the cache may hold and how it makes room."""

    code: int        #: BUDGET_NONE, BUDGET_VARIABLE, BUDGET_FIXED or BUDGET_PROJECTRON
    size: int        #: the fixed cache's size (BUDGET_FIXED)
    removal: int     #: REMOVE_MARGIN, REMOVE_OLDEST, REMOVE_RANDOM or REMOVE_MERGE (BUDGET_FIXED)
    span_tol: float  #: the Projectron's ``eta``: a pattern within it of the cache's span is projected


class Cache(NamedTuple):
    """The single learner's cache (module docstring), one slot per row of each array."""

    S: np.ndarray      #: (slots, d) the patterns
    sq: np.ndarray     #: (slots,) their squared norms
    kd: np.ndarray     #: (slots,) their self-kernels k(x_i, x_i)
    A: np.ndarray      #: (slots, K) coefficients
    F: np.ndarray      #: (slots, K) scores f(x_i) of the whole hypothesis (kept under margin removal)
    lab: np.ndarray    #: (slots,) classes
    born: np.ndarray   #: (slots,) round of insertion
    died: np.ndarray   #: (slots,) round of removal, -1 while live
    alive: np.ndarray  #: (slots,) bool
    meta: np.ndarray   #: int64 [n_slots, n_alive, t]: high-water mark, live slots, the learner's round counter
    Kinv: np.ndarray   #: the Projectron's inverse Gram matrix of the cache ((1, 1) otherwise)
    Ac: np.ndarray     #: (slots, K) the sum of coefficients carried into the slot at its birth (module docstring)
    Z: "Mirror"        #: the patterns' nonzeros (:class:`Mirror`)


class Mirror(NamedTuple):
    """The sparse mirror of a cache's patterns: each mirrored slot's nonzeros, in column order, one segment of
    a pool each (appended as slots are, so a pass over the slots reads the pool in order).  ``m[1] == 0``: off.
    A cache whose ``S`` has no columns is a *sparse store*: the mirror holds every pattern."""

    i: np.ndarray  #: (pool,) int32 the columns
    v: np.ndarray  #: (pool,) float64 the values
    n: np.ndarray  #: (slots,) int64 each slot's count; -1: not mirrored (read ``S``)
    s: np.ndarray  #: (slots,) int64 each slot's segment start
    m: np.ndarray  #: int64 [pool entries used, the most nonzeros a mirrored pattern may have (0: off)]
    #: (pool,) int32 each nonzero's *key*, the index the engine's column map and removal row use: its column
    #: (the same array as ``i``), or for a sparse store its number among the columns the store has met, in the
    #: order met (:meth:`~distlearn.learners.kernel.MirrorPool.key_columns`), so the map is as wide as those
    #: columns, not ``d`` (hashed text: 2**24)
    k: np.ndarray


class BudgetLog(NamedTuple):
    """Per round of a chunk: the hypothesis' mistake and hinge loss before the update,
    whether it updated (inserted a pattern), the cache size after the round, and the
    number of patterns removed in the round."""

    mistake: np.ndarray
    hinge: np.ndarray
    updated: np.ndarray
    cache_size: np.ndarray
    removed: np.ndarray


@njit(inline="always", **NUMBA_FLAGS)
def _dot(a, b):
    """``a . b`` summed over the features in order (the one sum every kernel value starts from)."""
    acc = 0.0
    for j in range(a.shape[0]):
        acc += a[j] * b[j]
    return acc


@intrinsic
def _bits_to_float(typingctx, v):
    """The float64 whose IEEE bits are the int64 ``v`` (a bit cast; builds ``2^n`` in :func:`_exp_neg`)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts (Cody & Waite): n * _LN2_HI is exact for |n| < 2^11
_LN2_LO = 1.90821492927058770002e-10
_C2, _C3, _C4, _C5, _C6, _C7 = 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040
_C8, _C9, _C10, _C11, _C12, _C13 = 1 / 40320, 1 / 362880, 1 / 3628800, 1 / 39916800, 1 / 479001600, 1 / 6227020800


@njit(inline="always", **NUMBA_FLAGS)
def _exp_neg(x):
    """``exp(x)`` for ``x <= 0`` (the RBF kernel's argument) without a library call, so a loop of
    them vectorises (3x libm's ``exp`` in a loop, measured): ``x = n ln 2 + r``, ``|r| <= ln(2)/2``,
    ``exp(r)`` by its Taylor polynomial of degree 13 (truncation < 5e-18), times ``2^n`` built from
    its bits in two normal factors (so a subnormal result rounds once).  Within 1 ulp of ``math.exp``
    on [-708, 0] (measured 2.2e-16 relative over 10^6 draws); below -746, 0."""
    if x < -746.0:
        x = -746.0
    n = math.floor(x * _LOG2E + 0.5)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + 1.0
    p = p * r + 1.0
    k = np.int64(n)
    h = k >> 1
    return (p * _bits_to_float((h + 1023) << 52)) * _bits_to_float((k - h + 1023) << 52)


@njit(inline="always", **NUMBA_FLAGS)
def _kfin(kern, dot, sqa, sqb):
    """The kernel value of a pair from its dot product and squared norms: RBF
    ``exp(-gamma max(0, ||a||^2 + ||b||^2 - 2 a.b))`` (:func:`_exp_neg`), poly ``(gamma a.b + coef0)^degree``, linear ``a.b``."""
    if kern.code == RBF_KERNEL:
        d2 = (sqa - dot) + (sqb - dot)  # never inf - inf for finite norms (|a.b| <= max(||a||^2, ||b||^2))
        if d2 < 0.0:
            d2 = 0.0
        return _exp_neg(-kern.gamma * d2)
    if kern.code == POLY_KERNEL:
        return (kern.gamma * dot + kern.coef0) ** kern.degree
    return dot


@njit(**NUMBA_FLAGS)
def kernel_finish(kern, G, sqx, sqs):
    """``G[r, i] = k`` from the dot products ``G[r, i] = x_r . s_i`` and the squared norms ``sqx[r]``, ``sqs[i]``
    in place (:func:`_kfin`, one pass: the kernel matrices of :func:`distlearn.learners.kernel.kernel_matrix`
    finish as the engine's rows do)."""
    for r in range(G.shape[0]):
        sr = sqx[r]
        g = G[r]
        for i in range(G.shape[1]):
            g[i] = _kfin(kern, g[i], sr, sqs[i])


@njit(inline="always", **NUMBA_FLAGS)
def _kval(kern, a, sqa, b, sqb):
    """k(a, b) for rows ``a``, ``b`` of squared norms ``sqa``, ``sqb`` (``kern`` a :class:`KernelParams`;
    :func:`_kfin` of :func:`_dot`, so every kernel value of a pair is the same bits however it is reached)."""
    return _kfin(kern, _dot(a, b), sqa, sqb)


@njit(inline="always", **NUMBA_FLAGS)
def _slot_dot(Z, i, S, x):
    """``S[i] . x`` as :func:`_dot` sums it, over the pattern's nonzeros alone when the sparse mirror holds them
    (``Z.n[i] >= 0``).  The same bits: the products skipped are ``0 * x_j = +-0`` (``x`` finite), and adding
    +-0 leaves a sum that started at +0.0 as it was (such a sum is never -0.0), so summing the nonzero
    products in column order is summing every product in column order.  Wide sparse data (text: 75 of
    47,236 columns) then costs its nonzeros per pair, not ``d``."""
    if Z.m[1] == 0 or Z.n[i] < 0:
        return _dot(S[i], x)
    acc = 0.0
    zk, zv = Z.k, Z.v
    for p in range(Z.s[i], Z.s[i] + Z.n[i]):
        acc += zv[p] * x[zk[p]]
    return acc


@njit(inline="always", **NUMBA_FLAGS)
def _slot_dot_row(Z, i, S, x, R, r):
    """:func:`_slot_dot` of slot ``i`` and a round's row: with CSR rows (``R.p`` non-empty) and the slot mirrored,
    the row ``r``'s nonzeros from ``R`` merged with the pattern's (both ascending by column), the products of the
    columns both hold summed in the pattern's order -- the same bits (a skipped product is ``v * 0 = +-0``, as in
    :func:`_slot_dot`), reading no densified row: a sparse store's engine never fills one (2**24 columns: 16
    densified rows are 2 GiB of pages); otherwise :func:`_slot_dot` against ``x``."""
    if R.p.shape[0] == 0 or Z.m[1] == 0 or Z.n[i] < 0:
        return _slot_dot(Z, i, S, x)
    acc = 0.0
    q = R.p[r]
    hi = R.p[r + 1]
    for p in range(Z.s[i], Z.s[i] + Z.n[i]):
        j = Z.i[p]
        while q < hi and R.j[q] < j:
            q += 1
        if q == hi:
            break
        if R.j[q] == j:
            acc += Z.v[p] * R.v[q]
    return acc


@njit(inline="always", **NUMBA_FLAGS)
def _mirror_row(Z, s, row):
    """Append slot ``s``'s pattern ``row`` to the sparse mirror (its nonzeros in column order), or mark it
    unmirrored (-1) when it has more nonzeros than the mirror takes or the pool has room for; nothing when the
    mirror is off."""
    if Z.m[1] == 0:
        return
    start = Z.m[0]
    stop = min(Z.i.shape[0], start + Z.m[1])
    p = start
    for j in range(row.shape[0]):
        if row[j] != 0.0:
            if p == stop:
                Z.n[s] = -1
                return
            Z.i[p] = j
            Z.k[p] = j  # a dense row meets no store: its keys are its columns
            Z.v[p] = row[j]
            p += 1
    Z.s[s] = start
    Z.n[s] = p - start
    Z.m[0] = p


@njit(inline="always", **NUMBA_FLAGS)
def _mirror_nonzeros(Z, s, cols, keys, vals, lo, hi):
    """:func:`_mirror_row` of a CSR row (its entries ``lo:hi``, columns ascending, ``keys`` theirs: :class:`Rows`;
    stored zeros skipped)."""
    start = Z.m[0]
    stop = min(Z.i.shape[0], start + Z.m[1])
    p = start
    for pp in range(lo, hi):
        if vals[pp] != 0.0:
            if p == stop:
                Z.n[s] = -1
                return
            Z.i[p] = cols[pp]
            Z.k[p] = keys[pp]
            Z.v[p] = vals[pp]
            p += 1
    Z.s[s] = start
    Z.n[s] = p - start
    Z.m[0] = p


@njit(**NUMBA_FLAGS)
def fill_mirror(S, n, Z):
    """:func:`_mirror_row` of the slots ``< n`` (a mirror the driver turns on for a cache of dense patterns)."""
    for s in range(n):
        _mirror_row(Z, s, S[s])


#: Rows whose kernel rows against the cache are computed together (one pass over the cache per block).
ROW_BLOCK = 16
#: Rounds whose score sums the single learner computes in one pass over the coefficients (:func:`_score_rows`):
#: a removal voids the sums of the rounds after it, so a longer run wastes more of them (LETTER, a cache of
#: 8,200 patterns, a removal in a quarter of the rounds: 16 rows were no faster than one at a time).
SUM_ROWS = 4
assert ROW_BLOCK == 16  # _next_mirrored keeps a block's sums in 16 named registers
#: Cached patterns whose dot products with a block's rows are accumulated together (register blocking:
#: each loaded block column feeds SLOT_BLOCK products).
SLOT_BLOCK = 8


@njit(inline="always", **NUMBA_FLAGS)
def _block_rows(kern, S, sq, alive, n0, Xt, sqt, nb, G, acc, live):
    """``G[b, i] = k(S[i], x_b)`` for the live slots ``i < n0`` and the ``nb`` rows held
    transposed in ``Xt[:, :nb]`` with squared norms ``sqt``: a blocked matrix product
    ``X_block S^T`` of ``SLOT_BLOCK`` cached patterns by ``ROW_BLOCK`` rows at a time, then
    :func:`_kfin` of each entry (RBF from the squared norms, clipped at 0).

    Every pair's dot product runs over the features in order with float64 products and sums,
    exactly as :func:`_dot` sums it (no fused or reordered arithmetic), so a blocked value is bit
    for bit the per-row value :func:`_kval` -- whichever block, block size or slot position the pair
    lands in.  Hence a model does not depend on how rounds fall into blocks (chunking), and an OBPM
    member (kernel rows over the pool) computes the same bits as the single learner (over its
    cache).  The block only reorders *which* pairs are computed when: each cached row is read once
    per block, each loaded block column feeds ``SLOT_BLOCK`` products, and the inner loop over the
    block's rows vectorises.  ``acc`` is ``(SLOT_BLOCK, ROW_BLOCK)`` scratch, ``live`` int scratch
    of ``n0`` entries.
    """
    d = S.shape[1]
    nl = 0
    for i in range(n0):
        if alive[i]:
            live[nl] = i
            nl += 1
    q = 0
    while q < nl:
        w = min(SLOT_BLOCK, nl - q)
        for p in range(SLOT_BLOCK):
            for b in range(ROW_BLOCK):
                acc[p, b] = 0.0
        if w == SLOT_BLOCK:
            i0, i1, i2, i3 = live[q], live[q + 1], live[q + 2], live[q + 3]
            i4, i5, i6, i7 = live[q + 4], live[q + 5], live[q + 6], live[q + 7]
            for j in range(d):
                s0, s1, s2, s3 = S[i0, j], S[i1, j], S[i2, j], S[i3, j]
                s4, s5, s6, s7 = S[i4, j], S[i5, j], S[i6, j], S[i7, j]
                for b in range(ROW_BLOCK):
                    xb = Xt[j, b]
                    acc[0, b] += s0 * xb
                    acc[1, b] += s1 * xb
                    acc[2, b] += s2 * xb
                    acc[3, b] += s3 * xb
                    acc[4, b] += s4 * xb
                    acc[5, b] += s5 * xb
                    acc[6, b] += s6 * xb
                    acc[7, b] += s7 * xb
        else:
            for p in range(w):
                i = live[q + p]
                for j in range(d):
                    s = S[i, j]
                    for b in range(ROW_BLOCK):
                        acc[p, b] += s * Xt[j, b]
        for p in range(w):  # finish in place (a vectorised loop), then scatter into G
            i = live[q + p]
            sqi = sq[i]
            for b in range(ROW_BLOCK):
                acc[p, b] = _kfin(kern, acc[p, b], sqi, sqt[b])
            for b in range(nb):
                G[b, i] = acc[p, b]
        q += w


@njit(inline="always", **NUMBA_FLAGS)
def _next_block(kern, X, order, ii, S, sq, alive, n0, Xt, sqt, G, acc, live):
    """Load the rows ``order[ii:ii + ROW_BLOCK]`` transposed into ``Xt`` (their squared norms into
    ``sqt``) and compute their kernel rows ``G`` against the live slots ``< n0`` (:func:`_block_rows`)."""
    nb = min(ROW_BLOCK, order.shape[0] - ii)
    d = X.shape[1]
    for b in range(nb):
        xr = X[order[ii + b]]
        for j in range(d):
            Xt[j, b] = xr[j]
        sqt[b] = _dot(xr, xr)
    _block_rows(kern, S, sq, alive, n0, Xt, sqt, nb, G, acc, live)


@njit(inline="always", **NUMBA_FLAGS)
def _gather_column(cmap, used, Xt, zero, u, j):
    """Column ``j``'s row of a block gathered by column (:func:`_next_mirrored`, :func:`csr_dots`) and the count of
    rows in use: ``cmap[j]``, or when ``j`` has none yet (``cmap[j] == zero``: the kept-zero row, ``Xt``'s last, or
    -1, which indexes it too) the next free row ``u``, cleared and listed in ``used``."""
    q = cmap[j]
    if q == zero:
        q = u
        cmap[j] = u
        used[u] = j
        for bb in range(ROW_BLOCK):
            Xt[u, bb] = 0.0
        u += 1
    return q, u


@njit(inline="always", **NUMBA_FLAGS)
def _csr_block_scratch(p, r0, n):
    """The scratch of :func:`_gather_csr_block` for the CSR rows ``r0 .. r0 + n - 1`` in blocks of ``ROW_BLOCK``
    (beside a column map of -1s, the caller's): ``used``, ``Xt`` (as many rows as a block's nonzeros at most, and
    the zero row last) and a ``ROW_BLOCK`` accumulator."""
    width = 1
    for a in range(0, n, ROW_BLOCK):
        width = max(width, p[r0 + min(n, a + ROW_BLOCK)] - p[r0 + a])
    return (np.zeros(width, dtype=np.int64), np.zeros((width + 1, ROW_BLOCK), dtype=np.float64),
            np.zeros(ROW_BLOCK, dtype=np.float64))


@njit(inline="always", **NUMBA_FLAGS)
def _gather_csr_block(p, j, v, r0, nb, cmap, used, Xt):
    """The CSR rows ``r0 .. r0 + nb - 1`` gathered by column into ``Xt`` (:func:`_gather_column`, ``cmap``'s -1 the
    zero row; a repeated column summed); the count of ``Xt``'s rows in use (``used``), which the caller resets to -1
    in ``cmap`` after the block."""
    zero = -1
    u = 0
    for b in range(nb):
        for q in range(p[r0 + b], p[r0 + b + 1]):
            qq, u = _gather_column(cmap, used, Xt, zero, u, j[q])
            Xt[qq, b] += v[q]
    return u


@njit(inline="always", **NUMBA_FLAGS)
def _column_sums(zj, zv, lo, hi, cmap, Xt, a):
    """``a[b] = sum_p zv[p] * Xt[cmap[zj[p]], b]`` over ``p`` in ``[lo, hi)``, for the ``ROW_BLOCK`` (16) rows ``b``
    of a block gathered by column (:func:`_next_mirrored`, :func:`csr_dots`): a pattern's nonzeros walked once in
    their order, the 16 sums in registers (an array of them would be stored and reloaded on every nonzero, the
    compiler not knowing it from ``Xt``: 108 -> 81 ms, ``benchmarks/README.md``).  A column none of the rows has
    maps to ``Xt``'s last row, kept zero, instead of a branch: the hits are as random as the words, and the
    mispredicted branch cost more than the 16 products it saves (adding ``v * 0 = +-0`` leaves a sum that started
    at +0.0 as it was, so the bits are the branch's)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = 0.0
    for p in range(lo, hi):
        v = zv[p]
        xq = Xt[cmap[zj[p]]]
        a0 += v * xq[0]
        a1 += v * xq[1]
        a2 += v * xq[2]
        a3 += v * xq[3]
        a4 += v * xq[4]
        a5 += v * xq[5]
        a6 += v * xq[6]
        a7 += v * xq[7]
        a8 += v * xq[8]
        a9 += v * xq[9]
        a10 += v * xq[10]
        a11 += v * xq[11]
        a12 += v * xq[12]
        a13 += v * xq[13]
        a14 += v * xq[14]
        a15 += v * xq[15]
    a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7] = a0, a1, a2, a3, a4, a5, a6, a7
    a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15] = a8, a9, a10, a11, a12, a13, a14, a15


@njit(inline="always", **NUMBA_FLAGS)
def _next_mirrored(kern, X, order, ii, S, sq, alive, n0, Z, sqt, G, Xt, acc, cmap, used, R):
    """:func:`_next_block` for a cache with a sparse mirror.  The block's rows are gathered by column: the
    columns nonzero in any of them get positions ``cmap[j]`` (elsewhere ``Xt``'s last row, kept zero; reset on
    return, ``used`` the scratch list of them) and ``Xt[cmap[j], b]`` their values.  A mirrored pattern then walks its nonzeros once,
    and each one in the block's columns feeds all the rows' sums at once from ``Xt``'s row (``acc[0]``);
    a pattern without a mirror (``Z.n < 0``) is :func:`_dot` against each row.

    With CSR rows ``R`` (:class:`Rows`, non-empty) the block's rows are read by their nonzeros alone, ``X`` never
    (an unmirrored pattern too: its values at each row's nonzeros, the skipped products ``s * 0 = +-0``), so the
    block costs no pass over ``d`` columns, and ``X`` need not hold the block's rows (the kernel OBPM computes
    several blocks' rows at once).

    The same bits as :func:`_block_rows`: each pair's sum adds the pattern's products in column order, and a
    column some row lacks adds ``v * 0 = +-0``, which leaves a sum that started at +0.0 as it was."""
    nb = min(ROW_BLOCK, order.shape[0] - ii)
    d = X.shape[1]
    # cmap's value for a column none of the block's rows has: -1, which reads Xt's last row (kept zero) whatever
    # Xt's size, so a map kept between engine calls stays valid (Rows.cmap)
    zero = -1
    u = 0
    for b in range(nb):
        if R.p.shape[0] > 0:
            r = R.order[ii + b]
            lo, hi, vals, cols = R.p[r], R.p[r + 1], R.v, R.k
            sqt[b] = _dot(vals[lo:hi], vals[lo:hi])
        else:
            xr = X[order[ii + b]]
            lo, hi, vals, cols = 0, d, xr, R.k
            sqt[b] = _dot(xr, xr)
        for pp in range(lo, hi):
            v = vals[pp]
            j = cols[pp] if R.p.shape[0] > 0 else pp
            if v != 0.0:
                q, u = _gather_column(cmap, used, Xt, zero, u, j)
                Xt[q, b] = v
    a = acc[0]
    for i in range(n0):
        if not alive[i]:
            continue
        sqi = sq[i]
        n = Z.n[i]
        if n >= 0:
            _column_sums(Z.k, Z.v, Z.s[i], Z.s[i] + n, cmap, Xt, a)
            for b in range(nb):
                G[b, i] = _kfin(kern, a[b], sqi, sqt[b])
        elif R.p.shape[0] > 0:  # a dense pattern against CSR rows: its values at the rows' nonzeros, in order
            for b in range(nb):
                rb = R.order[ii + b]
                sdot = 0.0
                for pp in range(R.p[rb], R.p[rb + 1]):
                    sdot += S[i, R.j[pp]] * R.v[pp]
                G[b, i] = _kfin(kern, sdot, sqi, sqt[b])
        else:
            for b in range(nb):
                G[b, i] = _kfin(kern, _dot(S[i], X[order[ii + b]]), sqi, sqt[b])
    for q in range(u):
        cmap[used[q]] = zero


class Rows(NamedTuple):
    """CSR rows for :func:`learn_budget_block` (``p`` empty: the rows are the dense ``X``): row ``r``'s nonzeros
    are ``j[p[r]:p[r + 1]]`` (columns, ascending) with values ``v[...]``; ``order`` the rows of the call's rounds
    (the engine then reads ``X``'s rows ``0..ROW_BLOCK-1``, the current block's rows densified)."""

    p: np.ndarray      #: int64 row pointers
    j: np.ndarray      #: int32 columns
    v: np.ndarray      #: float64 values
    order: np.ndarray  #: int64 the rounds' rows
    buf: np.ndarray    #: the ``(ROW_BLOCK, d)`` zero scratch the engine densifies a block into: ``X`` itself
    cmap: np.ndarray   #: int32, every entry -1, one per key: :func:`_next_mirrored`'s column map, left so on return
    xw: np.ndarray     #: float64 zeros, one per key: a sparse store's removed pattern, left zero on return
    #: int32 each nonzero's key (:attr:`Mirror.k`): its column, or for a sparse store its number among the columns
    #: the store has met -- the index into ``cmap`` and ``xw``, which are then as wide as those columns, not ``d``
    k: np.ndarray


@njit(inline="always", **NUMBA_FLAGS)
def csr_work_rows(block_nonzeros, d):
    """Rows of the gathered block (:func:`_next_mirrored`'s ``Xt``) for CSR rows whose ``ROW_BLOCK``-round blocks hold
    at most ``block_nonzeros`` nonzeros: one per distinct column of a block (at most ``d``), and the zero row."""
    return min(max(1, block_nonzeros), d) + 1


@njit(inline="always", **NUMBA_FLAGS)
def _block_nonzeros(R, n):
    """The most nonzeros of the CSR rows of any ``ROW_BLOCK`` consecutive rounds ``ii .. ii + ROW_BLOCK - 1`` (``ii`` a
    multiple of ``ROW_BLOCK``, rounds ``< n``): the most distinct columns a gathered block can have."""
    most = 0
    for b0 in range(0, n, ROW_BLOCK):
        w = 0
        for ii in range(b0, min(n, b0 + ROW_BLOCK)):
            r = R.order[ii]
            w += R.p[r + 1] - R.p[r]
        most = max(most, w)
    return most


@njit(inline="always", **NUMBA_FLAGS)
def _fill_block(Xb, R, ii, n):
    """The CSR rows of the rounds ``ii .. ii + ROW_BLOCK - 1`` (those ``< n``) into the zero rows of ``Xb``, after
    clearing the previous block's (rounds ``ii - ROW_BLOCK ..``): each costs its nonzeros."""
    if ii >= ROW_BLOCK:
        for b in range(ROW_BLOCK):
            r = R.order[ii - ROW_BLOCK + b]
            for pp in range(R.p[r], R.p[r + 1]):
                Xb[b, R.j[pp]] = 0.0
    for b in range(min(ROW_BLOCK, n - ii)):
        r = R.order[ii + b]
        for pp in range(R.p[r], R.p[r + 1]):
            Xb[b, R.j[pp]] = R.v[pp]


@njit(inline="always", **NUMBA_FLAGS)
def _next_shared(kern, X, order, ii, dots, born, sq, alive, n0, sqt, G, acc, R):
    """:func:`_next_block` from dot products already computed (:func:`shared_dots`, :func:`shared_csr_dots`):
    ``dots[ii // ROW_BLOCK, born[i], b]`` is ``S[i] . x_b`` for a live slot ``i < n0`` that holds the row of the
    learner's round ``born[i]`` (no merged pattern), so ``G[b, i]`` is :func:`_kfin` of it -- the same bits
    :func:`_block_rows` computes (both sum each pair as it does), one read and one ``exp`` per entry instead of
    ``d`` products.  A block's products lie in slot order, contiguous (slots are in round order).  ``acc``:
    scratch.  With CSR rows ``R`` (non-empty) a row's squared norm is summed over its nonzeros, as
    :func:`_next_mirrored` sums it (the same bits as over the densified row, whose zeros add +0)."""
    nb = min(ROW_BLOCK, order.shape[0] - ii)
    for b in range(nb):
        if R.p.shape[0] > 0:
            r = R.order[ii + b]
            sqt[b] = _dot(R.v[R.p[r]:R.p[r + 1]], R.v[R.p[r]:R.p[r + 1]])
        else:
            xr = X[order[ii + b]]
            sqt[b] = _dot(xr, xr)
    blk = dots[ii // ROW_BLOCK]
    out = acc[0]
    for i in range(n0):
        if alive[i]:
            dr = blk[born[i]]
            sqi = sq[i]
            for b in range(ROW_BLOCK):
                out[b] = _kfin(kern, dr[b], sqi, sqt[b])
            for b in range(nb):
                G[b, i] = out[b]


@njit(**NUMBA_FLAGS)
def shared_dots(R, cols, t0, m, out):
    """``out[j // ROW_BLOCK, c, j % ROW_BLOCK] = R[c] . R[t0 + j]`` for the rows ``c`` flagged in ``cols`` below
    the end of ``j``'s block (blocks of ``ROW_BLOCK`` from ``j = 0``; the other entries are left as they are,
    but the last block's rows past ``m``, which are 0): the dot products of ``m`` rounds, from the learner's
    round ``t0`` on, with the rows ``R`` of its rounds (``R[r]`` the row of round ``r``), for
    :func:`learn_budget_block`'s ``dots``; ``out`` of shape ``(ceil(m / ROW_BLOCK), >= t0 + m, ROW_BLOCK)``.
    Computed once, they serve every learner that runs those rounds in that order (the ``gamma="auto"`` race's
    candidates: a pair's kernel value for a width is one :func:`_kfin` of its product).  Each product is
    :func:`_block_rows`'s (the pair's products summed over the features in order), so the kernel rows a learner
    builds from them are bit for bit its own."""
    d = R.shape[1]
    order = np.arange(t0, t0 + m)
    lin = KernelParams(LINEAR_KERNEL, 0.0, 0.0, 0.0)
    Xt = np.zeros((d, ROW_BLOCK), dtype=np.float64)
    sqt = np.zeros(ROW_BLOCK, dtype=np.float64)
    acc = np.zeros((SLOT_BLOCK, ROW_BLOCK), dtype=np.float64)
    live = np.zeros(R.shape[0], dtype=np.int64)
    sq = np.zeros(R.shape[0], dtype=np.float64)  # the linear kernel reads no norm
    for j0 in range(0, m, ROW_BLOCK):
        n0 = min(t0 + j0 + ROW_BLOCK, t0 + m)
        blk = out[j0 // ROW_BLOCK]
        for c in range(n0):  # a short last block: its missing rows read as 0 (a finite kernel value, unused)
            if cols[c]:
                for b in range(m - j0, ROW_BLOCK):
                    blk[c, b] = 0.0
        _next_block(lin, R, order, j0, R, sq, cols, n0, Xt, sqt, blk.T, acc, live)
    return out


@njit(**NUMBA_FLAGS)
def shared_csr_dots(p, j, v, cols, t0, m, cmap, out):
    """:func:`shared_dots` for rows held as CSR (``p`` int64 row pointers over at least ``t0 + m`` rows, ``j``
    int32 columns in ``[0, d)``, ascending and distinct within a row, ``v`` float64 values; checked by the caller):
    ``out[j // ROW_BLOCK, c, j % ROW_BLOCK] = R[c] . R[t0 + j]`` for the rows ``c`` flagged in ``cols`` below the
    end of ``j``'s block, the last block's rows past ``m`` 0, the other entries left as they are.  Each block's
    rows are gathered by column and each flagged row walks its nonzeros once against them (:func:`_column_sums`,
    as :func:`csr_dots` and the engine's mirrored rows): a pair's products added in column order from +0.0, the
    same bits as :func:`shared_dots` over the densified rows (whose other products are +-0).  Text's race: the
    candidates' kernel rows each one ``exp`` of a product computed once, not a walk of every pattern's nonzeros
    per candidate.  ``cmap``: int32, one -1 per column (a column map left so on return: the engines' thread scratch,
    so a call costs its rows' nonzeros, not the width; hashed text has 2**24 columns)."""
    used, Xt, acc = _csr_block_scratch(p, t0, m)
    for j0 in range(0, m, ROW_BLOCK):
        nb = min(ROW_BLOCK, m - j0)
        n0 = t0 + j0 + nb
        u = _gather_csr_block(p, j, v, t0 + j0, nb, cmap, used, Xt)
        blk = out[j0 // ROW_BLOCK]
        for c in range(n0):
            if cols[c]:
                _column_sums(j, v, p[c], p[c + 1], cmap, Xt, acc)
                for b in range(ROW_BLOCK):  # the rows past m: their columns were never gathered, so 0
                    blk[c, b] = acc[b]
        for k in range(u):
            cmap[used[k]] = -1
    return out


@njit(inline="always", **NUMBA_FLAGS)
def _score_rows(kern, X, order, ii, b0, e, S, sq, A, alive, n0, n_at, sqt, G, M, ident, offs, Z, R):
    """The scores ``M[b] = sum_{i < n_at} A[i] G[b, i]`` of the rounds ``order[ii:e]`` of the block starting at
    ``b0`` (``b = round - b0``), every column a sequential sum over the slots in order from +0.0.

    First each of those rows of ``G`` is made a full kernel row against the slots ``< n_at``: the live slots
    ``< n0`` hold the block's values (:func:`_block_rows`), the live slots in ``[n0, n_at)`` (inserted since
    the block began) get :func:`_kval`, the dead slots 0 (so they add +-0, which leaves a sum that started
    at +0.0 as it was, while ``A`` is finite -- the caller recomputes a non-finite score over the live slots
    only).  Then the sums, all rows in one read of ``A`` (:func:`_gathered_sums`, ``ident`` the identity, ``offs[b]
    = b * slots``): the cache's coefficients are read once per ``e - ii`` rounds instead of once per round, which
    is what a round of a large cache is bound by (``benchmarks/README.md``, "kernel score sums").  Each value is
    bit for bit the per-round sum over the live slots."""
    for rr in range(ii, e):
        gb = G[rr - b0]
        xr = X[order[rr]]
        r = R.order[rr] if R.p.shape[0] > 0 else 0
        for i in range(n0):
            if not alive[i]:
                gb[i] = 0.0
        for i in range(n0, n_at):
            gb[i] = _kfin(kern, _slot_dot_row(Z, i, S, xr, R, r), sq[i], sqt[rr - b0]) if alive[i] else 0.0
    _gathered_sums(A, ident, alive, n_at, G.reshape(G.shape[0] * G.shape[1]), offs, ii - b0, e - b0,
                   M.reshape(M.shape[0] * M.shape[1]))


@njit(inline="always", **NUMBA_FLAGS)
def _gathered_sums(A, idx, alive, n, g, offs, lo, hi, out):
    """Score sums with gathered kernel values: ``out[r * K + k] = sum_i A[i, k] g[offs[r] + idx[i]]`` over the
    live slots ``i < n`` in order, from +0.0, for the rows ``lo <= r < hi`` (``g`` flat kernel rows, ``offs[r]``
    where row ``r``'s starts; ``idx`` maps a slot to its kernel value's column: the identity for the single
    learner's and the pool's slots, the slot -> pool map for an OBPM member).

    :func:`~distlearn.learners._simd.gather_sums` in one pass over ``A`` per :data:`GATHER_ROWS` rows and 32
    columns: each coefficient row feeds every row's sums from registers, and a member's kernel values are
    gathered as the pass reads them (no copy of its rows by slot first).  Every value is bit for bit the
    per-round loop ``m[k] += A[i, k] * kv_i`` over the live slots (a dead slot is skipped, not multiplied)."""
    K = A.shape[1]
    w = A.reshape(A.shape[0] * K)
    for q in range(lo * K, hi * K):
        out[q] = 0.0
    k0 = 0
    while k0 < K:
        left = K - k0
        ng = 1 if left <= GATHER_LANES else (2 if left <= 2 * GATHER_LANES else 4)
        r0 = lo
        while r0 < hi:
            R = min(GATHER_ROWS, hi - r0)
            gather_sums(w, K, k0, ng, idx, alive, 0, n, g, offs, r0, R, out)
            r0 += R
        k0 += ng * GATHER_LANES


@njit(inline="always", **NUMBA_FLAGS)
def _span_residual(n, kxx, krow, Kinv, dd):
    """The Projectron's ``d = K^{-1} k_t`` (into ``dd[:n]``) and ``delta^2 = k(x,x) - k_t . d``,
    the squared distance of the new pattern from the span of the cache."""
    delta2 = kxx
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += Kinv[i, j] * krow[j]
        dd[i] = acc
    for i in range(n):
        delta2 -= krow[i] * dd[i]
    return delta2


@njit(**NUMBA_FLAGS)
def _grow_inverse(n, delta2, dd, Kinv):
    """The inverse Gram matrix with the new pattern as row/column ``n`` (block inverse; ``dd`` and
    ``delta2`` from :func:`_span_residual`)."""
    inv = 1.0 / delta2
    for i in range(n):
        for j in range(n):
            Kinv[i, j] += dd[i] * dd[j] * inv
        Kinv[i, n] = -dd[i] * inv
        Kinv[n, i] = -dd[i] * inv
    Kinv[n, n] = inv


@njit(inline="always", **NUMBA_FLAGS)
def _mu(i, mode, K, A, F, kd, lab):
    """Removal margin of slot ``i`` (module docstring)."""
    if mode == MODE_BINARY:
        s = 1.0 if lab[i] == 1 else -1.0
        return s * (F[i, 0] - A[i, 0] * kd[i])
    c = lab[i]
    if mode == MODE_NATIVE:
        other = -np.inf
        for r in range(K):
            if r != c:
                g = F[i, r] - A[i, r] * kd[i]
                if g > other:
                    other = g
        return (F[i, c] - A[i, c] * kd[i]) - other
    best = np.inf
    for k in range(K):
        if A[i, k] != 0.0:
            s = 1.0 if c == k else -1.0
            g = s * (F[i, k] - A[i, k] * kd[i])
            if g < best:
                best = g
    return best


#: Golden-section iterations of the merge weight ``h`` on [0, 1] (the bracket shrinks to
#: 0.618^GS_ITERS ~ 5e-7; a fixed count, so the engine and the oracle take the same steps).
GS_ITERS = 30
GOLDEN = 0.6180339887498949  # (sqrt(5) - 1) / 2


@njit(inline="always", **NUMBA_FLAGS)
def _merge_gain(am, an, gd2, h):
    """``||a_z||^2 = sum_k (a_m[k] k(x_m, z) + a_n[k] k(x_n, z))^2`` for ``z = h x_m + (1-h) x_n``
    with ``gd2 = gamma ||x_m - x_n||^2`` (RBF: ``k(x_m, z) = exp(-gd2 (1-h)^2)``,
    ``k(x_n, z) = exp(-gd2 h^2)``)."""
    km = math.exp(-gd2 * (1.0 - h) * (1.0 - h))
    kn = math.exp(-gd2 * h * h)
    s = 0.0
    for k in range(am.shape[0]):
        v = am[k] * km + an[k] * kn
        s += v * v
    return s


@njit(**NUMBA_FLAGS)
def merge_step(am, an, gd2):
    """BSGD's merge of two RBF patterns with coefficient vectors ``am``, ``an`` (one entry per output
    column) at ``gd2 = gamma ||x_m - x_n||^2``: ``(h, ||a_z||^2, degradation)``.

    ``z = h x_m + (1 - h) x_n`` and ``a_z[k] = a_m[k] k(x_m, z) + a_n[k] k(x_n, z)`` -- per column the
    projection of ``a_m[k] phi(x_m) + a_n[k] phi(x_n)`` onto ``phi(z)`` (``k(z, z) = 1``).  The
    weight degradation, summed over the columns (every column's weight vector is a kernel expansion
    over the same patterns, so the multiclass hypothesis' squared change is the sum of the columns'):

        ||Delta||^2 = sum_k (a_m[k]^2 + a_n[k]^2 + 2 a_m[k] a_n[k] k(x_m, x_n) - a_z[k]^2)  >= 0

    (a projection never lengthens a vector).  ``h`` maximises ``||a_z||^2`` (so minimises the
    degradation) by :data:`GS_ITERS` golden-section steps on [0, 1]; it is the final bracket's midpoint.
    Identical patterns (``gd2 = 0``) merge exactly: ``a_z = a_m + a_n``.
    """
    lo, hi = 0.0, 1.0
    c = hi - GOLDEN * (hi - lo)
    d = lo + GOLDEN * (hi - lo)
    fc = _merge_gain(am, an, gd2, c)
    fd = _merge_gain(am, an, gd2, d)
    for _ in range(GS_ITERS):
        if fc >= fd:
            hi = d
            d = c
            fd = fc
            c = hi - GOLDEN * (hi - lo)
            fc = _merge_gain(am, an, gd2, c)
        else:
            lo = c
            c = d
            fc = fd
            d = lo + GOLDEN * (hi - lo)
            fd = _merge_gain(am, an, gd2, d)
    h = 0.5 * (lo + hi)
    gain = _merge_gain(am, an, gd2, h)
    kmn = math.exp(-gd2)
    full = 0.0
    for k in range(am.shape[0]):
        full += am[k] * am[k] + an[k] * an[k] + 2.0 * am[k] * an[k] * kmn
    return h, gain, full - gain


@njit(**NUMBA_FLAGS)
def _merge(t, gamma, c):
    """Replace two live patterns of the cache ``c`` by one (BSGD, :func:`merge_step`): ``x_m`` is the
    live pattern of smallest ``||a||^2`` (the earliest slot on ties); its partner ``x_n`` the live
    pattern of the same class (of any class when ``x_m`` is its class's only one) of least
    degradation (the earliest slot on ties).  ``z = x_n + h (x_m - x_n)`` -- exactly ``x`` when both
    are ``x`` -- goes into a new slot born at round ``t``, with class ``lab[m]``; ``x_m`` and ``x_n``
    die at ``t``, and their carried sums ``Ac + A (t - born)`` merge into ``Ac[z]`` by the same
    projection as the coefficients.  The scores ``F`` are not kept under merging.  Returns ``(m, n)``."""
    S, A, lab, alive = c.S, c.A, c.lab, c.alive
    n_slots = c.meta[0]
    K = A.shape[1]
    d = S.shape[1]
    m = -1
    best = np.inf
    for i in range(n_slots):
        if alive[i]:
            w = 0.0
            for k in range(K):
                w += A[i, k] * A[i, k]
            if w < best:
                best = w
                m = i
    same = False
    for i in range(n_slots):
        if alive[i] and i != m and lab[i] == lab[m]:
            same = True
            break
    n = -1
    hn = 0.0
    gn = 0.0
    dn = np.inf
    for i in range(n_slots):
        if not alive[i] or i == m or (same and lab[i] != lab[m]):
            continue
        d2 = 0.0
        for j in range(d):
            q = S[m, j] - S[i, j]
            d2 += q * q
        h, gain, deg = merge_step(A[m], A[i], gamma * d2)
        if deg < dn:
            dn = deg
            n = i
            hn = h
            gn = gamma * d2
    s = n_slots
    sqz = 0.0
    for j in range(d):
        v = S[n, j] + hn * (S[m, j] - S[n, j])
        S[s, j] = v
        sqz += v * v
    _mirror_row(c.Z, s, S[s])
    km = math.exp(-gn * (1.0 - hn) * (1.0 - hn))
    kn = math.exp(-gn * hn * hn)
    Ac = c.Ac
    wm = float(t - c.born[m])
    wn = float(t - c.born[n])
    for k in range(K):
        A[s, k] = A[m, k] * km + A[n, k] * kn
        c.F[s, k] = 0.0
        # the carried sums, merged by the same projection (module docstring: the budget's average)
        Ac[s, k] = (Ac[m, k] + A[m, k] * wm) * km + (Ac[n, k] + A[n, k] * wn) * kn
    c.sq[s] = sqz
    c.kd[s] = 1.0
    lab[s] = lab[m]
    c.born[s] = t
    c.died[s] = -1
    alive[s] = True
    for v in (m, n):
        alive[v] = False
        c.died[v] = t
    c.meta[0] = s + 1
    c.meta[1] -= 1
    return m, n


#: Removal margins within this relative distance of the largest count as tied (ties go to the
#: earliest inserted pattern): the engine keeps scores by increments, so an exact tie of the
#: paper's arithmetic can differ in the last bits here.
TIE_RTOL = 1e-9


#: Slack of the removal-margin bounds per score update, relative to the bound (far above the
#: rounding of an update to the scores, so a bound is never below the margin it bounds).
BOUND_SLACK = 1e-9


@njit(inline="always", **NUMBA_FLAGS)
def _pick_bounded(n_slots, mode, K, A, F, kd, lab, born, alive, floor, ub, cand):
    """The slot of largest removal margin ``mu >= floor`` (-1 if none); margins within
    ``TIE_RTOL`` of the largest tie, and the earliest inserted of them wins.  Exact margins
    (:func:`_mu`) are computed only where an upper bound says the slot could win.

    ``ub[i]`` bounds slot ``i``'s margin: set to the exact margin when computed, it grows
    (plus :data:`BOUND_SLACK`) whenever a pattern enters or leaves the cache by the most that
    can move a margin of the slot's class (:func:`_bound_table`; at most ``2 max|c| |k|`` for a
    pattern of coefficients ``c`` with kernel value ``k``).  The slot of largest bound is
    computed first; if it reaches ``floor`` its margin ``b`` (less the tie tolerance) becomes
    the threshold, else ``floor`` is.  Slots whose bound is below the threshold can neither win
    nor tie, so only the others are computed.  With a variable cache most slots sit far below
    ``beta``; with a fixed cache most sit far below the largest margin.  One pass reads every
    slot; the others read only the slots it kept (``cand``, scratch of ``n_slots`` entries).
    """
    # one pass over the slots: those whose bound reaches floor (in slot order) and the largest bound
    top = -1
    nf = 0
    for i in range(n_slots):
        if alive[i] and ub[i] >= floor:
            cand[nf] = i
            nf += 1
            if top < 0 or ub[i] > ub[top]:
                top = i
    if top < 0:
        return -1
    mu = _mu(top, mode, K, A, F, kd, lab)
    ub[top] = mu
    lo = floor
    if mu >= floor:
        lo = max(floor, mu - TIE_RTOL * max(1.0, abs(mu)))
    # exact margins where a bound reaches lo (>= floor); the others can neither win nor tie (their
    # bounds are below lo <= the cut).  cand keeps those at or above floor, in slot order.
    best = -np.inf
    nc = 0
    for q in range(nf):
        i = cand[q]
        if ub[i] >= lo:
            mu = _mu(i, mode, K, A, F, kd, lab)
            ub[i] = mu
            if mu >= floor:
                cand[nc] = i
                nc += 1
                best = max(best, mu)
    if best == -np.inf:
        return -1
    cut = best - TIE_RTOL * max(1.0, abs(best))
    v = -1
    for q in range(nc):
        i = cand[q]
        if ub[i] >= cut and (v < 0 or born[i] < born[v]):
            v = i
    return v


@njit(inline="always", **NUMBA_FLAGS)
def _grow_bound(ub, i, step):
    u = ub[i]
    ub[i] = u + step + BOUND_SLACK * (abs(u) + abs(step) + 1.0)


@njit(inline="always", **NUMBA_FLAGS)
def _bound_table(mode, K, delta, sign, Dp, Dn):
    """The most a removal margin can grow, per unit kernel value, when every score column ``r``
    moves by ``e_r kv``, ``e = sign * delta`` (a pattern of coefficients ``delta`` enters,
    ``sign = 1``, or leaves, ``sign = -1``), by the class ``c`` of the slot: ``kv * Dp[c]`` for
    ``kv >= 0``, ``kv * Dn[c]`` for ``kv < 0`` (:func:`_bound_step`).

    * binary: ``mu = s_c g_0`` moves by exactly ``s_c e_0 kv``;
    * native: ``mu = g_c - max_{r != c} g_r`` moves by at most ``e_c kv - min_{r != c} e_r kv``
      (a maximum moves by at least the smallest of its arguments' moves), i.e.
      ``Dp[c] = e_c - min_{r != c} e_r``, ``Dn[c] = e_c - max_{r != c} e_r``;
    * one-vs-rest: a minimum of ``s_k g_k`` moves by at most ``max_k |e_k| |kv|``.

    These replace the uniform ``2 max|e| |kv|``: the same slots can win a pick, fewer bounds
    reach the threshold, fewer exact margins are computed.
    """
    if mode == MODE_BINARY:
        Dp[1] = sign * delta[0]
        Dp[0] = -Dp[1]
        Dn[0] = Dp[0]
        Dn[1] = Dp[1]
        return
    if mode == MODE_OVR:
        amax = 0.0
        for k in range(K):
            amax = max(amax, abs(delta[k]))
        for c in range(K):
            Dp[c] = amax
            Dn[c] = -amax
        return
    # the smallest and largest e_r, each with its column, and the runners-up
    lo1 = np.inf
    lo2 = np.inf
    hi1 = -np.inf
    hi2 = -np.inf
    ilo = -1
    ihi = -1
    for r in range(K):
        e = sign * delta[r]
        if e < lo1:
            lo2 = lo1
            lo1 = e
            ilo = r
        elif e < lo2:
            lo2 = e
        if e > hi1:
            hi2 = hi1
            hi1 = e
            ihi = r
        elif e > hi2:
            hi2 = e
    for c in range(K):
        e = sign * delta[c]
        Dp[c] = e - (lo2 if c == ilo else lo1)
        Dn[c] = e - (hi2 if c == ihi else hi1)


@njit(inline="always", **NUMBA_FLAGS)
def _bound_step(Dp, Dn, c, kv):
    """The growth of the margin bound of a slot of class ``c`` for kernel value ``kv`` (:func:`_bound_table`)."""
    step = kv * Dp[c]
    if kv < 0.0:
        step = kv * Dn[c]
    return step


@njit(inline="always", **NUMBA_FLAGS)
def _steps(rule, mode, K, m, c, kxx, steps, work, dummy):
    """The rule's step on scores ``m`` of an example of class ``c``: ``steps[k]`` becomes the
    new pattern's coefficient in column ``k``; returns whether it updates."""
    fire = False
    for k in range(K):
        steps[k] = 0.0
    if mode == MODE_NATIVE:
        if rule.code == PERCEPTRON:
            rival = -1
            other = -np.inf
            for k in range(K):
                if k != c and (rival < 0 or m[k] > other):
                    other = m[k]
                    rival = k
            if m[c] - other <= rule.beta:
                steps[c] = rule.eta
                steps[rival] = -rule.eta
        else:
            _native_taus(rule.code, rule.params, m, c, K, steps, work, kxx, dummy, 0, 0, False, 0.0)
        for k in range(K):
            if steps[k] != 0.0:
                fire = True
        return fire
    for k in range(K):
        if mode == MODE_BINARY:
            yk = 1.0 if c == 1 else -1.0
        else:
            yk = 1.0 if c == k else -1.0
        z = yk * m[k]
        if rule.code == PERCEPTRON:
            if z <= rule.beta:
                steps[k] = yk * rule.eta
                fire = True
        else:
            upd, cc, u, project = _binary_step(rule.code, rule.params, z, yk, m[k], 0.0, 1.0, kxx)
            if upd and u != 0.0:
                steps[k] = u
                fire = True
    return fire


# The per-round pieces both engines run on a cache of slots (the single learner's, or one OBPM
# member's: its rows of the ensemble's (N, slots) arrays), written once.


@njit(inline="always", **NUMBA_FLAGS)
def _victim(removal, n_slots, n_alive, u, mode, K, A, F, kd, lab, born, alive, ub, cand):
    """The slot a full fixed cache removes: the largest removal margin (:func:`_pick_bounded`),
    the oldest, or the live slot at position ``floor(u n_alive)`` in insertion order (``u`` the
    round's uniform draw; slots are appended in round order)."""
    v = -1
    if removal == REMOVE_MARGIN:
        v = _pick_bounded(n_slots, mode, K, A, F, kd, lab, born, alive, -np.inf, ub, cand)
    elif removal == REMOVE_OLDEST:
        for i in range(n_slots):
            if alive[i] and (v < 0 or born[i] < born[v]):
                v = i
    else:
        pos = int(math.floor(u * n_alive))
        if pos >= n_alive:
            pos = n_alive - 1
        seen = 0
        for i in range(n_slots):
            if alive[i]:
                if seen == pos:
                    v = i
                    break
                seen += 1
    return v


@njit(inline="always", **NUMBA_FLAGS)
def _nonzero_columns(K, a, cols):
    """The columns ``k`` with ``a[k] != 0`` into ``cols`` (a zero coefficient changes no score); their count."""
    nz = 0
    for k in range(K):
        if a[k] != 0.0:
            cols[nz] = k
            nz += 1
    return nz


#: A score update ``F[i] += c k(x, x_i)`` runs over every column (a contiguous, vectorised loop) when more than
#: ``1 / DENSE_COLUMNS`` of ``c``'s columns are nonzero, else over those columns only.  The same bits either way:
#: a zero coefficient adds +-0, which leaves a score as it was (a score is never -0.0: it starts as a sum from
#: +0.0, and x + (-x) rounds to +0.0); a kernel value that is not finite (a polynomial kernel's overflow)
#: takes the nonzero columns only, as 0 * inf would be NaN.
DENSE_COLUMNS = 4


@njit(inline="always", **NUMBA_FLAGS)
def _insert_scores(n_slots, mode, K, steps, krow, idx, F, lab, alive, bounded, ub, cols, Dp, Dn):
    """A pattern of coefficients ``steps`` enters: ``F[i] += steps k(x_t, x_i)`` for the live slots
    ``< n_slots`` (``krow[idx[i]]`` the kernel value: the single learner's row is by slot, ``idx``
    the identity; an OBPM member's is the pool's), and with ``bounded`` their margin bounds grow."""
    nz = _nonzero_columns(K, steps, cols)
    if bounded:
        _bound_table(mode, K, steps, 1.0, Dp, Dn)
    dense = nz * DENSE_COLUMNS > K
    for i in range(n_slots):
        if alive[i]:
            kv = krow[idx[i]]
            if dense and math.isfinite(kv):
                for k in range(K):
                    F[i, k] += steps[k] * kv
            else:
                for q in range(nz):
                    F[i, cols[q]] += steps[cols[q]] * kv
            if bounded:
                _grow_bound(ub, i, _bound_step(Dp, Dn, lab[i], kv))


@njit(inline="always", **NUMBA_FLAGS)
def _remove_scores(v, n_slots, kern, mode, K, rows, sq, idx, A, F, lab, alive, bounded, ub, cols, Dp, Dn, Z, xw):
    """Slot ``v`` (pattern ``rows[idx[v]]``, squared norm ``sq[idx[v]]``) leaves: ``F[i] -= A[v] k(x_v, x_i)`` for the other live
    slots ``< n_slots`` (0 when the scores are not kept), and with ``bounded`` their margin bounds
    grow (:func:`_pick_bounded`).  The single learner's slots hold their rows (``idx`` the
    identity); an OBPM member's point into the pool.

    The kernel row of ``x_v`` runs over ``SLOT_BLOCK`` slots at a time: their dot products are
    independent sums in registers, each over the features in order as :func:`_dot` sums it (the same
    bits as :func:`_kval`), so the row is bound by throughput, not by the latency of one long sum.  With a sparse
    mirror (``Z``, by row, on) each product is :func:`_slot_dot` of the other pattern's
    nonzeros against ``x_v``: the same bits, its nonzeros' cost (a branch-free gather from ``x_v``: testing a
    bitmap of its columns first measured 1.8x slower).  A sparse store (``rows`` of no columns: the mirror holds
    every pattern) puts ``x_v`` in the zero scratch ``xw`` (``d`` values) for the pass and clears it."""
    xv = rows[idx[v]]
    store = rows.shape[1] == 0
    vr = idx[v]
    if store:
        for p in range(Z.s[vr], Z.s[vr] + Z.n[vr]):
            xw[Z.k[p]] = Z.v[p]
        xv = xw
    sqv = sq[idx[v]]
    nz = _nonzero_columns(K, A[v], cols)
    dense = nz * DENSE_COLUMNS > K
    if bounded:
        _bound_table(mode, K, A[v], -1.0, Dp, Dn)
    grp = np.empty(SLOT_BLOCK, dtype=np.int64)
    dv = np.empty(SLOT_BLOCK, dtype=np.float64)
    d = xv.shape[0]
    ng = 0
    for i in range(n_slots + 1):
        if i < n_slots:
            if not alive[i] or i == v:
                continue
            grp[ng] = i
            ng += 1
            if ng < SLOT_BLOCK:
                continue
        elif ng == 0:
            break
        if Z.m[1] > 0:
            for p in range(ng):
                dv[p] = _slot_dot(Z, idx[grp[p]], rows, xv)
        elif ng == SLOT_BLOCK:
            r0, r1, r2, r3 = rows[idx[grp[0]]], rows[idx[grp[1]]], rows[idx[grp[2]]], rows[idx[grp[3]]]
            r4, r5, r6, r7 = rows[idx[grp[4]]], rows[idx[grp[5]]], rows[idx[grp[6]]], rows[idx[grp[7]]]
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
            for j in range(d):
                xj = xv[j]
                a0 += xj * r0[j]
                a1 += xj * r1[j]
                a2 += xj * r2[j]
                a3 += xj * r3[j]
                a4 += xj * r4[j]
                a5 += xj * r5[j]
                a6 += xj * r6[j]
                a7 += xj * r7[j]
            dv[0], dv[1], dv[2], dv[3], dv[4], dv[5], dv[6], dv[7] = a0, a1, a2, a3, a4, a5, a6, a7
        else:
            for p in range(ng):
                dv[p] = _dot(xv, rows[idx[grp[p]]])
        for p in range(ng):
            i2 = grp[p]
            kv = _kfin(kern, dv[p], sqv, sq[idx[i2]])
            if dense and math.isfinite(kv):
                for k in range(K):
                    F[i2, k] -= A[v, k] * kv
            else:
                for q in range(nz):
                    F[i2, cols[q]] -= A[v, cols[q]] * kv
            if bounded:
                _grow_bound(ub, i2, _bound_step(Dp, Dn, lab[i2], kv))
        ng = 0
    if store:
        for p in range(Z.s[vr], Z.s[vr] + Z.n[vr]):
            xw[Z.k[p]] = 0.0


@njit(inline="always", **NUMBA_FLAGS)
def _self_kernel(kern, x):
    """``(ok, ||x||^2, k(x, x))`` of a round's row; ``ok`` is False when ``||x||^2`` overflows or
    underflows float64 (every kernel value would be 0, 1 or inf: the round is refused)."""
    sqx = _dot(x, x)
    if _out_of_range(sqx, x, 0, x.shape[0]):
        return False, sqx, 0.0
    return True, sqx, _kfin(kern, sqx, sqx, sqx)


@njit(inline="always", **NUMBA_FLAGS)
def _round_self_kernel(kern, x, R, ii, csr):
    """:func:`_self_kernel` of round ``ii``'s row: ``x``, or with ``csr`` its CSR row in ``R`` (``||x||^2`` over the
    nonzeros: the same sum, the zeros add +0)."""
    if not csr:
        return _self_kernel(kern, x)
    rr = R.order[ii]
    lo, hi = R.p[rr], R.p[rr + 1]
    sqx = _dot(R.v[lo:hi], R.v[lo:hi])
    if _out_of_range(sqx, R.v, lo, hi):
        return False, sqx, 0.0
    return True, sqx, _kfin(kern, sqx, sqx, sqx)


@njit(**NUMBA_FLAGS)
def _remove(v, t, kern, mode, c, ident, bounded, ub, keep_scores, cols, Dp, Dn, xw):
    """Remove slot ``v`` of the cache ``c`` at round ``t`` (:func:`_remove_scores`; ``ident`` the
    identity slot -> row map)."""
    _remove_scores(v, c.meta[0] if keep_scores else 0, kern, mode, c.A.shape[1], c.S, c.sq, ident, c.A, c.F, c.lab,
                   c.alive, bounded, ub, cols, Dp, Dn, c.Z, xw)
    c.alive[v] = False
    c.died[v] = t
    c.meta[1] -= 1


@njit(inline="always", **NUMBA_FLAGS)
def _twin(n_slots, x, sqx, yc, S, sq, lab, alive, Z, cols, vals, lo, hi):
    """The earliest live slot holding exactly the row ``x`` with class ``yc`` (-1 if none): an update on
    a cached pattern replaces that slot by one pattern with the summed coefficients, never a duplicate.
    A sparse store (``S`` of no columns) compares the slot's nonzeros in the mirror with ``x``'s: with CSR rows
    (``hi >= 0``) ``x``'s entries ``lo:hi`` of ``cols``/``vals`` (columns ascending, stored zeros skipped), so the
    test costs the row's nonzeros, not ``d`` (hashed text, 2**20 columns: every update on a cached row in a second
    pass scanned the whole densified row, 0.3 ms each); dense rows their ``d`` values."""
    for i in range(n_slots):
        if alive[i] and lab[i] == yc and sq[i] == sqx:
            same = True
            if S.shape[1] == 0:
                p = Z.s[i]
                end = p + Z.n[i]
                for q in range(lo, hi) if hi >= 0 else range(x.shape[0]):
                    j = cols[q] if hi >= 0 else q
                    xj = vals[q] if hi >= 0 else x[q]
                    if xj != 0.0:
                        if p == end or Z.i[p] != j or Z.v[p] != xj:
                            same = False
                            break
                        p += 1
                same = same and p == end
            else:
                for j in range(x.shape[0]):
                    if S[i, j] != x[j]:
                        same = False
                        break
            if same:
                return i
    return -1


@njit(**NUMBA_FLAGS)
def learn_budget_block(X, y, order, uniforms, rule, kern, budget, mode, c, log, blocked, dots, R):
    """All rounds of one dense block, in ``order``: the rule ``rule`` (:class:`StepRule`) with the
    kernel ``kern`` (:class:`KernelParams`) on the cache ``c`` (:class:`Cache`) within ``budget``
    (:class:`BudgetSpec`), scores in ``mode`` (MODE_BINARY, MODE_OVR, MODE_NATIVE; K = the columns
    of ``c.A``).  Each round writes its entry of ``log`` (:class:`BudgetLog`).

    ``c.meta = [n_slots, n_alive, t]`` (``t`` the learner's round counter, which
    keys ``born``/``died``); ``uniforms[ii]`` the random removal draw of round
    ``ii``.  The caller guarantees room for ``len(order)`` more slots (``2 len(order)`` when
    merging: a round may append its pattern and a merged one; ``log.removed`` counts the two
    merged patterns).  Returns -1, or the position
    in ``order`` of the first round whose scores are not finite, or whose
    ``||x||^2`` overflows or underflows float64 (that round and later ones are
    not applied; the driver names the cause); ``-2 - i`` when round ``i``'s row does not fit a sparse store's pool
    (a driver error: it reserves room for the chunk's rows first).  ``blocked``: compute the kernel rows of
    ``ROW_BLOCK`` rounds at a time against the slots live at the block's start
    (:func:`_block_rows`), patching the patterns inserted inside the block row
    by row -- the same values as ``blocked=False``, bit for bit.  ``dots`` (blocked only; shape ``(0, 0, 0)``
    for none): the block rows' dot products with the cached patterns, computed once for several learners
    (:func:`shared_dots`: ``dots[ii // ROW_BLOCK, r, ii % ROW_BLOCK]`` = the row of the learner's round ``r``
    . the row of ``order[ii]``; every live slot must hold the row of its round ``born``, so no merging),
    read instead of computed (:func:`_next_shared`, the same bits).

    ``R`` (:class:`Rows`; ``R.p`` empty for dense rows): the rounds' rows as CSR, ``R.order[ii]`` round ``ii``'s
    row (``order`` is then ``0 .. ROW_BLOCK - 1`` repeated: positions in the block) and ``X`` a zero
    ``(ROW_BLOCK, d)`` scratch the engine fills block by block (:func:`_fill_block`): a round costs its row's
    nonzeros, never ``d`` (the same bits as the densified rows; shared ``dots`` from :func:`shared_csr_dots`).

    ``budget.code == BUDGET_PROJECTRON`` (Orabona, Keshet & Caputo 2009): ``c.Kinv`` holds
    the inverse Gram matrix of the cache (nothing is ever removed, so slots are
    the cache in order); an update whose pattern is within ``eta = budget.span_tol`` of the span
    of the cache (``delta^2 = k(x,x) - k_t . K^{-1} k_t <= eta^2``) adds
    ``steps d*``, ``d* = K^{-1} k_t``, to the cached coefficients instead of inserting.
    """
    d = X.shape[1]
    K = c.A.shape[1]
    cap = c.S.shape[0]
    projectron = budget.code == BUDGET_PROJECTRON
    csr = R.p.shape[0] > 0
    mirrored = c.Z.m[1] > 0
    store = c.S.shape[1] == 0  # a sparse store: every pattern in the mirror alone
    # _next_mirrored's gathered block (its last row stays zero): with CSR rows as many rows as a block has
    # nonzeros, so no engine call costs d (hashed text: 2**20 columns); the column map and the removal's scratch
    # row are then the caller's (Rows.cmap, Rows.xw: d each, kept clean between calls)
    Xt = np.zeros((csr_work_rows(_block_nonzeros(R, order.shape[0]), d) if csr and mirrored else d + 1, ROW_BLOCK),
                  dtype=np.float64)
    sqt = np.zeros(ROW_BLOCK, dtype=np.float64)
    G = np.zeros((ROW_BLOCK, cap), dtype=np.float64)
    acc = np.zeros((SLOT_BLOCK, ROW_BLOCK), dtype=np.float64)
    live = np.zeros(cap, dtype=np.int64)
    krow = np.zeros(cap, dtype=np.float64)  # the round's kernel row against the slots
    if csr:
        xw = R.xw if c.S.shape[1] == 0 else R.xw[:0]  # a sparse store's removed pattern, densified
        cmap = R.cmap if mirrored else R.cmap[:0]  # _next_mirrored's column positions (-1: none)
    else:
        xw = np.zeros(d if c.S.shape[1] == 0 else 0, dtype=np.float64)
        cmap = np.full(d if mirrored else 0, -1, dtype=np.int32)
    used = np.zeros(Xt.shape[0] if mirrored else 0, dtype=np.int64)
    dd = np.zeros(cap if projectron else 0, dtype=np.float64)
    n0 = 0
    b0 = 0
    # blocked: the rounds [b0 + ..., sums_end) have their scores in M over the slots < n_at (_score_rows);
    # a round that removes a pattern or changes cached coefficients ends them (a later round's sum would
    # skip a slot in the middle of its order), an insertion does not (the new slot is summed last, in order)
    M = np.zeros((ROW_BLOCK if blocked else 0, K), dtype=np.float64)
    sums_end = 0
    n_at = 0
    n_order = order.shape[0]
    m = np.zeros(K, dtype=np.float64)
    steps = np.zeros(K, dtype=np.float64)
    work = np.zeros(K, dtype=np.float64)
    negv = np.zeros(K, dtype=np.float64)  # a twin's coefficients, negated (it leaves)
    carry = np.zeros(K, dtype=np.float64)  # a twin's summed coefficients, carried into its return
    dummy = np.zeros(0, dtype=np.float64)
    # the scores F of the cached patterns are read only by margin-based removal; without it they
    # are not kept (the driver marks them stale: BudgetState.scores_kept).  Removal by margin
    # tests bounds first (_pick_bounded).
    keep_scores = budget.code == BUDGET_VARIABLE or (budget.code == BUDGET_FIXED and budget.removal == REMOVE_MARGIN)
    bounded = keep_scores
    cols = np.zeros(K, dtype=np.int64)  # the nonzero columns of an update (a zero changes no score)
    ub = np.full(cap if bounded else 0, np.inf)
    cand = np.zeros(cap if bounded else 0, dtype=np.int64)  # scratch of _pick_bounded
    Dp = np.zeros(max(K, 2), dtype=np.float64)  # margin-bound growth per unit kernel value, by class
    Dn = np.zeros(max(K, 2), dtype=np.float64)
    ident = np.arange(cap)  # slot i holds row i (_remove_scores)
    offs = np.arange(ROW_BLOCK) * cap  # where row b of G starts, flat (_score_rows)
    S, A, F, alive, meta = c.S, c.A, c.F, c.alive, c.meta
    for ii in range(n_order):
        if csr and ii % ROW_BLOCK == 0 and not store:  # a store reads its rows from R alone (_slot_dot_row)
            _fill_block(R.buf, R, ii, n_order)  # R.buf is X (written through the record: X may be read-only)
        if blocked and ii % ROW_BLOCK == 0:
            b0 = ii
            n0 = meta[0]
            if dots.shape[0] > 0:
                _next_shared(kern, X, order, ii, dots, c.born, c.sq, alive, n0, sqt, G, acc, R)
            elif mirrored:
                _next_mirrored(kern, X, order, ii, S, c.sq, alive, n0, c.Z, sqt, G, Xt, acc, cmap, used, R)
            else:
                _next_block(kern, X, order, ii, S, c.sq, alive, n0, Xt, sqt, G, acc, live)
            sums_end = ii
        r = order[ii]
        x = X[r]
        rrow = R.order[ii] if csr else 0  # the round's CSR row
        yc = y[R.order[ii] if csr else r]
        t = meta[2]
        ok, sqx, kxx = _round_self_kernel(kern, x, R, ii, csr)
        if not ok:
            return ii
        n_slots = meta[0]
        for k in range(K):
            m[k] = 0.0
        kr = krow  # the round's kernel row by slot: the scratch, or (blocked) the block's row of G
        if blocked:
            if ii >= sums_end:
                n_at = n_slots
                sums_end = min(b0 + ROW_BLOCK, n_order, ii + SUM_ROWS)
                _score_rows(kern, X, order, ii, b0, sums_end, S, c.sq, A, alive, n0, n_at, sqt, G, M, ident, offs,
                            c.Z, R)
            kr = G[ii - b0]
            for k in range(K):
                m[k] = M[ii - b0, k]
            for i in range(n_at, n_slots):  # inserted since the sums: summed last, in slot order
                if alive[i]:
                    kv = _kfin(kern, _slot_dot_row(c.Z, i, S, x, R, rrow), c.sq[i], sqx)
                    kr[i] = kv
                    for k in range(K):
                        m[k] += A[i, k] * kv
            dense_ok = True
            for k in range(K):
                dense_ok = dense_ok and math.isfinite(m[k])
            if not dense_ok:  # a dead slot's non-finite coefficient times 0: the sums over the live slots
                for k in range(K):
                    m[k] = 0.0
                for i in range(n_slots):
                    if alive[i]:
                        for k in range(K):
                            m[k] += A[i, k] * kr[i]
        else:
            for i in range(n_slots):
                if alive[i]:
                    kv = _kfin(kern, _slot_dot_row(c.Z, i, S, x, R, rrow), c.sq[i], sqx)
                    krow[i] = kv
                    for k in range(K):
                        m[k] += A[i, k] * kv
        finite = math.isfinite(kxx)
        for k in range(K):
            finite = finite and math.isfinite(m[k])
        if not finite:
            return ii
        # the prediction and the loss of the hypothesis before the update
        if mode == MODE_BINARY:
            s0 = 1.0 if yc == 1 else -1.0
            log.mistake[ii] = (m[0] >= 0.0) != (s0 > 0.0)
            h = 1.0 - s0 * m[0]
        else:
            best = 0
            for k in range(1, K):
                if m[k] > m[best]:
                    best = k
            log.mistake[ii] = best != yc
            other = -np.inf
            for k in range(K):
                if k != yc and m[k] > other:
                    other = m[k]
            h = 1.0 - (m[yc] - other)
        log.hinge[ii] = h if h > 0.0 else 0.0
        fire = _steps(rule, mode, K, m, yc, kxx, steps, work, dummy)
        n_rem = 0
        projected = False
        if fire and projectron:
            delta2 = _span_residual(n_slots, kxx, kr, c.Kinv, dd)
            if delta2 <= budget.span_tol * budget.span_tol:
                # within eta of the span: add steps d to the cached coefficients, no insertion (and
                # steps k_t to their scores, since K d = k_t)
                projected = True
                for i in range(n_slots):
                    for k in range(K):
                        A[i, k] += steps[k] * dd[i]
            else:
                _grow_inverse(n_slots, delta2, dd, c.Kinv)
        if fire and not projected:
            # making room, inserting and distilling are the OBPM member's too (ensembles/_budget.py), through
            # the same helpers; only the removal differs (a member's also updates the pool), so these
            # few lines of control flow stay in each engine
            lo = R.p[R.order[ii]] if csr else 0  # the round's CSR row (hi -1: dense rows)
            hi = R.p[R.order[ii] + 1] if csr else -1
            v = -1 if projectron else _twin(n_slots, x, sqx, yc, S, c.sq, c.lab, alive, c.Z, R.j, R.v, lo, hi)
            for k in range(K):
                carry[k] = 0.0
            if v >= 0:  # x is cached: its pattern leaves and returns with the summed coefficients (one slot)
                for k in range(K):
                    carry[k] = c.Ac[v, k] + A[v, k] * float(t - c.born[v])
                    steps[k] += A[v, k]
                    m[k] -= A[v, k] * kr[v]
                    negv[k] = -A[v, k]
                # _remove without its kernel row: x_v is x, whose row kr holds (the same bits), and
                # F -= A[v] kv is F += (-A[v]) kv exactly (fusing this pass with the insertion's measured
                # no faster)
                alive[v] = False
                c.died[v] = t
                meta[1] -= 1
                if keep_scores:
                    _insert_scores(n_slots, mode, K, negv, kr, ident, F, c.lab, alive, bounded, ub, cols, Dp, Dn)
                n_rem += 1
            if budget.code == BUDGET_FIXED and meta[1] >= budget.size and budget.removal != REMOVE_MERGE:
                v = _victim(budget.removal, n_slots, meta[1], uniforms[ii], mode, K, A, F, c.kd, c.lab, c.born,
                            alive, ub, cand)
                for k in range(K):
                    m[k] -= A[v, k] * kr[v]
                _remove(v, t, kern, mode, c, ident, bounded, ub, keep_scores, cols, Dp, Dn, xw)
                n_rem += 1
            # insert x_t into slot s
            s = meta[0]
            if S.shape[1] > 0:
                for j in range(x.shape[0]):
                    S[s, j] = x[j]
            if csr and S.shape[1] == 0:
                _mirror_nonzeros(c.Z, s, R.j, R.k, R.v, R.p[R.order[ii]], R.p[R.order[ii] + 1])
            else:
                _mirror_row(c.Z, s, x)
            if c.Z.n[s] < 0 and S.shape[1] == 0:  # a sparse store without room for the row: the driver reserves it
                return -2 - ii
            c.sq[s] = sqx
            c.kd[s] = kxx
            c.lab[s] = yc
            c.born[s] = t
            c.died[s] = -1
            for k in range(K):
                A[s, k] = steps[k]
                c.Ac[s, k] = carry[k]
            if keep_scores:
                _insert_scores(n_slots, mode, K, steps, kr, ident, F, c.lab, alive, bounded, ub, cols, Dp, Dn)
            for k in range(K):
                F[s, k] = m[k] + steps[k] * kxx
            alive[s] = True
            meta[0] = s + 1
            meta[1] += 1
            if bounded:
                ub[s] = np.inf  # computed exactly at its next pick
            if budget.code == BUDGET_FIXED and budget.removal == REMOVE_MERGE and meta[1] > budget.size:
                _merge(t, kern.gamma, c)  # the new pattern is one of the candidates, as in BSGD
                n_rem += 2
            if budget.code == BUDGET_VARIABLE:
                while True:
                    v = _pick_bounded(meta[0], mode, K, A, F, c.kd, c.lab, c.born, alive, rule.beta, ub, cand)
                    if v < 0:
                        break
                    _remove(v, t, kern, mode, c, ident, bounded, ub, keep_scores, cols, Dp, Dn, xw)
                    n_rem += 1
        if n_rem > 0 or projected:
            sums_end = min(sums_end, ii + 1)
        log.updated[ii] = fire
        log.removed[ii] = n_rem
        log.cache_size[ii] = meta[1]
        meta[2] = t + 1
    return -1


@njit(**NUMBA_FLAGS)
def kernel_vote_counts(X, S, sq, coef, kernel, kp, ev_t, ev_p, ev_s, a, b, out):
    """Votes of the hypotheses ``h_a .. h_b`` of a kernel learner's history on every row.

    ``S``/``coef``: every pattern ever cached; the events, sorted by time, say
    that from hypothesis ``ev_t[e]`` on, pattern ``ev_p[e]`` is in (``ev_s = +1``)
    or out (``-1``).  Between events the hypothesis is constant, so each run
    of equal hypotheses votes once with its length.  ``out[r, 0]`` counts the
    binary votes for the positive class; ``out[r, k]`` the multiclass votes for
    class ``k`` (argmax, first on ties).  O(P d + E K) per row.  ``kernel``, ``kp``: the
    kernel's code and ``[gamma, degree, coef0]``; ``sq`` the patterns' squared norms.  The kernel
    rows are the engine's blocked products (:func:`_block_rows`, ``ROW_BLOCK`` rows at a time).
    """
    kern = KernelParams(kernel, kp[0], kp[1], kp[2])
    P = S.shape[0]
    K = coef.shape[1]
    E = ev_t.shape[0]
    order = np.arange(X.shape[0])
    every = np.ones(P, dtype=np.bool_)
    Xt = np.zeros((X.shape[1], ROW_BLOCK), dtype=np.float64)
    sqt = np.zeros(ROW_BLOCK, dtype=np.float64)
    G = np.zeros((ROW_BLOCK, P), dtype=np.float64)
    acc = np.zeros((SLOT_BLOCK, ROW_BLOCK), dtype=np.float64)
    live = np.zeros(P, dtype=np.int64)
    f = np.zeros(K, dtype=np.float64)
    for r in range(X.shape[0]):
        if r % ROW_BLOCK == 0:
            _next_block(kern, X, order, r, S, sq, every, P, Xt, sqt, G, acc, live)
        kx = G[r % ROW_BLOCK]
        for k in range(K):
            f[k] = 0.0
        e = 0
        t = 0
        while t <= b:
            while e < E and ev_t[e] <= t:
                p = ev_p[e]
                for k in range(K):
                    f[k] += ev_s[e] * coef[p, k] * kx[p]
                e += 1
            nxt = ev_t[e] if e < E else b + 1
            if nxt > b + 1:
                nxt = b + 1
            lo = t if t > a else a
            n = nxt - lo
            if n > 0:
                if K == 1:
                    if f[0] >= 0.0:
                        out[r, 0] += n
                else:
                    best = 0
                    for k in range(1, K):
                        if f[k] > f[best]:
                            best = k
                    out[r, best] += n
            t = nxt
    return out


@njit(**NUMBA_FLAGS)
def kernel_scores(X, S, sq, coef, kern, out):
    """``out[r] = sum_i coef[i] k(S[i], X[r])`` for every row of ``X`` (``sq`` the patterns' squared norms,
    ``kern`` a :class:`KernelParams`): the engine's blocked kernel rows (:func:`_next_block`, ``ROW_BLOCK``
    rows at a time, kept in cache) and its gathered score sums (:func:`_gathered_sums`, four rows per read of
    ``coef``), never a whole kernel matrix in memory.  Each score is the per-round sum over the patterns in
    order of the engine's kernel values (the bits a learner's round computes over the same cache)."""
    P = S.shape[0]
    K = coef.shape[1]
    n = X.shape[0]
    order = np.arange(n)
    every = np.ones(P, dtype=np.bool_)
    ident = np.arange(P)
    offs = np.arange(ROW_BLOCK) * P
    Xt = np.zeros((X.shape[1], ROW_BLOCK), dtype=np.float64)
    sqt = np.zeros(ROW_BLOCK, dtype=np.float64)
    G = np.zeros((ROW_BLOCK, P), dtype=np.float64)
    acc = np.zeros((SLOT_BLOCK, ROW_BLOCK), dtype=np.float64)
    live = np.zeros(P, dtype=np.int64)
    M = np.zeros((ROW_BLOCK, K), dtype=np.float64)
    for ii in range(0, n, ROW_BLOCK):
        nb = min(ROW_BLOCK, n - ii)
        _next_block(kern, X, order, ii, S, sq, every, P, Xt, sqt, G, acc, live)
        for b0 in range(0, nb, SUM_ROWS):
            _gathered_sums(coef, ident, every, P, G.reshape(ROW_BLOCK * P), offs, b0, min(nb, b0 + SUM_ROWS),
                           M.reshape(ROW_BLOCK * K))
        for b in range(nb):
            for k in range(K):
                out[ii + b, k] = M[b, k]
    return out


@njit(**NUMBA_FLAGS)
def csr_dots(xp, xj, xv, sp_, sj, sv, d, G):
    """``G[r, i] = x_r . s_i`` for CSR rows ``(xp, xj, xv)`` and CSR patterns ``(sp_, sj, sv)`` whose columns are
    keyed in ``[0, d)`` (the caller's :func:`~distlearn.learners.kernel.dense_keys`: ``d`` the columns met; a key
    only names a column, the sums run in each row's order), their structure checked by the caller (every key in
    ``[0, d)``, pointers monotone).

    As the engine's mirrored rows (:func:`_next_mirrored`): ``ROW_BLOCK`` rows are gathered by column
    (``Xt[cmap[j], b]`` the values of a column nonzero in any of them, summed for a repeated column; the last
    row stays zero), and each pattern walks its nonzeros once against them (:func:`_column_sums`).  RCV1-like
    text, 512 rows against 20,000 patterns: 0.27-0.32 CPU s (0.48 with a branch on each column instead of the
    zero row), where scipy's ``X @ S.T`` takes 1.0-1.1 s building a sparse matrix 99.9 % full."""
    n = xp.shape[0] - 1
    m = sp_.shape[0] - 1
    cmap = np.full(d, -1, dtype=np.int32)
    used, Xt, acc = _csr_block_scratch(xp, 0, n)
    for r0 in range(0, n, ROW_BLOCK):
        nb = min(ROW_BLOCK, n - r0)
        u = _gather_csr_block(xp, xj, xv, r0, nb, cmap, used, Xt)
        for i in range(m):
            _column_sums(sj, sv, sp_[i], sp_[i + 1], cmap, Xt, acc)
            for b in range(nb):
                G[r0 + b, i] = acc[b]
        for k in range(u):
            cmap[used[k]] = -1
    return G


@njit(inline="always", **NUMBA_FLAGS)
def _log2(size):
    """``log2`` of a power of two."""
    bits = 0
    while (1 << bits) < size:
        bits += 1
    return bits


@njit(inline="always", **NUMBA_FLAGS)
def _key_slot(c, shift):
    """The home slot of column ``c`` in a key table of ``2**(64 - shift)`` entries (Fibonacci hashing: the top
    bits of ``c`` times 2**64 / phi, so columns that share their low bits -- hashed ones do not, stride ones do --
    still spread)."""
    return np.int64((np.uint64(c) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(shift))


@njit(**NUMBA_FLAGS)
def key_columns(table, n_keys, cols, out):
    """``out[q]`` = the key of column ``cols[q]`` in ``table`` (open addressing, linear probing; an entry is
    ``column << 32 | key``, -1 empty), a column not in it given the next key ``n_keys, n_keys + 1, ...`` in the
    order met; returns the new count of keys, or ``-1 - count`` when the table would be more than half full (the
    caller doubles it, :func:`rekey_table`, and calls again with that count: the keys already given stay).  A
    chunk's columns keyed in one pass over its nonzeros, a table of 2-4 entries per key: no sort, no ``d``-wide
    map."""
    size = table.shape[0]
    mask = size - 1
    shift = 64 - _log2(size)
    for q in range(cols.shape[0]):
        c = np.int64(cols[q])
        h = _key_slot(c, shift)
        while True:
            e = table[h]
            if e == -1:
                if 2 * (n_keys + 1) > size:
                    return -1 - n_keys
                table[h] = (c << 32) | n_keys
                out[q] = n_keys
                n_keys += 1
                break
            if (e >> 32) == c:
                out[q] = np.int32(e & 0xFFFFFFFF)
                break
            h = (h + 1) & mask
    return n_keys


@njit(**NUMBA_FLAGS)
def rekey_table(old, new):
    """Every entry of the key table ``old`` in the larger empty table ``new`` (:func:`key_columns`)."""
    mask = new.shape[0] - 1
    shift = 64 - _log2(new.shape[0])
    for e in old:
        if e != -1:
            h = _key_slot(e >> 32, shift)
            while new[h] != -1:
                h = (h + 1) & mask
            new[h] = e
    return new
