"""No hang: every way of reaching a cluster has a deadline and a one-line error naming what was tried.

Real processes on 127.0.0.1: ``dask scheduler`` / ``dask worker`` started here, a socketserver
that answers garbage or nothing, an HTTP server, a scheduler killed while a task runs, garbage
certificate files, and ``cluster/local.sh`` started over a stale scheduler file.  The deadlines
are set small through the environment (``DISTLEARN_CONNECT_TIMEOUT``,
``DISTLEARN_WORKER_WAIT``); ``pytest-timeout`` turns any hang into a failure.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from distlearn.cli import main
from distlearn.data import create_dataset
from distlearn.distributed.cluster import SchedulerLost, WorkersGone, WorkersKilled, get_client, make_security
from distlearn.distributed.executor import executor_for

from ..conftest import _dask_cli

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def deadlines(monkeypatch):
    monkeypatch.setenv("DISTLEARN_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("DISTLEARN_WORKER_WAIT", "3")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X = np.random.default_rng(0).standard_normal((60, 3))
    path = tmp_path_factory.mktemp("deadlines") / "s.zarr"
    create_dataset(path, X, np.where(X[:, 0] > 0, 1, -1))
    return str(path)


def _one_line_error(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("distlearn train: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for name in names:
        assert name in lines[0], (name, err)
    return lines[0]


# ---------------------------------------------------------------- services that are not Dask


class _Garbage(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"\xff" * 64 + b"not dask\r\n" * 8)
        self.server.stop.wait(30)


class _Silent(socketserver.BaseRequestHandler):
    def handle(self) -> None:  # accepts, reads, never answers
        self.server.stop.wait(30)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _serve(handler):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.stop = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def services():
    servers = {name: _serve(h) for name, h in (("garbage", _Garbage), ("silent", _Silent), ("http", _Quiet))}
    yield {name: address for name, (_, address) in servers.items()}
    for server, _ in servers.values():
        server.stop.set()
        server.shutdown()
        server.server_close()


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_a_service_that_is_not_a_dask_scheduler_is_one_line(services, deadlines, store, capsys):
    for name, address in services.items():
        with pytest.raises(ConnectionError, match=f"the service at {address} .*not a Dask scheduler") as e:
            with get_client(address):
                pass
        assert "\n" not in str(e.value), name
    assert main(["train", store, "--model", "obpm", "--scheduler", services["http"]]) == 2
    _one_line_error(capsys, services["http"], "not a Dask scheduler")


@pytest.mark.cluster
@pytest.mark.timeout(60)
def test_tls_handshake_failure_names_the_address(services, deadlines, tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI")
    from .test_tls import _make_pki

    good = _make_pki(tmp_path / "pki")
    sec = make_security(good["ca"], good["cert"], good["key"])
    address = services["garbage"].replace("tcp://", "tls://")
    with pytest.raises(ConnectionError, match=f"TLS handshake with {address} failed") as e:
        with get_client(address, security=sec):
            pass
    assert "\n" not in str(e.value)


def test_bad_certificate_files_are_one_line_naming_the_file(tmp_path, store, capsys):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with pytest.raises(ValueError, match=f"TLS CA file '{garbage}' is not a readable PEM") as e:
        make_security(garbage, garbage, garbage)
    assert "\n" not in str(e.value)
    if shutil.which("openssl") is not None:
        from .test_tls import _make_pki

        good = _make_pki(tmp_path / "pki")
        with pytest.raises(ValueError, match=f"TLS certificate '{empty}' with key '{good['key']}'.*does not load"):
            make_security(good["ca"], empty, good["key"])
        other = _make_pki(tmp_path / "other")  # a certificate with another pair's key
        with pytest.raises(ValueError, match=f"TLS certificate '{good['cert']}' with key '{other['key']}'"):
            make_security(good["ca"], good["cert"], other["key"])
    # --workers starts a TLS LocalCluster: refused before any process starts, in one line
    assert main(["train", store, "--model", "obpm", "--workers", "1", "--tls-ca", str(garbage),
                 "--tls-cert", str(garbage), "--tls-key", str(garbage)]) == 2
    _one_line_error(capsys, str(garbage))


# ---------------------------------------------------------------- scheduler files


@pytest.mark.timeout(60)
def test_a_missing_scheduler_file_is_one_line_after_the_connect_wait(deadlines, tmp_path, store, capsys):
    missing = tmp_path / "nowhere" / "scheduler.json"
    with pytest.raises(ConnectionError, match=f"scheduler file '{missing}' does not exist after 2 s"):
        with get_client(str(missing)):
            pass
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ConnectionError, match="empty.json' holds no scheduler address after 2 s"):
        with get_client(str(tmp_path / "empty.json")):
            pass
    assert main(["train", store, "--model", "obpm", "--scheduler", str(missing)]) == 2
    _one_line_error(capsys, str(missing), "DISTLEARN_CONNECT_TIMEOUT")
    # what a file or the flag names must be an address distributed can reach
    (tmp_path / "odd.json").write_text(json.dumps({"address": "tcp://no-port"}))
    with pytest.raises(ValueError, match=r"scheduler file '.*odd.json': 'tcp://no-port' is not a scheduler address"):
        with get_client(str(tmp_path / "odd.json")):
            pass
    for bad in ("garbage://x", str(tmp_path)):
        with pytest.raises(ValueError, match=f"scheduler: '{bad}' is not a scheduler address"):
            with get_client(bad):
                pass


def test_the_waits_are_validated(monkeypatch):
    from distlearn.distributed.cluster import connect_timeout, worker_wait

    monkeypatch.setenv("DISTLEARN_WORKER_WAIT", "2.5")
    assert worker_wait() == 2.5
    monkeypatch.delenv("DISTLEARN_WORKER_WAIT")
    monkeypatch.delenv("DISTLEARN_CONNECT_TIMEOUT", raising=False)
    assert (worker_wait(), connect_timeout()) == (60.0, 10.0)
    for value in ("soon", "0", "-1", "inf", "nan"):
        monkeypatch.setenv("DISTLEARN_WORKER_WAIT", value)
        with pytest.raises(ValueError, match=f"DISTLEARN_WORKER_WAIT='{value}': expected a positive number"):
            worker_wait()


def _start(args, log: Path, env=None) -> subprocess.Popen:
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False", **(env or {})}
    with open(log, "w") as f:
        return subprocess.Popen([*_dask_cli(), *args], stdout=f, stderr=subprocess.STDOUT, env=env)


def _address_in(sched_file: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            return json.loads(sched_file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise AssertionError(f"{sched_file} was not written within 30 s")


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_scheduler_without_workers_says_so_then_fails(monkeypatch, tmp_path, store, capsys):
    monkeypatch.setenv("DISTLEARN_CONNECT_TIMEOUT", "30")  # the file appears while we wait for it
    monkeypatch.setenv("DISTLEARN_WORKER_WAIT", "3")
    sched_file = tmp_path / "scheduler.json"
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(sched_file)], tmp_path / "scheduler.log")
    try:
        with pytest.raises(ConnectionError, match="no Dask worker joined the scheduler at tcp://127.0.0.1:"):
            with get_client(str(sched_file)):
                pass
        address = _address_in(sched_file)
        err = capsys.readouterr().err
        assert f"waiting for workers at {address} (up to 3 s; DISTLEARN_WORKER_WAIT)" in err
        # the CLI: the waiting line, then the error line, nothing else
        assert main(["train", store, "--model", "obpm", "--scheduler", address]) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [
            f"waiting for workers at {address} (up to 3 s; DISTLEARN_WORKER_WAIT)",
            f"distlearn train: error: no Dask worker joined the scheduler at {address} within 3 s; start "
            f"workers (`dask worker {address}`) or wait longer ($DISTLEARN_WORKER_WAIT)",
        ], err
        # a Client handed in (the estimators' scheduler=client) gets the same wait, in the executor
        from distributed import Client

        with Client(address, timeout=10) as c:
            with pytest.raises(ConnectionError, match=f"no Dask worker joined the scheduler at {address}"):
                with executor_for(c):
                    pass
        # and a worker that joins in time ends the wait
        worker = _start(["worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"],
                        tmp_path / "worker.log")
        try:
            monkeypatch.setenv("DISTLEARN_WORKER_WAIT", "60")
            with executor_for(str(sched_file)) as ex:
                assert ex.result(ex.submit("one", int, "7")) == 7
        finally:
            _stop(worker)
    finally:
        _stop(scheduler)


# ---------------------------------------------------------------- faults mid-run


@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_lost_scheduler_and_killed_workers_are_one_line(deadlines, tmp_path):
    sched_file = tmp_path / "scheduler.json"
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}  # one dead worker kills the task
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(sched_file)], tmp_path / "scheduler.log", env)
    worker = None
    try:
        address = _address_in(sched_file)
        worker = _start(["worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"],
                        tmp_path / "worker.log")
        os.environ["DISTLEARN_WORKER_WAIT"] = "60"
        with executor_for(address) as ex:
            # a worker killed while its nanny is still starting takes the nanny with it
            # ("nanny-start-failed"): let the nanny finish starting first
            assert ex.result(ex.submit("warm", int, "1")) == 1
            time.sleep(2.0)
            # a task that kills its worker: one line with its key
            with pytest.raises(WorkersKilled, match=r"a task killed its workers 1 times: die-task") as e:
                ex.result(ex.submit("die-task", os._exit, 3))  # as a segfault would
            assert "\n" not in str(e.value) and isinstance(e.value, ValueError)
            assert ex.result(ex.submit("after", int, "0")) == 0  # the nanny restarted the worker
            # a scheduler that hangs with its connection open (stopped): the wait's ping notices
            h = ex.submit("slow-task", time.sleep, 60.0)
            threading.Timer(1.0, os.kill, (scheduler.pid, signal.SIGSTOP)).start()
            with pytest.raises(SchedulerLost, match=f"the Dask scheduler at {address} was lost"):
                ex.wait([h])
            os.kill(scheduler.pid, signal.SIGCONT)
            # the scheduler killed while a task runs: every kind of wait ends in one line
            threading.Timer(1.0, os.kill, (scheduler.pid, signal.SIGKILL)).start()
            with pytest.raises(SchedulerLost) as lost:
                ex.wait([h])
            with pytest.raises(SchedulerLost):
                ex.result(h)
            with pytest.raises(SchedulerLost):
                list(ex.as_completed([h]))
        msg = str(lost.value)
        assert "\n" not in msg and isinstance(lost.value, ConnectionError)
        assert msg == (f"the Dask scheduler at {address} was lost during the run; rerun with --resume "
                       "(and --checkpoint) to continue from the last checkpoint")
    finally:
        os.environ.pop("DISTLEARN_WORKER_WAIT", None)
        if scheduler.poll() is None:
            os.kill(scheduler.pid, signal.SIGCONT)
        _stop(*([worker] if worker else []), scheduler)


@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_a_cluster_left_without_workers_is_one_line_not_a_wait_forever(deadlines, tmp_path):
    """Every worker dies and none comes back (no nanny here): the next wait ends within
    $DISTLEARN_WORKER_WAIT s of the last ping that saw workers, in one line naming the address."""
    sched_file = tmp_path / "scheduler.json"
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    scheduler = _start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(sched_file)], tmp_path / "scheduler.log", env)
    worker = None
    try:
        address = _address_in(sched_file)
        worker = _start(["worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
                         "--no-nanny"], tmp_path / "worker.log")
        os.environ["DISTLEARN_WORKER_WAIT"] = "30"
        with executor_for(address) as ex:
            os.environ["DISTLEARN_WORKER_WAIT"] = "3"  # the wait for workers mid-run (deadlines: pings every 2 s)
            with pytest.raises(WorkersKilled):
                ex.result(ex.submit("die-task", os._exit, 3))
            assert worker.wait(timeout=30) == 3  # the only worker is gone for good
            h = ex.submit("orphan", int, "0")
            for wait in (lambda: ex.result(h), lambda: ex.wait([h]), lambda: list(ex.as_completed([h]))):
                with pytest.raises(WorkersGone) as gone:
                    wait()
                msg = str(gone.value)
                assert "\n" not in msg and isinstance(gone.value, ConnectionError)
                assert msg.startswith(f"every Dask worker left the scheduler at {address} and none joined "
                                      "within 3 s; start workers (`dask worker")
                assert h.status == "pending"  # nothing ran it, and nothing pretended it did
            # shipping data to a cluster without workers: the same line (Dask's own: a bare TimeoutError)
            with pytest.raises(WorkersGone, match=f"every Dask worker left the scheduler at {address}"):
                ex.scatter(np.arange(3.0))
    finally:
        os.environ.pop("DISTLEARN_WORKER_WAIT", None)
        _stop(*([worker] if worker else []), scheduler)


# ---------------------------------------------------------------- cluster/local.sh


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_local_sh_starts_clean_over_a_stale_scheduler_file(tmp_path):
    bindir = os.path.dirname(_dask_cli()[0]) if os.path.isabs(_dask_cli()[0]) else os.path.dirname(sys.executable)
    env = {**os.environ, "DISTLEARN_CLUSTER_DIR": str(tmp_path), "PATH": f"{bindir}:{os.environ['PATH']}",
           "DISTLEARN_CONNECT_TIMEOUT": "10", "DISTLEARN_WORKER_WAIT": "60"}
    stale = tmp_path / "scheduler.json"
    stale.write_text(json.dumps({"address": "tcp://127.0.0.1:9"}))  # the previous run's file
    script = str(REPO / "cluster" / "local.sh")
    try:
        out = subprocess.run(["bash", script, "1"], env=env, capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, out.stderr
        address = json.loads(stale.read_text())["address"]
        assert address != "tcp://127.0.0.1:9" and f"scheduler {address}" in out.stdout
        with executor_for(str(stale)) as ex:  # it answers, and its worker joins
            assert ex.result(ex.submit("local-sh", int, "5")) == 5
    finally:
        stop = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0 and not stale.exists()
    # a scheduler that never writes its file: the script stops it and fails within its deadline
    fake = tmp_path / "fake-dask"
    fake.write_text("#!/usr/bin/env bash\nexec sleep 600\n")
    fake.chmod(0o755)
    stale.write_text(json.dumps({"address": "tcp://127.0.0.1:9"}))
    out = subprocess.run(["bash", script, "1"], env={**env, "DASK": str(fake), "DISTLEARN_CLUSTER_START_TIMEOUT": "2"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "the scheduler did not come up within 2 s (DISTLEARN_CLUSTER_START_TIMEOUT)" in out.stderr
    assert not stale.exists()  # the stale file was removed, not left for a worker to read


@pytest.mark.cluster
@pytest.mark.timeout(90)
def test_foreign_certificates_against_a_tls_scheduler_are_one_line(deadlines, tmp_path, store, capsys):
    """A real ``dask scheduler --protocol tls``; a client whose certificate another CA signed."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI")
    from .test_tls import _make_pki

    good, other = _make_pki(tmp_path / "good"), _make_pki(tmp_path / "other")
    sched_file = tmp_path / "scheduler.json"
    scheduler = _start(["scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(sched_file), "--tls-ca-file", good["ca"], "--tls-cert",
                        good["cert"], "--tls-key", good["key"]], tmp_path / "scheduler.log")
    try:
        address = _address_in(sched_file)
        assert address.startswith("tls://")
        with pytest.raises(ConnectionError, match=f"the TLS handshake with {address} failed") as e:
            with get_client(address, security=make_security(other["ca"], other["cert"], other["key"])):
                pass
        assert "\n" not in str(e.value)
        assert main(["train", store, "--model", "obpm", "--scheduler", address, "--tls-ca", good["ca"],
                     "--tls-cert", other["cert"], "--tls-key", other["key"]]) == 2
        _one_line_error(capsys, address, "TLS handshake")
    finally:
        _stop(scheduler)


