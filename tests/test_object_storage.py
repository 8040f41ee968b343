"""Stores and checkpoints on object storage, against a real S3 server on 127.0.0.1.

moto's server mode is a real HTTP S3 endpoint; fsspec + s3fs talk to it as to AWS, with the endpoint
and (fake) credentials from the environment, as a user's run would take them.  Every path through
the CLI: convert -> info -> train -> predict -> evaluate on ``s3://`` equals the same on a local
store (the same model bits); a chunk deleted in the bucket is the one-line "missing" error; the
writer's safety rules on a prefix; unknown schemes and missing backends; checkpoints; and one
training on a real two-worker cluster whose workers open the URL themselves.
"""

from __future__ import annotations

import json
import logging
import os
import socket

import numpy as np
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from distlearn._urls import UrlError, check_url, is_url  # noqa: E402
from distlearn.cli import main  # noqa: E402
from distlearn.data import StoreError, open_dataset  # noqa: E402

BUCKET = "bkt"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 (random free port), its endpoint and fake credentials in the
    environment (as a pod's env would hold them), one bucket; the s3fs filesystem."""
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    try:
        yield {"fs": fs, "env": env}
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture(scope="module")
def svm(tmp_path_factory):
    """300 rows, 5 features, two classes (a seeded linear rule): the input of every store here."""
    d = tmp_path_factory.mktemp("objstore")
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] - 0.2 * X[:, 3] > 0, 1, -1)
    path = d / "a.svm"
    path.write_text("".join(f"{t} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(x)) + "\n"
                            for x, t in zip(X, y)))
    return path


def _ok(capsys, *argv) -> str:
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return cap.out


def _one_line(capsys, *argv, needles=()) -> str:
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("distlearn "), err
    for n in needles:
        assert n in err, err
    return err


def _model(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k != "meta"}


def test_what_is_a_url():
    assert is_url("s3://b/x.zarr") and is_url("gs://b/x") and is_url("memory://x")
    # local paths stay local: a drive letter, a directory literally named "s3:", a relative path
    for local in ("C:", "C:\\data\\x.zarr", "C:x.zarr", "C://data/x.zarr", "s3:", "s3:/x.zarr", "data/s3://x.zarr",
                  "x.zarr", ""):
        assert not is_url(local), local
    assert check_url("s3://b/x.zarr") == "s3"


def test_convert_info_train_predict_evaluate_on_s3_equal_local(s3, svm, tmp_path, capsys):
    url, local = f"s3://{BUCKET}/pipe/a.zarr", tmp_path / "a.zarr"
    for out in (url, local):
        _ok(capsys, "convert", svm, out, "--block-rows", "64")
    # the objects are in the bucket, nothing local named "s3:"
    keys = s3["fs"].find(f"{BUCKET}/pipe/a.zarr")
    assert f"{BUCKET}/pipe/a.zarr/zarr.json" in keys and f"{BUCKET}/pipe/a.zarr/y/c/4" in keys
    assert not os.path.exists("s3:") and not (tmp_path / "s3:").exists()
    info_s3 = json.loads(_ok(capsys, "info", url, "--json", "--validate").split("\nvalidated")[0])
    info_local = json.loads(_ok(capsys, "info", local, "--json", "--validate").split("\nvalidated")[0])
    assert info_s3["path"] == url
    assert info_s3["bytes_stored"] == info_local["bytes_stored"] > 0
    drop = ("path", "created", "bytes_stored")
    assert {k: v for k, v in info_s3.items() if k not in drop} == {k: v for k, v in info_local.items() if k not in drop}
    assert info_s3["n_samples"] == 300 and info_s3["n_blocks"] == 5

    res = {}
    for name, store in (("s3", url), ("local", local)):
        m = tmp_path / f"{name}.npz"
        res[name] = json.loads(_ok(capsys, "train", store, "--model", "perceptron", "--seed", "3", "--json",
                                   "--save", m))
        assert res[name]["store"] == str(store)
    assert res["s3"]["online_errors"] == res["local"]["online_errors"] > 0
    ms3, mloc = _model(tmp_path / "s3.npz"), _model(tmp_path / "local.npz")
    assert ms3.keys() == mloc.keys() and ms3
    for k in ms3:
        np.testing.assert_array_equal(ms3[k], mloc[k])  # the same bits

    p_s3 = json.loads(_ok(capsys, "predict", tmp_path / "local.npz", url, "--json"))
    p_loc = json.loads(_ok(capsys, "predict", tmp_path / "local.npz", local, "--json"))
    assert p_s3["n"] == 300 and p_s3["values"] == p_loc["values"]
    e_s3 = json.loads(_ok(capsys, "evaluate", tmp_path / "s3.npz", url, "--json"))
    e_loc = json.loads(_ok(capsys, "evaluate", tmp_path / "local.npz", local, "--json"))
    assert e_s3["errors"] == e_loc["errors"] and e_s3["confusion"] == e_loc["confusion"]
    assert sum(map(sum, e_s3["confusion"])) == 300


