from __future__ import annotations

import gzip
import io
import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from distlearn.data import open_dataset
from distlearn.data._errors import InputFormatError
from distlearn.data._svmlight import SvmlightReader, line_aligned_ranges, write_svmlight
from distlearn.data.readers import convert, detect_format
from distlearn.distributed.executor import OnDask

# A fixture written from the svmlight format description (svmlight.joachims.org):
# <line> .=. <target> <feature>:<value> ... <feature>:<value> # <info>, with qid,
# comments, blank lines, +1/-1 targets and CRLF endings.
FIXTURE = (
    b"# a comment line\n"
    b"+1 qid:3 1:0.5 3:-2 7:1e-3 # trailing info\n"
    b"\n"
    b"-1 2:4.25\r\n"
    b"+1\n"  # no features at all
    b"-1 qid:1 7:3 # more\n"
)


def _write(tmp_path, text: bytes, name="d.svm"):
    p = tmp_path / name
    p.write_bytes(text)
    return p


def test_fixture_values(tmp_path):
    ds = convert(_write(tmp_path, FIXTURE), tmp_path / "f.zarr", dtype="float64")
    X, y = ds.to_scipy()
    assert y.tolist() == [1, -1, 1, -1] and y.dtype == np.int64
    assert X.shape == (4, 7)
    assert X.toarray().tolist() == [
        [0.5, 0, -2, 0, 0, 0, 1e-3],
        [0, 4.25, 0, 0, 0, 0, 0],
        [0] * 7,
        [0, 0, 0, 0, 0, 0, 3],
    ]
    assert ds.meta["params"] == {"format": "svmlight", "zero_based": False}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("zero_based", [False, True])
def test_round_trip_equals_sklearn(tmp_path, dtype, zero_based):
    rng = np.random.default_rng(0)
    X = sp.random(3000, 200, density=0.05, format="csr", random_state=1)
    X.data = np.round(rng.normal(size=X.nnz), 4)
    y = rng.integers(0, 7, 3000)
    p = tmp_path / "r.svm"
    dump_svmlight_file(X, y, str(p), zero_based=zero_based)
    # small chunks and blocks, so rows cross chunk and block boundaries
    reader_ds = convert(p, tmp_path / "r.zarr", dtype=dtype, zero_based=zero_based, block_rows=333, chunk_bytes=4096)
    Xs, ys = load_svmlight_file(str(p), dtype=np.dtype(dtype), zero_based=zero_based, n_features=200)
    X2, y2 = reader_ds.to_scipy()
    assert X2.dtype == np.dtype(dtype) and X2.shape == Xs.shape
    assert np.array_equal(X2.indptr, Xs.indptr) and np.array_equal(X2.indices, Xs.indices)
    assert np.array_equal(X2.data, Xs.data) and np.array_equal(y2, ys)


def test_dense_and_sparse_stores_of_one_file_agree(tmp_path):
    p = _write(tmp_path, FIXTURE)
    a = convert(p, tmp_path / "a.zarr", layout="csr")
    b = convert(p, tmp_path / "b.zarr", layout="dense")
    assert b.layout == "dense" and b.n_features == 7
    assert np.array_equal(a.to_numpy()[0], b.to_numpy()[0])


def test_gzip_equals_raw(tmp_path):
    p = _write(tmp_path, FIXTURE)
    g = tmp_path / "d.svm.gz"
    g.write_bytes(gzip.compress(FIXTURE))
    a, b = convert(p, tmp_path / "a.zarr"), convert(g, tmp_path / "b.zarr")
    assert (a.to_scipy()[0] != b.to_scipy()[0]).nnz == 0


def test_unsorted_indices_are_sorted(tmp_path):
    p = _write(tmp_path, b"1 5:5 2:2 9:9\n-1 3:1 1:4\n")
    X, y = convert(p, tmp_path / "u.zarr").to_scipy()
    assert X.toarray().tolist() == [[0, 2, 0, 0, 5, 0, 0, 0, 9], [4, 0, 1, 0, 0, 0, 0, 0, 0]]


