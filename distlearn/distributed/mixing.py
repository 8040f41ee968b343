"""Data-parallel training: iterative parameter mixing over shards of one corpus.

One learner, a corpus too large for one worker's time budget (the data-parallel mode).  The corpus is cut into ``S`` *shards* -- contiguous runs of a
store's blocks, or of an array's rows -- and every epoch runs one task per
shard, each starting from the same *mixed* weights and streaming only its own
shard.  The shards' weights are then mixed into the next epoch's start
(McDonald, Hall & Mann 2010, *iterative parameter mixing*)::

    w^(e) = sum_s mu_{s,e} w_s^(e),    w_s^(e) = one epoch of the rule on shard s from w^(e-1)

and the shards' conversion summaries (average, tree, cutoff groups) merge
with their own laws.  Both merges are reduction trees of fan-in
``split_every`` (:func:`distlearn.distributed.graph.tree_reduce`), never a
gather on one worker; in-process runs use the same grouping
(:func:`~distlearn.distributed.graph.fold`), so they are bit-identical to a
Dask run.

The task functions here are pure: every input is an argument (the store by
path, the start weights, the seed), nothing is mutated, and every random
choice is keyed by ``(seed, epoch, block)`` -- a retried task recomputes the
same bits and the model does not depend on the number of workers.

Stream order.  Epoch ``e`` of the single learner visits the store's blocks in
the permutation ``block_generator(seed, "shuffle-blocks", e)`` and the rows of
block ``b`` in ``block_generator(seed, "shuffle-rows", e * 2**32 + b)`` (an
array's rows in ``block_generator(seed, "shuffle", e)``), as the distlearn
estimators do.  Shard ``s`` visits *its* blocks (rows) in the order they take
in that permutation.  So the shards' streams are the single learner's epoch
cut into ``S`` pieces, and ``n_shards=1`` is exactly the base estimator's
run.

References
----------
R. McDonald, K. Hall, G. Mann. Distributed training strategies for the
structured perceptron. NAACL-HLT 2010, pp. 456-464 (Algorithm 3 and
section 4: iterative parameter mixing, uniform and error-proportional mu).
O. Dekel, Y. Singer. Data-driven online to batch conversions. NIPS 2005,
eq. 3.  O. Dekel. From online to batch learning with cutoff-averaging.
NIPS 2008.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .. import stream
from .._config import SPLIT_EVERY
from ..conversions.core import AverageTracker, CutoffTracker, LastTracker, TreeTracker, hypothesis
from ..learners.linear import LinearState, NonFiniteError, Rule, copy_state, init_state, row_sqnorms
from .executor import Executor

__all__ = [
    "StoreShard",
    "ArrayShard",
    "MixSpec",
    "MixPart",
    "ShardStats",
    "shard_edges",
    "shard_epoch",
    "merge_mix",
    "finish_mix",
    "merge_summaries",
    "collect_stats",
    "build_ipm",
]

#: The conversions whose summaries merge across shards.
CONVERSIONS = ("last", "average", "tree", "cutoff")


# =========================================================================== data shards


class StoreShard(NamedTuple):
    """Shard of a store: blocks ``first_block .. stop_block - 1`` of the store at
    ``path`` (absolute), whose metadata hashes to ``token``."""

    path: str
    token: str
    first_block: int
    stop_block: int
    n_blocks: int  #: blocks in the whole store (the epoch permutation's length)


class ArrayShard(NamedTuple):
    """Shard of in-memory data: rows ``first_row ..`` of the training set, already
    in the weights' dtype (CSR in canonical form), with class indices."""

    X: Any
    y: np.ndarray
    first_row: int
    n_samples: int  #: rows of the whole training set (the epoch permutation's length)


class MixSpec(NamedTuple):
    """Everything a task needs besides its shard and start weights (small; pickles)."""

    rule: Rule
    n_features: int
    n_outputs: int
    dtype: str
    fit_intercept: bool
    seed: int
    shuffle: bool
    mixing: str               #: "uniform" or "updates"
    conversion: tuple         #: ("last",), ("average",), ("tree", C, leaf_size, loss), ("cutoff", delta, C, loss)
    classes: np.ndarray       #: sorted class labels (a store's labels are encoded with them)