def test_a_chunk_deleted_in_the_bucket_is_the_missing_chunk_line(s3, svm, capsys):
    url = f"s3://{BUCKET}/hole/a.zarr"
    _ok(capsys, "convert", svm, url, "--block-rows", "64")
    ds = open_dataset(url)
    before = ds.read_block(1)
    assert before.X.shape == (64, 5) and np.isfinite(before.X.data).all()
    s3["fs"].rm_file(f"{BUCKET}/hole/a.zarr/y/c/1")
    with pytest.raises(StoreError, match=r"block 1 \(rows 64\.\.127\): chunk y/c/1 is missing"):
        open_dataset(url).read_block(1)  # never zeros or NaN read as labels
    np.testing.assert_array_equal(open_dataset(url).read_block(0).y, ds.read_block(0).y)  # the rest reads
    _one_line(capsys, "info", url, "--validate", needles=(url, "chunk y/c/1 is missing"))
    _one_line(capsys, "train", url, "--model", "perceptron", needles=(url, "chunk y/c/1 is missing"))
    # a flipped byte in an object is its crc32c checksum's one line, never other numbers
    key = f"{BUCKET}/hole/a.zarr/X/indptr/c/2"
    body = bytearray(s3["fs"].cat_file(key))
    body[len(body) // 2] ^= 0x5A
    s3["fs"].pipe_file(key, bytes(body))
    with pytest.raises(StoreError, match=r"block 2 \(rows 128\.\.191\) cannot be read: .*(?i:checksum|crc)"):
        open_dataset(url).read_block(2)


def test_a_store_replaced_while_read_is_refused(s3, svm, capsys):
    url = f"s3://{BUCKET}/swap/a.zarr"
    _ok(capsys, "convert", svm, url, "--block-rows", "64")
    ds = open_dataset(url)
    ds.read_block(0)
    _ok(capsys, "convert", svm, url, "--block-rows", "64", "--overwrite")  # same bits, a new write
    with pytest.raises(StoreError, match="replaced while it was being read"):
        ds.read_block(2)


def test_overwrite_on_s3_replaces_only_a_distlearn_store(s3, svm, capsys):
    fs = s3["fs"]
    url = f"s3://{BUCKET}/ow/a.zarr"
    _ok(capsys, "convert", svm, url, "--block-rows", "64")
    _one_line(capsys, "convert", svm, url, needles=(url, "already exists; pass --overwrite"))
    _ok(capsys, "convert", svm, url, "--block-rows", "100", "--overwrite")  # a distlearn store: replaced
    assert open_dataset(url).n_blocks == 3
    keys = fs.find(f"{BUCKET}/ow")
    assert f"{BUCKET}/ow/a.zarr/y/c/3" not in keys  # the old store's fourth chunk went with it
    assert not [k for k in keys if ".partial-" in k or ".distlearn-probe" in k], keys  # no temporaries left

    fs.pipe_file(f"{BUCKET}/ow/a.zarr/README.txt", b"mine")  # a foreign object inside the store's prefix
    _one_line(capsys, "convert", svm, url, "--overwrite", needles=(url, "refusing to replace it"))
    assert fs.cat_file(f"{BUCKET}/ow/a.zarr/README.txt") == b"mine"
    assert open_dataset(url).n_blocks == 3  # and the store is untouched

    fs.pipe_file(f"{BUCKET}/ow/notes/todo.txt", b"mine")  # a prefix of someone else's objects
    _one_line(capsys, "convert", svm, f"s3://{BUCKET}/ow/notes", "--overwrite", needles=("refusing to replace it",))
    assert fs.cat_file(f"{BUCKET}/ow/notes/todo.txt") == b"mine"
    _one_line(capsys, "convert", svm, f"s3://{BUCKET}", "--overwrite", needles=("whole bucket",))
    _one_line(capsys, "convert", svm, "s3://no-such-bucket/a.zarr", needles=("s3://no-such-bucket/a.zarr",))


def test_unknown_scheme_or_missing_backend_is_one_line_never_a_local_directory(s3, svm, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    _one_line(capsys, "convert", svm, "foo://b/a.zarr", needles=("foo://b/a.zarr", "unknown URL scheme foo://"))
    _one_line(capsys, "info", "foo://b/a.zarr", needles=("foo://b/a.zarr", "unknown URL scheme"))
    _one_line(capsys, "train", "foo://b/a.zarr", "--model", "perceptron", needles=("unknown URL scheme",))
    try:
        import gcsfs  # noqa: F401
    except ImportError:  # the usual case here: gs:// known to fsspec, its backend not installed
        _one_line(capsys, "convert", svm, "gs://b/a.zarr", needles=("gs://b/a.zarr", "pip install gcsfs"))
        _one_line(capsys, "info", "gs://b/a.zarr", needles=("pip install gcsfs",))
    _one_line(capsys, "convert", f"s3://{BUCKET}/a.svm", tmp_path / "x.zarr", needles=("data files are read from local",))
    _one_line(capsys, "train", svm.parent / "none.zarr", "--model", "perceptron", "--save",
              f"s3://{BUCKET}/m.npz", needles=("local path",))
    assert sorted(os.listdir(tmp_path)) == []  # no "foo:", "gs:" or "s3:" directory
    # a local directory literally named "s3:" is a local path, as it always was
    _ok(capsys, "convert", svm, "s3:/local.zarr")
    assert (tmp_path / "s3:" / "local.zarr" / "zarr.json").is_file()
    assert open_dataset("s3:/local.zarr").n_samples == 300


def test_generate_writes_both_stores_to_s3(s3, capsys):
    url = f"s3://{BUCKET}/gen/o.zarr"
    _ok(capsys, "generate", "obpm", url, "--n-samples", "50", "--seed", "1")
    train, test = open_dataset(url), open_dataset(f"s3://{BUCKET}/gen/o-test.zarr")
    assert train.n_samples == test.n_samples == 50 and train.path == url
    assert not np.array_equal(train.to_numpy()[0], test.to_numpy()[0])


def test_kubernetes_pods_take_credentials_from_the_optional_secret():
    yaml = pytest.importorskip("yaml")
    from pathlib import Path

    k8s = Path(__file__).resolve().parents[1] / "cluster" / "kubernetes"
    containers = []

    def walk(node):
        if isinstance(node, dict):
            if "containers" in node:
                containers.extend(node["containers"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for f in ("daskcluster.yaml", "daskjob.yaml"):
        for doc in yaml.safe_load_all((k8s / f).read_text()):
            walk(doc)
    assert {c["name"] for c in containers} == {"scheduler", "worker", "job"}
    for c in containers:
        assert {"secretRef": {"name": "distlearn-object-storage", "optional": True}} in c.get("envFrom", []), c["name"]


def test_checkpoint_on_s3_resumes(s3, svm, tmp_path, capsys):
    url, ck = f"s3://{BUCKET}/ck/a.zarr", f"s3://{BUCKET}/ck/ck.zarr"
    _ok(capsys, "convert", svm, url, "--block-rows", "64")
    args = ["train", url, "--model", "obpm", "--param", "n_estimators=4", "--param", "tau=0.5", "--epochs", "2",
            "--in-process", "--checkpoint-every", "2", "--json"]
    first = json.loads(_ok(capsys, *args, "--checkpoint", ck, "--save", tmp_path / "a.npz"))
    fs = s3["fs"]
    latest = json.loads(fs.cat_file(f"{BUCKET}/ck/ck.zarr/latest.json"))
    assert latest["epoch"] == 1  # the last cut of epoch 2 (0-based) is recorded in the bucket
    assert not os.path.exists("s3:")
    again = json.loads(_ok(capsys, *args, "--checkpoint", ck, "--resume", "--save", tmp_path / "b.npz"))
    assert again["job"]["resumed_from"] is not None
    for k, v in _model(tmp_path / "a.npz").items():
        np.testing.assert_array_equal(v, _model(tmp_path / "b.npz")[k])
    assert first["online_errors"] == again["online_errors"]
    fs.pipe_file(f"{BUCKET}/ck/other/x.txt", b"mine")
    _one_line(capsys, *args, "--checkpoint", f"s3://{BUCKET}/ck/other", needles=("refusing",))
    assert fs.cat_file(f"{BUCKET}/ck/other/x.txt") == b"mine"


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_train_on_a_two_worker_cluster_from_s3(s3, svm, tmp_path, dask_scheduler, client, capsys):
    """The workers open s3:// themselves: only the URL is on the graph; their credentials and
    endpoint come from their own environment (set here as a pod's env would set it)."""
    url = f"s3://{BUCKET}/dask/a.zarr"
    _ok(capsys, "convert", svm, url, "--block-rows", "64")
    env = s3["env"]

    def set_env() -> None:
        import s3fs

        os.environ.update(env)
        s3fs.S3FileSystem.clear_instance_cache()

    client.run(set_env)
    args = ["train", url, "--model", "obpm", "--param", "n_estimators=4", "--param", "tau=0.5", "--epochs", "2",
            "--json"]
    on_dask = json.loads(_ok(capsys, *args, "--scheduler", dask_scheduler["address"], "--checkpoint",
                             f"s3://{BUCKET}/dask/ck.zarr", "--save", tmp_path / "dask.npz"))
    here = json.loads(_ok(capsys, *args, "--in-process", "--save", tmp_path / "here.npz"))
    for k, v in _model(tmp_path / "here.npz").items():
        np.testing.assert_array_equal(v, _model(tmp_path / "dask.npz")[k])

    def opened() -> list[str]:
        from distlearn import stream

        return [k[0] for k in stream._STORES]

    # predict on the cluster: the workers read the model file by path and the blocks by URL
    pred = json.loads(_ok(capsys, "predict", tmp_path / "here.npz", url, "--scheduler", dask_scheduler["address"],
                          "--json"))
    assert pred["blocks"] == 5
    assert pred["values"] == json.loads(_ok(capsys, "predict", tmp_path / "here.npz", url, "--json"))["values"]
    per_worker = client.run(opened)
    assert len(per_worker) == 2 and any(url in keys for keys in per_worker.values()), per_worker
    assert not [k for keys in per_worker.values() for k in keys if "s3:" in k and k != url], per_worker
    assert s3["fs"].find(f"{BUCKET}/dask/ck.zarr")  # the parts the workers wrote are in the bucket
