"""Reproduction of Dekel & Singer 2005 (sec. 4, Table 1) on LETTER, linear learners.

Runs ``examples/letter_conversions.py --quick`` (k = 5: train one online pass
on each fifth, 4,000 examples, test on the other 16,000; all 5 folds; the
multiclass PA-I learner; conversions last, average, suffix, tree; features
scaled by the training-part max and, separately, standardised) and checks
the paper's orderings on the fold means from the script's JSON.

Measured (seed 0, deterministic; percent test error, mean over the 5 folds):

    scale=max:       last 61.2, average 37.0, suffix 35.9, tree 36.0
                     last - average +24.21, average - suffix +1.11, tree - average -1.04
    scale=standard:  last 41.8, average 27.3, suffix 28.0, tree 28.1
                     last - average +14.50, average - suffix -0.62, tree - average +0.80

Over split seeds 0..19 (all 5 folds each), scale=max: last - average >= 19.8;
average - suffix mean +0.86, min -0.72 (19/20 seeds >= 0); tree - average
mean -0.79, max +0.16 (17/20 seeds <= 0).  scale=standard: average - suffix
mean -0.50 (19/20 seeds < 0), tree - average mean +0.51 (19/20 seeds > 0).

So with max-scaled features (the linear learner learns slowly, its early
hypotheses are bad) the paper's orderings hold: last >> average >= suffix
and tree <= average.  With standardised features the plain average beats
suffix and tree (the linear learner learns fast, and averaging all of its
hypotheses helps more than dropping the early ones); that half is kept as a
strict xfail, so the suite reports XPASS if it ever starts to hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "letter_conversions.py"
DATA = SHARED_DATA / "letter.svm"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATA.exists(), reason="needs ../shared/data/letter.svm"),
]

# The run is deterministic at seed 0, so the tolerances only have to absorb
# platform-level float differences that could move a beta argmin by a few
# hypotheses: 0.25 points of mean test error (40 of the 16,000 test examples
# of a fold).  Measured margins at seed 0 are +1.11 (suffix) and -1.04
# (tree), four times that; over 20 other split seeds 1/20 (suffix) and 0/20
# (tree) would exceed it.
TOL = 0.25
# last - average is measured +24.2 (>= 19.8 over 20 seeds); demand 10 points.
LAST_GAP = 10.0


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The --quick run's JSON (a few seconds)."""
    out = tmp_path_factory.mktemp("letter_conversions") / "quick.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--data", str(DATA), "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "the paper's orderings" in r.stdout, r.stdout
    doc = json.loads(out.read_text())
    cfg = doc["config"]
    assert cfg["k"] == [5] and cfg["learners"] == ["pa-native"] and cfg["epochs"] == 1, cfg
    assert cfg["scale"] == ["max", "standard"], cfg
    assert {"last", "average", "suffix", "tree"} <= set(cfg["conversions"]), cfg
    return doc


def _means(doc, scale):
    r = doc["results"]["5"][scale]["pa-native"]
    errs = r["errors"]
    for c in ("last", "average", "suffix", "tree"):
        assert len(errs[c]) == 5, (c, errs[c])  # every fold of the 5-fold protocol
        assert all(0.0 <= e <= 100.0 for e in errs[c]), errs[c]
    assert r["train_size"] == [4000] * 5 and r["test_size"] == [16000] * 5, r
    return {c: sum(v) / len(v) for c, v in errs.items()}


@pytest.mark.parametrize("scale", ["max", "standard"])
def test_last_is_worst(quick, scale):
    """Table 1: the last online hypothesis h_m is far worse than the averaged one."""
    m = _means(quick, scale)
    assert m["last"] > m["average"] + LAST_GAP, m


def test_suffix_and_tree_beat_average_max_scaled(quick):
    """Table 1 / Fig. 2: the data-driven conversions improve on plain averaging
    (average >= suffix, tree <= average) -- features scaled by the training max."""
    m = _means(quick, "max")
    assert m["average"] >= m["suffix"] - TOL, m
    assert m["tree"] <= m["average"] + TOL, m


@pytest.mark.xfail(strict=True, reason=(
    "does not hold for linear PA on standardised LETTER features: plain averaging beats suffix "
    "and tree (seed 0: average 27.3, suffix 28.0, tree 28.1; 19/20 split seeds alike)"))
def test_suffix_and_tree_beat_average_standardised(quick):
    """The same orderings with standardised features (training-part mean and std)."""
    m = _means(quick, "standard")
    assert m["average"] >= m["suffix"] - TOL, m
    assert m["tree"] <= m["average"] + TOL, m
