"""Safety round four: the store's last known holes, attacked on real stores on disk.

1. A chunk file copied over another position (``cp X/data/c/3 X/data/c/5``) passed its crc32c
   checksum, which covers only the chunk's own bytes.  Every chunk now has a digest binding its
   decoded values to its array, the array's length and its position (``digests/``), and every read
   checks the digest of every chunk it touches.
2. A chunk deleted after the store was opened read as the fill value ("value nan ... not finite");
   it is now "chunk KEY is missing", whenever it went.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlearn.cli import main
from distlearn.data import StoreError, create_dataset, open_dataset
from distlearn.data import store as store_mod

from tests.data.test_integrity import BLOCK, D, _data  # the same 600 x 40 rows, 3 blocks of 200

NNZ_CHUNK = 1000
ARRAYS = {"csr": ["y", "X/data", "X/indices", "X/indptr"], "dense": ["y", "X"]}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A CSR store (3 blocks, 1000 values per chunk: chunks that straddle blocks) and a dense one."""
    d = tmp_path_factory.mktemp("pristine4")
    X, y = _data()
    create_dataset(d / "csr.zarr", X, y, block_rows=BLOCK, nnz_chunk=NNZ_CHUNK)
    create_dataset(d / "dense.zarr", X.toarray(), y, block_rows=BLOCK)
    return d


def _copy(pristine, dst: Path, layout="csr") -> Path:
    shutil.copytree(pristine / f"{layout}.zarr", dst)
    return dst


def _chunks(store: Path, array: str) -> list[str]:
    """The chunk keys of ``array`` (``X/data/c/0``, dense ``X/c/0/0``), in position order."""
    base = store / array / "c"
    keys = [p.relative_to(store).as_posix() for p in base.rglob("*") if p.is_file()]
    return sorted(keys, key=lambda k: [int(x) for x in k.split("/c/")[1].split("/")])


def _one_line(capsys, *argv) -> str:
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0].split(": error: ", 1)[1]


def _full_refusal(store: Path) -> str:
    with pytest.raises(StoreError) as e:
        open_dataset(store, validate="full")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{store}: "), msg
    return msg


# ---------------------------------------------------------------- 1. a chunk in another's place


