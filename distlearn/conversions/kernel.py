"""Online-to-batch conversions of kernel learners: every hypothesis from the cache's history.

A kernel learner's hypothesis after ``t`` rounds, ``h_t``, is the cache at that
time.  The engine records for every pattern ever cached its coefficients and
its lifetime: inserted in round ``b`` and removed in round ``d`` (after that
round's prediction), it belongs to ``h_{b+1} .. h_d`` (to ``h_{b+1} .. h_T`` if
still cached).  So every conversion is computed after the fact from that
history and the per-round losses, without replaying the learner:

* an average of ``h_a .. h_b`` is one kernel expansion over the patterns that
  live in the span, each weighted by the share of the span it lives in (the
  average of kernel hypotheses is a kernel hypothesis over the union of their
  supports, with summed coefficients);
* ``last``, ``average``, ``suffix``, ``interval`` and ``tree`` choose their
  span(s) with the linear conversions' own rules (:func:`~distlearn.conversions.core.beta`,
  :func:`~distlearn.conversions.interval.best_interval`, the tree's
  :class:`~distlearn.conversions.core.TreeSummary` with eq. 3), so the choices
  and their merge laws are the linear ones;
* ``vote`` is :class:`VotedKernelHypothesis`: each ``h_t`` of the span votes,
  computed per row from the pattern events (O(P d + E K) per row).

The average's expansion runs over every pattern that was ever cached.
:func:`distil_expansion` brings it back into the budget: the kernel expansion
over the final cache's patterns closest to it in the kernel's feature space.

An interval with at most ``B/2`` updates of a learner with a cache of ``B/2``
has at most ``B`` support patterns: at most ``B/2`` cached at its start and at
most ``B/2`` inserted inside it.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from ..learners import _budget as B
from ..learners.kernel import (BudgetState, Kernel, as_patterns, history_order, kernel_decision, kernel_matrix,
                              squared_norms, stack_patterns)
from .core import TreeNode, TreeSummary
from .interval import best_interval

__all__ = ["KernelHistory", "Spans", "VotedKernelHypothesis", "history", "span_expansion", "kernel_conversion",
           "distil_expansion", "compress_expansion", "compress_in_parts", "Compressed", "agreement", "COMPRESS_BLOCK", "COMPRESS_PART",
           "ridge_targets", "ridge_sums", "ridge_refit", "merge_repeated_patterns"]


class KernelHistory(NamedTuple):
    """Every pattern ever cached, in insertion order: rows, coefficients, classes, and
    the lifetime ``born`` (round of insertion) .. ``died`` (round of removal, ``T`` if cached)."""

    S: np.ndarray
    A: np.ndarray
    lab: np.ndarray
    born: np.ndarray
    died: np.ndarray
    T: int


def history(state: BudgetState) -> KernelHistory:
    """The history of a state built with ``keep_retired=True``."""
    if not state.keep_retired:
        raise ValueError("conversions of kernel learners need the retired patterns (keep_retired=True)")
    n = int(state.meta[0])
    T = state.t
    died = state.died[:n].copy()
    died[state.alive[:n]] = T
    live = np.ones(n, dtype=bool)  # dead slots of the current call are history too
    S = stack_patterns([state.patterns(np.flatnonzero(live)), *state.retired_S])
    A = np.concatenate([state.A[:n][live], *state.retired_A])
    lab = np.concatenate([state.lab[:n][live], *state.retired_lab])
    life = np.concatenate([np.stack([state.born[:n], died], axis=1), *state.retired_life])
    order = history_order(life[:, 0], S)
    return KernelHistory(S[order], A[order], lab[order], life[order, 0], life[order, 1], T)


@dataclass
class Spans:
    """A set of hypothesis spans ``[(a, b), ...]`` (inclusive), added by concatenation:
    the ``total`` of a tree node (eq. 3 sums the chosen sets)."""

    spans: tuple[tuple[int, int], ...]

    def __add__(self, other: Spans) -> Spans:
        return Spans(self.spans + other.spans)


def span_expansion(h: KernelHistory, spans: list[tuple[int, int]] | tuple[tuple[int, int], ...]) \
        -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The average of the hypotheses in ``spans`` (each ``h_a .. h_b`` inclusive, disjoint):
    ``(S, A, lab)`` over the patterns that live in them, in insertion order."""
    total = sum(b - a + 1 for a, b in spans)
    if total <= 0:
        raise ValueError("empty span: no hypotheses to average")
    w = np.zeros(len(h.born))
    first = h.born + 1
    for a, b in spans:
        w += np.maximum(0, np.minimum(h.died, b) - np.maximum(first, a) + 1)
    keep = np.flatnonzero(w > 0)
    return h.S[keep], h.A[keep] * (w[keep] / total)[:, None], h.lab[keep]


@dataclass
class VotedKernelHypothesis:
    """The voting conversion of a kernel learner: each ``h_t``, ``a <= t <= b``, casts
    one vote for the class it predicts (binary: positive when its score is >= 0;
    multiclass: argmax, first on ties).  ``decision_function`` gives the vote
    shares as :class:`~distlearn.conversions.ensemble.VotedHypothesis` does."""

    kernel: Kernel
    S: np.ndarray
    coef: np.ndarray
    lab: np.ndarray
    ev_t: np.ndarray
    ev_p: np.ndarray
    ev_s: np.ndarray
    a: int
    b: int

    @classmethod
    def from_history(cls, kernel: Kernel, h: KernelHistory, a: int, b: int) -> VotedKernelHypothesis:
        first = h.born + 1
        keep = np.flatnonzero((first <= b) & (h.died >= a) & (h.died >= first))
        S, A = h.S[keep], h.A[keep]
        P = len(keep)
        ev_t = np.concatenate([first[keep], h.died[keep] + 1]).astype(np.int64)
        ev_p = np.concatenate([np.arange(P), np.arange(P)]).astype(np.int64)
        ev_s = np.concatenate([np.ones(P), -np.ones(P)])
        o = np.argsort(ev_t, kind="stable")
        S = S.toarray() if sp.issparse(S) else S  # the vote's engine reads dense patterns
        return cls(kernel, np.ascontiguousarray(S), np.ascontiguousarray(A), h.lab[keep], ev_t[o], ev_p[o], ev_s[o],
                   int(a), int(b))

    @property
    def n_support(self) -> int:
        return len(self.S)

    def decision_function(self, X: Any, block: int = 1024) -> np.ndarray:
        n, K = X.shape[0], self.coef.shape[1]
        out = np.zeros((n, K))
        sq = np.einsum("ij,ij->i", self.S, self.S)
        for lo in range(0, n, block):
            Xb = X[lo:lo + block]
            Xb = np.ascontiguousarray(Xb.toarray() if sp.issparse(Xb) else Xb, dtype=np.float64)
            B.kernel_vote_counts(Xb, self.S, sq, self.coef, self.kernel.code, self.kernel.params, self.ev_t,
                                 self.ev_p, self.ev_s, self.a, self.b, out[lo:lo + block])
        total = float(self.b - self.a + 1)
        if K == 1:
            return 2.0 * out[:, 0] / total - 1.0
        return out / total


