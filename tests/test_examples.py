"""The examples run as tests.

The default suite runs store_basics; the others are end-to-end scripts over what tests/ checks
piece by piece (run grids, budget caches, rcv1-cutoff, celegans-obpm), so they run with -m slow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SHARED_DATA

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(name, *args):
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_store_basics(tmp_path):
    out = _run("store_basics.py", "--out", str(tmp_path), "--n-samples", "5000")
    assert "rows are unit length: True" in out and "5000 x 20000" in out


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "fashion-mnist").exists(), reason="needs ../shared/data/fashion-mnist")
def test_fashion_mnist_stores(tmp_path):
    out = _run("fashion_mnist_stores.py", "--out", str(tmp_path), "--plot", str(tmp_path / "drift.png"))
    assert "train: 60000 x 784" in out and "t10k: 10000 x 784" in out
    assert (tmp_path / "drift.png").stat().st_size > 1000


@pytest.mark.slow
def test_grid_obpm(tmp_path):
    out = _run("grid_obpm.py", "--quick", "--json", str(tmp_path / "grid.json"))
    assert "lowest test error" in out and (tmp_path / "grid.json").stat().st_size > 0


@pytest.mark.slow
def test_budget_cache_sizes_quick(tmp_path):
    """The budget paper's Fig. 4 on the bundled digits (3 permutations, 5 fixed sizes): the
    variable cache lands within 1 point of the tuned SVC with no more support patterns."""
    out = _run("budget_cache_sizes.py", "--quick", "--bayes", "10", "--json", str(tmp_path / "b.json"), "--plot",
               str(tmp_path / "b.png"))
    assert "variable cache:" in out
    (res,) = json.loads((tmp_path / "b.json").read_text())
    by = {r["cache"]: r for r in res["rows"]}
    svc = res["svc"]
    assert by["variable"]["test_error"] <= svc["test_error"] + 0.01, (by["variable"], svc)
    assert by["variable"]["n_support"] <= svc["n_support"], (by["variable"], svc)
    assert all(int(r["cache"]) >= r["n_support"] for r in res["rows"] if r["cache"].isdigit())
    # the Bayes points of the variable cache: the kernel OBPM (10 members) and 10 permutations
    assert by["obpm-10"]["test_error"] <= by["none"]["test_error"] + 0.02, by["obpm-10"]
    assert by["pbpm-10"]["test_error"] <= by["variable"]["test_error"] + 0.01, by["pbpm-10"]
    assert (tmp_path / "b.png").stat().st_size > 1000


@pytest.mark.slow
def test_budget_cache_sizes_fashion_path(tmp_path):
    """The Fashion-MNIST path of Fig. 4 on generated files in Zalando's format (28x28 gzip IDX)."""
    from tests.data.test_idx import make_pair

    make_pair(tmp_path, n=120, rows=28, cols=28, gz=True, seed=3)
    make_pair(tmp_path, n=40, rows=28, cols=28, gz=True, seed=4, prefix="t10k")
    out = _run("budget_cache_sizes.py", "--datasets", "fashion", "--fashion-dir", str(tmp_path), "--permutations",
               "1", "--sizes", "2", "--svc-C", "10", "--json", str(tmp_path / "f.json"))
    (res,) = json.loads((tmp_path / "f.json").read_text())
    assert res["dataset"] == "fashion" and res["n_train"] == 120 and "variable cache:" in out
    assert {r["cache"] for r in res["rows"]} >= {"none", "variable"}


@pytest.mark.slow
def test_rcv1_cutoff_example(tmp_path):
    out = _run("rcv1_cutoff.py", "--out", str(tmp_path), "--n-docs", "4000", "--splits", "2", "--sizes", "5")
    assert "a view: rcv1.zarr#CCAT-vs-GCAT" in out and "CCAT-vs-GCAT" in out.split("k(cut)")[1]
    assert "cutoff better:" in out and (tmp_path / "results.json").stat().st_size > 0


@pytest.mark.slow
def test_celegans_obpm_example(tmp_path):
    out = _run("celegans_obpm.py", "--out", str(tmp_path), "--n-train", "2000", "--degree", "2")
    assert "obpm-tau0.05-N20" in out and "LinearSVC (C=" in out
    assert (tmp_path / "results.json").stat().st_size > 0
