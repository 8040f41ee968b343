from __future__ import annotations

import multiprocessing as mp
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlearn.data import DatasetWriter, StoreError, create_dataset, open_dataset, write_dataset


def _random_csr(n, d, density, seed, dtype=np.float32):
    X = sp.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = np.round(X.data * 100 - 50, 3)
    return X.astype(dtype)


def test_csr_round_trip_and_blocks(tmp_path):
    X = _random_csr(1000, 60, 0.1, 0)
    y = np.arange(1000) % 4
    ds = create_dataset(tmp_path / "a.zarr", X, y, block_rows=128, nnz_chunk=777)
    assert (ds.n_samples, ds.n_features, ds.n_blocks) == (1000, 60, 8)
    assert ds.layout == "csr" and ds.nnz == X.nnz and ds.dtype == np.float32
    assert ds.classes.tolist() == [0, 1, 2, 3] and ds.class_counts.tolist() == [250] * 4
    X2, y2 = ds.to_scipy()
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y) and y2.dtype == np.int64
    # every block on its own, and the blocks stitched together
    parts = list(ds.iter_blocks())
    assert [b.first_row for b in parts] == list(range(0, 1000, 128))
    assert (sp.vstack([b.X for b in parts]) != X).nnz == 0
    b5 = ds.read_block(5)
    assert (b5.X != X[640:768]).nnz == 0 and np.array_equal(b5.y, y[640:768])
    assert b5.X.has_sorted_indices
    # a given order
    order = [7, 0, 3]
    assert [b.first_row for b in ds.iter_blocks(order)] == [896, 0, 384]
    # anndata encoding
    g = zarr.open_group(str(ds.path), mode="r")
    assert g["X"].attrs["encoding-type"] == "csr_matrix"
    assert list(g["X"].attrs["shape"]) == [1000, 60]
    assert g["X/indptr"].dtype == np.int64


