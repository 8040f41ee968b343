"""Runners: one small interface over "in this process" and "on a Dask cluster".

A driver (e.g. :mod:`distlearn.distributed.learner_parallel`) submits pure
tasks with explicit keys, merges partial results in trees, waits and
gathers.  :class:`InProcessRunner` does the same work in this process (on
threads when ``n_jobs > 1``) with the same task functions and the same merge
grouping, so a job gives the same bits in process and on any cluster.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._config import SPLIT_EVERY
from . import graph


def _resolve(a: Any) -> Any:
    return a.result() if isinstance(a, Future) else a


class InProcessRunner:
    """Run tasks here: immediately (``n_jobs=1``) or on a thread pool.

    Submission order is execution order on the pool, and a task only waits for
    tasks submitted before it, so chains cannot deadlock.
    """

    kind = "in-process"

    def __init__(self, n_jobs: int = 1) -> None:
        self.n_jobs = max(1, int(n_jobs))
        self._pool = ThreadPoolExecutor(self.n_jobs) if self.n_jobs > 1 else None
        self.n_workers = self.n_jobs

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any) -> Future:
        if self._pool is not None:
            return self._pool.submit(lambda: fn(*[_resolve(a) for a in args]))
        f: Future = Future()
        try:
            f.set_result(fn(*[_resolve(a) for a in args]))
        except BaseException as exc:  # surfaced by result(), as on the pool
            f.set_exception(exc)
        return f

    def tree(self, key: str, parts: Sequence[Any], merge: Callable[..., Any], split_every: int = SPLIT_EVERY) -> Future:
        return self.submit(key, lambda *vals: graph.fold(vals, merge, split_every=split_every), *parts)

    def wait(self, handles: Sequence[Any]) -> None:
        for h in handles:
            h.result()

    def result(self, handle: Any) -> Any:
        return handle.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def describe(self) -> str:
        return f"in-process, {self.n_jobs} thread{'s' if self.n_jobs > 1 else ''}"


class DaskRunner:
    """Run tasks on a ``distributed.Client``.

    Every task gets an explicit key; the same key within a job is the same
    work (a retry after a lost worker recomputes it, with the same bits).
    ``retries`` re-runs a task that raised (a flaky file system); a task whose
    worker died is rescheduled by Dask itself.
    """

    kind = "dask"

    def __init__(self, client: Any, retries: int = 1) -> None:
        self.client = client
        self.retries = int(retries)
        info = client.scheduler_info()
        self.n_workers = max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, key=key, retries=self.retries)

    def tree(self, key: str, parts: Sequence[Any], merge: Callable[..., Any], split_every: int = SPLIT_EVERY) -> Any:
        return self.client.compute(graph.tree_reduce(parts, merge, split_every=split_every, name=key),
                                   retries=self.retries)

    def wait(self, handles: Sequence[Any]) -> None:
        from distributed import wait

        wait(list(handles))
        for h in handles:  # raise the first task error, with the worker's traceback
            if h.status == "error":
                h.result()

    def result(self, handle: Any) -> Any:
        return handle.result()

    def close(self) -> None:
        pass

    def describe(self) -> str:
        try:
            from .cluster import describe
        except ImportError:  # pragma: no cover
            return f"dask scheduler {self.client.scheduler.address}, {self.n_workers} worker threads"
        return "dask " + describe(self.client)


#: Work (multiply-adds) above which ``scheduler=None`` starts a LocalCluster for a store.
AUTO_CLUSTER_WORK = 1e10


@contextlib.contextmanager
def runner_for(scheduler: Any, *, n_jobs: int = 1, work: float = 0.0, retries: int = 1) -> Iterator[Any]:
    """The runner a job should use.

    ``scheduler`` : ``None`` (auto: a LocalCluster sized to the machine when
    the job's ``work`` exceeds :data:`AUTO_CLUSTER_WORK` multiply-adds and the
    machine has more than one core, else this process), ``"in-process"``,
    ``"local"`` (a LocalCluster for this job, closed after it), a scheduler
    address (``tcp://host:port``, ``tls://...``), a scheduler file
    (``*.json``) or a ``distributed.Client``.
    """
    from .cluster import get_client

    if scheduler is None:
        big = work > AUTO_CLUSTER_WORK and (os.cpu_count() or 1) > 1
        scheduler = "local" if big else "in-process"
    if isinstance(scheduler, str) and scheduler in ("in-process", "sync", "threads"):
        r = InProcessRunner(n_jobs)
        try:
            yield r
        finally:
            r.close()
        return
    with get_client(None if scheduler == "local" else scheduler) as client:
        yield DaskRunner(client, retries=retries)
