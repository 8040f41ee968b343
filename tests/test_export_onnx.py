"""Models out: ``distlearn export`` / :func:`distlearn.export.export_onnx` against onnxruntime.

Every model family is fitted on small data (digits: binary and ten classes, dense and CSR), saved
as ``train --save`` saves it, exported, and run by onnxruntime (the peer): its labels must equal
``distlearn predict``'s (the saved model's) and the estimator's, and its scores their decision
scores to float32 precision (the ONNX-ML attributes are float32). A label may differ only on a row
whose score is within that precision of a tie, and such rows must be rare.
"""

from __future__ import annotations

import json
import subprocess
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import distlearn  # noqa: E402
from distlearn import (  # noqa: E402
    ALMA,
    AROW,
    MIRA,
    OBPM,
    KernelMIRA,
    KernelOBPM,
    KernelPA,
    KernelPerceptron,
    KernelPermutationBPM,
    NormalizedGradient,
    ParameterMixing,
    PassiveAggressive,
    Perceptron,
    PermutationBPM,
)
from distlearn.cli import main  # noqa: E402
from distlearn.export import export_onnx, to_onnx  # noqa: E402
from distlearn.model import KernelModel, LinearModel, load_model, save_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    return X[:300], y[:300], X[300:500], y[300:500]


def _ort(path: Path, X) -> tuple[np.ndarray, np.ndarray]:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    dense = X.toarray() if sp.issparse(X) else X
    return tuple(s.run(None, {"X": np.asarray(dense, dtype=np.float32)}))


def _as_columns(scores: np.ndarray) -> np.ndarray:
    """distlearn's scores in ONNX's layout: binary (n,) -> [-s, s]."""
    return np.column_stack([-scores, scores]) if scores.ndim == 1 else scores


def _agree(est_or_model, X, labels: np.ndarray, scores: np.ndarray) -> int:
    """Assert that ONNX's labels and scores are distlearn's; return how many labels differ (each on
    a row whose best two scores are within float32 precision of a tie)."""
    ref = np.asarray(est_or_model.decision_function(X), dtype=np.float64)
    want = _as_columns(ref)
    assert scores.shape == want.shape and scores.dtype == np.float32
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4 * scale)
    pred = np.asarray(est_or_model.predict(X))
    if ref.ndim == 1:
        gap = np.abs(ref)
    else:
        top = np.sort(ref, axis=1)
        gap = top[:, -1] - top[:, -2]
    near = gap <= 1e-4 * scale
    assert labels.shape == pred.shape
    np.testing.assert_array_equal(labels[~near], pred[~near])
    differ = int(np.sum(labels[near] != pred[near]))
    assert differ <= 0.02 * len(pred), f"{differ} of {len(pred)} rows at a tie have another label"
    return differ


def _check(est, X, y, Xt, tmp_path, name: str) -> dict:
    est.fit(X, y)
    m = save_model(est, tmp_path / f"{name}.npz")
    info = export_onnx(m, tmp_path / f"{name}.onnx")
    labels, scores = _ort(tmp_path / f"{name}.onnx", Xt)
    differ = _agree(load_model(m), Xt, labels, scores)  # what distlearn predict answers from the file
    differ += _agree(est, Xt, labels, scores)  # the estimator itself
    assert info["n_features"] == X.shape[1] and info["classes"] == np.asarray(est.classes_).tolist()
    checked = onnx.load(str(tmp_path / f"{name}.onnx"))
    onnx.checker.check_model(checked, full_check=True)
    assert {o.domain: o.version for o in checked.opset_import} == {"": 17, "ai.onnx.ml": 3}
    assert checked.producer_name == "distlearn"
    return {**info, "labels_differ": differ}


def _check_task(est, task: str, digits, tmp_path, name: str) -> dict:
    """:func:`_check` on digits: ``binary`` (digit > 4) or ``multiclass`` (ten digits)."""
    X, y, Xt, _ = digits
    return _check(est, X, np.where(y > 4, 1, -1) if task == "binary" else y, Xt, tmp_path, name)


