"""The workers' block cache on a real Dask cluster: the groups of a worker share one read of a block,
the blocks stay on the worker for later epochs and fits, and the weights stay bit-identical."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from distlearn import OBPM, stream
from distlearn.data.store import create_dataset


def _store(tmp_path):
    r = np.random.default_rng(7)
    X = sp.random(1500, 200, density=0.05, random_state=r, format="csr", dtype=np.float64)
    y = np.where(X[:, :20].sum(axis=1).A1 > 0.5, 1, -1)
    return str(create_dataset(tmp_path / "bc.zarr", X, y, block_rows=100).path)


def _obpm(**kw):
    return OBPM(n_estimators=12, tau=0.4, epochs=3, random_state=2, keep_members=True, **kw)


def test_worker_block_caches_serve_later_epochs_and_fits_with_the_same_bits(tmp_path, client):
    path = _store(tmp_path)
    ref = _obpm(scheduler="in-process", learner_groups=1).fit(path)
    client.run(stream.clear_block_cache)
    # 4 groups on 2 single-threaded workers: each worker runs 2 chains, 3 epochs
    est = _obpm(scheduler=client, learner_groups=4, checkpoint_every=5).fit(path)
    np.testing.assert_array_equal(est.members_, ref.members_)
    info = client.run(stream.block_cache_info)
    n_blocks = 15
    for w, i in info.items():
        # every block is read at most once per worker, however many groups and epochs went through it
        assert i["misses"] <= n_blocks and i["blocks"] == i["misses"], (w, i)
    assert sum(i["hits"] for i in info.values()) >= 4 * 3 * n_blocks - 2 * n_blocks
    # a second fit on the same store: no read at all
    again = _obpm(scheduler=client, learner_groups=2, checkpoint_every=5).fit(path)
    np.testing.assert_array_equal(again.members_, ref.members_)
    after = client.run(stream.block_cache_info)
    assert all(after[w]["misses"] == info[w]["misses"] for w in info)
    # nothing kept (budget 0): still the same bits
    client.run(lambda: __import__("os").environ.__setitem__(stream.BLOCK_CACHE_ENV, "0"))
    try:
        client.run(stream.clear_block_cache)
        cold = _obpm(scheduler=client, learner_groups=4, checkpoint_every=5).fit(path)
        np.testing.assert_array_equal(cold.members_, ref.members_)
        assert all(i["blocks"] == 0 for i in client.run(stream.block_cache_info).values())
    finally:
        client.run(lambda: __import__("os").environ.pop(stream.BLOCK_CACHE_ENV, None))