class ShardStats(NamedTuple):
    """What one shard did in one epoch (scalars and a (K,) vector)."""

    epoch: int
    shard: int
    rows: int
    mistakes: int         #: progressive 0-1 mistakes
    updated_rounds: int   #: rounds on which the rule updated (any column)
    updates: np.ndarray   #: (K,) int64, updates per output column


def shard_edges(n_items: int, n_shards: int) -> np.ndarray:
    """Even split of ``n_items`` blocks (rows) into contiguous shards: shard ``s`` holds
    ``edges[s]:edges[s+1]``; sizes differ by at most one, every shard non-empty when
    ``n_shards <= n_items``."""
    return (np.arange(n_shards + 1, dtype=np.int64) * int(n_items)) // int(n_shards)


def _chunks(source: Any, epoch: int, spec: MixSpec):
    """``(X, y, order, where)`` for every chunk of one shard's epoch, in stream order: the
    single learner's epoch (:mod:`distlearn.stream`) restricted to the shard."""
    if isinstance(source, ArrayShard):
        n = source.X.shape[0]
        order = stream.array_order(spec.seed, epoch, source.n_samples, spec.shuffle)
        if order is not None:
            order = (order[(order >= source.first_row) & (order < source.first_row + n)]
                     - source.first_row).astype(np.int64)
        yield source.X, source.y, order, f"rows {source.first_row}..{source.first_row + n - 1}"
        return
    ds = stream.open_store(source.path, source.token)
    for ch in stream.epoch_chunks(ds, seed=spec.seed, epoch=epoch, shuffle=spec.shuffle, classes=spec.classes,
                                  dtype=spec.dtype, blocks=range(source.first_block, source.stop_block)):
        yield ch.X, ch.y, ch.order, f"store {source.path}, {ch.where}"


# =========================================================================== summaries


def _tracker(spec: MixSpec) -> Any:
    kind = spec.conversion[0]
    if kind == "last":
        return LastTracker()
    if kind == "average":
        return AverageTracker()
    if kind == "tree":
        _, C, leaf, loss = spec.conversion
        return TreeTracker(C, leaf, loss)
    _, delta, C, loss = spec.conversion
    return CutoffTracker(delta, C, loss, mode="groups")


def _summary(tracker: Any, state: LinearState, spec: MixSpec) -> Any:
    """The shard's mergeable conversion summary (None for "last")."""
    return None if spec.conversion[0] == "last" else tracker.summary(state)


def merge_summaries(*parts: Any) -> Any:
    """Fold conversion summaries left to right with their ``merge`` laws (None: 'last')."""
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p)
    return out


# =========================================================================== mixing


@dataclass
class MixPart:
    """A partial weighted sum of shard hypotheses, per output column ``k``.

    ``total[k] = sum_s c_{s,k} h_{s,k}`` (true units, bias last) with integer
    weights ``c`` (a shard's rows for uniform mixing, its updates of column k
    for McDonald's error-proportional mixing); ``weight[k] = sum_s c_{s,k}``;
    ``contributors[k]`` counts the shards with ``c_{s,k} > 0``; ``updates[k]``
    the updates all shards made to column k; ``rows`` the rounds.  ``sole``
    holds, for the columns with exactly one contributor, that shard's column
    in the learner's own representation ``(W[:, k], scale[k], sqnorm[k])``
    (the weighted mean of one vector is the vector itself, kept bit for bit).

    Merge law: everything adds; ``sole`` columns come from the one part that
    has a contributor there and are zero elsewhere.  Associative and
    commutative -- exactly so for integer-valued hypotheses, to rounding
    otherwise (the reduction tree fixes the grouping, so a run's bits do not
    depend on the scheduler).
    """

    total: np.ndarray          #: (K, d + 1) float64
    weight: np.ndarray         #: (K,) int64
    contributors: np.ndarray   #: (K,) int64
    updates: np.ndarray        #: (K,) int64
    rows: int
    sole: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  #: (W (d + 1, K), scale (K,), sqnorm (K,))


