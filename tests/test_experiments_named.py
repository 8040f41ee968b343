"""Every named paper reproduction's ``--quick`` run through ``distlearn experiment``: the three result
files, resume without rerunning a cell, and the same numbers in process and on a Dask cluster.

The data sets the protocols read are written here in their distributed formats (Fashion-MNIST as
Zalando's gzipped IDX files, LETTER as one 1-based svmlight file with labels 1..26), so nothing
depends on ../shared; the reproductions on the real data are the slow tests in tests/reproductions.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from distlearn.cli import EXPERIMENTS, main
from distlearn.experiments.named import PAPERS, run_experiment
from tests.data.test_idx import idx_bytes, write


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small Fashion-MNIST-shaped directory and a LETTER-shaped svmlight file, with learnable classes."""
    d = tmp_path_factory.mktemp("data")
    rs = np.random.default_rng(0)
    protos = rs.integers(0, 256, size=(10, 28, 28))
    for prefix, n in (("train", 3000), ("t10k", 600)):
        lab = rs.integers(0, 10, size=n)
        img = np.clip(protos[lab] * 0.6 + rs.integers(0, 100, size=(n, 28, 28)), 0, 255).astype(np.int64)
        write(d / f"{prefix}-images-idx3-ubyte.gz", idx_bytes(img, "ubyte"), True)
        write(d / f"{prefix}-labels-idx1-ubyte.gz", idx_bytes(lab, "ubyte"), True)
    centres = rs.integers(0, 16, size=(26, 16))
    lab = rs.integers(1, 27, size=2000)
    X = np.clip(centres[lab - 1] + rs.integers(-3, 4, size=(2000, 16)), 0, 15)
    letter = d / "letter.svm"
    letter.write_text("".join(f"{c} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(row) if v) + "\n"
                              for c, row in zip(lab, X)))
    return {"fashion": str(d), "letter": str(letter)}


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_quick_writes_md_json_png_and_resumes(name, data, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["experiment", name, "--quick", "--out", str(out), "--letter", data["letter"],
            "--fashion-dir", data["fashion"]]
    assert main(argv) == 0
    doc = json.loads((out / f"{name}.json").read_text())
    md = (out / f"{name}.md").read_text()
    assert doc["cells_run"] > 0 and doc["cells_resumed"] == 0, doc.get("cells_run")
    assert "Quick run" in md and "```text" in md
    assert (out / f"{name}.png").stat().st_size > 5000
    if name in PAPERS:
        assert any(k.startswith("paper") for k in doc) and "paper" in md.lower(), "no paper numbers beside ours"
    capsys.readouterr()
    # the same command again: every cell is read back, none is rerun, and the numbers are the same
    assert main(argv + ["--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cells_run"] == 0 and again["cells_resumed"] == doc["cells_run"]
    drop = ("cells_run", "cells_resumed", "seconds", "files", "figures", "meta", "steps")
    assert {k: v for k, v in again.items() if k not in drop} == {k: v for k, v in doc.items() if k not in drop}


def test_cluster_gives_the_in_process_numbers(dask_scheduler, tmp_path):
    here = run_experiment("obpm-figure1", tmp_path / "a", quick=True, repeats=2, figures=False)
    there = run_experiment("obpm-figure1", tmp_path / "b", quick=True, repeats=2, figures=False,
                           scheduler=dask_scheduler["address"])
    assert here["cells_run"] == there["cells_run"] == 2
    assert here["figure"] == there["figure"]


def test_other_options_are_refused_not_mixed(tmp_path, data):
    run_experiment("obpm-figure1", tmp_path, quick=True, repeats=1, figures=False)
    with pytest.raises(ValueError, match="holds another run's cells"):
        run_experiment("obpm-figure1", tmp_path, quick=True, repeats=2, figures=False)


def test_missing_data_is_one_clear_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DISTLEARN_LETTER", raising=False)
    assert main(["experiment", "letter-conversions", "--quick", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip()
    assert "no LETTER data" in err and "archive.ics.uci.edu" in err and "Traceback" not in err
    assert main(["experiment", "obpm-drift", "--out", str(tmp_path), "--fashion-dir", str(tmp_path / "nope")]) != 0
    err = capsys.readouterr().err.strip()
    assert "Fashion-MNIST" in err and len(err.splitlines()) == 1