def test_n_features_pads_and_limits(tmp_path):
    p = _write(tmp_path, b"1 1:1\n1 3:1\n")
    assert convert(p, tmp_path / "a.zarr", n_features=10).n_features == 10
    with pytest.raises(InputFormatError, match=r"d\.svm:2: token '3:1': feature index 3 is beyond n_features=2"):
        convert(p, tmp_path / "b.zarr", n_features=2)


# ---- bad input: each gets FILE:LINE, the token, and leaves nothing behind

GOOD = b"1 1:1 2:2\n" * 5

BAD_CASES = {
    "malformed token": (GOOD + b"1 1:1 oops\n", 6, r"malformed token 'oops': expected INDEX:VALUE"),
    "index 0 in 1-based": (GOOD + b"-1 0:1\n", 6, r"token '0:1': feature index 0 in a 1-based file"),
    "negative index": (GOOD + b"-1 -3:1\n", 6, r"token '-3:1': negative feature index -3"),
    "non-integer index": (GOOD + b"1 1.5:1\n", 6, r"feature index '1.5' is not an integer"),
    "nan value": (GOOD + b"1 1:nan\n", 6, r"token '1:nan': value 'nan' is not finite"),
    "inf value": (b"1 1:1\n" + b"1 2:inf 3:1\n", 2, r"value 'inf' is not finite"),
    "bad value": (GOOD + b"\n# c\n1 4:abc\n", 8, r"value 'abc' is not a number"),
    "duplicate index": (GOOD + b"1 4:1 2:1 4:2\n", 6, r"duplicate feature index 4 in one line"),
    "label not a number": (GOOD + b"yes 1:1\n", 6, r"label 'yes' is not a number"),
    "multilabel": (b"1,2 1:1\n", 1, r"multilabel files are not supported"),
    "nan label": (GOOD + b"nan 1:1\n", 6, r"label 'nan' is not finite"),
    "missing label": (GOOD + b"1:1 2:2\n", 6, r"the label is missing"),
    "misplaced qid": (b"1 1:1 qid:2\n", 1, r"qid must come right after the label"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_names_file_line_token(tmp_path, case):
    text, line, pattern = BAD_CASES[case]
    p = _write(tmp_path, text)
    with pytest.raises(InputFormatError, match=rf"d\.svm:{line}: .*{pattern}") as ei:
        convert(p, tmp_path / "out.zarr")
    assert ei.value.line == line and ei.value.path == str(p)
    assert sorted(os.listdir(tmp_path)) == ["d.svm"]


def test_line_numbers_survive_chunking(tmp_path):
    text = b"".join(b"1 %d:1\n" % (i % 50 + 1) for i in range(5000)) + b"1 3:x\n"
    p = _write(tmp_path, text)
    with pytest.raises(InputFormatError, match=r":5001: "):
        convert(p, tmp_path / "o.zarr", chunk_bytes=1000)


def test_empty_and_comment_only_files(tmp_path):
    with pytest.raises(InputFormatError, match="the file is empty"):
        convert(_write(tmp_path, b"", "e.svm"), tmp_path / "e.zarr", format="svmlight")
    with pytest.raises(InputFormatError, match="no examples"):
        convert(_write(tmp_path, b"# only\n\n# comments\n", "c.svm"), tmp_path / "c.zarr")
    assert sorted(os.listdir(tmp_path)) == ["c.svm", "e.svm"]


def test_truncated_gzip(tmp_path):
    blob = gzip.compress(b"".join(b"1 %d:1\n" % i for i in range(1, 20000)))
    p = tmp_path / "t.svm.gz"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputFormatError, match=r"t\.svm\.gz: compressed stream is truncated"):
        convert(p, tmp_path / "t.zarr", chunk_bytes=4096)
    assert sorted(os.listdir(tmp_path)) == ["t.svm.gz"]


def test_existing_output_refused(tmp_path):
    p = _write(tmp_path, GOOD)
    convert(p, tmp_path / "o.zarr")
    with pytest.raises(FileExistsError, match="--overwrite"):
        convert(p, tmp_path / "o.zarr")
    assert convert(p, tmp_path / "o.zarr", overwrite=True).n_samples == 5


def test_detect_format(tmp_path):
    assert detect_format(_write(tmp_path, GOOD, "x.data")) == "svmlight"
    assert detect_format(_write(tmp_path, b"a,b\n1,2\n", "x.dat")) == "csv"
    assert detect_format(tmp_path / "train-images-idx3-ubyte.gz") == "idx"
    with pytest.raises(InputFormatError, match="pass --format"):
        detect_format(_write(tmp_path, b"hello world\n", "x.bin"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 60),
    d=st.integers(1, 30),
    density=st.floats(0.0, 1.0),
    chunk=st.integers(8, 400),
    seed=st.integers(0, 10_000),
)
def test_reader_chunking_property(tmp_path_factory, n, d, density, chunk, seed):
    """Whatever the chunk size, the reader yields exactly scikit-learn's parse of the whole file."""
    X = sp.random(n, d, density=density, format="csr", random_state=seed)
    y = np.random.default_rng(seed).integers(-1, 2, n)
    buf = io.BytesIO()
    dump_svmlight_file(X, y, buf, zero_based=False)
    p = tmp_path_factory.mktemp("h") / "h.svm"
    p.write_bytes(buf.getvalue())
    parts = list(SvmlightReader(p, chunk_bytes=chunk, n_features=d, dtype="float64"))
    Xr = sp.vstack([a for a, _ in parts], format="csr")
    yr = np.concatenate([b for _, b in parts])
    Xs, ys = load_svmlight_file(str(p), n_features=d)
    assert (Xr != Xs).nnz == 0 and np.array_equal(yr, ys)


def test_line_aligned_ranges(tmp_path):
    text = b"".join(b"1 1:%d\n" % i for i in range(1000))
    p = _write(tmp_path, text)
    for part in (1, 7, 100, 5000, 10**6):
        ranges = line_aligned_ranges(p, part)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(text)
        assert all(b == c for (_, b), (c, _) in zip(ranges[:-1], ranges[1:]))
        assert all(a == 0 or text[a - 1 : a] == b"\n" for a, _ in ranges)


def test_write_svmlight_round_trip(tmp_path):
    X = sp.random(50, 9, density=0.3, format="csr", random_state=0, dtype=np.float32)
    y = np.arange(50) % 2 * 2 - 1
    info = write_svmlight(tmp_path / "w.svm", [(X[:20], y[:20]), (X[20:], y[20:])])
    assert info["n_samples"] == 50
    X2, y2 = load_svmlight_file(str(tmp_path / "w.svm"), n_features=9, dtype=np.float32)
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    with pytest.raises(FileExistsError):
        write_svmlight(tmp_path / "w.svm", [])


@pytest.mark.cluster
def test_parallel_convert_on_real_cluster(tmp_path, client):
    rng = np.random.default_rng(5)
    X = sp.random(20000, 300, density=0.02, format="csr", random_state=2)
    X.data = np.round(rng.normal(size=X.nnz), 3)
    y = rng.integers(0, 3, 20000)
    p = tmp_path / "big.svm"
    dump_svmlight_file(X, y, str(p), zero_based=False)
    ds = convert(p, tmp_path / "big.zarr", executor=OnDask(client), part_bytes=50_000, block_rows=1500)
    Xs, ys = load_svmlight_file(str(p), dtype=np.float32)
    X2, y2 = open_dataset(ds.path, validate="full").to_scipy()
    assert np.array_equal(X2.indptr, Xs.indptr) and np.array_equal(X2.indices, Xs.indices)
    assert np.array_equal(X2.data, Xs.data) and np.array_equal(y2, ys)
    # bad input in a late byte range: the error still names the file's own line
    with open(p, "ab") as f:
        f.write(b"1 1:1 2:x\n")
    with pytest.raises(InputFormatError, match=r"big\.svm:20001: token '2:x'"):
        convert(p, tmp_path / "bad.zarr", executor=OnDask(client), part_bytes=50_000)
    assert not (tmp_path / "bad.zarr").exists()
    assert sorted(os.listdir(tmp_path)) == ["big.svm", "big.zarr"]


def test_progress_reports_input_bytes(tmp_path):
    text = b"".join(b"1 %d:1\n" % (i % 9 + 1) for i in range(3000))
    p = _write(tmp_path, text)
    seen = []
    convert(p, tmp_path / "o.zarr", chunk_bytes=2048, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 5 and seen[-1] == (len(text), len(text))
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # monotone


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zero_based", [False, True])
def test_compiled_plain_lines_equal_sklearn_bit_for_bit(dtype, zero_based):
    """The numba parser of plain lines against scikit-learn's on the same bytes: every spelling of a
    number it takes (signs, leading zeros, '.5', '1.', exponents, -0, 15 digits, 1e22), CRLF, tabs,
    blank lines, label-only rows; and the chunks it must leave to the old way (more digits than a
    float64 mantissa, a comment, qid, unsorted indices, 'nan', index 0 in a 1-based file)."""
    from distlearn.data._svmlight import _compiled, parse_svmlight_bytes

    rng = np.random.default_rng(7)
    spell = [lambda v: "%.9g" % v, lambda v: "%.15g" % v, lambda v: "%+.6e" % v, lambda v: "%.3f" % v,
             lambda v: "%d" % round(v * 100), lambda v: "%.2E" % v, lambda v: "0%.4f" % abs(v),
             lambda v: ".5", lambda v: "1.", lambda v: "-0", lambda v: "1e22", lambda v: "123456789012345e-22"]
    lines = []
    for r in range(400):
        cols = np.sort(rng.choice(50, size=rng.integers(0, 8), replace=False)) + (0 if zero_based else 1)
        feats = " ".join(f"{c}:{spell[rng.integers(len(spell))](rng.normal() * 10.0 ** rng.integers(-5, 6))}"
                         for c in cols)
        sep = "\t" if r % 7 == 0 else " "
        lines.append(f"{['-1', '+1', '2', '0.5', '3e0'][r % 5]}{sep}{feats}".rstrip() + ("\r\n" if r % 5 == 0 else "\n"))
        if r % 11 == 0:
            lines.append("\n")
    lines.append(f"1 {7 if zero_based else 8}:1\n")  # at least one nonzero
    text = "".join(lines).encode()
    assert _compiled(text, zero_based, None, np.dtype(dtype)) is not None  # taken by the compiled parser
    X, y = parse_svmlight_bytes(text, zero_based=zero_based, dtype=dtype)
    Xs, ys = load_svmlight_file(io.BytesIO(text), zero_based=zero_based, dtype=dtype)
    assert X.shape == Xs.shape and X.nnz == Xs.nnz > 1000
    assert np.array_equal(X.indptr, Xs.indptr) and np.array_equal(X.indices, Xs.indices)
    assert X.data.dtype == Xs.data.dtype and X.data.tobytes() == Xs.data.tobytes()  # bit for bit (-0 too)
    assert y.tobytes() == ys.tobytes()
    for bad in (b"1 1:0.12345678901234567\n", b"1 1:2 # c\n", b"1 qid:2 1:2\n", b"1 3:1 2:1\n", b"1 1:nan\n",
                b"1 1:1e23\n", b"1 1:2:3\n", b"1,2 1:2\n", b"1 1:1_0\n", b"\n\n"):
        assert _compiled(bad, zero_based, None, np.dtype(dtype)) is None, bad
    if not zero_based:
        assert _compiled(b"1 0:1\n", False, None, np.dtype(dtype)) is None
        with pytest.raises(InputFormatError, match="feature index 0 in a 1-based file"):
            parse_svmlight_bytes(b"1 0:1\n", path="f.svm")
    assert _compiled(b"1 9:1\n", zero_based, 5, np.dtype(dtype)) is None  # beyond n_features: the old errors
    assert _compiled(b"1 1:1e30\n", zero_based, None, np.dtype(np.float32)) is None  # inf in float32
