"""TLS: a real ``dask scheduler --protocol tls`` and worker, started with temporary certificates.

A client with a certificate signed by the cluster's CA trains; a client
without certificates, a plain ``tcp://`` connection and a certificate from
another CA are refused.  The certificates (a CA and a leaf for
127.0.0.1/localhost, with serverAuth and clientAuth, used by every role) are
made with the ``openssl`` command-line tool.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from distlearn.data.store import create_dataset
from distlearn.distributed.cluster import describe, get_client, make_security

from ..conftest import _dask_cli

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = distlearn-test-ca
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _make_pki(d: Path) -> dict[str, str]:
    """A CA and one certificate/key pair it signed, for 127.0.0.1 and localhost."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "openssl.cnf").write_text(_OPENSSL_CNF)
    _openssl("req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-config", "openssl.cnf", "-extensions", "ca", cwd=d)
    _openssl("req", "-new", *_EC, "-keyout", "node.key", "-out", "node.csr",
             "-config", "openssl.cnf", "-subj", "/CN=localhost", cwd=d)
    _openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "2",
             "-out", "node.pem", "-days", "2", "-extfile", "openssl.cnf", "-extensions", "leaf", cwd=d)
    return {"ca": str(d / "ca.pem"), "cert": str(d / "node.pem"), "key": str(d / "node.key")}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    return {"good": _make_pki(d / "good"), "other": _make_pki(d / "other")}


@pytest.fixture(scope="module")
def tls_cluster(pki):
    """A ``dask scheduler --protocol tls`` and one ``dask worker``, loopback only."""
    d = Path(pki["good"]["ca"]).parents[1] / "cluster"
    d.mkdir()
    sched_file = d / "scheduler.json"
    good = pki["good"]
    tls = ["--tls-ca-file", good["ca"], "--tls-cert", good["cert"], "--tls-key", good["key"]]
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    cli = _dask_cli()
    logs = [open(d / f"{n}.log", "w") for n in ("scheduler", "worker")]
    procs = [
        subprocess.Popen(
            [*cli, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
             "--scheduler-file", str(sched_file), *tls],
            stdout=logs[0], stderr=subprocess.STDOUT, env=env,
        )
    ]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.05)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(
            subprocess.Popen(
                [*cli, "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--memory-limit", "2GiB", *tls],
                stdout=logs[1], stderr=subprocess.STDOUT, env=env,
            )
        )
        with get_client(address, security=make_security(good["ca"], good["cert"], good["key"])) as c:
            c.wait_for_workers(1, timeout=60)
        yield {"address": address, "scheduler_file": str(sched_file), "dir": d}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in logs:
            f.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 8))
    y = np.where(X @ rng.standard_normal(8) > 0, 1, -1)
    path = tmp_path_factory.mktemp("store") / "train.zarr"
    create_dataset(path, X, y, block_rows=128)
    return str(path)


def _train(client, store_path: str) -> np.ndarray:
    """Learner-parallel OBPM on the TLS cluster (workers open the store by path); return ``coef_``.
    keep_members=True: two groups of 4 (pooled sums would run one group of all 8)."""
    from distlearn import OBPM

    est = OBPM(n_estimators=8, tau=0.5, epochs=2, random_state=0, scheduler=client, learner_groups=2, keep_members=True,
               checkpoint_every=2).fit(store_path)
    assert est.job_["runner"].startswith("dask scheduler tls://")
    return est.coef_


def _in_process(store_path: str) -> np.ndarray:
    from distlearn import OBPM

    return OBPM(n_estimators=8, tau=0.5, epochs=2, random_state=0, scheduler="in-process", keep_members=True).fit(store_path).coef_


# -- a client with the cluster's certificates trains


@pytest.mark.cluster
def test_client_with_certificates_trains(tls_cluster, pki, store):
    good = pki["good"]
    with get_client(tls_cluster["address"], security=make_security(good["ca"], good["cert"], good["key"])) as c:
        assert c.scheduler.address.startswith("tls://")
        line = describe(c)  # the CLI prints this for long jobs
        expected = rf"scheduler {re.escape(tls_cluster['address'])}, 1 worker, 1 thread, dashboard http://\S+"
        assert re.fullmatch(expected, line), line
        coef = _train(c, store)
    np.testing.assert_array_equal(coef, _in_process(store))


