"""svmlight feature indices at and beyond the 32- and 64-bit limits: kept exactly (int64) or refused
in one line naming the file and line -- never wrapped -- by the serial reader and the byte-range
parser of the parallel convert."""

from __future__ import annotations

import numpy as np
import pytest

from distlearn import cli
from distlearn.data import open_dataset
from distlearn.data._errors import InputFormatError
from distlearn.data._svmlight import SvmlightReader, count_lines_before, line_aligned_ranges, parse_svmlight_range
from distlearn.data.readers import convert
from distlearn.distributed.executor import OnDask

# (index token, what it must give): an int means the stored 0-based index (1-based file)
WIDE = [2**31 + 5, 2**63 - 1]
BAD = {
    str(2**64 + 1): "does not fit a 64-bit index",
    "-3": "negative feature index -3",
    "1.5": "feature index '1.5' is not an integer",
    "abc": "feature index 'abc' is not an integer",
}


def _file(tmp_path, token: str, name: str = "d.svm"):
    """Five lines; the odd token sits on line 4 (after a comment line and a blank one)."""
    p = tmp_path / name
    p.write_bytes(b"# header\n1 1:0.5 3:1\n\n-1 2:1 " + token.encode() + b":2.5\n1 4:-1\n")
    return p


@pytest.mark.parametrize("index", WIDE)
def test_wide_index_is_kept_as_int64_serial(tmp_path, index):
    p = _file(tmp_path, str(index))
    X, y = next(iter(SvmlightReader(p, dtype="float64")))
    assert X.indices.dtype == np.int64
    assert X.indices.tolist() == [0, 2, 1, index - 1, 3] and X.shape[1] == index
    # the store keeps 64-bit indices when the width needs them (DatasetWriter.index_dtype)
    ds = convert(p, tmp_path / "w.zarr", n_features=index, dtype="float64")
    Xs, ys = open_dataset(ds.path).to_scipy()
    assert Xs.indices.dtype == np.int64
    assert Xs.indices.tolist() == [0, 2, 1, index - 1, 3]      # written index minus the base, exactly
    assert Xs.data.tolist() == [0.5, 1.0, 1.0, 2.5, -1.0] and ys.tolist() == [1, -1, 1]


@pytest.mark.parametrize("index", WIDE)
def test_wide_index_is_kept_as_int64_by_ranges(tmp_path, index):
    p = _file(tmp_path, str(index))
    ranges = line_aligned_ranges(p, 12)
    assert len(ranges) >= 3  # really cut: the wide line is parsed in a range of its own
    parts = [parse_svmlight_range(str(p), a, b, dtype="float64") for a, b in ranges]
    idx = np.concatenate([q["indices"] for q in parts])
    assert idx.dtype == np.int64 and idx.tolist() == [0, 2, 1, index - 1, 3]
    assert max(q["n_cols"] for q in parts) == index


@pytest.mark.parametrize("token,reason", sorted(BAD.items()))
def test_bad_index_is_one_line_naming_file_and_line(tmp_path, token, reason):
    p = _file(tmp_path, token)
    with pytest.raises(InputFormatError) as e:
        list(SvmlightReader(p))
    msg = str(e.value)
    assert e.value.line == 4 and msg.startswith(f"{p}:4: ") and reason in msg and "\n" not in msg
    # the byte-range parser returns the same reason, with its range-local line
    for a, b in line_aligned_ranges(p, 12):
        part = parse_svmlight_range(str(p), a, b)
        if "error" in part:
            line, why, tok = part["error"]
            assert count_lines_before(p, part["start"]) + line == 4 and reason in why
            assert tok == f"{token}:2.5"
            break
    else:
        pytest.fail("no range reported the bad token")


def test_index_beyond_int64_through_the_command(tmp_path, capsys):
    p = _file(tmp_path, str(2**64 + 1))
    assert cli.main(["convert", str(p), str(tmp_path / "o.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{p}:4:" in err[0] and "--hash-bits" in err[0]
    assert not (tmp_path / "o.zarr").exists()


def test_wide_index_hashed(tmp_path):
    """--hash-bits takes the open-ended indices the 64-bit check lets through."""
    p = _file(tmp_path, str(2**63 - 1))
    ds = convert(p, tmp_path / "h.zarr", hash_bits=8)
    X, _ = open_dataset(ds.path).to_scipy()
    assert X.shape[1] == 256 and X.nnz == 5 and 0 <= X.indices.min() and X.indices.max() < 256


def test_wide_index_without_n_features_never_wraps(tmp_path):
    p = _file(tmp_path, str(2**31 + 5))
    try:
        ds = convert(p, tmp_path / "w.zarr")
    except (InputFormatError, ValueError) as e:  # refused, in one line, with a hint
        assert "\n" not in str(e) and ("--hash-bits" in str(e) or "--n-features" in str(e))
        return
    X, _ = open_dataset(ds.path).to_scipy()
    assert X.indices.tolist() == [0, 2, 1, 2**31 + 4, 3]


@pytest.mark.cluster
def test_ranges_on_a_real_cluster(tmp_path, client):
    p = _file(tmp_path, str(2**31 + 5))
    ds = convert(p, tmp_path / "w.zarr", n_features=2**31 + 5, executor=OnDask(client), part_bytes=12,
                 dtype="float64")
    X, _ = open_dataset(ds.path).to_scipy()
    assert X.indices.dtype == np.int64 and X.indices.tolist() == [0, 2, 1, 2**31 + 4, 3]
    q = _file(tmp_path, str(2**64 + 1), name="bad.svm")
    with pytest.raises(InputFormatError, match=r"bad\.svm:4: token '18446744073709551617:2\.5'.*64-bit"):
        convert(q, tmp_path / "bad.zarr", executor=OnDask(client), part_bytes=12)
    assert not (tmp_path / "bad.zarr").exists()


def test_wide_index_in_a_later_block_never_wraps(tmp_path):
    """The store's index width is fixed by its first block: a wide index met later is kept exactly
    or refused in one line with the hints -- never wrapped."""
    p = tmp_path / "late.svm"
    p.write_bytes(b"1 1:0.5 3:1\n-1 2:1\n1 4:-1\n-1 1:1 2147483653:2.5\n")
    try:
        ds = convert(p, tmp_path / "late.zarr", chunk_bytes=16, block_rows=2)
    except (InputFormatError, ValueError) as e:
        assert "\n" not in str(e) and str(p) in str(e) and "--hash-bits" in str(e) and "--n-features" in str(e)
        assert not (tmp_path / "late.zarr").exists()
        return
    X, _ = open_dataset(ds.path).to_scipy()
    assert X.indices.tolist() == [0, 2, 1, 3, 0, 2**31 + 4]
