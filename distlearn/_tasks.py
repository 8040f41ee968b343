"""What a layer below the executor may ask of it: an ordered map of independent tasks.

The data layer (converters, corpus readers) cannot import :mod:`distlearn.distributed`
(it sits four layers above), so it takes an *executor-like* object from its caller:
anything with :meth:`OrderedMap.map_ordered`, which every
:class:`~distlearn.distributed.executor.Executor` has.  ``None`` means this process, one
task after the other (:func:`run_ordered`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["OrderedMap", "run_ordered", "in_this_process"]


@runtime_checkable
class OrderedMap(Protocol):
    """Runs ``fn(*job, **shared)`` for every job and yields the results in job order."""

    def map_ordered(self, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], **shared: Any) -> Iterator[Any]:
        ...


def in_this_process(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], **shared: Any) -> Iterator[Any]:
    """The ordered map of one thread: each job when the one before it is consumed."""
    for job in jobs:
        yield fn(*job, **shared)


def run_ordered(executor: OrderedMap | None, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]],
                **shared: Any) -> Iterator[Any]:
    """``fn(*job, **shared)`` for every job, in job order, on ``executor`` (``None``: here, in turn)."""
    if executor is None:
        return in_this_process(fn, jobs, **shared)
    if not isinstance(executor, OrderedMap):
        raise TypeError(f"executor must be a distlearn executor (distlearn.distributed.executor_for) or None; "
                        f"got {type(executor).__name__}")
    return executor.map_ordered(fn, jobs, **shared)
