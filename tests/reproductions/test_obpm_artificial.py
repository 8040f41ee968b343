"""Reproduction of Harrington et al. 2003 (Online Bayes Point Machines, sec. 4.1).

Runs ``examples/obpm_artificial.py`` with its defaults (30 Monte Carlo runs
for Table 1 and for Figure 1, about 50 s on 2 shared cores) and checks its
JSON.  The run is deterministic (data seed r, learner seed r), so the numbers
below are exact for this code.

Table 1 (test error %, mean +- 95 % t half-width; a cell reproduces when our
mean is inside the paper's interval or below it):

    noise  Perceptron                   ALMA (paper B, C)            OBPM (paper tau, N = 100)
    0      2.40+-0.31  vs 2.03+-0.32    0.18+-0.06 vs 0.07+-0.04     0.02+-0.02 vs 0.00+-0.00
    0.01   3.58+-0.44  vs 3.35+-0.44    0.24+-0.09 vs 0.14+-0.07     0.13+-0.05 vs 0.10+-0.06
    0.1    15.00+-0.93 vs 12.96+-1.0    1.59+-0.23 vs 0.76+-0.13     1.90+-0.27 vs 0.96+-0.13

Only the e = 0.01 Perceptron and OBPM cells reproduce; the other seven are
strict xfails carrying the measured numbers (an XPASS fails the suite, so a
change that makes one reproduce must update this file).  Figure 1 and the
paper's qualitative claims (OBPM >> Perceptron, OBPM < ALMA noise-free,
OBPM ~ ALMA with noise, margin up with N, total updates 1334 / 5306 at
tau = 0.3) reproduce and are asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "obpm_artificial.py"

pytestmark = pytest.mark.slow

PAPER = {  # (noise, learner) -> (mean %, half-width %), Table 1
    ("0", "perceptron"): (2.03, 0.32), ("0", "alma"): (0.07, 0.04), ("0", "obpm"): (0.00, 0.00),
    ("0.01", "perceptron"): (3.35, 0.44), ("0.01", "alma"): (0.14, 0.07), ("0.01", "obpm"): (0.10, 0.06),
    ("0.1", "perceptron"): (12.96, 1.0), ("0.1", "alma"): (0.76, 0.13), ("0.1", "obpm"): (0.96, 0.13),
}


def _xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


CELLS = [
    pytest.param("0", "perceptron", marks=_xfail(
        "measured 2.40 +- 0.31 % (30 runs) vs paper 2.03 +- 0.32: mean 0.05 above the paper's upper end "
        "(the intervals overlap)")),
    pytest.param("0", "alma", marks=_xfail(
        "measured 0.18 +- 0.06 % with alpha = 0.5 chosen by training error (B = 1.11, C = 0.71) vs paper "
        "0.07 +- 0.04; alpha = 0.1 would give 0.08 %, but the paper does not report alpha")),
    pytest.param("0", "obpm", marks=_xfail(
        "measured 0.02 +- 0.02 % (6 test mistakes over 30 x 1000 test points; tau = 0.35, N = 100) vs paper "
        "0.00 +- 0.00")),
    pytest.param("0.01", "perceptron"),
    pytest.param("0.01", "alma", marks=_xfail(
        "measured 0.24 +- 0.09 % with alpha = 0.3 chosen by training error (B = 0.83, C = 0.71) vs paper "
        "0.14 +- 0.07 (upper end 0.21)")),
    pytest.param("0.01", "obpm"),
    pytest.param("0.1", "perceptron", marks=_xfail(
        "measured 15.00 +- 0.93 % vs paper 12.96 +- 1.0: all three learners are worse than the paper at e = 0.1")),
    pytest.param("0.1", "alma", marks=_xfail(
        "measured 1.59 +- 0.23 % with alpha = 0.2 chosen by training error (B = 1.25, C = 0.71) vs paper "
        "0.76 +- 0.13; best alpha on the grid (0.1) gives 1.31 %")),
    pytest.param("0.1", "obpm", marks=_xfail(
        "measured 1.90 +- 0.27 % (tau = 0.15, N = 100) vs paper 0.96 +- 0.13; best (tau, N) on the selection "
        "grid gives 1.50 % (tau 0.1, N 200)")),
]


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    """The default run's JSON (30 runs)."""
    out = tmp_path_factory.mktemp("obpm_artificial") / "obpm.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "Table 1" in r.stdout and "Figure 1" in r.stdout
    d = json.loads(out.read_text())
    assert d["config"]["runs"] == 30 and d["config"]["figure_runs"] == 30, d["config"]
    return d


def _row(doc, noise, learner):
    return doc["table"][noise]["rows"][learner]["summary"]


@pytest.mark.parametrize("noise,learner", CELLS)
def test_table1_cell(doc, noise, learner):
    """Table 1: our mean test error is inside the paper's 95 % interval or below it."""
    s = _row(doc, noise, learner)
    m, h = PAPER[(noise, learner)]
    assert s["test_error"] <= m + h + 1e-9, (
        f"noise {noise} {learner}: ours {s['test_error']:.3f} +- {s['test_error_ci']:.3f} %, "
        f"paper {m:.2f} +- {h:.2f} % (upper end {m + h:.2f})")


