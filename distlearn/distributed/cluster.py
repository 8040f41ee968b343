"""Where the work runs: a LocalCluster sized to the machine by default, or any scheduler.

Security
--------
Dask encrypts and authenticates its connections with TLS when the scheduler
listens on a ``tls://`` address.  distributed's TLS is *mutual*: the
scheduler, every worker and every client present a certificate signed by a
certificate authority (CA) that the others trust, so a client without such a
certificate is refused.  :func:`make_security` builds the
``distributed.Security`` object from the CLI flags ``--tls-ca``,
``--tls-cert`` and ``--tls-key`` or from a config file, and
:func:`get_client` uses it to connect (or to start a TLS LocalCluster).
Without a ``security`` argument, distributed reads the dask config section
``distributed.comm.tls`` (e.g. ``~/.config/dask/distributed.yaml``), as it
always does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing.process
import os
import ssl
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_ROLES = ("client", "scheduler", "worker")
# Keys of dask's ``distributed.comm.tls`` config section -> ``Security`` argument.
_TLS_KEYS = {
    "ca-file": "tls_ca_file",
    "ciphers": "tls_ciphers",
    "min-version": "tls_min_version",
    "max-version": "tls_max_version",
    **{f"{r}.{k}": f"tls_{r}_{k}" for r in _ROLES for k in ("cert", "key")},
}
_PATH_KEYS = ("ca-file", *(f"{r}.{k}" for r in _ROLES for k in ("cert", "key")))
_TLS_VERSIONS = {1.2: ssl.TLSVersion.TLSv1_2, 1.3: ssl.TLSVersion.TLSv1_3}


def _check_file(path: Any, what: str) -> str:
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise FileNotFoundError(f"{what}: no such file: {p!r}")
    return p


def _flatten_tls(section: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``{"ca-file": .., "client": {"cert": ..}}`` -> ``{"ca-file": .., "client.cert": ..}``."""
    flat: dict[str, Any] = {}
    for key, value in section.items():
        k = str(key).replace("_", "-")
        if k in _ROLES and isinstance(value, Mapping):
            for sub, v in value.items():
                flat[f"{k}.{str(sub).replace('_', '-')}"] = v
        else:
            flat[k] = value
    unknown = sorted(set(flat) - set(_TLS_KEYS))
    if unknown:
        raise ValueError(
            f"{source}: unknown TLS setting(s) {unknown}; expected keys of dask's "
            f"distributed.comm.tls section: {sorted(_TLS_KEYS)}"
        )
    return {k: v for k, v in flat.items() if v is not None}


