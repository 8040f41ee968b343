"""A damaged store on a real Dask cluster: one line on the client, and the workers live on.

On main before issue 26, a feature index beyond ``n_features`` killed four workers and ended in a
34-line ``KilledWorker`` traceback; a deleted chunk trained as zeros.  The block check sits where
every read passes (``Dataset.read_rows``), so a worker's task raises the same one-line
``StoreError`` as this process does, and Dask hands it back unchanged.
"""

from __future__ import annotations

import io
import re
import shutil
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from distlearn.cli import main
from distlearn.data import create_dataset

pytestmark = pytest.mark.cluster


def _run(*argv):
    """(exit status, stderr without the informational 'Dask cluster: ...' / 'waiting for workers' lines)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main([str(a) for a in argv])
    info = ("Dask cluster:", "waiting for workers")
    return rc, "".join(ln for ln in err.getvalue().splitlines(True) if not ln.startswith(info))


@pytest.fixture
def stores(tmp_path):
    rng = np.random.default_rng(3)
    X = sp.random(400, 30, density=0.3, random_state=3, format="csr")
    y = np.where(X @ rng.standard_normal(30) > 0, 1, -1)
    good = create_dataset(tmp_path / "good.zarr", X, y, block_rows=100, nnz_chunk=500).path
    high = tmp_path / "high.zarr"
    shutil.copytree(good, high)
    zarr.open_group(str(high), mode="r+")["X"]["indices"][1700] = 10**6  # a row of block 1
    gone = tmp_path / "gone.zarr"
    shutil.copytree(good, gone)
    chunks = sorted((gone / "X" / "data" / "c").iterdir())
    chunks[1].unlink()
    return {"good": good, "high": high, "gone": gone, "dir": tmp_path}


@pytest.mark.timeout(300)
def test_bad_blocks_are_one_line_on_workers_and_the_workers_survive(stores, dask_scheduler, client):
    address = dask_scheduler["address"]
    before = set(client.scheduler_info()["workers"])
    # "high": its chunk X/indices/c/3 is read by blocks 1 and 2; whichever a worker reads first refuses it
    # (block 1 for the index, and both for the chunk's digest: not what was written there)
    for name, what in (("high", r"feature index|chunk X/indices/c/3 is not the data written there"),
                       ("gone", "missing")):
        rc, err = _run("train", stores[name], "--model", "obpm", "--param", "n_estimators=4",
                       "--scheduler", address)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 2 and len(lines) == 1 and "Traceback" not in err and "KilledWorker" not in err, err
        assert name + ".zarr" in lines[0] and "block" in lines[0] and re.search(what, lines[0]), lines[0]
    # the same workers are still there: nothing was killed
    assert set(client.scheduler_info()["workers"]) == before
    rc, err = _run("train", stores["good"], "--model", "obpm", "--param", "n_estimators=4",
                   "--scheduler", address, "--save", stores["dir"] / "m.npz")
    assert rc == 0, err
    rc, err = _run("predict", stores["dir"] / "m.npz", stores["high"], "--scheduler", address)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "high.zarr" in lines[0] and "Traceback" not in err, err
    assert set(client.scheduler_info()["workers"]) == before