def _leaf_part(state: LinearState, c: np.ndarray, updates: np.ndarray, rows: int) -> MixPart:
    c = np.asarray(c, np.int64)
    h = hypothesis(state)
    total = c.astype(np.float64)[:, None] * h
    contrib = (c > 0).astype(np.int64)
    sole = None
    if contrib.any():
        keep = contrib == 1
        W = np.where(keep[None, :], state.W, 0).astype(state.W.dtype)
        sole = (W, np.where(keep, state.scale, 1.0), np.where(keep, state.sqnorm, 0.0))
    return MixPart(total, c, contrib, np.asarray(updates, np.int64), int(rows), sole)


def merge_mix(*parts: MixPart) -> MixPart:
    """Fold mixing parts left to right (see :class:`MixPart` for the law)."""
    first = parts[0]
    total = first.total.copy()
    weight, contrib, updates, rows = first.weight.copy(), first.contributors.copy(), first.updates.copy(), first.rows
    for p in parts[1:]:
        total += p.total
        weight += p.weight
        contrib += p.contributors
        updates += p.updates
        rows += p.rows
    sole = None
    one = contrib == 1
    if one.any():
        ref = next(p.sole for p in parts if p.sole is not None)
        W = np.zeros_like(ref[0])
        scale = np.ones_like(ref[1])
        sq = np.zeros_like(ref[2])
        for p in parts:
            cols = one & (p.contributors == 1)
            if cols.any():
                W[:, cols] = p.sole[0][:, cols]
                scale[cols] = p.sole[1][cols]
                sq[cols] = p.sole[2][cols]
        sole = (W, scale, sq)
    return MixPart(total, weight, contrib, updates, rows, sole)


def _zero_state(spec: MixSpec) -> LinearState:
    return init_state(spec.n_features, spec.n_outputs, dtype=np.dtype(spec.dtype))


def finish_mix(root: MixPart, start: LinearState | None, spec: MixSpec) -> LinearState:
    """The next epoch's start state from the merged parts and this epoch's start.

    Column ``k``: unchanged if no shard updated it (every shard still holds the
    start column, so any convex mix is that column -- this is also McDonald's
    fallback to uniform weights when no shard erred); the sole contributor's
    column as it is when there is one; otherwise ``total[k] / weight[k]`` stored
    with ``scale = 1`` and its squared norm recomputed.  The update counter is
    the total over all shards (what one learner that made every update would
    hold: decaying schedules such as ALMA's ``C / sqrt(k)`` continue from it);
    ``n_rounds`` adds the epoch's rounds; the mixed hypothesis is new (age 0).
    """
    prev = _zero_state(spec) if start is None else start
    W, scale, sqnorm = prev.W.copy(), prev.scale.copy(), prev.sqnorm.copy()
    for k in range(W.shape[1]):
        if root.updates[k] == 0:
            continue
        if root.contributors[k] == 1:
            W[:, k], scale[k], sqnorm[k] = root.sole[0][:, k], root.sole[1][k], root.sole[2][k]
            continue
        col = (root.total[k] / float(root.weight[k])).astype(W.dtype)
        W[:, k] = col
        scale[k] = 1.0
        sqnorm[k] = row_sqnorms(col.astype(np.float64)[None, :])[0]  # sequential: the same bits anywhere
    return LinearState(W, scale, sqnorm, prev.n_updates + root.updates,
                       prev.n_rounds + np.int64(root.rows), np.zeros(1, np.int64))


# =========================================================================== the shard task