LINEAR = [
    ("perceptron", lambda: Perceptron(epochs=2, random_state=0)),
    ("alma", lambda: ALMA(epochs=2, random_state=0)),
    ("pa-ovr", lambda: PassiveAggressive(epochs=2, random_state=0)),
    ("mira-native", lambda: MIRA(epochs=2, random_state=0)),
    ("arow", lambda: AROW(epochs=2, random_state=0)),
    ("nag", lambda: NormalizedGradient(epochs=2, random_state=0)),
    ("obpm", lambda: OBPM(n_estimators=4, tau=0.5, epochs=2, random_state=0)),
    ("permutation-bpm", lambda: PermutationBPM(n_estimators=3, epochs=2, random_state=0)),
    ("mixing", lambda: ParameterMixing(n_shards=3, epochs=2, random_state=0)),
    ("suffix", lambda: Perceptron(epochs=1, conversion="suffix", random_state=0)),
    ("tree", lambda: Perceptron(epochs=1, conversion="tree", random_state=0)),
    ("cutoff", lambda: Perceptron(epochs=1, conversion="cutoff", random_state=0)),
    ("vote", lambda: Perceptron(epochs=1, conversion="vote", random_state=0)),
    ("float32", lambda: Perceptron(epochs=2, dtype="float32", random_state=0)),
]


@pytest.mark.parametrize("task", ["binary", "multiclass"])
@pytest.mark.parametrize("name,make", LINEAR, ids=[n for n, _ in LINEAR])
def test_linear_models_score_as_predict(name, make, task, digits, tmp_path):
    info = _check_task(make(), task, digits, tmp_path, name)
    ops = {n.op_type for n in onnx.load(str(tmp_path / f"{name}.onnx")).graph.node}
    if name == "vote":  # standard operators in float64 (scores, votes, weighted shares)
        assert info["operator"].startswith("vote of") and info["n_hypotheses"] > 10
        assert info["labels_differ"] == 0  # the shares are distlearn's float64 ones, ties included
        assert "MatMul" in ops and ("GreaterOrEqual" if task == "binary" else "ArgMax") in ops
    else:
        assert info["operator"] == "LinearClassifier" and "LinearClassifier" in ops
    assert info["labels"] == "int"


KERNEL = [
    ("kperceptron-rbf", lambda: KernelPerceptron(gamma=0.05, budget=40, random_state=0)),
    ("kperceptron-poly", lambda: KernelPerceptron(kernel="poly", gamma=0.1, degree=2, coef0=1.0, budget=40,
                                                  random_state=0)),
    ("kperceptron-linear", lambda: KernelPerceptron(kernel="linear", random_state=0)),
    ("kmira", lambda: KernelMIRA(gamma=0.05, budget=40, random_state=0)),
    ("kpa-ovr", lambda: KernelPA(gamma=0.05, multiclass="ovr", random_state=0)),
    ("kaverage", lambda: KernelPerceptron(gamma=0.05, budget=40, conversion="average", random_state=0)),
    ("kvote-poly", lambda: KernelPerceptron(kernel="poly", gamma=0.1, degree=2, coef0=1.0, budget=30,
                                            conversion="vote", random_state=0)),
    ("kvote-rbf", lambda: KernelMIRA(gamma=0.05, budget=30, conversion="vote", random_state=0)),
    ("kvote-linear", lambda: KernelPA(kernel="linear", multiclass="ovr", conversion="vote", random_state=0)),
    ("kobpm", lambda: KernelOBPM(n_estimators=3, tau=0.5, epochs=1, base_params={"gamma": 0.05, "budget": 40},
                                 random_state=0)),
    ("kpbpm", lambda: KernelPermutationBPM(n_estimators=2, epochs=1, base_params={"gamma": 0.05}, random_state=0)),
]


@pytest.mark.parametrize("task", ["binary", "multiclass"])
@pytest.mark.parametrize("name,make", KERNEL, ids=[n for n, _ in KERNEL])
def test_kernel_models_score_as_predict(name, make, task, digits, tmp_path):
    info = _check_task(make(), task, digits, tmp_path, name)
    graph = onnx.load(str(tmp_path / f"{name}.onnx")).graph
    if name.startswith("kvote"):  # standard operators in float64: the kernel matrix, each state's scores
        kernel = name.split("-")[1]
        assert info["operator"].startswith("kernel vote of") and info["n_hypotheses"] > 10
        assert info["labels_differ"] == 0  # the shares are distlearn's float64 ones, ties included
        ops = {n.op_type for n in graph.node}
        assert info["kernel"] == kernel and "MatMul" in ops and "SVMClassifier" not in ops
        assert ("Pow" in ops) == (kernel == "poly") and ("Exp" in ops) == (kernel == "rbf")
        return
    assert info["operator"].startswith("SVMClassifier") and info["n_support"] > 0
    assert info["kernel"] == (name.split("-")[1] if name.startswith("kperceptron") else "rbf")
    svms = [n for n in graph.node if n.op_type == "SVMClassifier"]
    assert len(svms) == (1 if task == "binary" else 10)
    kt = {a.name: a for a in svms[0].attribute}["kernel_type"].s.decode()
    assert kt == info["kernel"].upper()


