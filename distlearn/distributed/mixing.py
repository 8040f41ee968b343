"""Data-parallel training: iterative parameter mixing over shards of one corpus.

One learner, a corpus too large for one worker's time budget (DESIGN.md
decision 7c).  The corpus is cut into ``S`` *shards* -- contiguous runs of a
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
O. Dekel, Y. Singer. Data-driven online to batch conversions. NIPS 2005
(``papers/003``), eq. 3.  O. Dekel. From online to batch learning with
cutoff-averaging. NIPS 2008 (``papers/002``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils.metaestimators import available_if

from .. import rng
from .._config import SPLIT_EVERY
from .._validation import Boolean, Integral, Options, RandomState, check_params, is_store
from ..conversions import Average, Cutoff, Last, Tree, make_conversion
from ..conversions.core import (
    AverageSummary,
    AverageTracker,
    CutoffGroups,
    CutoffTracker,
    LastTracker,
    TreeTracker,
    cutoff_bounds,
    hypothesis,
)
from ..estimators import _OnlineLinearClassifier, _max_row_norm
from ..learners.linear import LinearState, NonFiniteError, Rule, copy_state, init_state, row_sqnorms
from .graph import fold, tree_reduce

__all__ = [
    "ParameterMixing",
    "StoreShard",
    "ArrayShard",
    "MixSpec",
    "MixPart",
    "ShardStats",
    "CutoffSummary",
    "shard_edges",
    "shard_block_order",
    "shard_row_order",
    "shard_epoch",
    "merge_mix",
    "finish_mix",
    "merge_summaries",
    "collect_stats",
    "build_ipm",
]

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


def shard_block_order(seed: int, epoch: int, n_blocks: int, first: int, stop: int, shuffle: bool) -> np.ndarray:
    """The blocks ``first..stop-1`` in the order the single learner's epoch visits them."""
    if not shuffle:
        return np.arange(first, stop, dtype=np.int64)
    perm = rng.block_generator(seed, "shuffle-blocks", epoch).permutation(n_blocks)
    return perm[(perm >= first) & (perm < stop)].astype(np.int64)


def shard_row_order(seed: int, epoch: int, block: int, n_rows: int, shuffle: bool) -> np.ndarray | None:
    """Row order inside store block ``block`` (None: stored order)."""
    if not shuffle:
        return None
    return rng.block_generator(seed, "shuffle-rows", epoch * (1 << 32) + int(block)).permutation(n_rows)


def _array_order(seed: int, epoch: int, first: int, n: int, n_samples: int, shuffle: bool) -> np.ndarray | None:
    if not shuffle:
        return None
    perm = rng.block_generator(seed, "shuffle", epoch).permutation(n_samples)
    return (perm[(perm >= first) & (perm < first + n)] - first).astype(np.int64)


# A worker opens each store once (per process) and keeps it: the zarr group and
# block index are read once, blocks are read per task.
_DATASETS: OrderedDict[tuple[str, str], Any] = OrderedDict()
_DATASETS_LOCK = threading.Lock()
_DATASETS_MAX = 8


