"""The command on input read the way its author meant: the label column of a CSV, refusals of
labels that are not classes, Parquet, and train/evaluate on data files (issue 28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distlearn.cli import main
from distlearn.data import open_dataset

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: object) -> tuple[int, str, str]:
    """The command in a fresh process: exit status, stdout, stderr."""
    r = subprocess.run([sys.executable, "-m", "distlearn", *map(str, argv)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    return r.returncode, r.stdout, r.stderr


ORDERED = ("--model", "perceptron", "--json", "--seed", "1", "--param", "shuffle=false")


def one_line(rc: int, err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    return lines[0]


@pytest.fixture
def files(tmp_path):
    """The issue's CSV (header f1,f2,f3,label; 300 rows, two classes), the same rows as svmlight and Parquet."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, 1, -1)
    csv = tmp_path / "a.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.17g", header="f1,f2,f3,label", comments="")
    svm = tmp_path / "a.svm"
    svm.write_text("".join(f"{t} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row)) + "\n"
                           for row, t in zip(X.tolist(), y.tolist())))
    parquet = tmp_path / "a.parquet"
    pq.write_table(pa.table({"f1": X[:, 0], "f2": X[:, 1], "f3": X[:, 2], "label": y}), parquet, row_group_size=100)
    return {"X": X, "y": y, "csv": csv, "svm": svm, "parquet": parquet}


def test_the_issues_csv_converts_with_its_label_column(files, tmp_path, capsys):
    assert main(["convert", str(files["csv"]), str(tmp_path / "a.zarr"), "--json", "--no-progress"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["classes"] == [-1, 1] and info["n_features"] == 3  # was: 299 "classes" from column 0
    X, y = open_dataset(tmp_path / "a.zarr").to_numpy()
    np.testing.assert_array_equal(y, files["y"])
    np.testing.assert_array_equal(X, files["X"].astype(np.float32))


def test_a_continuous_label_column_is_refused_in_one_line(files, tmp_path):
    rc, _, err = run("convert", files["csv"], tmp_path / "b.zarr", "--label-column", "0")
    line = one_line(rc, err)
    assert line.startswith(f"distlearn convert: error: {files['csv']}: label column 0 ('f1') holds non-integer values")
    assert "--label-column NAME|INDEX" in line and not (tmp_path / "b.zarr").exists()
    ids = tmp_path / "ids.csv"
    ids.write_text("row,v\n" + "".join(f"{i},{i % 2}\n" for i in range(300)))
    line = one_line(*run("convert", ids, tmp_path / "c.zarr")[::2])
    assert line == (f"distlearn convert: error: {ids}: label column 0 ('row') has 300 distinct values in 300 rows, "
                    "not class labels; pick the label with --label-column NAME|INDEX (label_column=)")


def test_convert_parquet_with_label_column(files, tmp_path, capsys):
    assert main(["convert", str(files["parquet"]), str(tmp_path / "p.zarr"), "--no-progress", "--dtype",
                 "float64"]) == 0
    assert "300 x 3" in capsys.readouterr().out
    X, y = open_dataset(tmp_path / "p.zarr").to_numpy()
    np.testing.assert_array_equal(X, files["X"])
    np.testing.assert_array_equal(y, files["y"])
    line = one_line(*run("convert", files["parquet"], tmp_path / "q.zarr", "--label-column", "f2")[::2])
    assert "label column 1 ('f2') holds non-integer values" in line and "--label-column" in line


def test_train_and_evaluate_take_data_files(files, tmp_path, capsys):
    """train FILE.svm (was: "not a zarr group"), the same run as on the converted store (in stored order: the
    array and store paths draw different shuffles, which another part of issue 28 aligns)."""
    model = tmp_path / "m.npz"
    for src in ("svm", "csv", "parquet"):
        assert main(["train", str(files[src]), *ORDERED]
                    + (["--save", str(model)] if src == "svm" else [])) == 0
        res = json.loads(capsys.readouterr().out)
        assert (res["n_samples"], res["n_features"]) == (300, 3)
        if src == "svm":
            first = res["online_errors"]
        assert res["online_errors"] == first  # the same rows, the same run
    assert main(["convert", str(files["svm"]), str(tmp_path / "s.zarr"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", str(tmp_path / "s.zarr"), *ORDERED]) == 0
    assert json.loads(capsys.readouterr().out)["online_errors"] == first
    assert main(["evaluate", str(model), str(files["parquet"]), "--json"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(model), str(tmp_path / "s.zarr"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["confusion"] == by_file["confusion"] and by_file["n"] == 300


def test_train_on_a_data_file_refusals_are_one_line(files, tmp_path):
    line = one_line(*run("train", files["svm"], "--target", "1-vs-2", "--model", "perceptron")[::2])
    assert line == (f"distlearn train: error: --target views a store; {files['svm']} is a data file: convert it "
                    f"first (distlearn convert {files['svm']} STORE.zarr)")
    bad = tmp_path / "r.csv"
    bad.write_text("x,target\n" + "".join(f"{i},{i / 7}\n" for i in range(50)))
    line = one_line(*run("train", bad, "--model", "perceptron")[::2])
    assert line.startswith(f"distlearn train: error: {bad}: label column 1 ('target') holds non-integer values")
    assert "--label-column" in line
    ok = tmp_path / "ok.csv"
    ok.write_text("target,x,kind\n" + "".join(f"{i / 7},{i},{i % 2}\n" for i in range(50)))
    rc, out, err = run("train", ok, "--model", "perceptron", "--label-column", "kind", "--json")
    assert rc == 0 and json.loads(out)["n_features"] == 2, err
    line = one_line(*run("train", files["svm"], "--label-column", "2", "--model", "perceptron")[::2])
    assert line == f"distlearn train: error: {files['svm']}: --label-column does not apply to svmlight input"
