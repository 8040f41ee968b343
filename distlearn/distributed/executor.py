"""The executor: one interface over "in this process" and "on a Dask cluster".

Every parallel plan of distlearn -- learner-parallel OBPM, data-parallel
parameter mixing, run-parallel grids and permutation members -- is written once
against this interface: it submits pure tasks under explicit keys, merges
partial results in reduction trees, waits and gathers.  :class:`InProcess`
runs the same task functions with the same merge grouping
(:func:`~distlearn.distributed.graph.fold`) here, so a plan gives the same bits
in this process and on any cluster.

``scheduler=``, wherever an estimator or :func:`~distlearn.distributed.run_grid`
accepts it, means what :func:`executor_for` says, and nothing else:

==============================  =======================================================
``None``, ``"in-process"``      this process (threads where the plan has ``n_jobs``)
``"local"``, ``"local:N"``      a LocalCluster on 127.0.0.1 for this call, closed after
                                it (N, or ``n_workers``, or one per core, single-threaded
                                worker processes)
``"tcp://host:8786"``           the scheduler at that address (``tls://`` with TLS
                                from dask's configuration or :func:`make_security`)
``"path/scheduler.json"``       the scheduler a scheduler file names
``"slurm:FILE[:N]"``            N SLURM (``"pbs:FILE[:N]"``: PBS) jobs of dask workers, as
                                the dask-jobqueue file FILE describes (e.g.
                                ``cluster/jobqueue.yaml``), cancelled after the call
``SchedulerAddress(s, sec)``    any of the above with its TLS ``security`` (plain data)
a ``distributed.Client``        that client's cluster (not closed afterwards); an
                                estimator's copies and pickles hold its address instead
                                (:func:`distlearn._validation.plain_scheduler`)
==============================  =======================================================

A cluster is never started unasked: ``None`` is always this process.  Nothing
outside ``distributed/`` builds a client or submits a task: the converters, the
corpus readers, ``predict``, the experiments and the CLI take ``scheduler=`` (plain
data) and run through :func:`executor_for`; the data layer, which cannot import this
module, receives the executor from its caller and uses only :meth:`Executor.map_ordered`
(:class:`distlearn._tasks.OrderedMap`).
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._config import SPLIT_EVERY
from .._tasks import in_this_process
from .._validation import SchedulerAddress, plain_scheduler
from . import graph
from .cluster import (SchedulerLost, WorkersGone, adaptive, cluster_faults, connect_timeout, describe,
                      ensure_workers, get_client, is_lost, scheduler_workers, worker_wait)

#: Seconds between the liveness checks of a wait on Dask (a wait never blocks longer than this
#: without looking at the client's connection to its scheduler).
POLL_SECONDS = 1.0
#: The statuses of a Dask future that has ended (its result, error or cancellation can be read).
ENDED = ("finished", "error", "cancelled")

__all__ = ["Executor", "InProcess", "OnDask", "executor_for"]


def _resolve(a: Any) -> Any:
    return a.result() if isinstance(a, Future) else a


class Executor:
    """What a plan may do.  ``kind`` is ``"in-process"`` or ``"dask"``; ``n_workers`` the parallelism."""

    kind: str
    n_workers: int
    #: ``scheduler=`` as plain data that reaches the same place (for an estimator run inside this job)
    scheduler: Any = None
    #: Do the tasks see this process's files (the same machine)?  Then a converter's tasks may
    #: write the store's chunks themselves (:func:`distlearn.data._rcv1.convert_rcv1`).
    local_files: bool = False

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any, nout: int | None = None) -> Any:
        """Run ``fn(*args)`` (handles among ``args`` are replaced by their values) as the task ``key``.

        With ``nout=k`` the task returns a k-tuple and a list of k handles is returned.
        """
        raise NotImplementedError

    def tree(self, key: str, parts: Sequence[Any], merge: Callable[..., Any], split_every: int = SPLIT_EVERY,
             priority: int = 0) -> Any:
        """A reduction tree of fan-in ``split_every`` over ``parts`` (the same grouping everywhere).

        ``priority > 0``: on Dask a merge whose parts are ready runs before tasks submitted with the default
        priority 0 (the parts still to compute), so finished parts do not pile up on the workers."""
        raise NotImplementedError

    def scatter(self, obj: Any) -> Any:
        """A handle to ``obj`` that tasks can take as an argument (shipped to the cluster once)."""
        raise NotImplementedError

    def wait(self, handles: Sequence[Any]) -> None:
        """Block until every handle is done; raise the first task error."""
        raise NotImplementedError

    def result(self, handle: Any) -> Any:
        raise NotImplementedError

    def as_completed(self, handles: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """``(index, handle)`` as the tasks finish (in submission order in process)."""
        raise NotImplementedError

    def cancel(self, handles: Sequence[Any]) -> None:
        """Drop what is still pending."""

    def describe(self) -> str:
        raise NotImplementedError

    def map_ordered(self, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], **shared: Any) -> Iterator[Any]:
        """``fn(*job, **shared)`` for every job, yielded in job order (an ordered map).

        At most ``2 * n_workers`` tasks are in flight: a task is submitted only when the
        result ``2 * n_workers`` places before it was taken, so a long input streams in
        bounded memory.  Leaving the loop early (an error in a result) cancels the rest.
        The results are those of :func:`distlearn._tasks.in_this_process`, the same bits.
        """
        shared = self._share(shared)
        window = 2 * max(1, int(self.n_workers))
        handles: list[Any] = []
        try:
            for i in range(len(jobs)):
                while len(handles) < len(jobs) and len(handles) < i + window:
                    handles.append(self._submit_job(fn, jobs[len(handles)], shared))
                res = self.result(handles[i])
                handles[i] = None  # let the worker drop it
                yield res
        finally:
            with contextlib.suppress(Exception):  # a lost scheduler is already the error being raised
                self.cancel([h for h in handles if h is not None])

    def _share(self, shared: dict[str, Any]) -> dict[str, Any]:
        return shared

    def _submit_job(self, fn: Callable[..., Any], job: tuple[Any, ...], shared: dict[str, Any]) -> Any:
        raise NotImplementedError


class InProcess(Executor):
    """Run tasks here: at once (``n_jobs=1``) or on a thread pool.

    Submission order is execution order on the pool, and a task only waits for
    tasks submitted before it, so task chains cannot deadlock.
    """

    kind = "in-process"
    scheduler = "in-process"
    local_files = True

    def __init__(self, n_jobs: int = 1) -> None:
        self.n_jobs = max(1, int(n_jobs))
        self._pool = ThreadPoolExecutor(self.n_jobs) if self.n_jobs > 1 else None
        self.n_workers = self.n_jobs

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any, nout: int | None = None) -> Any:
        if self._pool is not None:
            f = self._pool.submit(lambda: fn(*[_resolve(a) for a in args]))
        else:
            f = Future()
            try:
                f.set_result(fn(*[_resolve(a) for a in args]))
            except BaseException as exc:  # surfaced by result(), as on the pool
                f.set_exception(exc)
        if nout is None:
            return f
        return [self.submit((key, "out", i), operator.getitem, f, i) for i in range(nout)]

    def tree(self, key: str, parts: Sequence[Any], merge: Callable[..., Any], split_every: int = SPLIT_EVERY,
             priority: int = 0) -> Any:
        return self.submit(key, lambda *vals: graph.fold(vals, merge, split_every=split_every), *parts)

    def scatter(self, obj: Any) -> Any:
        return obj

    def wait(self, handles: Sequence[Any]) -> None:
        for h in handles:
            h.result()

    def result(self, handle: Any) -> Any:
        return _resolve(handle)

    def as_completed(self, handles: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for i, h in enumerate(handles):
            h.exception()  # wait
            yield i, h

    def cancel(self, handles: Sequence[Any]) -> None:
        for h in handles:
            if isinstance(h, Future):
                h.cancel()

    def map_ordered(self, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], **shared: Any) -> Iterator[Any]:
        if self._pool is None:
            return in_this_process(fn, jobs, **shared)
        return super().map_ordered(fn, jobs, **shared)

    def _submit_job(self, fn: Callable[..., Any], job: tuple[Any, ...], shared: dict[str, Any]) -> Any:
        assert self._pool is not None
        return self._pool.submit(fn, *job, **shared)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def describe(self) -> str:
        return f"in-process, {self.n_jobs} thread{'s' if self.n_jobs > 1 else ''}"


class OnDask(Executor):
    """Run tasks on a ``distributed.Client``.

    Every task gets an explicit key; the same key within a plan is the same
    work (a retry after a lost worker recomputes it, with the same bits).
    ``retries`` re-runs a task that raised (a flaky file system); a task whose
    worker died is rescheduled by Dask itself.

    Nothing here waits blindly: creating one waits for a first worker at most
    ``$DISTLEARN_WORKER_WAIT`` seconds (:func:`~.cluster.ensure_workers`), and
    every wait (``wait``, ``result``, ``as_completed``) checks the client's
    connection every :data:`POLL_SECONDS`, so a lost scheduler is one line,
    :class:`~.cluster.SchedulerLost` (a ConnectionError), and a task that
    killed its workers :class:`~.cluster.WorkersKilled` (a ValueError).
    """

    kind = "dask"

    def __init__(self, client: Any, retries: int = 1) -> None:
        self.client = client
        self.retries = int(retries)
        self.address = str(getattr(client.scheduler, "address", None) or "?")
        self.scheduler = plain_scheduler(client)
        with cluster_faults(client, self.address):
            ensure_workers(client, self.address)  # a scheduler alone: say so, then a deadline
            info = client.scheduler_info(n_workers=-1)
        self.local_files = _on_this_machine(info.get("workers", {}))
        self.n_workers = max(1, int(info.get("total_threads") or 0)
                             or sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def submit(self, key: Any, fn: Callable[..., Any], *args: Any, nout: int | None = None) -> Any:
        with cluster_faults(self.client, self.address):
            f = self.client.submit(fn, *args, key=key, retries=self.retries)
            if nout is None:
                return f
            name, *index = key if isinstance(key, tuple) else (key,)
            return [self.client.submit(operator.getitem, f, i, key=(f"{name}-out{i}", *index))
                    for i in range(nout)]

    def tree(self, key: str, parts: Sequence[Any], merge: Callable[..., Any], split_every: int = SPLIT_EVERY,
             priority: int = 0) -> Any:
        with cluster_faults(self.client, self.address):
            return self.client.compute(graph.tree_reduce(parts, merge, split_every=split_every, name=key),
                                       retries=self.retries, priority=priority)

    def scatter(self, obj: Any) -> Any:
        """``obj`` on a worker; a cluster without workers gets ``$DISTLEARN_WORKER_WAIT`` s for one to
        join (Dask's own wait is its connect timeout, then a bare ``TimeoutError``), then is
        :class:`~.cluster.WorkersGone`."""
        with cluster_faults(self.client, self.address):
            try:
                return self.client.scatter([obj], broadcast=False, hash=True)[0]
            except TimeoutError:
                if is_lost(self.client):
                    raise
                ensure_workers(self.client, self.address, mid_run=True)
                return self.client.scatter([obj], broadcast=False, hash=True)[0]

    def _completions(self, handles: Sequence[Any]) -> Iterator[int]:
        """The indices of ``handles`` as they finish (done, failed or cancelled).

        Never blocks longer than :data:`POLL_SECONDS` without checking that the client still
        has its scheduler: a closed connection (the client gives up reconnecting after
        ``$DISTLEARN_CONNECT_TIMEOUT`` s and cancels every future, which wakes this up at
        once) is :class:`~.cluster.SchedulerLost`.  After ``$DISTLEARN_CONNECT_TIMEOUT`` s
        without a finished task, the scheduler must also answer a ping
        (:func:`~.cluster.scheduler_workers`): a scheduler that hangs with its connection
        open (stopped, wedged) is lost too, not a wait forever.  The same ping counts the
        workers: a cluster that has had none for ``$DISTLEARN_WORKER_WAIT`` s (every worker
        died, and no nanny or batch job brought one back) is :class:`~.cluster.WorkersGone`,
        unless it is adaptive (it starts workers for the tasks it holds).
        """
        import queue

        done: queue.SimpleQueue[int] = queue.SimpleQueue()
        every, grace = connect_timeout(), (None if adaptive(self.client) else worker_wait())
        with cluster_faults(self.client, self.address):
            for i, h in enumerate(handles):
                h.add_done_callback(lambda _, i=i: done.put(i))
            left, last, seen, empty_since = len(handles), time.monotonic(), set(), None
            while left:
                try:
                    i = done.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    if is_lost(self.client):
                        raise SchedulerLost(self.address) from None
                    # a future that ended without its callback (one lost and then cancelled by the
                    # scheduler can miss it) is read from its status, not waited for forever
                    ended = [j for j, h in enumerate(handles) if j not in seen and h.status in ENDED]
                    if not ended:
                        if time.monotonic() - last >= every:
                            workers = scheduler_workers(self.client, 3 * every)
                            if workers is None:
                                raise SchedulerLost(self.address) from None
                            last = time.monotonic()
                            if workers or grace is None:
                                empty_since = None
                            elif empty_since is None:
                                empty_since = last
                            elif last - empty_since >= grace:
                                raise WorkersGone(self.address, grace)
                        continue
                    i = ended[0]
                if i in seen:  # its callback came after the status was read
                    continue
                seen.add(i)
                left, last = left - 1, time.monotonic()
                if handles[i].status == "cancelled" and is_lost(self.client):
                    raise SchedulerLost(self.address)  # its tasks were cancelled with it
                yield i

    def wait(self, handles: Sequence[Any]) -> None:
        handles = list(handles)
        for i in self._completions(handles):
            if handles[i].status != "finished":  # raise the first task error, with the worker's traceback
                self.result(handles[i])

    def result(self, handle: Any) -> Any:
        if not handle.done():
            for _ in self._completions([handle]):
                pass
        with cluster_faults(self.client, self.address):
            return handle.result()

    def as_completed(self, handles: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        handles = list(handles)
        for i in self._completions(handles):
            yield i, handles[i]

    def cancel(self, handles: Sequence[Any]) -> None:
        pending = [h for h in handles if not h.done()]
        if pending:
            self.client.cancel(pending)

    def _share(self, shared: dict[str, Any]) -> dict[str, Any]:
        """Dict and array values go to every worker once; the rest travel with each task."""
        import numpy as np

        with cluster_faults(self.client, self.address):
            # a list around each value: scatter() would spread a dict's items as separate futures
            return {k: (self.client.scatter([v], broadcast=True, hash=False)[0]
                        if isinstance(v, (dict, np.ndarray)) else v) for k, v in shared.items()}

    def _submit_job(self, fn: Callable[..., Any], job: tuple[Any, ...], shared: dict[str, Any]) -> Any:
        with cluster_faults(self.client, self.address):
            return self.client.submit(fn, *job, pure=True, retries=self.retries, **shared)

    def describe(self) -> str:
        return "dask " + describe(self.client)


def _on_this_machine(workers: dict[str, Any]) -> bool:
    """Are all these Dask workers (their addresses ``tcp://host:port``) on the loopback interface,
    so on this machine, seeing its files?  Any other address counts as another machine."""
    from urllib.parse import urlsplit

    hosts = {urlsplit(a).hostname for a in workers}
    return bool(hosts) and hosts <= {"127.0.0.1", "localhost", "::1"}


@contextlib.contextmanager
def executor_for(scheduler: Any, *, n_jobs: int = 1, retries: int = 1, n_workers: int | None = None,
                 security: Any = None) -> Iterator[Executor]:
    """The executor for ``scheduler`` (see the module docstring for its meanings).

    ``n_jobs`` sizes the in-process thread pool, ``n_workers`` a ``"local"``
    cluster, ``retries`` the Dask retries of a failed task, ``security`` the TLS
    of a cluster this call connects to or starts.  Whatever this call started (a
    thread pool, a LocalCluster, jobqueue jobs, a client) is closed when the
    ``with`` block ends; a Client passed in is not.
    """
    if isinstance(scheduler, SchedulerAddress):  # a Client reduced to plain data (an estimator's copy)
        scheduler, security = scheduler.address, security if security is not None else scheduler.security
    if scheduler is None or (isinstance(scheduler, str) and scheduler == "in-process"):
        ex = InProcess(n_jobs)
        try:
            yield ex
        finally:
            ex.close()
        return
    if isinstance(scheduler, str) and scheduler in ("sync", "threads", ""):
        raise ValueError(f"scheduler={scheduler!r} is not a distlearn scheduler; use None or 'in-process' (this "
                         "process), 'local', an address, a scheduler file, 'slurm:FILE', 'pbs:FILE' "
                         "or a distributed.Client")
    if isinstance(scheduler, str) and scheduler.startswith("local:"):
        n = scheduler[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"scheduler={scheduler!r}: 'local:N' takes a positive number of workers N")
        scheduler, n_workers = "local", int(n)
    with get_client(scheduler, n_workers=n_workers, security=security) as client:
        yield OnDask(client, retries=retries)
