from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from distlearn.cli import main

from .conftest import SHARED_DATA
from distlearn.data import open_dataset


def _svm(tmp_path, text=b"1 1:1 3:2\n2 2:5\n3 1:1\n"):
    p = tmp_path / "d.svm"
    p.write_bytes(text)
    return p


def test_help_teaches(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("convert", "info", "generate", "demo", "distlearn convert data.svm data.zarr"):
        assert word in out
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    out = capsys.readouterr().out
    assert "--zero-based" in out and "--overwrite" in out and "examples:" in out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().out


def test_convert_then_info_json(tmp_path, capsys):
    p = _svm(tmp_path)
    assert main(["convert", str(p), str(tmp_path / "d.zarr"), "--json", "--no-progress"]) == 0
    conv = json.loads(capsys.readouterr().out)
    assert conv["n_samples"] == 3 and conv["convert_seconds"] >= 0
    assert main(["info", str(tmp_path / "d.zarr"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["n_samples"], info["n_features"], info["n_classes"]) == (3, 3, 3)
    assert info["classes"] == [1, 2, 3] and info["class_counts"] == [1, 1, 1]
    assert info["nnz"] == 4 and info["density"] == pytest.approx(4 / 9)
    assert info["layout"] == "csr" and info["dtype"] == "float32" and info["n_blocks"] == 1
    assert info["source"].endswith("d.svm")
    assert main(["info", str(tmp_path / "d.zarr"), "--validate"]) == 0
    out = capsys.readouterr().out
    assert "3 x 3" in out and "validated" in out


def test_convert_options(tmp_path, capsys):
    p = _svm(tmp_path, b"1 0:1 2:2\n-1 1:5\n")
    args = ["convert", str(p), str(tmp_path / "z.zarr"), "--zero-based", "--dense", "--dtype", "float64",
            "--n-features", "5", "--block-rows", "1", "--no-progress"]
    assert main(args) == 0
    ds = open_dataset(tmp_path / "z.zarr")
    assert ds.layout == "dense" and ds.dtype == np.float64 and ds.shape == (2, 5) and ds.n_blocks == 2
    assert ds.to_numpy()[0].tolist() == [[1, 0, 2, 0, 0], [0, 5, 0, 0, 0]]


def test_errors_exit_2_with_file_and_line(tmp_path, capsys):
    p = _svm(tmp_path, b"1 1:1\n1 0:1\n")
    assert main(["convert", str(p), str(tmp_path / "o.zarr"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "d.svm:2:" in err and "'0:1'" in err and "--zero-based" in err
    assert not (tmp_path / "o.zarr").exists()
    ok = _svm(tmp_path)
    assert main(["convert", str(ok), str(tmp_path / "o.zarr"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["convert", str(ok), str(tmp_path / "o.zarr"), "--no-progress"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "missing.zarr")]) == 2
    assert "no such store" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["convert", str(ok), "x.zarr", "--block-rows", "0"])
    assert "must be >= 1" in capsys.readouterr().err


def test_generate_rcv1_and_obpm(tmp_path, capsys):
    assert main(["generate", "rcv1", str(tmp_path / "r.zarr"), "--n-samples", "500", "--n-features", "2000",
                 "--json", "--no-progress"]) == 0
    res = json.loads(capsys.readouterr().out)
    ds = open_dataset(res["outputs"][0]["path"], validate="full")
    assert ds.shape == (500, 2000) and ds.layout == "csr"
    assert main(["generate", "rcv1", str(tmp_path / "r.svm"), "--n-samples", "500", "--n-features", "2000"]) == 0
    capsys.readouterr()
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(tmp_path / "r.svm"), n_features=2000, dtype=np.float32)
    X2, y2 = ds.to_scipy()
    assert (X != X2).nnz == 0 and np.array_equal(y, y2)  # same seed, same data, either format
    assert main(["generate", "obpm", str(tmp_path / "a.zarr"), "--label-noise", "0.1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [o["n_samples"] for o in res["outputs"]] == [1000, 1000]
    assert os.path.exists(tmp_path / "a-test.zarr")


def test_python_dash_m(tmp_path):
    r = subprocess.run([sys.executable, "-m", "distlearn", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("distlearn ")


@pytest.mark.cluster
def test_convert_on_a_scheduler(tmp_path, dask_scheduler, capsys):
    p = _svm(tmp_path, b"".join(b"%d 1:%d 7:1\n" % (i % 3, i) for i in range(1, 3000)))
    assert main(["convert", str(p), str(tmp_path / "s.zarr"), "--scheduler", dask_scheduler["scheduler_file"],
                 "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["n_samples"] == 2999


# The demo on a scheduler: tests/test_readme.py::test_demo_prints_what_the_readme_shows.


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "letter.svm").exists(), reason="needs ../shared/data/letter.svm")
def test_letter_convert_and_info(tmp_path, capsys):
    assert main(["convert", str(SHARED_DATA / "letter.svm"), str(tmp_path / "letter.zarr"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "letter.zarr"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["n_samples"], info["n_features"], info["n_classes"]) == (20000, 16, 26)
    assert info["classes"] == list(range(1, 27))


@pytest.fixture
def art_stores(tmp_path, capsys):
    assert main(["generate", "obpm", str(tmp_path / "art.zarr"), "--n-samples", "2000", "--block-rows", "100"]) == 0
    capsys.readouterr()
    return tmp_path / "art.zarr", tmp_path / "art-test.zarr"


def test_train_in_process_json_and_saved_model(art_stores, tmp_path, capsys):
    from distlearn import OBPM
    from distlearn.model import load_model

    train, test = art_stores
    model = tmp_path / "m.npz"
    argv = ["train", str(train), "--test", str(test), "--model", "obpm", "--param", "n_estimators=20",
            "--param", "tau=0.4", "--epochs", "2", "--seed", "3", "--save", str(model), "--json", "--in-process"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "OBPM" and out["epochs"] == 2 and len(out["epoch_online_errors"]) == 2
    assert 0.0 <= out["test_error"] < 0.1 and out["job"]["group_blocks"] == 2 * 20
    est = OBPM(n_estimators=20, tau=0.4, epochs=2, random_state=3, scheduler="in-process").fit(str(train))
    m = load_model(model)
    np.testing.assert_array_equal(m.coef_, est.coef_)
    np.testing.assert_array_equal(m.intercept_, est.intercept_)
    assert m.meta["estimator"] == "OBPM" and m.meta["params"]["tau"] == 0.4
    assert abs((1 - m.score(str(test))) - out["test_error"]) < 1e-12
    assert "tau" not in out  # one tau given: nothing chosen
    # the human table
    assert main(["train", str(train), "--model", "alma", "--param", "alpha=0.9", "--epochs", "1"]) == 0
    text = capsys.readouterr().out
    assert "online error" in text and "ALMA" in text


def test_train_obpm_defaults_report_the_tau_chosen(art_stores, capsys):
    from distlearn import OBPM

    train, _ = art_stores
    assert main(["train", str(train), "--model", "obpm", "--epochs", "1", "--seed", "3", "--json", "--in-process"]) == 0
    out = json.loads(capsys.readouterr().out)
    est = OBPM(epochs=1, random_state=3, scheduler="in-process").fit(str(train))  # the defaults: tau="auto"
    assert out["tau"] == est.tau_
    assert out["tau_online_errors"] == {f"{t:g}": int(e) for t, e in zip(est.taus_, est.tau_online_errors_)}
    assert len(out["tau_online_errors"]) == 5 and min(out["tau_online_errors"].values()) == \
        out["tau_online_errors"][f"{est.tau_:g}"]
    assert main(["train", str(train), "--model", "obpm", "--epochs", "1", "--in-process"]) == 0
    assert "chosen from the data" in capsys.readouterr().out


def test_train_errors_exit_2(art_stores, capsys):
    train, _ = art_stores
    assert main(["train", str(train), "--model", "obpm", "--param", "nope=1"]) == 2
    assert "'nope' is not a parameter of OBPM" in capsys.readouterr().err
    assert main(["train", str(train), "--model", "obpm", "--resume"]) == 2
    assert "--resume needs --checkpoint" in capsys.readouterr().err
    assert main(["train", str(train), "--model", "perceptron", "--checkpoint", "x.zarr"]) == 2
    assert "apply to --model obpm" in capsys.readouterr().err


def test_train_kernel_models(art_stores, capsys):
    from distlearn import KernelMIRA

    train, test = art_stores
    argv = ["train", str(train), "--test", str(test), "--model", "kernel-mira", "--param", "budget=40",
            "--param", "gamma=2.0", "--seed", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    est = KernelMIRA(budget=40, gamma=2.0, random_state=1).fit(str(train))
    assert out["model"] == "KernelMIRA" and out["n_support"] == est.n_support_.sum() <= 40
    assert out["online_errors"] == est.online_errors_ and out["n_removed"] == est.n_removed_
    assert out["gamma"] == est.gamma_ == 2.0 and out["beta"] == est.beta_  # the values run ("auto" resolved)
    from distlearn.data.store import open_dataset
    Xt, yt = open_dataset(str(test)).to_scipy()
    assert abs(out["test_error"] - (1 - est.score(Xt, yt))) < 1e-12
    from distlearn.model import KernelModel, load_model

    saved = train.parent / "k.npz"
    argv = ["train", str(train), "--model", "kernel-mira", "--param", "budget=40", "--param", "gamma=2.0", "--seed",
            "1", "--save", str(saved)]
    assert main(argv) == 0
    capsys.readouterr()
    m = load_model(saved)
    assert isinstance(m, KernelModel) and m.meta["kernel"] == "rbf" and m.meta["estimator"] == "KernelMIRA"
    assert np.array_equal(m.predict(Xt), est.predict(Xt))
    np.testing.assert_array_equal(m.decision_function(Xt), est.decision_function(Xt))
    # beta="auto" (issue 29): the variable cache works with the perceptron's defaults; beta=0 is refused
    assert main(["train", str(train), "--model", "kernel-perceptron", "--param", "budget=variable"]) == 0
    capsys.readouterr()
    assert main(["train", str(train), "--model", "kernel-perceptron", "--param", "budget=variable", "--param",
                 "beta=0"]) == 2
    assert "needs beta > 0" in capsys.readouterr().err


@pytest.mark.parametrize("make", ["mira-average", "obpm", "pbpm", "vote"])
def test_kernel_model_files(tmp_path, make):
    from distlearn import KernelMIRA, KernelOBPM, KernelPerceptron, KernelPermutationBPM
    from distlearn.model import load_model, save_model

    rs = np.random.default_rng(0)
    X = rs.normal(size=(150, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, "pos", "neg")
    est = {"mira-average": KernelMIRA(gamma=0.5, budget="variable", conversion="average", random_state=0),
           "obpm": KernelOBPM(n_estimators=5, base=KernelMIRA(gamma=0.5, budget=20), random_state=0),
           "pbpm": KernelPermutationBPM(n_estimators=3, base=KernelPerceptron(kernel="poly", degree=2, coef0=1.0),
                                        random_state=0),
           "vote": KernelPerceptron(conversion="vote", random_state=0)}[make].fit(X, y)
    path = tmp_path / "k.npz"
    m = load_model(save_model(est, path))
    np.testing.assert_array_equal(m.decision_function(X), est.decision_function(X))
    assert np.array_equal(m.predict(X), est.predict(X)) and m.classes_.tolist() == ["neg", "pos"]
    # a tampered file: the kernel name, or the shapes, no longer fit
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    np.savez(tmp_path / "t.npz", **{**arrays, "meta": np.array(json.dumps({**meta, "kernel": "sigmoid"}))})
    with pytest.raises(ValueError, match="t.npz: inconsistent kernel model"):
        load_model(tmp_path / "t.npz")
    np.savez(tmp_path / "s.npz", **{**arrays, "dual_coef": arrays["dual_coef"][:, :-1]})
    with pytest.raises(ValueError, match="s.npz: inconsistent kernel model"):
        load_model(tmp_path / "s.npz")


def test_model_files_are_not_pickles(tmp_path):
    from distlearn.model import load_model

    bad = tmp_path / "evil.npz"
    np.savez(bad, coef=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="evil.npz"):
        load_model(bad)


@pytest.mark.cluster
def test_train_on_a_scheduler_with_checkpoint_and_resume(art_stores, tmp_path, dask_scheduler, capsys):
    train, _ = art_stores
    ck = tmp_path / "ck.zarr"
    base = ["train", str(train), "--model", "obpm", "--param", "n_estimators=16", "--epochs", "2", "--json",
            "--scheduler", dask_scheduler["address"], "--checkpoint", str(ck), "--checkpoint-every", "4"]
    assert main(base) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*base, "--resume"]) == 0  # nothing left to do: the model comes from the checkpoint
    again = json.loads(capsys.readouterr().out)
    assert again["job"]["group_blocks"] == 0 and again["job"]["resumed_from"] == [1, 4]
    assert again["epoch_online_errors"] == first["epoch_online_errors"]
    more_argv = [("3" if a == "2" else a) for a in base]  # --epochs 3: one more epoch on top
    assert main([*more_argv, "--resume"]) == 0
    more = json.loads(capsys.readouterr().out)
    assert more["job"]["group_blocks"] == 20 * 2 and more["epochs"] == 3


def test_train_data_parallel_shards(art_stores, capsys):
    from distlearn import ParameterMixing

    train, test = art_stores
    assert main(["train", str(train), "--test", str(test), "--model", "perceptron", "--shards", "4",
                 "--epochs", "3", "--json", "--seed", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ParameterMixing(n_shards=4, epochs=3, random_state=1).fit(str(train))
    assert out["model"] == "ParameterMixing" and out["shards"] == 4
    assert out["epoch_online_errors"] == [int(v) for v in ref.epoch_online_errors_]
    assert main(["train", str(train), "--model", "obpm", "--shards", "2"]) == 2
    assert "shards apply to single learners" in capsys.readouterr().err