def _suffix_start(loss: np.ndarray, C: float) -> int:
    m = len(loss)
    tail = np.cumsum(loss[::-1])[::-1]
    size = m - np.arange(m)
    return int(np.argmin(tail / size + C / np.sqrt(size)))  # the same rule as SuffixTracker.plan


def kernel_conversion(conv: Any, kernel: Kernel, h: KernelHistory, mistake: np.ndarray, hinge: np.ndarray,
                      updated: np.ndarray) -> tuple[Any, dict[str, Any]]:
    """The batch hypothesis of conversion ``conv`` (a :mod:`distlearn.conversions` object)
    from a kernel learner's history and its first pass's per-round logs.

    Returns ``(hyp, info)``: ``hyp`` is ``(S, A, lab)`` for an expansion or a
    :class:`VotedKernelHypothesis`; ``info`` records the chosen span(s).
    """
    from . import Average, Interval, Last, Suffix, Tree, Vote

    loss_name = getattr(conv, "loss", "zero_one")
    loss = (hinge if loss_name == "hinge" else mistake).astype(np.float64)
    m = len(loss)
    if m == 0:
        raise ValueError("empty summary: no rounds were observed")
    T = h.T
    if isinstance(conv, Last):
        return span_expansion(h, [(T, T)]), {"spans": [(T, T)]}
    if isinstance(conv, Average):
        return span_expansion(h, [(0, T)]), {"spans": [(0, T)]}
    if isinstance(conv, Suffix):
        a = _suffix_start(loss, conv.C)
        return span_expansion(h, [(a, m - 1)]), {"spans": [(a, m - 1)]}
    if isinstance(conv, Interval):
        a, b, v = best_interval(loss, updated.astype(np.uint8), conv.max_updates, conv.C)
        return span_expansion(h, [(a, b)]), {"spans": [(a, b)], "beta": v,
                                             "n_updates_in": int(updated[a:b].sum())}
    if isinstance(conv, Tree):
        leaf = 1 if conv.leaf_size == "auto" else int(conv.leaf_size)
        tree = TreeSummary(conv.C)
        for lo in range(0, m, leaf):
            hi = min(m, lo + leaf)
            tree.push(TreeNode(0, Spans(((lo, hi - 1),)), float(loss[lo:hi].sum()), hi - lo))
        node = tree.chosen()
        spans = list(node.total.spans)
        return span_expansion(h, spans), {"spans": spans, "peak_nodes": tree.peak_nodes}
    if isinstance(conv, Vote):
        a = _suffix_start(loss, conv.C) if conv.suffix else 0
        b = m - 1 if conv.suffix else T
        return VotedKernelHypothesis.from_history(kernel, h, a, b), {"spans": [(a, b)]}
    raise ValueError(f"conversion {type(conv).__name__} has no kernel form; kernel learners take 'last', "
                     "'average', 'suffix', 'interval', 'tree' or 'vote'")


