"""The store never hands a kernel a block it cannot use, and missing data is never read as zeros.

Real stores on disk, damaged the way a disk, a user or an attacker would: indices written through
zarr out of range, chunk files deleted, a byte flipped, the store replaced while it is read.  Every
outcome is one line (``STORE: block B (rows a..b): what``; exit 2 from the CLI), never a crash,
never a model trained on made-up data.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from distlearn import cli, stream
from distlearn.data import StoreError, create_dataset, open_dataset
from distlearn.data import store as store_mod
from distlearn.estimators import PassiveAggressive, Perceptron

N, D, BLOCK = 600, 40, 200


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.delenv(stream.BLOCK_CACHE_ENV, raising=False)
    stream.clear_block_cache()
    yield
    stream.clear_block_cache()


def _data(seed=0):
    X = sp.random(N, D, density=0.2, format="csr", random_state=seed, dtype=np.float64).astype(np.float32)
    y = np.where(np.arange(N) % 3 == 0, 1, -1)
    return X, y


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A CSR store (3 blocks, 1024 values per chunk), a dense one, and a model trained on the CSR."""
    d = tmp_path_factory.mktemp("pristine")
    X, y = _data()
    create_dataset(d / "csr.zarr", X, y, block_rows=BLOCK, nnz_chunk=1024)
    create_dataset(d / "dense.zarr", X.toarray(), y, block_rows=BLOCK)
    assert cli.main(["train", str(d / "csr.zarr"), "--model", "perceptron", "--in-process", "--epochs", "1",
                     "--save", str(d / "m.npz")]) == 0
    return d


def _copy(pristine, tmp_path, name="csr.zarr"):
    dst = tmp_path / name
    shutil.copytree(pristine / name, dst)
    return dst


def _rewrite(path, array, change):
    """Write ``change(values)`` into ``path/array`` through zarr (so the chunk checksums are valid)."""
    a = zarr.open_array(str(path / array), mode="r+")
    v = a[:]
    change(v)
    a[:] = v


def _one_line_error(capsys, rc, *needles):
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def _set(pos, value):
    def change(v):
        v[pos] = value
    return change


def _swap_in_row(v):  # row 0's first two indices swapped: not sorted
    v[0], v[1] = v[1], v[0]


# ---------------------------------------------------------------- the damage, and what must be said

