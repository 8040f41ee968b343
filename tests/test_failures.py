"""Failures that must be one clear line: a UTF-8 byte-order mark, an unreachable scheduler."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.data._rcv1 import convert_rcv1
from distlearn.data._svmlight import parse_svmlight_range
from distlearn.data.readers import convert
from distlearn.distributed import get_client

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("name, body, opts", [
    ("a.svm", b"1 1:0.5\n-1 2:1\n", {}),
    ("a.csv", b"label,x,y\n1,0.5,0\n-1,0,1\n", {}),
    ("a.tsv", b"+1\tACGTACGT\n-1\tTTTTTTTT\n", {"format": "dna", "features": "onehot"}),
])
def test_a_byte_order_mark_is_skipped(tmp_path, name, body, opts):
    plain, marked = tmp_path / f"p-{name}", tmp_path / f"m-{name}"
    plain.write_bytes(body)
    marked.write_bytes(BOM + body)
    a = convert(plain, tmp_path / "p.zarr", **opts)
    b = convert(marked, tmp_path / "m.zarr", **opts)
    Xa, ya = a.to_numpy()
    Xb, yb = b.to_numpy()
    assert np.array_equal(Xa, Xb) and np.array_equal(ya, yb) and len(ya) == 2


def test_bom_in_parallel_ranges_and_rcv1(tmp_path):
    f = tmp_path / "b.svm"
    f.write_bytes(BOM + b"1 1:0.5\n-1 2:1\n")
    part = parse_svmlight_range(str(f), 0, f.stat().st_size)
    assert "error" not in part and part["y"].tolist() == [1, -1]
    tok = tmp_path / "t.dat"
    tok.write_bytes(BOM + b".I 5\n.W\nbank rate\n\n")
    q = tmp_path / "q"
    q.write_bytes(BOM + b"CCAT 5 1\n")
    for pb in (1 << 30, 4):
        ds = convert_rcv1(tok, tmp_path / f"r{pb}.zarr", qrels=q, part_bytes=pb)
        assert ds.side_array("docid").tolist() == [5] and ds.nnz == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_is_one_line_within_the_timeout(monkeypatch, tmp_path, capsys):
    from distlearn.distributed.cluster import connect_timeout

    monkeypatch.setenv("DISTLEARN_CONNECT_TIMEOUT", "1")
    assert connect_timeout() == 1.0  # the wait the client is given
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ConnectionError, match=f"no Dask scheduler answered at {address} within 1 s"):
        with get_client(address):
            pass
    X = np.random.default_rng(0).standard_normal((40, 3))
    from distlearn.data import create_dataset

    create_dataset(tmp_path / "s.zarr", X, np.where(X[:, 0] > 0, 1, -1))
    assert main(["train", str(tmp_path / "s.zarr"), "--model", "obpm", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and address in err and "Traceback" not in err
    monkeypatch.setenv("DISTLEARN_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="DISTLEARN_CONNECT_TIMEOUT='soon'"):
        with get_client(address):
            pass
    assert open_dataset(tmp_path / "s.zarr").n_samples == 40


def test_a_model_too_large_for_memory_is_refused_before_allocating(tmp_path, capsys):
    from distlearn.ensembles.engine import init_ensemble
    from distlearn.learners.linear import init_state

    with pytest.raises(ValueError, match=r"the weights \(1,000,000,000,001 x 1, 8 bytes each\) would need 7\.3 TiB"):
        init_state(10**12, 1)
    with pytest.raises(ValueError, match="the ensemble's weights"):
        init_ensemble(10**10, 100, 1)
    assert init_state(1000, 3).W.shape == (1001, 3)
    f = tmp_path / "huge.svm"
    f.write_bytes(b"1 1000000000000:1\n-1 2:1\n")
    assert main(["convert", str(f), str(tmp_path / "h.zarr")]) == 0
    capsys.readouterr()
    assert main(["train", str(tmp_path / "h.zarr"), "--model", "perceptron"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would need 7.3 TiB" in err and "is n_features right" in err


def _corrupt_store(tmp_path):
    from distlearn.data import create_dataset

    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 5))
    ds = create_dataset(tmp_path / "c.zarr", X, np.where(X[:, 0] > 0, 1, -1), block_rows=100)
    chunk = tmp_path / "c.zarr" / "X" / "c" / "1" / "0"  # dense X: the second block's chunk
    assert chunk.is_file()
    chunk.write_bytes(b"garbage")
    return ds.path


def test_a_corrupt_chunk_is_one_line_in_process_and_on_dask(tmp_path, client, capsys):
    from distlearn import OBPM, Perceptron
    from distlearn.data import StoreError

    path = _corrupt_store(tmp_path)
    msg = r"c\.zarr: block 1 \(rows 100\.\.199\) cannot be read: "
    with pytest.raises(StoreError, match=msg):
        Perceptron().fit(str(path))
    with pytest.raises(StoreError, match=msg):
        OBPM(n_estimators=4, scheduler=client).fit(str(path))
    assert main(["train", str(path), "--model", "perceptron"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "block 1 (rows 100..199) cannot be read" in err


def test_an_interrupted_experiment_says_how_to_resume(tmp_path, monkeypatch, capsys):
    from distlearn.experiments import rcv1_cutoff

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rcv1_cutoff, "pipeline", interrupted)
    assert main(["experiment", "rcv1-cutoff", "--out", str(tmp_path / "o"), "--n-docs", "100"]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rerun the same command to resume" in err and str(tmp_path / "o") in err


def test_a_script_starting_a_cluster_at_top_level_gets_one_clear_line(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import numpy as np\n"
        "from distlearn import OBPM\n"
        "from distlearn.data import create_dataset\n"
        "X = np.random.default_rng(0).standard_normal((100, 4)); y = np.where(X[:, 0] > 0, 1, -1)\n"
        f"create_dataset({str(tmp_path / 's.zarr')!r}, X, y, overwrite=True)\n"
        f"OBPM(n_estimators=2, scheduler='local').fit({str(tmp_path / 's.zarr')!r})\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: the LocalCluster's worker processes did not start; if unguarded.py")
    assert 'if __name__ == "__main__":' in last and "Nanny" not in r.stderr and "bootstrapping" not in r.stderr


def test_a_float32_convert_that_rounds_values_to_zero_is_refused_naming_the_file(tmp_path, capsys):
    f = tmp_path / "tiny.svm"
    f.write_bytes(b"1 1:1e-50 2:1\n-1 1:2 3:1e-60\n")
    assert main(["convert", str(f), str(tmp_path / "a.zarr")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tiny.svm" in err and "2 non-zero values" in err and "float64" in err, err
    assert not (tmp_path / "a.zarr").exists()
    assert main(["convert", str(f), str(tmp_path / "b.zarr"), "--dtype", "float64"]) == 0
    X, _ = open_dataset(tmp_path / "b.zarr").to_scipy()
    assert X[0, 0] == 1e-50 and X[1, 2] == 1e-60


def test_compressed_inputs_of_every_kind_and_a_fake_magic_number(tmp_path, capsys):
    import bz2
    import gzip
    import lzma

    body = b"1 1:0.5 2:1\n-1 2:3\n"
    plain = convert_to(tmp_path, "plain.svm", body)
    for name, pack in (("a.svm.gz", gzip.compress), ("a.svm.bz2", bz2.compress), ("a.svm.xz", lzma.compress)):
        ds = convert_to(tmp_path, name, pack(body))
        assert np.array_equal(ds.to_numpy()[0], plain.to_numpy()[0]), name
    for magic in (b"BZh", b"\xfd7zXZ\x00", b"\x1f\x8b"):  # bzip2's, xz's, gzip's magic, then no such stream
        (tmp_path / "fake.svm").write_bytes(magic + body)
        assert main(["convert", str(tmp_path / "fake.svm"), str(tmp_path / "fake.zarr")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "fake.svm" in err and "Traceback" not in err, err


def test_labels_beyond_int64_stay_floats(tmp_path):
    ds = convert_to(tmp_path, "big.svm", b"99999999999999999999 1:1\n1 2:1\n")
    assert ds.to_numpy()[1].tolist() == [1e20, 1.0] and ds.classes.tolist() == [1.0, 1e20]


def convert_to(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    return convert(tmp_path / name, tmp_path / (name + ".zarr"), dtype="float64")
