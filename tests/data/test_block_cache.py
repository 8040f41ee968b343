"""The block stream's block cache, its prefetch, and the codecs a store can be written with."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn import stream
from distlearn.data import StoreError, create_dataset, open_dataset
from distlearn.data.store import CODECS, DEFAULT_CODEC, Dataset


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.delenv(stream.BLOCK_CACHE_ENV, raising=False)
    monkeypatch.delenv(stream.PREFETCH_ENV, raising=False)
    stream.clear_block_cache()
    yield
    stream.clear_block_cache()


def _store(tmp_path, name="s.zarr", n=1000, seed=0, **kw):
    X = sp.random(n, 40, density=0.2, format="csr", random_state=seed, dtype=np.float64).astype(np.float32)
    y = np.where(np.arange(n) % 3 == 0, 1, -1)
    return create_dataset(tmp_path / name, X, y, block_rows=128, **kw), X, y


def _count_reads(monkeypatch):
    reads: list[int] = []
    real = Dataset.read_block

    def counting(self, i):
        reads.append(int(i))
        return real(self, i)

    monkeypatch.setattr(Dataset, "read_block", counting)
    return reads


def _chunks(ds, epoch=0, **kw):
    return list(stream.epoch_chunks(ds, seed=3, epoch=epoch, shuffle=True, classes=np.array([-1, 1]),
                                    dtype="float64", **kw))


def _same(a, b):
    assert [c.block for c in a] == [c.block for c in b]
    for p, q in zip(a, b):
        assert p.first_row == q.first_row and np.array_equal(p.y, q.y)
        assert (p.order is None and q.order is None) or np.array_equal(p.order, q.order)
        assert p.X.dtype == q.X.dtype == np.float64
        assert np.array_equal(p.X.indptr, q.X.indptr) and np.array_equal(p.X.indices, q.X.indices)
        assert np.array_equal(p.X.data, q.X.data)


def test_the_cache_serves_the_same_arrays_and_a_hit_does_not_read(tmp_path, monkeypatch):
    ds, X, y = _store(tmp_path)
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "0")
    monkeypatch.setenv(stream.PREFETCH_ENV, "0")
    reads = _count_reads(monkeypatch)
    uncached = _chunks(ds)
    assert sorted(reads) == list(range(ds.n_blocks))
    assert stream.block_cache_info()["blocks"] == 0  # budget 0: nothing kept
    _chunks(ds)
    assert len(reads) == 2 * ds.n_blocks

    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "1GiB")
    reads.clear()
    first = _chunks(ds)
    _same(first, uncached)
    assert sorted(reads) == list(range(ds.n_blocks))
    # epoch 1 (another order) and another opening of the same store: all hits, no read
    reads.clear()
    again = _chunks(open_dataset(ds.path))
    _same(again, first)
    assert all(p.X is q.X for p, q in zip(again, first))  # the very same arrays
    _same(_chunks(ds, epoch=1), _chunks(ds, epoch=1))
    assert reads == []
    info = stream.block_cache_info()
    assert info["blocks"] == ds.n_blocks and info["stores"] == 1 and info["hits"] >= 3 * ds.n_blocks
    # the rows really are the store's
    got = sp.vstack([c.X for c in sorted(first, key=lambda c: c.block)]).tocsr()
    assert (got != X.astype(np.float64)).nnz == 0


def test_the_budget_keeps_the_first_blocks_that_fit(tmp_path, monkeypatch):
    ds, _, _ = _store(tmp_path)
    one = stream._nbytes(stream._load_block(ds, 0, np.dtype("float64")))
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, str(int(3.5 * one)))
    monkeypatch.setenv(stream.PREFETCH_ENV, "0")
    reads = _count_reads(monkeypatch)
    first = [c.block for c in _chunks(ds)]
    assert stream.block_cache_info()["blocks"] == 3
    reads.clear()
    _chunks(ds, epoch=1)
    kept = {b for b in first[:3]}
    assert sorted(set(range(ds.n_blocks)) - kept) == sorted(reads)  # the first three stay, the rest are read


def test_a_rewritten_store_is_not_served_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(stream.PREFETCH_ENV, "0")
    ds, _, _ = _store(tmp_path, seed=0)
    a = _chunks(stream.open_store(ds.path, stream.store_token(ds)))
    ds2, X2, _ = _store(tmp_path, seed=1, overwrite=True)
    b = _chunks(stream.open_store(ds2.path, stream.store_token(ds2)))
    got = sp.vstack([c.X for c in sorted(b, key=lambda c: c.block)]).tocsr()
    assert (got != X2.astype(np.float64)).nnz == 0
    assert any(not np.array_equal(p.X.data, q.X.data) for p, q in zip(a, b))


def test_threads_asking_for_one_block_share_one_read(tmp_path, monkeypatch):
    ds, _, _ = _store(tmp_path)
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "0")  # shared while in flight even when nothing is kept
    reads = []
    real = Dataset.read_block

    def slow(self, i):
        reads.append(i)
        time.sleep(0.2)
        return real(self, i)

    monkeypatch.setattr(Dataset, "read_block", slow)
    out = [None] * 4
    ts = [threading.Thread(target=lambda k=k: out.__setitem__(k, stream.cached_block(ds, 2, "float64")))
          for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert reads == [2] and all(o[0] is out[0][0] for o in out)


def test_prefetch_keeps_the_order_and_the_block_error(tmp_path, monkeypatch):
    ds, _, _ = _store(tmp_path)
    monkeypatch.setenv(stream.PREFETCH_ENV, "0")
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "0")
    plain = _chunks(ds, epoch=2)
    monkeypatch.setenv(stream.PREFETCH_ENV, "1")
    _same(list(stream.epoch_chunks(ds, seed=3, epoch=2, shuffle=True, classes=np.array([-1, 1]),
                                   dtype="float64")), plain)
    # a subset of blocks keeps the whole epoch's order
    sub = plain[2].block, plain[5].block, plain[1].block
    _same(_chunks(ds, epoch=2, blocks=sub), [plain[1], plain[2], plain[5]])

    # a corrupt block: the chunks before it come out, then its one-line StoreError
    bad = plain[4].block
    ds_bad, _, _ = _store(tmp_path, name="bad.zarr")
    chunk = tmp_path / "bad.zarr" / "y" / "c" / str(bad)  # y is chunked by block: this block's only
    assert chunk.is_file()
    chunk.write_bytes(b"garbage")
    stream.clear_block_cache()
    got = []
    with pytest.raises(StoreError, match=rf"bad\.zarr: block {bad} \(rows {128 * bad}\.\.\d+\) cannot be read: ") as e:
        for ch in stream.epoch_chunks(ds_bad, seed=3, epoch=2, shuffle=True, classes=np.array([-1, 1]),
                                      dtype="float64"):
            got.append(ch.block)
    assert "\n" not in str(e.value)
    assert got == [c.block for c in plain[:4]]
    # not cached: the same error again
    with pytest.raises(StoreError, match=rf"block {bad} "):
        stream.cached_block(ds_bad, bad, "float64")


def test_the_budget_setting(monkeypatch):
    assert stream.block_cache_bytes("0") == 0
    assert stream.block_cache_bytes("1.5 GiB") == int(1.5 * 2**30)
    assert stream.block_cache_bytes("123") == 123
    assert 0 < stream.block_cache_bytes("10%") < stream.block_cache_bytes("20%")
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "64MB")
    assert stream.block_cache_bytes() == 64_000_000
    with pytest.raises(ValueError, match="DISTLEARN_BLOCK_CACHE_BYTES='lots'"):
        stream.block_cache_bytes("lots")


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_reads_the_same_and_is_recorded(tmp_path, codec):
    ds, X, y = _store(tmp_path, codec=codec)
    assert ds.meta["codec"] == codec and ds.codec == codec and ds.info()["codec"] == codec
    ds = open_dataset(ds.path, validate="full")
    X2, y2 = ds.to_scipy()
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    assert ds.codec == codec


def test_the_default_codec_and_old_stores(tmp_path):
    ds, _, _ = _store(tmp_path)
    assert ds.codec == DEFAULT_CODEC
    with pytest.raises(ValueError, match="codec must be one of"):
        _store(tmp_path, name="x.zarr", codec="snappy")
    # a store written before the codec was recorded (zarr's default zstd): read, codec from its arrays
    import zarr

    old, X, y = _store(tmp_path, name="old.zarr", codec="zstd-0")
    g = zarr.open_group(str(old.path), mode="r+")
    meta = dict(g.attrs["distlearn"])
    del meta["codec"]
    g.attrs["distlearn"] = meta
    ds = open_dataset(old.path, validate="full")
    assert "codec" not in ds.meta and ds.codec == "zstd-0"
    assert (ds.to_scipy()[0] != X).nnz == 0


def test_a_stuck_block_read_ends_in_one_line_within_the_read_deadline(tmp_path, monkeypatch):
    """Every wait has a deadline: the prefetch thread's read of block b+1 and another thread's read of
    the same block are awaited for at most DISTLEARN_READ_TIMEOUT seconds, then one StoreError line
    names the store and the block."""
    ds, X, y = _store(tmp_path)
    b = int(stream.block_order(3, 0, ds.n_blocks, True)[1])  # the first block the prefetch thread reads
    monkeypatch.setenv(stream.BLOCK_CACHE_ENV, "1GiB")
    for other in range(ds.n_blocks):  # every other block cached first: only block b is ever waited for
        if other != b:
            stream.cached_block(ds, other, "float64")
    release = threading.Event()
    real = Dataset.read_block

    def stuck(self, i):
        if int(i) == b:
            release.wait(30)  # a read that hangs (released at the end so the thread ends)
        return real(self, i)

    monkeypatch.setattr(Dataset, "read_block", stuck)
    monkeypatch.setenv("DISTLEARN_READ_TIMEOUT", "0.3")
    try:
        with pytest.raises(StoreError) as e:  # prefetch path: block b is read ahead on the prefetch thread
            _chunks(ds)
        msg = str(e.value)
        assert "\n" not in msg and str(ds.path) in msg and "was not read within 0.3 s" in msg
        assert f"block {b} " in msg and "DISTLEARN_READ_TIMEOUT" in msg

        # the shared wait: another thread already reads block b; this one waits for it, with the deadline
        stream.clear_block_cache()
        outcome: list[str] = []

        def other_reader():
            try:
                stream.cached_block(ds, b, "float64")
                outcome.append("read")
            except StoreError as exc:  # it may itself be a waiter on the read still stuck above
                outcome.append(str(exc))

        t = threading.Thread(target=other_reader, daemon=True)
        t.start()
        time.sleep(0.05)
        with pytest.raises(StoreError, match=f"block {b} was not read within 0.3 s"):
            stream.cached_block(ds, b, "float64")
    finally:
        release.set()
    t.join(30)
    assert len(outcome) == 1 and (outcome[0] == "read" or "was not read within" in outcome[0])


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "inf"])
def test_the_read_deadline_setting_is_checked(bad):
    from distlearn._config import read_timeout

    with pytest.raises(ValueError, match="DISTLEARN_READ_TIMEOUT"):
        read_timeout(bad)
    assert read_timeout("2.5") == 2.5
