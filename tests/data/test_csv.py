"""Tests for the streaming CSV reader."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from distlearn.data._csv import CsvReader, parse_csv_bytes
from distlearn.data._errors import InputFormatError


def write(path: Path, text: str, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def read_all(reader: CsvReader) -> tuple[np.ndarray, np.ndarray]:
    parts = list(reader)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def random_table(n: int = 50, d: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, d + 1)) * 10.0 ** rng.integers(-5, 5, size=(n, d + 1))
    data[:, 0] = rng.integers(0, 3, size=n)
    return data


def csv_of_rows(rows: list[str], header: str | None = None) -> str:
    return "".join(f"{r}\n" for r in ([header] if header else []) + rows)


def line_error(tmp_path: Path, text: str, **kw) -> InputFormatError:
    """The error a full read of ``text`` raises (construction or iteration)."""
    p = write(tmp_path / "bad.csv", text)
    with pytest.raises(InputFormatError) as ei:
        list(CsvReader(p, **kw))
    assert str(ei.value).startswith(f"{p}:")
    return ei.value


# ----------------------------------------------------------------------------- reading


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("chunk_bytes", [None, 64])
def test_round_trip_savetxt_float64(tmp_path, gz, chunk_bytes):
    data = random_table()
    p = tmp_path / "d.csv"
    np.savetxt(p, data, delimiter=",", fmt="%.17g")  # 17 digits: exact float64 round trip
    if gz:
        p = write(tmp_path / "d.csv.gz", p.read_text(), gz=True)
    r = CsvReader(p, dtype="float64", chunk_bytes=chunk_bytes)
    assert r.format == "csv" and r.default_layout == "dense"
    assert (r.n_features, r.n_samples, r.has_header) == (4, None, False)
    X, y = read_all(r)
    np.testing.assert_array_equal(X, data[:, 1:])
    np.testing.assert_array_equal(y, data[:, 0])
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert r.n_samples == 50
    assert r.bytes_read == r.size_bytes == p.stat().st_size


def test_float32_default_and_chunks(tmp_path):
    data = random_table(n=200)
    p = tmp_path / "d.csv"
    np.savetxt(p, data, delimiter=",", fmt="%.17g")
    parts = list(CsvReader(p, chunk_bytes=500))
    assert len(parts) > 10
    assert all(X.dtype == np.float32 and X.flags.c_contiguous and y.dtype == np.float64 for X, y in parts)
    X = np.concatenate([X for X, _ in parts])
    np.testing.assert_array_equal(X, data[:, 1:].astype(np.float32))


@pytest.mark.parametrize(
    ("label_column", "col"), [(0, 0), (2, 2), (-1, 4), (-5, 0), ("b", 2), ("y", 4)]
)
def test_label_column_by_index_and_name(tmp_path, label_column, col):
    data = random_table(n=20)
    p = tmp_path / "d.csv"
    np.savetxt(p, data, delimiter=",", fmt="%.17g", header="a,x1,b,x3,y", comments="")
    r = CsvReader(p, label_column=label_column, dtype="float64")
    assert r.label_index == col and r.has_header and r.columns == ["a", "x1", "b", "x3", "y"]
    assert r.params == {"label_column": col, "label_name": r.columns[col], "delimiter": ",", "header": True}
    X, y = read_all(r)
    np.testing.assert_array_equal(y, data[:, col])
    np.testing.assert_array_equal(X, np.delete(data, col, axis=1))


def test_header_auto_detection(tmp_path):
    p = write(tmp_path / "h.csv", "label,f1,f2\n1,2,3\n")
    assert CsvReader(p).has_header
    p = write(tmp_path / "n.csv", "1,2,3\n4,5,6\n")
    r = CsvReader(p)
    assert not r.has_header and r.columns is None
    assert read_all(r)[1].tolist() == [1, 4]
    # one non-numeric field is enough; numeric-looking names need header=True
    p = write(tmp_path / "m.csv", "# made by hand\n\n1,2,x\n1,2,3\n")
    assert CsvReader(p).has_header
    p = write(tmp_path / "num.csv", "0,1,2\n1,2,3\n")
    r = CsvReader(p, header=True, label_column="2")
    assert r.label_index == 2 and read_all(r)[1].tolist() == [3]
    with pytest.raises(InputFormatError, match=r":1: value 'a' in column 1 is not a number"):
        CsvReader(write(tmp_path / "f.csv", "a,b\n1,2\n"), header=False, label_column=-1)


def test_blank_comment_and_odd_lines(tmp_path):
    text = "# comment\ny,a,b\n\n1,2,3\n   \n# more\n4, 5 ,6  # trailing comment\r\n7,8,9"
    p = write(tmp_path / "c.csv", text)
    for cb in (None, 3):
        X, y = read_all(CsvReader(p, dtype="float64", chunk_bytes=cb))
        assert X.tolist() == [[2, 3], [5, 6], [8, 9]] and y.tolist() == [1, 4, 7]


def test_whitespace_and_other_delimiters(tmp_path):
    p = write(tmp_path / "w.txt", "1  2\t3\n  4 5 6\n")
    assert read_all(CsvReader(p, delimiter=None))[0].tolist() == [[2, 3], [5, 6]]
    p = write(tmp_path / "s.csv", "y;a\n1;2.5\n")
    assert read_all(CsvReader(p, delimiter=";", label_column="y"))[0].tolist() == [[2.5]]


def test_quoted_header_names(tmp_path):
    p = write(tmp_path / "q.csv", '"label", "a"\n1,2\n')
    assert CsvReader(p, label_column="label").columns == ["label", "a"]


def test_parse_csv_bytes_direct():
    X, y = parse_csv_bytes(b"1,2,3\n4,5,6\n", n_fields=3, label_column=1, dtype="float64")
    assert X.tolist() == [[1, 3], [4, 6]] and y.tolist() == [2, 5]
    X, y = parse_csv_bytes(b"# nothing\n\n", n_fields=3)
    assert X.shape == (0, 2) and y.shape == (0,)


# ----------------------------------------------------------------------------- errors


def test_non_numeric_value(tmp_path):
    e = line_error(tmp_path, "1,2,3\n4,abc,6\n")
    assert e.line == 2 and e.token == "abc"
    assert "value 'abc' in column 2 is not a number" in str(e)


def test_labels_mixing_numbers_and_names_are_refused_both_ways(tmp_path):
    e = line_error(tmp_path, "a,b\n1,2\ncat,3\n")
    assert e.line == 3 and e.token == "cat"
    assert e.reason == "label 'cat' in column 1 is a name, but the first row's label is a number " \
                       "(labels are all numbers or all names)"
    e = line_error(tmp_path, "a,b\ncat,2\n" + "dog,3\n" * 5 + "1,3\n")
    assert e.line == 8 and e.token == "1"
    assert e.reason == "label '1' in column 1 is a number, but the first row's label is a name " \
                       "(labels are all numbers or all names)"


def test_wrong_number_of_fields(tmp_path):
    e = line_error(tmp_path, "1,2,3\n4,5,6\n7,8\n")
    assert e.line == 3 and "expected 3, found 2" in str(e)
    e = line_error(tmp_path, "y,a\n1,2,3\n")  # the first data line is checked up front
    assert e.line == 2 and "expected 2, found 3" in str(e)


def test_empty_field(tmp_path):
    e = line_error(tmp_path, "1,2,3\n4,,6\n")
    assert e.line == 2 and e.token == "" and "empty field in column 2" in str(e)
    e = line_error(tmp_path, "1,2,3\n4,5,6,\n")
    assert e.line == 2 and "expected 3, found 4" in str(e)


@pytest.mark.parametrize("tok", ["nan", "inf", "-Infinity", "NaN"])
def test_non_finite_value_and_label(tmp_path, tok):
    e = line_error(tmp_path, f"1,2\n3,{tok}\n")
    assert e.line == 2 and e.token == tok and f"value {tok!r} in column 2 is not finite" in str(e)
    e = line_error(tmp_path, f"1,2\n{tok},4\n")
    assert e.line == 2 and f"label {tok!r} in column 1 is not finite" in str(e)


def test_value_overflows_float32(tmp_path):
    e = line_error(tmp_path, "1,2\n3,1e300\n")
    assert e.line == 2 and "overflows float32" in str(e)
    p = write(tmp_path / "ok.csv", "1,2\n3,1e300\n")
    assert read_all(CsvReader(p, dtype="float64"))[0][1, 0] == 1e300


def test_label_column_errors(tmp_path):
    p = write(tmp_path / "h.csv", "a,b,c\n1,2,3\n")
    msg = r"h.csv:1: label column 'z' is not in the header \(columns: 'a', 'b', 'c'\)"
    with pytest.raises(InputFormatError, match=msg):
        CsvReader(p, label_column="z")
    with pytest.raises(InputFormatError, match="label column index 3 is out of range for 3 columns"):
        CsvReader(p, label_column=3)
    with pytest.raises(InputFormatError, match="index -4 is out of range"):
        CsvReader(p, label_column=-4)
    q = write(tmp_path / "n.csv", "1,2,3\n")
    with pytest.raises(InputFormatError, match="given by name, but the first line is not a header"):
        CsvReader(q, label_column="a")
    with pytest.raises(ValueError, match="needs a header"):
        CsvReader(p, label_column="a", header=False)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "the file is empty"),
        ("\n\n# only comments\n", "only blank or comment lines"),
        ("a,b,c\n", r":1: no data rows after the header"),
        ("# c\na,b,c\n\n# c\n", r":2: no data rows after the header"),
        ("1\n2\n", "need a label column and at least one feature"),
    ],
)
def test_empty_file_or_header_only(tmp_path, text, match):
    p = write(tmp_path / "e.csv", text)
    with pytest.raises(InputFormatError, match=match):
        CsvReader(p)


def test_empty_gzip(tmp_path):
    p = write(tmp_path / "e.csv.gz", "", gz=True)
    with pytest.raises(InputFormatError, match="only blank or comment lines"):
        CsvReader(p)


def test_truncated_gzip(tmp_path):
    data = random_table(n=3000, seed=1)
    p = tmp_path / "d.csv"
    np.savetxt(p, data, delimiter=",", fmt="%.17g")
    z = tmp_path / "d.csv.gz"
    full = gzip.compress(p.read_bytes())
    z.write_bytes(full[: len(full) // 2])
    with pytest.raises(InputFormatError, match=r"compressed stream is truncated or corrupt after line \d+"):
        list(CsvReader(z, chunk_bytes=4096))


def test_missing_file(tmp_path):
    with pytest.raises(InputFormatError, match="file not found"):
        CsvReader(tmp_path / "nope.csv")


def test_line_numbers_across_chunks(tmp_path):
    """With chunks of a few bytes, every error still names its line in the file."""
    rows = [f"{i % 2},{i}.5,{-i}" for i in range(300)]
    good = csv_of_rows(rows, header="# generated\ny,a,b")
    p = write(tmp_path / "g.csv", good)
    for cb in (1, 7, 64):
        r = CsvReader(p, chunk_bytes=cb, dtype="float64")
        X, y = read_all(r)
        assert X[:, 0].tolist() == [i + 0.5 for i in range(300)] and r.n_samples == 300
    for bad_row, (bad, what) in [(0, ("x", "not a number")), (137, ("", "empty field")),
                                 (250, ("inf", "not finite")), (299, ("1,2", "expected 3, found 4"))]:  # fmt: skip
        broken = list(rows)
        broken[bad_row] = f"1,{bad},2"
        for cb in (1, 7, 64, None):
            e = line_error(tmp_path, csv_of_rows(broken, header="# generated\ny,a,b"), chunk_bytes=cb)
            assert e.line == bad_row + 3, (cb, bad_row)  # 2 preamble lines, 1-based
            assert what in str(e)


def test_line_numbers_across_gzip_chunks(tmp_path):
    rows = [f"1,{i}" for i in range(500)]
    rows[421] = "1,oops"
    p = write(tmp_path / "g.csv.gz", csv_of_rows(rows, header="\n\ny,x"), gz=True)
    with pytest.raises(InputFormatError, match=r"g.csv.gz:425: value 'oops'"):
        list(CsvReader(p, chunk_bytes=100))


def test_undecodable_bytes(tmp_path):
    p = tmp_path / "u.csv"
    p.write_bytes(b"1,2\n3,\xff\n")
    with pytest.raises(InputFormatError, match=r":2: value .* is not a number"):
        list(CsvReader(p))


def test_error_pickles(tmp_path):
    e = line_error(tmp_path, "1,2\n3,x\n")
    e2 = pickle.loads(pickle.dumps(e))
    assert (str(e2), e2.line, e2.token) == (str(e), 2, "x")


def test_bad_arguments(tmp_path):
    p = write(tmp_path / "d.csv", "1,2\n")
    for kw in ({"delimiter": ",,"}, {"delimiter": "#"}, {"header": "yes"}, {"dtype": "int64"},
               {"chunk_bytes": 0}, {"label_column": 1.5}):  # fmt: skip
        with pytest.raises(ValueError):
            CsvReader(p, **kw)


# ----------------------------------------------------------------------------- which column is the label


def labelled_table(tmp_path: Path, header: str, n: int = 300, seed: int = 0) -> tuple[Path, np.ndarray]:
    """Three continuous features and an integer class column, in the header's order."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    names = header.split(",")
    cols = {n_: i for i, n_ in enumerate(names)}
    lab = next(n_ for n_ in names if n_.lower() in ("label", "target", "class", "y") or n_ == "cls")
    data = np.empty((n, 4))
    feats = [c for c in names if c != lab]
    for j, c in enumerate(feats):
        data[:, cols[c]] = X[:, j]
    data[:, cols[lab]] = y
    p = tmp_path / "t.csv"
    np.savetxt(p, data, delimiter=",", fmt="%.17g", header=header, comments="")
    return p, data


