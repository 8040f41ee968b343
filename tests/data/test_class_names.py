"""Class names as labels in data files: iris.csv's ``species``, Parquet string columns.

The readers return ``y`` as a str array of the names; the estimators take them as scikit-learn's
do (``classes_`` are the names).  Peers: pyarrow's CSV reader for the parsing, scikit-learn's
confusion matrix for evaluate.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.metrics import confusion_matrix

from distlearn import OBPM, Perceptron
from distlearn.cli import main
from distlearn._outputs import is_number as _is_number
from distlearn.data._csv import CsvReader
from distlearn.data._errors import InputFormatError
from distlearn.data.readers import read_arrays
from distlearn.model import load_model

HEADER = "sepal_length,sepal_width,petal_length,petal_width,species"


def iris_csv(path: Path, header: bool = True) -> Path:
    d = load_iris()
    rows = [",".join(str(float(v)) for v in x) + "," + d.target_names[t] for x, t in zip(d.data, d.target)]
    path.write_text("\n".join(([HEADER] if header else []) + rows) + "\n")
    return path


@pytest.fixture
def iris(tmp_path: Path) -> Path:
    return iris_csv(tmp_path / "iris.csv")


def test_csv_names_equal_pyarrow_and_any_chunking(iris):
    peer = pacsv.read_csv(iris)
    X, y = read_arrays(iris, label_column="species", dtype="float64")
    assert y.dtype.kind == "U" and sorted(set(y.tolist())) == ["setosa", "versicolor", "virginica"]
    np.testing.assert_array_equal(y, np.array(peer.column("species").to_pylist()))
    np.testing.assert_array_equal(X, np.column_stack([peer.column(c).to_numpy() for c in HEADER.split(",")[:4]]))
    small = list(CsvReader(iris, label_column=4, dtype="float64", chunk_bytes=300))
    assert len(small) > 10  # many chunks, the same arrays
    np.testing.assert_array_equal(np.concatenate([p[1] for p in small]), y)
    np.testing.assert_array_equal(np.concatenate([p[0] for p in small]), X)


def test_headerless_names_are_data_not_a_header(tmp_path):
    f = iris_csv(tmp_path / "nohead.csv", header=False)
    r = CsvReader(f, label_column=-1)
    assert not r.has_header and r.labels_are_names
    X, y = read_arrays(f, label_column=-1)
    assert X.shape == (150, 4) and y[0] == "setosa" and y[-1] == "virginica"


def test_quoted_names_with_commas_and_quotes(tmp_path):
    f = tmp_path / "q.csv"
    f.write_text('x1,x2,kind\n1,2,"a, b"\n3,4,"say ""hi"""\n5,6, plain \n7,8,"a, b"\n')
    X, y = read_arrays(f, label_column="kind", dtype="float64")
    assert y.tolist() == ["a, b", 'say "hi"', "plain", "a, b"]
    assert X.tolist() == [[1, 2], [3, 4], [5, 6], [7, 8]]
    # the slow path (a bad row elsewhere in the chunk) reads the same names, then names the bad line
    f.write_text('x1,x2,kind\n1,2,"a, b"\n3,4,"say ""hi"""\n5,x,plain\n')
    with pytest.raises(InputFormatError, match=r"q.csv:4: value 'x' in column 2 is not a number$"):
        read_arrays(f, label_column="kind")


def test_default_column_0_says_which_column_was_taken_and_how_to_pick(iris):
    with pytest.raises(InputFormatError) as e:
        read_arrays(iris)
    assert str(e.value) == (
        f"{iris}:2: value 'setosa' in column 5 is not a number; label column 0 ('sepal_length') was taken as the "
        "label by default (no column named label, target, class, y): pick the label with --label-column "
        "NAME|INDEX (label_column=), e.g. --label-column 4 if column 5 holds the class names")
    assert main(["train", str(iris), "--model", "perceptron"]) == 2
    # a label column given (or named 'label'): a word among the features is just that
    f = iris.parent / "bad.csv"
    f.write_text("label,x\n1,2\n0,oops\n")
    with pytest.raises(InputFormatError, match=r"bad.csv:3: value 'oops' in column 2 is not a number$"):
        read_arrays(f)


