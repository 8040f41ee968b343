"""Compiled update loops for the linear online rules (one skeleton, rules by code).

Every kernel takes a whole chunk -- a dense block or the ``indptr, indices,
data`` of a CSR slice -- plus the learner state and runs all of the chunk's
rounds in compiled code (ARCHITECTURE.md, decision 1).  Kernels never validate; the
wrapper in :mod:`distlearn.learners.linear` does.

State layout (see :class:`distlearn.learners.linear.LinearState`):

``W[j, k]``
    Feature-major weights: row ``j`` holds feature ``j``'s value for every
    output column ``k`` (ARCHITECTURE.md decision 5), so one pass over an example's
    nonzeros yields all K margins.  Row ``n_features`` is the bias weight.
``scale[k]``
    The true weight vector of column ``k`` is ``scale[k] * W[:, k]``.  Rules
    that rescale the whole vector (ALMA's and the margin perceptron's
    projection onto the unit ball, ROMMA's ``c * w``) change one number
    instead of touching every feature (scikit-learn's ``wscale`` trick).
``sqnorm[k]``
    ``||w_k||^2`` of the true weights (bias included), kept exactly in the
    update algebra for the rules that need it (O(1) per update).
``n_updates[k]``
    Updates made by column ``k`` so far (the ``k`` of the 1/sqrt(k) schedules).

Per round the kernel writes the progressive loss of the hypothesis *before*
the update on the example (0-1 mistake and hinge loss) and whether the rule
updated -- the stream of events the online-to-batch conversions consume.

Conventions (ARCHITECTURE.md): ``sgn(0) = +1``; a margin ``y w.x`` is computed as a
sequential sum over the row's stored values in index order, its products and sum in the
weights' dtype (float32 weights: float32 sums; float64: float64), then taken to float64
times the scale -- the same order and precision as scikit-learn's ``WeightVector.dot``
(``WeightVector32``/``WeightVector64``), which is what makes the peer tests exact.

A rule reaches the kernels as its code and its parameter vector ``p`` (``Rule.params``,
``N_PARAMS`` float64 slots filled by the builders of :mod:`distlearn.learners.linear`).
Every slot is read by its name below (``p[P_ETA]``), never by a bare number, so the meaning
of a parameter is written once, here, for the builders and every kernel.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._config import NUMBA_FLAGS
from ._simd import (
    dense_margins_1,
    dense_margins_2,
    dense_margins_3,
    dense_margins_4,
    dense_margins_pair_1,
    dense_margins_pair_2,
    dense_margins_pair_3,
    dense_margins_pair_4,
)

# Rule codes.  Binary rules act on each output column independently
# (one-vs-rest when there are several); native rules couple the columns.
PERCEPTRON = 0
GENERALIZED = 1
MARGIN = 2
ALMA = 3
ROMMA = 4
AGGRESSIVE_ROMMA = 5
PA = 6
PA1 = 7
PA2 = 8
MIRA = 9
LMS = 10
MC_PA = 11
MC_PA1 = 12
MC_PA2 = 13
MC_MIRA = 14

FIRST_NATIVE = MC_PA

# The slots of a rule's parameter vector ``p`` (ARCHITECTURE.md, "Adding a linear rule"):
# each rule's builder in learners/linear.py writes them by these names, the steps read them so.
N_PARAMS = 8
P_RHO = 0             #: generalized: the update margin rho (rho_k = rho / sqrt(k) with P_RHO_SCHEDULE)
P_ETA = 1             #: perceptron, generalized (and the kernel perceptron): the step eta
P_RHO_SCHEDULE = 2    #: generalized: 1.0 for rho / sqrt(k), 0.0 for a constant rho
P_ETA_SCHEDULE = 3    #: generalized: 1.0 for eta / sqrt(k), 0.0 for a constant eta
P_MARGIN_ETA = 0      #: margin perceptron: its step 1 / (sqrt(horizon) R)
P_ALMA_MARGIN = 0     #: ALMA: the update margin (1 - alpha) B (over sqrt(k))
P_ALMA_C = 1          #: ALMA: the step C (over sqrt(k))
P_C = 0               #: PA-I / PA-II (binary and native): the aggressiveness C
P_BETA = 0            #: MIRA (binary and native): the margin beta
P_LMS_ETA = 0         #: LMS: the step eta

#: Rules whose step or condition reads ``||w||`` (so ``sqnorm`` is maintained): the kernels'
#: ``need_norm`` (:func:`_needs_norm`).
NORM_RULES = (GENERALIZED, MARGIN, ALMA, ROMMA, AGGRESSIVE_ROMMA)
#: Rules that project ``w`` back onto the unit ball after each update.
PROJECTED_RULES = (MARGIN, ALMA)

# A column whose scale leaves [TINY, HUGE] is folded back into W (O(d), rare).
_TINY = 1e-30
# A running sum P + q * W is rebased (P += q * W, q = 0: O(d), W untouched)
# when a column's scale has moved by this factor since the last rebase; else
# q * W would grow as the scale shrinks and cost digits to cancellation.
_REBASE = 16.0
_HUGE = 1e30
class LinearArrays(NamedTuple):
    """The arrays a linear pass reads and writes, as the compiled entry points take them
    (numba types a NamedTuple by its fields; the entry point unpacks it on its first line,
    which compiles to the code the positional arguments did).  The first five are
    :class:`~distlearn.learners.linear.LinearState`'s; the last three its running sum's
    (:class:`~distlearn.learners.linear.RunningSum`, flattened; empty ``accP``/``accq``:
    no running sum); ``step`` the rounds' sample weights.  The entry points also take
    ``reps``: None, or int64 per-round counts for the running sum aligned with the log (round ``ii``'s
    hypothesis is added ``reps[out_offset + ii]`` times instead of by ``acc_cfg``'s start and cut:
    cutoff averaging's event replay); None is pruned before compiling, so the plain rounds keep
    their code.  The per-round outputs are a second record,
    :class:`~distlearn.learners.linear.RoundLog` (``mistake``, ``hinge``, ``updated``)."""

    W: np.ndarray          #: (n_features + 1, K) feature-major weights, in units of ``scale``
    scale: np.ndarray      #: (K,) float64
    sqnorm: np.ndarray     #: (K,) float64
    n_updates: np.ndarray  #: (K,) int64
    age: np.ndarray        #: (1,) int64, rounds the current hypothesis has been used
    accP: np.ndarray       #: running sum's P, flat ((n_features + 1) K), or empty
    accq: np.ndarray       #: running sum's [q (K), scale at the last rebase (K)], or empty
    acc_cfg: np.ndarray    #: int64 [start, cut, base, hypotheses added]
    step: np.ndarray       #: float64 per-round step scales (sample weights), aligned with the log
                           #: (round ``ii`` reads ``step[out_offset + ii]``), or empty: every scale 1


# Rows ahead that a pass prefetches (see _learn_csr).
_AHEAD = 8
# The numeric guard (ARCHITECTURE.md decision 10): a squared norm of a row outside
# [smallest normal number of the row's dtype, largest float64] cannot drive a step.
_MAXF = 1.7976931348623157e308
_TINY64 = 2.2250738585072014e-308
_TINY32 = 1.1754943508222875e-38


@intrinsic
def _prefetch(typingctx, arr, idx):
    """``llvm.prefetch`` (read, high locality) of ``arr.flat[idx]``'s cache line.

    Used where the next reads are known but scattered: the rows of a permuted
    epoch (the single-learner kernel prefetches the row a few rounds ahead),
    and every member's weight lines of the next row (the OBPM kernel).  The
    loads then overlap instead of waiting on each other's misses.
    """
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(**NUMBA_FLAGS)
def _fold_scale(W, scale, k, accq):
    s = scale[k]
    if accq.shape[0]:
        # The running sum is P + q * W (see _learn_csr); W grows by s, so q
        # shrinks by s, and so does the scale the sum was last rebased at.
        K = W.shape[1]
        accq[k] /= s
        accq[K + k] /= s
    for j in range(W.shape[0]):
        W[j, k] = W[j, k] * s
    scale[k] = 1.0


@njit(**NUMBA_FLAGS)
def _check_rebase(W, scale, k, accP, accq):
    """Fold ``q * W`` into ``P`` once the scale has drifted ``_REBASE``-fold since the
    last time (``accq[K + k]`` holds that scale)."""
    K = W.shape[1]
    r = abs(scale[k] / accq[K + k])
    if r < 1.0 / _REBASE or r > _REBASE:
        q = accq[k]
        if q != 0.0:
            for j in range(W.shape[0]):
                accP[j * K + k] += q * W[j, k]
            accq[k] = 0.0
        accq[K + k] = scale[k]


@njit(**NUMBA_FLAGS)
def _zero_column(W, scale, sqnorm, k, accP, accq):
    """w_k <- 0 (ROMMA's c can be exactly 0; a zero scale could not be divided by)."""
    K = W.shape[1]
    if accq.shape[0]:
        q = accq[k]
        for j in range(W.shape[0]):
            accP[j * K + k] += q * W[j, k]
        accq[k] = 0.0
        accq[K + k] = 1.0
    for j in range(W.shape[0]):
        W[j, k] = 0.0
    scale[k] = 1.0
    sqnorm[k] = 0.0


# Cutoff averaging's survival-time group sums (``CutoffTracker(mode="groups")``), kept by the
# binary round of :func:`_learn_csr` in the running-sum arrays when ``acc_cfg`` is longer than
# ``_G_HEAD``: slot ``g``'s sum is ``accP[j * cap + g] + accq[g] * W[j, 0]`` (true units, feature
# ``j``), ``accq[cap]`` the scale at the last rebase, ``acc_cfg[_G_HEAD + g]`` the slot's survival
# time (``learners/linear.py: GroupSums``).
_G_CAP = 4    #: acc_cfg slot: the slots' capacity
_G_USED = 5   #: acc_cfg slot: slots in use
_G_GROW = 6   #: acc_cfg slot: set to 1 when the kernel stopped at a round that needs a new slot
_G_HEAD = 8   #: acc_cfg slots before the survival times


@njit(inline="always", **NUMBA_FLAGS)
def _group_slot(acc_cfg, s):
    """The slot of survival time ``s`` (a new slot if it has none), or -1 when all are taken."""
    n = acc_cfg[_G_USED]
    for g in range(n):
        if acc_cfg[_G_HEAD + g] == s:
            return g
    if n == acc_cfg[_G_CAP]:
        return -1
    acc_cfg[_G_HEAD + n] = s
    acc_cfg[_G_USED] = n + 1
    return n


@njit(**NUMBA_FLAGS)
def _group_fold(W, accP, accq, acc_cfg):
    """Every group's ``q * W`` into its ``P`` (O(d x groups); at a rebase or a zeroed column)."""
    cap = acc_cfg[_G_CAP]
    n = acc_cfg[_G_USED]
    for j in range(W.shape[0]):
        wj = W[j, 0]
        b = j * cap
        for g in range(n):
            accP[b + g] += accq[g] * wj
    for g in range(n):
        accq[g] = 0.0


@njit(inline="always", **NUMBA_FLAGS)
def _tiny(vx):
    """The smallest normal number of the row's dtype: a square below it has lost its digits."""
    return _TINY32 if vx.itemsize == 4 else _TINY64


@njit(**NUMBA_FLAGS)
def _any_nonzero(vx, lo, hi):
    for jj in range(lo, hi):
        if vx[jj] != 0:
            return True
    return False


@njit(inline="always", **NUMBA_FLAGS)
def _out_of_range(acc, vx, lo, hi):
    """Whether ``acc``, a sum of squares over the row ``vx[lo:hi]`` (weighted by factors <= 1),
    cannot drive a step: not finite, or below the smallest normal number of the row's dtype
    although the row has a nonzero value.  The one test of the numeric guard, shared by every
    engine (the linear, adaptive and kernel ones); the row is re-read only when the sum is tiny."""
    if acc <= _MAXF and acc >= _tiny(vx):
        return False
    return acc != 0.0 or _any_nonzero(vx, lo, hi)


@njit(inline="always", **NUMBA_FLAGS)
def _sqnorm(vx, lo, hi, fit_intercept, bias):
    """||x||^2 of one row (bias feature included when fitted), summed in order.

    NaN when the row's own sum cannot drive a step: it overflowed, or it fell below the
    smallest normal number of the row's dtype although the row has a nonzero value (the
    features are too large or too small for the dtype).  Every caller stops the round on
    a NaN and returns its position, which the driver reports (``raise_bad_round``): one
    test after a sum that the step needed anyway."""
    acc = 0.0
    for jj in range(lo, hi):
        v = vx[jj]
        acc += v * v
    if _out_of_range(acc, vx, lo, hi):
        return np.nan
    if fit_intercept:
        acc += bias * bias
    return acc


@njit(inline="always", **NUMBA_FLAGS)
def _guard(xsq, mk, c, u, need_norm, vx, lo, hi, fit_intercept, bias):
    """The numeric guard of a step that fired (``w <- c w + u x`` at margin ``mk``): returns
    ``xsq``, summed now when the bookkeeping needs it (``need_norm``) or when the margin is
    below the smallest normal number (0 or subnormal: either a genuinely zero margin, or
    products that underflowed -- :func:`_sqnorm` tells them apart), or NaN when the step is
    not finite or the row's norm is out of range.  A NaN stops the round: the caller
    returns its position.  Costs a few flops per update and nothing per round."""
    if xsq < 0.0 and (need_norm or abs(mk) < _tiny(vx)):
        xsq = _sqnorm(vx, lo, hi, fit_intercept, bias)
    if c - c != 0.0 or u - u != 0.0:
        return np.nan
    return xsq


@njit(inline="always", **NUMBA_FLAGS)
def _binary_step(rule, p, z, yk, m, sqn, kk, xsq):
    """Return (fire, c, u, project) for one column.

    ``z = yk * m`` is the signed margin of the current (true) weights, ``sqn``
    their squared norm, ``kk`` the 1-based update index, ``xsq`` the example's
    squared norm (bias included).  The update is ``w <- c * w + u * x``,
    followed by a projection onto the unit ball when ``project``.
    """
    if rule == PERCEPTRON:
        if z <= 0.0:
            return True, 1.0, yk * p[P_ETA], False
        return False, 1.0, 0.0, False
    if rule == GENERALIZED:
        nrm = math.sqrt(sqn)
        g = z / nrm if nrm > 0.0 else 0.0
        rho = p[P_RHO] / math.sqrt(kk) if p[P_RHO_SCHEDULE] != 0.0 else p[P_RHO]
        if g <= rho:
            eta = p[P_ETA] / math.sqrt(kk) if p[P_ETA_SCHEDULE] != 0.0 else p[P_ETA]
            return True, 1.0, yk * eta, False
        return False, 1.0, 0.0, False
    if rule == MARGIN:
        if 1.0 - z > 0.0:
            return True, 1.0, yk * p[P_MARGIN_ETA], True
        return False, 1.0, 0.0, False
    if rule == ALMA:
        root = math.sqrt(kk)
        if z <= p[P_ALMA_MARGIN] / root:
            return True, 1.0, yk * (p[P_ALMA_C] / root), True
        return False, 1.0, 0.0, False
    if rule == ROMMA or rule == AGGRESSIVE_ROMMA:
        if (rule == ROMMA and z <= 0.0) or (rule == AGGRESSIVE_ROMMA and z < 1.0):
            if xsq <= 0.0:
                return False, 1.0, 0.0, False
            if sqn <= 0.0:
                # First update: the smallest w with y w.x >= 1 is y x / ||x||^2.
                return True, 1.0, yk / xsq, False
            den = xsq * sqn - m * m
            if den <= 1e-12 * xsq * sqn:
                # x parallel to w: the two half-spaces do not cut a segment;
                # fall back to the projection onto y w.x >= 1.
                return True, 1.0, yk * (1.0 - z) / xsq, False
            c = (xsq * sqn - z) / den
            d = sqn * (yk - m) / den
            return True, c, d, False
        return False, 1.0, 0.0, False
    if rule == PA or rule == PA1 or rule == PA2:
        loss = 1.0 - z
        if z <= 1.0 and loss > 0.0:
            if rule == PA2:
                return True, 1.0, yk * (loss / (xsq + 0.5 / p[P_C])), False
            if xsq == 0.0:
                return False, 1.0, 0.0, False
            if rule == PA1:
                return True, 1.0, yk * min(p[P_C], loss / xsq), False
            return True, 1.0, yk * (loss / xsq), False
        return False, 1.0, 0.0, False
    if rule == MIRA:
        if z <= p[P_BETA] and xsq > 0.0:
            tau = (p[P_BETA] - z) / xsq
            if tau > 1.0:
                tau = 1.0
            if tau > 0.0:
                return True, 1.0, yk * tau, False
        return False, 1.0, 0.0, False
    if rule == LMS:
        u = p[P_LMS_ETA] * (yk - m)
        if u != 0.0:
            return True, 1.0, u, False
        return False, 1.0, 0.0, False
    return False, 1.0, 0.0, False


@njit(**NUMBA_FLAGS)
def _mira_taus(m, yi, xsq, tau, D):
    """Crammer & Singer's MIRA step for one example (the ultraconservative QP).

    Solves min 1/2 sum_r ||M_r + tau_r x||^2 s.t. tau_r <= [r == y] and
    sum_r tau_r = 0.  With b_r = M_r.x / ||x||^2 and D_r = b_r + [r == y] the
    solution is tau_r = min(theta - b_r, [r == y]) where theta solves
    sum_r max(D_r - theta, 0) = 1.
    """
    K = m.shape[0]
    for r in range(K):
        D[r] = m[r] / xsq + (1.0 if r == yi else 0.0)
    # Insertion sort, descending (K is small).
    for i in range(1, K):
        v = D[i]
        j = i - 1
        while j >= 0 and D[j] < v:
            D[j + 1] = D[j]
            j -= 1
        D[j + 1] = v
    csum = 0.0
    theta = 0.0
    for i in range(K):
        csum += D[i]
        t = (csum - 1.0) / (i + 1)
        if D[i] > t:
            theta = t
        else:
            break
    for r in range(K):
        b = m[r] / xsq
        cap = 1.0 if r == yi else 0.0
        v = theta - b
        tau[r] = v if v < cap else cap


@njit(inline="always", **NUMBA_FLAGS)
def _needs_xsq(rule, p, z):
    """Whether a binary rule's step reads ``||x||^2`` at signed margin ``z``
    (so the row's norm is only summed when the step will use it)."""
    if rule == PA or rule == PA1 or rule == PA2 or rule == AGGRESSIVE_ROMMA:
        return z < 1.0
    if rule == MIRA:
        return z <= p[P_BETA]
    if rule == ROMMA:
        return z <= 0.0
    return False


@njit(inline="always", **NUMBA_FLAGS)
def _needs_norm(rule):
    """Whether the rule reads ``||w||`` (one of ``NORM_RULES``), so ``sqnorm`` is maintained."""
    for r in NORM_RULES:
        if rule == r:
            return True
    return False


@njit(inline="always", **NUMBA_FLAGS)
def _native_taus(rule, p, m, yi, K, tau, work, xsq, vx, lo, hi, fit_intercept, bias):
    """The native multiclass step of one example: ``tau[k]``, the coefficient of
    ``x`` added to class ``k``'s weights (0 for the classes left alone).

    ``m`` holds the K margins of the current (true) weights (restored on
    return), ``yi`` the true class, ``xsq`` the row's squared norm or -1 when not
    yet summed; the row is ``vx[lo:hi]``.  Returns ``xsq`` (summed if the step
    needed it).  The strongest rival ``r`` is the first class ``k != yi`` of
    largest margin.

    * Multiclass MIRA (Crammer & Singer 2003), margin ``beta = p[P_BETA]``: when
      ``m[yi] - beta <= m[r]``, the ultraconservative QP of :func:`_mira_taus`
      on the margins with ``m[yi]`` lowered by ``beta``.
    * Multiclass PA / PA-I / PA-II (Crammer et al. 2006, single prototype;
      Dekel & Singer's learner), hinge ``h = 1 - (m[yi] - m[r])``: when ``h > 0``,
      ``tau[yi] = -tau[r] = h / (2 ||x||^2)`` (PA), capped at ``C = p[P_C]`` (PA-I),
      or ``h / (2 ||x||^2 + 1 / (2C))`` (PA-II).

    Shared by the single-learner skeleton and the ensemble kernel, so an OBPM
    member makes exactly its base learner's steps.
    """
    for k in range(K):
        tau[k] = 0.0
    other = -np.inf
    other_k = -1
    for k in range(K):
        if k != yi and (other_k < 0 or m[k] > other):
            other = m[k]
            other_k = k
    if rule == MC_MIRA:
        if m[yi] - p[P_BETA] <= other:
            if xsq < 0.0:
                xsq = _sqnorm(vx, lo, hi, fit_intercept, bias)
            if xsq > 0.0:
                keep = m[yi]
                m[yi] = keep - p[P_BETA]
                _mira_taus(m, yi, xsq, tau, work)
                m[yi] = keep
                for k in range(K):
                    if tau[k] - tau[k] != 0.0:
                        return np.nan  # a step that is not finite: the caller stops the round
    else:
        h = 1.0 - (m[yi] - other)
        if h > 0.0:
            if xsq < 0.0:
                xsq = _sqnorm(vx, lo, hi, fit_intercept, bias)
            step = 0.0
            if rule == MC_PA2:
                step = h / (2.0 * xsq + 0.5 / p[P_C])
            elif xsq > 0.0:
                step = h / (2.0 * xsq)
                if rule == MC_PA1 and step > p[P_C]:
                    step = p[P_C]
            if step - step != 0.0:
                return np.nan  # xsq out of range (NaN) or a step that is not finite
            tau[yi] = step
            tau[other_k] = -step
    return xsq


@njit(inline="always", **NUMBA_FLAGS)
def _rescale(W, scale, sqnorm, k, c, mk, accP, accq):
    """The rescale ``w_k <- c * w_k`` of a step (ROMMA's ``c``), O(1) through the scale;
    ``c = 0`` zeroes the column.  Returns the margin ``mk`` of the rescaled weights."""
    if c == 0.0:
        _zero_column(W, scale, sqnorm, k, accP, accq)
        mk = 0.0
    elif c != 1.0:
        scale[k] *= c
        sqnorm[k] *= c * c
        mk = mk * c
    return mk


@njit(inline="always", **NUMBA_FLAGS)
def _finish(W, scale, sqnorm, k, u, mk, xsq, project, need_norm, vx, lo, hi, fit_intercept, bias, accP, accq):
    """Column ``k``'s bookkeeping after its step ``u`` on the row ``vx[lo:hi]`` (``mk``: its
    margin after any rescale): ``||w_k||^2`` for the rules that read it, the projection
    (``project``) w_k <- w_k / max(1, ||w_k||), the scale folded into W when extreme, and
    the running sum rebased.  Shared by :func:`_apply` and :func:`_apply_dense`.  Returns
    False when ``||w_k||^2`` overflowed (the caller stops the round)."""
    if u != 0.0 and need_norm:
        if xsq < 0.0:
            xsq = _sqnorm(vx, lo, hi, fit_intercept, bias)
        sq = sqnorm[k] + 2.0 * u * mk + u * u * xsq
        if sq - sq != 0.0:
            return False
        sqnorm[k] = sq if sq > 0.0 else 0.0
    if project:
        nrm = math.sqrt(sqnorm[k])
        if nrm > 1.0:
            scale[k] /= nrm
            sqnorm[k] = sqnorm[k] / (nrm * nrm)
    sk = abs(scale[k])
    if sk < _TINY or sk > _HUGE:
        _fold_scale(W, scale, k, accq)
    if accq.shape[0]:
        _check_rebase(W, scale, k, accP, accq)
    return True


@njit(inline="always", **NUMBA_FLAGS)
def _apply(w, ix, vx, lo, hi, k, K, d, W, scale, sqnorm, c, u, mk, xsq, project, need_norm,
           fit_intercept, bias, accP, accq):
    """w_k <- c * w_k + u * x, then (``project``) w_k <- w_k / max(1, ||w_k||).  False when
    ``||w_k||^2`` overflowed (:func:`_finish`)."""
    mk = _rescale(W, scale, sqnorm, k, c, mk, accP, accq)
    if u != 0.0:
        inv = u / scale[k]
        if accq.shape[0] and accq[k] != 0.0:
            # Keep the running sum P + q * W unchanged while W moves.
            qi = accq[k] * inv
            for jj in range(lo, hi):
                b = ix[jj] * K + k
                w[b] += vx[jj] * inv
                accP[b] -= vx[jj] * qi
            if fit_intercept:
                w[d * K + k] += bias * inv
                accP[d * K + k] -= bias * qi
        else:
            if K == 1:
                for jj in range(lo, hi):
                    w[ix[jj]] += vx[jj] * inv
            else:
                for jj in range(lo, hi):
                    w[ix[jj] * K + k] += vx[jj] * inv
            if fit_intercept:
                w[d * K + k] += bias * inv
    return _finish(W, scale, sqnorm, k, u, mk, xsq, project, need_norm, vx, lo, hi, fit_intercept, bias,
                   accP, accq)


@njit(inline="always", **NUMBA_FLAGS)
def _margins_multi(w, ix, vx, lo, hi, K, acc):
    """acc[k] = sum_j w[j, k] x_j for every column: one sequential sum per column
    (so each equals a one-column margin bit for bit), held in registers for
    groups of 8, 4, 2 and 1 columns -- the group's sums overlap each other."""
    z = w.dtype.type(0)  # the sums in the weights' dtype (float32 sums float32 products)
    k0 = 0
    while k0 + 8 <= K:
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = z
        for jj in range(lo, hi):
            b = ix[jj] * K + k0
            xv = vx[jj]
            a0 += w[b] * xv
            a1 += w[b + 1] * xv
            a2 += w[b + 2] * xv
            a3 += w[b + 3] * xv
            a4 += w[b + 4] * xv
            a5 += w[b + 5] * xv
            a6 += w[b + 6] * xv
            a7 += w[b + 7] * xv
        acc[k0] = a0
        acc[k0 + 1] = a1
        acc[k0 + 2] = a2
        acc[k0 + 3] = a3
        acc[k0 + 4] = a4
        acc[k0 + 5] = a5
        acc[k0 + 6] = a6
        acc[k0 + 7] = a7
        k0 += 8
    if k0 + 4 <= K:
        a0 = a1 = a2 = a3 = z
        for jj in range(lo, hi):
            b = ix[jj] * K + k0
            xv = vx[jj]
            a0 += w[b] * xv
            a1 += w[b + 1] * xv
            a2 += w[b + 2] * xv
            a3 += w[b + 3] * xv
        acc[k0] = a0
        acc[k0 + 1] = a1
        acc[k0 + 2] = a2
        acc[k0 + 3] = a3
        k0 += 4
    if k0 + 2 <= K:
        a0 = a1 = z
        for jj in range(lo, hi):
            b = ix[jj] * K + k0
            xv = vx[jj]
            a0 += w[b] * xv
            a1 += w[b + 1] * xv
        acc[k0] = a0
        acc[k0 + 1] = a1
        k0 += 2
    if k0 < K:
        a0 = z
        for jj in range(lo, hi):
            a0 += w[ix[jj] * K + k0] * vx[jj]
        acc[k0] = a0


@njit(inline="always", **NUMBA_FLAGS)
def _true_margins(acc, scale, w, d, K, fit_intercept, bias, m):
    """``m[k]``: the stored-unit sums ``acc`` in true units (times the scale, plus the bias
    term).  Returns whether all K are finite."""
    finite = True
    for k in range(K):
        mk = acc[k] * scale[k]
        if fit_intercept:
            mk = mk + w[d * K + k] * scale[k] * bias
        m[k] = mk
        finite = finite and math.isfinite(mk)
    return finite


@njit(inline="always", **NUMBA_FLAGS)
def _mistake_hinge(m, yi, K):
    """(argmax m != yi, the multiclass hinge 1 - (m[yi] - max over k != yi of m[k]))."""
    best = 0
    for k in range(1, K):
        if m[k] > m[best]:
            best = k
    other = -np.inf
    for k in range(K):
        if k != yi and m[k] > other:
            other = m[k]
    return best != yi, 1.0 - (m[yi] - other)


@njit(inline="always", **NUMBA_FLAGS)
def _row_multi(w, ix, vx, lo, hi, yi, rule, p, fit_intercept, bias, d, K, W, scale, sqnorm, n_updates,
               need_norm, acc, m, tau, work, accP, accq, wt):
    """One round with K output columns: one-vs-rest for the binary rules, or a native
    multiclass rule (multiclass PA, MIRA); ``wt`` scales a binary rule's step ``u`` (the sample
    weight; 0: no update).  Returns (mistake, hinge, updated)."""
    _margins_multi(w, ix, vx, lo, hi, K, acc)
    if not _true_margins(acc, scale, w, d, K, fit_intercept, bias, m):
        # A NaN or infinity in x (0 * inf is NaN too) or overflowed weights:
        # signalled by a NaN hinge before anything is updated.
        return False, np.nan, False
    mistake, h = _mistake_hinge(m, yi, K)
    xsq = -1.0
    any_update = False
    if rule >= FIRST_NATIVE:
        xsq = _native_taus(rule, p, m, yi, K, tau, work, xsq, vx, lo, hi, fit_intercept, bias)
        if xsq != xsq:
            return False, np.nan, False
        for k in range(K):
            u = tau[k]
            if u == 0.0:
                continue
            any_update = True
            _apply(w, ix, vx, lo, hi, k, K, d, W, scale, sqnorm, 1.0, u, m[k], xsq, False, False,
                   fit_intercept, bias, accP, accq)
            n_updates[k] += 1
    else:
        for k in range(K):
            yk = 1.0 if yi == k else -1.0
            mk = m[k]
            z = yk * mk
            if xsq < 0.0 and _needs_xsq(rule, p, z):
                xsq = _sqnorm(vx, lo, hi, fit_intercept, bias)
                if xsq != xsq:
                    return False, np.nan, False
            fire, c, u, project = _binary_step(rule, p, z, yk, mk, sqnorm[k], n_updates[k] + 1.0, xsq)
            if not fire or wt == 0.0:
                continue
            if wt != 1.0:
                u = u * wt
            any_update = True
            xsq = _guard(xsq, mk, c, u, need_norm, vx, lo, hi, fit_intercept, bias)
            if xsq != xsq or not _apply(w, ix, vx, lo, hi, k, K, d, W, scale, sqnorm, c, u, mk, xsq, project,
                                     need_norm, fit_intercept, bias, accP, accq):
                return False, np.nan, False
            n_updates[k] += 1
    return mistake, (h if h > 0.0 else 0.0), any_update


@njit(inline="always", **NUMBA_FLAGS)
def _acc_rounds(accq, scale, K, acc_cfg, nr):
    """Add the current hypothesis (its scales) ``nr`` times to the running sum, one round at a time
    (``nr`` rounds of a full replay, so the same bits), and count them in ``acc_cfg[3]``."""
    for _ in range(nr):
        for k in range(K):
            accq[k] += scale[k]
    acc_cfg[3] += nr


@njit(**NUMBA_FLAGS)
def _learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset, multi, reps):
    """The skeleton: every round of a CSR chunk (dense chunks arrive compacted).

    Returns -1, or the position in ``order`` of the first round whose margin is
    not finite (a NaN or infinity in the row, or overflowed weights), or whose
    step is not (:func:`_guard`: a step or ``||x||^2`` that overflowed, or a
    ``||x||^2`` that underflowed although the row is not zero); rounds before it
    are applied and logged, that round and later ones are not (except for an
    overflow of ``||w||^2``, found after the step).  This replaces a separate
    finiteness pass over the data; the driver names the cause (``raise_bad_round``).

    ``age[0]`` counts the rounds the current hypothesis has already been used
    (0 on the round after an update).  The running sum (ARCHITECTURE.md decision 4):
    when ``accq`` is not empty, every round whose hypothesis index ``i =
    acc_cfg[2] + ii`` satisfies ``i >= acc_cfg[0]`` and (``age >= acc_cfg[1]``
    or ``i == 0``) adds that hypothesis to ``sum = accP + accq * W`` (true
    units, column by column) -- O(K) per round, plus one more multiply-add per
    updated weight to keep ``accP + accq * W`` fixed while ``W`` moves.  With
    ``acc_cfg[1] = 0`` this is the plain average's sum; with a cutoff ``k`` it is
    the numerator of cutoff averaging (B_i of Dekel's eq. 3).  ``acc_cfg[3]``
    counts the hypotheses added.

    The binary (one-column) round is written out here rather than in a helper:
    numba passes each array as many scalars, and a call per row, or a nested
    inline, measurably slows the hot loop.

    ``st`` is a :class:`LinearArrays`, ``log`` a record of the per-round outputs
    (``mistake``, ``hinge``, ``updated``), written from position ``out_offset``.  A round's
    step scale ``st.step[out_offset + ii]`` (its sample weight) multiplies the step ``u`` of a
    binary rule; a scale of 0 is a round without update; a scale of 1 is not applied (bit for
    bit the unweighted round).

    ``multi`` is ``None`` when the caller knows the round is the binary one (K == 1, a
    binary rule): numba then prunes the K-column path before compiling (its branch tests
    ``multi is None``), which is most of this kernel's compile time (about 3 s of 16 s CPU;
    benchmarks/bench_coldstart.py).  Any other value (``True``) compiles both paths and
    picks at run time.  The rounds are the same either way.
    """
    W, scale, sqnorm, n_updates, age, accP, accq, acc_cfg, step = st
    weighted = step.shape[0] > 0
    out_mistake, out_hinge, out_updated = log
    d = W.shape[0] - 1
    K = W.shape[1]
    w = W.reshape(W.shape[0] * K)  # flat view: W[j, k] is w[j * K + k]
    need_norm = _needs_norm(rule)
    binary = K == 1 and rule < FIRST_NATIVE
    acc = np.zeros(K, dtype=np.float64)
    m = np.zeros(K, dtype=np.float64)
    tau = np.zeros(K, dtype=np.float64)
    work = np.zeros(K, dtype=np.float64)
    grp = acc_cfg.shape[0] > _G_HEAD  # survival-time group sums (binary rounds only)
    acc_on = accq.shape[0] > 0 and not grp  # accq = [q (K), scale at the last rebase (K)]
    g_cap = acc_cfg[_G_CAP] if grp else 0
    no_acc = np.zeros(0, np.float64)
    acc_start = acc_cfg[0]
    acc_cut = acc_cfg[1]
    base = acc_cfg[2]
    n_order = order.shape[0]
    for ii in range(n_order):
        r = order[ii]
        lo = indptr[r]
        hi = indptr[r + 1]
        yi = y[r]
        if ii + 2 * _AHEAD < n_order:
            # A permuted epoch reads rows at random places.  Two stages: the
            # row offsets and label of round ii + 2A, then (offsets now cached)
            # the values and indices of round ii + A.  Cheap on a sequential pass.
            # Written out here, in _adaptive.py and in the OBPM pass: folded into one inline
            # helper (with the one-vs-rest steps of _row_multi/_row_dense and the OBPM member's
            # column step folded too), this binary loop measured 7-17 % slower (thread CPU time,
            # median of 5 alternating runs, 40,000 x 20,000 CSR, 80 nonzeros a row; issue 27).
            r2 = order[ii + 2 * _AHEAD]
            _prefetch(indptr, r2)
            _prefetch(y, r2)
            rn = order[ii + _AHEAD]
            for jj in range(indptr[rn], indptr[rn + 1], 8):
                _prefetch(indices, jj)
                _prefetch(data, jj)
        if acc_on:
            if reps is not None:  # the event replay: this round stands for reps[.] rounds of its hypothesis
                _acc_rounds(accq, scale, K, acc_cfg, reps[out_offset + ii])
            elif base + ii >= acc_start and (age[0] >= acc_cut or base + ii == 0):
                _acc_rounds(accq, scale, K, acc_cfg, 1)
        if multi is None or binary:
            a = w.dtype.type(0)  # summed in the weights' dtype, like every margin
            for jj in range(lo, hi):
                a += w[indices[jj]] * data[jj]
            s0 = scale[0]
            m0 = a * s0
            if fit_intercept:
                m0 = m0 + w[d] * s0 * bias
            if not math.isfinite(m0):
                return ii  # non-finite x (0 * inf is NaN too) or weights; nothing updated
            yk = 1.0 if yi == 1 else -1.0
            z = yk * m0
            mis = (m0 >= 0.0) != (yk > 0.0)
            h = 1.0 - z
            xsq = -1.0
            if _needs_xsq(rule, p, z):  # ||x||^2 only when the step reads it
                xsq = _sqnorm(data, lo, hi, fit_intercept, bias)
                if xsq != xsq:
                    return ii  # features too large or small for the dtype; nothing updated
            upd, c, u, project = _binary_step(rule, p, z, yk, m0, sqnorm[0], n_updates[0] + 1.0, xsq)
            if upd and weighted:
                wt = step[out_offset + ii]
                upd = wt != 0.0
                if wt != 1.0:
                    u = u * wt
            if upd:
                xsq = _guard(xsq, m0, c, u, need_norm, data, lo, hi, fit_intercept, bias)
                if xsq != xsq:
                    return ii  # a step that is not finite, or ||x||^2 out of range; nothing updated
                if grp:
                    # The hypothesis of this round ends, used age + 1 rounds: into its group.
                    g = _group_slot(acc_cfg, age[0] + 1)
                    if g < 0:
                        acc_cfg[_G_GROW] = 1
                        return ii  # the driver adds slots and resumes here; nothing updated
                    accq[g] += scale[0]
                # _rescale written out: through the helper this binary loop measured 7-10 % slower
                # (benchmarks/bench_learners.py, RCV1-like, float64)
                if c == 0.0:
                    if grp:
                        _group_fold(W, accP, accq, acc_cfg)
                        accq[g_cap] = 1.0
                        _zero_column(W, scale, sqnorm, 0, no_acc, no_acc)
                    else:
                        _zero_column(W, scale, sqnorm, 0, accP, accq)
                    m0 = 0.0
                elif c != 1.0:
                    scale[0] *= c
                    sqnorm[0] *= c * c
                    m0 = m0 * c
                if u != 0.0:
                    inv = u / scale[0]
                    if acc_on and accq[0] != 0.0:
                        qi = accq[0] * inv
                        for jj in range(lo, hi):
                            j = indices[jj]
                            w[j] += data[jj] * inv
                            accP[j] -= data[jj] * qi
                        if fit_intercept:
                            w[d] += bias * inv
                            accP[d] -= bias * qi
                    elif grp:
                        # Every group's P + q * W kept fixed while W moves: O(nnz x groups).
                        n_g = acc_cfg[_G_USED]
                        for jj in range(lo, hi):
                            j = indices[jj]
                            dv = data[jj] * inv
                            w[j] += dv
                            b = j * g_cap
                            for g in range(n_g):
                                accP[b + g] -= accq[g] * dv
                        if fit_intercept:
                            dv = bias * inv
                            w[d] += dv
                            b = d * g_cap
                            for g in range(n_g):
                                accP[b + g] -= accq[g] * dv
                    else:
                        for jj in range(lo, hi):
                            w[indices[jj]] += data[jj] * inv
                        if fit_intercept:
                            w[d] += bias * inv
                    if need_norm:  # (xsq summed by _guard)
                        sq = sqnorm[0] + 2.0 * u * m0 + u * u * xsq
                        if sq - sq != 0.0:
                            return ii  # ||w||^2 overflowed (this round's step is applied)
                        sqnorm[0] = sq if sq > 0.0 else 0.0
                if project:
                    nrm = math.sqrt(sqnorm[0])
                    if nrm > 1.0:
                        scale[0] /= nrm
                        sqnorm[0] = sqnorm[0] / (nrm * nrm)
                sk = abs(scale[0])
                if sk < _TINY or sk > _HUGE:
                    if grp:
                        for g in range(acc_cfg[_G_USED]):
                            accq[g] /= scale[0]
                        accq[g_cap] /= scale[0]
                        _fold_scale(W, scale, 0, no_acc)
                    else:
                        _fold_scale(W, scale, 0, accq)
                if acc_on:
                    _check_rebase(W, scale, 0, accP, accq)
                elif grp:
                    rr = abs(scale[0] / accq[g_cap])
                    if rr < 1.0 / _REBASE or rr > _REBASE:  # as _check_rebase, for every group
                        _group_fold(W, accP, accq, acc_cfg)
                        accq[g_cap] = scale[0]
                n_updates[0] += 1
        else:
            mis, h, upd = _row_multi(w, indices, data, lo, hi, yi, rule, p, fit_intercept, bias, d, K,
                                     W, scale, sqnorm, n_updates, need_norm, acc, m, tau, work,
                                     accP, accq, step[out_offset + ii] if weighted else 1.0)
            if h != h:
                return ii
        out_mistake[out_offset + ii] = mis
        out_hinge[out_offset + ii] = h if h > 0.0 else 0.0
        out_updated[out_offset + ii] = upd
        age[0] = 0 if upd else age[0] + 1
    return -1


@njit(**NUMBA_FLAGS)
def _learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, block, multi, reps):
    """Dense rows, ``block`` at a time: compacted to CSR in reused buffers
    (cache-sized), then the CSR skeleton (``multi`` passed on)."""
    acc_cfg = st.acc_cfg
    n, d = X.shape
    indptr = np.zeros(block + 1, dtype=np.int64)
    indices = np.empty(block * d + 1, dtype=np.int64)
    data = np.empty(block * d + 1, dtype=X.dtype)
    yb = np.empty(block, dtype=np.int64)
    local = np.arange(block)
    n_rows = order.shape[0]
    base0 = acc_cfg[2]
    for s in range(0, n_rows, block):
        nb = min(block, n_rows - s)
        c = 0
        for i in range(nb):
            r = order[s + i]
            yb[i] = y[r]
            for j in range(d):
                v = X[r, j]
                indices[c] = j
                data[c] = v
                c += 1 if v != 0 else 0  # branch-free; a zero's slot is overwritten
            indptr[i + 1] = c
        acc_cfg[2] = base0 + s
        bad = _learn_csr(indptr, indices, data, yb, local[:nb], rule, p, fit_intercept, bias, st, log,
                         out_offset + s, multi, reps)
        if bad >= 0:
            acc_cfg[2] = base0
            return s + bad
    acc_cfg[2] = base0
    return -1