def test_sparse_input_and_string_labels(digits, tmp_path):
    # A model fitted on CSR rows scores the same dense rows (sparse data is densified to d columns).
    X, y, Xt, _ = digits
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    for est, name in ((Perceptron(epochs=2, random_state=0), "sparse-linear"),
                      (KernelPerceptron(gamma=0.05, budget=40, random_state=0), "sparse-kernel")):
        info = _check(est, sp.csr_matrix(X), names[y], sp.csr_matrix(Xt), tmp_path, name)
        assert info["labels"] == "string" and info["classes"] == sorted(names.tolist())
        labels, _ = _ort(tmp_path / f"{name}.onnx", Xt)
        assert labels.dtype == object and set(labels) <= set(names)
    # binary string labels, breast cancer (30 features, unscaled)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb = Xb / Xb.max(axis=0)
    info = _check(AROW(epochs=2, random_state=0), Xb[:400], np.array(["benign", "malignant"])[yb[:400]],
                  Xb[400:], tmp_path, "cancer")
    assert info["classes"] == ["benign", "malignant"] and info["n_features"] == 30


def test_a_zero_score_predicts_the_second_class(tmp_path):
    # sgn(0) = +1: the row of zeros, score exactly 0, is classes_[1] in distlearn and in the export.
    lin = LinearModel(np.array([[1.0, -2.0]]), np.array([0.0]), np.array([3, 7]), {"estimator": "probe"})
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    distlearn.export_onnx(lin, tmp_path / "lin.onnx")  # the package's name for it
    labels, scores = _ort(tmp_path / "lin.onnx", X)
    assert labels.tolist() == lin.predict(X).tolist() == [7, 7, 3, 7]
    np.testing.assert_array_equal(scores, [[0, 0], [-1, 1], [2, -2], [0, 0]])
    meta = {"kernel": "rbf", "kernel_params": {"gamma": 1.0, "degree": 3, "coef0": 0.0}}
    ker = KernelModel(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[1.0, -1.0]]), np.array([3, 7]), meta)
    X = np.array([[0.5, 0.0], [0.0, 0.0], [1.0, 0.0], [0.5, 3.0]])
    export_onnx(ker, tmp_path / "ker.onnx")
    labels, scores = _ort(tmp_path / "ker.onnx", X)
    assert labels.tolist() == ker.predict(X).tolist() == [7, 7, 3, 7]
    np.testing.assert_allclose(scores, _as_columns(ker.decision_function(X)), atol=1e-7)
    # no support pattern at all: every score 0, every label classes_[1]
    empty = KernelModel(np.zeros((0, 2)), np.zeros((1, 0)), np.array([3, 7]), meta)
    info = export_onnx(empty, tmp_path / "empty.onnx")
    labels, scores = _ort(tmp_path / "empty.onnx", X)
    assert info["operator"].startswith("LinearClassifier") and labels.tolist() == [7] * 4 and not scores.any()