def test_new_stores_have_a_digest_of_every_chunk(pristine):
    for layout in ("csr", "dense"):
        ds = open_dataset(pristine / f"{layout}.zarr")
        assert ds.meta["integrity"] == {"crc32c": True, "fill": "invalid", "digests": True}
        g = zarr.open_group(str(pristine / f"{layout}.zarr" / "digests"), mode="r")
        for name in ARRAYS[layout] + ["block_index"]:
            a = zarr.open_array(str(pristine / f"{layout}.zarr" / name), mode="r")
            d = g[name.replace("/", ".")]
            assert d.dtype == np.uint32 and d.shape == (-(-a.shape[0] // a.chunks[0]),), name
            for i in range(d.shape[0]):  # what the digest is: documented, so it can be recomputed
                v = a[i * a.chunks[0]:(i + 1) * a.chunks[0]]
                assert d[i] == store_mod.chunk_digest(name, a.shape[0], i, v), (name, i)


@pytest.mark.parametrize("layout, src, dst, block", [
    ("csr", "y/c/0", "y/c/2", 2),  # labels: the block check can never see these
    ("csr", "y/c/2", "y/c/1", 1),  # the last (short) chunk over a whole one
    ("csr", "X/data/c/1", "X/data/c/3", 1),  # values of equal length: never seen by the block check
    ("csr", "X/indices/c/2", "X/indices/c/1", 0),  # chunk 1 (values 1000..1999) is first read by block 0
    ("csr", "X/indices/c/0", "X/data/c/0", 0),  # another array's chunk of the same size (int32 -> float32)
    ("csr", "X/indptr/c/0", "X/indptr/c/1", 1),  # read by block 0 first, whose last pointer is row 200's
    ("dense", "X/c/0/0", "X/c/1/0", 1),
    ("dense", "y/c/1", "y/c/0", 0),
])
def test_a_chunk_copied_over_another_position_is_refused(pristine, tmp_path, capsys, layout, src, dst, block):
    store = _copy(pristine, tmp_path / "s.zarr", layout)
    shutil.copyfile(store / src, store / dst)
    want = f"chunk {dst} is not the data written there (its digest differs: a chunk file moved, copied or rewritten)"
    msg = _full_refusal(store)
    assert f": block {block} (rows " in msg and msg.endswith(want), msg
    # the same through every reader: the CLI's full check, and a model's evaluation of the store
    assert _one_line(capsys, "info", store, "--validate").endswith(want)
    ds = open_dataset(store)
    with pytest.raises(StoreError, match=r"block \d \(rows \d+\.\.\d+\): .*" + dst):
        for b in range(ds.n_blocks):
            ds.read_block(b)


def test_swapped_chunks_are_refused_and_the_swap_back_reads_again(pristine, tmp_path):
    store = _copy(pristine, tmp_path / "s.zarr")
    a, b = store / "X/data/c/0", store / "X/data/c/1"
    raw_a, raw_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(raw_b)
    b.write_bytes(raw_a)
    assert "chunk X/data/c/0 is not the data written there" in _full_refusal(store)
    a.write_bytes(raw_a)
    b.write_bytes(raw_b)
    X, y = open_dataset(store, validate="full").to_scipy()
    X0, y0 = _data()
    assert (X != X0).nnz == 0 and np.array_equal(y, y0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_chunk_over_any_other_of_its_array_is_refused(pristine, tmp_path, data):
    """The law: every chunk file copied over any other position of its array (same codec, so it always
    decodes) is refused by the full check, naming the chunk it was copied to."""
    layout = data.draw(st.sampled_from(["csr", "dense"]))
    array = data.draw(st.sampled_from(ARRAYS[layout]))
    store = tmp_path / f"h{data.draw(st.integers(0, 10**9))}.zarr"
    shutil.rmtree(store, ignore_errors=True)
    _copy(pristine, store, layout)
    keys = _chunks(store, array)
    i = data.draw(st.integers(0, len(keys) - 1))
    j = data.draw(st.integers(0, len(keys) - 1).filter(lambda k: k != i))
    shutil.copyfile(store / keys[i], store / keys[j])
    assert f"chunk {keys[j]} is not the data written there" in _full_refusal(store)
    shutil.rmtree(store)


def test_a_read_of_part_of_a_chunk_checks_the_whole_chunk(pristine, tmp_path):
    """read_rows of a range inside a chunk reads the chunk whole and checks its digest: a moved chunk
    is refused whichever rows are asked for (also the values of a chunk that two blocks share)."""
    store = _copy(pristine, tmp_path / "s.zarr")
    shutil.copyfile(store / "y/c/0", store / "y/c/1")
    shutil.copyfile(store / "X/data/c/0", store / "X/data/c/1")  # values 1000..1999
    ds = open_dataset(store)
    with pytest.raises(StoreError, match=r"block 1 \(rows 200\.\.399\): chunk y/c/1 is not the data written there"):
        ds.read_rows(350, 352)
    shutil.copyfile(pristine / "csr.zarr/y/c/1", store / "y/c/1")
    assert ds.read_rows(350, 352).y.tolist() == _data()[1][350:352].tolist()  # values in chunk 2 and beyond
    ip = open_dataset(pristine / "csr.zarr")._indptr[:]
    row = int(np.searchsorted(ip, 1500, side="right")) - 1  # a row whose values are in chunk 1
    assert 1000 <= ip[row] < ip[row + 1] <= 2000
    with pytest.raises(StoreError, match=r"chunk X/data/c/1 is not the data written there"):
        ds.read_rows(row, row + 1)


def test_large_chunks_are_digested_in_pieces(tmp_path, monkeypatch):
    """Chunks over DIGEST_ROWS rows (CSR values: 2**20 a chunk) are digested in pieces, so that a block's
    read takes the pieces around its values, not whole chunks; a moved chunk is still named."""
    assert store_mod.digest_rows(1 << 20) == 1 << 16 and store_mod.digest_rows(1000) == 1000
    assert store_mod.digest_rows(3 << 16) == 1 << 16 and store_mod.digest_rows(1_000_003) == 1_000_003  # a prime
    monkeypatch.setattr(store_mod, "DIGEST_ROWS", 128)
    assert store_mod.digest_rows(NNZ_CHUNK) == 125
    X, y = _data()
    path = create_dataset(tmp_path / "s.zarr", X, y, block_rows=BLOCK, nnz_chunk=NNZ_CHUNK).path
    d = zarr.open_array(str(path / "digests/X.data"), mode="r")
    assert d.attrs["rows"] == 125 and d.shape == (-(-X.nnz // 125),)
    ds = open_dataset(path, validate="full")
    Xr, yr = ds.to_scipy()
    assert (Xr != X).nnz == 0 and np.array_equal(yr, y)
    for lo in (0, 7, 199, 250, 598):
        assert (ds.read_rows(lo, lo + 2).X != X[lo:lo + 2]).nnz == 0
    shutil.copyfile(path / "X/data/c/1", path / "X/data/c/3")
    assert "chunk X/data/c/3 is not the data written there" in _full_refusal(path)


def test_a_chunk_from_another_store_of_another_length_is_refused(pristine, tmp_path):
    store = _copy(pristine, tmp_path / "s.zarr")
    X, y = _data(seed=1)
    y = -y  # other labels
    other = create_dataset(tmp_path / "o.zarr", X[:500], y[:500], block_rows=BLOCK, nnz_chunk=NNZ_CHUNK).path
    shutil.copyfile(other / "y/c/0", store / "y/c/0")  # same position, same array, another store
    assert "block 0 (rows 0..199): chunk y/c/0 is not the data written there" in _full_refusal(store)


def test_values_rewritten_through_zarr_say_what_is_wrong_and_which_chunk(pristine, tmp_path):
    """An edit through zarr (valid checksums) that the block check also sees: both are said."""
    store = _copy(pristine, tmp_path / "s.zarr")
    a = zarr.open_array(str(store / "y"), mode="r+")
    a[450] = np.nan
    msg = _full_refusal(store)
    assert msg == (f"{store}: block 2 (rows 400..599): label nan of row 450 is not finite; chunk y/c/2 is not the data "
                   "written there (its digest differs: a chunk file moved, copied or rewritten)")


# ---------------------------------------------------------------- the digests themselves attacked


def _edit_json(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_digests_deleted_truncated_or_damaged_are_refused_at_open(pristine, tmp_path, capsys):
    cases = {}
    s = _copy(pristine, tmp_path / "gone.zarr")
    shutil.rmtree(s / "digests")
    cases[s] = "the store was written with a digest of every chunk, but digests/ is missing (damaged or edited)"
    s = _copy(pristine, tmp_path / "one.zarr")
    shutil.rmtree(s / "digests" / "X.data")
    cases[s] = "digests/X.data, the digests of X/data's chunks, is missing (damaged or edited)"
    s = _copy(pristine, tmp_path / "short.zarr")
    _edit_json(s / "digests/y/zarr.json", lambda d: d.__setitem__("shape", [2]))
    cases[s] = ("digests/y does not hold one digest per piece of y (3 pieces of 200 rows; it has shape (2,), rows 200): "
                "damaged or edited")
    s = _copy(pristine, tmp_path / "rows.zarr")
    _edit_json(s / "digests/X.data/zarr.json", lambda d: d["attributes"].__setitem__("rows", 500))
    cases[s] = ("digests/X.data does not hold one digest per piece of X/data (5 pieces of 1000 rows; it has shape (5,), "
                "rows 500): damaged or edited")
    s = _copy(pristine, tmp_path / "nochunk.zarr")
    os.remove(s / "digests/X.indptr/c/0")
    cases[s] = "chunk digests/X.indptr/c/0 is missing (the digests of X/indptr's chunks)"
    s = _copy(pristine, tmp_path / "nocrc.zarr")
    _edit_json(s / "digests/y/zarr.json", lambda d: d.__setitem__("codecs", [c for c in d["codecs"] if c["name"] != "crc32c"]))
    cases[s] = "digests/y has no crc32c codec (damaged or edited metadata)"
    s = _copy(pristine, tmp_path / "flag.zarr")
    _edit_json(s / "zarr.json", lambda d: d["attributes"]["distlearn"]["integrity"].pop("digests"))
    cases[s] = ("the store's integrity record says nothing of chunk digests, but the store has them (digests/): "
                "damaged or edited metadata")
    for store, want in cases.items():
        with pytest.raises(StoreError) as e:
            open_dataset(store, validate=False)
        assert str(e.value) == f"{store}: {want}"
        assert _one_line(capsys, "info", store) == f"{store}: {want}"
    s = _copy(pristine, tmp_path / "flip.zarr")
    raw = bytearray((s / "digests/X.data/c/0").read_bytes())
    raw[0] ^= 0x01
    (s / "digests/X.data/c/0").write_bytes(bytes(raw))
    assert _one_line(capsys, "info", s).startswith(f"{s}: cannot be opened: ")


def test_digests_rewritten_through_zarr_refuse_every_block(pristine, tmp_path):
    store = _copy(pristine, tmp_path / "s.zarr")
    d = zarr.open_array(str(store / "digests/y"), mode="r+")
    d[:] = d[:] ^ np.uint32(1)
    ds = open_dataset(store)
    for b in range(ds.n_blocks):
        with pytest.raises(StoreError, match=rf"block {b} \(rows \d+\.\.\d+\): chunk y/c/{b} is not the data written"):
            ds.read_block(b)


def test_block_index_from_another_store_is_refused_at_open(pristine, tmp_path):
    store = _copy(pristine, tmp_path / "s.zarr")
    X, y = _data(seed=2)
    other = create_dataset(tmp_path / "o.zarr", X, y, block_rows=BLOCK, nnz_chunk=NNZ_CHUNK).path
    shutil.copyfile(other / "block_index/c/0/0", store / "block_index/c/0/0")
    with pytest.raises(StoreError, match=r"s\.zarr: chunk block_index/c/0/0 is not the data written there"):
        open_dataset(store, validate=False)


def test_a_store_from_before_digests_reads_as_before(pristine, tmp_path):
    """The record and the group both gone: what a store written between checksums and digests is (it
    cannot be told apart, as ARCHITECTURE.md says); it reads, and a missing chunk is still refused."""
    store = _copy(pristine, tmp_path / "s.zarr")
    shutil.rmtree(store / "digests")
    _edit_json(store / "zarr.json", lambda d: d["attributes"]["distlearn"]["integrity"].pop("digests"))
    ds = open_dataset(store, validate="full")
    assert ds._digests is None and ds.read_block(1).X.shape == (BLOCK, D)
    os.remove(store / "X/indices/c/1")
    with pytest.raises(StoreError, match=r"block 0 \(rows 0\.\.199\): chunk X/indices/c/1 is missing$"):
        ds.read_block(0)


# ---------------------------------------------------------------- 2. a chunk deleted after open


@pytest.mark.parametrize("layout, chunk, block", [
    ("csr", "y/c/1", 1),
    ("csr", "X/data/c/4", 2),
    ("csr", "X/indices/c/0", 0),
    ("csr", "X/indptr/c/2", 2),
    ("dense", "X/c/2/0", 2),
    ("dense", "y/c/0", 0),
])
def test_a_chunk_deleted_after_open_is_missing_not_nan(pristine, tmp_path, layout, chunk, block):
    store = _copy(pristine, tmp_path / "s.zarr", layout)
    ds = open_dataset(store, validate="full")
    os.remove(store / chunk)
    with pytest.raises(StoreError) as e:
        ds.read_block(block)
    assert str(e.value).startswith(f"{store}: block {block} (rows ") and str(e.value).endswith(f": chunk {chunk} is missing")


def test_a_chunk_deleted_between_the_check_and_the_read_is_missing(pristine, tmp_path):
    """A store without digests (written between checksums and digests) looks for every chunk before the
    read; a chunk deleted right after that look reads as the fill value (NaN), and is said missing."""
    store = _copy(pristine, tmp_path / "s.zarr")
    shutil.rmtree(store / "digests")
    _edit_json(store / "zarr.json", lambda d: d["attributes"]["distlearn"]["integrity"].pop("digests"))
    ds = open_dataset(store)
    looked = ds._missing_chunk
    calls = []

    def look_then_delete(a, lo, hi):
        key = looked(a, lo, hi)
        if a.path == "X/data" and not calls:
            calls.append(key)
            os.remove(store / "X/data/c/1")  # gone after it was found there
        return key

    ds._missing_chunk = look_then_delete
    with pytest.raises(StoreError, match=r"block 0 \(rows 0\.\.199\): chunk X/data/c/1 is missing$"):
        ds.read_block(0)
    assert calls == [None]  # it was there when looked for


def test_a_chunk_deleted_while_a_view_is_open_is_missing(pristine, tmp_path):
    store = _copy(pristine, tmp_path / "s.zarr")
    ds = open_dataset(store, target="1-vs--1")
    os.remove(store / "X/data/c/0")
    with pytest.raises(StoreError, match=r"chunk X/data/c/0 is missing$"):
        ds.read_block(0)


# ---------------------------------------------------------------- writers: every path records digests


def test_parts_written_elsewhere_record_the_digests_append_records(tmp_path):
    from distlearn.data.store import DatasetWriter, write_part_chunks

    X, y = _data()
    X = X[:200]
    y = y[:200].astype(float)
    kw = dict(n_features=D, block_rows=64, nnz_chunk=37)
    with DatasetWriter(tmp_path / "a.zarr", **kw) as w:
        w.append(X, y)
    w = DatasetWriter(tmp_path / "b.zarr", **kw)
    target = w.begin_parts(200, X.nnz)
    for a, b in ((0, 3), (3, 120), (120, 200)):
        z0, z1 = X.indptr[a], X.indptr[b]
        head, tail, crcs = write_part_chunks(target, int(z0), X.data[z0:z1], X.indices[z0:z1].astype(np.int32))
        w.append_part(X.indptr[a:b + 1] - z0, y[a:b], head, tail, D - 1, crcs)
    w.close()
    for name in ("X.data", "X.indices", "X.indptr", "y", "block_index"):
        da = zarr.open_array(str(tmp_path / "a.zarr/digests" / name), mode="r")[:]
        assert np.array_equal(da, zarr.open_array(str(tmp_path / "b.zarr/digests" / name), mode="r")[:]), name
    shutil.copyfile(tmp_path / "b.zarr/X/data/c/3", tmp_path / "b.zarr/X/data/c/4")
    assert "chunk X/data/c/4 is not the data written there" in _full_refusal(tmp_path / "b.zarr")


def test_a_part_whose_digests_were_not_handed_over_is_a_writer_error(tmp_path):
    from distlearn.data.store import DatasetWriter, write_part_chunks

    X, y = _data()
    w = DatasetWriter(tmp_path / "b.zarr", n_features=D, block_rows=64, nnz_chunk=37)
    target = w.begin_parts(X.shape[0], X.nnz)
    head, tail, _crcs = write_part_chunks(target, 0, X.data, X.indices.astype(np.int32))
    w.append_part(X.indptr, y, head, tail, D - 1)  # the chunks the part wrote: no digests given
    with pytest.raises(RuntimeError, match=r"X/data: digests recorded for pieces \[0, 1, 2, 3, 4\] missing"):
        w.close()
    assert not (tmp_path / "b.zarr").exists() and os.listdir(tmp_path) == []


def test_class_names_recoded_at_close_get_the_digests_of_the_new_codes(tmp_path):
    X = np.arange(60, dtype=np.float32).reshape(30, 2)
    y = np.array(["c", "b", "a"] * 10)  # met as c, b, a: recoded a, b, c at close
    ds = create_dataset(tmp_path / "n.zarr", X, y, block_rows=8)
    ds = open_dataset(ds.path, validate="full")
    assert ds.to_numpy()[1].tolist() == y.tolist()
    shutil.copyfile(tmp_path / "n.zarr/y/c/1", tmp_path / "n.zarr/y/c/3")  # rows 8.. over rows 24..: other codes
    assert "chunk y/c/3 is not the data written there" in _full_refusal(tmp_path / "n.zarr")


# ---------------------------------------------------------------- 3. predict on a table of features alone


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A model trained on a labelled CSV (4 features), and the same rows as tables of the features alone."""
    d = tmp_path_factory.mktemp("table")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).round(3)
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    head = "a,b,c,d"
    np.savetxt(d / "train.csv", np.column_stack([X, y]), delimiter=",", header=head + ",label", comments="", fmt="%g")
    np.savetxt(d / "named.csv", X, delimiter=",", header=head, comments="", fmt="%g")
    np.savetxt(d / "bare.csv", X, delimiter=",", fmt="%g")  # no header
    np.savetxt(d / "wide.csv", np.column_stack([X, X[:, :1]]), delimiter=",", header=head + ",e", comments="", fmt="%g")
    # a feature column called "label": only --label-column none reads it as one
    np.savetxt(d / "odd.csv", X, delimiter=",", header="label,b,c,d", comments="", fmt="%g")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({n: X[:, j] for j, n in enumerate("abcd")}), d / "named.parquet")
    assert main(["train", str(d / "train.csv"), "--model", "perceptron", "--save", str(d / "m.npz")]) == 0
    assert main(["predict", str(d / "m.npz"), str(d / "train.csv"), "--out", str(d / "want.npy")]) == 0
    return d


@pytest.mark.parametrize("name, extra", [("named.csv", []), ("named.csv", ["--label-column", "none"]),
                                         ("bare.csv", []), ("bare.csv", ["--label-column", "NONE"]),
                                         ("named.parquet", []), ("named.parquet", ["--label-column", "none"]),
                                         ("odd.csv", ["--label-column", "none"])])
def test_predict_reads_a_table_of_features_alone(table, tmp_path, capsys, name, extra):
    out = tmp_path / "p.npy"
    assert main(["predict", str(table / "m.npz"), str(table / name), "--out", str(out), *extra]) == 0, \
        capsys.readouterr().err
    assert np.array_equal(np.load(out), np.load(table / "want.npy"))


def test_predict_api_reads_a_table_of_features_alone(table):
    from distlearn.training import evaluate, predict

    got = predict(str(table / "m.npz"), str(table / "odd.csv"), read={"label_column": False})["values"]
    assert np.array_equal(got, np.load(table / "want.npy"))
    with pytest.raises(ValueError, match=r"^label_column=False \(--label-column none: a table without a label column\) "
                                         "is for predict; training and evaluating need the labels$"):
        from distlearn.model import load_model

        evaluate(load_model(str(table / "m.npz")), str(table / "named.csv"), read={"label_column": False})


@pytest.mark.parametrize("argv, want", [
    (["predict", "{m}", "{t}/wide.csv", "--label-column", "none"], "{t}/wide.csv: 5 features, but the model was trained on 4"),
    (["predict", "{m}", "{t}/odd.csv"], "{t}/odd.csv: 3 features, but the model was trained on 4"),  # label named
    (["evaluate", "{m}", "{t}/named.csv", "--label-column", "none"],
     "--label-column none (a table without a label column) is for predict; evaluate needs the labels: name the "
     "label column, or leave --label-column out (the column named label, target, class or y, else 0)"),
    (["train", "{t}/train.csv", "--label-column", "none", "--model", "perceptron"],
     "--label-column none (a table without a label column) is for predict; train needs the labels: name the "
     "label column, or leave --label-column out (the column named label, target, class or y, else 0)"),
    (["convert", "{t}/train.csv", "{t}/x.zarr", "--label-column", "none"],
     "--label-column none: a store holds labels; name the table's label column (or leave --label-column out: the "
     "column named label, target, class or y, else 0)"),
])
def test_a_table_without_labels_where_it_cannot_be_is_one_line(table, capsys, argv, want):
    argv = [w.format(m=table / "m.npz", t=table) for w in argv]
    assert _one_line(capsys, *argv) == want.format(t=table)
    assert not (table / "x.zarr").exists()


def test_a_column_of_words_is_no_feature(table, tmp_path, capsys):
    f = tmp_path / "w.csv"
    f.write_text("a,b,c,d\n" + "".join(f"x{i},1,2,3\n" for i in range(5)))
    line = _one_line(capsys, "predict", table / "m.npz", f, "--label-column", "none")
    assert line == (f"{f}:2: value 'x0' in column 1 is not a number (--label-column none, "
                    "label_column=False: every column is a feature)")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [f"x{i}" for i in range(5)], "b": [1.0] * 5, "c": [2.0] * 5, "d": [3.0] * 5}),
                   tmp_path / "w.parquet")
    assert _one_line(capsys, "predict", table / "m.npz", tmp_path / "w.parquet", "--label-column", "none") == \
        (f"{tmp_path / 'w.parquet'}: value 'x0' in column 1 is not a number (--label-column none, "
         "label_column=False: every column is a feature)")


# ---------------------------------------------------------------- 4. the CLI names its flags


@pytest.mark.parametrize("argv, want", [
    (["convert", "{t}/train.csv", "{t}/x.zarr", "--zero-based"], "{t}/train.csv: --zero-based does not apply to csv input"),
    (["train", "{t}/train.csv", "--zero-based", "--model", "perceptron"],
     "{t}/train.csv: --zero-based does not apply to csv input"),
    (["predict", "{m}", "{t}/named.csv", "--zero-based"], "{t}/named.csv: --zero-based does not apply to csv input"),
    (["evaluate", "{m}", "{t}/train.csv", "--zero-based"], "{t}/train.csv: --zero-based does not apply to csv input"),
    (["predict", "{m}", "{t}/named.parquet", "--zero-based"],
     "{t}/named.parquet: --zero-based does not apply to parquet input"),
    (["convert", "{t}/s.svm", "{t}/x.zarr", "--header", "yes"], "{t}/s.svm: --header does not apply to svmlight input"),
    (["predict", "{m}", "{t}/s.svm", "--label-column", "none"], "{t}/s.svm: --label-column does not apply to svmlight input"),
    (["convert", "{t}/s.svm", "{t}/x.zarr", "--delimiter", ";"], "{t}/s.svm: --delimiter does not apply to svmlight input"),
])
def test_reader_flags_that_do_not_apply_are_named_as_flags(table, capsys, argv, want):
    (table / "s.svm").write_text("1 1:0.5 2:0.25\n0 3:1\n")
    argv = [w.format(m=table / "m.npz", t=table) for w in argv]
    line = _one_line(capsys, *argv)
    assert line == want.format(t=table)
    assert "zero_based" not in line and "label_column" not in line and "option(s)" not in line


def test_the_api_names_its_parameters(table):
    from distlearn.data.readers import convert

    with pytest.raises(ValueError, match=r"^option\(s\) \['zero_based'\] do not apply to csv input"):
        convert(table / "train.csv", table / "y.zarr", zero_based=True)
    assert not (table / "y.zarr").exists()


def test_a_store_at_a_url_is_checked_alike():
    """The fsspec path (memory://, as s3:// goes through the same FsspecStore): digests written, a chunk
    object copied over another refused, one deleted after open said missing."""
    import uuid

    import fsspec

    X, y = _data()
    root = f"/t{uuid.uuid4().hex[:8]}"
    url = f"memory:/{root}/a.zarr"
    fs = fsspec.filesystem("memory")
    try:
        create_dataset(url, X, y, block_rows=BLOCK, nnz_chunk=NNZ_CHUNK)
        assert f"{root}/a.zarr/digests/X.data" in fs.ls(f"{root}/a.zarr/digests", detail=False)
        ds = open_dataset(url, validate="full")
        fs.rm_file(f"{root}/a.zarr/y/c/1")
        with pytest.raises(StoreError, match=rf"^{url}: block 1 \(rows 200\.\.399\): chunk y/c/1 is missing$"):
            ds.read_block(1)
        fs.pipe_file(f"{root}/a.zarr/y/c/1", fs.cat_file(f"{root}/a.zarr/y/c/0"))
        with pytest.raises(StoreError, match=rf"^{url}: block 1 \(rows 200\.\.399\): chunk y/c/1 is not the data written"):
            ds.read_block(1)
    finally:
        fs.rm(root, recursive=True)


@pytest.mark.parametrize("rows, want", [
    ("x,0.2,0.1,0.3\n0.1,0.9,0.2,0.2\n", "{p}:2: value 'x' in column 1 is not a number"),  # a word first: no "names"
    ("0.3,0.2,0.1,0.3\nzz,0.9,0.2,0.2\n", "{p}:3: value 'zz' in column 1 is not a number"),
    ("0.3,0.2,0.1,0.3\n,0.9,0.2,0.2\n", "{p}:3: empty field in column 1"),
    ("0.3,0.2,0.1,0.3\ninf,0.9,0.2,0.2\n", "{p}:3: value 'inf' in column 1 is not finite"),
])
def test_a_bad_first_column_read_as_a_feature_is_called_a_feature(table, tmp_path, capsys, rows, want):
    """With --label-column none, column 1 is a feature: its bad values are said to be values in column 1 of
    their line, never "labels" (the readers take column 0 as their label, read back as the first feature)."""
    path = tmp_path / "bad.csv"
    path.write_text("a,b,c,d\n" + rows)
    why = " (--label-column none, label_column=False: every column is a feature)"
    assert _one_line(capsys, "predict", str(table / "m.npz"), str(path), "--label-column", "none") == \
        want.format(p=path) + why