@njit(inline="always", **NUMBA_FLAGS)
def _margins_dense(w, K, xf, lo, d, acc):
    """acc[k] = sum_j W[j, k] x_j over the dense row ``xf[lo:lo + d]``, every column a
    sequential sum in feature order held in a vector lane (:mod:`._simd`): up to 16
    columns per pass over the row, so the K = 10 of a digit problem take one pass."""
    k0 = 0
    while K - k0 > 16:
        dense_margins_4(w, K, k0, xf, lo, d, acc)
        k0 += 16
    left = K - k0
    if left > 12:
        dense_margins_4(w, K, k0, xf, lo, d, acc)
    elif left > 8:
        dense_margins_3(w, K, k0, xf, lo, d, acc)
    elif left > 4:
        dense_margins_2(w, K, k0, xf, lo, d, acc)
    else:
        dense_margins_1(w, K, k0, xf, lo, d, acc)


@njit(inline="always", **NUMBA_FLAGS)
def _margins_dense_pair(w, K, xf, lo, lo2, d, acc, acc2):
    """:func:`_margins_dense` of the rows at ``lo`` and ``lo2`` in one pass (each bit for bit
    its own :func:`_margins_dense`)."""
    k0 = 0
    while K - k0 > 16:
        dense_margins_pair_4(w, K, k0, xf, lo, lo2, d, acc, acc2)
        k0 += 16
    left = K - k0
    if left > 12:
        dense_margins_pair_4(w, K, k0, xf, lo, lo2, d, acc, acc2)
    elif left > 8:
        dense_margins_pair_3(w, K, k0, xf, lo, lo2, d, acc, acc2)
    elif left > 4:
        dense_margins_pair_2(w, K, k0, xf, lo, lo2, d, acc, acc2)
    else:
        dense_margins_pair_1(w, K, k0, xf, lo, lo2, d, acc, acc2)


