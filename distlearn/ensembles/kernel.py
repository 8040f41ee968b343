"""The kernel Online Bayes Point Machine: N kernel learners on one shared pool of patterns.

The state (:class:`KernelEnsembleState`) and the chunk driver
(:func:`learn_kernel_ensemble_chunk`) over the compiled engine of
:mod:`distlearn.ensembles._budget`.  Member ``j`` is shown example ``t`` when
its Bernoulli(tau) draw ``b_{j,t}`` (:func:`distlearn.rng.obpm_mask`, the linear
OBPM's draws) is 1; it learns exactly as the single kernel learner
(:func:`distlearn.learners.kernel.learn_budget_chunk`) run on those examples,
with its own budget; the members share the patterns and the kernel rows.  The
Bayes point is one kernel expansion over the pool: the mean of the members'
coefficients (:meth:`KernelEnsembleState.bayes_point`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import rng
from .._validation import check_allocation
from ..learners import _budget as B
from ..learners.kernel import (
    DENSE_CACHE_HINT,
    MIRROR_SPARSITY,
    MirrorPool,
    RANDOM_REMOVAL_STREAM,
    REMOVALS,
    Kernel,
    budget_code,
    _NO_ROWS,
    clear_csr_rows,
    csr_rows_record,
    _csr_rows,
    compacted_pieces,
    kernel_decision,
    keeps_scores,
    raise_kernel_non_finite,
    reads_csr,
    resolve_removal,
    sparse_chunk,
    stack_patterns,
    step_rule,
)
from ..learners.linear import Rule
from ._budget import EnsembleCache, KernelEnsembleLog, Members, Pool, learn_kernel_ensemble_block
from ._kernels import draw_mask

__all__ = ["KernelEnsembleState", "KernelEnsembleLog", "concat_kernel_states", "init_kernel_ensemble",
           "learn_kernel_ensemble_chunk", "member_seed"]

MEMBER_SEED_STREAM = rng.stream_id("kernel-obpm-member")


def member_seed(seed: int, j: int) -> int:
    """The seed of member ``j``'s random removals: a single kernel learner with
    ``random_state=member_seed(seed, j)`` draws the same removals."""
    return int(rng.hash64(seed, MEMBER_SEED_STREAM, j)) & 0x7FFFFFFFFFFFFFFF


@dataclass
class KernelEnsembleState(MirrorPool):
    """The pool (``P*``), the members' slots (``(N, slots)`` arrays) and the retired patterns."""

    n_features: int
    n_members: int
    n_outputs: int
    native: bool
    keep_retired: bool = False
    PS: np.ndarray = field(default=None)     # type: ignore[assignment]  (pool, n_features)
    psq: np.ndarray = field(default=None)    # type: ignore[assignment]
    pkd: np.ndarray = field(default=None)    # type: ignore[assignment]
    plab: np.ndarray = field(default=None)   # type: ignore[assignment]
    pkey: np.ndarray = field(default=None)   # type: ignore[assignment]  ensemble round of insertion
    pref: np.ndarray = field(default=None)   # type: ignore[assignment]  members holding the pattern
    palive: np.ndarray = field(default=None)  # type: ignore[assignment]
    pmeta: np.ndarray = field(default=None)  # type: ignore[assignment]  [n_pool_slots, n_pool_alive, t_pool]
    Abar: np.ndarray = field(default=None)   # type: ignore[assignment]  (pool, K) summed coefficients
    #: Each pool slot's training row (its global index; -1 unknown: a checkpoint from before) and the first live
    #: slot holding the same row (``pcanon``, itself if none: the engine computes kernel values for those only
    #: and copies them to the others -- a row is pooled once per member pass that inserts it)
    ptid: np.ndarray = field(default=None)   # type: ignore[assignment]
    pcanon: np.ndarray = field(default=None)  # type: ignore[assignment]
    pidx: np.ndarray = field(default=None)   # type: ignore[assignment]  (N, slots) pool index
    A: np.ndarray = field(default=None)      # type: ignore[assignment]  (N, slots, K)
    F: np.ndarray = field(default=None)      # type: ignore[assignment]  (N, slots, K)
    kdm: np.ndarray = field(default=None)    # type: ignore[assignment]
    labm: np.ndarray = field(default=None)   # type: ignore[assignment]
    born: np.ndarray = field(default=None)   # type: ignore[assignment]  member round counter
    died: np.ndarray = field(default=None)   # type: ignore[assignment]
    gborn: np.ndarray = field(default=None)  # type: ignore[assignment]  ensemble round counter
    gdied: np.ndarray = field(default=None)  # type: ignore[assignment]
    alive: np.ndarray = field(default=None)  # type: ignore[assignment]
    mmeta: np.ndarray = field(default=None)  # type: ignore[assignment]  (N, 3) [n_slots, n_alive, t_j]
    retired: list = field(default_factory=list)  # (S, A, key, life, lab, member) of removed member slots
    n_inserted: int = 0
    n_removed: int = 0
    #: Whether the members' scores ``F`` are current (kept only under margin-based removal, as
    #: :class:`~distlearn.learners.kernel.BudgetState` keeps them).
    scores_kept: bool = True
    _MIRROR_NAME = "the kernel ensemble's sparse mirror"
    #: The pool's sparse mirror (:class:`~distlearn.learners._budget.Mirror`: each pool pattern's nonzeros, a
    #: segment of ``Zi``/``Zv`` each; ``Zm[1] == 0``: off), turned on by a chunk of sparse rows
    #: (:meth:`mirror`): kernel rows cost each pattern's nonzeros, the same bits.  On an empty pool it is a
    #: *sparse store* (:attr:`store`): ``PS`` has no columns and the mirror alone holds the patterns, so a text
    #: pattern costs its nonzeros in memory too, not ``d``; a checkpoint then keeps them as CSR.  Otherwise the
    #: pool keeps its dense rows and the mirror is derived from them (not part of a checkpoint).
    Zi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    Zv: np.ndarray = field(default_factory=lambda: np.zeros(0))
    Zn: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    Zs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    Zm: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int64))
    Zk: np.ndarray | None = None
    Zkt: np.ndarray | None = None
    Zkn: int = 0

    _ARRAYS = ("PS", "psq", "pkd", "plab", "pkey", "pref", "palive", "pmeta", "Abar", "pidx", "A", "F", "kdm", "labm",
               "born", "died", "gborn", "gdied", "alive", "mmeta")
    _RETIRED = ("retired_S", "retired_A", "retired_key", "retired_life", "retired_lab", "retired_member")

    def recanon(self) -> None:
        """``pcanon`` from ``ptid``: each live slot's first live slot of the same row (itself when it is the first
        or its row is unknown)."""
        n = int(self.pmeta[0])
        self.pcanon = np.arange(self.PS.shape[0], dtype=np.int64)
        live = np.flatnonzero(self.palive[:n] & (self.ptid[:n] >= 0))
        if live.size:
            _, first, inv = np.unique(self.ptid[live], return_index=True, return_inverse=True)
            self.pcanon[live] = live[first[inv]]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as named arrays (a checkpoint's part, :mod:`distlearn.distributed.checkpoint`); the
        retired slots as one set.  A sparse store's pool patterns and retired patterns are CSR triples
        (``pool_indptr``/``pool_indices``/``pool_data``, ``retired_indptr``/...), never ``d``-wide rows.
        :meth:`from_arrays` builds the same state back."""
        out = {name: getattr(self, name) for name in self._ARRAYS}
        out["ptid"] = self.ptid
        store = self.store
        out["info"] = np.array([self.n_features, self.n_members, self.n_outputs, self.native, self.keep_retired,
                                self.n_inserted, self.n_removed, self.scores_kept, store], dtype=np.int64)
        width = 0 if store else self.n_features
        empty = (np.zeros((0, width)), np.zeros((0, self.n_outputs)), np.zeros(0, np.int64),
                 np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        for i, name in enumerate(self._RETIRED[1:], start=1):
            out[name] = np.concatenate([empty[i]] + [np.asarray(r[i]).astype(empty[i].dtype, copy=False)
                                                     for r in self.retired])
        if not store:
            out["retired_S"] = np.concatenate([empty[0]] + [np.asarray(r[0].toarray() if sp.issparse(r[0]) else r[0])
                                                            for r in self.retired])
            return out
        R = sum(r[0].shape[0] for r in self.retired)
        out["retired_S"] = np.zeros((R, 0))
        n = int(self.pmeta[0])
        retired = stack_patterns([r[0] for r in self.retired]) if self.retired else sp.csr_matrix((0, self.n_features))
        for prefix, M in (("pool", self._pool_rows(np.arange(n))), ("retired", sp.csr_matrix(retired))):
            out[f"{prefix}_indptr"] = M.indptr.astype(np.int64)
            out[f"{prefix}_indices"] = M.indices.astype(np.int32)
            out[f"{prefix}_data"] = M.data.astype(np.float64)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> KernelEnsembleState:
        info = [int(v) for v in arrays["info"]]
        d, N, K, native, keep, ins, rem, kept = info[:8]
        store = len(info) > 8 and bool(info[8])  # a checkpoint before the sparse store has 8
        st = cls(d, N, K, bool(native), bool(keep), **{name: np.array(arrays[name]) for name in cls._ARRAYS})
        # a checkpoint from before the rows were recorded: every row unknown (kernel values computed per slot)
        st.ptid = np.array(arrays["ptid"]) if "ptid" in arrays else np.full(st.PS.shape[0], -1, dtype=np.int64)
        retired = tuple(np.array(arrays[name]) for name in cls._RETIRED)
        n = int(st.pmeta[0])
        if store:
            pool = _stored_csr(arrays, "pool", n, d)
            retired = (_stored_csr(arrays, "retired", retired[0].shape[0], d), *retired[1:])
            st._store_patterns(pool)
        st.retired = [retired] if retired[0].shape[0] else []
        st.n_inserted, st.n_removed, st.scores_kept = ins, rem, bool(kept)
        _check_state(st)
        st.recanon()
        return st

    @property
    def store(self) -> bool:
        """Whether the pool is a sparse store: ``PS`` has no columns and the mirror holds every pattern."""
        return self.PS.shape[1] == 0 and self.n_features > 0

    def _store_patterns(self, P: sp.csr_matrix) -> None:
        """Make the pool a sparse store holding the patterns ``P`` (CSR, one row per pool slot below
        ``pmeta[0]``, canonical: columns ascending, no stored zeros) in slots ``0 ..``."""
        cap = max(self.PS.shape[0], P.shape[0])
        self.PS = np.zeros((cap, 0))
        cnt = np.diff(P.indptr).astype(np.int64)
        self.Zi, self.Zv = P.indices.astype(np.int32), P.data.astype(np.float64)
        self.Zn = np.full(cap, -1, dtype=np.int64)
        self.Zs = np.zeros(cap, dtype=np.int64)
        self.Zn[: P.shape[0]], self.Zs[: P.shape[0]] = cnt, P.indptr[:-1]
        self.Zm = np.array([P.nnz, self.n_features], dtype=np.int64)
        self.unkey()

    def copy(self) -> KernelEnsembleState:
        """A deep copy (a learner-parallel task never modifies its input state)."""
        return copy.deepcopy(self)

    def refresh_scores(self, kernel: Kernel) -> None:
        """Recompute every member's ``F`` from its live slots and mark it kept."""
        for j in range(self.n_members):
            n = int(self.mmeta[j, 0])
            live = np.flatnonzero(self.alive[j, :n])
            if live.size:
                S = self._pool_rows(self.pidx[j, live])
                self.F[j, live] = kernel_decision(kernel, S, self.A[j, live], S).reshape(live.size, -1)
        self.scores_kept = True

    @property
    def mode(self) -> int:
        if self.n_outputs == 1:
            return B.MODE_BINARY
        return B.MODE_NATIVE if self.native else B.MODE_OVR

    @property
    def t(self) -> int:
        """Rounds the ensemble has seen."""
        return int(self.pmeta[2])

    @property
    def pool_size(self) -> int:
        return int(self.pmeta[1])

    @property
    def member_rounds(self) -> np.ndarray:
        return self.mmeta[:, 2].copy()

    def _grow(self, pool_need: int, member_need: int, keep_scores: bool = True) -> None:
        """Room for ``pool_need`` pool and ``member_need`` member slots.  ``keep_scores=False``: the next rounds
        do not keep the scores ``F`` (the engine writes them only under margin removal), so a grown ``F`` is not
        copied: its pages stay untouched zeros, and the state marks it stale."""
        def g(a: np.ndarray, n: int, axis: int, fill: Any = 0, copy: bool = True) -> np.ndarray:
            if a.shape[axis] >= n:
                return a
            n = max(n, 2 * a.shape[axis], 64)
            shape = list(a.shape)
            shape[axis] = n
            # zeros: pages the engine never reaches are never touched (the members' (N, slots, K) arrays are
            # hundreds of MB at 100 members, mostly capacity)
            out = np.zeros(shape, dtype=a.dtype) if fill == 0 else np.full(shape, fill, dtype=a.dtype)
            if copy:
                out[tuple(slice(0, s) for s in a.shape)] = a
            return out

        if pool_need > self.PS.shape[0]:
            check_allocation("the kernel ensemble's pool of patterns", (max(pool_need, 2 * self.PS.shape[0], 64),
                                                                          self.PS.shape[1]),
                             self.PS.dtype.itemsize, DENSE_CACHE_HINT)
        self.PS = g(self.PS, pool_need, 0)
        self.psq, self.pkd, self.plab, self.pkey, self.pref, self.pcanon = (
            g(a, pool_need, 0) for a in (self.psq, self.pkd, self.plab, self.pkey, self.pref, self.pcanon))
        self.ptid = g(self.ptid, pool_need, 0, -1)
        self.palive = g(self.palive, pool_need, 0, False)
        self.Abar = g(self.Abar, pool_need, 0)
        if self.Zm[1]:
            self.Zn, self.Zs = g(self.Zn, self.PS.shape[0], 0, -1), g(self.Zs, self.PS.shape[0], 0)
        self.pidx, self.A, self.kdm, self.labm, self.born, self.gborn = (
            g(a, member_need, 1) for a in (self.pidx, self.A, self.kdm, self.labm, self.born, self.gborn))
        self.F = g(self.F, member_need, 1, copy=keep_scores)
        if not keep_scores:
            self.scores_kept = False
        self.died, self.gdied = g(self.died, member_need, 1, -1), g(self.gdied, member_need, 1, -1)
        self.alive = g(self.alive, member_need, 1, False)

    def compact(self, full: bool = False) -> None:
        """Drop dead member slots (retired when ``keep_retired``) and dead pool patterns (with the mirror on, once
        half the pool is dead, or ``full``: every dead pattern); orders are kept."""
        N = self.n_members
        for j in range(N):
            n = int(self.mmeta[j, 0])
            live = self.alive[j, :n]
            if live.all():
                continue
            dead = np.flatnonzero(~live)
            if self.keep_retired:
                p = self.pidx[j, dead]
                self.retired.append((self._pool_rows(p), self.A[j, dead].copy(), self.pkey[p].copy(),
                                     np.stack([self.gborn[j, dead], self.gdied[j, dead]], axis=1),
                                     self.plab[p].copy(), np.full(dead.size, j)))
            keep = np.flatnonzero(live)
            k = keep.size
            for a in (self.pidx, self.A, self.F, self.kdm, self.labm, self.born, self.died, self.gborn, self.gdied,
                      self.alive):
                a[j, :k] = a[j, keep]
            self.alive[j, k:n] = False
            self.mmeta[j, 0] = k
        n = int(self.pmeta[0])
        live = self.palive[:n]
        if live.all() or (self.Zm[1] and not full and 2 * int(live.sum()) > n):
            # with the mirror on (text) the pool's dense rows move only once half of them are dead: moving d-wide
            # rows after every piece was most of a fit (1,500 RCV1-like rows: 90 of 136 s).  Dead slots are
            # skipped by every sum, and the live ones keep their order, so the bits are the same either way
            return
        keep = np.flatnonzero(live)
        remap = np.full(n, -1, dtype=np.int64)
        remap[keep] = np.arange(keep.size)
        first = int(np.argmin(live))  # the slots before the first dead one stay where they are
        for a in (self.PS, self.psq, self.pkd, self.plab, self.pkey, self.pref, self.palive, self.Abar, self.ptid,
                  self.pcanon):
            a[first: keep.size] = a[keep[first:]]
        self.pcanon[: keep.size] = remap[self.pcanon[: keep.size]]  # a live slot's canonical slot is live
        self.palive[keep.size:n] = False
        if self.Zm[1]:  # the kept patterns' segments, in order, at the pool's front
            at, cnt = self._segments(keep)
            self.Zi[: at.size], self.Zv[: at.size] = self.Zi[at], self.Zv[at]
            if self.Zk is not None:
                self.Zk[: at.size] = self.Zk[at]
            self.Zn[: keep.size], self.Zs[: keep.size] = self.Zn[keep], np.cumsum(cnt) - cnt
            self.Zn[keep.size:] = -1
            self.Zm[0] = at.size
        self.pmeta[0] = keep.size
        for j in range(N):
            k = int(self.mmeta[j, 0])
            self.pidx[j, :k] = remap[self.pidx[j, :k]]

    def mirror(self, store: bool = False) -> None:
        """Turn the pool's sparse mirror on (rows with at most ``1 / MIRROR_SPARSITY`` of their columns nonzero
        arrived): the live patterns' nonzeros are gathered from ``PS``; a pattern with more than
        ``d / MIRROR_SPARSITY`` of them, or one the mirror has no room for, is read from ``PS`` (the same bits).
        ``store`` (an empty pool only): the mirror alone holds the patterns, ``PS`` of no columns (:attr:`store`);
        every row a piece may pool then has its room reserved first."""
        if store and int(self.pmeta[0]) == 0 and not self.retired and not self.store:
            self._store_patterns(sp.csr_matrix((0, self.n_features)))
            return
        if self.Zm[1]:
            return
        self.Zm[:] = (0, max(1, self.n_features // MIRROR_SPARSITY))
        self.Zn = np.full(self.PS.shape[0], -1, dtype=np.int64)
        self.Zs = np.zeros(self.PS.shape[0], dtype=np.int64)
        n = int(self.pmeta[0])
        self.reserve(int(np.count_nonzero(self.PS[:n])) if n else 0)
        B.fill_mirror(self.PS, n, self._mirror())

    def densify(self) -> None:
        """A sparse store back to dense rows (a chunk of dense rows arrived); the mirror stays on, so kernel
        rows still cost the sparse patterns' nonzeros."""
        if not self.store:
            return
        cap, d = self.PS.shape[0], self.n_features
        check_allocation("the kernel ensemble's pool of patterns", (cap, d), 8, DENSE_CACHE_HINT)
        n = int(self.pmeta[0])
        PS = np.zeros((cap, d))
        PS[:n] = self._pool_rows(np.arange(n)).toarray()
        self.PS = PS
        self.Zm[1] = max(1, d // MIRROR_SPARSITY)  # the retired patterns stay CSR, as a mirrored pool keeps them
        self.unkey()

    def _pool_rows(self, p: np.ndarray) -> Any:
        """Copies of the pool's patterns ``p``: dense rows, or with the mirror on a CSR matrix from their mirrored
        nonzeros (a text pattern costs its nonzeros, not d: the retired patterns of every member add up)."""
        if not self.Zm[1]:
            return self.PS[p].copy()
        at, cnt = self._segments(p)
        out = sp.csr_matrix((self.Zv[at], self.Zi[at], np.concatenate([[0], np.cumsum(cnt)])),
                            shape=(p.size, self.n_features))
        bare = np.flatnonzero(self.Zn[p] < 0)  # too many nonzeros for the mirror: read from PS
        if bare.size and self.store:
            raise RuntimeError(f"the kernel ensemble's sparse store has no pattern in pool slots {p[bare][:5]}")
        if bare.size:
            out = out.tolil()
            out[bare] = self.PS[p[bare]]
            out = out.tocsr()
        return out

    def record(self) -> EnsembleCache:
        """The state as the engine takes it (:class:`~distlearn.ensembles._budget.EnsembleCache`; the arrays,
        not copies)."""
        return EnsembleCache(
            Pool(self.PS, self.psq, self.pkd, self.plab, self.pkey, self.pref, self.palive, self.pmeta, self.Abar,
                 self._mirror(), self.ptid, self.pcanon),
            Members(self.pidx, self.A, self.F, self.kdm, self.labm, self.born, self.died, self.gborn, self.gdied,
                    self.alive, self.mmeta))

    def member_support(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Member ``j``'s live patterns, coefficients and classes, in its insertion order."""
        n = int(self.mmeta[j, 0])
        s = np.flatnonzero(self.alive[j, :n])
        p = self.pidx[j, s]
        return self._pool_rows(p), self.A[j, s].copy(), self.plab[p].copy()

    def bayes_point(self, average: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Bayes point ``(1/N) sum_j f_j`` as one kernel expansion: patterns, coefficients, classes.

        ``average``: each member's hypotheses averaged over the ensemble's
        rounds ``0 .. n`` (``n`` its rounds, ``h_0 = 0`` counts), i.e. a member slot's
        coefficient weighted by the rounds it was live over ``n + 1``; needs
        ``keep_retired``.  Patterns come in the order they entered the pool.
        """
        if average and not self.keep_retired:
            raise ValueError("the average needs the retired patterns: build the state with keep_retired=True")
        N, K, n_rounds = self.n_members, self.n_outputs, self.t
        if not average:
            return self._last_point()
        # (row, A, key, life, lab, member) of member slots; ``row`` where the pattern is: >= 0 a pool slot,
        # -1 - i row i of the retired patterns (stacked), so only the patterns returned are gathered (each
        # member slot's own copy of a d-wide row was most of the time and memory on text)
        parts = []
        for j in range(N):
            n = int(self.mmeta[j, 0])
            s = np.arange(n) if average else np.flatnonzero(self.alive[j, :n])  # dead, uncompacted slots count
            p = self.pidx[j, s]
            died = np.where(self.alive[j, s], n_rounds, self.gdied[j, s])
            parts.append((p, self.A[j, s], self.pkey[p], np.stack([self.gborn[j, s], died], axis=1),
                          self.plab[p], np.full(s.size, j)))
        retired_rows = [r[0] for r in self.retired] if average else []
        at = 0
        for r in (self.retired if average else []):
            parts.append((-1 - (at + np.arange(r[0].shape[0])), *r[1:]))
            at += r[0].shape[0]
        if not parts:
            return np.zeros((0, self.n_features)), np.zeros((0, K)), np.zeros(0, dtype=np.int64)
        row, A, key, life, lab, member = (np.concatenate([q[i] for q in parts]) for i in range(6))
        if average:
            A = A * ((life[:, 1] - life[:, 0]).astype(np.float64) / (n_rounds + 1))[:, None]
        # each (pattern, member) once; summed in (pattern, member) order, so the same bits whatever the chunking
        o = np.lexsort((member, key))
        row, A, key, lab = row[o], A[o], key[o], lab[o]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        coef = np.zeros((uniq.size, K))
        np.add.at(coef, inv, A)
        coef /= N
        keep = np.flatnonzero(np.any(coef != 0.0, axis=1))
        return self._rows(row[first[keep]], retired_rows), coef[keep], lab[first[keep]]

    def _rows(self, where: np.ndarray, retired: list[np.ndarray] | None = None) -> Any:
        """The patterns at ``where`` (a pool slot, or ``-1 - i`` row ``i`` of the stacked ``retired`` rows), in
        that order: CSR when the pool's mirror is on (sparse rows: the support as SVC keeps it, from the mirror's
        nonzeros, never a d-wide block), else dense."""
        retired = retired or []
        bounds = np.cumsum([0] + [r.shape[0] for r in retired])

        def dense(w: np.ndarray) -> np.ndarray:
            out = np.zeros((w.size, self.n_features))
            pool = w >= 0
            out[pool] = self.PS[w[pool]]
            q = -1 - w  # a retired row's place in the stack, then by group (a compaction's member slots)
            g = np.searchsorted(bounds, q, side="right") - 1
            for k in np.unique(g[~pool]):
                at = np.flatnonzero(~pool & (g == k))
                out[at] = retired[k][q[at] - bounds[k]]
            return out

        if not self.Zm[1]:
            return dense(where)
        pool = where >= 0
        out = self._pool_rows(where[pool])
        if pool.all():
            return out
        stacked = sp.vstack([sp.csr_matrix(r) for r in retired], format="csr")[-1 - where[~pool]]
        perm = np.empty(where.size, dtype=np.int64)  # row i of the result: its place in [pool rows; retired rows]
        perm[pool] = np.arange(out.shape[0])
        perm[~pool] = out.shape[0] + np.arange(stacked.shape[0])
        return sp.vstack([out, stacked], format="csr")[perm]

    def _last_point(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`bayes_point` of the last hypotheses, summed in the pool: each live pool pattern's coefficients
        added over the members holding it in member order (the (pattern, member) order of the general path,
        so the same bits), patterns in the order they entered the pool (``pkey``)."""
        N, K = self.n_members, self.n_outputs
        n = int(self.pmeta[0])
        coef = np.zeros((n, K))
        for j in range(N):
            m = int(self.mmeta[j, 0])
            s = np.flatnonzero(self.alive[j, :m])
            coef[self.pidx[j, s]] += self.A[j, s]  # a member holds a pattern once: no repeated index
        coef /= N
        order = np.flatnonzero(self.palive[:n])
        order = order[np.argsort(self.pkey[order], kind="stable")]
        keep = order[np.any(coef[order] != 0.0, axis=1)]
        return self._rows(keep), coef[keep], self.plab[keep].copy()


def _stored_csr(arrays: dict[str, np.ndarray], prefix: str, rows: int, d: int) -> sp.csr_matrix:
    """A checkpoint's CSR triple ``prefix_indptr/_indices/_data`` of ``rows`` patterns of ``d`` features, its
    structure checked in full (:func:`~distlearn.learners.kernel._csr_rows`) and its values finite: an index the
    engine cannot use is refused here (a ValueError the checkpoint reader names), never read."""
    ptr, idx, val = (np.asarray(arrays[f"{prefix}_{k}"]) for k in ("indptr", "indices", "data"))
    if ptr.ndim != 1 or ptr.shape[0] != rows + 1 or idx.ndim != 1 or val.ndim != 1 or idx.shape != val.shape:
        raise ValueError(f"{prefix}_indptr/_indices/_data do not hold {rows} CSR rows")
    P = sp.csr_matrix((val.astype(np.float64), idx.astype(np.int64), ptr.astype(np.int64)), shape=(rows, d))
    ptr, idx, val = _csr_rows(P)
    if not np.all(np.isfinite(val)):
        raise ValueError(f"{prefix}_data holds a non-finite value")
    P = sp.csr_matrix((val, idx, ptr), shape=(rows, d))
    P.eliminate_zeros()
    return P


def _check_state(st: KernelEnsembleState) -> None:
    """The shapes and indices of a state built from arrays (a checkpoint), checked before the engine reads any:
    every member slot's pool index within the pool's slots, every class within the outputs, the counters
    within their arrays (a ValueError names the array)."""
    cap, N, K = st.PS.shape[0], st.n_members, st.n_outputs
    S = st.pidx.shape[1] if st.pidx.ndim == 2 else -1
    want = {"psq": (cap,), "pkd": (cap,), "ptid": (cap,), "plab": (cap,), "pkey": (cap,), "pref": (cap,), "palive": (cap,),
            "Abar": (cap, K), "pmeta": (3,), "mmeta": (N, 3), "pidx": (N, S), "A": (N, S, K), "F": (N, S, K),
            "kdm": (N, S), "labm": (N, S), "born": (N, S), "died": (N, S), "gborn": (N, S), "gdied": (N, S),
            "alive": (N, S)}
    for name, shape in want.items():
        if getattr(st, name).shape != shape:
            raise ValueError(f"{name} has shape {getattr(st, name).shape}, the state needs {shape}")
    if st.PS.ndim != 2 or st.PS.shape[1] not in (0, st.n_features) or min(N, K, st.n_features) < 1:
        raise ValueError(f"PS has shape {st.PS.shape} for {st.n_features} features")
    n = int(st.pmeta[0])
    if not (0 <= n <= cap and 0 <= int(st.pmeta[1]) <= n):
        raise ValueError(f"pmeta {st.pmeta.tolist()} outside the pool's {cap} slots")
    m = st.mmeta[:, 0]
    if np.any(m < 0) or np.any(m > S) or np.any(st.mmeta[:, 1] < 0) or np.any(st.mmeta[:, 1] > m):
        raise ValueError(f"mmeta outside the members' {S} slots")
    used = np.arange(S)[None, :] < m[:, None]
    if np.any(used & ((st.pidx < 0) | (st.pidx >= n))):
        raise ValueError(f"pidx points outside the pool's {n} patterns")
    top = max(K, 2)
    if np.any((st.plab[:n] < 0) | (st.plab[:n] >= top)) or np.any(used & ((st.labm < 0) | (st.labm >= top))):
        raise ValueError(f"a class index outside 0..{top - 1}")


def concat_kernel_states(parts: list[KernelEnsembleState]) -> KernelEnsembleState:
    """One state of the members of contiguous learner groups (members in group order), each group
    run on its own pool over the same rounds.

    The pools merge by a pattern's key (the ensemble round that inserted it: the same example in
    every group), in insertion order; each member's slots, coefficients and scores are copied, its
    pool indices remapped, so every member and the Bayes point (:meth:`KernelEnsembleState.bayes_point`)
    are the same bits as one group's.  ``Abar`` and ``pref`` add over the groups (``Abar``, which
    scores only the running Bayes point's online margin, may round differently).  Each part is
    compacted first (dead slots retired, as the next chunk would)."""
    first = parts[0]
    if len(parts) == 1:
        return first
    t = first.t
    if any(p.t != t or p.n_outputs != first.n_outputs or p.n_features != first.n_features for p in parts):
        raise ValueError("learner groups of one kernel OBPM must have run the same rounds and outputs")
    store = all(p.store for p in parts)
    for p in parts:
        p.compact(full=True)  # the merged pool takes every slot below pmeta[0] as live
        if not store:
            p.densify()  # groups that saw the same rows agree; a mixed set merges dense
    N = sum(p.n_members for p in parts)
    K, d = first.n_outputs, first.n_features
    sizes = [int(p.pmeta[0]) for p in parts]
    keys = np.concatenate([p.pkey[:n] for p, n in zip(parts, sizes)])
    uniq, at, inv = np.unique(keys, return_index=True, return_inverse=True)
    U = uniq.size
    cap = max(1, U)
    st = KernelEnsembleState(d, N, K, first.native, first.keep_retired)
    pool = lambda name: np.concatenate([getattr(p, name)[:n] for p, n in zip(parts, sizes)])  # noqa: E731
    if store:  # each distinct pattern's nonzeros once, from the group that has it first
        st.PS = np.zeros((cap, 0))
        st._store_patterns(stack_patterns([p._pool_rows(np.arange(n)) for p, n in zip(parts, sizes)])[at])
    else:
        st.PS = np.zeros((cap, d))
        st.PS[:U] = pool("PS")[at]
    st.psq, st.pkd, st.plab, st.pkey = (np.zeros(cap, dtype=getattr(first, a).dtype) for a in ("psq", "pkd", "plab", "pkey"))
    for a in ("psq", "pkd", "plab", "pkey"):
        getattr(st, a)[:U] = pool(a)[at]
    st.ptid = np.full(cap, -1, dtype=np.int64)
    st.ptid[:U] = pool("ptid")[at]
    st.pref = np.zeros(cap, dtype=np.int64)
    np.add.at(st.pref, inv, pool("pref"))
    st.Abar = np.zeros((cap, K))
    np.add.at(st.Abar, inv, pool("Abar"))
    st.palive = np.zeros(cap, dtype=bool)
    st.palive[:U] = True
    st.pmeta = np.array([U, U, t], dtype=np.int64)
    S = max(1, max(int(p.mmeta[:, 0].max(initial=0)) for p in parts))
    member_arrays = ("pidx", "A", "F", "kdm", "labm", "born", "died", "gborn", "gdied", "alive")
    for name in member_arrays:
        a = getattr(first, name)
        fill = -1 if name in ("died", "gdied") else 0
        setattr(st, name, np.full((N, S) + a.shape[2:], fill, dtype=a.dtype))
    st.mmeta = np.concatenate([p.mmeta for p in parts])
    j0, off = 0, 0
    for p, n in zip(parts, sizes):
        m = int(p.mmeta[:, 0].max(initial=0))
        rows = slice(j0, j0 + p.n_members)
        for name in member_arrays:
            getattr(st, name)[rows, :m] = getattr(p, name)[:, :m]
        st.pidx[rows, :m] = np.where(p.alive[:, :m], inv[off + np.minimum(p.pidx[:, :m], max(n - 1, 0))], 0)
        st.retired.extend((*r[:5], r[5] + j0) for r in p.retired)
        j0, off = j0 + p.n_members, off + n
    st.n_inserted = sum(p.n_inserted for p in parts)
    st.n_removed = sum(p.n_removed for p in parts)
    st.scores_kept = all(p.scores_kept for p in parts)
    if not store and any(p.Zm[1] for p in parts):  # the groups saw sparse rows: so does the merged pool
        st.mirror()
    st.recanon()
    return st


def _round_tids(tids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The global index of each round's row: how the pool knows a row it already holds (``pcanon``)."""
    return np.ascontiguousarray(tids[rows], dtype=np.int64)


def _mirror_for(state: KernelEnsembleState, X: Any, order: np.ndarray) -> None:
    """Before a chunk (:func:`~distlearn.learners.kernel.BudgetState`'s rule): sparse rows on average over the
    chunk (at most ``1 / MIRROR_SPARSITY`` of the columns nonzero) turn the pool's mirror on, a sparse store when
    the pool is empty; dense rows make a store dense again.  A dense chunk on a dense pool costs nothing."""
    if not order.shape[0] or not (sp.issparse(X) or state.store):
        return
    if sparse_chunk(X, order):
        state.mirror(store=True)
    else:
        state.densify()


def init_kernel_ensemble(n_features: int, n_members: int, n_outputs: int, *, native: bool = False,
                         keep_retired: bool = False, capacity: int = 64) -> KernelEnsembleState:
    """An empty pool and ``n_members`` empty caches with ``n_outputs`` columns (1 = binary)."""
    N, K, cap, d = int(n_members), int(n_outputs), max(1, capacity), int(n_features)
    st = KernelEnsembleState(d, N, K, bool(native) and K > 1, keep_retired)
    st.PS = np.zeros((cap, d))
    st.psq, st.pkd = np.zeros(cap), np.zeros(cap)
    st.plab, st.pkey, st.pref, st.pcanon = (np.zeros(cap, dtype=np.int64) for _ in range(4))
    st.ptid = np.full(cap, -1, dtype=np.int64)
    st.palive = np.zeros(cap, dtype=bool)
    st.pmeta = np.zeros(3, dtype=np.int64)
    st.Abar = np.zeros((cap, K))
    st.pidx = np.zeros((N, cap), dtype=np.int64)
    st.A, st.F = np.zeros((N, cap, K)), np.zeros((N, cap, K))
    st.kdm = np.zeros((N, cap))
    st.labm, st.born, st.gborn = (np.zeros((N, cap), dtype=np.int64) for _ in range(3))
    st.died, st.gdied = np.full((N, cap), -1, dtype=np.int64), np.full((N, cap), -1, dtype=np.int64)
    st.alive = np.zeros((N, cap), dtype=bool)
    st.mmeta = np.zeros((N, 3), dtype=np.int64)
    return st


#: Why the kernel OBPM refuses the Projectron's budget (the one wording, also KernelOBPM's).
NO_PROJECTRON = ("is not available to the kernel OBPM (each member would need its own inverse Gram matrix); "
                 "use None, 'variable' or a size")


def learn_kernel_ensemble_chunk(rule: Rule, kernel: Kernel, state: KernelEnsembleState, X: Any, y: np.ndarray,
                                tids: np.ndarray, *, seed: int, tau: float, epoch: int = 0,
                                order: np.ndarray | None = None, beta: float = 0.0, budget: None | str | int = None,
                                removal: str = "margin", first_member: int = 0) -> KernelEnsembleLog:
    """Run every round of a chunk (dense or CSR rows ``X``, class indices ``y``; ``tids[i]`` the
    global index of row ``i``, which keys the draws) in ``order``.

    ``first_member``: the state holds members ``first_member .. first_member + N - 1`` of a larger
    ensemble (a learner group, :mod:`distlearn.distributed.learner_parallel`): their draws and
    random removals are those members', so each is the same bits as in the whole ensemble."""
    bcode, n_budget = budget_code(budget)
    if bcode == B.BUDGET_PROJECTRON:
        raise ValueError(f"budget='projectron' {NO_PROJECTRON}")
    removal = resolve_removal(removal, kernel, bcode, pool=True)
    if bcode == B.BUDGET_FIXED and removal == "merge":
        raise ValueError("removal='merge' is not available to the kernel OBPM: its members share a pool of "
                         "training rows, and a merged pattern is not one; use 'margin', 'oldest' or 'random'")
    keep = keeps_scores(bcode, removal)
    if keep and not state.scores_kept:
        state.refresh_scores(kernel)
    N, K = state.n_members, state.n_outputs
    n = X.shape[0]
    order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    tids = np.asarray(tids, dtype=np.int64)
    m = order.shape[0]
    out = KernelEnsembleLog(np.zeros((m, K)), np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64),
                            np.zeros(m, dtype=np.int64))
    rec_rule, rec_kern = step_rule(rule, beta), kernel.record()
    spec = B.BudgetSpec(bcode, n_budget, REMOVALS[removal], 0.0)
    random = bcode == B.BUDGET_FIXED and REMOVALS[removal] == B.REMOVE_RANDOM
    seeds = [member_seed(seed, first_member + j) for j in range(N)] if random else []
    # (rounds, N): row i = round i; rng.obpm_mask's draws, compiled
    masks = np.zeros((m, N), dtype=bool)
    draw_mask(np.uint64(rng.epoch_key(seed, epoch)), tids[order], np.uint64(rng.mask_threshold(tau)), first_member,
              masks)
    # the pool's form first: an empty pool on sparse rows becomes a store before anything grows it (grown first, its
    # 64 dense rows were copied into as many as the chunk's rows: 1.2 s and 5 GB of address space at 2**20 columns)
    _mirror_for(state, X, order)
    if bcode == B.BUDGET_NONE:
        # nothing leaves a cache: room for the whole chunk at once (a member inserts at most once per round it
        # is shown), so its arrays are allocated once, not grown and copied piece by piece (at 100 members the
        # (N, slots, K) arrays are hundreds of MB; each copy faulted in fresh huge pages)
        state._grow(int(state.pmeta[0]) + m, int((state.mmeta[:, 0] + masks.sum(axis=0)).max(initial=0)), keep)
    # sparse rows on a mirrored pool: the engine reads them as CSR, a round costing its nonzeros (no piece of
    # d-wide rows is densified: 128 MiB each on text)
    csr = _csr_rows(X) if reads_csr(state, X) else None
    keys = state.key_columns(csr[1]) if csr is not None else None
    for lo, hi, rows, Xd, yd, od in compacted_pieces(X, y, order, densify=csr is None):
        mask = masks[lo:hi]
        if random:
            # member j's draw for its own round counter t_j, as the single learner keys them
            tj = state.mmeta[:, 2][None, :] + np.cumsum(mask, axis=0) - 1
            uniforms = np.stack([rng.uniform(seeds[j], RANDOM_REMOVAL_STREAM, np.maximum(tj[:, j], 0))
                                 for j in range(N)], axis=1)
        else:
            uniforms = np.zeros((0, 0))
        state.compact()
        state._grow(int(state.pmeta[0]) + (hi - lo), int((state.mmeta[:, 0] + mask.sum(axis=0)).max(initial=0)), keep)
        if state.Zm[1]:  # the piece's rows' nonzeros (a stored zero counts: an upper bound)
            state.reserve(int(np.diff(X.indptr)[rows].sum()) if sp.issparse(X) else int(np.count_nonzero(Xd[od])))
        R = _NO_ROWS
        if csr is not None:  # the rounds' rows by position; Xd the engine's block of them, densified
            R = csr_rows_record(csr, keys, rows, X.shape[1])
            Xd, yd, od = R.buf, y, np.arange(hi - lo, dtype=np.int64) % B.ROW_BLOCK
        try:
            bad = learn_kernel_ensemble_block(Xd, yd, od, mask, uniforms, rec_rule, rec_kern, spec, state.mode,
                                              state.record(), KernelEnsembleLog(*(a[lo:hi] for a in out)), R,
                                              _round_tids(tids, rows))
        finally:
            clear_csr_rows(R, not state.store)
        if bad <= -2:  # the room reserved above covers every row: a broken invariant, never a silent zero row
            raise RuntimeError(f"the kernel ensemble's sparse store had no room for row {int(rows[-2 - bad])}")
        state.scores_kept = keep
        done = (hi - lo) if bad < 0 else bad
        state.n_inserted += int(out.updates[lo:lo + done].sum())
        state.n_removed += int(out.removed[lo:lo + done].sum())
        if bad >= 0:
            raise_kernel_non_finite(X, int(rows[bad]), lo + bad)
    return out