def _unique_csr_rows(S: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    """``np.unique(S, axis=0, return_index=True, return_inverse=True)`` for a CSR matrix, the distinct rows in
    the order they first appear (a row is its nonzeros: explicit zeros are dropped first)."""
    S = sp.csr_matrix(S, dtype=np.float64)
    S.eliminate_zeros()
    S.sort_indices()
    seen: dict[tuple[bytes, bytes], int] = {}
    first, inv = [], np.empty(S.shape[0], dtype=np.int64)
    for r in range(S.shape[0]):
        lo, hi = S.indptr[r], S.indptr[r + 1]
        key = (S.indices[lo:hi].tobytes(), S.data[lo:hi].tobytes())
        j = seen.setdefault(key, len(first))
        if j == len(first):
            first.append(r)
        inv[r] = j
    first_at = np.asarray(first, dtype=np.int64)
    return S[first_at], first_at, inv


def merge_repeated_patterns(S: Any, coef: np.ndarray, lab: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
    """One kernel expansion with each distinct pattern once: the rows of ``S`` (dense or CSR) that are the same
    pattern merged at their first place, their coefficients summed in order (the same function, to rounding).
    The kernel OBPM's Bayes point keys its patterns by the round that pooled them, so a training row pooled again
    in a later pass or after its removal counts once per pooling: 7,919 patterns for 1,397 distinct rows on
    digits (1,500 rows, KernelMIRA base, ``budget="variable"``), each one more kernel row per prediction.  The
    distillation (:func:`distil_expansion`) scores a history so: a row is listed once per insertion."""
    if S.shape[0] < 2:
        return S, coef, lab
    if sp.issparse(S):
        uniq, first_at, inv = _unique_csr_rows(S)
    else:
        S = np.ascontiguousarray(S, dtype=np.float64) + 0.0  # -0.0 -> +0.0: one row, one key
        seen: dict[bytes, int] = {}
        inv = np.fromiter((seen.setdefault(r.tobytes(), len(seen)) for r in S), dtype=np.int64, count=S.shape[0])
        first_at = np.full(len(seen), S.shape[0], dtype=np.int64)
        np.minimum.at(first_at, inv, np.arange(S.shape[0]))
        uniq = S[first_at]
    if uniq.shape[0] == S.shape[0]:
        return uniq, coef, lab
    return uniq, _sum_onto(inv, coef, uniq.shape[0]), lab[first_at]


def _sum_onto(inv: np.ndarray, coef: np.ndarray, n: int) -> np.ndarray:
    """The coefficients ``coef`` of repeated patterns summed onto their distinct pattern ``inv`` (of ``n``), in
    order."""
    out = np.zeros((n, coef.shape[1]))
    np.add.at(out, inv, coef)
    return out


#: The ridge of the distillation's Gram system, relative to the mean self-kernel: it only keeps the
#: solve defined when two cached patterns (nearly) coincide in feature space.
DISTIL_RIDGE = 1e-8


def distil_expansion(kernel: Kernel, S: np.ndarray, A: np.ndarray, Z: np.ndarray,
                     return_gram: bool = False) -> Any:
    """The coefficients ``B`` (one row per pattern of ``Z``) of the projection of ``f = sum_i A[i] k(S[i], .)``
    onto the span of ``k(Z[j], .)`` in the kernel's feature space, per output column.

    ``B`` minimizes ``||f - sum_j B[j] k(Z[j], .)||^2`` (the RKHS norm): the normal equations are
    ``K_ZZ B = f(Z)``, ``K_ZZ[j, l] = k(Z[j], Z[l])`` and ``f(Z)`` the scores of the expansion on the
    rows of ``Z`` (:func:`~distlearn.learners.kernel.kernel_decision`, blocked, never the
    ``|S| x |Z|`` matrix at once), solved by Cholesky with the ridge ``DISTIL_RIDGE`` times the mean
    of ``diag K_ZZ`` (a least-squares solve if it still fails).  Cost ``O(|S| |Z| d + |Z|^3)``.  It
    runs BLAS on one thread (:func:`_one_blas_thread`): the same bits on a one-thread Dask worker,
    and on 2 busy cores a 500 x 500 Cholesky took 0.5-0.8 s threaded against 3 ms on one thread.
    ``return_gram``: ``(B, K_ZZ)``, the Gram matrix made exactly symmetric as :func:`compress_expansion` makes it,
    so a compression of the distilled expansion need not compute it again (its ``gram``).
    """
    Z = as_patterns(Z)
    if Z.shape[0] == 0:
        B = np.zeros((0, A.shape[1]))
        return (B, np.zeros((0, 0))) if return_gram else B
    A = np.asarray(A, dtype=np.float64).reshape(S.shape[0], -1)
    with _one_blas_thread():
        if sp.issparse(S) and sp.issparse(Z):
            rhs, G = _sparse_scores_and_gram(kernel, S, A, Z)
        else:
            # f(Z) over each distinct pattern once: a history lists a row once per insertion, the same function
            # to rounding
            S, A, _ = merge_repeated_patterns(S, A, np.zeros(S.shape[0], dtype=np.int64))
            rhs = kernel_decision(kernel, S, A, Z)
            G = kernel_matrix(kernel, Z, Z)
        G = (G + G.T) / 2.0
        B = _gram_solve(G, rhs)
    return (B, G) if return_gram else B


def _sparse_scores_and_gram(kernel: Kernel, S: Any, A: np.ndarray, Z: Any) -> tuple[np.ndarray, np.ndarray]:
    """``f(Z)`` (``f = sum_i A[i] k(S[i], .)``) and ``K_ZZ`` for CSR patterns, from one pass of kernel rows: the
    rows of ``S`` and ``Z`` that are the same pattern are one column (:func:`_unique_csr_rows`, ``S``'s
    coefficients summed on it), so ``Z``'s kernel rows against the distinct patterns hold both the scores and,
    at the columns of ``Z``'s own patterns (a history holds its final cache), ``K_ZZ`` -- each entry the same
    walk of nonzeros as ``kernel_matrix(Z, Z)``'s, the same bits.  Text, 1,500 rows: a history of 3,669
    patterns is 1,483 distinct; the scores 0.18 -> 0.07 CPU s and no second pass for ``K_ZZ``.  Blocks of
    ``Z``'s rows of about 4 Mi entries, as :func:`~distlearn.learners.kernel.kernel_decision`."""
    n_s = S.shape[0]
    U, _, inv = _unique_csr_rows(sp.vstack([S, Z], format="csr"))
    AU = _sum_onto(inv[:n_s], A, U.shape[0])
    at = inv[n_s:]  # Z's patterns among the distinct ones
    sqU = squared_norms(U)
    rhs = np.empty((Z.shape[0], A.shape[1]))
    G = np.empty((Z.shape[0], Z.shape[0]))
    block = max(1, (1 << 22) // U.shape[0])
    for lo in range(0, Z.shape[0], block):
        Kb = kernel_matrix(kernel, Z[lo:lo + block], U, sqU)
        rhs[lo:lo + block] = Kb @ AU
        G[lo:lo + block] = Kb[:, at]
    return rhs, G


_BLAS_LOCK = threading.Lock()
_blas_users: list[Any] = []  # the open contexts' limiter (the first one's), one entry per context


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """A context in which BLAS runs on one thread: a threaded BLAS sums in an order that depends on its
    thread count (so a Dask worker, one thread, and this process would differ in the last bits), and on
    a busy machine its threads spin against each other.  The limit is process-wide, so the contexts of
    several threads share it: the first sets it, the last restores it (a thread that left first would
    otherwise restore the threads of the BLAS another thread is still using)."""
    from threadpoolctl import threadpool_limits

    with _BLAS_LOCK:
        _blas_users.append(_blas_users[0] if _blas_users else threadpool_limits(limits=1, user_api="blas"))
    try:
        yield
    finally:
        with _BLAS_LOCK:
            limiter = _blas_users.pop()
            if not _blas_users:
                limiter.restore_original_limits()


def _ridged(G: np.ndarray) -> np.ndarray:
    """``G`` plus ``DISTIL_RIDGE`` times the mean of its diagonal on the diagonal (a copy)."""
    G = G.copy()
    G[np.diag_indices_from(G)] += DISTIL_RIDGE * max(float(np.mean(np.diag(G))), np.finfo(float).tiny)
    return G


def _gram_solve(G: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``B`` with ``(G + ridge) B = rhs`` for a symmetric Gram matrix ``G``: Cholesky, else least squares."""
    import scipy.linalg as sla

    G = _ridged(G)
    try:
        return sla.cho_solve(sla.cho_factor(G, lower=True, check_finite=False), rhs, check_finite=False)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(G, rhs, rcond=None)[0]


def ridge_targets(yi: np.ndarray, n_outputs: int) -> np.ndarray:
    """The regression targets of class indices ``yi``: one column of +-1 (``+1`` the second class) for two
    classes, else one +-1 column per class (+1 on the row's class)."""
    yi = np.asarray(yi, dtype=np.int64)
    if n_outputs == 1:
        return np.where(yi == 1, 1.0, -1.0)[:, None]
    T = np.full((len(yi), n_outputs), -1.0)
    T[np.arange(len(yi)), yi] = 1.0
    return T


def ridge_sums(kernel: Kernel, S: np.ndarray, X: Any, yi: np.ndarray, n_outputs: int) -> tuple[np.ndarray, np.ndarray]:
    """The sums over the rows ``X`` (class indices ``yi``) of the normal equations of :func:`ridge_refit`:
    ``G = K' K`` and ``R = K' T``, ``K = k(X, S)`` (rows by patterns) and ``T`` the +-1 targets
    (:func:`ridge_targets`).  Sums over disjoint row sets add up, so blocks and workers sum their own and
    the totals are added (:func:`~distlearn.distributed.runs.store_sums`, in a fixed tree); memory
    ``O(|S|^2)`` beside one block's kernel rows (at most ~4 Mi entries), never the data's.  Float64
    throughout (a float32 ``G`` is positive semi-definite only to about 1e-6 of its diagonal: measured on
    Fashion-MNIST with 4,000 patterns).  Cost ``O(n |S| (d + |S|))``.  BLAS runs on one thread
    (:func:`_one_blas_thread`), so the sums are the same bits in any process."""
    from scipy.linalg.blas import dgemm

    S = as_patterns(S)
    m = S.shape[0]
    G, R = np.zeros((m, m), order="F"), np.zeros((m, n_outputs))
    T = ridge_targets(yi, n_outputs)
    sqS = squared_norms(S)
    block = max(1, (1 << 22) // max(1, m))
    with _one_blas_thread():
        for lo in range(0, X.shape[0], block):
            Xb = X[lo:lo + block]
            Xb = Xb.astype(np.float64) if sp.issparse(Xb) else np.ascontiguousarray(Xb, dtype=np.float64)
            K = kernel_matrix(kernel, Xb, S, sqS)
            G = dgemm(1.0, K.T, K.T, beta=1.0, c=G, trans_b=True, overwrite_c=True)  # G += K'K in place
            R += K.T @ T[lo:lo + block]
    return G, R


def ridge_refit(kernel: Kernel, S: np.ndarray, G: np.ndarray, R: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """The coefficients ``A`` (one row per pattern of ``S``) of the kernel ridge regression restricted to the
    span of ``k(S[i], .)``: ``A`` minimizes ``sum_t ||T_t - A' k(S, x_t)||^2 / n + alpha ||f_A||^2`` over the
    ``n`` training rows (``||f_A||^2 = tr(A' K_SS A)``, the RKHS norm), whose normal equations are
    ``(G + alpha n K_SS) A = R`` with the sums ``G``, ``R`` of :func:`ridge_sums`.  This is the "subset of
    regressors" approximation of kernel ridge regression (Rasmussen & Williams 2006, section 8.3.1): with
    ``S`` all the training rows it is kernel ridge regression, ``(K + alpha n I) A = T``.  Solved as
    :func:`distil_expansion`'s system (Cholesky with its ridge ``DISTIL_RIDGE``, relative to the mean
    diagonal, which keeps ``alpha = 0`` defined).  Cost ``O(|S|^2 d + |S|^3)``."""
    S = as_patterns(S)
    Kss = kernel_matrix(kernel, S, S)
    return _gram_solve((G + G.T) / 2.0 + (alpha * n) * (Kss + Kss.T) / 2.0, R)


#: Patterns :func:`compress_expansion` adds at once: the candidates are ranked by the exact loss each alone
#: would remove, the best ``2 * COMPRESS_BLOCK`` of them form a pool, and greedy selection inside the pool (exact,
#: on the pool's own Schur complement) picks up to this many before the ranking is recomputed.  ``1``: the
#: exact greedy forward selection, one pattern at a time.
COMPRESS_BLOCK = 64
#: ... and at most this share of the patterns chosen so far (at least one): the first picks, which change the
#: ranking most, are made one at a time.
COMPRESS_GROWTH = 0.25

#: A candidate whose kernel column keeps less than this share of its squared norm outside the span of the
#: patterns already chosen is numerically in that span and never chosen.
COMPRESS_DEPENDENT = 1e-9

#: From this many patterns on, ``norm="data"`` computes the rows of ``K K`` the selection needs (the picks' and
#: the pool's) from a float32 copy of ``K`` (the dominant products; LETTER's expansion, 4,000 patterns: the
#: picks' rows 1.3x faster, 8,155: the pool's too 1.2x more, the same patterns kept); the coefficients then take :data:`COMPRESS_REFINE` steps of iterative refinement against
#: the float64 ``K``, and the residual is recomputed in float64, so the bound holds exactly.  1,024 (it was
#: 2,048): the parts of :func:`compress_in_parts` use it too (LETTER's parts 0.36 -> 0.28 s in the picks'
#: rows; the same 5,172 patterns kept, and the same kept sets on the Fashion-MNIST sets of ~1,900 patterns).
COMPRESS_SINGLE_FROM = 1024
COMPRESS_REFINE = 2


#: The Schur rows of a block's picks are computed against a superset ``cols`` of the patterns still free; it is
#: compacted (the chosen patterns' columns of K and of the factor dropped) once it holds more than this many
#: times the free ones (plus 64).  LETTER's parts keep ~63 % of their patterns, so the products shrink by
#: about a third.
COMPRESS_COMPACT = 1.25


@numba.njit(cache=True, nogil=True)
def _pool_picks(SP: np.ndarray, cP: np.ndarray, dP: np.ndarray, floorP: np.ndarray, n_max: int, r2: float,
                room: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy selection inside a pool (:func:`_compress_expansion`): up to ``n_max`` picks, each the pattern of
    largest exact gain ``||cP_j||^2 / dP_j`` on the pool's Schur complement ``SP`` (``dP_j`` above ``floorP_j``;
    ties: the first), updated exactly after each pick; stops once the tracked squared residual ``r2`` is within
    ``room``.  Returns the picks (pool positions, in order) and the pool's factor columns ``LP`` (``p x n_max``).
    ``cP`` and ``dP`` are updated in place."""
    p, n_out = cP.shape
    LP = np.zeros((p, n_max))
    picked = np.empty(n_max, np.int64)
    taken = np.zeros(p, np.bool_)
    tiny = np.finfo(np.float64).tiny
    n = 0
    for s in range(n_max):
        best, j = -1.0, -1
        for i in range(p):
            if taken[i] or not dP[i] > floorP[i]:
                continue
            num = 0.0
            for c in range(n_out):
                num += cP[i, c] * cP[i, c]
            sc = num / max(dP[i], tiny)
            if sc > best:
                best, j = sc, i
        if j < 0 or not best > 0:
            break
        root = math.sqrt(dP[j])
        for i in range(p):
            v = SP[i, j]
            for q in range(s):
                v -= LP[i, q] * LP[j, q]
            LP[i, s] = v / root
        yy = 0.0
        for c in range(n_out):
            yj = cP[j, c] / root
            yy += yj * yj
            for i in range(p):
                cP[i, c] -= LP[i, s] * yj
        for i in range(p):
            dP[i] -= LP[i, s] * LP[i, s]
        taken[j] = True
        picked[n] = j
        n += 1
        r2 -= yy
        if r2 <= room:
            break
    return picked[:n], LP


def _take_columns(L: np.ndarray, rows: int, keep: np.ndarray) -> np.ndarray:
    """``L`` with only the columns ``keep``, of which only the first ``rows`` rows are copied (the others, left
    uninitialized, are capacity)."""
    out = np.empty((L.shape[0], len(keep)), dtype=L.dtype)
    np.take(L[:rows], keep, axis=1, out=out[:rows])
    return out


def _grow_rows(L: np.ndarray, rows: int, cap: int) -> np.ndarray:
    """``L`` with room for ``cap`` rows, its first ``rows`` copied (the others uninitialized)."""
    out = np.empty((cap, L.shape[1]), dtype=L.dtype)
    out[:rows] = L[:rows]
    return out


class Compressed(NamedTuple):
    """The result of :func:`compress_expansion`: the kept patterns' indices into ``S`` (ascending), their
    coefficients, and the relative residual ``||f - f_M|| / ||f||`` of the compressed expansion (recomputed
    from these coefficients)."""

    keep: np.ndarray
    coef: np.ndarray
    residual: float


def compress_expansion(kernel: Kernel, S: np.ndarray, A: np.ndarray, tol: float, norm: str = "rkhs",
                       agree: float = 0.0, gram: np.ndarray | None = None) -> Compressed:
    """:func:`_compress_expansion` with BLAS on one thread: a threaded BLAS sums in an order that depends
    on its thread count, and the selection's choices follow the bits, so without this a Dask worker
    (one BLAS thread) and this process (one per core) would keep different coefficients.  ``gram``: ``K_SS``
    made exactly symmetric (``(K + K') / 2``), when already computed (:func:`distil_expansion`'s
    ``return_gram``); else it is computed here."""
    with _one_blas_thread():
        return _compress_expansion(kernel, S, A, tol, norm, agree, gram)


#: How far the agreement guard (``agree``, :func:`agreement`) lowers the tolerance at a time: the tolerance
#: halves (the squared residual allowed is quartered), and selection goes on from the patterns already chosen.
COMPRESS_AGREE_LOWER = 0.5
#: ... at most this many times; a compression still below ``agree`` then keeps every pattern.
COMPRESS_AGREE_ROUNDS = 6


def predicted(F: np.ndarray) -> np.ndarray:
    """The labels scores ``F`` (one row per example) predict, as positions: ``F > 0`` for one column (binary),
    the first largest column otherwise (the estimators' ``predict``)."""
    F = np.asarray(F).reshape(F.shape[0], -1)
    return (F[:, 0] > 0).astype(np.int64) if F.shape[1] == 1 else np.argmax(F, axis=1)


def agreement(F: np.ndarray, FM: np.ndarray) -> float:
    """The share of the rows on which the scores ``FM`` predict the label ``F`` predicts (:func:`predicted`);
    1 for no rows.  The compressions' guard: a compressed expansion must predict its own patterns as the
    expansion did on at least ``agree`` of them (a residual alone does not say where the error falls: on a
    noisy two-class problem a residual of 0.4 kept 8 of 324 patterns and moved the boundary across 3 % of
    them)."""
    if F.shape[0] == 0:
        return 1.0
    return float(np.mean(predicted(F) == predicted(FM)))


#: The parts :func:`compress_in_parts` compresses apart: this many consecutive patterns each (a remainder of
#: fewer than half of this joins the last part).  Measured on LETTER's fitted expansion (8,155
#: patterns, 26 classes, tolerance 0.2): parts of 512 / 1,024 / 2,048 keep more patterns than the whole at
#: once (3,291) but a fraction of its time; 1,024 kept 5,172 at a residual of the whole of 0.198 and 2.65 %
#: test error (the whole: 2.75 %) in 4.4 s against 29 s.
COMPRESS_PART = 1024
#: Rounds of :func:`compress_in_parts`: when the whole expansion's residual exceeds the tolerance, the parts
#: are compressed again with their tolerance lowered by the excess; after this many, the expansion is kept.
COMPRESS_PART_ROUNDS = 4
#: ... each lowering the parts' tolerance by the excess ``tol / residual``, and at least by this factor (the
#: selection is discrete: a residual just above the tolerance needs more than its ratio).
COMPRESS_PART_LOWER = 0.8


def compress_in_parts(kernel: Kernel, S: np.ndarray, A: np.ndarray, tol: float, part: int | None = None,
                      scores: np.ndarray | None = None, agree: float = 0.0) -> Compressed:
    """:func:`compress_expansion` (``norm="data"``) of consecutive parts of the expansion, each on its own
    patterns, with the residual of the whole checked: for caches where the whole selection's
    ``O(|S|^2 |M|)`` costs more than the fit.

    The patterns are cut into parts of ``part`` (:data:`COMPRESS_PART`) in their order; part ``g``'s expansion
    ``f_g = sum_{i in g} A[i] k(S[i], .)`` is compressed on its own patterns with tolerance ``tol_g`` (at first
    ``tol``), so the selection's time is ``O(part^2 |M|)`` instead of ``O(|S|^2 |M|)``.
    The kept patterns are the union of the parts' and their coefficients the parts' refits.  The residual
    of the whole, ``||f(S) - f_M(S)|| / ||f(S)||`` over every pattern (one blocked pass of kernel rows,
    ``O(|S|^2 d)``), is what is returned; when it exceeds ``tol`` (the parts' refits are not fitted to the
    other parts' patterns), every part is compressed again with ``tol_g`` lowered by the excess
    (``tol_g * min(0.8, tol / residual)``, :data:`COMPRESS_PART_LOWER`), at most :data:`COMPRESS_PART_ROUNDS` times, after which the expansion is kept
    as it is.  So ``residual <= tol`` holds as for the whole selection; a tolerance of 0, one pattern or one
    part is :func:`compress_expansion` itself.  BLAS on one thread, as there.  ``agree``: as
    :func:`compress_expansion`'s, checked on the whole (a round below it halves the parts' tolerance).

    The pass of kernel rows computes ``f(S)`` and ``f(S) - f_M(S)`` together (``K_SS [A, A - B]``, ``B`` the
    parts' coefficients scattered on ``M``); ``scores`` (``f(S)``, the learner's own kept scores: the
    budget engine keeps them for DistillCache) leaves only ``K_SM B`` to compute.  LETTER's 8,155
    patterns (26 classes): the pass was two (``f(S)``, then ``f_M(S)``).
    """
    from threadpoolctl import threadpool_limits

    part = int(COMPRESS_PART if part is None else part)
    if part < 1:
        raise ValueError(f"part={part}: at least 1")
    m = S.shape[0]
    A = np.asarray(A, dtype=np.float64).reshape(m, -1)
    if tol <= 0 or m <= part:
        return compress_expansion(kernel, S, A, tol, norm="data", agree=agree)
    S = as_patterns(S)
    bounds = list(range(0, m, part))
    if m - bounds[-1] < part // 2 and len(bounds) > 1:
        bounds.pop()  # a short remainder joins the part before it
    bounds.append(m)
    if len(bounds) == 2:
        return compress_expansion(kernel, S, A, tol, norm="data", agree=agree)
    n_out = A.shape[1]
    F = nf = None
    if scores is not None:
        F = np.asarray(scores, dtype=np.float64).reshape(m, n_out)
        nf = float(np.linalg.norm(F))
        if not nf > 0 or not np.isfinite(nf):
            return Compressed(np.arange(m), A, 0.0)
    with threadpool_limits(limits=1, user_api="blas"):
        tol_g = tol
        for _ in range(COMPRESS_PART_ROUNDS):
            keep, coef = [], []
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                c = _compress_expansion(kernel, S[lo:hi], A[lo:hi], tol_g, norm="data")
                keep.append(c.keep + lo)
                coef.append(c.coef)
            M, B = np.concatenate(keep), np.concatenate(coef)
            if F is None:  # f(S) and f(S) - f_M(S) in one pass of kernel rows: K_SS [A, A - B on M]
                W = np.concatenate([A, A], axis=1)
                W[M, n_out:] -= B
                FD = kernel_decision(kernel, S, W, S)
                F, D = FD[:, :n_out], FD[:, n_out:]
                nf = float(np.linalg.norm(F))
                if not nf > 0 or not np.isfinite(nf):
                    return Compressed(np.arange(m), A, 0.0)
            else:
                D = F - kernel_decision(kernel, S[M], B, S)
            res = float(np.linalg.norm(D)) / nf
            if res <= tol and (agree <= 0 or agreement(F, F - D) >= agree):
                return Compressed(M, B, res)
            tol_g *= min(COMPRESS_PART_LOWER, tol / res) if res > tol else COMPRESS_AGREE_LOWER
    return Compressed(np.arange(m), A, 0.0)


def _compress_expansion(kernel: Kernel, S: np.ndarray, A: np.ndarray, tol: float, norm: str = "rkhs",
                         agree: float = 0.0, gram: np.ndarray | None = None) -> Compressed:
    """``f = sum_i A[i] k(S[i], .)`` on the fewest of its own patterns ``M`` that greedy forward selection
    finds with ``||f - f_M|| <= tol ||f||``, ``f_M`` the best expansion over ``M`` in that norm.

    ``norm="rkhs"``: the kernel's feature-space norm, summed over the output columns; ``f_M`` is the
    projection of ``f`` onto the span of ``k(S[j], .)``, ``j`` in ``M`` (as :func:`distil_expansion`), and
    ``|f(x) - f_M(x)| <= ||f - f_M|| sqrt(k(x, x))`` for every ``x``.  ``norm="data"``: the scores on the
    patterns themselves, ``||f(S) - f_M(S)||`` (Frobenius), ``f_M`` the least-squares fit of ``f(S)`` by the
    kernel columns of ``M``.  Both are least squares ``min ||y - Phi_M b||`` with the Gram matrix
    ``G = Phi' Phi`` (``K`` or ``K K``, ``K = K_SS``) and ``t = Phi' y`` (``K A`` or ``K K A``).

    The selection is a pivoted partial Cholesky factorization of ``G``: with ``L`` the factor's rows for every
    pattern over the chosen ones, ``d = diag G - rowsum(L * L)`` (the Schur complement's diagonal) and
    ``c = t - L y`` (``y = L_M^-1 t_M``), adding pattern ``j`` lowers the squared residual
    ``||y||^2 - ||y_M||^2`` by exactly ``||c_j||^2 / d_j``.  Each step ranks every pattern by that, takes the
    ``2 * COMPRESS_BLOCK`` best as a pool, and picks greedily inside the pool (each pick updating the pool's
    Schur complement exactly) up to :data:`COMPRESS_BLOCK` patterns, stopping at the first one that brings the
    residual within the tolerance.  The new columns of ``L`` come from ``G``'s columns of the picks (``data``:
    one matrix product ``K_{P,:} K``; it, the factor's product ``L_{:,P}' L`` (from a float32 copy of the
    factor) and the pool's Gram matrix in float32 from :data:`COMPRESS_SINGLE_FROM` patterns on: LETTER's
    8,155 patterns, the same 3,291 kept, 47 -> 29 s at load 5, alternating), computed against the patterns
    still free only (a chosen pattern's Schur row is zero; the columns held are compacted at
    :data:`COMPRESS_COMPACT` times the free ones); the greedy picks inside a pool run in one numba loop
    (:func:`_pool_picks`; in Python they were 0.14 of LETTER's 1.0 s of parts).  The
    coefficients are ``L_M^-T y`` (``norm="data"``: refined against the float64 ``K``) and the residual
    returned is recomputed from them; should it exceed the tolerance (rounding), the selection continues
    with the tracked target lowered by the excess.  ``agree > 0``: the result must also predict at least that
    share of the patterns as ``f`` does (:func:`agreement`); below it the tolerance halves
    (:data:`COMPRESS_AGREE_LOWER`) and selection goes on from the patterns chosen, at most
    :data:`COMPRESS_AGREE_ROUNDS` times (then every pattern is kept); a factor that rounding makes singular (a
    zero pivot: wide RBF widths, nearly dependent columns) keeps every pattern too.  No data rows, no labels: ``O(|S|^2 |M|)`` time
    (``|S|^2 d`` for ``K``; ``norm="rkhs"`` needs no product: ``O(|S| |M|^2)``) and ``O(|S|^2)`` memory
    (``K`` and its float32 copy; the factor is ``|M| x |S|``).  Against the backward elimination it replaced
    (LETTER's fitted expansion, ``norm="data"``, ``tol=0.2``, alternating, ``benchmarks/bench_kernel_compress.py``):
    8,155 patterns 3,291 kept instead of 3,244, 4.6x faster (41 vs 190 s at load 7; 14 s at load 6.5 with
    the float32 pool); 4,000: 2,073 instead of 2,052, 2.5x; 2,000: the same 1,341, 1.1x.  ``tol = 0`` (or ``f = 0``) keeps every pattern with ``A`` unchanged, as does a
    tolerance only every pattern meets.
    """
    if gram is None and tol > 0 and S.shape[0] > 1:  # K_SS, once for the selection and its fallback
        gram = _gram(kernel, S)
    try:
        return _greedy_selection(kernel, S, A, tol, norm, agree, gram)
    except (np.linalg.LinAlgError, _Rounding):
        # the factor of K K lost the problem to rounding (a zero pivot of the picks' triangle, a residual the
        # coefficients do not reach, or no candidate left above the floor: wide RBF widths, where many kernel
        # columns are nearly dependent and K K squares their condition): the selection again on the kernel
        # columns themselves, orthogonalized explicitly (norm="data"); the rkhs norm keeps the expansion
        m = S.shape[0]
        A = np.asarray(A, dtype=np.float64).reshape(m, -1)
        if norm == "data":
            return _orthogonal_selection(kernel, S, A, tol, agree, gram)
        return Compressed(np.arange(m), A, 0.0)


def _gram(kernel: Kernel, S: np.ndarray) -> np.ndarray:
    """``K_SS`` made exactly symmetric, ``(K + K') / 2``: the selections' Gram matrix."""
    S = as_patterns(S)
    K = kernel_matrix(kernel, S, S)
    return (K + K.T) / 2.0


def _gram_and_scores(kernel: Kernel, S: np.ndarray, A: np.ndarray,
                     gram: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The selections' ``K`` (``gram``, else :func:`_gram`) and the expansion's scores on its patterns ``K A``."""
    K = _gram(kernel, S) if gram is None else gram
    if K.shape != (S.shape[0], S.shape[0]):
        raise ValueError(f"gram of shape {K.shape}: K_SS of {S.shape[0]} patterns is {S.shape[0]} x {S.shape[0]}")
    return K, K @ A


def _guard_step(r2: float, agreed: Any, goal: float, room: float, lowered: int, repairs: int,
                full: bool) -> tuple[str, float, float, int, int]:
    """One check of a selection's refitted squared residual ``r2`` against its ``goal`` and its guard (``agreed()``),
    and what the selection does next, with its new ``(goal, room, lowered, repairs)``: "done"; "lower" (the guard
    failed: the goal quartered -- the tolerance halved, :data:`COMPRESS_AGREE_LOWER` -- and selection goes on from
    the patterns chosen; after :data:`COMPRESS_AGREE_ROUNDS` of these, "keep": every pattern); "repair" (the tracked
    residual was optimistic, rounding: the tracked target ``room`` lowered by the excess; after 8, or with a
    residual not finite or every pattern chosen (``full``), "lost")."""
    if r2 <= goal:
        if agreed():
            return "done", goal, room, lowered, repairs
        lowered += 1
        if lowered > COMPRESS_AGREE_ROUNDS:
            return "keep", goal, room, lowered, repairs
        goal *= COMPRESS_AGREE_LOWER ** 2
        return "lower", goal, goal, lowered, repairs
    repairs += 1
    if not np.isfinite(r2) or full or repairs > 8:
        return "lost", goal, room, lowered, repairs
    return "repair", goal, room * goal / r2, lowered, repairs


class _Rounding(ArithmeticError):
    """:func:`_greedy_selection` lost its problem to rounding: the tracked residual and the coefficients' residual disagree
    beyond repair, or every candidate left fell below :data:`COMPRESS_DEPENDENT` before the tolerance was met."""


def _orthogonal_selection(kernel: Kernel, S: np.ndarray, A: np.ndarray, tol: float, agree: float,
                          gram: np.ndarray | None = None) -> Compressed:
    """:func:`_compress_expansion`'s selection for ``norm="data"`` when the factor of ``G = K K`` fails to
    rounding: the same greedy forward selection (each step the pattern whose column ``K_j`` removes most of the
    residual ``||F - K_M b||^2``, ``F = K A``), with the chosen columns orthogonalized explicitly, so its
    accuracy follows the condition of ``K_M`` instead of its square.

    ``Q`` (``m x k``) is an orthonormal basis of the chosen columns, ``R = F - Q Q' F`` the residual, ``c = K R``
    and ``d_j = ||K_j||^2 - ||Q' K_j||^2``: adding ``j`` removes ``||c_j||^2 / d_j``.  As in
    :func:`_greedy_selection`, each step ranks every candidate by that, takes the best ``2 * block`` as a pool
    (``block`` :data:`COMPRESS_BLOCK`, at most :data:`COMPRESS_GROWTH` of the chosen, at least one), orthogonalizes
    the pool's columns against ``Q`` (through the stored ``Q' K``), and picks greedily inside it on those
    explicit columns, each pick orthogonalizing the rest; the block's picks then take a second Gram-Schmidt pass
    ("twice is enough", Giraud et al. 2005: orthogonal to working precision), and one matrix product ``Q_new' K``
    updates ``d``, ``c`` and ``R``.  A candidate whose orthogonalized column keeps less than :data:`COMPRESS_DEPENDENT` of its squared
    norm is set aside.  The coefficients solve ``T b = Q' F``, ``T = Q' K_M`` upper triangular, and the residual
    returned is theirs, recomputed; the guard and the repairs are :func:`_greedy_selection`'s.
    ``O(|S|^2 |M|)`` in matrix products, as the factor's selection."""
    import scipy.linalg as sla

    m = S.shape[0]
    everything = Compressed(np.arange(m), A, 0.0)
    if tol <= 0 or m <= 1:
        return everything
    K, F = _gram_and_scores(kernel, S, A, gram)
    nf2 = float(np.sum(F * F))
    if not nf2 > 0 or not np.isfinite(nf2):
        return everything
    goal = room = tol * tol * nf2
    norms2 = np.einsum("ij,ij->i", K, K)
    floor = COMPRESS_DEPENDENT * np.maximum(norms2, np.finfo(float).tiny)
    R = F.copy()
    c = K @ R  # K' R, K symmetric
    d = norms2.copy()
    Q = np.zeros((m, min(m, 256)))  # the orthonormal basis, one column per pick
    P = np.zeros((Q.shape[1], m))  # Q' K, one row per pick
    chosen: list[int] = []
    free = np.ones(m, dtype=bool)
    res2 = nf2
    lowered = repairs = 0
    while True:
        while res2 > room:
            k = len(chosen)
            block = min(int(COMPRESS_BLOCK), max(1, int(COMPRESS_GROWTH * k)))
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                score = np.where(free & (d > floor), np.sum(c * c, axis=1) / d, -1.0)
            n_pos = int(np.count_nonzero(score > 0))
            if n_pos == 0:
                return everything  # nothing left outside the span: rounding beyond repair
            n_pool = min(2 * block, n_pos)
            pool = np.argpartition(-score, n_pool - 1)[:n_pool] if n_pool < m else np.flatnonzero(score > 0)
            V = K[:, pool] - Q[:, :k] @ P[:k, pool]  # the pool's columns orthogonalized against Q (Q Q' K)
            vn2 = np.einsum("ij,ij->j", V, V)
            live = vn2 > floor[pool]
            free[pool[~live]] = False  # numerically in the span of the chosen columns
            new = []
            Rb = R.copy()  # the residual as the picks inside the pool lower it (made exact after the block)
            while len(new) < block and live.any():
                with np.errstate(divide="ignore", invalid="ignore"):
                    gain = np.where(live, np.sum((V.T @ Rb) ** 2, axis=1) / vn2, -1.0)
                i = int(np.argmax(gain))
                if not gain[i] > 0:
                    break
                q = V[:, i] / math.sqrt(vn2[i])
                Rb -= np.outer(q, q @ Rb)
                V -= np.outer(q, q @ V)
                vn2 = np.einsum("ij,ij->j", V, V)
                live[i] = False
                dead = live & ~(vn2 > floor[pool])
                free[pool[dead]] = False
                live &= ~dead
                new.append((int(pool[i]), q))
                if float(np.sum(Rb * Rb)) <= room:
                    break
            if not new:
                continue
            r = len(new)
            if k + r > Q.shape[1]:
                grow = min(m, max(2 * Q.shape[1], k + r)) - Q.shape[1]
                Q, P = np.pad(Q, ((0, 0), (0, grow))), np.pad(P, ((0, grow), (0, 0)))
            Qn = np.stack([q for _, q in new], axis=1)
            # the second pass of Gram-Schmidt ("twice is enough"), against Q and in order within the block
            Qn -= Q[:, :k] @ (Q[:, :k].T @ Qn)
            for t in range(r):
                Qn[:, t] -= Qn[:, :t] @ (Qn[:, :t].T @ Qn[:, t])
                Qn[:, t] /= np.linalg.norm(Qn[:, t])
            Q[:, k:k + r] = Qn
            P[k:k + r] = Qn.T @ K
            d -= np.einsum("ij,ij->j", P[k:k + r], P[k:k + r])
            R -= Qn @ (Qn.T @ R)
            c = K @ R
            res2 = float(np.sum(R * R))
            idx = [j for j, _ in new]
            free[idx] = False
            chosen.extend(idx)
        M = np.array(chosen, dtype=np.int64)
        KM = K[:, M]
        T = np.triu(P[:len(M), M])  # Q' K_M: upper triangular, each column orthogonal to the later picks
        coef = sla.solve_triangular(T, Q[:, :len(M)].T @ F, lower=False, check_finite=False)
        FM = KM @ coef
        r2 = float(np.sum((FM - F) ** 2))
        verdict, goal, room, lowered, repairs = _guard_step(
            r2, lambda: agree <= 0 or agreement(F, FM) >= agree, goal, room, lowered, repairs, len(chosen) >= m)
        if verdict == "done":
            break
        if verdict in ("keep", "lost"):
            return everything
    if len(M) >= m:
        return everything
    order = np.argsort(M)
    return Compressed(M[order], coef[order], math.sqrt(max(0.0, r2) / nf2))


def _greedy_selection(kernel: Kernel, S: np.ndarray, A: np.ndarray, tol: float, norm: str,
                      agree: float, gram: np.ndarray | None = None) -> Compressed:
    """:func:`_compress_expansion`'s selection, which may raise ``LinAlgError`` on a singular factor."""
    import scipy.linalg as sla

    m = S.shape[0]
    A = np.asarray(A, dtype=np.float64).reshape(m, -1)
    everything = Compressed(np.arange(m), A, 0.0)
    if tol <= 0 or m <= 1:
        return everything
    K, F = _gram_and_scores(kernel, S, A, gram)  # K_SS and f(S)
    if norm == "rkhs":
        t = F  # ||f||^2 = A' K A; the normal equations K b = F
        nf2 = float(np.sum(A * F))
        diag = np.diag(K).copy()

        K32 = None

        def pool_gram(J: np.ndarray) -> np.ndarray:
            return K[np.ix_(J, J)]
    elif norm == "data":
        t = K @ F
        nf2 = float(np.sum(F * F))
        diag = np.einsum("ij,ij->i", K, K)

        K32 = K.astype(np.float32) if m >= COMPRESS_SINGLE_FROM else None

        def pool_gram(J: np.ndarray) -> np.ndarray:
            KJ = K[J] if K32 is None else K32[J]
            return (KJ @ KJ.T).astype(np.float64)
    else:
        raise ValueError(f"norm={norm!r}: 'rkhs' or 'data'")
    if not nf2 > 0 or not np.isfinite(nf2):
        return everything
    room = tol * tol * nf2
    floor = COMPRESS_DEPENDENT * np.maximum(diag, np.finfo(float).tiny)
    cap = min(m, 256)  # rows of the factor held (grown by doubling)
    single = norm == "data" and K32 is not None
    # The Schur rows of the picks are needed against the patterns still free only (a chosen pattern's Schur
    # row is zero; the picks' own columns are taken while they are free), so the products run over ``cols``,
    # a superset of the free patterns compacted whenever it exceeds them by COMPRESS_COMPACT: ``Kc`` the
    # rows of K (data, symmetric: its columns; the float32 copy from COMPRESS_SINGLE_FROM on) and ``Lc`` the
    # factor, transposed, there (one row per pivot; ``Lc32`` its float32 copy).  ``LM`` collects the factor's
    # columns of the picks as they are made: ``L_M'``, upper triangular.
    cols = np.arange(m)
    Kx = (K32 if single else K) if norm == "data" else None
    Kc = Kx
    Lc = np.zeros((cap, m))
    Lc32 = np.zeros((cap, m), dtype=np.float32) if single else None
    LM = np.zeros((cap, cap))
    where = np.arange(m)  # position of a pattern in cols
    Y = np.zeros((0, A.shape[1]))
    corr, d = t.copy(), diag.copy()
    chosen: list[int] = []
    free = np.ones(m, dtype=bool)
    n_free = m
    res2 = nf2
    goal, repairs, lowered = room, 0, 0
    while True:
        while res2 > room:
            k = len(chosen)
            block = min(int(COMPRESS_BLOCK), max(1, int(COMPRESS_GROWTH * k)))
            with np.errstate(over="ignore"):  # a Schur diagonal just above the floor: inf ranks first, as it should
                score = np.where(free & (d > floor), np.sum(corr * corr, axis=1) / np.maximum(d, np.finfo(float).tiny), -1.0)
            p = min(2 * block, m - k)
            pool = np.argpartition(-score, p - 1)[:p] if p < m else np.arange(m)
            pool = pool[score[pool] > 0]
            if len(pool) == 0:
                break
            LP0 = Lc[:k, where[pool]]
            SP = pool_gram(pool) - LP0.T @ LP0  # the pool's Schur complement
            picked, LP = _pool_picks(SP, corr[pool], np.diag(SP).copy(), floor[pool], min(block, len(pool)),
                                     res2, room)
            if len(picked) == 0:
                break
            J = pool[picked]
            Lpp = LP[picked][:, :len(picked)]  # lower triangular: the Cholesky factor of the picks' Schur block
            wJ = where[J]
            # every still-free pattern's Schur row against the picks (r x |cols|): G's rows of the picks (data:
            # K_J,: K, in float32 from COMPRESS_SINGLE_FROM on) minus the factor's product
            if norm == "data":
                Lx = Lc if Lc32 is None else Lc32
                C = np.asarray(Kx[J] @ Kc.T - Lx[:k, wJ].T @ Lx[:k], dtype=np.float64)
            else:
                C = K[J][:, cols] - Lc[:k, wJ].T @ Lc[:k]
            Lnew = sla.solve_triangular(Lpp, C, lower=True, check_finite=False)  # the factor's new rows
            ynew = sla.solve_triangular(Lpp, corr[J], lower=True, check_finite=False)
            r = len(J)
            if k + r > cap:
                grow = min(m, 2 * cap) - cap
                Lc = _grow_rows(Lc, k, cap + grow)
                if Lc32 is not None:
                    Lc32 = _grow_rows(Lc32, k, cap + grow)
                LM = np.pad(LM, ((0, grow), (0, grow)))
                cap += grow
            Lc[k:k + r] = Lnew
            if Lc32 is not None:
                Lc32[k:k + r] = Lnew
            LM[:k + r, k:k + r] = Lc[:k + r, wJ]
            Y = np.concatenate([Y, ynew])
            corr[cols] -= Lnew.T @ ynew
            d[cols] -= np.einsum("ij,ij->j", Lnew, Lnew)
            free[J] = False
            n_free -= r
            chosen.extend(J.tolist())
            res2 = nf2 - float(np.sum(Y * Y))
            if len(cols) > COMPRESS_COMPACT * n_free + 64:  # drop the chosen patterns' columns
                keep_c = np.flatnonzero(free[cols])
                cols = cols[keep_c]
                where[cols] = np.arange(len(cols))
                Lc = _take_columns(Lc, k + r, keep_c)  # rows from k + r on are written before they are read
                if Lc32 is not None:
                    Lc32 = _take_columns(Lc32, k + r, keep_c)
                if Kx is not None:
                    Kc = Kx[cols]
        if len(chosen) >= m:
            return everything
        if res2 > room:  # no candidate left above the floor: the factor's rounding, the tolerance is always reachable
            raise _Rounding("no candidate left")
        M = np.array(chosen)
        LMk = LM[:len(M), :len(M)]  # upper triangular: L_M'
        coef = sla.solve_triangular(LMk, Y, lower=False, check_finite=False)  # L_M' coef = Y
        if norm == "data":
            KM = K[M].T  # K is symmetric: its rows M, gathered whole, are its columns
            for _ in range(COMPRESS_REFINE):  # iterative refinement of the normal equations (float32 rows)
                E = F - KM @ coef
                coef = coef + sla.cho_solve((LMk, False), KM.T @ E, check_finite=False)
            FM = KM @ coef
            r2 = float(np.sum((FM - F) ** 2))
        else:
            FM = K[:, M] @ coef if agree > 0 else None  # read by the guard only
            r2 = nf2 - 2.0 * float(np.sum(coef * t[M])) + float(np.sum(coef * (K[np.ix_(M, M)] @ coef)))
        verdict, goal, room, lowered, repairs = _guard_step(
            r2, lambda: agree <= 0 or agreement(F, FM) >= agree, goal, room, lowered, repairs, len(chosen) >= m)
        if verdict == "done":
            break
        if verdict == "keep":
            return everything
        if verdict == "lost":  # a numerically rank-deficient K K
            raise _Rounding("the coefficients do not reach the tracked residual")
    order = np.argsort(M)
    M, coef = M[order], coef[order]
    return Compressed(M, coef, math.sqrt(max(0.0, r2) / nf2))