@njit(**NUMBA_FLAGS)
def _margins_nonzero(w, K, xf, lo, d, acc):
    """The margins summed over the row's nonzeros only -- the CSR kernel's sums.  Used when
    a dense margin is not finite: a zero feature times a non-finite weight is NaN in the
    dense sum but absent from the sparse one."""
    for k in range(K):
        a = w.dtype.type(0)
        for j in range(d):
            v = xf[lo + j]
            if v != 0:
                a += w[j * K + k] * v
        acc[k] = a


@njit(inline="always", **NUMBA_FLAGS)
def _apply_dense(w, xf, lo, d, k, K, W, scale, sqnorm, c, u, mk, xsq, project, need_norm,
                 fit_intercept, bias, accP, accq):
    """:func:`_apply` on a dense row: the same operations on the row's nonzeros (a zero
    feature's weight is left as it is, not given ``+ 0 * inv``, which could turn a -0
    into +0), written branch-free so that the loop does not stall on the zeros."""
    mk = _rescale(W, scale, sqnorm, k, c, mk, accP, accq)
    if u != 0.0:
        inv = u / scale[k]
        if accq.shape[0] and accq[k] != 0.0:
            qi = accq[k] * inv
            for j in range(d):
                v = xf[lo + j]
                b = j * K + k
                old = w[b]
                new = old + v * inv
                w[b] = new if v != 0 else old
                oldp = accP[b]
                newp = oldp - v * qi
                accP[b] = newp if v != 0 else oldp
            if fit_intercept:
                w[d * K + k] += bias * inv
                accP[d * K + k] -= bias * qi
        else:
            for j in range(d):
                v = xf[lo + j]
                b = j * K + k
                old = w[b]
                new = old + v * inv
                w[b] = new if v != 0 else old
            if fit_intercept:
                w[d * K + k] += bias * inv
    return _finish(W, scale, sqnorm, k, u, mk, xsq, project, need_norm, xf, lo, lo + d, fit_intercept, bias,
                   accP, accq)


