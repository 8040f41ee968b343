"""Reproduction of Harrington et al. 2003 (OBPM, sec. 4.2, Fig. 2) on Fashion-MNIST.

Runs ``examples/obpm_drift.py`` with its defaults -- the paper's protocol:
10 trials, T = 1000, positive label drifting 1 -> 2 -> 3 (Trouser ->
Pullover -> Dress), LMS (step 0.5), ALMA (B = 2, C = sqrt 2, alpha = 1/B =
0.5), perceptron, OBPM (tau = 0.4, N = 100), one pass, unit-length rows --
and checks the paper's claim from the script's JSON: OBPM makes the fewest
online prediction errors (mean final count over the trials).

Measured (seed 0, deterministic; about 8 s):

    final errors   LMS 169.3 ± 13.5   ALMA 134.3 ± 8.1   perceptron 160.8 ± 10.7
                   OBPM 115.2 ± 6.5   always-negative yardstick 107.4 ± 4.1

OBPM is fewest on 10/10 trials (runner-up ALMA +19.1 ± 5.9 per trial).  Not
a claim of the paper but recorded as a strict xfail: OBPM does not beat the
constant "always negative" predictor on this ~10%-positive stream.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ..conftest import SHARED_DATA

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "obpm_drift.py"
LEARNERS = ("lms", "alma", "perceptron", "obpm")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SHARED_DATA / "fashion-mnist").exists(), reason="needs ../shared/data/fashion-mnist"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The default run's JSON (10 trials of T = 1000; a few seconds) and its plot path."""
    d = tmp_path_factory.mktemp("obpm_drift")
    out, png = d / "drift.json", d / "drift.png"
    r = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out), "--plot", str(png)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Verdict" in r.stdout
    doc = json.loads(out.read_text())
    cfg = doc["config"]
    assert cfg["trials"] == 10 and cfg["n_samples"] == 1000 and cfg["labels"] == [1, 2, 3]
    assert cfg["tau"] == 0.4 and cfg["n_estimators"] == 100 and cfg["lms_eta"] == 0.5
    assert cfg["alma"]["B"] == 2.0 and abs(cfg["alma"]["C"] - 2 ** 0.5) < 1e-12
    return doc, png


def test_obpm_makes_fewest_online_errors(run):
    """Fig. 2: OBPM makes fewer online prediction errors than LMS, ALMA and the perceptron
    (mean final count over the 10 trials)."""
    doc, _ = run
    fm = doc["summary"]["final_mean"]
    others = {k: fm[k] for k in LEARNERS if k != "obpm"}
    assert fm["obpm"] < min(others.values()), fm
    assert doc["summary"]["fewest"] == "obpm"


def test_counts_are_sane(run):
    """Every count lies in [0, T]; per-round records add up; OBPM's online_errors_ is the sum
    of its online_mistakes_; the low-level runs agree with the estimators."""
    doc, png = run
    T = doc["config"]["n_samples"]
    trials = doc["trials"]
    assert len(trials) == doc["config"]["trials"]
    for tr in trials:
        assert tr["obpm_online_errors_"] == sum(tr["mistakes"]["obpm"]), tr["trial"]
        assert all(tr["estimator_checks"].values()), tr["estimator_checks"]
        assert tr["final"]["always_negative"] == tr["n_positive"] == sum(v == 1 for v in tr["y"])
        for k in (*LEARNERS, "always_negative"):
            m = np.asarray(tr["mistakes"][k])
            assert m.shape == (T,) and set(np.unique(m)) <= {0, 1}, k
            assert tr["final"][k] == int(m.sum()), k
            assert 0 <= tr["final"][k] <= T, (k, tr["final"][k])
            assert tr["false_negatives"][k] + tr["false_positives"][k] == tr["final"][k], k
    s = doc["summary"]
    for k in LEARNERS:
        assert 0 <= s["final_mean"][k] <= T
        assert s["cumulative_mean"][k][-1] == pytest.approx(s["final_mean"][k])
        assert np.all(np.diff(s["curve_mean"][k]) >= 0), k
    assert s["checkpoints"][-1] == T
    assert png.stat().st_size > 1000


@pytest.mark.xfail(strict=True, reason=(
    "not the paper's claim, recorded as a finding: on the ~10%-positive stream OBPM (115.2 ± 6.5 errors) "
    "does not beat the constant always-negative predictor (107.4 ± 4.1); it predicts +1 on ~29 of 1000 "
    "rounds (97 false negatives, 18 false positives), and no other learner beats it either"))
def test_obpm_beats_always_negative(run):
    doc, _ = run
    fm = doc["summary"]["final_mean"]
    assert fm["obpm"] < fm["always_negative"], fm
