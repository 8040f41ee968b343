"""distlearn predict / evaluate with model files, checked against scikit-learn's metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

from distlearn import Perceptron
from distlearn.cli import main
from distlearn.data import create_dataset
from distlearn.data._svmlight import write_svmlight
from distlearn.model import load_model, save_model
from distlearn.training import evaluate, predict


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    d = tmp_path_factory.mktemp("digits")
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    create_dataset(d / "train.zarr", X[:1200], y[:1200], block_rows=300)
    create_dataset(d / "test.zarr", X[1200:], y[1200:], block_rows=200)
    est = Perceptron(random_state=0).fit(str(d / "train.zarr"))
    save_model(est, d / "m.npz")
    return d, est, X[1200:], y[1200:]


def test_evaluate_matches_sklearn_metrics(digits):
    d, est, Xt, yt = digits
    res = evaluate(load_model(d / "m.npz"), str(d / "test.zarr"))
    pred = est.predict(Xt)
    assert res["labels"] == list(range(10)) and res["n"] == len(yt)
    np.testing.assert_array_equal(res["confusion"], confusion_matrix(yt, pred, labels=range(10)))
    p, r, f, s = precision_recall_fscore_support(yt, pred, labels=range(10), zero_division=0)
    for c in range(10):
        pc = res["per_class"][str(c)]
        assert pc["precision"] == pytest.approx(p[c]) and pc["recall"] == pytest.approx(r[c])
        assert pc["f1"] == pytest.approx(f[c]) and pc["support"] == s[c]
    assert res["error"] == pytest.approx(np.mean(pred != yt)) and res["accuracy"] == pytest.approx(np.mean(pred == yt))


def test_unknown_test_labels_are_errors_and_listed(digits):
    d, est, Xt, yt = digits
    y2 = yt.copy()
    y2[:5] = 42
    res = evaluate(est, Xt, y2)
    assert res["labels"][-1] == 42 and res["per_class"]["42"]["recall"] == 0.0 and res["per_class"]["42"]["support"] == 5
    assert res["errors"] == int(np.sum(est.predict(Xt) != y2))


def test_predict_stores_and_files(digits, tmp_path):
    d, est, Xt, yt = digits
    m = load_model(d / "m.npz")
    out = predict(m, str(d / "test.zarr"), out=tmp_path / "p.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), est.predict(Xt))
    assert out["n"] == len(yt)
    # an svmlight file whose rows use fewer columns than the model: widened, same scores
    f = tmp_path / "t.svm"
    write_svmlight(f, [(Xt[:, :40], yt)])
    res = predict(m, str(f), decision=True, out=tmp_path / "s.csv")
    Xn = Xt.copy()
    Xn[:, 40:] = 0
    np.testing.assert_allclose(np.loadtxt(tmp_path / "s.csv", delimiter=","), est.decision_function(Xn), rtol=1e-12)
    assert res["n"] == len(yt)
    wide = tmp_path / "w.svm"
    wide.write_bytes(b"1 70:1\n")
    with pytest.raises(ValueError, match="70 features, but the model was trained on 64"):
        predict(m, str(wide))


def test_cli_predict_evaluate(digits, tmp_path, capsys):
    d, est, Xt, yt = digits
    assert main(["predict", str(d / "m.npz"), str(d / "test.zarr"), "--out", str(tmp_path / "l.txt")]) == 0
    assert np.loadtxt(tmp_path / "l.txt").astype(int).tolist() == est.predict(Xt).tolist()
    capsys.readouterr()
    assert main(["evaluate", str(d / "m.npz"), str(d / "test.zarr"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == len(yt) and len(res["confusion"]) == 10
    assert main(["evaluate", str(d / "m.npz"), str(d / "test.zarr")]) == 0
    table = capsys.readouterr().out
    assert "precision  recall" in table and "confusion (rows: true, columns: predicted):" in table
    assert main(["predict", str(d / "m.npz"), str(d / "test.zarr"), "--proba"]) == 2
    assert "not calibrated probabilities" in capsys.readouterr().err
    assert main(["predict", str(d / "m.npz"), str(d / "test.zarr"), "--out", str(tmp_path / "x.parquet")]) == 2
    assert "write .npy, .csv, .txt or .zarr" in capsys.readouterr().err


@pytest.mark.parametrize("conversion", ["vote", "sample"])
@pytest.mark.parametrize("binary", [True, False])
def test_vote_and_sample_models_round_trip(tmp_path, conversion, binary):
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    if binary:
        y = np.where(y > 4, 1, -1)
    est = Perceptron(conversion=conversion, random_state=0).fit(X, y)
    save_model(est, tmp_path / "v.npz")
    m = load_model(tmp_path / "v.npz")
    np.testing.assert_array_equal(m.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(m.predict(X), est.predict(X))
    assert m.meta["kind"] == conversion and evaluate(m, X, y)["error"] == pytest.approx(np.mean(est.predict(X) != y))
    # a tampered file (negative votes) is refused with its name
    with np.load(tmp_path / "v.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["w"] = -arrays["w"]
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=f"bad.npz: inconsistent {conversion} model"):
        load_model(tmp_path / "bad.npz")


@pytest.mark.parametrize("binary", [True, False])
def test_kernel_vote_model_round_trip(tmp_path, binary):
    from distlearn import KernelPerceptron

    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    if binary:
        y = np.where(y > 4, 1, -1)
    est = KernelPerceptron(kernel="rbf", gamma=0.05, budget=100, conversion="vote", random_state=0).fit(X, y)
    save_model(est, tmp_path / "kv.npz")
    m = load_model(tmp_path / "kv.npz")
    np.testing.assert_array_equal(m.decision_function(X), est.decision_function(X))
    np.testing.assert_array_equal(m.predict(X), est.predict(X))
    assert m.meta["kind"] == "kernel" and m.meta["vote_span"][1] >= m.meta["vote_span"][0]
    # events pointing past the stored patterns: refused, naming the file
    with np.load(tmp_path / "kv.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["vote_p"] = arrays["vote_p"] + len(arrays["support_vectors"])
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="bad.npz: inconsistent kernel vote"):
        load_model(tmp_path / "bad.npz")


def test_obpm_members_saved_on_request(digits, tmp_path, capsys):
    from distlearn import OBPM

    d, _, Xte, yte = digits
    est = OBPM(n_estimators=8, tau=0.5, random_state=0, keep_members=True).fit(str(d / "train.zarr"))
    save_model(est, tmp_path / "plain.npz")
    save_model(est, tmp_path / "members.npz", members=True)
    plain, full = load_model(tmp_path / "plain.npz"), load_model(tmp_path / "members.npz")
    assert not hasattr(plain, "members_")
    np.testing.assert_array_equal(full.members_, est.members_)
    np.testing.assert_array_equal(full.weights_, est.weights_)
    np.testing.assert_array_equal(full.predict(Xte), est.predict(Xte))
    # member j alone is a linear hypothesis (intercept last)
    Wj = full.members_[3]
    assert Wj.shape == (10, Xte.shape[1] + 1)
    with pytest.raises(ValueError, match="has no members_"):
        save_model(Perceptron(random_state=0).fit(Xte, yte), tmp_path / "p.npz", members=True)
    # the CLI: --save-members with OBPM; refused up front otherwise
    assert main(["train", str(d / "train.zarr"), "--model", "obpm", "--param", "n_estimators=4", "--save",
                 str(tmp_path / "cli.npz"), "--save-members", "--in-process"]) == 0
    assert load_model(tmp_path / "cli.npz").members_.shape[0] == 4
    capsys.readouterr()
    assert main(["train", str(d / "train.zarr"), "--model", "perceptron", "--save", str(tmp_path / "x.npz"),
                 "--save-members"]) == 2
    assert "--save-members needs" in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()


def test_predictions_stream_to_npy_zarr_and_text(digits, tmp_path):
    import zarr

    d, est, Xt, yt = digits
    m = load_model(d / "m.npz")
    store = str(d / "test.zarr")  # 3 blocks of at most 200 rows
    for name, read in (("l.npy", np.load), ("l.zarr", lambda p: zarr.open_array(p, mode="r")[:]),
                       ("l.txt", lambda p: np.loadtxt(p, dtype=np.int64))):
        res = predict(m, store, out=tmp_path / name)
        np.testing.assert_array_equal(read(tmp_path / name), est.predict(Xt))
        assert res["n"] == len(yt)
    res = predict(m, store, decision=True, out=tmp_path / "s.zarr")
    z = zarr.open_array(tmp_path / "s.zarr", mode="r")
    assert z.shape == (len(yt), 10) and z.chunks[0] == 200
    np.testing.assert_allclose(z[:], est.decision_function(Xt), rtol=1e-12)
    np.testing.assert_allclose(np.load(predict(m, store, decision=True, out=tmp_path / "s.npy")["out"]), z[:])
    # a failure mid-stream leaves no file under the name, and no temporary either
    from distlearn.training import write_values

    def broken():
        yield np.arange(3)
        raise RuntimeError("disk full")

    for name in ("x.npy", "x.zarr", "x.csv"):
        with pytest.raises(RuntimeError):
            write_values(broken(), tmp_path / name)
        assert not any(p.name.startswith(name) for p in tmp_path.iterdir()), sorted(tmp_path.iterdir())
    with pytest.raises(ValueError, match="write .npy, .csv, .txt or .zarr"):
        write_values(iter([]), tmp_path / "x.parquet")


def test_cli_predict_on_a_dask_cluster(digits, tmp_path, dask_scheduler, capsys):
    d, est, Xt, yt = digits
    out = tmp_path / "labels.zarr"
    assert main(["predict", str(d / "m.npz"), str(d / "test.zarr"), "--scheduler", dask_scheduler["address"],
                 "--out", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == len(yt) and res["blocks"] == 3  # 597 rows in blocks of 200
    import zarr

    np.testing.assert_array_equal(zarr.open_array(out, mode="r")[:], est.predict(Xt))
    (tmp_path / "rows.svm").write_bytes(b"1 3:1\n")
    assert main(["predict", str(d / "m.npz"), str(tmp_path / "rows.svm"), "--workers", "1"]) == 2
    assert "is not one" in capsys.readouterr().err


def test_cli_predict_summary_prints_labels_as_the_file_holds_them(tmp_path, capsys):
    """Without --out, predict's summary shows the first labels as --out writes them (a label 1.0 is "1",
    class names as names), and scores to 6 digits, a multiclass row in brackets."""
    table = tmp_path / "t.csv"
    table.write_text("label,a,b\n1,0.5,0.2\n0,0.1,0.9\n2,0.7,0.1\n0,0.2,0.8\n")
    model = tmp_path / "m.npz"
    assert main(["train", str(table), "--model", "perceptron", "--save", str(model)]) == 0
    capsys.readouterr()
    assert main(["predict", str(model), str(table), "--out", str(tmp_path / "p.txt")]) == 0
    written = (tmp_path / "p.txt").read_text().split()
    capsys.readouterr()
    assert main(["predict", str(model), str(table)]) == 0
    shown = capsys.readouterr().out.split(": ", 1)[1].split(" (--out")[0].split(", ")
    assert shown == written and all("." not in v for v in shown)
    assert main(["predict", str(model), str(table), "--decision"]) == 0
    rows = capsys.readouterr().out.split(": ", 1)[1].split(" (--out")[0]
    assert rows.startswith("[") and rows.count("[") == 4
    assert all(len(v.strip("[]-").replace(".", "").lstrip("0")) <= 6 for v in rows.replace("], [", ", ").split(", "))
    names = tmp_path / "n.csv"
    names.write_text("label,a,b\ncat,0.5,0.2\ndog,0.1,0.9\n")
    assert main(["train", str(names), "--model", "perceptron", "--save", str(tmp_path / "n.npz")]) == 0
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "n.npz"), str(names)]) == 0
    assert capsys.readouterr().out.startswith("2 labels: cat, dog")