@pytest.mark.cluster
def test_config_file_and_scheduler_file(tls_cluster, pki, store, tmp_path):
    good = pki["good"]
    cfg = tmp_path / "tls.yaml"  # relative paths are read from the config file's folder
    for name in ("ca", "cert", "key"):
        shutil.copy(good[name], tmp_path / Path(good[name]).name)
    cfg.write_text("ca-file: ca.pem\nclient:\n  cert: node.pem\n  key: node.key\n")
    with get_client(tls_cluster["scheduler_file"], security=make_security(config=cfg)) as c:
        np.testing.assert_array_equal(_train(c, store), _in_process(store))


# -- anything else is refused

_ATTEMPT = """
import sys
from distributed import Client, Security
address, ca, cert, key = (sys.argv[1:] + [None] * 3)[:4]
security = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key) if ca else None
try:
    Client(address, security=security, timeout=5).close()
except (OSError, TimeoutError, ValueError, TypeError) as e:
    print("REFUSED", type(e).__name__, e)
else:
    print("CONNECTED")
"""


def _attempts(cases: dict[str, list[str]]) -> dict[str, str]:
    """Connect in fresh processes, in parallel (distributed's shared IO loop can wedge after
    several failed ``Client()`` constructions in one process, so failures stay out of pytest's)."""
    procs = {
        name: subprocess.Popen([sys.executable, "-c", _ATTEMPT, *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        for name, args in cases.items()
    }
    out = {}
    for name, p in procs.items():
        try:
            out[name] = p.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            p.kill()
            out[name] = p.communicate()[0] + "\n(hung: no exception within 60 s)"
    return out


@pytest.mark.cluster
def test_clients_without_the_right_certificates_are_refused(tls_cluster, pki):
    address = tls_cluster["address"]
    good, other = pki["good"], pki["other"]
    out = _attempts({
        "control: the cluster's certificates": [address, good["ca"], good["cert"], good["key"]],
        "tls:// without certificates": [address],
        "plain tcp:// to the TLS port": [address.replace("tls://", "tcp://", 1)],
        "another CA, trusting it": [address, other["ca"], other["cert"], other["key"]],
        "another CA's certificate, trusting the cluster's CA": [address, good["ca"], other["cert"], other["key"]],
    })
    control = out.pop("control: the cluster's certificates")
    # connected (asyncio may log a close-time timeout of distributed's after it, under load: not a refusal)
    assert "CONNECTED" in control.splitlines() and "REFUSED" not in control, control
    for name, text in out.items():
        assert "CONNECTED" not in text and "REFUSED" in text, f"{name}: {text}"
    # the scheduler itself rejected the foreign certificate during the handshake
    log = (tls_cluster["dir"] / "scheduler.log").read_text()
    assert "TLS handshake failed" in log


@pytest.mark.cluster
def test_scheduler_demands_a_client_certificate(tls_cluster, pki):
    """Below distributed: a TLS client that trusts the CA but shows no certificate is cut off."""
    import socket
    import ssl

    host, port = tls_cluster["address"].removeprefix("tls://").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=pki["good"]["ca"])
    ctx.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw) as tls:  # TLS 1.3 reports the refusal on the first read
                tls.sendall(b"\0" * 8)
                assert tls.recv(1) == b"", "the scheduler answered a client without a certificate"
                raise ConnectionError("closed without an alert")