def shard_epoch(source: StoreShard | ArrayShard, shard: int, epoch: int, start: LinearState | None,
                spec: MixSpec) -> tuple[MixPart, Any, ShardStats]:
    """One epoch of the rule on one shard, from the mixed weights ``start``.

    Pure: ``start`` is copied, the shard is read (a store by path, opened once
    per process), every order is keyed by ``(spec.seed, epoch, block)``.

    Returns
    -------
    (MixPart, summary, ShardStats)
        The shard's leaf of the mixing tree, its conversion summary (None for
        ``"last"``) and its counts.
    """
    state = _zero_state(spec) if start is None else copy_state(start)
    n_up0 = state.n_updates.copy()
    rounds0 = int(state.n_rounds[0])
    # The shard's epoch is a stream of its own for the conversions: rounds count
    # from 0 (tree leaves start at the shard's start) and the start hypothesis
    # is fresh.  Neither affects the weights (the rules read neither).
    state.age[0] = 0
    state.n_rounds[0] = 0
    tracker = _tracker(spec)
    tracker.begin(state)
    mistakes = updated = 0
    for X, yi, order, where in _chunks(source, epoch, spec):
        try:
            log = tracker.run_chunk(spec.rule, state, X, yi, order, spec.fit_intercept)
        except NonFiniteError as e:
            raise NonFiniteError(f"shard {shard}, epoch {epoch}, {where}: {e}", e.row, e.round) from e
        mistakes += int(log.mistake.sum())
        updated += int(log.updated.sum())
    summary = _summary(tracker, state, spec)
    rows = int(state.n_rounds[0])
    state.n_rounds[0] = rounds0 + rows
    updates = state.n_updates - n_up0
    c = updates if spec.mixing == "updates" else np.full(spec.n_outputs, rows, np.int64)
    part = _leaf_part(state, c, updates, rows)
    return part, summary, ShardStats(epoch, shard, rows, mistakes, updated, updates)


def collect_stats(*stats: ShardStats) -> list[ShardStats]:
    """Gather the (scalar) per-shard counts of every epoch."""
    return list(stats)


# =========================================================================== the plan


class IPMPlan(NamedTuple):
    """The outputs of :func:`build_ipm` (values in-process, ``Delayed`` for Dask)."""

    state: Any          #: handle: the final mixed LinearState
    summary: Any        #: handle: the merged conversion summary (None for "last")
    stats: Any          #: handle: list of ShardStats, (epoch, shard) order
    mix_roots: list     #: per epoch, the handle of the mixing tree's root


def build_ipm(ex: Executor, sources: Sequence[Any], spec: MixSpec, epochs: int, *,
              split_every: int = SPLIT_EVERY, run: str = "") -> IPMPlan:
    """Iterative parameter mixing submitted to the executor ``ex``: per epoch, one
    :func:`shard_epoch` task per shard on the previous mixed state, a :func:`merge_mix`
    tree of fan-in ``split_every`` and one :func:`finish_mix`; then one
    :func:`merge_summaries` tree over every shard-epoch summary in (epoch, shard) order.
    ``run`` makes the task keys unique to this fit."""
    start: Any = None
    summaries: list[Any] = []
    stats: list[Any] = []
    roots: list[Any] = []
    sfx = f"-{run}" if run else ""
    for e in range(epochs):
        parts = []
        for s, src in enumerate(sources):
            part, summ, st = ex.submit((f"ipm-shard{sfx}", e, s), shard_epoch, src, s, e, start, spec, nout=3)
            parts.append(part)
            summaries.append(summ)
            stats.append(st)
        root = ex.tree(f"ipm-mix-e{e}{sfx}", parts, merge_mix, split_every)
        roots.append(root)
        start = ex.submit((f"ipm-start{sfx}", e + 1), finish_mix, root, start, spec)
    summary = None if spec.conversion[0] == "last" else ex.tree(f"ipm-summary{sfx}", summaries, merge_summaries,
                                                                  split_every)
    return IPMPlan(start, summary, ex.submit((f"ipm-stats{sfx}",), collect_stats, *stats), roots)


def run_ipm(ex: Executor, sources: Sequence[Any], spec: MixSpec, epochs: int, *, split_every: int = SPLIT_EVERY,
            run: str = "") -> tuple[LinearState, Any, list[ShardStats]]:
    """Build the plan on ``ex`` and gather ``(final state, merged summary, stats)``.

    In-memory shards are scattered to the cluster once, not put into every epoch's tasks."""
    if sources and isinstance(sources[0], ArrayShard):
        sources = [ex.scatter(s) for s in sources]
    plan = build_ipm(ex, sources, spec, epochs, split_every=split_every, run=run)
    handles = [plan.state, plan.stats] + ([plan.summary] if plan.summary is not None else [])
    ex.wait(handles)
    return (ex.result(plan.state), None if plan.summary is None else ex.result(plan.summary),
            ex.result(plan.stats))
