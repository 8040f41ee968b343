"""The CSV and Parquet readers' ``label_column=False``: a table without a label column, every column a
feature, pieces ``(X, None)``; a bad value in any column is named as a feature's, with file and line;
the formats and commands that need labels refuse it in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn.data._csv import CsvReader, parse_csv_bytes
from distlearn.data._errors import InputFormatError
from distlearn.data._labels import NO_LABEL
from distlearn.data._parquet import ParquetReader
from distlearn.data.readers import convert, open_reader, read_arrays

WHY = " (--label-column none, label_column=False: every column is a feature)"


def rows_of(reader) -> np.ndarray:
    """Every piece's X stacked, after checking that no piece carries labels."""
    parts = list(reader)
    assert parts and all(y is None for _, y in parts)
    return np.concatenate([X for X, _ in parts])


def write_csv(path: Path, data: np.ndarray, header: list[str] | None = None) -> Path:
    lines = ([",".join(header)] if header else []) + [",".join(repr(float(v)) for v in row) for row in data]
    path.write_text("\n".join(lines) + "\n")
    return path


def failure(path: Path, **kw) -> str:
    """The one line a full read of ``path`` without a label column raises (construction or iteration)."""
    with pytest.raises(InputFormatError) as e:
        list(open_reader(path, label_column=False, **kw))
    return str(e.value)


def test_the_note_is_the_one_predict_has_always_shown():
    assert NO_LABEL == WHY


@pytest.mark.parametrize("header", [None, ["a", "b", "label"]])
def test_csv_every_column_is_a_feature(tmp_path, header):
    """With or without a header (even one naming a column ``label``), every column is read as a feature."""
    data = np.arange(12, dtype=np.float64).reshape(4, 3) / 4
    p = write_csv(tmp_path / "t.csv", data, header)
    r = CsvReader(p, label_column=False, dtype="float64")
    assert (r.n_features, r.has_header, r.columns, r.label_index) == (3, header is not None, header, None)
    assert r.params["label_column"] is False and r.params["label_name"] is None
    assert np.array_equal(rows_of(r), data)
    assert r.n_samples == 4
    with_label = CsvReader(p, dtype="float64")  # the same file read as usual still has its label
    assert with_label.n_features == 2


def test_csv_one_column_is_a_table_of_one_feature(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("x\n1.5\n-2\n")
    assert rows_of(open_reader(p, label_column=False)).tolist() == [[1.5], [-2.0]]
    with pytest.raises(InputFormatError, match="need a label column and at least one feature"):
        open_reader(p)


@pytest.mark.parametrize("text, want", [
    ("a,b,c\nx,2,3\n4,5,6\n", "{p}:2: value 'x' in column 1 is not a number"),  # the first data row: up front
    ("a,b,c\n1,2,3\n4,5,zz\n", "{p}:3: value 'zz' in column 3 is not a number"),
    ("1,2,3\n4,5,6\n7,,9\n", "{p}:3: empty field in column 2"),
    ("1,2,3\n4,5,6\n7,8,inf\n", "{p}:3: value 'inf' in column 3 is not finite"),
    ("1,2,3\n-nan,5,6\n", "{p}:2: value '-nan' in column 1 is not finite"),
    ("x,2,3\ny,5,6\n", "{p}:1: value 'x' in column 1 is not a number"),  # a word over a word: data, not a header
])
def test_csv_a_bad_value_in_any_column_is_a_features(tmp_path, text, want):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    line = failure(p)
    assert line == want.format(p=p) + WHY
    assert "label" not in line.replace("--label-column", "").replace("label_column", "")


def test_csv_a_ragged_line_is_named(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("1,2,3\n4,5\n")
    assert failure(p) == f"{p}:2: wrong number of fields: expected 3, found 2"


def test_csv_float32_overflow_is_named(tmp_path):
    p = tmp_path / "o.csv"
    p.write_text("1,2\n3,1e39\n")
    assert failure(p) == f"{p}:2: value '1e39' in column 2 overflows float32; use dtype='float64'"
    assert rows_of(open_reader(p, label_column=False, dtype="float64"))[1, 1] == 1e39


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 1 << 20])
def test_csv_a_bad_value_in_a_later_chunk_names_its_line(tmp_path, chunk_bytes):
    """Small chunks: the bad value lands in a later chunk than the first, and its file line is still right."""
    data = np.round(np.random.default_rng(1).normal(size=(200, 4)), 3)
    p = write_csv(tmp_path / "c.csv", data, ["a", "b", "c", "d"])
    assert np.array_equal(rows_of(open_reader(p, label_column=False, dtype="float64", chunk_bytes=chunk_bytes)),
                          data)
    lines = p.read_text().split("\n")
    lines[151] = lines[151].rsplit(",", 1)[0] + ",oops"  # line 152 of the file, column 4
    p.write_text("\n".join(lines))
    assert failure(p, chunk_bytes=chunk_bytes) == f"{p}:152: value 'oops' in column 4 is not a number" + WHY


