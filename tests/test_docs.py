"""The API documentation builds with Sphinx, warnings as errors (docs/, ``pip install -e .[docs]``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None,
                    reason="sphinx is not installed (pip install -e .[docs], or the dev extra)")
def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    r = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-d", str(tmp_path / "doctrees"),
         str(DOCS), str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, f"sphinx-build failed (exit {r.returncode}):\n{r.stderr}\n{r.stdout[-4000:]}"
    api = (out / "api.html").read_text(encoding="utf-8")
    # Each object has its own anchor: documented, not merely mentioned.
    for anchor in ("distlearn.data.open_dataset", "distlearn.model.load_model", "distlearn.training.make_estimator",
                   "distlearn.distributed.run_grid"):
        assert f'id="{anchor}"' in api, anchor
    # a page per estimator, per conversion and per distributed mode, each documenting its object
    from distlearn.estimators import ESTIMATORS, KERNEL_ESTIMATORS

    estimators = {c.__name__ for c in (*ESTIMATORS.values(), *KERNEL_ESTIMATORS.values())}
    estimators |= {"OBPM", "KernelOBPM", "PermutationBPM", "KernelPermutationBPM", "ParameterMixing"}
    for name in sorted(estimators):
        page = out / "estimators" / f"{name}.html"
        assert f'id="distlearn.{name}"' in page.read_text(encoding="utf-8"), name
    for name in ("Last", "Average", "Tree", "Suffix", "Cutoff", "Survivor", "Vote", "Sample", "Interval"):
        assert f'id="distlearn.conversions.{name}"' in (out / "conversions" / f"{name}.html").read_text(encoding="utf-8")
    for mode in ("learner-parallel", "run-parallel", "data-parallel"):
        assert "scheduler=" in (out / "distributed" / f"{mode}.html").read_text(encoding="utf-8"), mode
    for page in ("index.html", "cli.html", "architecture.html"):
        assert (out / page).is_file(), page
    assert "distlearn train" in (out / "cli.html").read_text(encoding="utf-8")
