"""Kernel online learners on a budget: kernels, the cache state, and the chunk driver.

The rules are the linear registry's (:data:`distlearn.learners.RULES`) with
inner products replaced by a kernel: the kernel perceptron and the aggressive
perceptron with margin ``beta`` (Crammer, Kandola & Singer 2003, Fig. 1),
kernel MIRA (binary, and Crammer & Singer's ultraconservative multiclass
MIRA), and kernel PA / PA-I / PA-II (binary, and the single-prototype
multiclass PA of Dekel & Singer 2005).  Every update inserts one support
pattern -- the example with its coefficient per output column -- and a
*budget* may remove patterns:

``None``
    nothing is removed;
``"variable"``
    DistillCache (Fig. 2): after each insertion, remove the cached pattern of
    largest removal margin ``mu >= beta``, one at a time (the hypothesis
    changes after each removal; ties, within a relative 1e-9, go to the earliest
    inserted), until none
    is left;
an integer ``n``
    a fixed-size cache: before inserting into a full cache remove one pattern,
    by ``removal="margin"`` (Fig. 3: the largest ``mu``), ``"oldest"`` (the
    Forgetron's choice, without its shrinking) or ``"random"`` (the randomized
    budget perceptron; a seeded draw per round); or, RBF kernel only, by
    ``removal="merge"`` (BSGD, Wang, Crammer & Vucetic 2012): *after* inserting
    into a full cache, the pattern of smallest ``||a||^2`` and its partner of the
    same class whose merge loses least are replaced by one synthetic pattern
    ``z = h x_m + (1 - h) x_n`` (:func:`distlearn.learners._budget.merge_step`).

An update on a row that is already cached with its class (a later epoch's
round on a support pattern) does not insert a duplicate: that pattern leaves
and the row returns with the summed coefficients -- the same hypothesis, one
slot (logged as one removal and one insertion, so the averaged hypothesis keeps
every coefficient's lifetime).  Under every budget but the Projectron's, the
cache therefore never holds more patterns than the data has distinct rows,
however many epochs run.  (The kernel OBPM's members, which share a pool of
rows, do not do this.)

The removal margin ``mu_p`` of a cached pattern is its margin under the
hypothesis without its own term: ``s_p (f(x_p) - a_p k(x_p, x_p))`` in the
binary case; for native multiclass rules, the score of its class minus the
best other score, both without its own term; for one-vs-rest, the smallest
such binary margin over the columns in which it has a coefficient.

The compiled engine is :mod:`distlearn.learners._budget`; its pure-Python
oracle is the test suite's ``tests/naive_budget.py``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import rng
from .._validation import check_allocation
from . import _budget as B
from ._kernels import P_ETA
from .linear import Rule, raise_bad_round

__all__ = [
    "KERNELS",
    "KERNEL_RULES",
    "Kernel",
    "make_kernel",
    "DENSE_CACHE_HINT",
    "step_rule",
    "BudgetState",
    "BudgetLog",
    "init_budget_state",
    "budget_code",
    "resolve_removal",
    "compacted_pieces",
    "dense_pieces",
    "merges",
    "mirror_for",
    "piece_bounds",
    "reads_csr",
    "raise_kernel_non_finite",
    "learn_budget_chunk",
    "kernel_decision",
    "keeps_scores",
    "history_order",
    "kernel_matrix",
    "squared_norms",
    "as_patterns",
    "stack_patterns",
    "removal_margins",
]

KERNELS = {"linear": B.LINEAR_KERNEL, "poly": B.POLY_KERNEL, "rbf": B.RBF_KERNEL}
#: The linear rules that have a kernel form (all updates are ``w += u x``, no rescaling of ``w``).
KERNEL_RULES = ("perceptron", "mira", "pa")
REMOVALS = {"margin": B.REMOVE_MARGIN, "oldest": B.REMOVE_OLDEST, "random": B.REMOVE_RANDOM, "merge": B.REMOVE_MERGE}
RANDOM_REMOVAL_STREAM = rng.stream_id("budget-removal")
#: What a cache too large for memory is told (:func:`~distlearn._validation.check_allocation`): the cached
#: patterns are dense rows, so on wide sparse data (an RCV1-like 47,236 features, 76 nonzero a row) each costs
#: ``8 d`` bytes and each kernel row ``d`` per pattern (5,000 rows, three passes: 727 s against SVC's 11 s).
DENSE_CACHE_HINT = ("the kernel learners keep their patterns as dense rows (except a single learner's on CSR rows "
                    "with at most 1/16 of the columns nonzero): on wide data bound the cache with budget=N, or use a "
                    "linear model")

#: Rows per compiled call: bounds the dense copy of a sparse block and the slots appended per call.
_SUB_ROWS = 2048


class Kernel(NamedTuple):
    """A kernel as the engine sees it: ``code`` and ``params = [gamma, degree, coef0]``.

    ``linear``: ``x.x'``; ``poly``: ``(gamma x.x' + coef0)^degree`` (homogeneous
    with ``coef0 = 0``); ``rbf``: ``exp(-gamma ||x - x'||^2)``.
    """

    name: str
    code: int
    params: np.ndarray

    def record(self) -> B.KernelParams:
        """The engine's :class:`~distlearn.learners._budget.KernelParams` (named fields, not ``params[k]``)."""
        g, deg, c0 = (float(v) for v in self.params)
        return B.KernelParams(int(self.code), g, deg, c0)


def step_rule(rule: Rule, beta: float) -> B.StepRule:
    """The engine's :class:`~distlearn.learners._budget.StepRule` of a kernel rule with margin ``beta``."""
    params = np.asarray(rule.params, dtype=np.float64)
    eta = float(params[P_ETA]) if rule.code == B.PERCEPTRON else 0.0  # the registry perceptron's step
    return B.StepRule(int(rule.code), params, eta, float(beta))


def make_kernel(kernel: str = "rbf", *, gamma: float = 1.0, degree: float = 3, coef0: float = 0.0) -> Kernel:
    """Validate and build a :class:`Kernel`."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    g = float(gamma)
    if not (math.isfinite(g) and g >= np.finfo(np.float64).tiny):  # a subnormal width trains to chance
        raise ValueError(f"gamma must be a normal float: finite and >= {np.finfo(np.float64).tiny:g}, got {gamma!r}")
    deg = float(degree)
    if not (math.isfinite(deg) and deg >= 1 and deg == int(deg)):
        raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
    c0 = float(coef0)
    if not math.isfinite(c0) or c0 < 0:
        raise ValueError(f"coef0 must be finite and >= 0, got {coef0!r}")
    return Kernel(kernel, KERNELS[kernel], np.array([g, deg, c0], dtype=np.float64))


def _mode(n_outputs: int, native: bool) -> int:
    if n_outputs == 1:
        return B.MODE_BINARY
    return B.MODE_NATIVE if native else B.MODE_OVR


class MirrorPool:
    """The sparse mirror's pool of a kernel cache or an ensemble's pool of patterns (attributes ``Zi``, ``Zv``,
    ``Zn``, ``Zs``, ``Zm``: :class:`~distlearn.learners._budget.Mirror`'s arrays): its record, room and segments."""

    _MIRROR_NAME = "the kernel cache's sparse patterns"
    Zi: np.ndarray
    Zv: np.ndarray
    Zn: np.ndarray
    Zs: np.ndarray
    Zm: np.ndarray
    #: A sparse store's *keys* (:attr:`~distlearn.learners._budget.Mirror.k`): each nonzero's number among the
    #: columns the store has met, in the order met, kept beside ``Zi`` as the pool grows and compacts; ``Zkt`` the
    #: table from column to key (:func:`~distlearn.learners._budget.key_columns`), ``Zkn`` how many keys.  None:
    #: not keyed yet (built from ``Zi`` when next needed)
    Zk: np.ndarray | None
    Zkt: np.ndarray | None
    Zkn: int

    @property
    def store(self) -> bool:
        raise NotImplementedError

    def unkey(self) -> None:
        """Forget the keys (``Zi`` rewritten, or the pool no longer a store): :meth:`key_columns` builds them anew."""
        self.Zk = self.Zkt = None
        self.Zkn = 0

    def key_columns(self, cols: np.ndarray) -> tuple[np.ndarray, int]:
        """The keys of a chunk's CSR columns ``cols`` (int32) and how many keys there are: a column the store has
        not met gets the next number.  The engine's column map and a removal's row are then as wide as the columns
        met, not ``d``: a map of 2**24 columns (hashed text) was read at random for every nonzero of every pattern
        against every block of rows, 1.1-2.2x the fit of the same rows with their columns renumbered (2**20, 2**24)
        (``benchmarks/README.md``).  A key only names a column (no sum runs in key order), so every sum adds the
        same products in the same order: the same bits.  Not a store: the keys are the columns."""
        if not self.store:
            self.unkey()
            return cols, int(self.n_features)  # type: ignore[attr-defined]
        if self.Zk is None:
            used = int(self.Zm[0])
            self.Zk = np.zeros(self.Zi.shape[0], dtype=np.int32)
            self.Zkt, self.Zkn = key_into(None, 0, self.Zi[:used], self.Zk[:used])
        keys = np.empty(cols.shape[0], dtype=np.int32)
        self.Zkt, self.Zkn = key_into(self.Zkt, self.Zkn, cols, keys)
        return keys, max(1, self.Zkn)

    def _segments(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pool positions of the slots ``idx``'s nonzeros, in order, and each slot's count (0 unmirrored)."""
        cnt = np.maximum(self.Zn[idx], 0)
        total = int(cnt.sum())
        starts = np.repeat(self.Zs[idx] - (np.cumsum(cnt) - cnt), cnt)
        return starts + np.arange(total), cnt

    def reserve(self, entries: int) -> None:
        """Room for ``entries`` more nonzeros in the mirror's pool (doubling)."""
        need = int(self.Zm[0]) + int(entries)
        if self.Zm[1] and need > self.Zi.shape[0]:
            new = max(need, 2 * self.Zi.shape[0], 1024)
            check_allocation(self._MIRROR_NAME, (new,), 12, DENSE_CACHE_HINT)
            used = int(self.Zm[0])
            Zi, Zv = np.zeros(new, dtype=np.int32), np.zeros(new)
            Zi[:used], Zv[:used] = self.Zi[:used], self.Zv[:used]
            self.Zi, self.Zv = Zi, Zv
            if self.Zk is not None:
                Zk = np.zeros(new, dtype=np.int32)
                Zk[:used] = self.Zk[:used]
                self.Zk = Zk

    def _mirror(self) -> B.Mirror:
        keys = self.Zi
        if self.store:  # keyed by key_columns before the chunk, then kept beside Zi
            keys = self.Zk
            if keys is None or keys.shape != self.Zi.shape:
                raise RuntimeError("a sparse store reached the engine without its columns keyed (key_columns)")
        return B.Mirror(self.Zi, self.Zv, self.Zn, self.Zs, self.Zm, keys)


@dataclass
class BudgetState(MirrorPool):
    """The cache: live and (within a chunk) dead slots, plus the retired patterns.

    ``retired_*`` keep the patterns removed in earlier chunks with their
    coefficients and lifetimes when ``keep_retired`` (the averaged hypothesis
    is a kernel expansion over every pattern that was ever cached).
    """

    n_features: int
    n_outputs: int
    native: bool
    keep_retired: bool = False
    S: np.ndarray = field(default=None)        # type: ignore[assignment]
    sq: np.ndarray = field(default=None)       # type: ignore[assignment]
    kd: np.ndarray = field(default=None)       # type: ignore[assignment]
    A: np.ndarray = field(default=None)        # type: ignore[assignment]
    F: np.ndarray = field(default=None)        # type: ignore[assignment]
    lab: np.ndarray = field(default=None)      # type: ignore[assignment]
    born: np.ndarray = field(default=None)     # type: ignore[assignment]
    died: np.ndarray = field(default=None)     # type: ignore[assignment]
    alive: np.ndarray = field(default=None)    # type: ignore[assignment]
    meta: np.ndarray = field(default=None)     # type: ignore[assignment]  [n_slots, n_alive, t]
    retired_S: list = field(default_factory=list)
    retired_A: list = field(default_factory=list)
    retired_life: list = field(default_factory=list)  # (born, died) pairs
    retired_lab: list = field(default_factory=list)
    Kinv: np.ndarray = field(default=None)     # type: ignore[assignment]  the Projectron's inverse Gram matrix
    Ac: np.ndarray = field(default=None)       # type: ignore[assignment]  sums carried in at birth (budget_average)
    #: The sparse mirror of the patterns (the engine's :class:`~distlearn.learners._budget.Mirror`): a pool of
    #: their nonzeros (``Zi`` columns, ``Zv`` values), each slot's count ``Zn`` (-1: not mirrored) and segment
    #: start ``Zs``, and ``Zm = [pool used, most nonzeros a mirrored pattern may have (0: off)]``; turned on by
    #: :meth:`mirror` when sparse rows arrive.
    Zi: np.ndarray = field(default=None)       # type: ignore[assignment]
    Zv: np.ndarray = field(default=None)       # type: ignore[assignment]
    Zn: np.ndarray = field(default=None)       # type: ignore[assignment]
    Zs: np.ndarray = field(default=None)       # type: ignore[assignment]
    Zm: np.ndarray = field(default=None)       # type: ignore[assignment]
    Zk: np.ndarray | None = None
    Zkt: np.ndarray | None = None
    Zkn: int = 0
    n_inserted: int = 0
    n_removed: int = 0
    #: Whether ``F`` holds the current scores: kept only by the calls whose removal reads them
    #: (:func:`keeps_scores`); stale after any other call until recomputed (:meth:`refresh_scores`).
    scores_kept: bool = True

    @property
    def mode(self) -> int:
        return _mode(self.n_outputs, self.native)

    def refresh_scores(self, kernel: Kernel) -> None:
        """Recompute ``F`` of the live slots from the cache (one kernel matrix) and mark it kept."""
        n = int(self.meta[0])
        live = np.flatnonzero(self.alive[:n])
        if live.size:
            S = self.patterns(live)
            self.F[live] = kernel_decision(kernel, S, self.A[live], S).reshape(live.size, -1)
        self.scores_kept = True

    @property
    def t(self) -> int:
        """Rounds seen so far."""
        return int(self.meta[2])

    @property
    def n_support(self) -> int:
        return int(self.meta[1])

    def _grow(self, need: int) -> None:
        cap = self.S.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap, 64)
        K = self.n_outputs
        check_allocation("the kernel cache's patterns", (new, self.S.shape[1]), self.S.dtype.itemsize, DENSE_CACHE_HINT)

        def g(a: np.ndarray, shape: tuple[int, ...], fill: Any = 0) -> np.ndarray:
            # zeros are the allocator's (pages untouched until written): a wide cache's rows cost when filled
            out = np.zeros(shape, dtype=a.dtype) if fill == 0 else np.full(shape, fill, dtype=a.dtype)
            out[: a.shape[0]] = a
            return out

        self.S = g(self.S, (new, self.S.shape[1]))
        self.sq, self.kd = g(self.sq, (new,)), g(self.kd, (new,))
        self.A, self.F, self.Ac = g(self.A, (new, K)), g(self.F, (new, K)), g(self.Ac, (new, K))
        self.lab, self.born, self.died = g(self.lab, (new,)), g(self.born, (new,)), g(self.died, (new,), -1)
        self.alive = g(self.alive, (new,), False)
        self.Zn, self.Zs = g(self.Zn, (new,), -1), g(self.Zs, (new,))

    def compact(self, share: float = 0.0) -> None:
        """Drop the dead slots (retiring them when ``keep_retired``); live slots keep insertion order.  With
        ``share``, only when at least that share of the slots is dead (:data:`COMPACT_SHARE`)."""
        n = int(self.meta[0])
        live = self.alive[:n]
        dead = np.flatnonzero(~live)
        if dead.size == 0 or dead.size < share * n:
            return
        if self.keep_retired:
            self.retired_S.append(self.patterns(dead))  # CSR for a sparse store: a text pattern costs its nonzeros
            self.retired_A.append(self.A[dead].copy())
            self.retired_life.append(np.stack([self.born[dead], self.died[dead]], axis=1))
            self.retired_lab.append(self.lab[dead].copy())
        keep = np.flatnonzero(live)
        k = keep.size
        first = int(dead[0])  # the slots before the first dead one stay where they are
        tail = keep[first:]
        if self.Zm[1]:  # the live slots' segments, in slot order, to the front of the pool
            at, cnt = self._segments(keep)
            self.Zi[: at.size], self.Zv[: at.size] = self.Zi[at], self.Zv[at]
            if self.Zk is not None:
                self.Zk[: at.size] = self.Zk[at]
            self.Zs[:k] = np.cumsum(cnt) - cnt
            self.Zm[0] = at.size
        for a in (self.S, self.sq, self.kd, self.A, self.F, self.Ac, self.lab, self.born, self.died, self.alive,
                  self.Zn):
            a[first:k] = a[tail]
        self.alive[k:n] = False
        self.Zn[k:n] = -1
        self.meta[0] = k

    @property  # type: ignore[override]
    def store(self) -> bool:
        """Whether the cache is a sparse store: ``S`` has no columns and the mirror holds every pattern."""
        return self.S.shape[1] == 0

    def patterns(self, idx: np.ndarray) -> Any:
        """The patterns of the slots ``idx``: dense rows, or for a sparse store a CSR matrix (a text pattern
        costs its nonzeros; :func:`kernel_matrix` and :func:`kernel_decision` take either)."""
        idx = np.asarray(idx, dtype=np.int64)
        if not self.store:
            return self.S[idx].copy()
        at, cnt = self._segments(idx)
        indptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        return sp.csr_matrix((self.Zv[at], self.Zi[at].astype(np.int64), indptr), shape=(idx.size, self.n_features))

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """The patterns of the slots ``idx`` as dense rows (a copy; from the mirror for a sparse store)."""
        P = self.patterns(idx)
        return P.toarray() if sp.issparse(P) else P

    def mirror(self, store: bool = False) -> None:
        """Turn the sparse mirror on: kernel rows then cost each pattern's nonzeros instead of ``d``
        (:func:`~distlearn.learners._budget._slot_dot`, the same bits).  A pattern with more than
        ``d / MIRROR_SPARSITY`` nonzeros is read from ``S``.  ``store`` (an empty cache only): keep the patterns in
        the mirror alone, ``S`` of no columns -- a pattern costs its nonzeros in memory too, and every row the
        engine caches must find room in the pool (:func:`learn_budget_chunk` reserves it first)."""
        if store and int(self.meta[0]) == 0 and not self.retired_S and not self.store:
            self.S = np.zeros((self.S.shape[0], 0))
            self.Zm[1] = self.n_features
            self.unkey()
        if self.Zm[1]:
            return
        self.Zm[1] = max(1, self.n_features // MIRROR_SPARSITY)
        n = int(self.meta[0])
        self.reserve(int(np.count_nonzero(self.S[:n])) if n else 0)
        B.fill_mirror(self.S, n, self._mirror())

    def densify(self) -> None:
        """A sparse store back to dense patterns (rows too dense for a store arrived); the mirror stays."""
        if self.store:
            check_allocation("the kernel cache's patterns", (self.S.shape[0], self.n_features), 8, DENSE_CACHE_HINT)
            self.S = self.rows(np.arange(self.S.shape[0]))
            self.Zm[1] = max(1, self.n_features // MIRROR_SPARSITY)
            self.unkey()

    def record(self) -> B.Cache:
        """The cache as the engine takes it (:class:`~distlearn.learners._budget.Cache`; the arrays, not copies)."""
        Kinv = self.Kinv if self.Kinv is not None else np.zeros((1, 1))
        return B.Cache(self.S, self.sq, self.kd, self.A, self.F, self.lab, self.born, self.died, self.alive,
                       self.meta, Kinv, self.Ac, self._mirror())

    def support(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """The live support patterns (:meth:`patterns`: CSR for a sparse store), their coefficients and classes
        (insertion order)."""
        n = int(self.meta[0])
        idx = np.flatnonzero(self.alive[:n])
        return self.patterns(idx), self.A[idx].copy(), self.lab[idx].copy()

    def budget_average(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The average of ``h_0 .. h_n`` carried in the cache's own slots (``n`` the rounds seen): the live
        patterns, in insertion order, with coefficients ``(Ac[i] + A[i] (n - born[i])) / (n + 1)``
        (:mod:`distlearn.learners._budget`'s docstring: merges project the summed coefficients as they
        project the coefficients; removed patterns take theirs with them).  Without a budget or
        removals it is :meth:`average`; it needs no retired patterns and has at most the budget's
        patterns.  Not defined for the Projectron (its updates change cached coefficients)."""
        n = int(self.meta[0])
        idx = np.flatnonzero(self.alive[:n])
        T = self.t
        A = (self.Ac[idx] + self.A[idx] * (T - self.born[idx]).astype(np.float64)[:, None]) / (T + 1)
        return self.patterns(idx), A, self.lab[idx].copy()

    def average(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(1/(n+1)) sum_{t=0}^{n} h_t`` as one kernel expansion, ``n`` the rounds seen (needs ``keep_retired``).

        A pattern inserted at round ``b`` is in the hypotheses ``h_{b+1} ..
        h_d`` if removed at round ``d`` (after that round's prediction), else in
        ``h_{b+1} .. h_n``; its averaged coefficient is ``a (d - b) / (n + 1)``.
        ``h_0 = 0`` counts, as in the linear average.  Patterns come in insertion order.
        """
        if not self.keep_retired:
            raise ValueError("the average needs the retired patterns: build the state with keep_retired=True")
        n_rounds = self.t
        n = int(self.meta[0])
        died = self.died[:n].copy()
        died[self.alive[:n]] = n_rounds
        S = [self.patterns(np.arange(n)), *self.retired_S]
        A = [self.A[:n], *self.retired_A]
        life = [np.stack([self.born[:n], died], axis=1), *self.retired_life]
        lab = np.concatenate([self.lab[:n], *self.retired_lab])
        S_all, A_all, L = stack_patterns(S), np.concatenate(A), np.concatenate(life)
        w = (L[:, 1] - L[:, 0]).astype(np.float64) / (n_rounds + 1)
        keep = np.flatnonzero(w > 0)
        keep = keep[history_order(L[keep, 0], S_all[keep])]  # insertion order, whatever the chunking
        return S_all[keep], A_all[keep] * w[keep, None], lab[keep]


def stack_patterns(parts: list[Any]) -> Any:
    """Pattern blocks (dense rows or CSR) one above the other: CSR if any is."""
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
    return np.concatenate(parts)


def history_order(born: np.ndarray, S: Any) -> np.ndarray:
    """The permutation putting patterns in insertion order, the same whatever the chunking: by birth
    round, and within a round (a merging round's own row and the merged pattern are born in it; a
    chunk boundary may retire one and not the other) by the rows themselves, lexicographically
    (``S`` dense or CSR: only the rows of a shared birth round are compared, densified)."""
    if len(born) == 0:
        return np.zeros(0, dtype=np.int64)
    if not sp.issparse(S):
        return np.lexsort((*np.asarray(S).T[::-1], born))
    order = np.argsort(born, kind="stable")
    b = born[order]
    tied = np.flatnonzero(np.diff(b) == 0)
    for start in np.unique(np.searchsorted(b, b[tied])):  # each birth round held by more than one pattern
        stop = int(np.searchsorted(b, b[start], side="right"))
        group = order[start:stop]
        rows = S[group].toarray()
        order[start:stop] = group[np.lexsort(rows.T[::-1])]
    return order


BudgetLog = B.BudgetLog


def init_budget_state(n_features: int, n_outputs: int, *, native: bool = False, keep_retired: bool = False,
                      capacity: int = 64) -> BudgetState:
    """An empty cache for ``n_outputs`` columns (1 = binary)."""
    st = BudgetState(int(n_features), int(n_outputs), bool(native) and n_outputs > 1, keep_retired)
    cap, K = max(1, capacity), int(n_outputs)
    check_allocation("the kernel cache's patterns", (cap, int(n_features)), 8, DENSE_CACHE_HINT)
    st.S = np.zeros((cap, n_features))
    st.sq, st.kd = np.zeros(cap), np.zeros(cap)
    st.A, st.F, st.Ac = np.zeros((cap, K)), np.zeros((cap, K)), np.zeros((cap, K))
    st.lab, st.born = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int64)
    st.died = np.full(cap, -1, dtype=np.int64)
    st.alive = np.zeros(cap, dtype=bool)
    st.meta = np.zeros(3, dtype=np.int64)
    st.Zi, st.Zv = np.zeros(0, dtype=np.int32), np.zeros(0)
    st.Zn, st.Zs, st.Zm = np.full(cap, -1, dtype=np.int64), np.zeros(cap, dtype=np.int64), np.zeros(2, dtype=np.int64)
    return st


def budget_code(budget: None | str | int) -> tuple[int, int]:
    """The engine's (budget code, cache size) for ``budget=None``, ``"variable"``, ``"projectron"``
    or a positive int."""
    if budget is None:
        return B.BUDGET_NONE, 0
    if isinstance(budget, str):
        if budget not in ("variable", "projectron"):
            raise ValueError(f"budget must be None, 'variable', 'projectron' or a positive int, got {budget!r}")
        return (B.BUDGET_VARIABLE if budget == "variable" else B.BUDGET_PROJECTRON), 0
    if isinstance(budget, bool) or int(budget) != budget or budget < 1:
        raise ValueError(f"budget must be None, 'variable', 'projectron' or a positive int, got {budget!r}")
    return B.BUDGET_FIXED, int(budget)


def resolve_removal(removal: str, kernel: Kernel, bcode: int, *, pool: bool = False) -> str:
    """The removal a cache runs: ``removal`` itself, or for ``"auto"`` ``"merge"`` when a fixed budget
    (``bcode``) has the RBF kernel and is not a kernel OBPM member's (``pool``), else ``"margin"``.
    Merging won at every budget and rule measured (LETTER, one pass, B = 100 and 500:
    ``benchmarks/bench_budget_merge.py``).  Other budgets ignore the removal."""
    if removal == "auto":
        return "merge" if bcode == B.BUDGET_FIXED and kernel.name == "rbf" and not pool else "margin"
    if removal not in REMOVALS:
        raise ValueError(f"removal must be 'auto' or one of {sorted(REMOVALS)}, got {removal!r}")
    return removal


def learn_budget_chunk(rule: Rule, kernel: Kernel, state: BudgetState, X: Any, y: np.ndarray, *,
                       order: np.ndarray | None = None, beta: float = 0.0, budget: None | str | int = None,
                       removal: str = "margin", seed: int = 0, blocked: bool = True, eta: float = 0.1,
                       dots: np.ndarray | None = None) -> BudgetLog:
    """Run every round of a chunk (dense or CSR rows ``X``, class indices ``y``) in ``order``.

    ``beta`` is the removal threshold (and the perceptron's update margin);
    ``removal`` as :func:`resolve_removal`; ``seed`` keys the random removal draws by the learner's round counter, so
    the result does not depend on how the stream was chunked.  ``blocked``
    computes kernel rows ``ROW_BLOCK`` rounds at a time (same values, bit for
    bit; ``False`` is one row per round, kept for the benchmark).  ``dots``: the chunk's dot products with
    the rows of the learner's rounds, shared by several learners that run these rounds (the ``gamma="auto"``
    race: :func:`~distlearn.learners._budget.shared_dots`, ``dots[i // ROW_BLOCK, r, i % ROW_BLOCK]`` = round
    ``r``'s row . the row ``order[i]``; :func:`~distlearn.learners._budget.shared_csr_dots` for rows kept as CSR),
    read instead of computed (the same bits), dense rows or sparse; not with merging (a merged
    pattern is no row), and only when the engine calls start at multiples of ``ROW_BLOCK`` rounds.
    """
    bcode, n_budget = budget_code(budget)
    removal = resolve_removal(removal, kernel, bcode)
    keep = keeps_scores(bcode, removal)
    if keep and not state.scores_kept:
        state.refresh_scores(kernel)
    if bcode == B.BUDGET_PROJECTRON and not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"eta must be finite and >= 0, got {eta!r}")
    merging = merges(budget, removal, kernel)
    if dots is not None and merging:
        raise ValueError("dots (shared dot products) need cached patterns that are rows: not with removal='merge'")
    if merging and kernel.name != "rbf":
        raise ValueError(f"removal='merge' needs kernel='rbf' (got kernel={kernel.name!r}): the merged pattern "
                         "h x_m + (1-h) x_n keeps k(z, z) = 1 and a one-parameter merge loss only for RBF")
    n = X.shape[0]
    order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    m = order.shape[0]
    rec_rule, rec_kern = step_rule(rule, beta), kernel.record()
    spec = B.BudgetSpec(bcode, n_budget, REMOVALS[removal], float(eta))
    out = BudgetLog(np.zeros(m, dtype=bool), np.zeros(m), np.zeros(m, dtype=bool), np.zeros(m, dtype=np.int64),
                    np.zeros(m, dtype=np.int64))
    mirror_for(state, X, order, merging)
    # sparse rows on a mirrored cache: the engine reads them as CSR, a round costing its nonzeros (no piece is
    # densified), shared dot products or not
    csr = _csr_rows(X) if reads_csr(state, X) else None
    keys = state.key_columns(csr[1]) if csr is not None else None
    sub = _sub_rows(X.shape[1], csr is None)
    if dots is not None and m > sub and sub % B.ROW_BLOCK:
        raise ValueError(f"dots: the chunk's engine calls must start at multiples of {B.ROW_BLOCK} rounds")
    for lo, hi, rows, Xd, yd, od in compacted_pieces(X, y, order, densify=csr is None):
        state.compact(COMPACT_SHARE)
        state._grow(int(state.meta[0]) + (2 if merging else 1) * (hi - lo))
        if state.Zm[1]:
            state.reserve(_piece_nonzeros(X, Xd, od, rows, int(state.Zm[1])))
        t0 = state.t
        uniforms = (rng.uniform(seed, RANDOM_REMOVAL_STREAM, np.arange(t0, t0 + hi - lo))
                    if bcode == B.BUDGET_FIXED and REMOVALS[removal] == B.REMOVE_RANDOM else np.zeros(hi - lo))
        if bcode == B.BUDGET_PROJECTRON:
            cap = state.S.shape[0]
            if state.Kinv is None or state.Kinv.shape[0] < cap:
                K0 = np.zeros((cap, cap))
                if state.Kinv is not None:
                    K0[: state.Kinv.shape[0], : state.Kinv.shape[1]] = state.Kinv
                state.Kinv = K0
        R = _NO_ROWS
        if csr is not None:  # the rounds' rows by position; X the engine's block of them, densified
            R = csr_rows_record(csr, keys, rows, X.shape[1])
            Xd, yd, od = R.buf, y, np.arange(hi - lo, dtype=np.int64) % B.ROW_BLOCK
        try:
            bad = B.learn_budget_block(Xd, yd, od, uniforms, rec_rule, rec_kern, spec, state.mode, state.record(),
                                       BudgetLog(*(a[lo:hi] for a in out)), bool(blocked),
                                       _NO_DOTS if dots is None or not blocked else dots[lo // B.ROW_BLOCK:], R)
        finally:
            clear_csr_rows(R, not state.store)
        state.scores_kept = keep
        if bad <= -2:  # cannot happen: the pool was reserved for every row of the piece
            raise RuntimeError(f"row {int(rows[-2 - bad])}: no room in the sparse cache's pool")
        done = (hi - lo) if bad < 0 else bad
        state.n_inserted += int(out.updated[lo:lo + done].sum())
        state.n_removed += int(out.removed[lo:lo + done].sum())
        if bad >= 0:
            raise_kernel_non_finite(X, int(rows[bad]), lo + bad)
    return out


_NO_DOTS = np.zeros((0, 0, 0))  # learn_budget_block's "no shared dot products"
_NO_ROWS = B.Rows(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0), np.zeros(0, np.int64),
                  np.zeros((0, 0)), np.zeros(0, np.int32), np.zeros(0), np.zeros(0, np.int32))  # dense rows

_WORK = threading.local()


def csr_scratch(d: int, width: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's scratch for the kernel engines on CSR rows of ``d`` columns: the ``(ROW_BLOCK, d)`` block the
    rounds are densified into (zeros), and for ``width`` keys (:meth:`MirrorPool.key_columns`; default ``d``) the
    column map (-1) and a removal's row (zeros), at least that long.  Made once per thread and grown by doubling,
    kept clean between calls (the engines reset the map and the row, :func:`clear_csr_rows` the block), so an engine
    call costs its rows' nonzeros, never ``d``: hashed text of 2**20 columns paid 290 MB of zeroed scratch a call,
    one call per 16 rows (``_sub_rows``), and KernelMIRA's defaults on 1,500 such rows took 90 CPU s.  The block's
    zeros are the allocator's, touched only for caches that are not sparse stores (16 d values)."""
    width = d if width is None else int(width)
    w = getattr(_WORK, "scratch", None)
    if w is None or w[0].shape[1] != d:
        _WORK.scratch = None  # the old width's first
        check_allocation("the kernel engines' scratch for sparse rows", (B.ROW_BLOCK, d), 8,
                         "fewer features (hash them into fewer columns)")
        w = [np.zeros((B.ROW_BLOCK, d)), np.zeros(0, dtype=np.int32), np.zeros(0)]
        _WORK.scratch = w
    if w[1].shape[0] < width:
        new = max(width, min(2 * w[1].shape[0], max(d, 1)))
        check_allocation("the kernel engines' column map for sparse rows", (new,), 12,
                         "fewer features (hash them into fewer columns)")
        w[1], w[2] = np.full(new, -1, dtype=np.int32), np.zeros(new)
    return w[0], w[1], w[2]


def csr_rows_record(csr: tuple[np.ndarray, np.ndarray, np.ndarray], keys: tuple[np.ndarray, int], rows: np.ndarray,
                    d: int) -> B.Rows:
    """The engines' record of CSR rows (:class:`~distlearn.learners._budget.Rows`; ``csr`` from :func:`_csr_rows`,
    ``keys`` their columns' keys and how many from the cache's or pool's :meth:`MirrorPool.key_columns`, ``rows``
    the rounds' rows) with this thread's scratch for ``d`` columns and that many keys (:func:`csr_scratch`)."""
    return B.Rows(*csr, np.ascontiguousarray(rows, dtype=np.int64), *csr_scratch(d, keys[1]), keys[0])


def clear_csr_rows(R: B.Rows, filled: bool = True) -> None:
    """Zero what an engine call may leave in ``R.buf``: the nonzeros of its rounds' rows at their places (round ``i``
    at row ``i % ROW_BLOCK``; the engine clears each block but its last when it moves on).  Nothing for dense rows,
    nor when the call did not fill it (``filled`` False: a sparse store's engine reads its rows from ``R`` alone,
    and a write here would fault in the pages of ``ROW_BLOCK`` rows of ``d`` values, 2 GiB at 2**24 columns)."""
    if not filled or not R.p.shape[0] or not R.order.shape[0]:
        return
    lo, hi = R.p[R.order], R.p[R.order + 1]
    counts = hi - lo
    total = int(counts.sum())
    if total:
        pos = np.repeat(np.arange(R.order.shape[0]) % B.ROW_BLOCK, counts)
        at = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)
        R.buf[pos, R.j[at]] = 0.0


def _csr_rows(X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X``'s CSR arrays as the engine reads them (:class:`~distlearn.learners._budget.Rows`): int64 row
    pointers, int32 columns ascending and distinct within each row (a repeated column summed), float64 values;
    its structure checked in full (an index the engine cannot use is refused here, never read)."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=False)
    X.check_format(full_check=True)
    if not X.has_canonical_format:  # a repeated column is its sum (scipy's meaning), once, in column order
        X = X.copy()
        X.sum_duplicates()
    if X.shape[1] >= 2**31:
        raise ValueError(f"{X.shape[1]:,} features: at most 2**31 - 1 with sparse rows")
    return X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int32, copy=False), X.data

#: CSR rows with at most ``1 / MIRROR_SPARSITY`` of their columns nonzero (on average over a chunk) make the cache sparse
#: (:meth:`BudgetState.mirror`): a kernel row then costs each pattern's nonzeros, not ``d``, with the same bits,
#: and an empty cache keeps its patterns in that form alone (a sparse store).
#: RCV1-like text (75 of 47,236 columns): ``benchmarks/bench_kernel_sparse.py``.
MIRROR_SPARSITY = 16


def mirror_for(state: BudgetState, X: Any, order: np.ndarray, merging: bool) -> None:
    """Before a chunk: turn the cache's sparse mirror on when its rows are sparse (a store when the cache is
    empty and not merging: a merged pattern has the nonzeros of two), or make a store dense again when the
    rows are not sparse.  A dense chunk on a dense cache costs nothing."""
    if not order.shape[0] or not (sp.issparse(X) or state.store):
        return
    if sparse_chunk(X, order):
        state.mirror(store=not merging)
    elif state.store:
        state.densify()


def merges(budget: None | str | int, removal: str, kernel: Kernel) -> bool:
    """Whether a cache of this ``budget`` makes room by merging (a fixed budget, ``removal`` resolving to "merge")."""
    bcode = budget_code(budget)[0]
    return bcode == B.BUDGET_FIXED and resolve_removal(removal, kernel, bcode) == "merge"


def reads_csr(state: Any, X: Any) -> bool:
    """Whether the engine reads the rows of ``X`` as CSR, by their nonzeros (no piece densified): sparse rows on a
    cache (or pool) with a sparse mirror."""
    return bool(sp.issparse(X) and state.Zm[1])


def sparse_chunk(X: Any, order: np.ndarray) -> bool:
    """Whether the rows ``X[order]`` are sparse for the kernel caches and pools: at most ``1 / MIRROR_SPARSITY``
    of the columns nonzero, on average over the chunk (one long document does not make text dense)."""
    if sp.issparse(X):
        nnz = int(np.diff(X.indptr)[order].sum())
    else:
        nnz = sum(int(np.count_nonzero(X[order[i:i + 1024]])) for i in range(0, len(order), 1024))
    return nnz * MIRROR_SPARSITY <= X.shape[1] * len(order)


def _piece_nonzeros(X: Any, Xd: np.ndarray, od: np.ndarray, rows: np.ndarray, most: int) -> int:
    """An upper bound on the pool entries one engine call on these rows can append: each row's nonzeros (at most
    ``most`` each, the mirror's limit), once per round (a merged pattern that does not fit is left unmirrored)."""
    if sp.issparse(X):
        nnz = np.diff(X.indptr)[rows]
    else:
        nnz = np.count_nonzero(Xd[od], axis=1)
    return int(np.minimum(nnz, most).sum())


#: Rounds per engine call: the driver may compact the dead slots between calls (:data:`COMPACT_SHARE`), so a long
#: chunk never scans more than this many removed patterns beyond an eighth of the slots (same model bit for bit;
#: the live slots keep their insertion order, and every sum runs over them in that order).
_COMPACT_ROWS = 1024

#: The share of dead slots at which an engine call first compacts the cache (:meth:`BudgetState.compact`): a
#: compaction moves every live slot and its pool segment, so compacting at every call cost O(cache) per call --
#: on hashed text (2**20 columns, 16 rows a call) 0.2 of 1.9 CPU s.  Waiting for an eighth of the slots makes it
#: O(1) per removal; the engine skips dead slots, and the history is ordered by insertion, never by slot, so the
#: model is the same bits (``tests/learners/test_sparse_cache.py``: shares 0, 1/8 and 1 give the same model).
COMPACT_SHARE = 1 / 8


def compacted_pieces(X: Any, y: np.ndarray, order: np.ndarray, densify: bool = True):
    """:func:`dense_pieces` cut further into runs of at most ``_COMPACT_ROWS`` rounds (``densify=False``: the same
    cuts, CSR pieces left as they are, ``Xd`` None)."""
    for lo, hi, rows, Xd, yd, od in dense_pieces(X, y, order, densify):
        for a in range(0, hi - lo, _COMPACT_ROWS):
            b = min(hi - lo, a + _COMPACT_ROWS)
            yield lo + a, lo + b, rows[a:b], Xd, yd, od[a:b]


def _sub_rows(n_features: int, by_width: bool = True) -> int:
    """Rows per piece of :func:`dense_pieces`: at most ``_SUB_ROWS``, and with ``by_width`` (dense rows, or CSR
    rows the engine reads densified) at most 16 Mi values.  CSR rows the engine reads by their nonzeros
    (``by_width=False``: a cache with a sparse mirror) are never densified, so their pieces do not shrink with the
    width: cut by width, hashed text at 2**24 columns made one engine call a row, each pattern's nonzeros walked
    for one row instead of a block of 16 (1,500 rows: 7.0 CPU s against 1.3 at 2**20)."""
    return max(1, min(_SUB_ROWS, (1 << 24) // max(1, n_features))) if by_width else _SUB_ROWS


def piece_bounds(n_features: int, m: int, by_width: bool = True) -> np.ndarray:
    """Where a chunk of ``m`` rounds can be split so that its two calls of :func:`learn_budget_chunk`
    make the same engine calls as the whole chunk (so the split cannot change a bit of the model):
    the starts of the pieces of :func:`compacted_pieces`, and ``m``; only the densified pieces' starts
    when their length is not a multiple of ``_COMPACT_ROWS`` (a later start would shift the cuts).  ``by_width``
    as :func:`_sub_rows` (False: CSR rows on a cache with a sparse mirror, :func:`reads_csr`)."""
    sub = _sub_rows(n_features, by_width)
    step = _COMPACT_ROWS if sub % _COMPACT_ROWS == 0 else sub
    cuts = [lo + a for lo in range(0, m, sub) for a in range(0, min(sub, m - lo), step)]
    return np.asarray([*cuts, m], dtype=np.int64)


def dense_pieces(X: Any, y: np.ndarray, order: np.ndarray, densify: bool = True):
    """The rows ``order`` of X (dense or CSR) in pieces for the compiled engines: ``(lo, hi, rows,
    Xd, yd, od)`` with ``Xd[od[i]]`` the row ``order[lo + i]``, float64 C-contiguous (a sparse piece
    is densified: at most ``_SUB_ROWS`` rows and 16 Mi values)."""
    m = order.shape[0]
    sub = _sub_rows(X.shape[1], densify or not sp.issparse(X))
    for lo in range(0, m, sub):
        hi = min(m, lo + sub)
        rows = order[lo:hi]
        if sp.issparse(X) and not densify:
            yield lo, hi, rows, None, y, rows
            continue
        if sp.issparse(X):
            uniq, inv = np.unique(rows, return_inverse=True)
            Xd = np.asarray(X[uniq].toarray(), dtype=np.float64)
            yd, od = y[uniq], inv.astype(np.int64)
        else:
            Xd, yd, od = np.asarray(X, dtype=np.float64), y, rows
        if not Xd.flags.c_contiguous:
            Xd = np.ascontiguousarray(Xd)
        yield lo, hi, rows, Xd, yd, od


def raise_kernel_non_finite(X: Any, r: int, position: int) -> None:
    """Row ``r`` (at ``position`` in the order) gave a non-finite score: name the bad value, or the overflow."""
    raise_bad_round(X, r, position, np.float64, fallback=f"row {r}: a kernel score is not finite (the kernel "
                    "overflowed: scale the data or lower gamma or degree)")


def keeps_scores(bcode: int, removal: str) -> bool:
    """Whether a call with this budget keeps the cached patterns' scores ``F`` (only margin-based
    removal reads them: DistillCache and a fixed cache removing by margin)."""
    return bcode == B.BUDGET_VARIABLE or (bcode == B.BUDGET_FIXED and REMOVALS.get(removal) == B.REMOVE_MARGIN)


def removal_margins(state: BudgetState, kernel: Kernel | None = None) -> np.ndarray:
    """``mu_p`` of every live pattern (insertion order), from the kept scores, for checks; when the
    scores are not kept (no budget, oldest or random removal) they are recomputed with ``kernel``."""
    if not state.scores_kept:
        if kernel is None:
            raise ValueError("this cache does not keep its scores (no margin-based removal): pass the kernel")
        state.refresh_scores(kernel)
    n = int(state.meta[0])
    idx = np.flatnonzero(state.alive[:n])
    out = np.empty(idx.size)
    for j, i in enumerate(idx):
        out[j] = B._mu.py_func(i, state.mode, state.n_outputs, state.A, state.F, state.kd, state.lab)
    return out


def as_patterns(S: Any) -> Any:
    """Patterns as the kernel matrices take them: CSR float64 when sparse, else C-contiguous float64."""
    return sp.csr_matrix(S, dtype=np.float64) if sp.issparse(S) else np.ascontiguousarray(S, dtype=np.float64)


def squared_norms(X: Any) -> np.ndarray:
    """``||x||^2`` of each row of ``X`` (dense or CSR), float64."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X)


def key_into(table: np.ndarray | None, n_keys: int, cols: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, int]:
    """``out`` = the keys of the int32 columns ``cols`` in the key ``table`` holding ``n_keys`` (None: a new one),
    a column not in it numbered next (:func:`~distlearn.learners._budget.key_columns`); the table (doubled while
    it would be more than half full) and the new count."""
    if table is None:
        table = np.full(1024, -1, dtype=np.int64)
    while True:
        n = int(B.key_columns(table, n_keys, cols, out))
        if n >= 0:
            return table, n
        n_keys = -1 - n  # the keys given before the table filled stay in it
        table = B.rekey_table(table, np.full(2 * table.shape[0], -1, dtype=np.int64))


#: :func:`dense_keys` indexes a column map by column while ``d`` is at most this many times the nonzeros, and keys
#: the columns past it: filling a map costs 0.3-1.3 ns a column, keying 30-130 ns a nonzero.  One text row scored
#: against 1,155 patterns (87,000 nonzeros): 47,236 columns 1.2 ms either way; 2**20 columns 1.7 ms by column,
#: 3.2 ms keyed; 2**24 columns 51 ms by column, 2.7 ms keyed.
CSR_KEYS_PER_NONZERO = 32


def dense_keys(d: int, *cols: np.ndarray) -> tuple[list[np.ndarray], int]:
    """The int32 columns of several CSR matrices of ``d`` columns as the keys a column map is indexed by (one array
    per input) and the map's width: the columns themselves while ``d`` is at most :data:`CSR_KEYS_PER_NONZERO`
    times their nonzeros, else numbered in the order met (:func:`key_into`), the map then as wide as the columns
    met.  A key only names a column, so sums walked in each row's order are the same bits either way."""
    if d <= CSR_KEYS_PER_NONZERO * sum(c.size for c in cols):
        return list(cols), int(d)
    table, n, out = None, 0, []
    for c in cols:
        k = np.empty(c.shape[0], dtype=np.int32)
        table, n = key_into(table, n, c, k)
        out.append(k)
    return out, max(1, n)


def _dots(Xb: Any, S: Any) -> np.ndarray:
    """``Xb @ S.T`` as a dense float64 array.  Both CSR: :func:`~distlearn.learners._budget.csr_dots`, their
    structure checked in full first (:func:`_csr_rows`), 3-4x scipy's sparse product on text, whose
    result is a sparse matrix almost every entry of which is stored (``benchmarks/README.md``)."""
    if sp.issparse(Xb) and sp.issparse(S):
        if Xb.shape[1] != S.shape[1]:
            raise ValueError(f"rows of {Xb.shape[1]} features against patterns of {S.shape[1]}")
        xp, xj, xv = _csr_rows(Xb)
        sp_, sj, sv = _csr_rows(S)
        (xk, sk), width = dense_keys(int(S.shape[1]), xj, sj)  # by column, or as wide as the columns met
        return B.csr_dots(xp, xk, xv, sp_, sk, sv, width, np.empty((Xb.shape[0], S.shape[0])))
    G = Xb @ S.T
    return np.ascontiguousarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)


def kernel_matrix(kernel: Kernel, Xb: Any, S: Any, sqS: np.ndarray | None = None) -> np.ndarray:
    """``k(x_r, S_i)`` for the rows of ``Xb`` and ``S`` (each dense or CSR), through one matrix product.

    RBF uses ``||x||^2 + ||s||^2 - 2 x.s`` (clipped at 0), as scikit-learn's
    SVC does and as the engine's own blocked rows do (:func:`distlearn.learners._budget._block_rows`);
    BLAS sums the products in its own order, so the two agree to rounding, not bit for bit.
    """
    G = _dots(Xb, S)
    kp = kernel.record()
    if kp.code == B.RBF_KERNEL:
        xsq = squared_norms(Xb)
        sqS = squared_norms(S) if sqS is None else sqS
        B.kernel_finish(kp, G, np.asarray(xsq, dtype=np.float64), np.asarray(sqS, dtype=np.float64))
    elif kp.code == B.POLY_KERNEL:
        B.kernel_finish(kp, G, np.zeros(G.shape[0]), np.zeros(G.shape[1]))
    return G


#: Dense rows of at most this many features get their scores from the engine's blocked kernel rows and
#: gathered sums (:func:`~distlearn.learners._budget.kernel_scores`), wider ones (and CSR rows) from BLAS
#: kernel matrices.  LETTER (16 features), 8,163 rows against a 5,183-pattern expansion with 26 columns:
#: 0.21-0.25 CPU s against BLAS's 0.35-0.49 (its kernel matrix, 340 MB, is written, finished and read back
#: from memory); at 784 features BLAS's product is the faster (``benchmarks/README.md``, kernel rows).
FUSED_FEATURES = 64


def kernel_decision(kernel: Kernel, S: Any, coef: np.ndarray, X: Any) -> np.ndarray:
    """Scores ``sum_i coef[i] k(S[i], x)`` of rows ``X`` (dense or CSR; ``S`` too): dense rows and patterns of at most
    :data:`FUSED_FEATURES` features through the engine's blocked rows and sums
    (:func:`~distlearn.learners._budget.kernel_scores`); otherwise blocks of rows, each one kernel matrix
    against the support (BLAS, at most ~4 Mi entries) times the coefficients."""
    n = X.shape[0]
    out = np.zeros((n, coef.shape[1]))
    if S.shape[0] == 0 or n == 0:
        return out
    S = as_patterns(S)
    coef = np.ascontiguousarray(coef, dtype=np.float64)
    sqS = squared_norms(S)
    if not sp.issparse(X) and not sp.issparse(S) and X.shape[1] <= FUSED_FEATURES:
        return B.kernel_scores(np.ascontiguousarray(X, dtype=np.float64), S, sqS, coef, kernel.record(), out)
    block = max(1, (1 << 22) // S.shape[0])
    for lo in range(0, n, block):
        Xb = X[lo:lo + block]
        Xb = Xb.astype(np.float64) if sp.issparse(Xb) else np.ascontiguousarray(Xb, dtype=np.float64)
        out[lo:lo + block] = kernel_matrix(kernel, Xb, S, sqS) @ coef
    return out