@pytest.mark.parametrize("header", ["f1,f2,f3,label", "Target,a,b,c", "a,CLASS,b,c", "a,b,Y,c"])
def test_a_column_named_like_a_label_is_the_label(tmp_path, header):
    from distlearn.data.readers import convert

    p, data = labelled_table(tmp_path, header)
    col = next(i for i, c in enumerate(header.split(",")) if c.lower() in ("label", "target", "class", "y"))
    r = CsvReader(p)
    assert r.label_index == col and r.label_what == f"label column {col} ({header.split(',')[col]!r})"
    X, y = convert(p, tmp_path / "s.zarr", dtype="float64").to_numpy()
    np.testing.assert_array_equal(y, data[:, col])
    np.testing.assert_array_equal(X, np.delete(data, col, axis=1))


def test_label_column_overrides_the_name_and_label_names_have_an_order(tmp_path):
    p, data = labelled_table(tmp_path, "f1,f2,f3,label")
    assert CsvReader(p, label_column=0).label_index == 0
    q = write(tmp_path / "two.csv", "x,y,label\n1,2,0\n0,3,1\n")
    assert CsvReader(q).label_index == 2  # 'label' before 'y' (here a coordinate)
    assert CsvReader(write(tmp_path / "tc.csv", "Class,a,TARGET\n1,2,0\n")).label_index == 2  # target before class
    assert CsvReader(q, label_column="y").label_index == 1
    # no header: column 0, as before
    assert CsvReader(write(tmp_path / "n.csv", "1,2,3\n")).label_index == 0


