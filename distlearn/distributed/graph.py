"""Graph builders: reduction trees over partial results, never a gather on one worker.

Partial results -- the weights of learner groups, the summaries of data
shards, margins of a chunk -- are combined by a *merge* that takes up to
``split_every`` parts and folds them left to right.  :func:`tree_reduce`
arranges the merges in a tree (dask's ``split_every`` idiom, as in
``dask.array`` reductions): level ``l`` merges consecutive runs of at most
``split_every`` nodes of level ``l - 1``, so the fan-in is at most
``split_every``, the depth is ``ceil(log_s(G))`` for ``G`` parts, and no
worker ever holds more than ``split_every`` parts at once.  The parts keep
their order, so for an associative merge the value equals the sequential
fold ``merge(merge(p0, p1), p2) ...`` (exactly for exact merges -- integer
counts, the tree conversion's selections, cutoff groups -- and to rounding
for floating-point sums).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._config import SPLIT_EVERY


def tree_depth(n_parts: int, split_every: int = SPLIT_EVERY) -> int:
    """Number of merge levels :func:`tree_reduce` builds for ``n_parts`` parts."""
    if n_parts < 1:
        raise ValueError(f"need at least one part, got {n_parts}")
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    depth, n = 0, int(n_parts)
    while n > 1:
        n = math.ceil(n / split_every)
        depth += 1
    return depth


def tree_reduce(parts: Sequence[Any], merge: Callable[..., Any], *, split_every: int = SPLIT_EVERY,
                name: str | None = None) -> Any:
    """A ``dask.delayed`` reduction tree over ``parts``.

    Parameters
    ----------
    parts : sequence of values, ``Delayed`` objects or ``distributed.Future``
        The partial results, in the order the fold sees them.  Futures stay on
        the workers that hold them; only the merge tasks move data, at most
        ``split_every`` parts into one task.
    merge : callable ``merge(*parts) -> part``
        Must be a pure function (a retried task recomputes the same bits).
    split_every : int, default=``distlearn._config.SPLIT_EVERY`` (8)
        Maximum fan-in of one merge.
    name : str, optional
        Key prefix of the merge tasks (default: the merge's name).  Keys are
        ``(f"{name}-{token}", level, index)``; the token hashes the parts, so a
        different input gives different keys.

    Returns
    -------
    Delayed
        Compute it (``client.compute(d)`` or ``d.compute()``) for the merged
        value.  With one part the tree is a single pass-through merge of it.
    """
    from dask import delayed
    from dask.base import tokenize

    parts = list(parts)
    depth = tree_depth(len(parts), split_every)
    prefix = name or getattr(merge, "__name__", "merge")
    token = tokenize(prefix, split_every, *parts)
    level = parts
    if depth == 0:
        return delayed(merge, pure=True)(level[0], dask_key_name=(f"{prefix}-{token}", 1, 0))
    for lev in range(1, depth + 1):
        level = [
            delayed(merge, pure=True)(*level[i : i + split_every], dask_key_name=(f"{prefix}-{token}", lev, i // split_every))
            for i in range(0, len(level), split_every)
        ]
    return level[0]


def fold(parts: Iterable[Any], merge: Callable[..., Any], *, split_every: int = SPLIT_EVERY) -> Any:
    """The same tree evaluated in this process (no Dask): the in-process twin of
    :func:`tree_reduce`, with the same grouping and therefore the same rounding.

    ``parts`` may be any iterable, consumed once and in order: a group is merged as soon as
    it is complete, so at most ``split_every - 1`` values per level wait (a generator of
    large parts is folded in ``O(split_every * depth)`` parts of memory, not ``O(len)``)."""
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    waiting: list[list[Any]] = []  # waiting[l]: the open group of level-l nodes

    def push(level: int, value: Any) -> None:
        while True:
            if level == len(waiting):
                waiting.append([])
            waiting[level].append(value)
            if len(waiting[level]) < split_every:
                return
            value, waiting[level] = merge(*waiting[level]), []
            level += 1

    n = 0
    for part in parts:
        push(0, part)
        n += 1
    if n == 0:
        raise ValueError("need at least one part")
    if n == 1:
        return merge(waiting[0][0])
    depth = tree_depth(n, split_every)
    for level in range(depth):  # the last, incomplete group of every level (tree_reduce merges it too)
        if waiting[level]:
            group, waiting[level] = waiting[level], []
            push(level + 1, merge(*group))
    return waiting[depth][0]


def sum_tuples(*parts: Any) -> tuple[Any, ...]:
    """A merge of tuples: element ``i`` of the result is :func:`sum_parts` of the parts' elements ``i``."""
    return tuple(sum_parts(*column) for column in zip(*parts))


def sum_parts(*parts: Any) -> Any:
    """A merge that adds its parts left to right (arrays, numbers)."""
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out
