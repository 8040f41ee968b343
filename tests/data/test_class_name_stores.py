"""Stores whose labels are class names: ``convert iris.csv iris.zarr --label-column species``.

``y`` holds codes into the sorted ``meta["class_names"]``; every read gives the names back, so the
estimators, evaluate, views and the Dask modes see names.  The proofs: a model trained on such a
store equals, bit for bit, the one trained on the arrays (one block) or on the store of the same
rows with integer codes (many blocks, the classes cut across them), serial or ``--jobs 2``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import zarr
from sklearn.datasets import load_iris
from sklearn.metrics import confusion_matrix

from distlearn import OBPM, Perceptron
from distlearn.cli import format_info, main
from distlearn.data import create_dataset, open_dataset
from distlearn.data.readers import convert, read_arrays
from distlearn.data.store import DatasetWriter, StoreError
from distlearn.model import load_model

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["setosa", "versicolor", "virginica"]


def iris_csv(path: Path, reverse: bool = False) -> Path:
    """iris.csv with its species names; ``reverse``: virginica first, so names are met unsorted."""
    d = load_iris()
    rows = [",".join(str(float(v)) for v in x) + "," + d.target_names[t] for x, t in zip(d.data, d.target)]
    path.write_text("\n".join(["sepal_length,sepal_width,petal_length,petal_width,species"]
                              + (rows[::-1] if reverse else rows)) + "\n")
    return path


@pytest.fixture
def iris(tmp_path: Path) -> Path:
    return iris_csv(tmp_path / "iris.csv", reverse=True)


def test_writer_codes_names_sorted_whatever_order_they_come_in(tmp_path):
    X = np.arange(12, dtype=np.float64).reshape(6, 2)
    with DatasetWriter(tmp_path / "w.zarr", layout="dense", n_features=2, block_rows=2) as w:
        w.append(X[:2], np.array(["zebra", "ant"]))
        w.append(X[2:], np.array(["mole", "ant", "zebra", "zebra"]))
        ds = w.close()
    assert ds.meta["class_names"] == ["ant", "mole", "zebra"] and ds.meta["classes"] == [0, 1, 2]
    assert ds.meta["class_counts"] == [2, 1, 3] and ds.meta["format_version"] == 2
    assert zarr.open_group(tmp_path / "w.zarr", mode="r")["y"][:].tolist() == [2, 0, 1, 0, 2, 2]  # codes, sorted
    Xr, y = ds.to_numpy()
    assert y.tolist() == ["zebra", "ant", "mole", "ant", "zebra", "zebra"] and ds.classes.tolist() == ["ant", "mole",
                                                                                                        "zebra"]
    np.testing.assert_array_equal(Xr, X)
    with pytest.raises(ValueError, match=r"row 2: labels are numbers, but the rows before are class names "
                                         r"\(labels are all numbers or all names\)"), \
            DatasetWriter(tmp_path / "m.zarr", layout="dense", n_features=2) as w:
        w.append(X[:2], np.array(["a", "b"]))
        w.append(X[2:], np.array([1, 2, 3, 4]))
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize("model", [Perceptron, OBPM])
def test_models_on_a_store_of_names_equal_arrays_and_code_stores(iris, tmp_path, model):
    X, y = read_arrays(iris, label_column="species")
    assert y[0] == "virginica"  # met first: its code is remapped at close
    one = convert(iris, tmp_path / "one.zarr", label_column="species")  # one block: trains as the arrays
    a = model(random_state=0).fit(X, y)
    b = model(random_state=0).fit(str(one.path))
    assert a.classes_.tolist() == b.classes_.tolist() == NAMES
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # 40-row blocks: the classes cut across blocks; the same model as the store of integer codes
    many = convert(iris, tmp_path / "many.zarr", label_column="species", block_rows=40)
    assert many.n_blocks == 4 and many.meta["class_names"] == NAMES
    codes = np.searchsorted(np.array(NAMES), y)
    create_dataset(tmp_path / "codes.zarr", X, codes, block_rows=40)
    c = model(random_state=0).fit(str(many.path))
    d = model(random_state=0).fit(str(tmp_path / "codes.zarr"))
    assert c.classes_.tolist() == NAMES and d.classes_.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(c.coef_, d.coef_)
    np.testing.assert_array_equal(c.predict(X), np.array(NAMES)[d.predict(X)])


def _convert_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distlearn", "convert", *args, "--no-progress"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)


def test_jobs_2_csv_and_parquet_parts_give_the_same_store_and_model(iris, tmp_path):
    serial = convert(iris, tmp_path / "s.zarr", label_column="species", block_rows=40)
    table = pacsv.read_csv(iris)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(3):  # each part holds other names (the first only virginica), row groups of 20
        pq.write_table(table.slice(50 * i, 50), parts / f"part.{i}.parquet", row_group_size=20)
    for src, out in ((iris, "jc.zarr"), (parts, "jp.zarr")):
        r = _convert_cli([str(src), str(tmp_path / out), "--jobs", "2", "--label-column", "species",
                          "--block-rows", "40"])
        assert r.returncode == 0, r.stderr
        ds = open_dataset(tmp_path / out)
        assert ds.meta["class_names"] == NAMES and ds.meta["class_counts"] == [50, 50, 50]
        for k in ("X", "y"):  # the stored arrays, codes included, are the serial store's
            np.testing.assert_array_equal(zarr.open_group(tmp_path / out, mode="r")[k][:],
                                          zarr.open_group(serial.path, mode="r")[k][:])
        a = OBPM(random_state=1).fit(str(serial.path))
        b = OBPM(random_state=1).fit(str(ds.path))
        assert b.classes_.tolist() == NAMES
        np.testing.assert_array_equal(a.coef_, b.coef_)


def test_views_by_name_and_info(iris, tmp_path, capsys):
    ds = convert(iris, tmp_path / "i.zarr", label_column="species", block_rows=40)
    X, y = read_arrays(iris, label_column="species")
    v = open_dataset(f"{ds.path}#setosa-vs-virginica")
    Xv, yv = v.to_numpy()
    keep = (y == "setosa") | (y == "virginica")
    np.testing.assert_array_equal(Xv, X[keep])
    np.testing.assert_array_equal(yv, np.where(y[keep] == "setosa", 1, -1))
    rest = open_dataset(f"{ds.path}#versicolor")
    assert rest.classes.tolist() == [-1, 1] and rest.meta["class_counts"] == [100, 50]
    np.testing.assert_array_equal(rest.to_numpy()[1], np.where(y == "versicolor", 1, -1))
    with pytest.raises(StoreError, match=r"target 'rose': no such topic or label; this store has setosa, "
                                         r"versicolor, virginica"):
        open_dataset(f"{ds.path}#rose")
    assert open_dataset(ds.path, validate="full").classes.tolist() == NAMES  # every block read and checked
    info = ds.info()
    assert info["classes"] == NAMES and info["class_counts"] == [50, 50, 50] and info["n_classes"] == 3
    assert "classes  3: setosa (50), versicolor (50), virginica (50)" in format_info(info)
    assert main(["info", str(ds.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["classes"] == NAMES
    assert main(["train", f"{ds.path}#setosa-vs-virginica", "--model", "perceptron"]) == 0


def test_predict_and_evaluate_a_store_by_name(iris, tmp_path, capsys):
    ds = convert(iris, tmp_path / "i.zarr", label_column="species", block_rows=40)
    m = tmp_path / "m.npz"
    assert main(["train", str(ds.path), "--model", "perceptron", "--save", str(m)]) == 0
    model = load_model(m)
    X, y = read_arrays(iris, label_column="species")
    ref = model.predict(X)
    assert model.classes_.tolist() == NAMES and set(ref.tolist()) <= set(NAMES)
    assert main(["predict", str(m), str(ds.path), "--out", str(tmp_path / "p.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), ref)
    capsys.readouterr()
    assert main(["evaluate", str(m), str(ds.path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["labels"] == NAMES
    np.testing.assert_array_equal(res["confusion"], confusion_matrix(y, ref, labels=NAMES))


def test_quoted_names_and_parquet_strings_in_stores(tmp_path):
    f = tmp_path / "q.csv"
    names = ["a, b", 'say "hi"', "plain"]
    quoted = ['"a, b"', '"say ""hi"""', "plain"]
    f.write_text("x1,x2,kind\n" + "".join(f"{i},{i % 4},{quoted[i % 3]}\n" for i in range(30)))
    ds = convert(f, tmp_path / "q.zarr", label_column="kind", block_rows=7)
    assert ds.meta["class_names"] == sorted(names)
    assert ds.to_numpy()[1].tolist() == [names[i % 3] for i in range(30)]
    assert open_dataset(f"{ds.path}#plain").meta["class_counts"] == [20, 10]
    t = pa.table({"x": np.arange(30.0), "animal": pa.array([["dog", "cat", "emu"][i % 3] for i in range(30)])
                  .dictionary_encode()})
    pq.write_table(t, tmp_path / "a.parquet", row_group_size=8)
    ds = convert(tmp_path / "a.parquet", tmp_path / "a.zarr", label_column="animal")
    assert ds.meta["class_names"] == ["cat", "dog", "emu"]
    assert ds.to_numpy()[1].tolist() == [["dog", "cat", "emu"][i % 3] for i in range(30)]


