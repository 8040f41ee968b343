"""Reproduction of Harrington et al. 2003 (OBPM, sec. 4.3, Table 2) on LETTER and Fashion-MNIST.

Runs ``examples/obpm_batch.py --quick`` (about 80-90 s on 2 cores): LETTER
26-class one-vs-rest, the three LETTER pairs most confused by the tuned
LinearSVC on the validation split (C-G, H-N, H-O, with either scaling), and Fashion-MNIST
T-shirt/top vs Shirt; epochs 1 and 3; seeds 0-4; tau and ALMA's (B, C) and
LinearSVC's C tuned on a held-out 10% of the training set.  The 10-class
Fashion-MNIST task is too slow for the suite (see the script's docstring).

Measured quick run (deterministic; LETTER standardised by the training
mean/std, Fashion pixels / 255; test error %, mean over 5 seeds; OBPM is the
paper's last hypothesis, "avg" our conversion="average"):

    task          SVC    Perc E1/E3     OBPM E1/E3     OBPM-avg E3   OBPM-SVC E3  avg-SVC E3
    letter       30.33   52.73/50.98    36.82/35.08    34.28         +4.76        +3.96
    letter C-G    9.80   13.86/12.81    11.90/10.98     9.61         +1.18        -0.20
    letter H-N    7.89   15.27/11.10    10.41/ 8.52     9.02         +0.63        +1.14
    letter H-O   19.31   34.14/25.03    23.93/21.86    19.72         +2.55        +0.41
    fashion 0-6  15.35   24.74/24.31    16.94/16.88    15.27         +1.53        -0.08

The paper's "OBPM beats the perceptron" holds on every task at both epoch
counts (by 1.8 to 15.9 points).  The issue's target, OBPM within 0.5 points
of LinearSVC, is met nowhere by the last hypothesis (closest: H-N, +0.63,
two test rows of 317): those checks are strict xfails carrying the measured
numbers, so a change that makes one hold shows up as an XPASS failure.  Our
averaged conversion meets it on C-G, H-O and the Fashion pair (passing
tests) and misses on LETTER 26-class and H-N (strict xfails).

With ``--letter-scale max`` (features / train max, in [0, 1]) the LETTER
results are much worse for every online learner and OBPM loses to the
perceptron on C-G and H-O (see the script's docstring); this test runs the
default, standardised features.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ..conftest import SHARED_DATA

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "obpm_batch.py"
TASKS = ["letter", "letter C-G", "letter H-N", "letter H-O", "fashion 0-6"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SHARED_DATA / "letter.svm").exists() or not (SHARED_DATA / "fashion-mnist").exists(),
                       reason="needs ../shared/data/letter.svm and ../shared/data/fashion-mnist"),
]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The --quick run's JSON."""
    out = tmp_path_factory.mktemp("obpm_batch") / "quick.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "Verdict" in r.stdout and "OBPM (last) - LinearSVC" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["config"]["epochs"] == [1, 3] and doc["config"]["seeds"] == [0, 1, 2, 3, 4]
    assert doc["config"]["letter_scale"] == "standard" and doc["config"]["fashion_scale"] == "pixel"
    assert list(doc["tasks"]) == TASKS  # the chosen letter pairs are part of the protocol
    return doc


def mean_err(doc, task, alg, epochs):
    return float(np.mean(doc["tasks"][task]["errors"][alg][str(epochs)]))


def _xf(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


@pytest.mark.parametrize("task,epochs", [(t, e) for t in TASKS for e in (1, 3)])
def test_obpm_beats_perceptron(quick, task, epochs):
    """Table 2: OBPM's last hypothesis has a lower mean test error than the single perceptron
    trained for the same number of epochs.  Measured margins (E1/E3): letter 15.9/15.9,
    C-G 2.0/1.8, H-N 4.9/2.6, H-O 10.2/3.2, fashion 0-6 7.8/7.4 points."""
    o, p = mean_err(quick, task, "OBPM", epochs), mean_err(quick, task, "Perceptron", epochs)
    assert o < p, (task, epochs, o, p)


@pytest.mark.parametrize("task", [
    pytest.param("letter", marks=_xf("26-class OvR: OBPM 35.08 vs LinearSVC 30.33 (+4.76) at 3 epochs")),
    pytest.param("letter C-G", marks=_xf("OBPM 10.98 vs LinearSVC 9.80 (+1.18) at 3 epochs")),
    pytest.param("letter H-N", marks=_xf("OBPM 8.52 vs LinearSVC 7.89 (+0.63) at 3 epochs")),
    pytest.param("letter H-O", marks=_xf("OBPM 21.86 vs LinearSVC 19.31 (+2.55) at 3 epochs")),
    pytest.param("fashion 0-6", marks=_xf("OBPM 16.88 vs LinearSVC 15.35 (+1.53) at 3 epochs")),
])
def test_obpm_within_half_point_of_linear_svc(quick, task):
    """The issue's target: OBPM (last hypothesis, 3 epochs) within 0.5 points of LinearSVC."""
    t = quick["tasks"][task]
    assert mean_err(quick, task, "OBPM", 3) - t["svc"]["test_err"] <= 0.5, t["gap_svc"]


@pytest.mark.parametrize("task", [
    pytest.param("letter", marks=_xf("26-class OvR: OBPM average 34.28 vs LinearSVC 30.33 (+3.96) at 3 epochs")),
    "letter C-G",
    pytest.param("letter H-N", marks=_xf("OBPM average 9.02 vs LinearSVC 7.89 (+1.14) at 3 epochs")),
    "letter H-O",
    "fashion 0-6",
])
def test_obpm_average_within_half_point_of_linear_svc(quick, task):
    """Our addition, conversion='average' (3 epochs): within 0.5 points of LinearSVC on C-G
    (measured -0.20), H-O (+0.41) and the Fashion pair (-0.08)."""
    t = quick["tasks"][task]
    assert mean_err(quick, task, "OBPM-avg", 3) - t["svc"]["test_err"] <= 0.5, t["gap_svc_avg"]


def test_averaging_stabilises_obpm_on_fashion_pair(quick):
    """Seed spread: the averaged OBPM is far more stable than the last hypothesis
    (measured std 0.13 vs 1.83 at 3 epochs) and not worse on the mean."""
    last = quick["tasks"]["fashion 0-6"]["errors"]["OBPM"]["3"]
    avg = quick["tasks"]["fashion 0-6"]["errors"]["OBPM-avg"]["3"]
    assert np.std(avg, ddof=1) < 0.5 * np.std(last, ddof=1), (avg, last)
    assert np.mean(avg) <= np.mean(last), (avg, last)