@njit(inline="always", **NUMBA_FLAGS)
def _row_dense(w, xf, lo, d, yi, rule, p, fit_intercept, bias, K, W, scale, sqnorm, n_updates,
               need_norm, acc, m, tau, work, accP, accq, have_acc, wt):
    """:func:`_row_multi` on a dense row ``xf[lo:lo + d]`` (its sums already in ``acc`` when
    ``have_acc``; ``wt`` the round's step scale).  Returns (mistake, hinge, updated)."""
    if not have_acc:
        _margins_dense(w, K, xf, lo, d, acc)
    if not _true_margins(acc, scale, w, d, K, fit_intercept, bias, m):
        _margins_nonzero(w, K, xf, lo, d, acc)  # zero features times non-finite weights: the CSR sums
        if not _true_margins(acc, scale, w, d, K, fit_intercept, bias, m):
            return False, np.nan, False
    mistake, h = _mistake_hinge(m, yi, K)
    xsq = -1.0
    any_update = False
    hi = lo + d
    if rule >= FIRST_NATIVE:
        xsq = _native_taus(rule, p, m, yi, K, tau, work, xsq, xf, lo, hi, fit_intercept, bias)
        if xsq != xsq:
            return False, np.nan, False
        for k in range(K):
            u = tau[k]
            if u == 0.0:
                continue
            any_update = True
            _apply_dense(w, xf, lo, d, k, K, W, scale, sqnorm, 1.0, u, m[k], xsq, False, False,
                         fit_intercept, bias, accP, accq)
            n_updates[k] += 1
    else:
        # The one-vs-rest loop of _row_multi with _apply_dense: folded with it into one inline
        # helper (a constant selecting the apply), the CSR kernel measured 7-17 % slower and the
        # dense pass 0-4 % (issue 27), so each keeps its own.
        for k in range(K):
            yk = 1.0 if yi == k else -1.0
            mk = m[k]
            z = yk * mk
            if xsq < 0.0 and _needs_xsq(rule, p, z):
                xsq = _sqnorm(xf, lo, hi, fit_intercept, bias)
                if xsq != xsq:
                    return False, np.nan, False
            fire, c, u, project = _binary_step(rule, p, z, yk, mk, sqnorm[k], n_updates[k] + 1.0, xsq)
            if not fire or wt == 0.0:
                continue
            if wt != 1.0:
                u = u * wt
            any_update = True
            xsq = _guard(xsq, mk, c, u, need_norm, xf, lo, hi, fit_intercept, bias)
            if xsq != xsq or not _apply_dense(w, xf, lo, d, k, K, W, scale, sqnorm, c, u, mk, xsq, project,
                                     need_norm, fit_intercept, bias, accP, accq):
                return False, np.nan, False
            n_updates[k] += 1
    return mistake, (h if h > 0.0 else 0.0), any_update