def test_names_that_are_identifiers_are_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "ids.csv"
    f.write_text("x,name\n" + "".join(f"{i},user{i}\n" for i in range(40)))
    assert main(["convert", str(f), str(tmp_path / "ids.zarr"), "--label-column", "name"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "label column 1 ('name') has 40 distinct values in 40 rows, not class labels" in err
    assert not (tmp_path / "ids.zarr").exists()


def test_edited_names_and_codes_are_refused(iris, tmp_path):
    ds = convert(iris, tmp_path / "i.zarr", label_column="species", block_rows=40)
    g = zarr.open_group(ds.path, mode="r+")
    meta = dict(g.attrs["distlearn"])
    g.attrs["distlearn"] = {**meta, "class_names": ["virginica", "setosa", "versicolor"]}
    with pytest.raises(StoreError, match=r"metadata class_names is not a sorted list of distinct names"):
        open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "format_version": 1}
    with pytest.raises(StoreError, match=r"format-2 store"):
        open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "class_names": NAMES[:2], "classes": [0, 1], "class_counts": [50, 100]}
    with pytest.raises(StoreError, match=r"block 0 \(rows 0\.\.39\): row 0's label code 2 is not one of the store's "
                                         r"2 class names"):
        open_dataset(ds.path).to_numpy()