def test_continuous_labels_are_refused_in_one_line(tmp_path):
    from distlearn.data.readers import convert

    p, _ = labelled_table(tmp_path, "f1,f2,f3,label")
    with pytest.raises(InputFormatError) as ei:
        convert(p, tmp_path / "s.zarr", label_column=0)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(f"{p}: label column 0 ('f1') holds non-integer values (e.g. ")
    assert msg.endswith(" in row 1), not class labels; pick the label with --label-column NAME|INDEX (label_column=)")
    assert not (tmp_path / "s.zarr").exists()


def test_more_classes_than_half_the_rows_is_refused(tmp_path):
    from distlearn.data.readers import convert

    rows = "".join(f"{i},{i % 7}.5,{i % 3}\n" for i in range(300))  # column 0: an integer row id
    p = write(tmp_path / "ids.csv", "id,v,w\n" + rows)
    with pytest.raises(InputFormatError, match=r"ids.csv: label column 0 \('id'\) has 300 distinct values in 300 "
                                               r"rows, not class labels; pick the label with --label-column "
                                               r"NAME\|INDEX \(label_column=\)$"):
        convert(p, tmp_path / "s.zarr", chunk_bytes=200)  # counted across chunks
    ds = convert(p, tmp_path / "s.zarr", label_column="w")
    assert ds.classes.tolist() == [0, 1, 2]
    # a small hand-made file, one row per class, is classes (at most MIN_REFUSED_CLASSES of them)
    small = write(tmp_path / "small.csv", "".join(f"{i},{i}\n" for i in range(10)))
    assert convert(small, tmp_path / "small.zarr").n_samples == 10
    eleven = write(tmp_path / "eleven.csv", "".join(f"{i},{i}\n" for i in range(11)))
    with pytest.raises(InputFormatError, match="has 11 distinct values in 11 rows"):
        convert(eleven, tmp_path / "e.zarr")


