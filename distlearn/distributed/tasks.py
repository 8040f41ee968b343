"""Pure task functions: what one Dask task does (DESIGN.md decisions 2, 6, 8).

A task is a pure function of its arguments: it opens the store by path on
the worker, reads its blocks itself, copies any state it is given before
changing it, and draws every random number from ``(seed, stream, counter)``.
A task retried after a worker died therefore recomputes the same bits, and
the result does not depend on which worker ran it or how many there are.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .. import rng
from ..learners.linear import NonFiniteError, Rule


@functools.lru_cache(maxsize=8)
def _open(path: str, token: str) -> Any:
    from ..data.store import open_dataset

    return open_dataset(path)


def open_store(path: str, token: str = "") -> Any:
    """The store at ``path``, opened once per process (``token`` tells versions apart)."""
    return _open(str(path), token)


def store_token(ds: Any) -> str:
    """A fingerprint of a store's content: its metadata (shape, nnz, creation time, ...)."""
    meta = {k: v for k, v in ds.meta.items() if k not in ("class_counts",)}
    blob = json.dumps(meta, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def encode_labels(classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Labels -> class indices (the estimators' encoding)."""
    from ..estimators import encode_labels as enc

    return enc(classes, y)


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
    tau: float
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

    def block_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.n_blocks)
        return rng.block_generator(self.seed, "shuffle-blocks", epoch).permutation(self.n_blocks)

    def row_order(self, epoch: int, block: int, n_rows: int) -> np.ndarray | None:
        if not self.shuffle:
            return None
        return rng.block_generator(self.seed, "shuffle-rows", epoch * (1 << 32) + int(block)).permutation(n_rows)

    @property
    def n_segments(self) -> int:
        return -(-self.n_blocks // self.segment_blocks)

    def segment(self, epoch: int, s: int) -> np.ndarray:
        return self.block_order(epoch)[s * self.segment_blocks : (s + 1) * self.segment_blocks]

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a checkpoint to be resumed (``epochs`` may grow)."""
        return {
            "kind": "obpm", "store": self.path, "store_token": self.token, "n_samples": self.n_samples,
            "n_features": self.n_features, "n_blocks": self.n_blocks, "classes": np.asarray(self.classes).tolist(),
            "rule": self.rule.name, "rule_code": int(self.rule.code),
            "rule_params": [float(v) for v in np.asarray(self.rule.params)], "seed": int(self.seed),
            "tau": float(self.tau), "fit_intercept": bool(self.fit_intercept), "acc_mode": int(self.acc_mode),
            "dtype": self.dtype, "n_learners": int(self.n_learners), "groups": [list(g) for g in self.groups],
            "shuffle": bool(self.shuffle), "segment_blocks": int(self.segment_blocks),
        }


class SegmentResult(NamedTuple):
    """A group's state after a segment, and what the driver needs from the segment."""

    state: Any             #: EnsembleState of the group's learners
    margin: np.ndarray     #: (rows, K) group sum of member margins, in visiting order
    y: np.ndarray | None   #: (rows,) class indices in visiting order (group 0 only)
    updates: int           #: member updates in the segment
    n_blocks: int          #: blocks this task processed


class SegmentReport(NamedTuple):
    margin: np.ndarray
    y: np.ndarray | None
    updates: int
    n_blocks: int


def _initial_group_state(job: ObpmJob, g: int) -> Any:
    from ..ensembles import _kernels as EK
    from ..ensembles.bayes_point import init_ensemble

    a, b = job.groups[g]
    return init_ensemble(job.n_features, b - a, job.n_outputs, dtype=job.dtype,
                         running_sum=job.acc_mode != EK.ACC_NONE)


def obpm_segment(job: ObpmJob, g: int, prev: Any, epoch: int, s: int) -> SegmentResult:
    """Run learner group ``g`` over segment ``s`` of epoch ``epoch``.

    ``prev`` is the group's previous :class:`SegmentResult`, ``None`` (start
    from zero weights) or ``("checkpoint", epoch, segment)`` (load the group's
    part of that checkpoint from ``job.checkpoint``).  The input is never
    modified.  With ``job.checkpoint`` set, the new state is written there
    before the task returns.
    """
    from ..ensembles.bayes_point import learn_ensemble_chunk

    if prev is None:
        st = _initial_group_state(job, g)
    elif isinstance(prev, tuple) and len(prev) == 3 and prev[0] == "checkpoint":
        from .checkpoint import read_part

        st = read_part(job.checkpoint, prev[1], prev[2], g)
    else:
        st = prev.state.copy()
    a, _ = job.groups[g]
    ds = open_store(job.path, job.token)
    dt = np.dtype(job.dtype)
    bounds = job.block_bounds
    margins, ys = [], []
    updates = 0
    blocks = job.segment(epoch, s)
    for b in blocks:
        b = int(b)
        try:
            block = ds.read_block(b)
        except Exception as exc:  # name the block: the store may have been damaged since it was opened
            raise type(exc)(f"store {job.path}, block {b}: {exc}") from exc
        Xb = block.X
        Xb = Xb.astype(dt, copy=False) if sp.issparse(Xb) else np.ascontiguousarray(Xb, dtype=dt)
        yb = encode_labels(job.classes, np.asarray(block.y))
        order = job.row_order(epoch, b, Xb.shape[0])
        tids = np.arange(bounds[b], bounds[b + 1], dtype=np.int64)
        try:
            m, u = learn_ensemble_chunk(job.rule, st, Xb, yb, tids, seed=job.seed, tau=job.tau, epoch=epoch,
                                        order=order, fit_intercept=job.fit_intercept, acc_mode=job.acc_mode,
                                        first_learner=a)
        except NonFiniteError as exc:
            row = int(bounds[b]) + int(exc.row)
            raise NonFiniteError(f"store {job.path}, block {b}, store row {row} (epoch {epoch}): {exc}",
                                 row, exc.round) from None
        margins.append(m)
        updates += int(u.sum())
        if g == 0:
            ys.append(yb if order is None else yb[order])
    if job.checkpoint is not None:
        from .checkpoint import write_part

        write_part(job.checkpoint, epoch, s, g, st)
    margin = np.concatenate(margins) if margins else np.zeros((0, job.n_outputs))
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
    if m.shape[1] == 1:
        mistakes = (m[:, 0] >= 0.0) != (y == 1)
    else:
        mistakes = np.argmax(m, axis=1) != y
    out: dict[str, Any] = {"errors": int(mistakes.sum()), "rows": int(len(y)), "updates": int(rep.updates),
                           "group_blocks": int(rep.n_blocks)}
    if record:
        out["mistakes"] = mistakes.astype(np.uint8)
    return out


def state_of(res: SegmentResult) -> Any:
    return res.state


@functools.lru_cache(maxsize=2)
def _store_arrays(path: str, token: str) -> tuple[Any, np.ndarray]:
    ds = open_store(path, token)
    return ds.to_scipy() if ds.is_sparse else ds.to_numpy()


def fit_member(est: Any, path: str, exact: bool) -> Any:
    """Fit one seeded member on the store at ``path``: streamed block by block, or (``exact``)
    on the whole store loaded once per worker process so its permutations are global."""
    if not exact:
        return est.fit(path)
    ds = open_store(path)
    X, y = _store_arrays(str(path), store_token(ds))
    return est.fit(X, y)