def _damage(path, kind):
    """Damage the store at ``path``; returns what the one-line error must contain."""
    if kind == "index-too-large":
        _rewrite(path, "X/indices", _set(-3, 10**6))
        return "feature index 1000000 of row 599 is outside [0, 40)"
    if kind == "index-negative":
        _rewrite(path, "X/indices", _set(2500, -5))
        return "is outside [0, 40)"
    if kind == "index-unsorted":
        _rewrite(path, "X/indices", _swap_in_row)
        return "are not strictly increasing"
    if kind == "indptr-inconsistent":
        _rewrite(path, "X/indptr", _set(BLOCK, 7))
        return "block_index says"
    if kind == "indptr-decreasing":
        _rewrite(path, "X/indptr", lambda v: v.__setitem__(50, v[49] - 1))
        return "X/indptr decreases at row 49"
    if kind == "value-nan":
        _rewrite(path, "X/data", _set(10, np.nan))
        return "value nan of row"
    if kind.startswith("delete "):
        chunk = kind.split(" ", 1)[1]
        os.remove(path / chunk)
        return f"chunk {chunk} is missing"
    if kind.startswith("flip "):
        chunk = path / kind.split(" ", 1)[1]
        raw = bytearray(chunk.read_bytes())
        raw[len(raw) // 2] ^= 0x10
        chunk.write_bytes(bytes(raw))
        return "cannot be read"
    raise AssertionError(kind)


CSR_DAMAGE = ["index-too-large", "index-negative", "index-unsorted", "indptr-inconsistent", "indptr-decreasing",
              "value-nan", "delete X/indptr/c/1", "delete X/indices/c/2", "delete X/data/c/0", "delete y/c/2",
              "flip X/indices/c/1", "flip X/data/c/0", "flip y/c/0"]
DENSE_DAMAGE = ["delete X/c/1/0", "delete y/c/0", "flip X/c/2/0"]


@pytest.mark.parametrize("kind", CSR_DAMAGE)
def test_train_refuses_a_damaged_csr_store_in_one_line(pristine, tmp_path, capsys, kind):
    path = _copy(pristine, tmp_path)
    what = _damage(path, kind)
    rc = cli.main(["train", str(path), "--model", "perceptron", "--in-process", "--epochs", "1"])
    assert _one_line_error(capsys, rc, "distlearn train: error: ", str(path), ": block ", what)
    # info --validate reads every block through the same check
    assert _one_line_error(capsys, cli.main(["info", "--validate", str(path)]), what)


@pytest.mark.parametrize("kind", DENSE_DAMAGE)
def test_missing_or_damaged_dense_chunks_are_errors_not_zeros(pristine, tmp_path, capsys, kind):
    path = _copy(pristine, tmp_path, "dense.zarr")
    what = _damage(path, kind)
    rc = cli.main(["train", str(path), "--model", "perceptron", "--in-process", "--epochs", "1"])
    assert _one_line_error(capsys, rc, str(path), ": block ", what)
    assert _one_line_error(capsys, cli.main(["info", "--validate", str(path)]), what)


@pytest.mark.parametrize("model", ["pa", "obpm", "kernel-mira"])
def test_other_learners_never_see_the_bad_index(pristine, tmp_path, capsys, model):
    path = _copy(pristine, tmp_path)
    _rewrite(path, "X/indices", _set(5, D + 3))
    rc = cli.main(["train", str(path), "--model", model, "--in-process", "--epochs", "1"])
    assert _one_line_error(capsys, rc, "block 0 (rows 0..199)", f"feature index {D + 3} of row 0 is outside [0, {D})")


@pytest.mark.parametrize("kind", ["index-too-large", "index-negative", "delete X/data/c/0", "flip X/indices/c/1"])
def test_predict_and_evaluate_refuse_a_damaged_store(pristine, tmp_path, capsys, kind):
    path = _copy(pristine, tmp_path)
    what = _damage(path, kind)
    model = str(pristine / "m.npz")
    assert _one_line_error(capsys, cli.main(["evaluate", model, str(path)]), "distlearn evaluate: error: ", what)
    out = tmp_path / "p.npy"
    assert _one_line_error(capsys, cli.main(["predict", model, str(path), "--out", str(out)]),
                    "distlearn predict: error: ", what)


def test_the_error_names_the_block_and_its_rows(pristine, tmp_path):
    path = _copy(pristine, tmp_path)
    _rewrite(path, "X/indices", _set(-1, -2))
    ds = open_dataset(path)
    ds.read_block(0), ds.read_block(1)  # the sound blocks still read
    with pytest.raises(StoreError, match=rf"^{path}: block 2 \(rows 400\.\.599\): feature index -2 of row 599 "):
        ds.read_block(2)
    with pytest.raises(StoreError, match="block 2 "):
        stream.read_block(ds, 2)  # the stream passes the store's own line on, not wrapped again


def test_a_missing_chunk_is_refused_before_it_is_decoded(pristine, tmp_path):
    path = _copy(pristine, tmp_path)
    os.remove(path / "X/indptr/c/2")
    ds = open_dataset(path)
    ds.read_block(0)  # indptr[0:201]: chunks 0 and 1
    with pytest.raises(StoreError, match=r"block 1 \(rows 200\.\.399\): chunk X/indptr/c/2 is missing$"):
        ds.read_block(1)  # indptr[200:401]: chunks 1 and 2


def test_new_stores_record_their_integrity(pristine):
    ds = open_dataset(pristine / "csr.zarr")
    assert ds.meta["integrity"] == {"crc32c": True, "fill": "invalid", "digests": True}
    for name, fill in [("X/data", "NaN"), ("X/indices", -1), ("X/indptr", -1), ("y", "NaN")]:
        meta = json.loads((pristine / "csr.zarr" / name / "zarr.json").read_text())
        assert meta["fill_value"] == fill, name
        assert meta["codecs"][-1]["name"] == "crc32c", name
    assert ds.codec == store_mod.DEFAULT_CODEC  # the checksum is not a compression
    assert store_mod.array_codec(ds._data) == store_mod.DEFAULT_CODEC
    # even read past the check, a missing chunk is never plausible data
    shutil.copytree(pristine / "csr.zarr", pristine / "gone.zarr")
    os.remove(pristine / "gone.zarr" / "X/indices/c/0")
    assert (zarr.open_array(str(pristine / "gone.zarr" / "X/indices"))[:1024] == -1).all()
    shutil.rmtree(pristine / "gone.zarr")


def _make_old(path):
    """Rewrite a store as distlearn wrote it before meta["integrity"]: no checksum, fill value 0."""
    from zarr.codecs import BloscCodec

    g = zarr.open_group(str(path), mode="r+")
    for name in ["y", "X/data", "X/indices", "X/indptr", "block_index"]:
        a = g[name]
        v, chunks = a[:], a.chunks
        parent = g if "/" not in name else g[name.split("/")[0]]
        parent.create_array(name.split("/")[-1], data=v, chunks=chunks, overwrite=True,
                            compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")])
    del g["digests"]
    meta = dict(g.attrs["distlearn"])
    del meta["integrity"]
    g.attrs["distlearn"] = meta


def test_old_stores_still_read_alike_and_a_deleted_chunk_is_still_refused(pristine, tmp_path):
    path = _copy(pristine, tmp_path)
    _make_old(path)
    new, old = open_dataset(pristine / "csr.zarr"), open_dataset(path, validate="full")
    assert "integrity" not in old.meta
    assert json.loads((path / "X/data/zarr.json").read_text())["fill_value"] == 0.0
    for b in range(new.n_blocks):
        a, o = new.read_block(b), old.read_block(b)
        assert (a.X != o.X).nnz == 0 and np.array_equal(a.y, o.y)
    os.remove(path / "X/data/c/0")
    with pytest.raises(StoreError, match=r"block 0 \(rows 0\.\.199\): chunk X/data/c/0 is missing; this store "
                                         "predates per-chunk checksums"):
        open_dataset(path).read_block(0)


def test_an_untouched_store_trains_bit_identically_with_and_without_the_check(pristine, monkeypatch):
    X, y = _data()
    store = str(pristine / "csr.zarr")
    ref = Perceptron(random_state=0, epochs=2, shuffle=False).fit(X, y)  # the same rows in the same order
    assert np.array_equal(Perceptron(random_state=0, epochs=2, shuffle=False).fit(store).coef_, ref.coef_)
    on = Perceptron(random_state=0, epochs=2).fit(store)
    monkeypatch.setattr(store_mod, "_CHECK_BLOCKS", False)
    off = Perceptron(random_state=0, epochs=2).fit(store)
    assert np.array_equal(on.coef_, off.coef_) and np.array_equal(on.intercept_, off.intercept_)


# ---------------------------------------------------------------- a store replaced under its reader

def test_a_store_replaced_while_read_is_an_error_never_a_mix(tmp_path):
    X, y = _data()
    path = tmp_path / "s.zarr"
    create_dataset(path, X, y, block_rows=BLOCK)
    ds = open_dataset(path)
    first = ds.read_block(0)
    assert first.X.shape == (BLOCK, D)
    X2, y2 = _data(seed=1)
    create_dataset(path, X2, y2, block_rows=BLOCK, overwrite=True)  # what convert --overwrite does
    assert store_mod._stamp(path) != ds.stamp  # the atomic swap gives the store a new zarr.json
    for b in range(ds.n_blocks):
        with pytest.raises(StoreError, match=rf"^{path}: the store was replaced while it was being read "
                                             rf"\(block {b}\); rerun on the new store$"):
            ds.read_block(b)
    with pytest.raises(StoreError, match="replaced while it was being read"):
        Perceptron().fit(ds)
    # a store opened afresh reads the new data
    again = open_dataset(path)
    assert (again.read_block(0).X != sp.csr_matrix(X2[:BLOCK])).nnz == 0


def test_a_store_replaced_between_epochs_stops_the_fit(tmp_path, monkeypatch):
    X, y = _data()
    path = tmp_path / "s.zarr"
    create_dataset(path, X, y, block_rows=BLOCK)
    ds = open_dataset(path)
    real = store_mod.Dataset.read_rows
    calls = []

    def replace_after_two(self, start, stop):
        calls.append(start)
        if len(calls) == 3:
            X2, y2 = _data(seed=1)
            create_dataset(path, X2, y2, block_rows=BLOCK, overwrite=True)
        return real(self, start, stop)

    monkeypatch.setattr(store_mod.Dataset, "read_rows", replace_after_two)
    monkeypatch.setenv(stream.PREFETCH_ENV, "0")
    with pytest.raises(StoreError, match="replaced while it was being read"):
        Perceptron(random_state=0, epochs=3).fit(ds)
    assert len(calls) == 3


# ---------------------------------------------------------------- writing

def test_float32_underflow_is_refused_with_a_count(tmp_path):
    X = np.array([[1e-50, 1.0, 0.0], [2.0, 1e-60, 3e-50], [1.0, 1.0, 1.0]])
    y = np.array([1, -1, 1])
    with pytest.raises(ValueError, match=r"^row 0: 3 non-zero values of the block from row 0 \(e\.g\. 1e-50\) "
                                         r"become 0 in float32; store them with --dtype float64"):
        create_dataset(tmp_path / "u.zarr", X, y)
    with pytest.raises(ValueError, match=r"^row 0: 1 non-zero value of the block from row 0 \(e\.g\. 1e-50\) becomes"):
        create_dataset(tmp_path / "u.zarr", sp.csr_matrix(X), y, block_rows=1)
    with pytest.raises(ValueError, match=r"^row 1: 2 non-zero values of the block from row 1 \(e\.g\. 1e-60\)"):
        create_dataset(tmp_path / "u.zarr", sp.csr_matrix(np.vstack([[1.0, 0, 0], X[1:]])), y, block_rows=1)
    assert not (tmp_path / "u.zarr").exists()
    ds = create_dataset(tmp_path / "u64.zarr", X, y, dtype="float64")
    assert ds.to_numpy()[0][0, 0] == 1e-50
    ds = create_dataset(tmp_path / "ok.zarr", X, y, allow_underflow=True)
    assert ds.to_numpy()[0][0, 0] == 0


def test_a_huge_block_rows_is_cut_to_the_rows_present(tmp_path, capsys):
    lines = "".join(f"{1 if i % 2 else -1} 1:{i + 1} 3:0.5\n" for i in range(2000))
    (tmp_path / "t.svm").write_text(lines)
    out = tmp_path / "t.zarr"
    assert cli.main(["convert", str(tmp_path / "t.svm"), str(out), "--block-rows", "1000000000"]) == 0
    capsys.readouterr()
    for name in ("y", "X/indptr"):
        chunks = json.loads((out / name / "zarr.json").read_text())["chunk_grid"]["configuration"]["chunk_shape"]
        assert chunks[0] <= 2001, (name, chunks)
    ds = open_dataset(out, validate="full")
    assert ds.n_blocks == 1 and ds.meta["block_rows"] == 2000


def test_rows_held_for_one_block_beyond_the_memory_budget_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "_memory_budget", lambda: 50_000)
    X = np.ones((2000, 10))
    with pytest.raises(ValueError, match=r"^block_rows=1000000 \(--block-rows\): the 2000 rows held for one "
                                         r"block already take .* use a smaller --block-rows$"):
        create_dataset(tmp_path / "b.zarr", X, np.ones(2000), block_rows=1_000_000)
    assert not (tmp_path / "b.zarr").exists()
    assert create_dataset(tmp_path / "b.zarr", X, np.ones(2000), block_rows=100).n_blocks == 20


# ---------------------------------------------------------------- in-memory CSR given to the estimators

@pytest.mark.parametrize("Est", [Perceptron, PassiveAggressive])
def test_an_in_memory_matrix_with_a_bad_index_is_refused_at_fit_and_predict(Est):
    X, y = _data()
    bad = X.copy()
    bad.indices[7] = D + 100
    with pytest.raises(ValueError, match=rf"^X: feature index {D + 100} of row \d+ is outside \[0, {D}\)$"):
        Est().fit(bad, y)
    m = Est(random_state=0).fit(X, y)
    bad.indices[7] = -1
    with pytest.raises(ValueError, match=r"is outside \[0, 40\)"):
        m.predict(bad)
    with pytest.raises(ValueError, match="is outside"):
        m.partial_fit(bad, y)
    short = sp.csr_matrix((X.data, X.indices, X.indptr.copy()), shape=X.shape)
    short.indptr[-1] = len(X.indices) + 50
    with pytest.raises(ValueError, match="points past the"):
        Est().fit(short, y)
    assert np.array_equal(m.predict(X), Est(random_state=0).fit(X, y).predict(X))  # sound input unchanged


def test_block_fault_reports_each_kind():
    indptr = np.array([0, 2, 4], np.int64)
    ok = (indptr, np.array([0, 3, 1, 2], np.int32), np.ones(4, np.float32), 4)
    assert store_mod.block_fault(ok, np.array([1.0, -1.0])) is None
    assert store_mod.block_fault(ok, np.array([1.0, np.inf]))[1] == "label inf of row 1 is not finite"
    unsorted = (indptr, np.array([3, 0, 1, 2], np.int32), np.ones(4, np.float32), 4)
    assert "not strictly increasing (3, 0)" in store_mod.block_fault(unsorted)[1]
    assert store_mod.block_fault(unsorted, sorted_indices=False) is None
    dup = (indptr, np.array([1, 1, 1, 2], np.int32), np.ones(4, np.float32), 4)
    assert "not strictly increasing (1, 1)" in store_mod.block_fault(dup)[1]
    assert store_mod.block_fault((indptr, ok[1], np.array([1, np.nan, 1, 1], np.float32), 4))[1] == \
        "value nan of row 0 is not finite"
    dense = np.ones((3, 2))
    dense[2, 1] = -np.inf
    assert store_mod.block_fault(dense, first_row=10) == (12, "value -inf of row 12, column 1 is not finite")


def _oracle(indptr, indices, data, d):
    """The first fault of a CSR block in Python (what block_fault must agree with): the pointers of
    every row first (nothing is read through a wrong one), then the rows' contents in order."""
    for r in range(len(indptr) - 1):
        lo, hi = indptr[r], indptr[r + 1]
        if hi < lo:
            return r, "decreases"
        if hi > len(indices):
            return r, "points past"
    for r in range(len(indptr) - 1):
        lo, hi = indptr[r], indptr[r + 1]
        for k in range(lo, hi):
            if not 0 <= indices[k] < d:
                return r, "is outside"
            if k > lo and indices[k] <= indices[k - 1]:
                return r, "not strictly increasing"
            if not np.isfinite(data[k]):
                return r, "is not finite"
    return None


def test_block_fault_agrees_with_a_row_by_row_oracle_on_random_damage():
    rng = np.random.default_rng(7)
    found = 0
    for case in range(400):
        n, d = int(rng.integers(1, 30)), int(rng.integers(1, 12))
        X = sp.random(n, d, density=float(rng.uniform(0, 0.9)), format="csr", random_state=case, dtype=np.float32)
        indptr, indices, data = X.indptr.astype(np.int64), X.indices.copy(), X.data.copy()
        for _ in range(int(rng.integers(0, 3))):  # zero to two mutations
            what = rng.integers(0, 4)
            if what == 0 and len(indices):
                indices[rng.integers(len(indices))] = rng.choice([-1, d, rng.integers(0, d)])
            elif what == 1 and len(data):
                data[rng.integers(len(data))] = rng.choice([np.nan, np.inf, 1.0])
            elif what == 2 and n > 1:
                indptr[rng.integers(1, n)] += rng.choice([-2, 1, 3])
            elif what == 3 and len(indices) > 1:
                k = int(rng.integers(1, len(indices)))
                indices[k] = indices[k - 1]
        want = _oracle(indptr, indices, data, d)
        got = store_mod.block_fault((indptr, indices, data, d))
        assert (got is None) == (want is None), (case, got, want)
        if want is not None:
            found += 1
            assert got[0] == want[0] and want[1] in got[1], (case, got, want)
    assert found > 100  # the mutations did find faults


def test_an_index_beyond_int32_is_kept_or_refused_never_wrapped(tmp_path):
    big = 2**31 + 4
    X = sp.csr_matrix((np.ones(2, np.float32), np.array([1, big], np.int64), np.array([0, 1, 2])),
                      shape=(2, big + 1))
    from distlearn.data import DatasetWriter

    with DatasetWriter(tmp_path / "w.zarr") as w:  # n_features unknown: the first block decides
        w.append(X, [1, -1])
        ds = w.close()
    assert ds.read_block(0).X.indices.tolist() == [1, big]
    with pytest.raises(ValueError, match=rf"^block at row 1: feature index {big} does not fit the store's int32 "
                                         r"indices .*--n-features.*--hash-bits"):
        with DatasetWriter(tmp_path / "v.zarr", block_rows=1) as w:
            w.append(X, [1, -1])
    assert not (tmp_path / "v.zarr").exists()


@pytest.mark.parametrize("d", [5, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**40])
@pytest.mark.parametrize("bad", [-1, -2, -(2**31), 2**31 - 1])
def test_the_32_bit_fast_path_decides_like_the_64_bit_one(d, bad):
    """int32 indices take 32-bit lanes only while n_features <= 2^31 (a negative index is then
    >= 2^31 as uint32): every negative index, and any index >= n_features, is a fault either way."""
    from distlearn.data.store import block_fault

    indptr = np.array([0, 3], np.int64)
    data = np.ones(3, np.float32)
    for dtype in (np.int32, np.int64):
        ok = np.array([0, 1, 2], dtype)
        assert block_fault((indptr, ok, data, d)) is None
        wrong = np.array([0, 1, bad], dtype) if bad > 2 else np.array([bad, 1, 2], dtype)
        fault = block_fault((indptr, wrong, data, d))
        expect_fault = bad < 0 or bad >= d
        assert (fault is not None) == expect_fault, (d, bad, dtype, fault)
        if expect_fault:
            assert "outside" in fault[1], fault