def test_numeric_stores_are_unchanged_bit_for_bit(tmp_path):
    """The same convert run by this tree and by the main tree's code: every file equal but the creation time."""
    f = tmp_path / "n.csv"
    rng = np.random.default_rng(0)
    f.write_text("label,a,b\n" + "".join(f"{rng.integers(0, 3)},{rng.normal():.6f},{rng.normal():.6f}\n"
                                         for _ in range(100)))
    ds = convert(f, tmp_path / "direct.zarr", block_rows=30)  # what a store of numbers holds, as before
    labels = np.loadtxt(f, delimiter=",", skiprows=1, usecols=0)
    assert ds.meta["format_version"] == 1 and "class_names" not in ds.meta and ds.class_names is None
    assert zarr.open_group(ds.path, mode="r")["y"].dtype == np.float64
    np.testing.assert_array_equal(ds.to_numpy()[1], labels.astype(np.int64))
    assert ds.classes.tolist() == sorted(set(labels.astype(int).tolist()))
    main_tree = Path("/work/main")
    if not (main_tree / "distlearn").is_dir():
        pytest.skip("no main tree to compare with")
    for tree, out in ((ROOT, "ours.zarr"), (main_tree, "main.zarr")):
        r = subprocess.run([sys.executable, "-m", "distlearn", "convert", str(f), str(tmp_path / out),
                            "--block-rows", "30", "--no-progress"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    ours = sorted(p.relative_to(tmp_path / "ours.zarr") for p in (tmp_path / "ours.zarr").rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(tmp_path / "main.zarr") for p in (tmp_path / "main.zarr").rglob("*") if p.is_file())
    # a main tree from before chunk digests writes no digests/ (and no integrity "digests"): the rest is equal
    digests = not any(p.parts[0] == "digests" for p in theirs)
    if digests:
        ours = [p for p in ours if p.parts[0] != "digests"]
    assert ours == theirs and len(ours) > 5
    for rel in ours:
        a, b = (tmp_path / "ours.zarr" / rel).read_bytes(), (tmp_path / "main.zarr" / rel).read_bytes()
        if rel == Path("zarr.json"):
            ma, mb = (json.loads(x)["attributes"]["distlearn"] for x in (a, b))
            for m in (ma, mb):
                m.pop("created")
                if digests:
                    m["integrity"].pop("digests", None)
            assert ma == mb and ma["format_version"] == 1 and "class_names" not in ma
        else:
            assert a == b, rel


@pytest.mark.cluster
def test_dask_modes_see_names(iris, tmp_path, client):
    ds = convert(iris, tmp_path / "i.zarr", label_column="species", block_rows=40)
    a = OBPM(n_estimators=4, random_state=2, scheduler=client).fit(str(ds.path))
    b = OBPM(n_estimators=4, random_state=2, scheduler="in-process").fit(str(ds.path))
    assert a.classes_.tolist() == b.classes_.tolist() == NAMES
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_data_parallel_shards_on_names_equal_codes(iris, tmp_path):
    from distlearn import ParameterMixing

    X, y = read_arrays(iris, label_column="species")
    names = convert(iris, tmp_path / "n.zarr", label_column="species", block_rows=40)
    create_dataset(tmp_path / "c.zarr", X, np.searchsorted(np.array(NAMES), y), block_rows=40)
    a = ParameterMixing(n_shards=2, epochs=2, random_state=0).fit(str(names.path))
    b = ParameterMixing(n_shards=2, epochs=2, random_state=0).fit(str(tmp_path / "c.zarr"))
    assert a.classes_.tolist() == NAMES and b.classes_.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(a.coef_, b.coef_)
