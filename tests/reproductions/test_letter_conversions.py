"""Reproduction of Dekel & Singer 2005 (sec. 4, Table 1) on LETTER: Gaussian-kernel multiclass PA.

Runs ``examples/letter_conversions.py --quick`` (k = 5: train one online pass
on each fifth, 4,000 examples, test on the other 16,000; all 5 folds; the
kernel PA, features scaled by the training-part max; conversions last,
average, suffix, tree) and checks the paper's numbers and orderings on the
fold means from the script's JSON.

Measured (seed 0, deterministic; percent test error, mean +- std over the 5 folds),
against the paper's Table 1 (5-fold):

    last 27.2 +- 1.8 (paper 29.9 +- 1.8), average 19.7 +- 0.2 (21.2 +- 0.5),
    suffix 19.0 +- 0.3 (20.5 +- 0.6), tree 19.4 +- 1.4; the full run adds
    interval 21.3, vote 19.3 (23.4), vote-suffix 19.0 (21.5).

Target: each mean within the paper's interval or lower; the orderings last >>
average >= suffix and tree <= average.
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

# The run is deterministic at seed 0; TOL absorbs platform-level float differences
# that could move a beta argmin by a few hypotheses (40 of a fold's 16,000 test rows).
TOL = 0.25
# last - average is measured +7.4; demand 4 points.
LAST_GAP = 4.0
#: Dekel & Singer 2005, Table 1, LETTER 5-fold (mean, std), percent.
PAPER = {"last": (29.9, 1.8), "average": (21.2, 0.5), "suffix": (20.5, 0.6)}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The --quick run's JSON (about 30 s)."""
    out = tmp_path_factory.mktemp("letter_conversions") / "quick.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--data", str(DATA), "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "the paper's orderings" in r.stdout, r.stdout
    doc = json.loads(out.read_text())
    cfg = doc["config"]
    assert cfg["k"] == [5] and cfg["learners"] == ["kpa"] and cfg["epochs"] == 1, cfg
    assert cfg["scale"] == ["max"], cfg
    assert {"last", "average", "suffix", "tree"} <= set(cfg["conversions"]), cfg
    return doc


def _means(doc):
    r = doc["results"]["5"]["max"]["kpa"]
    errs = r["errors"]
    for c in ("last", "average", "suffix", "tree"):
        assert len(errs[c]) == 5, (c, errs[c])  # every fold of the 5-fold protocol
        assert all(0.0 <= e <= 100.0 for e in errs[c]), errs[c]
    assert r["train_size"] == [4000] * 5 and r["test_size"] == [16000] * 5, r
    return {c: sum(v) / len(v) for c, v in errs.items()}


@pytest.mark.parametrize("conversion", sorted(PAPER))
def test_within_the_papers_interval_or_lower(quick, conversion):
    mean, std = PAPER[conversion]
    assert _means(quick)[conversion] <= mean + std, (conversion, _means(quick))


def test_last_is_worst(quick):
    """Table 1: the last online hypothesis h_m is far worse than the averaged one."""
    m = _means(quick)
    assert m["last"] > m["average"] + LAST_GAP, m


def test_suffix_and_tree_beat_average(quick):
    """Table 1 / Fig. 2: the data-driven conversions improve on plain averaging."""
    m = _means(quick)
    assert m["average"] >= m["suffix"] - TOL, m
    assert m["tree"] <= m["average"] + TOL, m