@njit(inline="always", **NUMBA_FLAGS)
def _dense_multi_pass(X, y, order, rule, p, fit_intercept, bias, W, scale, sqnorm, n_updates,
                      out_mistake, out_hinge, out_updated, out_offset, age, accP, accq, acc_cfg, step, reps):
    """The skeleton of :func:`_learn_csr` for dense rows and K >= 2 output columns, without
    compacting the rows: the K margins of a row come from one pass over it, all K sums side by
    side in vector registers (W is feature-major, so feature j's K weights are one contiguous
    load), and an update walks the row once per updated column.  Bit for bit the CSR kernel's
    results: the same sums over the same nonzeros in the same order (see
    :func:`._simd.dense_margins`), the same steps, the zeros' weights untouched."""
    d = X.shape[1]
    K = W.shape[1]
    w = W.reshape(W.shape[0] * K)
    xf = X.reshape(X.shape[0] * d)
    need_norm = _needs_norm(rule)
    acc = np.zeros(K, dtype=np.float64)
    acc_next = np.zeros(K, dtype=np.float64)  # the next row's sums, computed with this row's
    m = np.zeros(K, dtype=np.float64)
    tau = np.zeros(K, dtype=np.float64)
    work = np.zeros(K, dtype=np.float64)
    acc_on = accq.shape[0] > 0
    weighted = step.shape[0] > 0
    acc_start = acc_cfg[0]
    acc_cut = acc_cfg[1]
    base = acc_cfg[2]
    n_order = order.shape[0]
    line = max(1, 64 // X.itemsize)
    ready = False  # acc_next holds this round's sums (the last round did not move W)
    # Pairs pay in float64 (Fashion-MNIST epoch 0.096 -> 0.093 s); in float32, where the
    # products are widened before the sums, they measured slower (0.090 -> 0.108 s).
    pairs = X.itemsize == 8
    for ii in range(n_order):
        r = order[ii]
        lo = r * d
        yi = y[r]
        if ii + 2 < n_order:
            # A permuted epoch jumps to rows elsewhere: fetch the lines of the row after
            # next while this pair is summed (a sequential pass needs no help).
            rn = order[ii + 2]
            if rn != order[ii + 1] + 1:
                for j in range(rn * d, rn * d + d, line):
                    _prefetch(xf, j)
        if acc_on:
            if reps is not None:  # as in _learn_csr
                _acc_rounds(accq, scale, K, acc_cfg, reps[out_offset + ii])
            elif base + ii >= acc_start and (age[0] >= acc_cut or base + ii == 0):
                _acc_rounds(accq, scale, K, acc_cfg, 1)
        # Rows are summed in pairs: one pass over W gives this row's sums and, speculatively,
        # the next row's with the same weights -- exact whenever this row does not update
        # (most rounds), else recomputed.  The two independent chains of additions double the
        # throughput of a loop that one sequential chain per column keeps latency-bound.
        paired = False
        if ready:
            for k in range(K):
                acc[k] = acc_next[k]
        elif pairs and ii + 1 < n_order:
            _margins_dense_pair(w, K, xf, lo, order[ii + 1] * d, d, acc, acc_next)
            paired = True
        else:
            _margins_dense(w, K, xf, lo, d, acc)
        mis, h, upd = _row_dense(w, xf, lo, d, yi, rule, p, fit_intercept, bias, K, W, scale, sqnorm,
                                 n_updates, need_norm, acc, m, tau, work, accP, accq, True,
                                 step[out_offset + ii] if weighted else 1.0)
        if h != h:
            return ii
        ready = paired and not upd
        out_mistake[out_offset + ii] = mis
        out_hinge[out_offset + ii] = h if h > 0.0 else 0.0
        out_updated[out_offset + ii] = upd
        age[0] = 0 if upd else age[0] + 1
    return -1


@njit(**NUMBA_FLAGS)
def _learn_dense_multi(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, reps):
    """:func:`_dense_multi_pass` for any rule (the records as :func:`_learn_csr` takes them)."""
    W, scale, sqnorm, n_updates, age, accP, accq, acc_cfg, step = st
    out_mistake, out_hinge, out_updated = log
    return _dense_multi_pass(X, y, order, rule, p, fit_intercept, bias, W, scale, sqnorm, n_updates,
                             out_mistake, out_hinge, out_updated, out_offset, age, accP, accq, acc_cfg, step,
                             reps)


@njit(**NUMBA_FLAGS)
def _learn_dense_multi_perceptron(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, reps):
    """:func:`_dense_multi_pass` compiled for the perceptron (``rule`` is ignored): with the
    rule a constant, its tests and the other rules' steps are compiled away (Fashion-MNIST
    10-class epoch measured about 5 % faster)."""
    W, scale, sqnorm, n_updates, age, accP, accq, acc_cfg, step = st
    out_mistake, out_hinge, out_updated = log
    return _dense_multi_pass(X, y, order, PERCEPTRON, p, fit_intercept, bias, W, scale, sqnorm, n_updates,
                             out_mistake, out_hinge, out_updated, out_offset, age, accP, accq, acc_cfg, step,
                             reps)


def learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, reps=None):
    """Dense chunk (C-contiguous, the weights' dtype); ``st`` a :class:`LinearArrays`, ``log``
    the per-round outputs (:class:`~distlearn.learners.linear.RoundLog`) written from
    ``out_offset``.  With several output columns, the dense skeleton :func:`_learn_dense_multi`;
    with one, rows compacted to their nonzeros a block at a time and the CSR skeleton (a single
    column's sum is one sequential chain, which the nonzeros keep short).  Either way
    bit-identical to the CSR kernel.  Returns -1 or the first bad round (:func:`_learn_csr`)."""
    if st.W.shape[1] > 1:
        kern = _learn_dense_multi_perceptron if rule == PERCEPTRON else _learn_dense_multi
        return kern(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, reps)
    block = max(1, min(1024, (1 << 18) // max(1, X.shape[1])))
    return _learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, block,
                        _multi_flag(st, rule), reps)


def learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset, reps=None):
    """CSR chunk given by its three arrays (indices sorted within each row); the records as
    :func:`learn_dense` takes them."""
    return _learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset,
                      _multi_flag(st, rule), reps)