def _load_tls_config(config: str | os.PathLike[str]) -> tuple[dict[str, Any], bool | None]:
    """Read a YAML/JSON TLS config file; relative paths are taken from its folder."""
    import yaml  # a dependency of dask

    path = Path(_check_file(config, "--tls-config"))
    source = f"TLS config {str(path)!r}"
    try:
        text = path.read_text()
        data = (json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)) or {}
    except (yaml.YAMLError, ValueError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        raise ValueError(f"{source}: not valid YAML/JSON: {e}") from e
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: expected a mapping of TLS settings, got {type(data).__name__}")
    require: bool | None = None
    if "distributed" in data:  # a whole dask config file: distributed.comm.tls
        comm = (data.get("distributed") or {}).get("comm") or {}
        require = comm.get("require-encryption", comm.get("require_encryption"))
        data = comm.get("tls") or {}
    flat = _flatten_tls(data, source)
    for key in _PATH_KEYS:
        if key in flat:
            p = Path(os.path.expanduser(str(flat[key])))
            flat[key] = _check_file(p if p.is_absolute() else path.parent / p, f"{source}: {key}")
    for key in ("min-version", "max-version"):
        if key in flat:
            try:
                flat[key] = _TLS_VERSIONS[float(flat[key])]
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{source}: {key}={flat[key]!r}; expected 1.2 or 1.3") from None
    return flat, require


def make_security(
    tls_ca: str | os.PathLike[str] | None = None,
    tls_cert: str | os.PathLike[str] | None = None,
    tls_key: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
) -> Any:
    """Build a ``distributed.Security`` from certificate files or a config file.

    distributed's TLS is mutual: every process (scheduler, workers, clients)
    shows a certificate signed by a CA that the others trust.  The usual
    setup is one CA for the cluster and one certificate/key pair signed by
    it, which this function installs for all three roles.

    Parameters
    ----------
    tls_ca : path, default=None
        PEM file of the CA certificate(s) to trust (CLI ``--tls-ca``).
    tls_cert : path, default=None
        PEM certificate presented by this process (CLI ``--tls-cert``);
        used for the client, scheduler and worker roles.
    tls_key : path, default=None
        PEM private key of ``tls_cert`` (CLI ``--tls-key``).
    config : path, default=None
        A YAML or JSON file holding the keys of dask's
        ``distributed.comm.tls`` config section (CLI ``--tls-config``)::

            ca-file: ca.pem
            client: {cert: client.pem, key: client-key.pem}
            scheduler: {cert: node.pem, key: node-key.pem}   # optional
            worker: {cert: node.pem, key: node-key.pem}      # optional
            ciphers: null                                    # optional
            min-version: 1.2                                 # optional

        A whole dask config file (``distributed: comm: tls: ...``) is
        accepted too.  Relative paths are taken from the file's folder; a
        ``key`` may be left out when it is appended to its ``cert`` file, as
        in dask.  The flags above override the file.

    Returns
    -------
    distributed.Security or None
        ``None`` when nothing was given, so that callers can pass the CLI
        flags through unconditionally and fall back on the dask config.

    Raises
    ------
    FileNotFoundError
        A named file does not exist (the message names the flag or key).
    ValueError
        An incomplete set: a certificate without its key or the reverse, or
        certificates without a CA, or a CA without a certificate.

    Examples
    --------
    >>> from distlearn.distributed.cluster import make_security
    >>> make_security() is None
    True
    >>> make_security(tls_cert="node.pem")
    Traceback (most recent call last):
    ...
    ValueError: tls_cert was given without tls_key (--tls-cert needs --tls-key)
    """
    if tls_cert is not None and tls_key is None:
        raise ValueError("tls_cert was given without tls_key (--tls-cert needs --tls-key)")
    if tls_key is not None and tls_cert is None:
        raise ValueError("tls_key was given without tls_cert (--tls-key needs --tls-cert)")
    if tls_ca is None and tls_cert is None and config is None:
        return None
    from distributed import Security

    settings: dict[str, Any] = {}
    require: bool | None = None
    if config is not None:
        settings, require = _load_tls_config(config)
    if tls_ca is not None:
        settings["ca-file"] = _check_file(tls_ca, "--tls-ca")
    if tls_cert is not None:
        cert = _check_file(tls_cert, "--tls-cert")
        key = _check_file(tls_key, "--tls-key")
        for role in _ROLES:
            settings[f"{role}.cert"], settings[f"{role}.key"] = cert, key
    for role in _ROLES:
        if f"{role}.key" in settings and f"{role}.cert" not in settings:
            raise ValueError(f"TLS config: {role}.key was given without {role}.cert")
    certs = [r for r in _ROLES if f"{r}.cert" in settings]
    if "ca-file" not in settings:
        raise ValueError(
            "TLS certificates were given without the CA that signed them "
            "(--tls-cert/--tls-key need --tls-ca, or ca-file in --tls-config)"
        )
    if not certs:
        raise ValueError(
            "a TLS CA was given without a certificate; distributed's TLS is mutual, "
            "every client shows a certificate signed by the CA (--tls-ca needs "
            "--tls-cert and --tls-key, or client.cert/client.key in --tls-config)"
        )
    _check_tls_files(settings)
    kwargs = {_TLS_KEYS[k]: v for k, v in settings.items()}
    return Security(require_encryption=True if require is None else bool(require), **kwargs)


def _pem_error(e: BaseException) -> str:
    """The reason of an ``ssl`` load failure, in a few words."""
    text = str(e).strip()
    return str(getattr(e, "reason", None) or (text.splitlines()[0] if text else type(e).__name__))


def _check_tls_files(settings: Mapping[str, Any]) -> None:
    """Load every CA and certificate/key pair once, so that a bad file is one line naming it.

    ``settings`` uses the keys of :data:`_TLS_KEYS` (``ca-file``, ``client.cert``, ...).
    Without this, a garbage PEM fails deep inside distributed (a LocalCluster's workers
    "did not start", or a traceback from the comm layer).
    """
    ca = settings.get("ca-file")
    if ca:
        try:
            ssl.create_default_context().load_verify_locations(cafile=str(ca))
        except (ssl.SSLError, OSError, ValueError) as e:
            raise ValueError(f"TLS CA file {str(ca)!r} is not a readable PEM certificate ({_pem_error(e)})") from None
    for role in _ROLES:
        cert, key = settings.get(f"{role}.cert"), settings.get(f"{role}.key")
        if not cert:
            continue
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(str(cert), str(key) if key else None)
        except (ssl.SSLError, OSError, ValueError) as e:
            files = f"{str(cert)!r}" + (f" with key {str(key)!r}" if key else "")
            raise ValueError(f"TLS certificate {files} ({role}) does not load: {_pem_error(e)} "
                             "(expected a PEM certificate and its matching PEM private key)") from None


def check_security(security: Any) -> None:
    """:func:`_check_tls_files` for a ``distributed.Security`` (however it was built)."""
    if security is None:
        return
    settings = {k: getattr(security, attr, None) for k, attr in _TLS_KEYS.items() if k in _PATH_KEYS}
    _check_tls_files({k: v for k, v in settings.items() if v})


def _has_certs(security: Any, role: str) -> bool:
    return bool(getattr(security, "tls_ca_file", None) and getattr(security, f"tls_{role}_cert", None))


def _no_tls_error(address: str) -> ValueError:
    return ValueError(
        f"the scheduler at {address} speaks TLS but no TLS configuration was found: pass "
        "security=make_security(tls_ca=..., tls_cert=..., tls_key=...) (CLI: --tls-ca, "
        "--tls-cert and --tls-key, or --tls-config) or set distributed.comm.tls.ca-file, "
        ".client.cert and .client.key in the dask config"
    )


def _scheduler_file_address(path: str) -> str | None:
    try:
        with open(path) as f:
            address = json.load(f).get("address")
    except (OSError, ValueError, AttributeError):
        return None  # not there yet, or not yet whole: _scheduler_file_wait waits for it
    return address if isinstance(address, str) and address else None


def _check_address(address: str, source: str) -> None:
    """A one-line ValueError unless ``address`` is one distributed can connect to (``tcp://HOST:PORT``, ...)."""
    from distributed.comm import parse_host_port
    from distributed.comm.addressing import parse_address
    from distributed.comm.registry import get_backend

    try:
        scheme, loc = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {address!r} is not a scheduler address ({_first_line(e)}); expected "
                         "tcp://HOST:PORT, tls://HOST:PORT or a scheduler file (*.json)") from None


