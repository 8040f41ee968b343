"""Learner-parallel OBPM: the job, its pure tasks and the driver.

The N learners are split into G contiguous groups.  Each group is a *task
chain* over the epoch's block order, one task per segment of
``segment_blocks`` blocks (:func:`obpm_segment`):
the task opens the store by path, reads its blocks on its worker and runs the
fused OBPM kernel for its learners only, so only the group's weights move
between tasks, and Dask keeps a chain on the worker that holds its state.

Blocks come through the worker's block cache (:func:`distlearn.stream.cached_block`):
the groups on one worker share one decode of each block, the decoded blocks
stay in the worker's memory for the next epochs (and jobs on the same store)
while they fit in ``DISTLEARN_BLOCK_CACHE_BYTES`` (default: a quarter of the
worker's ``memory_limit``), and the next block is decoded on a prefetch thread
while the kernel runs.  Set the variable in the workers' environment (a
LocalCluster's workers inherit the driver's).

Per segment the groups' margin sums are merged in a reduction tree (fan-in
``split_every``) into the ensemble's progressive (online) error.  When a
checkpoint directory is given, every task writes its group's state there
and the driver marks the cut complete once all groups and the error count
of the segment are done; a resumed job starts each chain from the last
complete cut.

The weights are bit-identical to in-process training (:class:`distlearn.OBPM`
without a scheduler), for any G, segment size, worker count, retries or
resume: each member's updates depend only on the stream and its own draws.

The kernel OBPM (:class:`distlearn.KernelOBPM`) runs the same job with a
:class:`KernelObpmJob`: each group's members share the group's own pool of
patterns (:mod:`distlearn.ensembles.kernel`), so a worker holds its members'
budgets, one block and one kernel row, never the data; at the end the groups'
pools merge into one (:func:`~distlearn.ensembles.kernel.concat_kernel_states`)
and every member, and so the Bayes point, is the same bits for any G.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .. import stream
from ..ensembles import EnsembleState, concat_states, init_ensemble, learn_ensemble_chunk
from ..ensembles import _kernels as EK
from ..ensembles.engine import member_pools
from ..ensembles.kernel import (
    KernelEnsembleState,
    concat_kernel_states,
    init_kernel_ensemble,
    learn_kernel_ensemble_chunk,
)
from ..learners import NonFiniteError, Rule
from ..learners.kernel import Kernel
from . import checkpoint as ckpt
from .executor import Executor


@dataclass(frozen=True, eq=False)
class ObpmJob:
    """Everything an OBPM group task needs, and nothing it can change.

    The stream is the in-process one: epoch ``e`` visits the blocks in the
    seeded order :meth:`block_order` and the rows of block ``b`` in the seeded
    order :meth:`row_order`; the example index ``t`` of a row (for the draws)
    is its row number in the store.  Blocks are grouped into *segments* of
    ``segment_blocks`` consecutive blocks of that order: one task per
    (group, epoch, segment), and a checkpoint at the end of each segment.
    """

    path: str
    token: str
    n_samples: int
    n_features: int
    n_blocks: int
    block_bounds: tuple[int, ...]
    classes: np.ndarray
    n_outputs: int
    rule: Rule
    seed: int
    tau: float | tuple[float, ...]  #: a tuple: tau groups of ``tau_block`` learners (OBPM(tau="auto"))
    fit_intercept: bool
    acc_mode: int
    dtype: str
    n_learners: int
    groups: tuple[tuple[int, int], ...]
    epochs: int
    shuffle: bool
    segment_blocks: int
    checkpoint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    tau_block: int | None = None
    pool_members: int | None = None  #: ``acc_mode == ACC_POOLED``: members per pool (engine.member_pools)

    @property
    def n_taus(self) -> int:
        """Tau groups; 0 for a single float tau (counters are then plain ints)."""
        return len(self.tau) if isinstance(self.tau, tuple) else 0

    def block_order(self, epoch: int) -> np.ndarray:
        return stream.block_order(self.seed, epoch, self.n_blocks, self.shuffle)

    @property
    def n_segments(self) -> int:
        return -(-self.n_blocks // self.segment_blocks)

    def segment(self, epoch: int, s: int) -> np.ndarray:
        return self.block_order(epoch)[s * self.segment_blocks : (s + 1) * self.segment_blocks]

    # -- what the learners are: the linear engine here, the kernel one in KernelObpmJob ----------------
    def initial_state(self, g: int) -> Any:
        """Group ``g``'s learners before the first example."""
        a, b = self.groups[g]
        pools = None
        if self.acc_mode == EK.ACC_POOLED:  # the group's whole pools (groups never cut one)
            p = member_pools(self.n_learners, self.tau_block, self.pool_members)[a:b]
            pools = int(p[-1] - p[0]) + 1
        return init_ensemble(self.n_features, b - a, self.n_outputs, dtype=self.dtype,
                             running_sum=self.acc_mode != EK.ACC_NONE, pools=pools)

    def learn(self, st: Any, ch: Any, epoch: int, first: int) -> tuple[np.ndarray, Any]:
        """Run group state ``st`` (learners ``first ..``) over chunk ``ch``: the group's summed
        margins ``(rows, [T,] K)`` in visiting order and its updates (an int, or per tau group)."""
        m, u = learn_ensemble_chunk(self.rule, st, ch.X, ch.y, ch.tids, seed=self.seed, tau=self.tau, epoch=epoch,
                                    order=ch.order, fit_intercept=self.fit_intercept, acc_mode=self.acc_mode,
                                    first_learner=first, tau_block=self.tau_block, pool_members=self.pool_members)
        return m, (u.sum(axis=0).astype(np.int64) if self.n_taus else int(u.sum()))

    def combine(self, parts: list[Any]) -> Any:
        """The whole ensemble's state from the groups' states, in group order (pooled running sums:
        the groups' pools in order; groups never cut a pool)."""
        return concat_states(parts)

    #: How a checkpointed group state is built from its arrays (:func:`~distlearn.distributed.checkpoint.read_part`;
    #: None: the linear :class:`EnsembleState`).
    restore = None

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a checkpoint to be resumed (``epochs`` may grow)."""
        return {
            "kind": "obpm", "store": self.path, "store_token": self.token, "n_samples": self.n_samples,
            "n_features": self.n_features, "n_blocks": self.n_blocks, "classes": np.asarray(self.classes).tolist(),
            "rule": self.rule.name, "rule_code": int(self.rule.code),
            "rule_params": [float(v) for v in np.asarray(self.rule.params)], "seed": int(self.seed),
            "tau": [float(t) for t in self.tau] if self.n_taus else float(self.tau),
            "tau_block": self.tau_block, "fit_intercept": bool(self.fit_intercept), "acc_mode": int(self.acc_mode),
            "dtype": self.dtype, "n_learners": int(self.n_learners), "groups": [list(g) for g in self.groups],
            "shuffle": bool(self.shuffle), "segment_blocks": int(self.segment_blocks),
            **({"pool_members": int(self.pool_members)} if self.acc_mode == EK.ACC_POOLED else {}),
        }


@dataclass(frozen=True, eq=False)
class KernelObpmJob(ObpmJob):
    """The kernel OBPM's job: group ``g``'s members on their own pool of patterns.

    ``rule`` is the kernel rule, ``kernel`` its kernel, ``beta``/``budget``/``removal`` the base
    learner's; ``keep_retired`` keeps removed slots for the ``"average"`` conversion; ``native``
    is the multiclass form.  ``tau`` is one float, ``fit_intercept`` False, ``dtype`` float64.
    A member's pool holds only its own group's patterns, so a worker's memory is its groups'
    budgets (each member's cache, their union the pool), one block and one kernel row.
    """

    kernel: Kernel | None = None
    beta: float = 0.0
    budget: Any = None
    removal: str = "margin"
    native: bool = False
    keep_retired: bool = False

    def initial_state(self, g: int) -> KernelEnsembleState:
        a, b = self.groups[g]
        return init_kernel_ensemble(self.n_features, b - a, self.n_outputs, native=self.native,
                                    keep_retired=self.keep_retired)

    def learn(self, st: Any, ch: Any, epoch: int, first: int) -> tuple[np.ndarray, Any]:
        log = learn_kernel_ensemble_chunk(self.rule, self.kernel, st, ch.X, ch.y, ch.tids, seed=self.seed,
                                          tau=float(self.tau), epoch=epoch, order=ch.order, beta=self.beta,
                                          budget=self.budget, removal=self.removal, first_member=first)
        return log.margin, int(log.updates.sum())

    def combine(self, parts: list[Any]) -> KernelEnsembleState:
        return concat_kernel_states(parts)

    restore = staticmethod(KernelEnsembleState.from_arrays)

    def fingerprint(self) -> dict[str, Any]:
        assert self.kernel is not None
        return {**super().fingerprint(), "kind": "kernel-obpm", "kernel": self.kernel.name,
                "kernel_params": [float(v) for v in self.kernel.params], "beta": float(self.beta),
                "budget": self.budget, "removal": self.removal, "native": bool(self.native),
                "keep_retired": bool(self.keep_retired)}


class SegmentResult(NamedTuple):
    """A group's state after a segment, and what the driver needs from the segment."""

    state: Any             #: the group's learners (EnsembleState; KernelEnsembleState for the kernel job)
    margin: np.ndarray     #: (rows, K) group sum of member margins, in visiting order
    y: np.ndarray | None   #: (rows,) class indices in visiting order (group 0 only)
    updates: int           #: member updates in the segment
    n_blocks: int          #: blocks this task processed


class SegmentReport(NamedTuple):
    margin: np.ndarray
    y: np.ndarray | None
    updates: int
    n_blocks: int


def obpm_segment(job: ObpmJob, g: int, prev: SegmentResult | tuple | None, epoch: int, s: int) -> SegmentResult:
    """Run learner group ``g`` over segment ``s`` of epoch ``epoch``.

    ``prev`` is the group's previous :class:`SegmentResult`, ``None`` (start
    from zero weights) or ``("checkpoint", epoch, segment)`` (load the group's
    part of that checkpoint from ``job.checkpoint``).  The input is never
    modified.  With ``job.checkpoint`` set, the new state is written there
    before the task returns.
    """
    if prev is None:
        st = job.initial_state(g)
    elif isinstance(prev, tuple) and len(prev) == 3 and prev[0] == "checkpoint":
        st = ckpt.read_part(job.checkpoint, prev[1], prev[2], g, restore=job.restore)
    else:
        st = prev.state.copy()
    a, _ = job.groups[g]
    ds = stream.open_store(job.path, job.token)
    margins, ys = [], []
    updates: Any = np.zeros(job.n_taus, np.int64) if job.n_taus else 0
    blocks = job.segment(epoch, s)
    for ch in stream.epoch_chunks(ds, seed=job.seed, epoch=epoch, shuffle=job.shuffle, classes=job.classes,
                                  dtype=job.dtype, blocks=blocks):
        try:
            m, u = job.learn(st, ch, epoch, a)
        except NonFiniteError as exc:
            row = ch.first_row + int(exc.row)
            raise NonFiniteError(f"store {job.path}, block {ch.block}, store row {row} (epoch {epoch}): {exc}",
                                 row, exc.round) from None
        margins.append(m)
        updates = updates + u
        if g == 0:
            ys.append(ch.y if ch.order is None else ch.y[ch.order])
    if job.checkpoint is not None:
        ckpt.write_part(job.checkpoint, epoch, s, g, st)
    margin = np.concatenate(margins) if margins else np.zeros((0, job.n_taus, job.n_outputs)[int(not job.n_taus):])
    y = np.concatenate(ys) if g == 0 and ys else None
    return SegmentResult(st, margin, y, updates, len(blocks))


def report(res: SegmentResult) -> SegmentReport:
    """The small part of a segment result (runs where the result is; the state stays there)."""
    return SegmentReport(res.margin, res.y, res.updates, res.n_blocks)


def merge_reports(*parts: SegmentReport) -> SegmentReport:
    """Tree merge of group reports: margins add (left to right), counts add, y is group 0's."""
    m = parts[0].margin
    y = parts[0].y
    u, nb = parts[0].updates, parts[0].n_blocks
    for p in parts[1:]:
        m = m + p.margin
        y = y if y is not None else p.y
        u += p.updates
        nb += p.n_blocks
    return SegmentReport(m, y, u, nb)


def score_report(rep: SegmentReport, record: bool = False) -> dict[str, Any]:
    """Online mistakes of the ensemble's average on the segment (the progressive error)."""
    m, y = rep.margin, rep.y
    if y is None:
        raise ValueError("the merged report lost group 0's labels")
    yk = y if m.ndim == 2 else y[:, None]  # (rows, T, K): per tau group
    if m.shape[-1] == 1:
        mistakes = (m[..., 0] >= 0.0) != (yk == 1)
    else:
        mistakes = np.argmax(m, axis=-1) != yk
    errors = mistakes.sum(axis=0)
    out: dict[str, Any] = {"errors": errors.astype(int).tolist() if m.ndim == 3 else int(errors),
                           "rows": int(len(y)), "group_blocks": int(rep.n_blocks),
                           "updates": (np.asarray(rep.updates, np.int64).reshape(-1).tolist() if m.ndim == 3
                                       else int(rep.updates))}
    if record:
        out["mistakes"] = mistakes.astype(np.uint8)
    return out


def state_of(res: SegmentResult) -> EnsembleState:
    return res.state



def run_obpm(job: ObpmJob, runner: Executor, *, resume: bool = False, progress: bool = False,
             verbose: bool = False, ahead: int | None = None, split_every: int = 8,
             record: bool = False) -> dict[str, Any]:
    """Train ``job`` on ``runner``; returns the merged state and the job's counters.

    Returns a dict with ``state`` (the :class:`EnsembleState` of all N
    learners), ``epoch_errors``/``epoch_updates``/``epoch_rows`` (per epoch,
    the ensemble's progressive mistakes, member updates and rounds),
    ``group_blocks`` (block passes run by *this* call, summed over groups: a
    resumed job runs fewer), ``resumed_from`` (the cut, or None) and
    ``seconds``; with ``record``, ``mistakes`` (uint8, the first epoch's
    progressive mistakes round by round; a resumed job has only those after
    its cut).
    """
    t0 = time.perf_counter()
    G = len(job.groups)
    n_seg = job.n_segments
    zero = (lambda: [0] * job.n_taus) if job.n_taus else (lambda: 0)
    counters: dict[str, Any] = {"epoch_errors": [zero() for _ in range(job.epochs)],
                                "epoch_updates": [zero() for _ in range(job.epochs)],
                                "epoch_rows": [0] * job.epochs}
    start = None
    if job.checkpoint is not None:
        start = ckpt.prepare(job.checkpoint, job.fingerprint(), resume=resume)
    prev: list[Any] = [None] * G
    todo = [(e, s) for e in range(job.epochs) for s in range(n_seg)]
    if start is not None:
        e0, s0 = int(start["epoch"]), int(start["segment"])
        old = start["counters"]
        for name in ("epoch_errors", "epoch_updates", "epoch_rows"):
            for i, v in enumerate(old.get(name, [])[: job.epochs]):
                counters[name][i] = [int(x) for x in v] if isinstance(v, list) else int(v)
        todo = [(e, s) for (e, s) in todo if (e, s) > (e0, s0)]
        prev = [("checkpoint", e0, s0)] * G
    # Keys: unique per call (nonce) so that repeated jobs are really recomputed,
    # fixed within the call so that a retried task is the same key.
    nonce = uuid.uuid4().hex[:12]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo) * G, unit="seg", desc=f"OBPM {job.n_learners} learners / {G} groups",
                   file=sys.stderr, smoothing=0.1)
        total_blocks = job.epochs * job.n_blocks
        done_blocks = total_blocks - sum(len(job.segment(e, s)) for e, s in todo)
        bar.set_postfix_str(f"blocks {done_blocks}/{total_blocks}")
    window: deque[tuple[int, int, list[Any], Any]] = deque()
    limit = ahead if ahead is not None else (1 if getattr(runner, "kind", "") == "in-process" and runner.n_jobs == 1 else 3)
    group_blocks = 0
    mistakes: list[np.ndarray] = []
    done_blocks = job.epochs * job.n_blocks - sum(len(job.segment(e, s)) for e, s in todo)

    def settle() -> None:
        nonlocal group_blocks, done_blocks
        e, s, res, score = window.popleft()
        sc = runner.result(score)
        runner.wait(res)
        if record and e == 0:
            mistakes.append(sc["mistakes"])
        for name, key in (("epoch_errors", "errors"), ("epoch_updates", "updates")):
            c = counters[name][e]
            counters[name][e] = [a + b for a, b in zip(c, sc[key])] if isinstance(c, list) else c + sc[key]
        counters["epoch_rows"][e] += sc["rows"]
        group_blocks += sc["group_blocks"]
        done_blocks += sc["group_blocks"] // G
        if job.checkpoint is not None:
            ckpt.mark_complete(job.checkpoint, e, s, counters)
        if bar is not None:
            bar.update(G)
            bar.set_postfix_str(f"epoch {e + 1}/{job.epochs}, blocks {done_blocks}/{job.epochs * job.n_blocks}")
        if s == n_seg - 1 and (verbose or bar is not None):
            rows = max(1, counters["epoch_rows"][e])
            errs = counters["epoch_errors"][e]
            if isinstance(errs, list):
                msg = (f"epoch {e + 1}/{job.epochs}: progressive error by tau "
                       + ", ".join(f"{t:g}: {v / rows:.4f}" for t, v in zip(job.tau, errs))
                       + f" ({rows} rows), member updates {sum(counters['epoch_updates'][e])}")
            else:
                msg = (f"epoch {e + 1}/{job.epochs}: progressive error {errs / rows:.4f} "
                       f"({errs} / {rows}), member updates {counters['epoch_updates'][e]}")
            (bar.write if bar is not None else print)(msg, file=sys.stderr)

    try:
        for e, s in todo:
            res = [runner.submit((f"obpm-segment-{nonce}", e, s, g), obpm_segment, job, g, prev[g], e, s)
                   for g in range(G)]
            reps = [runner.submit((f"obpm-report-{nonce}", e, s, g), report, r) for g, r in enumerate(res)]
            merged = runner.tree(f"obpm-merge-{nonce}-e{e}-s{s}", reps, merge_reports, split_every)
            score = runner.submit((f"obpm-score-{nonce}", e, s), score_report, merged, record and e == 0)
            window.append((e, s, res, score))
            prev = res
            while len(window) > limit:
                settle()
        while window:
            settle()
        if start is not None and not todo:
            parts = [ckpt.read_part(job.checkpoint, int(start["epoch"]), int(start["segment"]), g, restore=job.restore)
                     for g in range(G)]
        else:
            states = [runner.submit((f"obpm-state-{nonce}", g), state_of, prev[g]) for g in range(G)]
            parts = [runner.result(h) for h in states]
    finally:
        if bar is not None:
            bar.close()
    return {"state": job.combine(parts), **counters, "group_blocks": group_blocks,
            "mistakes": np.concatenate(mistakes) if mistakes else np.zeros(0, np.uint8),
            "resumed_from": None if start is None else (int(start["epoch"]), int(start["segment"])),
            "seconds": time.perf_counter() - t0}
