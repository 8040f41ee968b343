"""``distlearn train --model arow|nag``: the adaptive learners from the command line, their
model files (save, load, predict identically) and their one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distlearn import AROW, NormalizedGradient
from distlearn.cli import main
from distlearn.data.store import open_dataset
from distlearn.model import LinearModel, load_model, save_model
from distlearn.training import MODELS, make_estimator


@pytest.fixture
def art_stores(tmp_path, capsys):
    assert main(["generate", "obpm", str(tmp_path / "art.zarr"), "--n-samples", "1500", "--block-rows", "100"]) == 0
    capsys.readouterr()
    return tmp_path / "art.zarr", tmp_path / "art-test.zarr"


def test_help_lists_the_adaptive_models(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ") and ln.split()}
    assert "AROW" in lines["arow"] and "r=1" in lines["arow"]
    assert "NAG" in lines["nag"] and "loss=logistic|hinge" in lines["nag"]
    assert "arow" in MODELS and "nag" in MODELS


def test_make_estimator_by_name():
    est = make_estimator("nag", {"loss": "hinge", "eta": 0.5}, seed=3, epochs=2)
    assert type(est) is NormalizedGradient and est.get_params()["loss"] == "hinge"
    assert (est.eta, est.random_state, est.epochs) == (0.5, 3, 2)
    assert type(make_estimator("arow", {"r": 0.1})) is AROW
    with pytest.raises(ValueError, match="'lr' is not a parameter of AROW"):
        make_estimator("arow", {"lr": 1})


@pytest.mark.parametrize("model,params,cls,kw", [
    ("arow", ["r=0.5"], AROW, {"r": 0.5}),
    ("nag", ["loss=hinge", "eta=0.5"], NormalizedGradient, {"loss": "hinge", "eta": 0.5}),
    ("nag", ["conversion=average"], NormalizedGradient, {"conversion": "average"}),
])
def test_train_save_load_predict_identically(art_stores, tmp_path, capsys, model, params, cls, kw):
    train, test = art_stores
    path = tmp_path / "m.npz"
    argv = ["train", str(train), "--test", str(test), "--model", model, "--epochs", "2", "--seed", "5",
            "--save", str(path), "--json"]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    est = cls(**kw, epochs=2, random_state=5).fit(str(train))
    assert out["model"] == cls.__name__ and out["epochs"] == 2
    assert out["online_errors"] == est.online_errors_ and out["n_updates"] == est.n_updates_
    assert out["params"] == {**kw, "epochs": 2, "random_state": 5}
    m = load_model(path)
    assert isinstance(m, LinearModel) and m.meta["estimator"] == cls.__name__
    assert all(m.meta["params"][k] == v for k, v in kw.items())
    np.testing.assert_array_equal(m.coef_, est.coef_)
    np.testing.assert_array_equal(m.intercept_, est.intercept_)
    Xt, _ = open_dataset(str(test)).to_scipy()
    np.testing.assert_array_equal(m.decision_function(Xt), est.decision_function(Xt))
    assert np.array_equal(m.predict(Xt), est.predict(Xt))
    assert abs((1 - m.score(str(test))) - out["test_error"]) < 1e-12
    # the saved file through predict / evaluate
    assert main(["predict", str(path), str(test), "--out", str(tmp_path / "p.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "p.npy"), est.predict(Xt))
    capsys.readouterr()
    assert main(["evaluate", str(path), str(test), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["error"] == out["test_error"]


@pytest.mark.parametrize("cls,kw", [(AROW, {"r": 0.2}), (NormalizedGradient, {"loss": "logistic"})])
def test_multiclass_model_files(tmp_path, cls, kw):
    rs = np.random.default_rng(0)
    X = rs.normal(size=(300, 6)) * np.array([1e-2, 1, 1e2, 1, 10, 1])
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3] / np.array([1e-2, 1, 1e2]), axis=1)]
    est = cls(**kw, random_state=0).fit(X, y)
    m = load_model(save_model(est, tmp_path / "mc.npz"))
    np.testing.assert_array_equal(m.decision_function(X), est.decision_function(X))
    assert np.array_equal(m.predict(X), est.predict(X)) and m.classes_.tolist() == ["a", "b", "c"]


def test_adaptive_errors_exit_2_in_one_line(art_stores, capsys):
    train, _ = art_stores
    cases = [
        (["--model", "nag", "--param", "loss=squared"], "loss must be one of 'logistic', 'hinge'"),
        (["--model", "arow", "--param", "r=0"], "r"),
        (["--model", "arow", "--param", "eta=1"], "--param 'eta' is not a parameter of AROW"),
        (["--model", "arow", "--shards", "2"], "shards (parameter mixing) do not apply to arow"),
        (["--model", "obpm", "--param", "base=nag"], "base='nag': OBPM runs its members in one fused ensemble"),
        (["--model", "nag", "--workers", "2"], "--scheduler/--workers apply to --model obpm, kernel-obpm or --shards"),
    ]
    for args, msg in cases:
        assert main(["train", str(train), *args]) == 2, args
        err = capsys.readouterr().err
        assert msg in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err