def test_csv_pieces_follow_the_chunks(tmp_path):
    data = np.arange(300, dtype=np.float64).reshape(100, 3)
    p = write_csv(tmp_path / "p.csv", data)
    parts = list(CsvReader(p, label_column=False, dtype="float64", chunk_bytes=256))
    assert len(parts) > 1 and all(y is None for _, y in parts)
    assert np.array_equal(np.concatenate([X for X, _ in parts]), data)


def test_parse_csv_bytes_without_a_label_column():
    X, y = parse_csv_bytes(b"1,2\n# c\n3,4\n", n_fields=2, label_column=None, dtype="float64")
    assert y is None and X.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(InputFormatError, match=r"^f\.csv:12: value 'a' in column 2 is not a number \(--label"):
        parse_csv_bytes(b"1,2\n3,a\n", path="f.csv", first_line=11, n_fields=2, label_column=None)


@given(data=st.data(), n=st.integers(1, 30), d=st.integers(1, 6), header=st.booleans(),
       chunk_bytes=st.integers(1, 300))
@settings(max_examples=60, deadline=None)
def test_csv_numeric_tables_round_trip_exactly(tmp_path_factory, data, n, d, header, chunk_bytes):
    """Any finite float64 table written as shortest round-trip text reads back bit for bit (float64), and any
    float32 table so into float32, whatever the chunking and with or without a header."""
    values = data.draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=n * d, max_size=n * d))
    table = np.array(values, dtype=np.float64).reshape(n, d)
    p = write_csv(tmp_path_factory.mktemp("fuzz") / "t.csv", table, [f"c{j}" for j in range(d)] if header else None)
    r = CsvReader(p, label_column=False, dtype="float64", chunk_bytes=chunk_bytes)
    got = rows_of(r)
    assert got.dtype == np.float64 and np.array_equal(got, table)
    assert np.array_equal(np.signbit(got), np.signbit(table))  # -0.0 stays -0.0
    assert (r.n_features, r.n_samples, r.has_header) == (d, n, header)
    values32 = data.draw(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=n * d,
                                  max_size=n * d))
    small = np.array(values32, dtype=np.float32).reshape(n, d)
    p32 = write_csv(p.parent / "t32.csv", small.astype(np.float64))
    got32 = rows_of(CsvReader(p32, label_column=False, chunk_bytes=chunk_bytes))
    assert got32.dtype == np.float32 and np.array_equal(got32, small)


