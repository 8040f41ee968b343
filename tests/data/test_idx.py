"""Tests for the IDX (MNIST) reader."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from distlearn.data._errors import InputFormatError
from distlearn.data._idx import IdxReader, infer_labels_path

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

_CODES = {"ubyte": (0x08, ">u1"), "byte": (0x09, ">i1"), "short": (0x0B, ">i2"),
          "int": (0x0C, ">i4"), "float": (0x0D, ">f4"), "double": (0x0E, ">f8")}  # fmt: skip


def idx_bytes(a: np.ndarray, kind: str = "ubyte") -> bytes:
    """The IDX encoding of ``a``: magic, big-endian dims, big-endian row-major values."""
    code, dt = _CODES[kind]
    head = bytes([0, 0, code, a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape)
    return head + np.ascontiguousarray(a, dtype=dt).tobytes()


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def make_pair(
    tmp_path: Path,
    n: int = 7,
    rows: int = 3,
    cols: int = 2,
    *,
    kind: str = "ubyte",
    gz: bool = False,
    seed: int = 0,
    prefix: str = "train",
) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """MNIST-named images/labels files holding random data; returns paths and the arrays."""
    rng = np.random.default_rng(seed)
    if kind in ("float", "double"):
        img = rng.normal(size=(n, rows, cols)) * 100
    else:
        lo, hi = {"ubyte": (0, 256), "byte": (-128, 128), "short": (-(2**15), 2**15), "int": (-(2**31), 2**31)}[kind]
        img = rng.integers(lo, hi, size=(n, rows, cols), dtype=np.int64)
    lab = rng.integers(0, 10, size=n)
    ext = ".gz" if gz else ""
    ip = write(tmp_path / f"{prefix}-images-idx3-ubyte{ext}", idx_bytes(img, kind), gz)
    lp = write(tmp_path / f"{prefix}-labels-idx1-ubyte{ext}", idx_bytes(lab, "ubyte"), gz)
    return ip, lp, img, lab


def read_all(reader: IdxReader) -> tuple[np.ndarray, np.ndarray]:
    parts = list(reader)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


# ----------------------------------------------------------------------------- reading


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("kind", list(_CODES))
def test_round_trip_every_type(tmp_path, kind, gz):
    ip, lp, img, lab = make_pair(tmp_path, kind=kind, gz=gz)
    r = IdxReader(ip, lp, dtype="float64", chunk_rows=3)
    assert (r.n_samples, r.n_features) == (7, 6)
    assert r.format == "idx" and r.default_layout == "dense"
    X, y = read_all(r)
    expected = img.reshape(7, 6).astype(np.dtype(_CODES[kind][1]).newbyteorder("=")).astype(np.float64)
    np.testing.assert_array_equal(X, expected)
    np.testing.assert_array_equal(y, lab.astype(np.float64))
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert r.params["idx_type"] == kind and r.params["image_shape"] == [3, 2]


def test_chunks_dtype_and_progress(tmp_path):
    ip, lp, img, lab = make_pair(tmp_path, n=10, gz=True)
    r = IdxReader(ip, lp, chunk_rows=4)
    parts = list(r)
    assert [p[0].shape for p in parts] == [(4, 6), (4, 6), (2, 6)]
    assert all(p[0].dtype == np.float32 and p[1].dtype == np.float64 for p in parts)
    assert r.size_bytes == ip.stat().st_size + lp.stat().st_size
    assert r.bytes_read == r.size_bytes
    np.testing.assert_array_equal(read_all(r)[0], img.reshape(10, 6))  # re-iterable


def test_default_chunk_is_about_16_mib(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, rows=28, cols=28)
    assert IdxReader(ip, lp).chunk_rows * 784 * 4 <= 16 << 20 < (IdxReader(ip, lp).chunk_rows + 1) * 784 * 4


def test_gzip_detected_by_content_not_name(tmp_path):
    ip, lp, img, lab = make_pair(tmp_path, gz=False)
    ip2 = write(tmp_path / "t10k-images-idx3-ubyte", gzip.compress(ip.read_bytes()))  # gzipped, no .gz
    lp2 = write(tmp_path / "t10k-labels-idx1-ubyte.gz", lp.read_bytes())  # raw, named .gz
    X, y = read_all(IdxReader(ip2, lp2))
    np.testing.assert_array_equal(X, img.reshape(7, 6))
    np.testing.assert_array_equal(y, lab)


def test_labels_inferred_from_name(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, gz=True)
    r = IdxReader(str(ip))
    assert r.labels_path == str(lp) and r.params["labels"] == str(lp)
    assert infer_labels_path("/a/images-idx3/train-images.idx3-ubyte") == "/a/images-idx3/train-labels.idx1-ubyte"
    assert infer_labels_path("digits.bin") is None


def test_missing_labels_file_asks_for_it(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    lp.unlink()
    with pytest.raises(InputFormatError, match=r"needs its labels file.*--labels") as ei:
        IdxReader(ip)
    assert "train-labels-idx1-ubyte" in str(ei.value)
    other = write(tmp_path / "digits.bin", ip.read_bytes())
    with pytest.raises(InputFormatError, match="--labels"):
        IdxReader(other)
    with pytest.raises(InputFormatError, match="labels file not found"):
        IdxReader(ip, tmp_path / "nope")


# ----------------------------------------------------------------------------- header errors


@pytest.mark.parametrize("gz", [False, True])
def test_bad_magic_first_bytes(tmp_path, gz):
    ip, lp, *_ = make_pair(tmp_path, gz=gz)
    data = bytearray(gzip.decompress(ip.read_bytes()) if gz else ip.read_bytes())
    data[1] = 0x12
    write(ip, bytes(data), gz)
    with pytest.raises(InputFormatError, match=r"not an IDX file: .*00 12, expected 00 00") as ei:
        IdxReader(ip, lp)
    assert str(ei.value).startswith(str(ip) + ":")


def test_unknown_type_code(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    data = bytearray(ip.read_bytes())
    data[2] = 0x0A
    write(ip, bytes(data))
    with pytest.raises(InputFormatError, match=r"unknown IDX type code 0x0A.*0x08 \(ubyte\)"):
        IdxReader(ip, lp)


def test_wrong_ndim(tmp_path):
    ip, lp, img, lab = make_pair(tmp_path)
    write(ip, idx_bytes(img.reshape(7, 6)))  # idx2 images
    with pytest.raises(InputFormatError, match=r"images file has 2 dimension\(s\).*expected 3") as ei:
        IdxReader(ip, lp)
    assert ei.value.path == str(ip)
    ip, lp, img, lab = make_pair(tmp_path)
    write(lp, idx_bytes(lab.reshape(7, 1)))
    with pytest.raises(InputFormatError, match=r"labels file has 2 dimension\(s\).*expected 1") as ei:
        IdxReader(ip, lp)
    assert ei.value.path == str(lp)
    write(lp, idx_bytes(lab))
    with pytest.raises(InputFormatError, match=r"images file has 1 dimension\(s\).*expected 3"):
        IdxReader(lp, lp)  # labels passed as images


def test_count_mismatch(tmp_path):
    ip, lp, img, lab = make_pair(tmp_path)
    write(lp, idx_bytes(lab[:5]))
    with pytest.raises(InputFormatError, match=r"7 images but 5 labels"):
        IdxReader(ip, lp)


@pytest.mark.parametrize("gz", [False, True])
def test_empty_file(tmp_path, gz):
    ip, lp, *_ = make_pair(tmp_path)
    write(ip, b"")
    with pytest.raises(InputFormatError, match="images file is empty"):
        IdxReader(ip, lp)
    write(ip, b"", gz=True)  # a gzip stream holding nothing
    with pytest.raises(InputFormatError, match="truncated IDX header"):
        IdxReader(ip, lp)


def test_truncated_header(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    write(ip, ip.read_bytes()[:9])
    with pytest.raises(InputFormatError, match="truncated IDX header"):
        IdxReader(ip, lp)


def test_no_images(tmp_path):
    write(tmp_path / "a-images-idx3-ubyte", idx_bytes(np.zeros((0, 2, 2))))
    write(tmp_path / "a-labels-idx1-ubyte", idx_bytes(np.zeros(0)))
    with pytest.raises(InputFormatError, match="no images"):
        IdxReader(tmp_path / "a-images-idx3-ubyte")


# ----------------------------------------------------------------------------- data errors


def test_truncated_raw_found_up_front(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    write(ip, ip.read_bytes()[:-8])  # 16-byte header + 42 values - 8 = 5 complete images
    with pytest.raises(InputFormatError, match=r"truncated images file.*promises 7 items.*\(5 complete items\)"):
        IdxReader(ip, lp)
    ip, lp, *_ = make_pair(tmp_path, prefix="b")
    write(lp, lp.read_bytes()[:-1])
    with pytest.raises(InputFormatError, match=r"truncated labels file.*\(6 complete items\)") as ei:
        IdxReader(ip, lp)
    assert ei.value.path == str(lp)


def test_trailing_garbage_raw(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    write(ip, ip.read_bytes() + b"\x00\x01")
    with pytest.raises(InputFormatError, match="2 bytes of trailing data"):
        IdxReader(ip, lp)


def test_trailing_data_in_gzip_stream(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, gz=True)
    write(ip, gzip.decompress(ip.read_bytes()) + b"junk", gz=True)
    r = IdxReader(ip, lp)  # cannot be seen without decompressing everything
    with pytest.raises(InputFormatError, match="trailing data"):
        list(r)


def test_gzip_data_ends_early(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, gz=True)
    write(ip, gzip.decompress(ip.read_bytes())[:-8], gz=True)  # a complete stream, short data
    r = IdxReader(ip, lp, chunk_rows=2)
    with pytest.raises(InputFormatError, match=r"ends early: read 5 complete items of the 7") as ei:
        list(r)
    assert ei.value.path == str(ip)


def test_gzip_stream_truncated(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, n=2000, rows=28, cols=28, gz=True)
    write(ip, ip.read_bytes()[: ip.stat().st_size // 2])  # cut the compressed stream
    r = IdxReader(ip, lp, chunk_rows=100)
    with pytest.raises(InputFormatError, match=r"images stream is truncated or corrupt after \d+ complete items") as ei:
        list(r)
    assert ei.value.path == str(ip)


def test_gzip_labels_truncated(tmp_path):
    ip, lp, *_ = make_pair(tmp_path, gz=True)
    write(lp, gzip.decompress(lp.read_bytes())[:-3], gz=True)
    with pytest.raises(InputFormatError, match=r"labels file ends early: read 4 complete items") as ei:
        list(IdxReader(ip, lp))
    assert ei.value.path == str(lp)


@pytest.mark.parametrize("kind", ["float", "double"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values(tmp_path, kind, bad):
    ip, lp, img, lab = make_pair(tmp_path, kind=kind)
    img[4, 1, 0] = bad
    write(ip, idx_bytes(img, kind))
    with pytest.raises(InputFormatError, match=r"images item 4, value 2: .* is not finite"):
        list(IdxReader(ip, lp, chunk_rows=3))
    write(lp, idx_bytes(np.where(np.arange(7) == 6, bad, 1.0), kind))
    write(ip, idx_bytes(np.ones((7, 3, 2)), kind))
    with pytest.raises(InputFormatError, match=r"labels item 6, value 0: .* is not finite"):
        list(IdxReader(ip, lp))


def test_double_overflowing_float32(tmp_path):
    ip, lp, img, lab = make_pair(tmp_path, kind="double")
    img[2, 0, 0] = 1e300
    write(ip, idx_bytes(img, "double"))
    with pytest.raises(InputFormatError, match="images item 2, value 0: 1e[+]?300 overflows float32"):
        list(IdxReader(ip, lp))
    X, _ = read_all(IdxReader(ip, lp, dtype="float64"))
    assert X[2, 0] == 1e300


def test_error_pickles(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    write(ip, ip.read_bytes()[:-1])
    with pytest.raises(InputFormatError) as ei:
        IdxReader(ip, lp)
    e2 = pickle.loads(pickle.dumps(ei.value))
    assert str(e2) == str(ei.value)


def test_bad_arguments(tmp_path):
    ip, lp, *_ = make_pair(tmp_path)
    with pytest.raises(ValueError, match="dtype"):
        IdxReader(ip, lp, dtype="int32")
    with pytest.raises(ValueError, match="chunk_rows"):
        IdxReader(ip, lp, chunk_rows=0)


# ----------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_fashion_mnist_t10k():
    images = SHARED_DATA / "fashion-mnist" / "t10k-images-idx3-ubyte.gz"
    if not images.exists():
        pytest.skip(f"{images} is not available")
    r = IdxReader(images)
    assert (r.n_samples, r.n_features) == (10_000, 784)
    n = 0
    lo, hi = np.inf, -np.inf
    counts = np.zeros(10, dtype=np.int64)
    for X, y in r:
        assert X.shape[1] == 784 and X.dtype == np.float32
        n += X.shape[0]
        lo, hi = min(lo, X.min()), max(hi, X.max())
        counts += np.bincount(y.astype(np.int64), minlength=10)
    assert n == 10_000
    assert lo == 0 and hi == 255
    assert counts.tolist() == [1000] * 10  # Fashion-MNIST's test set is balanced
    assert r.bytes_read == r.size_bytes


def test_load_fashion_mnist_reads_the_four_files(tmp_path, monkeypatch):
    from distlearn.data.public import FASHION_ENV, load_fashion_mnist

    _, _, img, lab = make_pair(tmp_path, n=9, rows=4, cols=3, gz=True, seed=1)
    _, _, timg, tlab = make_pair(tmp_path, n=5, rows=4, cols=3, gz=True, seed=2, prefix="t10k")
    monkeypatch.setenv(FASHION_ENV, str(tmp_path))
    Xtr, ytr, Xte, yte = load_fashion_mnist()
    assert Xtr.dtype == np.float64 and Xtr.shape == (9, 12) and Xte.shape == (5, 12)
    assert np.array_equal(Xtr, img.reshape(9, -1)) and np.array_equal(Xte, timg.reshape(5, -1))
    assert np.array_equal(ytr, lab) and np.array_equal(yte, tlab) and ytr.dtype == np.int64
    with pytest.raises(FileNotFoundError, match="no Fashion-MNIST data"):
        load_fashion_mnist(tmp_path / "absent")
