"""Compiled update loops for the adaptive (per-feature step) linear rules.

The classic rules of :mod:`distlearn.learners._kernels` take one global step
per update; the rules here keep a statistic per feature (and output column)
that shapes every step:

AROW, diagonal (Crammer, Kulesza & Dredze 2009, "Adaptive regularization of
weight vectors")
    Mean ``w`` and a diagonal covariance ``Sigma`` (``A``, initially 1).  When
    the hinge loss is positive (``z = y w.x < 1``): ``v = sum_i Sigma_i x_i^2``,
    ``beta = 1 / (v + r)``, ``alpha = (1 - z) beta``, ``w_i += alpha y Sigma_i x_i``
    and ``Sigma_i <- Sigma_i (1 - beta Sigma_i x_i^2)`` -- the diagonal of
    ``Sigma - beta Sigma x x^T Sigma`` (both with the old ``Sigma``), written in
    this factored form so that ``Sigma_i`` stays in (0, 1].

NAG (Ross, Mineiro & Langford 2013, "Normalized online learning", Algorithm 2)
    Per feature the largest ``|x_i|`` seen (``s``) and the sum of squared
    gradients (``A`` = G); globally the round ``t`` and ``N = sum_t ||x_t / s||^2``
    (``T = [t, N]``).  Round t: for every ``i`` with ``|x_i| > s_i``:
    ``w_i <- w_i s_i / |x_i|`` (when ``s_i > 0``) and ``s_i <- |x_i|``; then
    ``N += sum_i x_i^2 / s_i^2``, the prediction ``p = w.x``, and for every
    ``i`` with ``x_i != 0``: ``g_i = l'(p, y) x_i``, ``G_i += g_i^2``,
    ``w_i -= eta sqrt(t / N) g_i / (s_i sqrt(G_i))``, with the hinge loss
    (``l' = -y`` when ``y p < 1``, else no step) or the logistic loss
    (``l' = -y / (1 + exp(y p))``).

Both act on each output column independently (one-vs-rest); NAG's ``s``,
``t`` and ``N`` describe the inputs and are shared by the columns.

Events and conversions.  Round t logs the loss of the hypothesis *before* the
round (the weights at the end of round t - 1, :class:`RoundLog`'s contract)
and ``updated`` when any weight changed during the round.  For NAG that
includes the rescale of an old weight by a new feature maximum, which the
paper applies before predicting: the step is computed from the paper's
prediction (after the rescale), the logged progressive loss from the
hypothesis before it, so every hypothesis the conversions see is one the
learner held between two rounds, and the hypotheses change only on logged
updates (what the cutoff, vote and survivor conversions rely on).

The running sum ``P + q * W`` of the conversions (ARCHITECTURE.md decision 4)
is kept exactly as in :mod:`._kernels`: ``q`` grows by ``scale = 1`` per
summed round, and every change of a weight, ``W[j, k]: a -> b``, adds
``-q (b - a)`` to ``P[j, k]`` (the change actually stored, so float32 weights
keep the sum exact too).  The scale is never changed by these rules.

Margins are sequential sums in the row's index order, in the weights' dtype (widened to
float64 before the bias feature is added last), as in :mod:`._kernels`; the statistics (``A``, ``s``, ``T``) are float64
whatever the weights' dtype.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .._config import NUMBA_FLAGS
from ._kernels import _AHEAD, _MAXF, LinearArrays, _out_of_range, _prefetch

# Rule codes, disjoint from the classic rules' (distlearn.learners._kernels).
AROW = 100
NAG_HINGE = 110
NAG_LOGISTIC = 111

FIRST_ADAPTIVE = AROW
ADAPTIVE_CODES = (AROW, NAG_HINGE, NAG_LOGISTIC)
# The slots of their parameter vectors (as learners/_kernels.py names the classic rules'):
P_AROW_R = 0    #: AROW: the regularisation r
P_NAG_ETA = 0   #: NAG: the step eta


class AdaptiveState(NamedTuple):
    """State of an adaptive rule: :class:`~distlearn.learners.linear.LinearState`'s six
    arrays (same meaning; ``scale`` stays 1 and ``sqnorm`` 0) and the per-feature
    statistics.  Plain arrays, so it pickles and copies field by field."""

    W: np.ndarray          #: (n_features + 1, n_outputs), feature-major weights (the means for AROW)
    scale: np.ndarray      #: (n_outputs,) float64, always 1
    sqnorm: np.ndarray     #: (n_outputs,) float64, not maintained (0)
    n_updates: np.ndarray  #: (n_outputs,) int64
    n_rounds: np.ndarray   #: (1,) int64
    age: np.ndarray        #: (1,) int64
    A: np.ndarray          #: (n_features + 1, n_outputs) float64: AROW's Sigma (init 1), NAG's G (init 0)
    S: np.ndarray          #: (n_features + 1,) float64: NAG's max |x_i| (init 0); unused by AROW
    T: np.ndarray          #: (2,) float64: NAG's t and N; unused by AROW


class AdaptiveArrays(NamedTuple):
    """The arrays an adaptive pass reads and writes, as its compiled entry points take them:
    :class:`~distlearn.learners._kernels.LinearArrays`' eight (same meaning) and the
    statistics ``A, S, T`` of :class:`AdaptiveState`."""

    W: np.ndarray
    scale: np.ndarray
    sqnorm: np.ndarray
    n_updates: np.ndarray
    age: np.ndarray
    accP: np.ndarray
    accq: np.ndarray
    acc_cfg: np.ndarray
    A: np.ndarray
    S: np.ndarray
    T: np.ndarray


@njit(inline="always", **NUMBA_FLAGS)
def _set(w, b, new, acc_on, accP, q):
    """w[b] <- new, keeping the running sum P + q * W unchanged."""
    old = w[b]
    w[b] = new
    if acc_on and q != 0.0:
        accP[b] -= q * (w[b] - old)


@njit(**NUMBA_FLAGS)
def _learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset):
    """Every round of a CSR chunk (indices sorted and unique within rows, as
    :func:`~distlearn.learners.linear.learn_chunk` passes them); returns -1 or the
    position of the first round with a non-finite margin (nothing of it applied), or
    whose step cannot be taken (the numeric guard of ``_kernels._guard``: AROW's
    ``sum Sigma_i x_i^2`` or a NAG ``G_i`` that overflowed or underflowed; the round
    may be partly applied).  The driver names the cause.

    ``p``: AROW ``[r]``; NAG ``[eta]``.  The running sum and ``age`` as in
    :func:`distlearn.learners._kernels._learn_csr`.

    NAG reads its statistics in the margin's pass over the row: with the first
    column's margin it checks every ``|x_i|`` against ``s_i`` and sums
    ``N``'s increment (``(x_i / s_i)^2``, which is exactly 1 for a new maximum),
    noting the new maxima; they are applied (``s_i``, the rescaled weights) once
    the margins are known to be finite.  The same operations on the same values
    as a separate pass, so the same bits, with one gather pass fewer per round.

    ``st`` is an :class:`AdaptiveArrays`, ``log`` the per-round outputs (``mistake``,
    ``hinge``, ``updated``) written from ``out_offset``.
    """
    W, scale, sqnorm, n_updates, age, accP, accq, acc_cfg, A, S, T = st
    out_mistake, out_hinge, out_updated = log
    d = W.shape[0] - 1
    K = W.shape[1]
    w = W.reshape(W.shape[0] * K)
    a = A.reshape(A.shape[0] * K)
    m = np.zeros(K, dtype=np.float64)
    zero = w.dtype.type(0)
    acc_on = accq.shape[0] > 0
    acc_start = acc_cfg[0]
    acc_cut = acc_cfg[1]
    base = acc_cfg[2]
    bsq = bias * bias
    nag = rule != AROW
    n_order = order.shape[0]
    # NAG: the positions (in data) of a row's new maxima
    npend_max = 1
    if nag:
        for ii in range(n_order):
            r = order[ii]
            npend_max = max(npend_max, indptr[r + 1] - indptr[r])
    pend = np.empty(npend_max, dtype=np.int64)
    for ii in range(n_order):
        r = order[ii]
        lo = indptr[r]
        hi = indptr[r + 1]
        yi = y[r]
        if ii + 2 * _AHEAD < n_order:
            # A permuted epoch reads rows at random places: prefetch as the classic kernel does
            # (the offsets and label of round ii + 2A, then the values and indices of round ii + A;
            # written out: see the measurement in _kernels.py: _learn_csr).
            r2 = order[ii + 2 * _AHEAD]
            _prefetch(indptr, r2)
            _prefetch(y, r2)
            rn = order[ii + _AHEAD]
            for jj in range(indptr[rn], indptr[rn + 1], 8):
                _prefetch(indices, jj)
                _prefetch(data, jj)
        # the hypothesis of this round, before anything changes
        finite = True
        nx = 0.0
        npend = 0
        for k in range(K):
            s = zero  # summed in the weights' dtype, as every margin is
            if nag and k == 0:
                for jj in range(lo, hi):
                    x = data[jj]
                    j = indices[jj]
                    s += w[j * K] * x
                    if x != 0.0:
                        sj = S[j]
                        if abs(x) > sj:
                            pend[npend] = jj
                            npend += 1
                            nx += 1.0  # (x / |x|)^2
                        else:
                            u = x / sj
                            nx += u * u
            else:
                for jj in range(lo, hi):
                    s += w[indices[jj] * K + k] * data[jj]
            mk = np.float64(s)
            if fit_intercept:
                mk = mk + w[d * K + k] * bias
            m[k] = mk
            finite = finite and math.isfinite(mk)
        if not finite:
            return ii
        if acc_on:
            gi = base + ii
            if gi >= acc_start and (age[0] >= acc_cut or gi == 0):
                for k in range(K):
                    accq[k] += scale[k]
                acc_cfg[3] += 1
        if K == 1:
            yk = 1.0 if yi == 1 else -1.0
            mis = (m[0] >= 0.0) != (yk > 0.0)
            h = 1.0 - yk * m[0]
        else:
            best = 0
            for k in range(1, K):
                if m[k] > m[best]:
                    best = k
            mis = best != yi
            other = -np.inf
            for k in range(K):
                if k != yi and m[k] > other:
                    other = m[k]
            h = 1.0 - (m[yi] - other)
        upd = False
        if not nag:
            rr = p[P_AROW_R]
            for k in range(K):
                yk = (1.0 if yi == 1 else -1.0) if K == 1 else (1.0 if yi == k else -1.0)
                z = yk * m[k]
                if not (1.0 - z > 0.0):
                    continue
                q = accq[k] if acc_on else 0.0
                v = 0.0
                for jj in range(lo, hi):
                    x = data[jj]
                    v += a[indices[jj] * K + k] * (x * x)
                if _out_of_range(v, data, lo, hi):
                    return ii  # sum Sigma_i x_i^2 overflowed or underflowed: features too large or small
                if fit_intercept:
                    v += a[d * K + k] * bsq
                beta = 1.0 / (v + rr)
                alpha = (1.0 - z) * beta
                ay = alpha * yk
                for jj in range(lo, hi):
                    x = data[jj]
                    b = indices[jj] * K + k
                    sg = a[b]
                    _set(w, b, w[b] + ay * (sg * x), acc_on, accP, q)
                    a[b] = sg * (1.0 - beta * sg * (x * x))
                if fit_intercept:
                    b = d * K + k
                    sg = a[b]
                    _set(w, b, w[b] + ay * (sg * bias), acc_on, accP, q)
                    a[b] = sg * (1.0 - beta * sg * bsq)
                n_updates[k] += 1
                upd = True
        else:
            # NAG: the new maxima (rescaling the old weights), N, the paper's prediction, the steps.
            t = T[0] + 1.0
            T[0] = t
            resc = False
            for i in range(npend):
                jj = pend[i]
                j = indices[jj]
                ax = abs(data[jj])
                if S[j] > 0.0:
                    f = S[j] / ax
                    for k in range(K):
                        b = j * K + k
                        if w[b] != 0.0:
                            _set(w, b, w[b] * f, acc_on, accP, accq[k] if acc_on else 0.0)
                            resc = True
                S[j] = ax
            if fit_intercept and bias != 0.0:
                ax = abs(bias)
                if ax > S[d]:
                    if S[d] > 0.0:
                        f = S[d] / ax
                        for k in range(K):
                            b = d * K + k
                            if w[b] != 0.0:
                                _set(w, b, w[b] * f, acc_on, accP, accq[k] if acc_on else 0.0)
                                resc = True
                    S[d] = ax
                u = bias / S[d]
                nx += u * u
            T[1] += nx
            if resc:
                for k in range(K):
                    s = zero
                    for jj in range(lo, hi):
                        s += w[indices[jj] * K + k] * data[jj]
                    mk = np.float64(s)
                    if fit_intercept:
                        mk = mk + w[d * K + k] * bias
                    m[k] = mk
            upd = resc
            if T[1] > 0.0:
                c = p[P_NAG_ETA] * math.sqrt(t / T[1])
                for k in range(K):
                    yk = (1.0 if yi == 1 else -1.0) if K == 1 else (1.0 if yi == k else -1.0)
                    z = yk * m[k]
                    if rule == NAG_HINGE:
                        lp = -yk if z < 1.0 else 0.0
                    else:
                        lp = -yk / (1.0 + math.exp(z))
                    if lp == 0.0:
                        continue
                    q = accq[k] if acc_on else 0.0
                    changed = False
                    for jj in range(lo, hi):
                        x = data[jj]
                        if x == 0.0:
                            continue
                        j = indices[jj]
                        b = j * K + k
                        g = lp * x
                        G = a[b] + g * g
                        if not (G > 0.0 and G <= _MAXF):
                            return ii  # g^2 overflowed, or underflowed to 0 (the step would be 0 or x/0)
                        a[b] = G
                        old = w[b]
                        _set(w, b, old - c * g / (S[j] * math.sqrt(G)), acc_on, accP, q)
                        changed = changed or w[b] != old
                    if fit_intercept and bias != 0.0:
                        b = d * K + k
                        g = lp * bias
                        G = a[b] + g * g
                        if not (G > 0.0 and G <= _MAXF):
                            return ii
                        a[b] = G
                        old = w[b]
                        _set(w, b, old - c * g / (S[d] * math.sqrt(G)), acc_on, accP, q)
                        changed = changed or w[b] != old
                    if changed:
                        n_updates[k] += 1
                        upd = True
        out_mistake[out_offset + ii] = mis
        out_hinge[out_offset + ii] = h if h > 0.0 else 0.0
        out_updated[out_offset + ii] = upd
        age[0] = 0 if upd else age[0] + 1
    return -1


@njit(**NUMBA_FLAGS)
def _learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, block):
    """Dense rows, ``block`` at a time, compacted to their nonzeros, then the CSR loop
    (so dense and CSR input give bit-identical results)."""
    acc_cfg = st.acc_cfg
    d = X.shape[1]
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
                if v != 0:
                    indices[c] = j
                    data[c] = v
                    c += 1
            indptr[i + 1] = c
        acc_cfg[2] = base0 + s
        bad = _learn_csr(indptr, indices, data, yb, local[:nb], rule, p, fit_intercept, bias, st, log,
                         out_offset + s)
        if bad >= 0:
            acc_cfg[2] = base0
            return s + bad
    acc_cfg[2] = base0
    return -1


def learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset):
    """Dense chunk (the arguments of :func:`distlearn.learners._kernels.learn_dense`, ``st`` an
    :class:`AdaptiveArrays`)."""
    block = max(1, min(1024, (1 << 18) // max(1, X.shape[1])))
    return _learn_dense(X, y, order, rule, p, fit_intercept, bias, st, log, out_offset, block)


def learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset):
    """CSR chunk given by its three arrays (indices sorted within each row)."""
    return _learn_csr(indptr, indices, data, y, order, rule, p, fit_intercept, bias, st, log, out_offset)
