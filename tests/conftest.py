"""Shared fixtures: a real Dask cluster (scheduler + worker processes on 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: The team's copies of the public data sets, next to the checkout (absent on a user's machine:
#: the tests that need them are marked slow and skip without them).
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# The examples find their data the way a user's run does (distlearn.data.public): point them here.
os.environ.setdefault("DISTLEARN_FASHION_MNIST", str(SHARED_DATA / "fashion-mnist"))
os.environ.setdefault("DISTLEARN_LETTER", str(SHARED_DATA / "letter.svm"))


def _dask_cli() -> list[str]:
    exe = shutil.which("dask", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "distributed.cli.dask_spec"]


def _real_cluster(tmp_path_factory, n_workers):
    """A real ``dask scheduler`` with ``n_workers`` single-threaded ``dask worker`` processes, loopback only."""
    from distributed import Client

    d = tmp_path_factory.mktemp("cluster")
    sched_file = d / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    cli = _dask_cli()
    logs = [open(d / f"{n}.log", "w") for n in ("scheduler", *(f"worker{k}" for k in range(n_workers)))]
    procs = [
        subprocess.Popen(
            [*cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)],
            stdout=logs[0], stderr=subprocess.STDOUT, env=env,
        )
    ]
    deadline = time.time() + 60
    while not sched_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    for k in range(1, n_workers + 1):
        procs.append(
            subprocess.Popen(
                [*cli, "worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1",
                 "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--memory-limit", "2GiB"],
                stdout=logs[k], stderr=subprocess.STDOUT, env=env,
            )
        )
    try:
        with Client(scheduler_file=str(sched_file), timeout=60) as c:
            c.wait_for_workers(n_workers, timeout=90)
            address = c.scheduler.address
        yield {"address": address, "scheduler_file": str(sched_file)}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


@pytest.fixture(scope="session")
def dask_scheduler(tmp_path_factory):
    """Address of a real ``dask scheduler`` with two ``dask worker`` processes, loopback only."""
    yield from _real_cluster(tmp_path_factory, 2)


@pytest.fixture(scope="session")
def dask_scheduler_one_worker(tmp_path_factory):
    """The same with one ``dask worker`` process (worker-count independence)."""
    yield from _real_cluster(tmp_path_factory, 1)


@pytest.fixture
def client(dask_scheduler):
    from distributed import Client

    with Client(dask_scheduler["address"], timeout=60) as c:
        yield c
