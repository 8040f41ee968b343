"""The ensemble engine: N linear learners run side by side in one compiled pass per chunk.

This is the machinery of the Online Bayes Point Machine (Harrington, Herbrich,
Kivinen, Platt & Williamson 2003, Algorithm 2), without any estimator: the
state of N learners (:class:`EnsembleState`), the chunk driver
(:func:`learn_ensemble_chunk`) over the fused kernel of
:mod:`distlearn.ensembles._kernels`, and the margin-bound member weights of the
paper's eq. (2) (:func:`margin_bound_weights`).

Learner ``j`` is shown example ``t`` when its Bernoulli(tau) draw ``b_{j,t}``
is 1; the draw is a pure function of ``(seed, j, t, epoch)``
(:func:`distlearn.rng.obpm_mask`), with ``t`` the example's global index, so the
weights are bit-identical for any chunk size, any split of the learners into
groups and any worker count.  Each example is read once; the margins of every
member come from one sweep of its nonzeros over feature-major weights, then the
members with ``b_{j,t} = 1`` update.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import rng
from .._validation import check_allocation
from ..learners.linear import Rule, cast_values, raise_bad_round
from . import _kernels as EK

__all__ = [
    "EnsembleState",
    "concat_states",
    "init_ensemble",
    "learner_groups",
    "learn_ensemble_chunk",
    "member_pools",
    "margin_bound",
    "margin_bound_weights",
]


class EnsembleState(NamedTuple):
    """N learners with K output columns each: column ``c = j * K + k``.

    The true weights of column ``c`` are ``scale[c] * W[:, c]``; ``W`` is
    feature-major, so feature ``f``'s ``N * K`` values are contiguous.  With a
    running sum, ``sum_c = accP[:, c] + accq[0, c] * W[:, c]`` (the
    single-learner kernels' form, :class:`distlearn.learners.RunningSum`).
    With *pooled* running sums (``ACC_POOLED``, :func:`member_pools`) ``accP`` has one row per
    pool and output column instead, feature-major like ``W``, shape ``(n_features + 1, n_pools, K)``,
    and pool ``p``'s sum of its members' hypotheses is ``accP[:, p, k] + sum_{c in p} accq[0, c] * W[:, c]``
    (:meth:`pool_sums`).
    """

    W: np.ndarray              #: (n_features + 1, N * K), weights' dtype
    scale: np.ndarray          #: (N * K,) float64
    sqnorm: np.ndarray         #: (N * K,) float64
    n_updates: np.ndarray      #: (N * K,) int64
    member_rounds: np.ndarray  #: (N,) int64: examples each member was shown
    n_rounds: np.ndarray       #: (1,) int64: examples seen by the ensemble
    accP: np.ndarray           #: (n_features + 1, N * K) float64, pooled (n_features + 1, n_pools, K), or empty
    accq: np.ndarray           #: (2, N * K) float64, or empty

    @property
    def n_learners(self) -> int:
        return len(self.member_rounds)

    @property
    def n_outputs(self) -> int:
        return self.W.shape[1] // len(self.member_rounds)

    def copy(self) -> EnsembleState:
        return EnsembleState(*(a.copy() for a in self))

    def members(self) -> np.ndarray:
        """True member weights, shape (N, K, n_features + 1), bias last."""
        N, K = self.n_learners, self.n_outputs
        full = self.W.astype(np.float64) * self.scale[None, :]
        return full.T.reshape(N, K, -1)

    @property
    def pooled(self) -> bool:
        """Whether the running sums are pooled (one per pool of members, not per member)."""
        return self.accP.ndim == 3

    def member_sums(self) -> np.ndarray:
        """The running sums, shape (N, K, n_features + 1)."""
        if self.pooled:
            raise ValueError("this ensemble pools its members' running sums: there is no sum per member")
        N, K = self.n_learners, self.n_outputs
        s = self.accP + self.accq[0][None, :] * self.W.astype(np.float64)
        return s.T.reshape(N, K, -1)

    def pool_sums(self, pools: np.ndarray) -> np.ndarray:
        """The pooled running sums, shape (n_pools, K, n_features + 1): pool ``p``'s sum over its
        members ``j`` (``pools[j] == p``, indices local to this state) of their hypotheses."""
        K = self.n_outputs
        n_pools = self.accP.shape[1]
        S = self.accP.transpose(1, 2, 0).copy()
        qW = (self.W.astype(np.float64) * self.accq[0][None, :]).T.reshape(self.n_learners, K, -1)
        for p in range(n_pools):
            S[p] += qW[pools == p].sum(axis=0)
        return S


def init_ensemble(n_features: int, n_learners: int, n_outputs: int, *, dtype: Any = np.float64,
                  running_sum: bool = False, pools: int | None = None) -> EnsembleState:
    """Zero weights for ``n_learners`` members of ``n_outputs`` columns each; with ``running_sum``,
    one running sum per member, or with ``pools`` one per pool of members (``ACC_POOLED``)."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    nk = int(n_learners) * int(n_outputs)
    d1 = int(n_features) + 1
    per_member = running_sum and pools is None
    check_allocation("the ensemble's weights", (d1, nk), dt.itemsize * (1 + (8 // dt.itemsize if per_member else 0)))
    if running_sum and pools is not None:
        accP = np.zeros((d1, int(pools), int(n_outputs)), np.float64)
        accq = np.vstack([np.zeros(nk), np.ones(nk)])
    elif running_sum:
        accP = np.zeros((d1, nk), np.float64)
        accq = np.vstack([np.zeros(nk), np.ones(nk)])
    else:
        accP, accq = np.zeros((0, 0), np.float64), np.zeros((0, 0), np.float64)
    return EnsembleState(np.zeros((d1, nk), dt), np.ones(nk), np.zeros(nk), np.zeros(nk, np.int64),
                         np.zeros(int(n_learners), np.int64), np.zeros(1, np.int64), accP, accq)


#: Relative cost of a learner drawing with probability tau: every learner sums its margin
#: on every example (1), and updates on a share of the tau examples it is shown.  Fitted to
#: the two workers' CPU seconds of OBPM(tau="auto") on the RCV1-like corpus (one epoch,
#: "average"): with equal counts the high-tau half took 1.29x the low-tau half's CPU.
UPDATE_COST = 1.25


#: Members per pool of the pooled running sums (``ACC_POOLED``): member ``i`` of a tau group is in
#: its group's pool ``i // POOL_MEMBERS``.  Fixed by the ensemble, never by how it is run, so the
#: average is the same bits for any split into learner groups (which never cut a pool).
#: Measured (benchmarks/README.md, issue 30).
POOL_MEMBERS = 50


def member_pools(n_learners: int, tau_block: int | None = None, pool_members: int | None = None) -> np.ndarray:
    """The pool of each of the first ``n_learners`` members of an ensemble (tau groups of
    ``tau_block`` members; None: one tau group): member ``i`` of a tau group is in its pool
    ``i // pool_members`` (default :data:`POOL_MEMBERS`); pools numbered in member order."""
    pm = int(POOL_MEMBERS if pool_members is None else pool_members)
    j = np.arange(int(n_learners), dtype=np.int64)
    if tau_block is None:
        return j // pm
    M = int(tau_block)
    return (j // M) * (-(-M // pm)) + (j % M) // pm


def learner_groups(n_learners: int, groups: int, taus: Any = None, bounds: Any = None) -> list[tuple[int, int]]:
    """Contiguous learner ranges: ``groups`` of them, of equal cost.

    Without ``taus`` the sizes are as equal as possible.  With ``taus`` (learner j's draw
    probability), learner j costs ``1 + UPDATE_COST * taus[j]`` and the ranges split the total
    cost as evenly as contiguous ranges can (the tau groups of ``OBPM(tau="auto")`` differ
    several-fold in their updates).  Members are independent, so the split changes no weight.
    ``bounds``: the only learner indices a range may start at (the first members of the pools of
    pooled running sums, :func:`member_pools`); each edge moves to the nearest, so there may be
    fewer ranges than ``groups``.
    """
    if bounds is not None:
        allowed = np.unique(np.asarray(bounds, np.int64))
        edges = [a for a, _ in learner_groups(n_learners, groups, taus)] + [n_learners]
        snapped = sorted({0, n_learners} | {int(allowed[np.argmin(np.abs(allowed - e))]) for e in edges[1:-1]})
        return [(a, b) for a, b in zip(snapped[:-1], snapped[1:]) if b > a]
    g = max(1, min(int(groups), n_learners))
    if taus is None:
        edges = np.linspace(0, n_learners, g + 1).round().astype(int)
    else:
        cost = 1.0 + UPDATE_COST * np.asarray(taus, np.float64).reshape(-1)
        if cost.shape != (n_learners,):
            raise ValueError(f"taus needs one value per learner ({n_learners}), got {cost.shape[0]}")
        prefix = np.concatenate([[0.0], np.cumsum(cost)])
        edges = [0]
        for i in range(1, g):  # the boundary whose prefix cost is nearest i/g of the total
            k = int(np.argmin(np.abs(prefix - prefix[-1] * i / g)))
            edges.append(min(max(k, edges[-1] + 1), n_learners - (g - i)))
        edges.append(n_learners)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def learn_ensemble_chunk(
    rule: Rule,
    state: EnsembleState,
    X: Any,
    y: np.ndarray,
    tids: np.ndarray,
    *,
    seed: int,
    tau: float | tuple[float, ...],
    epoch: int = 0,
    order: np.ndarray | None = None,
    fit_intercept: bool = False,
    bias: float = 1.0,
    acc_mode: int = EK.ACC_NONE,
    groups: int = 1,
    n_jobs: int = 1,
    first_learner: int = 0,
    tau_block: int | None = None,
    pool_members: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run every member over one chunk (rows ``order`` of X, in that order).

    ``tids[r]`` is the global example index of row ``r``: with ``seed``,
    ``epoch`` and the learner index it decides ``b_{j,t}``.  The learners run
    in ``groups`` contiguous groups (on ``n_jobs`` threads; the kernel releases
    the GIL); the weights do not depend on either.  ``first_learner`` is the
    ensemble index of ``state``'s first learner (for the draws): a Dask task
    holding learners ``a .. b - 1`` of a larger ensemble passes their columns
    as ``state`` and ``first_learner=a``.

    ``tau`` may be a tuple of T values (``OBPM(tau="auto")``): ensemble
    member ``j`` (global index, ``first_learner`` included) then belongs to
    *tau group* ``j // tau_block``, draws with that group's tau and with the
    learner index ``j % tau_block`` -- the draws of a separate OBPM with that
    tau and ``tau_block`` members, so each group is bit for bit that OBPM.

    ``acc_mode=ACC_POOLED`` keeps the ensemble's average (as ``ACC_ENSEMBLE``) in one running
    sum per pool of members (:func:`member_pools`: pools of ``pool_members`` (default
    :data:`POOL_MEMBERS`) of the whole ensemble; ``state`` must hold whole pools, as ``init_ensemble(..., pools=...)`` makes them)
    and ``groups`` never cut a pool.

    Returns ``(margin_sum, n_updates)``: per round, the sum of the members'
    margins (shape (n, K), true units) and the number of members that updated
    (shape (n,)); with a tuple of T taus, per tau group: shapes (n, T, K) and
    (n, T).
    """
    n_rows = X.shape[0]
    order = np.arange(n_rows, dtype=np.int64) if order is None else np.ascontiguousarray(order, dtype=np.int64)
    n = order.shape[0]
    y = np.ascontiguousarray(y, dtype=np.int64)
    tids = np.ascontiguousarray(tids, dtype=np.int64)
    N, K = state.n_learners, state.n_outputs
    if y.shape != (n_rows,) or tids.shape != (n_rows,):
        raise ValueError(f"y and tids need one entry per row of X ({n_rows}); got {y.shape} and {tids.shape}")
    if X.shape[1] != state.W.shape[0] - 1:
        raise ValueError(f"X has {X.shape[1]} features; the ensemble has {state.W.shape[0] - 1}")
    if n and (order.min() < 0 or order.max() >= n_rows):
        raise ValueError(f"order has row indices outside [0, {n_rows - 1}]")
    if K > 1 and n and (y.min() < 0 or y.max() >= K):
        raise ValueError(f"class indices must be in [0, {K - 1}] for {K} output columns")
    if rule.native and K < 3:
        raise ValueError(f"native multiclass rule {rule.name!r} needs at least 3 output columns, got {K}")
    pooled = acc_mode == EK.ACC_POOLED
    if acc_mode != EK.ACC_NONE and not pooled and state.accP.shape != state.W.shape:
        raise ValueError("this ensemble state keeps no running sum per member (init_ensemble(..., running_sum=True))")
    dt = state.W.dtype
    Xc = X.tocsr() if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
    if not Xc.has_canonical_format:
        Xc = Xc.copy()
        Xc.sum_duplicates()
    data = Xc.data if Xc.data.dtype == dt else cast_values(Xc.data, dt)
    indptr, indices = Xc.indptr, Xc.indices  # int32 as scipy gives them: no copy, half the index bytes
    if indptr.dtype != indices.dtype:
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    key = np.uint64(rng.epoch_key(seed, epoch))
    multi = isinstance(tau, (tuple, list, np.ndarray))
    taus = tuple(float(t) for t in tau) if multi else (float(tau),)
    if multi:
        if tau_block is None or int(tau_block) < 1:
            raise ValueError("a tuple of taus needs tau_block, the number of members per tau value")
        M = int(tau_block)
        if (first_learner + N + M - 1) // M > len(taus):
            raise ValueError(f"learners {first_learner}..{first_learner + N - 1} need "
                             f"{(first_learner + N + M - 1) // M} taus of {M} members each; got {len(taus)}")
    else:
        M = first_learner + N  # one tau group: every learner in group 0
    T = len(taus)
    thrs = np.array([rng.mask_threshold(t) for t in taus], np.uint64)
    glob = first_learner + np.arange(N, dtype=np.int64)  # ensemble index of each state learner
    slot = glob // M                                        # its tau group
    draw = glob - slot * M                                  # its learner index in the draws
    thr = thrs[slot]
    pool = np.zeros(0, np.int64)
    bounds = None
    if pooled:
        # pools of the whole ensemble (a tau group's members, or all of them), numbered from this state's first
        upto = member_pools(first_learner + N, M if multi else None, pool_members)
        if first_learner and N and upto[first_learner] == upto[first_learner - 1]:
            raise ValueError(f"pooled running sums: learner {first_learner} is inside a pool; "
                             "a group of learners must start at a pool")
        pool = upto[first_learner:] - upto[first_learner]
        n_pools = int(pool[-1]) + 1 if N else 0
        if state.accP.shape != (X.shape[1] + 1, n_pools, K):
            raise ValueError(f"this ensemble state keeps no pooled running sums for {n_pools} pools "
                             "(init_ensemble(..., running_sum=True, pools=...))")
        bounds = np.flatnonzero(np.r_[True, pool[1:] != pool[:-1]])
    ranges = learner_groups(N, groups, taus=np.asarray(taus)[slot] if multi else None, bounds=bounds)
    outs = [(np.zeros(n * T * K), np.zeros(n * T, np.int32)) for _ in ranges]
    accP = state.accP.reshape(-1)
    accq = state.accq.reshape(-1)
    if acc_mode == EK.ACC_NONE:
        accP, accq = np.zeros(0), np.zeros(0)

    kern = EK.obpm_kernel(rule.code)
    st = EK.EnsembleArrays(state.W, state.scale, state.sqnorm, state.n_updates, state.member_rounds, accP, accq, pool)

    def run(g: int) -> int:
        a, b = ranges[g]
        draws = EK.Draws(tids, key, thr[a:b], draw[a:b], slot[a:b], T)
        return kern(indptr, indices, data, y, order, draws, a * K, b * K, K, rule.code, rule.params,
                    bool(fit_intercept), float(bias), st, EK.EnsembleLog(*outs[g]), 0, acc_mode)

    if n_jobs > 1 and len(ranges) > 1:
        with ThreadPoolExecutor(min(n_jobs, len(ranges))) as pool:
            bad = list(pool.map(run, range(len(ranges))))
    else:
        bad = [run(g) for g in range(len(ranges))]
    first_bad = min((b for b in bad if b >= 0), default=-1)
    if first_bad >= 0:
        r = int(order[first_bad])
        raise_bad_round(Xc, r, first_bad, dt)  # the single learner's one line (NaN, features out of range, overflow)
    state.n_rounds[0] += n
    margin = outs[0][0]
    upd = outs[0][1]
    for m2, u2 in outs[1:]:  # left to right
        margin = margin + m2
        upd = upd + u2
    if multi:
        return margin.reshape(n, T, K), upd.reshape(n, T)
    return margin.reshape(n, K), upd


def margin_bound(gamma: np.ndarray, G: np.ndarray, alpha: np.ndarray) -> float:
    """The right-hand side of eq. (2): ``sum_j a_j gamma_j / sqrt(a' G a)``."""
    q = float(alpha @ G @ alpha)
    return float(alpha @ gamma) / math.sqrt(q) if q > 0 else -math.inf


def margin_bound_weights(members: np.ndarray, margins: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Convex weights maximising the margin lower bound, eq. (2) of the OBPM paper.

    ``members``: (N, D) weight vectors (normalised here to unit length, as the
    bound assumes); ``margins``: their training-set margins ``gamma_z(w_j)``
    (of the normalised vectors).  The bound ``a'gamma / sqrt(a' G a)`` is
    scale-free in ``a``, so it is maximised by minimising ``a' G a`` subject to
    ``a'gamma = 1, a >= 0`` (a convex QP, SLSQP) and normalising ``a`` to sum 1.
    When no member has a positive margin the bound says nothing; the uniform
    weights ``1/N`` are returned.

    Returns ``(alpha, bound(alpha), bound(uniform))``.
    """
    from scipy.optimize import minimize

    Wn = np.asarray(members, np.float64)
    norms = np.linalg.norm(Wn, axis=1)
    norms[norms == 0] = 1.0
    Wn = Wn / norms[:, None]
    G = Wn @ Wn.T
    N = len(Wn)
    uniform = np.full(N, 1.0 / N)
    b_uni = margin_bound(margins, G, uniform)
    if N == 1 or not np.any(margins > 0):
        return uniform, b_uni, b_uni
    pos = margins > 0
    x0 = np.where(pos, 1.0, 0.0)
    x0 /= x0 @ margins
    res = minimize(lambda a: a @ G @ a, x0, jac=lambda a: 2.0 * (G @ a), method="SLSQP",
                   bounds=[(0.0, None)] * N, constraints=[{"type": "eq", "fun": lambda a: a @ margins - 1.0,
                                                           "jac": lambda a: margins}],
                   options={"maxiter": 500, "ftol": 1e-12})
    a = np.clip(res.x, 0.0, None)
    if not np.isfinite(a).all() or a.sum() <= 0:
        return uniform, b_uni, b_uni
    a /= a.sum()
    b = margin_bound(margins, G, a)
    if b < b_uni:  # the optimiser did worse than its start: keep what is better
        return uniform, b_uni, b_uni
    return a, b, b_uni


def concat_states(parts: list[EnsembleState]) -> EnsembleState:
    """The ensemble state of contiguous learner groups, learners in group order (pooled running
    sums: the groups' pools in order)."""
    first = parts[0]
    cols = lambda name: np.concatenate([getattr(p, name) for p in parts], axis=-1)  # noqa: E731
    acc = first.accP.size > 0
    return EnsembleState(
        np.concatenate([p.W for p in parts], axis=1), cols("scale"), cols("sqnorm"), cols("n_updates"),
        cols("member_rounds"), first.n_rounds.copy(),
        np.concatenate([p.accP for p in parts], axis=1) if acc else first.accP,
        np.concatenate([p.accq for p in parts], axis=1) if acc else first.accq,
    )