def _multi_flag(st, rule):
    """``None`` for a binary round (one column, a binary rule), so only that path of
    :func:`_learn_csr` is compiled; ``True`` otherwise."""
    return None if st.W.shape[1] == 1 and rule < FIRST_NATIVE else True


#: Rules whose step does not read the margin (only its sign decides) and whose scale stays 1:
#: :func:`step_sums_csr` can replay their running sum from the update rounds alone.
MARGIN_FREE_STEP_RULES = (PERCEPTRON, GENERALIZED)


@njit(**NUMBA_FLAGS)
def step_sums_csr(indptr, indices, data, y, rows, reps, wts, rule, p, kk0, fit_intercept, bias, accP, accq,
                  acc_cfg):
    """The running sum of a binary :data:`MARGIN_FREE_STEP_RULES` pass, from its update rounds:
    update ``e`` (row ``rows[e]``, the ``kk0 + e + 1``-th update of the learner, step scale
    ``wts[e]`` or 1 when ``wts`` is empty) first adds its hypothesis ``reps[e]`` times, then
    moves ``P`` as :func:`_learn_csr`'s binary round does (``P -= x * q * u``).  The step ``u``
    is the rule's (:func:`_binary_step`), and the scale stays 1 (no rescale, no projection, so
    no fold or rebase): the same operations in the same order as the kernel's, so the same
    bits, without the margins or the weights (the caller keeps the pass's final weights)."""
    d = accP.shape[0] - 1
    weighted = wts.shape[0] > 0
    n_ev = rows.shape[0]
    for e in range(n_ev):
        if e + 2 * _AHEAD < n_ev:  # the updating rows are scattered: prefetch as _learn_csr does
            r2 = rows[e + 2 * _AHEAD]
            _prefetch(indptr, r2)
            _prefetch(y, r2)
            rn = rows[e + _AHEAD]
            for jj in range(indptr[rn], indptr[rn + 1], 8):
                _prefetch(indices, jj)
                _prefetch(data, jj)
        nr = reps[e]
        for _ in range(nr):
            accq[0] += 1.0
        acc_cfg[3] += nr
        r = rows[e]
        yk = 1.0 if y[r] == 1 else -1.0
        eta = p[P_ETA]
        if rule == GENERALIZED and p[P_ETA_SCHEDULE] != 0.0:
            eta = p[P_ETA] / math.sqrt(kk0 + e + 1.0)
        u = yk * eta
        if weighted:
            wt = wts[e]
            if wt != 1.0:
                u = u * wt
        inv = u / 1.0
        if accq[0] != 0.0:
            qi = accq[0] * inv
            for jj in range(indptr[r], indptr[r + 1]):
                accP[indices[jj]] -= data[jj] * qi
            if fit_intercept:
                accP[d] -= bias * qi


@njit(**NUMBA_FLAGS)
def row_sqnorms_csr(indptr, data, out):
    """Squared row norms, summed in stored order (as the rules sum ||x||^2)."""
    for r in range(out.shape[0]):
        acc = 0.0
        for jj in range(indptr[r], indptr[r + 1]):
            v = data[jj]
            acc += v * v
        out[r] = acc


@njit(**NUMBA_FLAGS)
def row_sqnorms_dense(X, out):
    """Squared row norms in column order: equal to the CSR version bit for bit
    (a zero adds exactly nothing)."""
    for r in range(X.shape[0]):
        acc = 0.0
        for j in range(X.shape[1]):
            v = X[r, j]
            acc += v * v
        out[r] = acc