@pytest.mark.cluster
def test_tls_address_without_configuration_is_a_clear_error(tls_cluster):
    import dask

    with dask.config.set({"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None}):
        for scheduler in (tls_cluster["address"], tls_cluster["scheduler_file"]):
            with pytest.raises(ValueError, match=r"speaks TLS but no TLS configuration.*--tls-ca"):
                with get_client(scheduler):
                    pass


# -- make_security: files, flags, config


def test_make_security_from_flags(pki):
    good = pki["good"]
    assert make_security() is None
    sec = make_security(good["ca"], good["cert"], good["key"])
    assert sec.require_encryption is True and sec.tls_ca_file == good["ca"]
    for role in ("client", "scheduler", "worker"):
        assert getattr(sec, f"tls_{role}_cert") == good["cert"]
        assert getattr(sec, f"tls_{role}_key") == good["key"]


def test_make_security_errors_name_the_flag(pki, tmp_path):
    good = pki["good"]
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(ValueError, match="--tls-cert needs --tls-key"):
        make_security(good["ca"], good["cert"])
    with pytest.raises(ValueError, match="--tls-key needs --tls-cert"):
        make_security(good["ca"], tls_key=good["key"])
    with pytest.raises(ValueError, match="need --tls-ca"):
        make_security(tls_cert=good["cert"], tls_key=good["key"])
    with pytest.raises(ValueError, match="--tls-ca needs --tls-cert"):
        make_security(good["ca"])
    for kwargs, flag in [
        (dict(tls_ca=missing, tls_cert=good["cert"], tls_key=good["key"]), "--tls-ca"),
        (dict(tls_ca=good["ca"], tls_cert=missing, tls_key=good["key"]), "--tls-cert"),
        (dict(tls_ca=good["ca"], tls_cert=good["cert"], tls_key=missing), "--tls-key"),
        (dict(config=missing), "--tls-config"),
    ]:
        with pytest.raises(FileNotFoundError, match=f"{flag}: no such file: .*missing.pem"):
            make_security(**kwargs)


def test_make_security_config_files(pki, tmp_path):
    good, other = pki["good"], pki["other"]
    # a whole dask config file, as JSON, with absolute paths and a TLS version
    cfg = tmp_path / "dask.json"
    cfg.write_text(json.dumps({"distributed": {"comm": {"require-encryption": True, "tls": {
        "ca-file": good["ca"], "min-version": 1.3,
        "client": {"cert": good["cert"], "key": good["key"]},
        "worker": {"cert": other["cert"], "key": other["key"]},
    }}}}))
    sec = make_security(config=cfg)
    assert (sec.tls_ca_file, sec.tls_client_cert, sec.tls_client_key) == (good["ca"], good["cert"], good["key"])
    assert sec.tls_worker_cert == other["cert"] and sec.tls_scheduler_cert is None
    assert sec.tls_min_version.name == "TLSv1_3" and sec.require_encryption is True
    # flags override the file
    sec = make_security(tls_ca=other["ca"], config=cfg)
    assert sec.tls_ca_file == other["ca"] and sec.tls_client_cert == good["cert"]
    # a typo, a missing file inside the config, a key without its cert
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"ca_file: {good['ca']}\nclient:\n  certificate: {good['cert']}\n")
    with pytest.raises(ValueError, match=r"unknown TLS setting\(s\) \['client.certificate'\]"):
        make_security(config=bad)
    bad.write_text("ca-file: nowhere/ca.pem\nclient: {cert: node.pem}\n")
    with pytest.raises(FileNotFoundError, match=r"ca-file: no such file: .*nowhere/ca.pem"):
        make_security(config=bad)
    bad.write_text(f"ca-file: {good['ca']}\nclient: {{key: {good['key']}}}\n")
    with pytest.raises(ValueError, match="client.key was given without client.cert"):
        make_security(config=bad)


def test_get_client_checks_security(pki):
    from distributed import Security

    good = pki["good"]
    with pytest.raises(TypeError, match="distributed.Security"):
        with get_client("tls://127.0.0.1:1", security=good["ca"]):
            pass
    client_only = Security(tls_ca_file=good["ca"], tls_client_cert=good["cert"], tls_client_key=good["key"])
    with pytest.raises(ValueError, match=r"TLS LocalCluster needs .* missing: \['scheduler', 'worker'\]"):
        with get_client("local", n_workers=1, security=client_only):
            pass


@pytest.mark.cluster
def test_local_cluster_with_tls(pki, store):
    good = pki["good"]
    with get_client("local", n_workers=1, security=make_security(good["ca"], good["cert"], good["key"])) as c:
        assert c.scheduler.address.startswith("tls://127.0.0.1:")
        assert re.fullmatch(r"scheduler tls://127\.0\.0\.1:\d+, 1 worker, 1 thread, "
                            r"(dashboard http://\S+|no dashboard)", describe(c))
        np.testing.assert_array_equal(_train(c, store), _in_process(store))
