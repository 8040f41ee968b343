"""Where the work runs: a LocalCluster sized to the machine by default, or any scheduler."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def get_client(
    scheduler: Any = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | None = "auto",
    quiet: bool = True,
) -> Iterator[Any]:
    """Yield a ``distributed.Client``; close what this call started.

    Parameters
    ----------
    scheduler : Client, str or None
        An existing ``Client`` (used as is, not closed), a scheduler address
        (``tcp://127.0.0.1:8786``) or a scheduler file path (``*.json``); ``None``
        starts a LocalCluster on 127.0.0.1 with one single-threaded worker
        process per core (numba kernels release the GIL, but the parsers do not).
    n_workers : int, default=None
        LocalCluster size (default: ``os.cpu_count()``).
    """
    from distributed import Client, LocalCluster

    if scheduler is not None and hasattr(scheduler, "submit"):
        yield scheduler
        return
    if scheduler is not None:
        s = str(scheduler)
        client = Client(scheduler_file=s) if s.endswith(".json") else Client(s)
        try:
            yield client
        finally:
            client.close()
        return
    n = n_workers or os.cpu_count() or 1
    kwargs: dict[str, Any] = {}
    if quiet:
        kwargs["silence_logs"] = logging.ERROR
    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=threads_per_worker,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit=memory_limit,
        **kwargs,
    )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