def test_dense_and_csr_read_back_equal(tmp_path):
    X = _random_csr(500, 30, 0.3, 1)
    y = np.where(np.arange(500) % 3 == 0, 1, -1)
    a = create_dataset(tmp_path / "csr.zarr", X, y, block_rows=100)
    b = create_dataset(tmp_path / "dense.zarr", X.toarray(), y, block_rows=64)
    assert b.layout == "dense" and a.layout == "csr"
    assert np.array_equal(a.to_numpy()[0], b.to_numpy()[0])
    assert (a.to_scipy()[0] != b.to_scipy()[0]).nnz == 0
    assert a.nnz == b.nnz == X.nnz
    for r0, r1 in [(0, 1), (99, 101), (250, 500), (7, 7)]:
        assert np.array_equal(a.read_rows(r0, r1).X.toarray(), b.read_rows(r0, r1).X)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 300),
    d=st.integers(1, 40),
    density=st.floats(0.0, 1.0),
    block_rows=st.integers(1, 120),
    nnz_chunk=st.integers(1, 500),
    piece=st.integers(1, 90),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_round_trip_property(tmp_path_factory, n, d, density, block_rows, nnz_chunk, piece, seed, dtype):
    """Any sparse matrix, appended in any piece size, reads back exactly, whole and by blocks."""
    X = _random_csr(n, d, density, seed, dtype=dtype)
    y = np.random.default_rng(seed).integers(-3, 3, n)
    path = tmp_path_factory.mktemp("p") / "s.zarr"
    ds = write_dataset(
        path,
        ((X[i : i + piece], y[i : i + piece]) for i in range(0, n, piece)),
        layout="csr", n_features=d, dtype=dtype, block_rows=block_rows, nnz_chunk=nnz_chunk,
    )
    ds = open_dataset(path, validate="full")
    X2, y2 = ds.to_scipy()
    assert X2.dtype == np.dtype(dtype)
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    assert ds.n_blocks == -(-n // block_rows)
    got = sp.vstack([b.X for b in ds.iter_blocks()])
    assert (got != X).nnz == 0


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "x.zarr"
    with pytest.raises(RuntimeError, match="boom"):
        with DatasetWriter(target, layout="dense", n_features=3, block_rows=2) as w:
            w.append(np.ones((5, 3)), np.ones(5))
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_failed_overwrite_keeps_old_store(tmp_path):
    target = tmp_path / "x.zarr"
    create_dataset(target, np.ones((4, 2)), [1, 2, 3, 4])
    with pytest.raises(FileExistsError, match="overwrite"):
        DatasetWriter(target, layout="dense", n_features=2)
    with pytest.raises(ValueError, match="not finite"):
        with DatasetWriter(target, layout="dense", n_features=2, overwrite=True) as w:
            w.append(np.array([[1.0, np.nan]]), [1])
    assert sorted(os.listdir(tmp_path)) == ["x.zarr"]
    assert open_dataset(target).n_samples == 4
    ds = create_dataset(target, np.zeros((2, 2)), [0, 0], overwrite=True)
    assert ds.n_samples == 2 and sorted(os.listdir(tmp_path)) == ["x.zarr"]


def test_empty_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no rows"):
        write_dataset(tmp_path / "e.zarr", [], layout="csr")
    assert os.listdir(tmp_path) == []


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(ValueError, match="row 1: label nan"):
        create_dataset(tmp_path / "a.zarr", np.ones((2, 2)), [1, np.nan])
    with pytest.raises(ValueError, match=r"row 2: value inf"):
        create_dataset(tmp_path / "b.zarr", sp.csr_matrix(np.array([[1.0], [0], [np.inf]])), [1, 1, 1])
    with pytest.raises(ValueError, match="beyond n_features=2"):
        create_dataset(tmp_path / "c.zarr", sp.csr_matrix(np.ones((2, 3))), [1, 1], n_features=2)
    dup = sp.csr_matrix((np.ones(2), np.array([1, 1]), np.array([0, 0, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match="row 1: duplicate feature index 1"):
        create_dataset(tmp_path / "d.zarr", dup, [1, 1])
    assert os.listdir(tmp_path) == []


def test_unsorted_csr_input_is_sorted(tmp_path):
    X = sp.csr_matrix((np.array([3.0, 1.0, 2.0]), np.array([2, 0, 1]), np.array([0, 3])), shape=(1, 3))
    ds = create_dataset(tmp_path / "u.zarr", X, [1])
    Xb = ds.read_block(0).X
    assert Xb.indices.tolist() == [0, 1, 2] and Xb.data.tolist() == [1.0, 2.0, 3.0]


def test_open_rejects_what_is_not_a_whole_store(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_dataset(tmp_path / "nope.zarr")
    zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    with pytest.raises(StoreError, match="not a distlearn store"):
        open_dataset(tmp_path / "plain.zarr")
    ds = create_dataset(tmp_path / "s.zarr", np.ones((3, 2)), [0, 1, 0])
    g = zarr.open_group(str(ds.path), mode="r+")
    meta = dict(g.attrs["distlearn"])
    g.attrs["distlearn"] = {**meta, "complete": False}
    with pytest.raises(StoreError, match="incomplete"):
        open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "format_version": 99}
    with pytest.raises(StoreError, match="format version 99"):
        open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "n_samples": 4}
    with pytest.raises(StoreError, match="class_counts disagree"):
        open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "n_samples": 4, "class_counts": [2, 2]}
    with pytest.raises(StoreError, match="shape"):
        open_dataset(ds.path)
    for key, value in (("dtype", "fmoat32"), ("block_rows", None), ("label_kind", "integes"),
                       ("classes", [1, 0]), ("n_features", -2)):
        g.attrs["distlearn"] = {**meta, key: value} if value is not None else \
            {k: v for k, v in meta.items() if k != key}
        with pytest.raises(StoreError, match=f"metadata.*{key}"):
            open_dataset(ds.path)
    g.attrs["distlearn"] = {**meta, "classes": [0, 3], "class_counts": [2, 1]}
    open_dataset(ds.path)  # cheap open: the metadata is well formed
    with pytest.raises(StoreError, match=r"labels \[1\] are not among the metadata's classes"):
        open_dataset(ds.path, validate="full")


def test_kill_during_write_leaves_only_a_hidden_partial(tmp_path):
    """A writer that dies without cleanup leaves a hidden directory that open_dataset refuses."""
    w = DatasetWriter(tmp_path / "k.zarr", layout="csr", block_rows=2)
    w.append(sp.csr_matrix(np.eye(3)), [1, 2, 3])
    (partial,) = os.listdir(tmp_path)  # no close(), no abort(): as if killed
    assert partial.startswith(".k.zarr.partial-")
    assert not (tmp_path / "k.zarr").exists()
    with pytest.raises(StoreError):
        open_dataset(tmp_path / partial)


def test_full_validation_finds_corruption(tmp_path):
    X = _random_csr(200, 20, 0.2, 3)
    ds = create_dataset(tmp_path / "c.zarr", X, np.ones(200), block_rows=50, nnz_chunk=100)
    open_dataset(ds.path, validate="full")
    g = zarr.open_group(str(ds.path), mode="r+")
    idx = g["X/indices"][:]
    idx[-1] = 25  # beyond n_features = 20 (in the last chunk, which only block 3 reads)
    g["X/indices"][:] = idx
    open_dataset(ds.path)  # metadata still fine
    # what the block check finds, and the chunk whose digest (what was written there) it no longer matches
    with pytest.raises(StoreError, match=r"block 3 \(rows 150\.\.199\): feature index 25 of row 199 is outside \[0, 20\); "
                                         r"chunk X/indices/c/7 is not the data written there"):
        open_dataset(ds.path, validate="full")


def test_pickles_as_its_path(tmp_path):
    ds = create_dataset(tmp_path / "p.zarr", np.ones((3, 2)), [0, 1, 0])
    blob = pickle.dumps(ds)
    assert len(blob) < 500  # no arrays inside
    again = pickle.loads(blob)
    assert again.path == ds.path and np.array_equal(again.to_numpy()[0], ds.to_numpy()[0])


def _block_sum(args):
    path, i = args
    ds = open_dataset(path)
    X, y, first = ds.read_block(i)
    return first, float(X.sum()), float(y.sum())


def test_many_processes_read_one_store(tmp_path):
    X = _random_csr(2000, 50, 0.05, 4)
    y = np.arange(2000)
    ds = create_dataset(tmp_path / "m.zarr", X, y, block_rows=250)
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = pool.map(_block_sum, [(str(ds.path), i) for i in range(ds.n_blocks)])
    for first, xs, ys in got:
        assert xs == pytest.approx(float(X[first : first + 250].sum()))
        assert ys == float(y[first : first + 250].sum())


def test_the_partial_of_a_killed_convert_is_removed_by_the_next(tmp_path):
    """A convert killed mid-write leaves .NAME.partial-HOST-PID-*; the next write to the same target
    removes it once that process is gone, and leaves a live writer's alone."""
    import subprocess
    import sys

    from distlearn.cli import main

    src = tmp_path / "d.svm"
    src.write_text("".join(f"{i % 2} 1:{i} 3:0.5\n" for i in range(50)))
    code = ("import os, sys; from distlearn.data.readers import convert; import distlearn.data.store as s\n"
            "orig = s.DatasetWriter.close\n"
            "s.DatasetWriter.close = lambda self: os._exit(9)  # killed before the rename\n"
            f"convert({str(src)!r}, {str(tmp_path / 'd.zarr')!r})\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    (stale,) = [p.name for p in tmp_path.iterdir() if ".partial-" in p.name]
    assert stale.startswith(".d.zarr.partial-") and not (tmp_path / "d.zarr").exists()
    live = DatasetWriter(tmp_path / "d.zarr", layout="csr", block_rows=8)  # this process: alive
    assert stale not in os.listdir(tmp_path), "the dead writer's partial was kept"
    other = DatasetWriter(tmp_path / "d.zarr", layout="csr", block_rows=8)  # a second write to the target
    assert live._tmp.is_dir() and other._tmp.is_dir(), "a live writer's partial was removed"
    live.abort()
    other.abort()
    assert main(["convert", str(src), str(tmp_path / "d.zarr")]) == 0
    assert sorted(os.listdir(tmp_path)) == ["d.svm", "d.zarr"]


def _store_files(path):
    """Every file of a store and its bytes; the root zarr.json without its ``created`` time."""
    import json

    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            data = open(p, "rb").read()
            if os.path.relpath(p, path) == "zarr.json":
                meta = json.loads(data)
                meta["attributes"]["distlearn"].pop("created")
                data = json.dumps(meta, sort_keys=True).encode()
            out[os.path.relpath(p, path)] = data
    return out


@pytest.mark.parametrize("cuts, nnz_chunk, block_rows", [([0, 7, 8, 30, 61, 200], 50, 16),
                                                         ([0, 100, 200], 1000, 64),
                                                         ([0, 1, 2, 3, 150, 199, 200], 37, 10)])
def test_parts_written_elsewhere_give_the_appended_store_byte_for_byte(tmp_path, cuts, nnz_chunk, block_rows):
    """begin_parts + write_part_chunks (each part written twice: a retried task) + append_part write the
    files DatasetWriter.append writes: the same arrays, chunks and metadata."""
    from distlearn.data.store import write_part_chunks

    rng = np.random.default_rng(5)
    X = sp.random(200, 40, density=0.15, format="csr", random_state=rng, dtype=np.float64)
    X.data = np.log2(1.0 + np.round(X.data * 5 + 1))
    y = rng.integers(0, 4, 200).astype(float)
    kw = dict(n_features=40, block_rows=block_rows, nnz_chunk=nnz_chunk, params={"p": 1})
    with DatasetWriter(tmp_path / "a.zarr", **kw) as w:
        for a, b in zip(cuts[:-1], cuts[1:]):
            w.append(X[a:b], y[a:b])
    w = DatasetWriter(tmp_path / "b.zarr", **kw)
    target = w.begin_parts(200, X.nnz)
    written = 0
    for a, b in zip(cuts[:-1], cuts[1:]):
        z0, z1 = X.indptr[a], X.indptr[b]
        data, idx = X.data[z0:z1].astype(np.float32), X.indices[z0:z1].astype(np.int32)
        edges = write_part_chunks(target, int(z0), data, idx)
        assert write_part_chunks(target, int(z0), data, idx) is not None  # again: the same bytes
        head, tail, crcs = edges
        assert len(head[0]) + len(tail[0]) <= z1 - z0 and len(head[0]) < nnz_chunk and len(tail[0]) < nnz_chunk
        written += (z1 - z0) - len(head[0]) - len(tail[0])
        w.append_part(X.indptr[a:b + 1] - z0, y[a:b], head, tail, int(idx.max()) if len(idx) else -1, crcs)
    w.close()
    if nnz_chunk < X.nnz:
        assert written > 0  # some chunks were written by the "workers"
    assert _store_files(tmp_path / "a.zarr") == _store_files(tmp_path / "b.zarr")
    Xb, yb = open_dataset(tmp_path / "b.zarr", validate="full").to_scipy()
    assert (Xb != X.astype(np.float32)).nnz == 0 and np.array_equal(yb, y)


def test_parts_after_an_abort_leave_nothing(tmp_path):
    from distlearn.data.store import write_part_chunks

    w = DatasetWriter(tmp_path / "s.zarr", n_features=10, nnz_chunk=4)
    target = w.begin_parts(3, 20)
    w.abort()
    assert write_part_chunks(target, 0, np.ones(20, np.float32), np.zeros(20, np.int32)) is None
    assert os.listdir(tmp_path) == []
    t = DatasetWriter(tmp_path / "t.zarr")
    with pytest.raises(ValueError, match="local CSR store with n_features"):
        t.begin_parts(3, 20)
    t.abort()
    w = DatasetWriter(tmp_path / "u.zarr", n_features=10, nnz_chunk=4)
    w.begin_parts(3, 20)
    with pytest.raises(ValueError, match="do not fit the layout"):
        w.append_part(np.array([0, 30]), [1.0], (np.zeros(0), np.zeros(0)), (np.zeros(0), np.zeros(0)), 2)
    w.abort()
    assert os.listdir(tmp_path) == []