def test_names_are_refused_as_identifiers(tmp_path):
    f = tmp_path / "ids.csv"
    f.write_text("x,name\n" + "".join(f"{i},user{i}\n" for i in range(40)))
    with pytest.raises(InputFormatError, match=r"ids.csv: label column 1 \('name'\) has 40 distinct values in 40 "
                                               r"rows, not class labels; pick the label with --label-column"):
        read_arrays(f, label_column="name")


@pytest.mark.parametrize("model", [Perceptron, OBPM])
def test_models_on_names_equal_models_on_codes(iris, model):
    X, y = read_arrays(iris, label_column="species", dtype="float64")
    names, codes = np.unique(y, return_inverse=True)
    a = model(random_state=0).fit(X, y)
    b = model(random_state=0).fit(X, codes)
    assert a.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict(X), names[b.predict(X)])


def test_parquet_string_and_category_labels(tmp_path, iris):
    peer = pacsv.read_csv(iris)
    f = tmp_path / "iris.parquet"
    pq.write_table(peer, f, row_group_size=40)
    X, y = read_arrays(f, label_column="species", dtype="float64")
    Xc, yc = read_arrays(iris, label_column="species", dtype="float64")
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)
    cat = peer.set_column(4, "species", peer.column("species").dictionary_encode())
    pq.write_table(cat, f, row_group_size=40)
    np.testing.assert_array_equal(read_arrays(f, label_column="species")[1], yc)


def test_cli_train_predict_evaluate_by_name(iris, tmp_path, capsys):
    m = tmp_path / "m.npz"
    assert main(["train", str(iris), "--label-column", "species", "--model", "perceptron", "--save", str(m)]) == 0
    out = tmp_path / "p.npy"
    assert main(["predict", str(m), str(iris), "--label-column", "species", "--out", str(out)]) == 0
    pred = np.load(out)
    X, y = read_arrays(iris, label_column="species")
    model = load_model(m)
    assert model.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    ref = model.predict(X)
    np.testing.assert_array_equal(pred, ref)
    assert set(pred.tolist()) <= {"setosa", "versicolor", "virginica"}
    capsys.readouterr()
    assert main(["evaluate", str(m), str(iris), "--label-column", "species", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["labels"] == ["setosa", "versicolor", "virginica"]
    np.testing.assert_array_equal(res["confusion"], confusion_matrix(y, ref, labels=res["labels"]))
    assert main(["evaluate", str(m), str(iris), "--label-column", "species"]) == 0
    assert "versicolor" in capsys.readouterr().out


_NAME = st.text(st.sampled_from(list('ab ,"xyz_-')), min_size=1, max_size=6).map(str.strip).filter(
    lambda s: bool(s) and not _is_number(s))


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(-1e6, 1e6, allow_nan=False, width=32), _NAME), min_size=1, max_size=30),
       chunk=st.integers(8, 200))
def test_names_read_as_pythons_csv_module_reads_them(tmp_path_factory, rows, chunk):
    """Any names (commas, quotes, spaces inside) written by Python's csv module read back as it reads them."""
    import csv as pycsv
    import io

    buf = io.StringIO()
    w = pycsv.writer(buf, lineterminator="\n")
    w.writerow(["x", "kind"])
    w.writerows([(repr(float(v)), name) for v, name in rows])
    f = tmp_path_factory.mktemp("h") / "h.csv"
    f.write_text(buf.getvalue())
    peer = list(pycsv.reader(io.StringIO(buf.getvalue())))[1:]
    parts = list(CsvReader(f, label_column="kind", dtype="float64", chunk_bytes=chunk))
    y = np.concatenate([p[1] for p in parts])
    X = np.concatenate([p[0] for p in parts])
    assert y.tolist() == [r[1] for r in peer]
    assert X[:, 0].tolist() == [float(r[0]) for r in peer]
