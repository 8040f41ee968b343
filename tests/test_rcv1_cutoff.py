"""The rcv1-cutoff experiment: one paused pass equals refits on every prefix; Dask = in process; resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distlearn import MarginPerceptron, Perceptron
from distlearn.cli import main
from distlearn.conversions import Cutoff
from distlearn.data import open_dataset
from distlearn.data._rcv1 import convert_rcv1, write_rcv1_corpus
from distlearn.experiments import rcv1_cutoff as rc
from distlearn.stream import epoch_chunks, store_token


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("rcv1")
    info = write_rcv1_corpus(d / "c", 6000, n_terms=3000, mean_distinct=30, random_state=5)
    return str(convert_rcv1(info["tokens"], d / "r.zarr", qrels=info["qrels"], block_rows=900).path)


def _train_order(view, split, seed, test):
    order_seed = int(rc.rng.hash64(seed, rc.rng.stream_id("rcv1-cutoff/order"), split))
    rows = []
    for ch in epoch_chunks(view, seed=order_seed, epoch=0, shuffle=True, classes=np.array([-1, 1]), dtype=np.float64):
        idx = np.arange(ch.X.shape[0]) if ch.order is None else ch.order
        rows.extend((ch.first_row + idx[~test[ch.first_row + idx]]).tolist())
    return np.array(rows)


def test_one_paused_pass_equals_a_refit_at_every_size(store):
    path = f"{store}#CCAT-vs-GCAT"
    view = open_dataset(path)
    radius = 2.5
    sizes = [10, 37, 400, 1500]
    cell = rc.run_cell(path, store_token(view), 1, 7, 0.2, sizes, radius)
    X, y = view.to_scipy()
    test = rc.test_rows(7, 1, view.n_samples, 0.2)
    order = _train_order(view, 1, 7, test)
    assert cell["n_train"] == len(order) == int((~test).sum()) and cell["n_test"] == int(test.sum())
    Xt, yt = X[test], y[test]
    for j, m in enumerate(sizes):
        Xm, ym = X[order[:m]], y[order[:m]]
        for conv in rc.CONVERSIONS:
            # the refit: a fresh learner on exactly this prefix (cutoff by its two-pass replay)
            c = Cutoff() if conv == "cutoff" else conv
            p = Perceptron(conversion=c, shuffle=False, epochs=1).fit(Xm, ym)
            assert cell[f"perceptron/{conv}"][j] == pytest.approx(np.mean(p.predict(Xt) != yt), abs=1e-12)
            c = Cutoff(loss="hinge") if conv == "cutoff" else conv
            mp = MarginPerceptron(conversion=c, shuffle=False, epochs=1, horizon=cell["n_train"], radius=radius).fit(Xm, ym)
            hinge = np.mean(np.maximum(0, 1 - yt * mp.decision_function(Xt)))
            assert cell[f"margin/{conv}"][j] == pytest.approx(hinge, rel=1e-9)
        assert cell["perceptron/updates"][j] == Perceptron(shuffle=False, epochs=1).fit(Xm, ym).n_updates_


def test_dask_cells_equal_in_process_and_resume(store, client, tmp_path):
    kw = {"problems": ["CCAT-vs-MCAT", "GCAT-vs-OTHER"], "splits": 2, "n_sizes": 5, "figures": False}
    here = rc.run(store, tmp_path / "a", **kw)
    there = rc.run(store, tmp_path / "b", scheduler=client, **kw)
    for p in kw["problems"]:
        for s in range(2):
            a = json.loads((tmp_path / "a" / "cells" / f"{p}.split{s}.json").read_text())
            b = json.loads((tmp_path / "b" / "cells" / f"{p}.split{s}.json").read_text())
            a.pop("seconds"), b.pop("seconds")
            assert a == b
    assert here["cells_run"] == there["cells_run"] == 4
    # resume: a lost cell is recomputed, the others are read back; one more split adds only its cells
    (tmp_path / "a" / "cells" / "CCAT-vs-MCAT.split1.json").unlink()
    again = rc.run(store, tmp_path / "a", **{**kw, "splits": 3})
    assert (again["cells_run"], again["cells_resumed"]) == (3, 3)
    m0 = here["problems"]["CCAT-vs-MCAT"]["per_split"][1]["perceptron/cutoff"]
    assert again["problems"]["CCAT-vs-MCAT"]["per_split"][1]["perceptron/cutoff"] == m0
    with pytest.raises(ValueError, match="holds another run's cells"):
        rc.run(store, tmp_path / "a", **{**kw, "seed": 9})


def test_problems_without_documents_are_skipped(tmp_path):
    info = write_rcv1_corpus(tmp_path / "c", 1500, n_terms=1000, mean_distinct=20, other_fraction=0.0)
    ds = convert_rcv1(info["tokens"], tmp_path / "r.zarr", qrels=info["qrels"])
    res = rc.run(ds.path, tmp_path / "o", problems=["CCAT-vs-OTHER", "ECAT-vs-MCAT"], splits=1, n_sizes=3,
                 figures=False)
    assert res["skipped"] == {"CCAT-vs-OTHER": "no OTHER documents"} and list(res["problems"]) == ["ECAT-vs-MCAT"]
    assert "CCAT-vs-OTHER   skipped: no OTHER documents" in rc.format_table(res)


def test_cli_experiment(store, tmp_path, capsys):
    assert main(["experiment", "rcv1-cutoff", "--out", str(tmp_path / "o"), "--store", store, "--splits", "1",
                 "--sizes", "3", "--problems", "ECAT-vs-GCAT", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].startswith("ECAT-vs-GCAT") and "1 cells run, 0 resumed" in out
    assert main(["experiment", "rcv1-cutoff", "--out", str(tmp_path / "o"), "--store", store,
                 "--problems", "CCAT-vs-FOO"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "problem 'CCAT-vs-FOO'" in err


def test_cli_experiment_list(capsys):
    assert main(["experiment", "--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["obpm-table1", "obpm-figure1", "obpm-drift", "obpm-batch", "cutoff-curves", "budget-fig4",
                     "letter-conversions", "rcv1-cutoff", "celegans-obpm"]
    assert main(["experiment", "rcv1-cutoff"]) == 2
    assert "give an experiment name and --out DIR" in capsys.readouterr().err