@contextlib.contextmanager
def _explain_failed_start() -> Iterator[None]:
    """Turn the LocalCluster's "Nanny failed to start" into what to do about it."""
    try:
        yield
    except RuntimeError as e:
        if "failed to start" not in str(e):
            raise
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None)
        hint = (f"; if {os.path.basename(script)} starts the cluster at its top level, put that code under "
                "`if __name__ == \"__main__\":` (Dask's worker processes re-import the script)"
                ) if script and os.path.basename(script) != "distlearn" else ""
        raise RuntimeError(f"the LocalCluster's worker processes did not start{hint}") from None


CONNECT_TIMEOUT_ENV = "DISTLEARN_CONNECT_TIMEOUT"
WORKER_WAIT_ENV = "DISTLEARN_WORKER_WAIT"
QUEUE_WAIT_ENV = "DISTLEARN_QUEUE_WAIT"


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, str(default))
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"${name}={raw!r}: expected a positive number of seconds")
    return value


def connect_timeout() -> float:
    """Seconds to reach a scheduler: ``$DISTLEARN_CONNECT_TIMEOUT``, 10 by default.

    It bounds the whole way in: the scheduler file appearing, the TCP (and TLS)
    connection and Dask's handshake, and the client's reconnection attempts when
    the scheduler goes away mid-run.
    """
    return _env_seconds(CONNECT_TIMEOUT_ENV, 10)


def worker_wait() -> float:
    """Seconds to wait for a scheduler's first worker: ``$DISTLEARN_WORKER_WAIT``, 60 by default."""
    return _env_seconds(WORKER_WAIT_ENV, 60)


def queue_wait() -> float:
    """Seconds to wait for a batch queue's jobs to join: ``$DISTLEARN_QUEUE_WAIT``, 4 hours by default
    (a busy queue can take that long; the jobs are cancelled when the wait ends without them)."""
    return _env_seconds(QUEUE_WAIT_ENV, 4 * 3600)