def test_svmlight_with_continuous_labels_is_refused(tmp_path):
    from distlearn.data.readers import convert, read_arrays

    p = write(tmp_path / "r.svm", "".join(f"{0.25 * i} 1:{i}\n" for i in range(40)))
    want = (r"r.svm: the labels \(each line's first field\) holds non-integer values \(e.g. 0.25 in row 2\), not "
            r"class labels; distlearn trains classifiers, whose labels are class numbers$")
    with pytest.raises(InputFormatError, match=want):
        convert(p, tmp_path / "s.zarr")
    with pytest.raises(InputFormatError, match=want):
        read_arrays(p)
    q = write(tmp_path / "ids.svm", "".join(f"{i} 1:1\n" for i in range(40)))
    from distlearn.distributed import executor_for

    with pytest.raises(InputFormatError, match=r"has 40 distinct values in 40 rows"):
        convert(q, tmp_path / "s.zarr")
    with executor_for(None) as ex, pytest.raises(InputFormatError, match=r"has 40 distinct values in 40 rows"):
        convert(q, tmp_path / "s.zarr", part_bytes=64, executor=ex)  # parallel byte ranges, an executor's tasks


def test_read_arrays_refuses_a_file_too_big_for_memory(tmp_path):
    from distlearn.data.readers import read_arrays

    p, data = labelled_table(tmp_path, "f1,f2,f3,label")
    X, y = read_arrays(p, dtype="float64")
    np.testing.assert_array_equal(X, data[:, :3])
    np.testing.assert_array_equal(y, data[:, 3])
    with pytest.raises(InputFormatError, match=r"t.csv: about 0 MiB in memory, more than 0 MiB .*; convert it to a "
                                               r"store first, which streams it: distlearn convert .*t.csv t.zarr$"):
        read_arrays(p, budget=1000)
