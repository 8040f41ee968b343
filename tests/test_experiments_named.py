"""Every named paper reproduction's ``--quick`` run through ``distlearn experiment``: the three result
files in OUT/NAME/, legible figures, resume without rerunning a cell, the same numbers in process and
on a Dask cluster, experiments sharing an --out, and every option an experiment does not use refused
before any work (the ones it uses change the run).

The data sets the protocols read are written here in their distributed formats (Fashion-MNIST as
Zalando's gzipped IDX files, LETTER as one 1-based svmlight file with labels 1..26), so nothing
depends on ../shared; the reproductions on the real data are the slow tests in tests/reproductions.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from distlearn.cli import EXPERIMENTS, build_parser, main
from distlearn.experiments.named import COMMON, OPTIONS, PAPERS, run_experiment
from tests.data.test_idx import idx_bytes, write


@pytest.fixture(autouse=True)
def no_fetched_data(tmp_path_factory, monkeypatch):
    """No data is found but what a test names (not a copy fetched into the user's cache)."""
    monkeypatch.setenv("DISTLEARN_DATA", str(tmp_path_factory.mktemp("empty-cache")))
    monkeypatch.delenv("DISTLEARN_LETTER", raising=False)
    monkeypatch.delenv("DISTLEARN_FASHION_MNIST", raising=False)


def legibility(fig) -> list[str]:
    """What makes a figure hard to read: under 768 x 480 pixels at its dpi, an axes without an x or
    y label (none of the axes sharing that axis has one either), a text cut by the figure's edge."""
    bad = []
    w, h = fig.get_size_inches() * fig.dpi
    if w < 640 or h < 400:
        bad.append(f"{w:.0f} x {h:.0f} pixels")
    fig.canvas.draw()
    box = fig.bbox
    for ax in fig.axes:
        if not ax.axison or not ax.get_visible():
            continue
        for which, shared in (("x", ax.get_shared_x_axes()), ("y", ax.get_shared_y_axes())):
            if not any(getattr(a, f"get_{which}label")() for a in shared.get_siblings(ax)):
                bad.append(f"no {which} label on {ax.get_title()!r}")
    texts = [t for ax in fig.axes if ax.axison for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    texts += [t for t in (getattr(fig, "_suptitle", None),) if t is not None]
    for t in texts:
        if not t.get_text() or not t.get_visible():
            continue
        e = t.get_window_extent()
        if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
            bad.append(f"{t.get_text()!r} cut by the edge")
    return bad


@pytest.fixture
def figures_checked(monkeypatch):
    """Every figure saved during the test, checked by :func:`legibility` before it is written."""
    from matplotlib.figure import Figure

    seen: list[tuple[str, list[str], tuple[float, float]]] = []
    save = Figure.savefig

    def checked(self, fname, *args, **kw):
        save(self, fname, *args, **kw)  # first, so that the dpi is the one written
        seen.append((os.fspath(fname), legibility(self), tuple(self.get_size_inches() * kw.get("dpi", self.dpi))))

    monkeypatch.setattr(Figure, "savefig", checked)
    return seen


def data_args(name: str, data: dict) -> list[str]:
    """The data options experiment ``name`` uses (budget-fig4 --quick runs the bundled digits only)."""
    if name == "budget-fig4":
        return []
    return ((["--letter", data["letter"]] if "letter" in OPTIONS[name] else [])
            + (["--fashion-dir", data["fashion"]] if "fashion_dir" in OPTIONS[name] else []))


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
def test_quick_writes_md_json_png_and_resumes(name, data, tmp_path, capsys, figures_checked):
    root = tmp_path / "out"
    out = root / name
    argv = ["experiment", name, "--quick", "--out", str(root), *data_args(name, data)]
    assert main(argv) == 0
    doc = json.loads((out / f"{name}.json").read_text())
    md = (out / f"{name}.md").read_text()
    assert doc["cells_run"] > 0 and doc["cells_resumed"] == 0, doc.get("cells_run")
    assert "Quick run" in md and "```text" in md
    assert (out / f"{name}.png").stat().st_size > 5000
    assert sorted(p.name for p in root.iterdir()) == [".distlearn-output.json", name]  # nothing else in OUT
    assert figures_checked, "no figure drawn"
    for path, problems, (w, h) in figures_checked:
        assert problems == [] and w >= 640 and h >= 400, (path, problems, w, h)
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


def test_other_options_are_refused_not_mixed(tmp_path):
    run_experiment("obpm-figure1", tmp_path, quick=True, repeats=1, figures=False)
    with pytest.raises(ValueError, match="holds another run's cells"):
        run_experiment("obpm-figure1", tmp_path, quick=True, repeats=2, figures=False)


def test_missing_data_is_one_clear_line(tmp_path, capsys):
    assert main(["experiment", "letter-conversions", "--quick", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip()
    assert "no LETTER data" in err and "archive.ics.uci.edu" in err and "Traceback" not in err
    assert "run `distlearn data fetch letter`" in err and len(err.splitlines()) == 1
    assert main(["experiment", "cutoff-curves", "--quick", "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip()
    assert "run `distlearn data fetch fashion-mnist`" in err and len(err.splitlines()) == 1
    assert main(["experiment", "obpm-drift", "--out", str(tmp_path), "--fashion-dir", str(tmp_path / "nope")]) != 0
    err = capsys.readouterr().err.strip()
    assert "Fashion-MNIST" in err and len(err.splitlines()) == 1


# one value of every experiment-specific option, as the command line gives it
VALUES = {"tau": ["0.3"], "n_estimators": ["5"], "epochs": ["1"], "letter": ["x.svm"], "fashion_dir": ["fdir"],
          "store": ["s.zarr"], "tokens": ["t.dat"], "n_docs": ["100"], "qrels": ["q"], "hierarchy": ["h"],
          "problems": ["CCAT-vs-GCAT"], "splits": ["2"], "sizes": ["3"], "train": ["a.fa"], "test": ["b.fa"],
          "train_store": ["a.zarr"], "test_store": ["b.zarr"], "n_train": ["100"], "degree": ["2"],
          "permutations": ["1"]}


def test_every_unused_option_is_refused_before_any_work(tmp_path, capsys):
    own = {o for opts in OPTIONS.values() for o in opts}
    assert own == set(VALUES)
    parser_dests = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["experiment"]._actions}
    assert own | set(COMMON) | {"name", "help"} == parser_dests  # every option of the parser is classified
    refused = 0
    for name in EXPERIMENTS:
        for o in sorted(own - set(OPTIONS[name])):
            out = tmp_path / f"{name}-{o}"
            code = main(["experiment", name, "--out", str(out), "--" + o.replace("_", "-"), *VALUES[o]])
            err = capsys.readouterr().err.strip()
            assert code == 2 and len(err.splitlines()) == 1, (name, o, err)
            assert f"{name} does not use --{o.replace('_', '-')}" in err, err
            assert not out.exists(), (name, o)  # refused before anything was written
            refused += 1
    assert refused == sum(len(own) - len(OPTIONS[n]) for n in EXPERIMENTS) > 100


def test_more_folds_than_letter_conversions_has_are_refused(tmp_path, data, capsys):
    assert main(["experiment", "letter-conversions", "--quick", "--repeats", "6", "--out", str(tmp_path / "o"),
                 "--letter", data["letter"]]) == 2
    assert "at most 5 folds per split" in capsys.readouterr().err
    assert not (tmp_path / "o" / "letter-conversions").exists()


def test_budget_quick_refuses_the_data_it_does_not_read(tmp_path, data, capsys):
    assert main(["experiment", "budget-fig4", "--quick", "--out", str(tmp_path / "o"), "--letter",
                 data["letter"]]) == 2
    assert "budget-fig4 --quick runs the bundled digits only" in capsys.readouterr().err
    assert not (tmp_path / "o" / "budget-fig4").exists()


def test_table1_seed_tau_and_n_estimators_change_the_run(tmp_path):
    kw = dict(quick=True, repeats=1, figures=False)
    a = run_experiment("obpm-table1", tmp_path / "a", params={"tau": [0.3], "n_estimators": [5]}, **kw)
    b = run_experiment("obpm-table1", tmp_path / "b", params={"tau": [0.3], "n_estimators": [5]}, seed=4, **kw)
    grid = a["table"]["0"]["grids"]["obpm_tau_N"]
    assert list(grid) == ["tau=0.3,N=5"]  # the grid 'OBPM (selected)' chooses from is the one given
    assert a["table"]["0"]["rows"]["obpm_selected"]["params"] == {"tau": 0.3, "N": 5}
    assert a["table"]["0"]["rows"]["obpm"]["params"] == {"tau": 0.35, "N": 100}  # the paper's row stays
    assert a["config"]["seed"] == 0 and b["config"]["seed"] == 4
    per_run = lambda d: d["table"]["0.1"]["rows"]["perceptron"]["per_run"]  # noqa: E731
    assert per_run(a) != per_run(b)  # another seed, other data and orders
    # the same seed again resumes; another tau is another run, refused in that directory
    again = run_experiment("obpm-table1", tmp_path / "a", params={"tau": [0.3], "n_estimators": [5]}, **kw)
    assert again["cells_run"] == 0 and per_run(again) == per_run(a)
    with pytest.raises(ValueError, match="holds another run's cells"):
        run_experiment("obpm-table1", tmp_path / "a", params={"tau": [0.2], "n_estimators": [5]}, **kw)


def test_experiments_share_an_out_and_refuse_other_options_before_work(tmp_path, capsys):
    root = tmp_path / "shared"
    rcv1 = ["experiment", "rcv1-cutoff", "--quick", "--out", str(root), "--n-docs", "600", "--no-figures"]
    cel = ["experiment", "celegans-obpm", "--quick", "--out", str(root), "--n-train", "300", "--no-figures"]
    assert main(rcv1) == 0 and main(cel) == 0
    assert main(["experiment", "obpm-figure1", "--quick", "--repeats", "1", "--out", str(root), "--no-figures",
                 "--tau", "0.3", "--n-estimators", "3"]) == 0
    capsys.readouterr()
    names = ("rcv1-cutoff", "celegans-obpm", "obpm-figure1")
    assert sorted(p.name for p in root.iterdir()) == sorted([".distlearn-output.json", *names])
    for n in names:
        assert (root / n / "meta.json").is_file() and (root / n / f"{n}.json").is_file()
        assert any((root / n / "cells").iterdir())
    assert json.loads((root / "rcv1-cutoff" / "meta.json").read_text())["n_docs"] == 600
    # another seed into the same directory: refused in one line before the corpus is generated again
    before = {p: p.stat().st_mtime_ns for p in (root / "rcv1-cutoff").rglob("*") if p.is_file()}
    assert main(rcv1 + ["--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "holds another run's cells (different corpus_seed, seed)" in err and "generating" not in err
    assert before == {p: p.stat().st_mtime_ns for p in (root / "rcv1-cutoff").rglob("*") if p.is_file()}
    assert main(cel[:-3] + ["--n-train", "400", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert "different n_train" in err and "generating" not in err
    # the same commands resume: nothing is rerun
    assert main(rcv1 + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cells_run"] == 0


def test_top_level_help_lists_all_nine_and_the_data_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert len(EXPERIMENTS) == 9 and all(name in out for name in EXPERIMENTS), out
    assert "data" in out and "download the public data sets" in out


def test_seed_and_options_reach_every_paper_experiments_cells(data):
    """What each paper experiment's plan hands its cells, with and without --seed/--tau/..."""
    from distlearn.experiments import named

    files = {"letter": data["letter"], "fashion": data["fashion"]}
    for name in PAPERS:
        mod, part = named._module(name)
        base = mod.plan(part, quick=True, repeats=2, data=files if name != "budget-fig4" else {}, params={"seed": 0})
        other = mod.plan(part, quick=True, repeats=2, data=files if name != "budget-fig4" else {}, params={"seed": 7})
        assert base[0] != other[0] and base[1] != other[1], name  # the seed is in the key and in the cells
    drift = named._module("obpm-drift")[0].plan("", quick=True, repeats=1, data=files,
                                                params={"seed": 3, "tau": 0.2, "n_estimators": 7})
    opts = drift[1][0][2][1]
    assert (opts["seed"], opts["tau"], opts["n_estimators"]) == (3, 0.2, 7)
    key, todo = named._module("obpm-batch")[0].plan("", quick=True, repeats=2, data=files,
                                                     params={"seed": 5, "tau": [0.3], "n_estimators": 9, "epochs": [2]})
    assert key["seeds"] == [5, 6] and key["taus"] == [0.3] and key["n_estimators"] == 9 and key["epochs"] == [2]
    assert todo[0][2][1]["taus"] == [0.3] and todo[0][2][2:] == ([2], [5, 6])
    key, todo = named._module("obpm-figure1")[0].plan("figure", quick=True, repeats=1, data={},
                                                       params={"seed": 2, "tau": [0.1, 0.2], "n_estimators": [4]})
    assert key["taus"] == [0.1, 0.2] and key["N"] == [4] and todo[0][2] == (0, (0.1, 0.2), todo[0][2][2], (4,), 2)


def test_budget_fig4_adds_the_merging_curve(tmp_path):
    from distlearn.experiments.budget_cache_sizes import MERGE_GAMMAS, QUICK_MERGE_SIZES, merging, tuned_merge

    doc = run_experiment("budget-fig4", tmp_path, quick=True, repeats=1, figures=False)
    res = doc["results"][0]
    assert res["dataset"] == "digits"
    merged = {r["cache"]: r for r in res["rows"] if r["cache"].startswith("merge-")}
    assert sorted(merged, key=lambda c: int(c[6:])) == [f"merge-{b}" for b in QUICK_MERGE_SIZES]
    for cache, r in merged.items():
        B = int(cache[6:])
        assert r["n_support"] == B  # merging keeps the cache full at its budget, never above
        tune = res["merge_tuning"][str(B)]
        assert sorted(g for _, g in tune["validation"]) == MERGE_GAMMAS["digits"]
        assert tune["gamma"] == min(tune["validation"])[1]  # the width of least held-out error
    # the tuning is the separate runs it reports: one width refit by hand gives its held-out error
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import normalize

    X, y = load_digits(return_X_y=True)
    X = normalize(X.astype(np.float64))[:1500]
    y = y[:1500]
    g, errs = tuned_merge(X, y, [2.0], 50)
    idx = np.random.default_rng(0).permutation(1500)
    own = float(np.mean(merging(50, 2.0).fit(X[idx[300:]], y[idx[300:]]).predict(X[idx[:300]]) != y[idx[:300]]))
    assert g == 2.0 and errs == [(own, 2.0)]
    assert [tuple(e) for e in res["merge_tuning"]["50"]["validation"] if e[1] == 2.0] == errs
    # the paper's numbers for merging stand beside ours in the report
    from distlearn.experiments.budget_cache_sizes import render

    text = render("", doc)
    assert "merging (RBF, gamma per budget" in text and "B=100 25.0-26.4 %, B=500 10.3 %" in text
