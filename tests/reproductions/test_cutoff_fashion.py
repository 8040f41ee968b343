"""Reproduction of Dekel 2008 (cutoff averaging, Figs. 2-3) on Fashion-MNIST pairs.

Runs ``examples/cutoff_fashion.py --quick`` (pairs 0-6 and 2-4, 3 splits,
sizes 10..10000, one online pass) and checks the paper's qualitative
findings on the larger sizes (2512 and 10000 rounds), averaged over pairs
and splits, from the script's JSON (``overall_large``).

Tolerances come from the measured quick run (seed 0, deterministic):

    perceptron 0-1:   last 0.2336, average 0.1490, cutoff 0.1490 (mean k 0.42)
    margin hinge:     last 0.4312, average 0.4528, cutoff 0.4528 (mean k 0.00)

The perceptron half reproduces (averaging and cutoff beat the last
hypothesis by 0.085; cutoff = average within 5e-5).  The margin-perceptron
half does not: the last hypothesis beats averaging (0.022), but the
Theorem 2 bound picks k = 0 on every split and size, so cutoff equals plain
averaging instead of catching up with the last hypothesis.  That claim is
kept below as a strict xfail: it fails today, and the suite reports an
XPASS failure if a change to the conversions makes it hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "cutoff_fashion.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SHARED_DATA / "fashion-mnist").exists(), reason="needs ../shared/data/fashion-mnist"),
]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The --quick run's JSON (about 20 s on 2 cores)."""
    out = tmp_path_factory.mktemp("cutoff_fashion") / "quick.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--workers", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "Verdict" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["config"]["large_sizes"] == [2512, 10000]
    assert doc["config"]["pairs"] == ["0-6", "2-4"] and doc["config"]["splits"] == 3
    return doc


def test_perceptron_cutoff_and_average_beat_last(quick):
    """Fig. 2: with the classic perceptron any averaging beats the unstable last hypothesis,
    and cutoff averaging is about as good as plain averaging."""
    p = quick["overall_large"]["perceptron"]
    # measured gap last - average = 0.085; require at least 0.03 (a third of it)
    assert p["average"] < p["last"] - 0.03, p
    assert p["cutoff"] < p["last"] - 0.03, p
    # measured |cutoff - average| = 2e-5 (k = 0 mostly, k <= 3 otherwise); allow 0.005 (0.5 points of error)
    assert abs(p["cutoff"] - p["average"]) < 0.005, p


def test_margin_perceptron_last_beats_average(quick):
    """Fig. 3's premise: with the margin perceptron the last hypothesis has a lower test
    hinge loss than the average (measured 0.4312 vs 0.4528, per pair 0.0027 and 0.041)."""
    m = quick["overall_large"]["margin"]
    assert m["last"] < m["average"] - 0.01, m


@pytest.mark.xfail(strict=True, reason=(
    "does not reproduce on Fashion-MNIST (m <= 10^4): the Theorem 2 bound, with C = R + 1 ~ 24 for "
    "[0,1] pixels, chooses k = 0 on every split, so cutoff = plain averaging (measured cutoff 0.4528, "
    "average 0.4528, last 0.4312)"))
def test_margin_perceptron_cutoff_catches_up_with_last(quick):
    """Fig. 3: cutoff averaging catches up with the last hypothesis, below plain averaging."""
    m = quick["overall_large"]["margin"]
    gap = m["average"] - m["last"]
    # cutoff must close at least half of the average-vs-last gap (measured: 0%)
    assert m["cutoff"] < m["average"] - 0.5 * gap, m
    assert abs(m["cutoff"] - m["last"]) <= 0.5 * gap, m