class _SilentFuture:
    """A Dask future as the wait sees it, whose done callback never comes (``fire``: it comes once)."""

    def __init__(self, fire: bool = False) -> None:
        self.status, self.fire, self.callbacks = "pending", fire, []

    def add_done_callback(self, fn):  # noqa: ANN001
        self.callbacks.append(fn)

    def end(self, status: str) -> None:
        self.status = status
        if self.fire:
            for fn in self.callbacks:
                fn(self)


@pytest.mark.timeout(60)  # without the status check this wait never ends
def test_a_wait_reads_an_ended_future_whose_callback_never_comes(monkeypatch):
    """Every wait has a deadline: a future cancelled (or finished) without its done callback -- one lost
    with its worker and then cancelled can miss it -- is seen from its status within a poll or two, once,
    and a future whose callback does come is not reported twice."""
    from types import SimpleNamespace

    from distlearn.distributed import executor as E

    comm = SimpleNamespace(comm=SimpleNamespace(closed=lambda: False))
    ex = object.__new__(E.OnDask)
    ex.client, ex.address = SimpleNamespace(status="running", scheduler_comm=comm), "tcp://127.0.0.1:1"
    silent, loud, late = _SilentFuture(), _SilentFuture(fire=True), _SilentFuture()
    loud.end("finished")  # before the wait: its callback is registered after, so it must still be seen once
    monkeypatch.setattr(E, "POLL_SECONDS", 0.05)
    threading.Timer(0.3, silent.end, ("cancelled",)).start()
    threading.Timer(0.6, late.end, ("error",)).start()
    order = list(ex._completions([silent, loud, late]))
    assert sorted(order) == [0, 1, 2]  # each reported exactly once
    assert [h.status for h in (silent, loud, late)] == ["cancelled", "finished", "error"]
    assert silent.callbacks and late.callbacks and not any(h.fire for h in (silent, late))  # no callback came
