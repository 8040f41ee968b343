"""Learner-parallel OBPM (DESIGN.md decision 7a).

The N learners are split into G contiguous groups.  Each group is a *task
chain* over the epoch's block order, one task per segment of
``segment_blocks`` blocks (:func:`distlearn.distributed.tasks.obpm_segment`):
the task opens the store by path, reads its blocks on its worker and runs the
fused OBPM kernel for its learners only, so only the group's weights move
between tasks, and Dask keeps a chain on the worker that holds its state.

Per segment the groups' margin sums are merged in a reduction tree (fan-in
``split_every``) into the ensemble's progressive (online) error.  When a
checkpoint directory is given, every task writes its group's state there
and the driver marks the cut complete once all groups and the error count
of the segment are done; a resumed job starts each chain from the last
complete cut.

The weights are bit-identical to in-process training (:class:`distlearn.OBPM`
without a scheduler), for any G, segment size, worker count, retries or
resume: each member's updates depend only on the stream and its own draws.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import deque
from typing import Any

import numpy as np

from . import checkpoint as ckpt
from . import tasks


def concat_states(parts: list[Any]) -> Any:
    """The ensemble state of all groups, learners in group order."""
    from ..ensembles.bayes_point import EnsembleState

    first = parts[0]
    cols = lambda name: np.concatenate([getattr(p, name) for p in parts], axis=-1)  # noqa: E731
    acc = first.accP.size > 0
    return EnsembleState(
        np.concatenate([p.W for p in parts], axis=1), cols("scale"), cols("sqnorm"), cols("n_updates"),
        cols("member_rounds"), first.n_rounds.copy(),
        np.concatenate([p.accP for p in parts], axis=1) if acc else first.accP,
        np.concatenate([p.accq for p in parts], axis=1) if acc else first.accq,
    )


def run_obpm(job: tasks.ObpmJob, runner: Any, *, resume: bool = False, progress: bool = False,
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
    counters: dict[str, Any] = {"epoch_errors": [0] * job.epochs, "epoch_updates": [0] * job.epochs,
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
                counters[name][i] = int(v)
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
        counters["epoch_errors"][e] += sc["errors"]
        counters["epoch_updates"][e] += sc["updates"]
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
            msg = (f"epoch {e + 1}/{job.epochs}: progressive error {counters['epoch_errors'][e] / rows:.4f} "
                   f"({counters['epoch_errors'][e]} / {rows}), member updates {counters['epoch_updates'][e]}")
            (bar.write if bar is not None else print)(msg, file=sys.stderr)

    try:
        for e, s in todo:
            res = [runner.submit((f"obpm-segment-{nonce}", e, s, g), tasks.obpm_segment, job, g, prev[g], e, s)
                   for g in range(G)]
            reps = [runner.submit((f"obpm-report-{nonce}", e, s, g), tasks.report, r) for g, r in enumerate(res)]
            merged = runner.tree(f"obpm-merge-{nonce}-e{e}-s{s}", reps, tasks.merge_reports, split_every)
            score = runner.submit((f"obpm-score-{nonce}", e, s), tasks.score_report, merged, record and e == 0)
            window.append((e, s, res, score))
            prev = res
            while len(window) > limit:
                settle()
        while window:
            settle()
        if start is not None and not todo:
            parts = [ckpt.read_part(job.checkpoint, int(start["epoch"]), int(start["segment"]), g) for g in range(G)]
        else:
            states = [runner.submit((f"obpm-state-{nonce}", g), tasks.state_of, prev[g]) for g in range(G)]
            parts = [runner.result(h) for h in states]
    finally:
        if bar is not None:
            bar.close()
    return {"state": concat_states(parts), **counters, "group_blocks": group_blocks,
            "mistakes": np.concatenate(mistakes) if mistakes else np.zeros(0, np.uint8),
            "resumed_from": None if start is None else (int(start["epoch"]), int(start["segment"])),
            "seconds": time.perf_counter() - t0}