def test_float_and_bool_classes_are_int64_labels(tmp_path):
    lin = LinearModel(np.array([[1.0, -1.0]]), np.array([0.5]), np.array([-1.0, 1.0]), {})
    info = export_onnx(lin, tmp_path / "f.onnx")
    labels, _ = _ort(tmp_path / "f.onnx", np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert info["labels"] == "int" and labels.dtype == np.int64 and labels.tolist() == [-1, 1]
    frac = LinearModel(np.eye(3), np.zeros(3), np.array([0.5, 1.5, 2.5]), {})
    info = export_onnx(frac, tmp_path / "frac.onnx")
    labels, _ = _ort(tmp_path / "frac.onnx", np.eye(3)[::-1])
    assert info["labels"] == "string" and labels.tolist() == ["2.5", "1.5", "0.5"]


def _fails(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_refusals_are_one_line(digits, tmp_path, capsys):
    X, y, _, _ = digits
    yb = np.where(y > 4, 1, -1)
    sample = save_model(Perceptron(epochs=1, conversion="sample", random_state=0).fit(X, yb),
                        tmp_path / "sample.npz")
    err = _fails(capsys, "export", str(sample), str(tmp_path / "sample.onnx"))
    assert "sample conversion" in err and "seeded random projection" in err and "conversion='vote'" in err
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".*"))  # nothing written
    good = save_model(Perceptron(epochs=1, random_state=0).fit(X, yb), tmp_path / "good.npz")
    assert "end in .onnx" in _fails(capsys, "export", str(good), str(tmp_path / "m.onx"))
    # a URL is refused as a URL (not written to a local directory named "s3:")
    err = _fails(capsys, "export", str(good), "s3://bucket/m.onnx")
    assert "s3://bucket/m.onnx" in err and "local path" in err and not os.path.exists("s3:")
    assert "no such model file" in _fails(capsys, "export", str(tmp_path / "missing.npz"), str(tmp_path / "m.onnx"))
    (tmp_path / "notes.onnx").write_text("mine")
    assert "pass --overwrite" in _fails(capsys, "export", str(good), str(tmp_path / "notes.onnx"))
    err = _fails(capsys, "export", str(good), str(tmp_path / "notes.onnx"), "--overwrite")
    assert "exists and is not a distlearn ONNX file" in err
    assert (tmp_path / "notes.onnx").read_text() == "mine"
    # ONNX from elsewhere is not ours to replace either
    other = to_onnx(good)
    other.producer_name = "someone-else"
    (tmp_path / "other.onnx").write_bytes(other.SerializeToString())
    assert "is not a distlearn ONNX file" in _fails(capsys, "export", str(good), str(tmp_path / "other.onnx"),
                                                    "--overwrite")
    # weights that float32 cannot hold
    big = LinearModel(np.array([[1e300, 1.0]]), np.array([0.0]), np.array([0, 1]), {})
    with pytest.raises(ValueError, match="exceed float32's range"):
        export_onnx(big, tmp_path / "big.onnx")
    nan = LinearModel(np.array([[np.nan, 1.0]]), np.array([0.0]), np.array([0, 1]), {})
    with pytest.raises(ValueError, match="not all finite"):
        export_onnx(nan, tmp_path / "nan.onnx")


def test_without_onnx_one_line_names_the_extra(digits, tmp_path, monkeypatch):
    X, y, _, _ = digits
    m = Perceptron(epochs=1, random_state=0).fit(X, y)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(ValueError, match=r"pip install distlearn\[onnx\]"):
        export_onnx(m, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_cli_export_in_a_fresh_process(digits, tmp_path, capsys):
    X, y, Xt, _ = digits
    m = save_model(OBPM(n_estimators=4, tau=0.5, epochs=2, random_state=0).fit(X, y), tmp_path / "m.npz")
    out = tmp_path / "m.onnx"
    cmd = [sys.executable, "-m", "distlearn", "export", str(m), str(out), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["operator"] == "LinearClassifier" and res["n_features"] == 64 and res["classes"] == list(range(10))
    labels, scores = _ort(out, Xt)
    # what distlearn predict prints for the same rows (through a store, like a user would)
    from distlearn.data.store import create_dataset

    create_dataset(tmp_path / "t.zarr", Xt, np.zeros(len(Xt), int), block_rows=64)
    assert main(["predict", str(m), str(tmp_path / "t.zarr"), "--out", str(tmp_path / "p.npy")]) == 0
    assert main(["predict", str(m), str(tmp_path / "t.zarr"), "--decision", "--out", str(tmp_path / "s.npy")]) == 0
    np.testing.assert_array_equal(labels, np.load(tmp_path / "p.npy"))
    want = np.load(tmp_path / "s.npy")
    np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    capsys.readouterr()
    # a second export refuses, --overwrite replaces its own file (the text summary names what it wrote)
    err = _fails(capsys, "export", str(m), str(out))
    assert "already exists" in err
    before = out.stat().st_mtime_ns
    assert main(["export", str(m), str(out), "--overwrite"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: OBPM as LinearClassifier, input X float32 [N, 64], 10 classes")
    assert out.stat().st_mtime_ns >= before and onnx.load(str(out)).producer_name == "distlearn"