def test_parquet_every_column_is_a_feature(tmp_path):
    x = np.random.default_rng(2).normal(size=(50, 3))
    t = pa.table({"label": x[:, 0], "b": x[:, 1].astype(np.float32), "c": (x[:, 2] > 0), "n": np.arange(50)})
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=7)
    r = ParquetReader(tmp_path / "t.parquet", label_column=False, dtype="float64")
    assert (r.n_features, r.n_samples, r.label_index, r.label_what) == (4, 50, None, None)
    assert r.params["label_column"] is False
    want = np.column_stack([x[:, 0], x[:, 1].astype(np.float32), x[:, 2] > 0, np.arange(50)]).astype(np.float64)
    parts = list(r)
    assert len(parts) == 8 and all(y is None for _, y in parts)
    assert np.array_equal(np.concatenate([X for X, _ in parts]), want)
    assert ParquetReader(tmp_path / "t.parquet").n_features == 3  # read as usual: 'label' is the label


def test_parquet_parts_without_a_label_column(tmp_path):
    d = tmp_path / "parts"
    d.mkdir()
    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    for k in range(2):
        rows = x[10 * k:10 * k + 10]
        pq.write_table(pa.table({"a": rows[:, 0], "b": rows[:, 1]}), d / f"part.{k}.parquet")
    assert np.array_equal(rows_of(open_reader(d, label_column=False, dtype="float64")), x)


@pytest.mark.parametrize("column, values, want", [
    ("a", ["x0", "x1", "x2"], "{p}: value 'x0' in column 1 is not a number" + WHY),
    ("c", [None, "w", "v"], "{p}: value 'w' in column 3 is not a number" + WHY),  # the first value there is
    ("c", ["1.5", "2", "3"], "{p}: column 'c' is string, not numeric; features must be numeric (integers, floats, "
                             "booleans); drop or encode it first" + WHY),
])
def test_parquet_a_column_of_strings_is_no_feature(tmp_path, column, values, want):
    cols = {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0], "c": [7.0, 8.0, 9.0]}
    cols[column] = values
    p = tmp_path / "s.parquet"
    pq.write_table(pa.table(cols), p)
    line = failure(p)
    assert line == want.format(p=p)
    assert "pick the label" not in line


def test_parquet_missing_and_non_finite_values_are_named(tmp_path):
    p = tmp_path / "m.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0, 3.0], "b": [4.0, None, 6.0]}), p)
    assert failure(p) == f"{p}: column 'b' has a missing value in row 2"
    pq.write_table(pa.table({"a": [1.0, 2.0, float("inf")], "b": [4.0, 5.0, 6.0]}), p)
    assert failure(p) == f"{p}: column 'a' holds inf in row 3: values must be finite"


@pytest.mark.parametrize("bad", [True, 1.5, ["a"]])
def test_other_label_columns_are_refused(tmp_path, bad):
    p = write_csv(tmp_path / "t.csv", np.ones((2, 3)))
    pq.write_table(pa.table({"a": [1.0], "b": [2.0]}), tmp_path / "t.parquet")
    for path in (p, tmp_path / "t.parquet"):
        with pytest.raises(ValueError, match=r"^label_column must be an int, a column name, None or False; got "):
            open_reader(path, label_column=bad)


def test_other_formats_refuse_no_label_column(tmp_path):
    p = tmp_path / "s.svm"
    p.write_text("1 1:0.5\n0 2:1\n")
    with pytest.raises(ValueError, match=rf"^label_column=False \(--label-column none\) reads a CSV or Parquet table "
                                         rf"without a label column; {p} is svmlight input$"):
        open_reader(p, label_column=False)


def test_what_needs_labels_refuses_no_label_column(tmp_path):
    p = write_csv(tmp_path / "t.csv", np.ones((4, 3)))
    with pytest.raises(ValueError, match=r"^label_column=False \(--label-column none: a table without a label "
                                         r"column\) is for predict; a store holds labels$"):
        convert(p, tmp_path / "t.zarr", label_column=False)
    assert not (tmp_path / "t.zarr").exists()
    with pytest.raises(ValueError, match=r"^label_column=False \(--label-column none: a table without a label "
                                         r"column\) is for predict; training and evaluating need the labels$"):
        read_arrays(p, label_column=False)