class SchedulerLost(ConnectionError):
    """The scheduler went away while tasks were running (one line: where, and how to resume)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__(f"the Dask scheduler at {address} was lost during the run; rerun with --resume "
                         "(and --checkpoint) to continue from the last checkpoint")


class WorkersGone(ConnectionError):
    """Every worker left while tasks waited, and none joined within :func:`worker_wait` seconds."""

    def __init__(self, address: str, wait: float) -> None:
        self.address = address
        super().__init__(f"every Dask worker left the scheduler at {address} and none joined within {wait:g} s; "
                         f"start workers (`dask worker {address}`) or wait longer (${WORKER_WAIT_ENV}), and rerun "
                         "with --resume (and --checkpoint) to continue from the last checkpoint")


class WorkersKilled(ValueError):
    """A task killed every worker it ran on (a crash in native code, or out of memory)."""

    def __init__(self, key: Any, times: int | None) -> None:
        self.key = key
        n = "several" if times is None else str(times)
        super().__init__(f"a task killed its workers {n} times: {key} (see the workers' logs: a crash or "
                         "running out of memory)")


def _scheduler_file_wait(path: str, timeout: float) -> str:
    """The address in a scheduler file, waiting up to ``timeout`` s for it to appear (a scheduler may be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        address = _scheduler_file_address(path)
        if address is not None:
            return address
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if os.path.isdir(path):
        why = "is a directory"
    elif not os.path.exists(path):
        why = f"does not exist after {timeout:g} s"
    else:
        why = f"holds no scheduler address after {timeout:g} s (expected the JSON `dask scheduler --scheduler-file` writes)"
    raise ConnectionError(f"scheduler file {path!r} {why}; start `dask scheduler --scheduler-file {path}` "
                          f"or check the path (the wait is ${CONNECT_TIMEOUT_ENV} seconds)")


def _tcp_accepts(address: str, timeout: float) -> bool:
    """Whether anything accepts a TCP connection at ``tcp://host:port`` / ``tls://host:port``."""
    import socket

    from distributed.comm import parse_host_port
    from distributed.comm.addressing import parse_address

    with contextlib.suppress(Exception):
        host, port = parse_host_port(parse_address(address)[1])
        with socket.create_connection((host, port), timeout=timeout):
            return True
    return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def probe_scheduler(address: str, security: Any, timeout: float) -> dict[str, Any]:
    """Connect to ``address`` and ask who it is, all within ``timeout`` seconds; return its identity.

    distributed's own ``connect`` bounds the TCP connection but then waits for
    the peer's handshake without a deadline, so a service that accepts and
    stays silent (an HTTP server, a stray socket) would hang ``Client()``
    forever.  Here the whole exchange -- connect, TLS, Dask's handshake and an
    ``identity`` request -- has one deadline, and every failure is a one-line
    :class:`ConnectionError` naming the address.
    """
    import asyncio
    import threading

    from distributed import Security
    from distributed.comm import connect

    args = (security if security is not None else Security()).get_connection_args("client")

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout, **args)
        try:
            await comm.write({"op": "identity", "n_workers": 0, "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    box: dict[str, Any] = {}

    def run() -> None:  # its own event loop, in its own thread: safe under a running loop (Jupyter)
        try:
            box["identity"] = asyncio.run(asyncio.wait_for(ask(), timeout))
        except BaseException as e:  # noqa: BLE001 - reported below, in one line
            box["error"] = e

    t = threading.Thread(target=run, name="distlearn-probe", daemon=True)
    t.start()
    t.join(timeout + 5)
    err = box.get("error")
    if t.is_alive() or isinstance(err, (asyncio.TimeoutError, TimeoutError)) or (
            isinstance(err, OSError) and "Timed out" in str(err)):
        if not _tcp_accepts(address, min(timeout, 2.0)):
            raise ConnectionError(
                f"no Dask scheduler answered at {address} within {timeout:g} s (nothing listens there); "
                f"check the address and that `dask scheduler` runs there (the wait is "
                f"${CONNECT_TIMEOUT_ENV} seconds)")
        tls = " TLS and" if address.startswith("tls://") else ""
        raise ConnectionError(f"the service at {address} accepted the connection but did not complete{tls} "
                              f"Dask's handshake within {timeout:g} s: it is not a Dask scheduler (check the "
                              f"address and port{', and the TLS certificates' if tls else ''})")
    if err is not None:
        chain = [err]
        while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 8:
            chain.append(nxt)
        ssl_errors = [e for e in chain if isinstance(e, ssl.SSLError)]
        if ssl_errors or address.startswith("tls://"):  # failed before Dask's first message: TLS
            why = _first_line(ssl_errors[0] if ssl_errors else chain[-1])
            raise ConnectionError(f"the TLS handshake with {address} failed ({why}); check that it is a Dask "
                                  "scheduler and that --tls-ca/--tls-cert/--tls-key match the cluster's "
                                  "certificates") from None
        raise ConnectionError(f"the service at {address} is not a Dask scheduler: it did not speak Dask's "
                              f"protocol ({_first_line(err)})") from None
    ident = box.get("identity")
    kind = ident.get("type") if isinstance(ident, Mapping) else None
    if kind != "Scheduler":
        what = f"a Dask {kind}" if isinstance(kind, str) and kind else "something else"
        raise ConnectionError(f"the service at {address} is {what}, not a Dask scheduler "
                              "(give the scheduler's address or its scheduler file)")
    return dict(ident)


def _n_workers(client: Any) -> int:
    info = client.scheduler_info(n_workers=0)
    return int(info.get("n_workers", len(info.get("workers", {}))))


def adaptive(client: Any) -> bool:
    """Whether ``client``'s cluster starts its workers for the tasks it is given (it may have none now)."""
    return getattr(getattr(client, "cluster", None), "_adaptive", None) is not None


def ensure_workers(client: Any, address: str | None = None, wait: float | None = None, mid_run: bool = False) -> None:
    """Return once the cluster has a worker; wait up to :func:`worker_wait` s, saying so on stderr.

    A scheduler started alone accepts tasks and holds them forever; this turns
    that into a line ``waiting for workers at ADDRESS (up to N s;
    DISTLEARN_WORKER_WAIT)`` and, if none joins, a one-line
    :class:`ConnectionError` (``mid_run``: :class:`WorkersGone`, which says how to resume).
    """
    if _n_workers(client) or adaptive(client):
        return  # an adaptive cluster starts its workers for the tasks it is given
    address = address or str(getattr(client.scheduler, "address", "?"))
    wait = worker_wait() if wait is None else wait
    print(f"waiting for workers at {address} (up to {wait:g} s; {WORKER_WAIT_ENV})", file=sys.stderr, flush=True)
    try:
        client.wait_for_workers(1, timeout=wait)
    except (TimeoutError, OSError) as e:
        if is_lost(client):
            raise SchedulerLost(address) from None
        if not isinstance(e, TimeoutError):
            raise
        if mid_run:
            raise WorkersGone(address, wait) from None
        raise ConnectionError(f"no Dask worker joined the scheduler at {address} within {wait:g} s; start "
                              f"workers (`dask worker {address}`) or wait longer (${WORKER_WAIT_ENV})") from None


def is_lost(client: Any) -> bool:
    """Whether ``client`` has lost its scheduler (its comm closed: reconnecting, or given up and closed)."""
    if getattr(client, "status", "running") in ("connecting", "closing", "closed", "failed"):
        return True
    comm = getattr(client, "scheduler_comm", None)
    return comm is None or bool(getattr(comm, "comm", None) is not None and comm.comm.closed())


def scheduler_workers(client: Any, timeout: float) -> int | None:
    """How many workers the scheduler has, or ``None`` if it did not answer an ``identity``
    request within ``timeout`` seconds (stopped, wedged, or its connection closed)."""
    try:
        info = client.sync(client.scheduler.identity, n_workers=0, callback_timeout=timeout)
    except Exception:  # noqa: BLE001 - a timeout or a closed comm: it did not answer
        return None
    return int(info.get("n_workers", 0)) if isinstance(info, dict) else 0


def _killed_worker(e: BaseException) -> WorkersKilled | None:
    from distributed.scheduler import KilledWorker

    if isinstance(e, KilledWorker):
        key = getattr(e, "task", None) or (e.args[0] if e.args else "?")
        times = getattr(e, "allowed_failures", None)
        if isinstance(times, int):
            times += 1  # allowed_failures deaths are forgiven; the next one kills the task
        return WorkersKilled(key, times if isinstance(times, int) else None)
    return None


@contextlib.contextmanager
def cluster_faults(client: Any, address: str | None = None) -> Iterator[None]:
    """Turn a lost scheduler and a task that killed its workers into one line (:class:`SchedulerLost`,
    :class:`WorkersKilled`; :class:`WorkersGone` passes as raised); anything else (the task's own error) passes unchanged."""
    from concurrent.futures import CancelledError

    try:
        yield
    except (SchedulerLost, WorkersKilled, WorkersGone):
        raise
    except (CancelledError, OSError, TimeoutError) as e:  # CommClosedError is an OSError
        if isinstance(e, CancelledError) and "scheduler-connection-lost" not in str(e) and not is_lost(client):
            raise
        if not isinstance(e, CancelledError) and not is_lost(client):
            raise
        raise SchedulerLost(address or str(getattr(client.scheduler, "address", "?"))) from None
    except Exception as e:
        killed = _killed_worker(e)
        if killed is None:
            raise
        raise killed from None


@contextlib.contextmanager
def get_client(
    scheduler: Any = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | float | None = "auto",
    quiet: bool = True,
    security: Any = None,
) -> Iterator[Any]:
    """Yield a ``distributed.Client``; close what this call started.

    ``None`` is refused: everywhere else in distlearn it means "this process"
    (:func:`~distlearn.distributed.executor_for`), which has no client.  Code
    outside ``distributed/`` never calls this: it passes ``scheduler=`` to
    :func:`~distlearn.distributed.executor_for`.

    Parameters
    ----------
    scheduler : Client or str
        An existing ``Client`` (used as is, not closed; ``security`` is then
        ignored), a scheduler address (``tcp://127.0.0.1:8786`` or
        ``tls://10.0.0.1:8786``) or a scheduler file path (``*.json``);
        ``"local"`` starts a LocalCluster on 127.0.0.1 with one single-threaded
        worker process per core (numba kernels release the GIL, but the
        parsers do not); ``"slurm:FILE[:N]"`` or ``"pbs:FILE[:N]"`` submits
        ``N`` batch jobs of dask workers as the dask-jobqueue configuration
        FILE describes (:func:`start_jobqueue_cluster`, e.g.
        ``cluster/jobqueue.yaml``) and cancels them afterwards.
    n_workers : int, default=None
        LocalCluster size (default: ``os.cpu_count()``).
    threads_per_worker : int, default=1
        LocalCluster threads per worker process.
    memory_limit : str, float or None, default="auto"
        LocalCluster memory limit per worker.
    quiet : bool, default=True
        Silence the LocalCluster's logs below CRITICAL (failed tasks raise in the caller).
    security : distributed.Security, default=None
        TLS certificates, e.g. from :func:`make_security`.  A ``tls://``
        scheduler needs them; with ``None`` distributed falls back on the dask
        config (``distributed.comm.tls.*``).  With ``scheduler=None`` the
        LocalCluster listens on ``tls://`` and uses them for the scheduler,
        its workers and this client (so they need all three roles' certificates,
        as :func:`make_security` sets).

    Yields
    ------
    distributed.Client

    Raises
    ------
    ValueError
        A ``tls://`` scheduler (address or scheduler file) without any TLS
        configuration, or a ``security`` without the certificates it needs.
    ConnectionError
        Each in one line naming the address or file: no scheduler answered
        within :func:`connect_timeout` seconds (``$DISTLEARN_CONNECT_TIMEOUT``,
        default 10), which bounds the scheduler file appearing and the whole
        TCP + TLS + Dask handshake (:func:`probe_scheduler`); the service there
        is not a Dask scheduler; the TLS handshake failed; no worker joined
        within :func:`worker_wait` seconds (``$DISTLEARN_WORKER_WAIT``, default
        60; a line on stderr says it is waiting); and, inside the ``with``
        block, :class:`SchedulerLost` when the scheduler goes away mid-run.
    WorkersKilled
        (a ValueError) inside the ``with`` block: a task killed its workers.

    Examples
    --------
    >>> from distlearn.distributed import get_client
    >>> with get_client("tls://127.0.0.1:8786") as client:  # doctest: +SKIP
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: the scheduler at tls://127.0.0.1:8786 speaks TLS but no TLS configuration was found: ...
    """
    from distributed import Client, LocalCluster, Security

    if scheduler is not None and hasattr(scheduler, "submit"):
        yield scheduler
        return
    if scheduler is None:
        raise ValueError("get_client(None): None means this process, which has no client; pass 'local' for a "
                         "LocalCluster, an address or a scheduler file")
    if isinstance(scheduler, str) and scheduler == "local":
        scheduler = None  # below: the LocalCluster
    if security is not None and not isinstance(security, Security):
        raise TypeError(
            f"security must be a distributed.Security (see make_security) or None, "
            f"got {type(security).__name__}"
        )
    if is_jobqueue_scheduler(scheduler):
        client = start_jobqueue_cluster(scheduler, security=security)
        try:
            yield client
        finally:
            cluster = client.cluster
            client.close()
            cluster.close()
        return
    if scheduler is not None:
        s = str(scheduler)
        timeout = connect_timeout()
        if s.endswith(".json"):
            address = _scheduler_file_wait(s, timeout)
            _check_address(address, f"scheduler file {s!r}")
        else:
            address = s
            _check_address(address, "scheduler")
        if address.startswith("tls://"):
            if not _has_certs(security if security is not None else Security(), "client"):
                raise _no_tls_error(address)
            check_security(security)
        probe_scheduler(address, security, timeout)
        try:
            client = Client(address, security=security, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise ConnectionError(
                f"no Dask scheduler answered at {address} within {timeout:g} s ({type(e).__name__}); "
                f"check the address and that `dask scheduler` runs there (the wait is "
                f"${CONNECT_TIMEOUT_ENV} seconds)") from None
        try:
            with cluster_faults(client, address):
                ensure_workers(client, address)
                yield client
        finally:
            _close_quietly(client)
        return
    n = n_workers or os.cpu_count() or 1
    kwargs: dict[str, Any] = {}
    if quiet:
        # A task's exception reaches the caller, who reports it in one line; the workers'
        # own "Compute Failed" log of it (level ERROR) would print it a second time.
        kwargs["silence_logs"] = logging.CRITICAL
    if security is not None:
        missing = [r for r in _ROLES if not _has_certs(security, r)]
        if missing:
            raise ValueError(
                f"a TLS LocalCluster needs the CA and a certificate for the client, scheduler "
                f"and worker roles; missing: {missing} (make_security(tls_ca, tls_cert, "
                f"tls_key) sets all three)"
            )
        check_security(security)
        kwargs.update(protocol="tls", security=security)
    import dask

    # The nanny's default MALLOC_TRIM_THRESHOLD_=65536 also pins glibc's mmap
    # threshold at 128 KiB, so every block read (MiBs of arrays) is a fresh
    # mmap with page faults: measured 1.6x slower block reads inside workers.
    # Unset it (glibc's dynamic thresholds); the dashboard gets a free
    # loopback port so that several clusters can run side by side.
    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        # We are a Dask worker process that is re-importing the user's script (spawn), whose
        # top level starts a cluster: leave quietly; the parent explains (below).
        raise SystemExit(1)
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}), \
            _explain_failed_start():
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            memory_limit=memory_limit,
            **kwargs,
        )
    try:
        client = Client(cluster, security=security, timeout=connect_timeout())
    except BaseException:
        cluster.close()
        raise
    try:
        with cluster_faults(client, cluster.scheduler_address):
            yield client
    finally:
        client.close()
        cluster.close()