def store_token(ds: Any) -> str:
    """A hash of a store's metadata (which includes its creation time): tasks check
    that the store they open is the one the fit was planned on."""
    text = json.dumps(ds.meta, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _dataset(path: str, token: str) -> Any:
    from ..data.store import StoreError, open_dataset

    key = (path, token)
    with _DATASETS_LOCK:
        ds = _DATASETS.get(key)
        if ds is not None:
            _DATASETS.move_to_end(key)
            return ds
    ds = open_dataset(path)
    if store_token(ds) != token:
        raise StoreError(f"{path}: the store changed after the fit was planned (its metadata differs)")
    with _DATASETS_LOCK:
        _DATASETS[key] = ds
        while len(_DATASETS) > _DATASETS_MAX:
            _DATASETS.popitem(last=False)
    return ds


def _encode(y: np.ndarray, classes: np.ndarray, where: str) -> np.ndarray:
    idx = np.searchsorted(classes, y)
    idx[idx >= len(classes)] = 0
    bad = classes[idx] != y
    if np.any(bad):
        raise ValueError(f"{where}: labels not in classes_ {classes.tolist()}: {np.unique(y[bad])[:5].tolist()}")
    return idx.astype(np.int64)


def _chunks(source: Any, epoch: int, spec: MixSpec):
    """``(X, y, order, where)`` for every chunk of one shard's epoch, in stream order."""
    dt = np.dtype(spec.dtype)
    if isinstance(source, ArrayShard):
        n = source.X.shape[0]
        yield source.X, source.y, _array_order(spec.seed, epoch, source.first_row, n, source.n_samples,
                                               spec.shuffle), f"rows {source.first_row}..{source.first_row + n - 1}"
        return
    ds = _dataset(source.path, source.token)
    for b in shard_block_order(spec.seed, epoch, source.n_blocks, source.first_block, source.stop_block,
                               spec.shuffle):
        block = ds.read_block(int(b))
        Xb = block.X
        Xb = Xb.astype(dt, copy=False) if sp.issparse(Xb) else np.ascontiguousarray(Xb, dtype=dt)
        where = f"store {source.path}, block {int(b)} (first row {block.first_row})"
        yi = _encode(np.asarray(block.y), spec.classes, where)
        yield Xb, yi, shard_row_order(spec.seed, epoch, int(b), Xb.shape[0], spec.shuffle), where


# =========================================================================== summaries


@dataclass
class CutoffSummary:
    """Cutoff averaging's survival-time groups, with the hypothesis sum of each group.

    ``groups`` counts, per survival time ``s``, the hypotheses used for exactly
    ``s`` rounds and their last-round losses (:class:`CutoffGroups`); ``G[s]``
    is the sum of those hypotheses; ``h0`` is the hypothesis of the stream's
    first round (Dekel's ``B_0 = 1``).  A shard's epoch is a stream of its own:
    it starts from a new (mixed) hypothesis and the hypothesis open at its end
    is closed there.

    Merge law (streams in order): groups and ``G`` add per survival time,
    ``h0`` and ``loss0`` are the first non-empty stream's.  Associative, with
    the empty summary as identity; commutative except for ``h0``.  ``finalize``
    picks ``k*`` minimising the Theorem 2 bound and returns
    ``(sum_{s>k} (s - k) G_s + [k > 0] h0) / sum_B(k)``.  Memory: one weight
    vector per distinct survival time, at most ``sqrt(2 m)``.
    """

    C: float = 1.0
    delta: float = 0.05
    groups: CutoffGroups = field(default_factory=CutoffGroups)
    G: dict[int, np.ndarray] = field(default_factory=dict)
    h0: np.ndarray | None = None
    k_: int | None = None
    bounds_: np.ndarray | None = None

    def merge(self, other: CutoffSummary) -> CutoffSummary:
        G = dict(self.G)
        for s, v in other.G.items():
            G[s] = G[s] + v if s in G else v
        h0 = self.h0 if self.groups.m else other.h0
        return CutoffSummary(self.C, self.delta, self.groups.merge(other.groups), G, h0)

    def choose(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``(k*, bound per k, sum_B per k)``."""
        if self.groups.m == 0:
            raise ValueError("empty summary: no rounds were observed")
        bounds, sum_b, _ = cutoff_bounds(self.groups, self.C, self.delta)
        return int(np.argmin(bounds)), bounds, sum_b

    def finalize(self) -> np.ndarray:
        k, bounds, sum_b = self.choose()
        self.k_, self.bounds_ = k, bounds
        total = np.zeros_like(self.h0)
        for s in sorted(self.G):
            if s > k:
                total += (s - k) * self.G[s]
        if k > 0:
            total += self.h0
        return total / sum_b[k]

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.G.values()) + (self.h0.nbytes if self.h0 is not None else 0)


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
    kind = spec.conversion[0]
    if kind == "last":
        return None
    if kind in ("average", "tree"):
        return tracker.summary(state)
    groups = tracker._final_groups(state)  # the open hypothesis counted with its age so far
    G = dict(tracker.G)
    age = int(state.age[0])
    if age > 0:  # close the hypothesis open at the end of the shard's stream
        G[age] = G[age] + tracker._open if age in G else tracker._open.copy()
    return CutoffSummary(tracker.C, tracker.delta, groups, G, tracker._h0 if groups.m else None)


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


# =========================================================================== graphs


class _InProcess:
    """Runs the plan here; reductions use :func:`fold`, the tree's in-process twin."""

    def __init__(self, split_every: int) -> None:
        self.split_every = split_every

    def call(self, fn: Callable[..., Any], *args: Any, key: Any, nout: int | None = None) -> Any:
        return fn(*args)

    def reduce(self, parts: Sequence[Any], merge: Callable[..., Any], name: str) -> Any:
        return fold(parts, merge, split_every=self.split_every)


class _DaskGraph:
    """Builds the plan as ``dask.delayed`` tasks; keys are unique per fit (``run``)."""

    def __init__(self, split_every: int, run: str) -> None:
        self.split_every = split_every
        self.run = run

    def call(self, fn: Callable[..., Any], *args: Any, key: Any, nout: int | None = None) -> Any:
        from dask import delayed

        name, *index = key
        return delayed(fn, pure=True, nout=nout)(*args, dask_key_name=(f"{name}-{self.run}", *index))

    def reduce(self, parts: Sequence[Any], merge: Callable[..., Any], name: str) -> Any:
        return tree_reduce(parts, merge, split_every=self.split_every, name=f"{name}-{self.run}")


class IPMPlan(NamedTuple):
    """The outputs of :func:`build_ipm` (values in-process, ``Delayed`` for Dask)."""

    state: Any          #: the final mixed LinearState
    summary: Any        #: the merged conversion summary (None for "last")
    stats: Any          #: list of ShardStats, (epoch, shard) order
    mix_roots: list     #: per epoch, the root of the mixing tree


def build_ipm(ex: Any, sources: Sequence[Any], spec: MixSpec, epochs: int) -> IPMPlan:
    """Iterative parameter mixing as a plan on ``ex`` (:class:`_InProcess` or
    :class:`_DaskGraph`): per epoch, one :func:`shard_epoch` task per shard on the
    previous mixed state, a :func:`merge_mix` tree and one :func:`finish_mix`;
    then one :func:`merge_summaries` tree over every shard-epoch summary in
    (epoch, shard) order."""
    start: Any = None
    summaries: list[Any] = []
    stats: list[Any] = []
    roots: list[Any] = []
    for e in range(epochs):
        parts = []
        for s, src in enumerate(sources):
            part, summ, st = ex.call(shard_epoch, src, s, e, start, spec, key=("ipm-shard", e, s), nout=3)
            parts.append(part)
            summaries.append(summ)
            stats.append(st)
        root = ex.reduce(parts, merge_mix, f"ipm-mix-e{e}")
        roots.append(root)
        start = ex.call(finish_mix, root, start, spec, key=("ipm-start", e + 1))
    summary = None if spec.conversion[0] == "last" else ex.reduce(summaries, merge_summaries, "ipm-summary")
    return IPMPlan(start, summary, ex.call(collect_stats, *stats, key=("ipm-stats",)), roots)


# =========================================================================== estimator


class _SchedulerParam:
    def check(self, name: str, value: Any) -> None:
        if value is None or isinstance(value, str) or hasattr(value, "submit"):
            return
        raise ValueError(f"{name} must be None (in-process), 'local' (a LocalCluster), a scheduler address "
                         f"or a distributed.Client; got {value!r}")


def _conversion_spec(value: Any) -> Any:
    conv = make_conversion(value)  # names and objects, validated there
    if not isinstance(conv, (Last, Average, Tree, Cutoff)):
        raise ValueError(f"conversion must be one of {', '.join(map(repr, CONVERSIONS))} (or Last/Average/Tree/Cutoff "
                         f"objects) for parameter mixing: their summaries merge across shards; got {value!r}")
    if isinstance(conv, Cutoff) and conv.stop_below is not None:
        raise ValueError("Cutoff(stop_below=...) cannot stop a data-parallel run early (the shards run a whole "
                         "epoch each); leave stop_below=None")
    return conv


class _ConversionParam:
    def check(self, name: str, value: Any) -> None:
        _conversion_spec(value)


class ParameterMixing(_OnlineLinearClassifier):
    """One online linear learner trained data-parallel by iterative parameter mixing.

    The training set is cut into ``n_shards`` contiguous shards (runs of a
    store's blocks, or of an array's rows).  Each epoch, every shard trains a
    copy of the ``base`` rule for one pass over its own data, starting from
    the mixed weights of the previous epoch; the shards' weights are then
    averaged into the next start (McDonald et al. 2010).  Shard tasks read
    their blocks themselves (a store by path), and all merges are reduction
    trees of fan-in ``split_every``.

    Parameters
    ----------
    base : str or distlearn linear estimator, default="perceptron"
        The rule: a name (``"perceptron"``, ``"alma"``, ``"pa"``, ...) or an
        estimator such as ``ALMA(alpha=0.8)``; its ``shuffle`` and rule
        parameters are used, its ``epochs``, ``random_state``, ``conversion``,
        ``fit_intercept`` and ``dtype`` are replaced by this estimator's.
    base_params : dict, default=None
        Parameters set on the base estimator.
    n_shards : int, default=8
        Shards S.  A store needs at least S blocks (a shard is a run of whole
        blocks); an array at least S rows.
    epochs : int, default=5
        Mixing rounds: each is one pass of every shard over its data.
    mixing : {"uniform", "updates"}, default="uniform"
        The weights ``mu_s``: proportional to the shard's rows (uniform over
        examples), or -- McDonald's error-based mixing -- to the updates the
        shard made in the epoch, per output column.  A column that no shard
        updated keeps its start value (what any convex mix of identical
        vectors gives).
    conversion : {"last", "average", "tree", "cutoff"} or conversion object, default="last"
        ``"last"``: the final mixed weights.  ``"average"``: the average of
        every hypothesis that predicted a round -- on any shard, in any epoch
        (each shard's run starts from the mixed vector) -- and of the final
        mixed vector: ``(sum_{e,s} sum_t h^{(e,s)}_{t-1} + w^{(E)}) / (E n + 1)``;
        with one shard this is the base estimator's ``"average"`` (the same
        sum, added per epoch).  ``"tree"``: Dekel & Singer's eq. 3 over the
        leaves of every shard's epoch, in (epoch, shard) order, merged in the
        reduction tree (exactly the tree over the concatenated leaves when
        the shards hold equal power-of-two leaf counts and the tree's groups
        are powers of two; otherwise eq. 3 over the nodes as the tree meets
        them).  ``"cutoff"``: Dekel's cutoff averaging in its one-pass groups
        form (``Cutoff(mode="groups")`` whatever the mode asked), every shard's
        epoch being a stream whose hypotheses start at the mixed vector and end
        at the epoch's end; the survival-time groups and their hypothesis sums
        merge by adding.
    scheduler : None, "local", str or distributed.Client, default=None
        None runs the same plan in this process, with the same reduction
        grouping (bit-identical to a Dask run); ``"local"`` starts a
        LocalCluster for the fit; an address (or scheduler file) or a Client
        runs on that cluster.
    split_every : int, default=8
        Fan-in of the reduction trees.
    retries : int, default=0
        Dask retries of a failed task (safe: the tasks are pure).
    random_state : int, RandomState, Generator or None, default=None
        The seed of the stream orders (the base estimator's permutations).
    fit_intercept : bool, default=True
        Learn a bias as the weight of a constant feature.
    dtype : {"float64", "float32"}, default="float64"
        Storage type of the weights.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_, n_features_in_
    n_iter_ : int
        Epochs run.
    online_errors_ : ndarray of shape (epochs,)
        Progressive mistakes of the shard learners, summed over the shards.
    epoch_updates_ : ndarray of shape (epochs,)
        Rounds on which a shard learner updated, summed over the shards.
    shard_errors_, shard_updates_ : ndarray of shape (epochs, n_shards)
    shard_bounds_ : ndarray of shape (n_shards, 2)
        Each shard's blocks (a store) or rows (an array), ``[first, stop)``.
    mixing_weights_ : ndarray of shape (epochs, n_shards, n_outputs)
        The ``mu_s`` used per output column (rows share for a column that no
        shard updated, which is left as it was).
    n_updates_, t_ : int
        Updating rounds and rounds in all.
    summary_ : AverageSummary, TreeSummary, CutoffSummary or None
        The merged conversion summary.

    Notes
    -----
    Every task is a pure function of (shard, epoch, start weights, seed), and
    the trees' grouping depends only on ``n_shards``, ``epochs`` and
    ``split_every``: the model is the same for any number of workers, after
    retries, and in-process.  With ``n_shards=1`` the weights are the base
    estimator's own run, bit for bit.

    References
    ----------
    R. McDonald, K. Hall, G. Mann. Distributed training strategies for the
    structured perceptron. NAACL-HLT 2010.

    Examples
    --------
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> from distlearn.distributed.mixing import ParameterMixing
    >>> d = make_obpm_artificial(2000, 500, random_state=0)
    >>> clf = ParameterMixing(n_shards=4, epochs=5, random_state=0).fit(d.X_train, d.y_train)
    >>> clf.score(d.X_test, d.y_test) > 0.9
    True
    """

    _FITTED = _OnlineLinearClassifier._FITTED + (
        "epoch_updates_", "shard_errors_", "shard_updates_", "shard_bounds_", "mixing_weights_",
        "base_estimator_")

    def __init__(self, *, base: Any = "perceptron", base_params: dict[str, Any] | None = None, n_shards: int = 8,
                 epochs: int = 5, mixing: str = "uniform", conversion: Any = "last", scheduler: Any = None,
                 split_every: int = SPLIT_EVERY, retries: int = 0, random_state: Any = None,
                 fit_intercept: bool = True, dtype: Any = "float64") -> None:
        self.base = base
        self.base_params = base_params
        self.n_shards = n_shards
        self.epochs = epochs
        self.mixing = mixing
        self.conversion = conversion
        self.scheduler = scheduler
        self.split_every = split_every
        self.retries = retries
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.dtype = dtype

    def _check_params(self) -> None:
        from ..ensembles.bayes_point import _resolve_base

        check_params(self, {
            "n_shards": Integral(1, None), "epochs": Integral(1, None), "mixing": Options("uniform", "updates"),
            "conversion": _ConversionParam(), "scheduler": _SchedulerParam(), "split_every": Integral(2, None),
            "retries": Integral(0, None), "random_state": RandomState(), "fit_intercept": Boolean(),
            "dtype": Options("float64", "float32", np.float64, np.float32)})
        _resolve_base(self.base, self.base_params)

    def _base_estimator(self, seed: int) -> _OnlineLinearClassifier:
        from ..ensembles.bayes_point import _resolve_base

        est = _resolve_base(self.base, self.base_params)
        est.set_params(epochs=self.epochs, random_state=seed, conversion="last", fit_intercept=self.fit_intercept,
                       dtype=self.dtype)
        est._check_params()
        return est

    # Batch only: an epoch is a mixing round over all shards.
    @available_if(lambda self: False)
    def partial_fit(self, X: Any, y: Any = None, classes: Any = None) -> ParameterMixing:  # pragma: no cover
        raise AssertionError("unreachable")

    def _plan(self, X: Any, y: Any) -> tuple[list[Any], MixSpec, np.ndarray]:
        seed = rng.normalize_seed(self.random_state)
        self._seed = seed
        base = self._base_estimator(seed)
        S = int(self.n_shards)
        dt = np.dtype(self.dtype)
        if is_store(X):
            from ..data.store import open_dataset

            if y is not None:
                raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
            ds = open_dataset(X)
            if ds.classes is None:
                raise ValueError(f"store {ds.path}: labels are not classes (continuous targets?)")
            nb = ds.n_blocks
            if S > nb:
                raise ValueError(f"n_shards={S} is more than the {nb} blocks of store {ds.path}: a shard is a run of "
                                 f"whole blocks; use n_shards <= {nb}, or rewrite the store with a smaller block_rows")
            base._start(ds.classes, ds.n_features)
            self.n_features_in_ = ds.n_features
            base._prepare(ds, ds.n_samples * self.epochs, first=True)
            edges = shard_edges(nb, S)
            path, token = str(Path(ds.path).resolve()), store_token(ds)
            sources: list[Any] = [StoreShard(path, token, int(edges[s]), int(edges[s + 1]), nb) for s in range(S)]
            nnz = ds.nnz / max(1, ds.n_samples) if ds.is_sparse else ds.n_features
            data: Any = ds
        else:
            X, y = self._validate_xy(X, y, reset=True)
            n = X.shape[0]
            base._start(self._classes(y), X.shape[1])  # first: a one-class input is the error to report
            if S > n:
                raise ValueError(f"n_shards={S} is more than the {n} training rows; use n_shards <= {n}")
            self.classes_ = base.classes_
            yi = self._encode(y)
            base._prepare(X, n * self.epochs, first=True)
            if sp.issparse(X):
                X = X.astype(dt)  # a copy: canonical form may be imposed below
                if not X.has_canonical_format:
                    X.sum_duplicates()
            else:
                X = np.ascontiguousarray(X, dtype=dt)
            edges = shard_edges(n, S)
            sources = [ArrayShard(X[edges[s]:edges[s + 1]], yi[edges[s]:edges[s + 1]], int(edges[s]), n)
                       for s in range(S)]
            nnz = X.nnz / max(1, n) if sp.issparse(X) else X.shape[1]
            data = X
        self.classes_ = base.classes_
        self.base_estimator_ = base
        n_out = base._state.W.shape[1]
        d = base._state.W.shape[0] - 1
        conv = _conversion_spec(self.conversion)
        if isinstance(conv, Last):
            cspec: tuple = ("last",)
        elif isinstance(conv, Average):
            cspec = ("average",)
        elif isinstance(conv, Tree):
            tr = conv.tracker({"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": seed})
            cspec = ("tree", tr.C, tr.leaf_size, tr.loss)
        else:
            tr = conv.tracker({"n_features": d, "n_outputs": n_out, "nnz_per_row": nnz, "seed": seed,
                               "radius": lambda: getattr(base, "radius_", None) or _max_row_norm(data, self.fit_intercept)})
            cspec = ("cutoff", tr.delta, tr.C, tr.loss)
        spec = MixSpec(base._rule_obj, d, n_out, dt.name, bool(self.fit_intercept), seed, bool(base.shuffle),
                       self.mixing, cspec, np.asarray(self.classes_))
        return sources, spec, np.stack([edges[:-1], edges[1:]], axis=1)

    def _fit(self, X: Any, y: Any) -> ParameterMixing:
        sources, spec, bounds = self._plan(X, y)
        self.shard_bounds_ = bounds
        if self.scheduler is None:
            out = build_ipm(_InProcess(int(self.split_every)), sources, spec, int(self.epochs))
            state, summary, stats = out.state, out.summary, out.stats
        else:
            from .cluster import get_client

            with get_client(None if self.scheduler == "local" else self.scheduler) as client:
                state, summary, stats = self._run_dask(client, sources, spec)
        self._set_results(spec, state, summary, stats)
        return self

    def _run_dask(self, client: Any, sources: list[Any], spec: MixSpec) -> tuple[Any, Any, Any]:
        if isinstance(sources[0], ArrayShard):
            # In-memory shards go to the workers once, not into every epoch's tasks.
            sources = client.scatter(sources, hash=False)
        plan = build_ipm(_DaskGraph(int(self.split_every), uuid.uuid4().hex[:12]), sources, spec, int(self.epochs))
        outs = [plan.state, plan.stats] + ([plan.summary] if plan.summary is not None else [])
        # The futures (and scattered shards) are released when they go out of scope.
        values = client.gather(client.compute(outs, retries=int(self.retries), optimize_graph=False))
        state, stats = values[0], values[1]
        return state, (values[2] if len(values) > 2 else None), stats

    def _set_results(self, spec: MixSpec, state: LinearState, summary: Any, stats: list[ShardStats]) -> None:
        E, S, K = int(self.epochs), int(self.n_shards), spec.n_outputs
        rows = np.zeros((E, S), np.int64)
        errs = np.zeros((E, S), np.int64)
        upd = np.zeros((E, S), np.int64)
        col = np.zeros((E, S, K), np.int64)
        for st in stats:
            rows[st.epoch, st.shard] = st.rows
            errs[st.epoch, st.shard] = st.mistakes
            upd[st.epoch, st.shard] = st.updated_rounds
            col[st.epoch, st.shard] = st.updates
        share = rows[:, :, None] / rows.sum(axis=1)[:, None, None]
        if self.mixing == "updates":
            tot = col.sum(axis=1, keepdims=True)
            mu = np.where(tot > 0, col / np.maximum(tot, 1), share)
        else:
            mu = np.broadcast_to(share, (E, S, K)).copy()
        self.mixing_weights_ = mu
        self.online_errors_ = errs.sum(axis=1)
        self.epoch_updates_ = upd.sum(axis=1)
        self.shard_errors_ = errs
        self.shard_updates_ = upd
        self.n_updates_ = int(upd.sum())
        self.t_ = int(rows.sum())
        self.n_iter_ = E
        self._state = state
        self.summary_ = summary
        kind = spec.conversion[0]
        if kind == "last":
            H = hypothesis(state)
        elif kind == "average":
            H = AverageSummary(summary.total, summary.count, hypothesis(state)).finalize()
        else:
            H = summary.finalize()
        dt = np.dtype(spec.dtype)
        self.coef_ = np.ascontiguousarray(H[:, :-1]).astype(dt, copy=False)
        self.intercept_ = H[:, -1].astype(dt) if self.fit_intercept else np.zeros(len(H), dt)
