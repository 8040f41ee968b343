"""The budget paper's Fig. 4 on LETTER (Crammer, Kandola & Singer 2003), slow.

Runs ``examples/budget_cache_sizes.py --datasets letter`` with 3 permutations
and 6 fixed sizes.  Measured with the full protocol (11 permutations, 10
sizes; RBF width chosen on a held-out fifth: gamma 32 for MIRA, gamma 8 and
C = 10 for SVC): variable cache 2.88 +- 0.12 % with 8,876 patterns, the best
fixed size 2.91 % (6,133 and 9,133 patterns), SVC 2.20 % with 7,899.

Target (the issue's): within 3 points of the tuned SVC (met, +0.68) with no
more support patterns than SVC (not met: 1.12x) -- the second half is a strict
xfail, so the suite reports XPASS if it starts to hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import SHARED_DATA

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "budget_cache_sizes.py"
DATA = SHARED_DATA / "letter.svm"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not DATA.exists(), reason="needs the LETTER svmlight file")]


@pytest.fixture(scope="module")
def letter(tmp_path_factory):
    out = tmp_path_factory.mktemp("budget") / "letter.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--datasets", "letter", "--letter", str(DATA),
                        "--permutations", "3", "--sizes", "6", "--json", str(out)],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    (res,) = json.loads(out.read_text())
    return {r["cache"]: r for r in res["rows"]}, res["svc"]


def test_variable_cache_within_3_points_of_svc(letter):
    rows, svc = letter
    assert rows["variable"]["test_error"] <= svc["test_error"] + 0.03, (rows["variable"], svc)


@pytest.mark.xfail(strict=True, reason="measured 8,876 patterns against the SVC's 7,899 (1.12x)")
def test_variable_cache_no_more_patterns_than_svc(letter):
    rows, svc = letter
    assert rows["variable"]["n_support"] <= svc["n_support"], (rows["variable"], svc)