def _close_quietly(client: Any) -> None:
    """Close ``client``; after a lost scheduler, without distributed's reconnection tracebacks on stderr."""
    if not is_lost(client):
        client.close()
        return
    loggers = [logging.getLogger(n) for n in ("distributed.client", "distributed.utils", "distributed.core")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with contextlib.suppress(Exception):
            client.close(timeout=2)
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def describe(client: Any) -> str:
    """One line about a cluster: scheduler address, workers, threads, dashboard.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    str
        e.g. ``"scheduler tls://127.0.0.1:8786, 4 workers, 4 threads,
        dashboard http://127.0.0.1:8787/status"``; ``"no dashboard"`` when
        the scheduler serves none.

    Examples
    --------
    >>> from distlearn.distributed.cluster import describe, get_client
    >>> with get_client(n_workers=2) as client:  # doctest: +SKIP
    ...     print(describe(client))
    scheduler tcp://127.0.0.1:40237, 2 workers, 2 threads, no dashboard
    """
    info = client.scheduler_info(n_workers=0)
    workers = int(info.get("n_workers", len(info.get("workers", {}))))
    threads = int(info.get("total_threads", 0))
    address = info.get("address") or getattr(client.scheduler, "address", "?")
    link = None
    if "dashboard" in (info.get("services") or {}):
        with contextlib.suppress(Exception):
            link = client.dashboard_link or None

    def plural(k: int, word: str) -> str:
        return f"{k} {word}{'' if k == 1 else 's'}"

    return (
        f"scheduler {address}, {plural(workers, 'worker')}, {plural(threads, 'thread')}, "
        + (f"dashboard {link}" if link else "no dashboard")
    )


# --------------------------------------------------------------------------- batch systems

#: ``scheduler=`` prefixes that start a dask-jobqueue cluster -> (dask-jobqueue class, yaml section).
JOBQUEUE_KINDS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: Keys of a jobqueue section that distlearn reads itself (not passed to the cluster class).
_JOBQUEUE_OWN_KEYS = ("jobs", "wait_for_workers")
#: Cluster/Job arguments a yaml section may not set: distlearn or dask-jobqueue sets them
#: (``security`` comes from ``--tls-*``; ``n_workers`` is ``jobs``; host/dashboard go in
#: ``scheduler_options``).
_JOBQUEUE_RESERVED = {"self", "scheduler", "name", "n_workers", "job_cls", "loop", "asynchronous",
                      "scheduler_cls", "config_name", "security", "host", "dashboard_address"}
_JOBQUEUE_LISTS = ("worker_extra_args", "job_extra_directives", "job_script_prologue", "job_directives_skip")
_INSTALL_HINT = "pip install 'distlearn[cluster]'"


def is_jobqueue_scheduler(scheduler: Any) -> bool:
    """Whether ``scheduler`` is a ``"slurm:FILE[:N]"`` or ``"pbs:FILE[:N]"`` string."""
    return isinstance(scheduler, str) and scheduler.partition(":")[0] in JOBQUEUE_KINDS and ":" in scheduler


def parse_jobqueue_scheduler(scheduler: str) -> tuple[str, str, int | None]:
    """``"slurm:cluster/jobqueue.yaml:4"`` -> ``("slurm", "cluster/jobqueue.yaml", 4)``.

    Examples
    --------
    >>> parse_jobqueue_scheduler("pbs:cluster/jobqueue.yaml")
    ('pbs', 'cluster/jobqueue.yaml', None)
    >>> parse_jobqueue_scheduler("slurm:/shared/jq.yaml:8")
    ('slurm', '/shared/jq.yaml', 8)
    """
    kind, _, rest = scheduler.partition(":")
    if kind not in JOBQUEUE_KINDS:
        raise ValueError(f"scheduler={scheduler!r}: expected slurm:FILE[:N] or pbs:FILE[:N]")
    path, sep, tail = rest.rpartition(":")
    jobs: int | None = None
    if sep and tail.isdigit():
        jobs = int(tail)
        if jobs < 1:
            raise ValueError(f"scheduler={scheduler!r}: the number of jobs after the last ':' must be >= 1")
    else:
        path = rest
    if not path:
        raise ValueError(f"scheduler={scheduler!r}: no configuration file after '{kind}:' "
                         f"(e.g. {kind}:cluster/jobqueue.yaml)")
    return kind, path, jobs


class MissingExtraError(ImportError, ValueError):
    """An optional dependency is not installed (a ValueError too, so the CLI reports it in one line)."""


def _import_jobqueue(kind: str) -> Any:
    try:
        import dask_jobqueue
    except ImportError:
        raise MissingExtraError(f"scheduler '{kind}:...' needs dask-jobqueue, which is not installed: "
                          f"{_INSTALL_HINT}") from None
    return getattr(dask_jobqueue, JOBQUEUE_KINDS[kind])


def _jobqueue_keys(cls: Any) -> set[str]:
    """The keyword arguments ``cls`` (a JobQueueCluster) and its Job class accept."""
    import inspect

    keys: set[str] = set()
    for f in (cls.__init__, *(c.__init__ for c in cls.job_cls.__mro__ if "__init__" in vars(c))):
        keys.update(p.name for p in inspect.signature(f).parameters.values()
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return keys - _JOBQUEUE_RESERVED


def load_jobqueue_config(path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
    """Read the ``jobqueue: KIND:`` section of a dask-jobqueue YAML file (``cluster/jobqueue.yaml``).

    Keys may be written with ``-`` or ``_`` (as in dask's own config files);
    the result uses ``_``, i.e. the keyword arguments of ``SLURMCluster`` /
    ``PBSCluster``, plus distlearn's own ``jobs`` (default 1) and
    ``wait_for_workers`` (default: every worker of those jobs).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not YAML, no ``jobqueue: KIND:`` mapping, a missing ``cores``/``memory``,
        a key the cluster class does not take, or a value of the wrong type;
        the one-line message names the file.
    MissingExtraError
        dask-jobqueue is not installed (an ImportError and a ValueError).
    """
    import yaml  # a dependency of dask

    if kind not in JOBQUEUE_KINDS:
        raise ValueError(f"unknown batch system {kind!r}; expected one of {sorted(JOBQUEUE_KINDS)}")
    p = Path(_check_file(path, f"{kind} cluster configuration"))
    source = f"jobqueue config {str(p)!r}"
    try:
        data = yaml.safe_load(p.read_text())
    except (yaml.YAMLError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{source}: not valid YAML ({first})") from None
    top = data.get("jobqueue") if isinstance(data, Mapping) else None
    section = top.get(kind) if isinstance(top, Mapping) else None
    if not isinstance(section, Mapping):
        raise ValueError(f"{source}: no 'jobqueue: {kind}:' mapping (expected a dask-jobqueue configuration "
                         f"like cluster/jobqueue.yaml)")
    conf = {str(k).replace("-", "_"): v for k, v in section.items()}
    cls = _import_jobqueue(kind)
    allowed = _jobqueue_keys(cls)
    unknown = sorted(set(conf) - allowed - set(_JOBQUEUE_OWN_KEYS))
    if unknown:
        reserved = sorted(set(unknown) & _JOBQUEUE_RESERVED)
        why = (f"; {reserved} are set by distlearn (use 'jobs' for the number of jobs, --tls-* for security "
               f"and scheduler_options for host/dashboard_address)" if reserved else "")
        raise ValueError(f"{source}: unknown key(s) {unknown} in 'jobqueue: {kind}:' "
                         f"({JOBQUEUE_KINDS[kind]} does not take them){why}")
    for key in ("cores", "memory"):
        if conf.get(key) is None:
            raise ValueError(f"{source}: 'jobqueue: {kind}:' needs '{key}' (per job)")
    from dask.utils import parse_bytes

    try:
        parse_bytes(conf["memory"])
    except (TypeError, ValueError):
        raise ValueError(f"{source}: {kind}.memory={conf['memory']!r}; expected a size per job like 64GiB") from None
    for key in ("cores", "processes", "jobs", "wait_for_workers"):
        v = conf.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < (0 if key == "wait_for_workers" else 1)):
            raise ValueError(f"{source}: {kind}.{key}={v!r}; expected a positive integer")
    for key in _JOBQUEUE_LISTS:
        v = conf.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(a, (str, int, float)) for a in v)):
            raise ValueError(f"{source}: {kind}.{key} must be a list of strings, got {v!r}")
    if "scheduler_options" in conf and not isinstance(conf["scheduler_options"] or {}, Mapping):
        raise ValueError(f"{source}: {kind}.scheduler_options must be a mapping")
    conf.setdefault("jobs", 1)
    return conf


def make_jobqueue_cluster(scheduler: str, *, security: Any = None, **overrides: Any) -> tuple[Any, int, int | None]:
    """Build (do not scale) the ``SLURMCluster``/``PBSCluster`` that ``scheduler`` names.

    ``scheduler`` is ``"slurm:FILE[:N]"`` or ``"pbs:FILE[:N]"``; FILE is read
    by :func:`load_jobqueue_config` and its section becomes the keyword
    arguments of the class, updated by ``overrides``.  The cluster's
    scheduler starts in this process at once (on the yaml's ``interface`` or
    ``scheduler_options: {host: ...}``); no job is submitted.

    Returns
    -------
    (cluster, jobs, wait_for_workers)
        ``jobs`` is ``N`` from the string, else the yaml's ``jobs`` (default 1);
        ``wait_for_workers`` the yaml's value or ``None`` (all of them).
    """
    kind, path, jobs = parse_jobqueue_scheduler(scheduler)
    conf = load_jobqueue_config(path, kind)
    n_jobs = jobs if jobs is not None else int(conf.pop("jobs"))
    conf.pop("jobs", None)
    wait = conf.pop("wait_for_workers", None)
    conf.update(overrides)
    cls = _import_jobqueue(kind)
    if security is not None:
        conf["security"] = security
    try:
        cluster = cls(**conf)
    except (TypeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"jobqueue config {path!r}: {JOBQUEUE_KINDS[kind]} refused the "
                         f"'jobqueue: {kind}:' section: {first}") from None
    return cluster, n_jobs, wait


def jobqueue_workers(cluster: Any, jobs: int) -> int:
    """The Dask workers that ``jobs`` batch jobs of a dask-jobqueue ``cluster`` start (jobs x processes)."""
    return int(jobs) * len(cluster.new_spec.get("group", [""]))


def start_jobqueue_cluster(scheduler: str, *, security: Any = None, quiet: bool = False) -> Any:
    """Start a SLURM or PBS cluster from ``"slurm:FILE[:N]"`` / ``"pbs:FILE[:N]"``; return a ``Client``.

    Builds the cluster (:func:`make_jobqueue_cluster`), submits ``N`` batch
    jobs (``cluster.scale(jobs=N)``) and waits until the yaml's
    ``wait_for_workers`` workers (default: all of them, ``N`` x
    ``processes``) have joined, for at most :func:`queue_wait` seconds
    (``$DISTLEARN_QUEUE_WAIT``, 4 hours by default); Ctrl-C gives up sooner.  Close with ``client.close(); client.cluster.close()`` (which
    cancels the jobs); :func:`get_client` does that for you.

    Examples
    --------
    >>> client = start_jobqueue_cluster("slurm:cluster/jobqueue.yaml:4")  # doctest: +SKIP
    """
    from distributed import Client

    cluster, n_jobs, wait = make_jobqueue_cluster(scheduler, security=security)
    try:
        cluster.scale(jobs=n_jobs)
        client = Client(cluster, security=security, timeout=connect_timeout())
        try:
            n = jobqueue_workers(cluster, n_jobs) if wait is None else wait
            if n:
                limit = queue_wait()
                if not quiet:
                    print(f"distlearn: submitted {n_jobs} {scheduler.partition(':')[0]} job(s); waiting for "
                          f"{n} worker(s) to join {cluster.scheduler_address} (up to {limit:g} s; "
                          f"{QUEUE_WAIT_ENV})", file=sys.stderr)
                try:
                    client.wait_for_workers(n, timeout=limit)
                except TimeoutError:
                    raise ConnectionError(
                        f"{_n_workers(client)} of {n} worker(s) joined {cluster.scheduler_address} within "
                        f"{limit:g} s; the {scheduler.partition(':')[0]} jobs are cancelled (wait longer with "
                        f"${QUEUE_WAIT_ENV}, or lower wait_for_workers in the yaml)") from None
        except BaseException:
            client.close()
            raise
    except BaseException:
        cluster.close()
        raise
    return client