def test_paper_parameters_used(doc):
    """The Table 1 rows use the paper's B, C, tau and N."""
    for noise, (B, tau) in {"0": (1.11, 0.35), "0.01": (0.83, 0.50), "0.1": (1.25, 0.15)}.items():
        rows = doc["table"][noise]["rows"]
        assert rows["alma"]["params"]["B"] == B and rows["alma"]["params"]["C"] == 0.71, rows["alma"]["params"]
        assert rows["obpm"]["params"] == {"tau": tau, "N": 100}, rows["obpm"]["params"]
        assert len(rows["obpm"]["per_run"]) == 30


@pytest.mark.parametrize("noise", ["0", "0.01", "0.1"])
def test_obpm_far_better_than_perceptron(doc, noise):
    """OBPM beats the one-epoch Perceptron by a wide margin at every noise level
    (measured 0.02 vs 2.40, 0.13 vs 3.58, 1.90 vs 15.00 %)."""
    o, p = _row(doc, noise, "obpm"), _row(doc, noise, "perceptron")
    assert o["test_error"] + o["test_error_ci"] < (p["test_error"] - p["test_error_ci"]) / 4, (
        f"noise {noise}: OBPM {o['test_error']:.2f} +- {o['test_error_ci']:.2f}, "
        f"Perceptron {p['test_error']:.2f} +- {p['test_error_ci']:.2f}")


def test_obpm_beats_alma_noise_free(doc):
    """Noise-free, OBPM is better than ALMA (measured 0.02 +- 0.02 vs 0.18 +- 0.06 %; paper 0.00 vs 0.07)."""
    o, a = _row(doc, "0", "obpm"), _row(doc, "0", "alma")
    assert o["test_error"] + o["test_error_ci"] < a["test_error"] - a["test_error_ci"], (o, a)


@pytest.mark.parametrize("noise", ["0.01", "0.1"])
def test_obpm_and_alma_similar_with_noise(doc, noise):
    """With label noise ALMA and OBPM perform similarly: their 95 % intervals overlap
    (measured 0.24 +- 0.09 vs 0.13 +- 0.05 at e = 0.01, 1.59 +- 0.23 vs 1.90 +- 0.27 at e = 0.1)."""
    o, a = _row(doc, noise, "obpm"), _row(doc, noise, "alma")
    gap = abs(o["test_error"] - a["test_error"])
    assert gap <= o["test_error_ci"] + a["test_error_ci"], (
        f"noise {noise}: OBPM {o['test_error']:.2f} +- {o['test_error_ci']:.2f}, "
        f"ALMA {a['test_error']:.2f} +- {a['test_error_ci']:.2f}")


def test_figure1_total_updates_at_tau_03(doc):
    """Total member updates at tau = 0.3, noise-free: paper 1334 (N = 25) and 5306 (N = 100);
    measured 1313 and 5247.  Allow 5 %."""
    c = doc["figure"]["curves"]
    for n, paper in ((25, 1334), (100, 5306)):
        ours = c[str(n)]["0.3"]["n_updates"]
        assert abs(ours - paper) <= 0.05 * paper, f"N={n}: {ours:.0f} updates vs paper {paper}"


def test_figure1_margin_grows_with_n(doc):
    """Fig. 1(b): increasing N increases the margin, at every tau < 1 (at tau = 1 every member
    sees every example, so N does not matter)."""
    c = doc["figure"]["curves"]
    for tau in doc["figure"]["taus"]:
        m25, m100 = c["25"][f"{tau:g}"]["train_margin"], c["100"][f"{tau:g}"]["train_margin"]
        if tau < 1:
            assert m100 > m25, f"tau={tau}: margin N=100 {m100:.4f} <= N=25 {m25:.4f}"
        else:
            assert m100 == pytest.approx(m25), (tau, m25, m100)


def test_figure1_margin_level(doc):
    """Fig. 1(b): OBPM reaches a margin of about 0.02 (measured peak 0.0188, N = 100, tau = 0.7), several
    times ALMA's (measured 0.0045; paper 0.006)."""
    c = doc["figure"]["curves"]
    peak = max(c[n][f"{t:g}"]["train_margin"] for n in c for t in doc["figure"]["taus"])
    alma = doc["figure"]["alma"]["train_margin"]
    assert 0.015 <= peak <= 0.025, f"peak OBPM margin {peak:.4f}, paper ~0.02"
    assert 0.0 < alma < 0.01, f"ALMA margin {alma:.4f}, paper 0.006"
    assert peak > 3 * alma, f"OBPM {peak:.4f} vs ALMA {alma:.4f}"


def test_figure1_tau_one_is_the_perceptron(doc):
    """With tau = 1 every member sees every example in the same order, so every member and the
    average equal the Perceptron with the same seed: identical test errors run by run."""
    fig = doc["figure"]
    perc = [r["test_error"] for r in fig["perceptron"]["per_run"]]
    for n in ("25", "100"):
        ours = [r["test_error"] for r in fig["curves"][n]["1"]["per_run"]]
        assert ours == perc, (n, ours[:5], perc[:5])
