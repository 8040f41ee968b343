"""The celegans-obpm experiment: cells equal direct fits, Dask = in process, the SVM peer, resume, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.svm import LinearSVC

from distlearn import OBPM
from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.data._dna import convert_sequences, write_splice_corpus
from distlearn.experiments import celegans_obpm as ce


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("splice")
    write_splice_corpus(d / "train.tsv", 1500, random_state=3, positive_fraction=0.3)
    write_splice_corpus(d / "test.tsv", 400, random_state=4, positive_fraction=0.3)
    tr = convert_sequences(d / "train.tsv", d / "train.zarr", features="wd", degree=2, block_rows=500)
    te = convert_sequences(d / "test.tsv", d / "test.zarr", features="wd", degree=2)
    return str(tr.path), str(te.path)


def test_cells_equal_direct_fits_and_the_svm_peer(stores, tmp_path):
    train, test = stores
    res = ce.run(train, test, tmp_path / "o", epochs=(1, 3), permutations=2, taus=(0.2,), sizes=(8,),
                 svm_C=(0.1, 1.0), figures=False)
    X, y = open_dataset(test).to_scipy()
    seed1 = int(ce.rng.hash64(0, ce.rng.stream_id("celegans-obpm/permutation"), 1))
    direct = OBPM(n_estimators=8, tau=0.2, epochs=3, conversion="last", shuffle=True, random_state=seed1).fit(train)
    got = res["runs"]["obpm-tau0.2-N8"]["test_error"]["per_permutation"][1][1]  # 3 epochs, permutation 1
    assert got == np.mean(direct.predict(X) != y)
    # the SVM: C chosen on the last 10 % of the training rows, then refit on all of them
    Xtr, ytr = open_dataset(train).to_scipy()
    cut = 1350
    val = {C: np.mean(LinearSVC(C=C, dual=False, max_iter=5000).fit(Xtr[:cut], ytr[:cut]).predict(Xtr[cut:]) != ytr[cut:])
           for C in (0.1, 1.0)}
    best = min(val, key=lambda C: (val[C], C))
    assert res["svm"]["C"] == best and res["svm"]["validation"] == {str(C): v for C, v in val.items()}
    full = LinearSVC(C=best, dual=False, max_iter=5000).fit(Xtr, ytr)
    assert res["svm"]["test_error"] == np.mean(full.predict(X) != y)
    assert "obpm-tau0.2-N8" in ce.format_table(res) and "LinearSVC (C=" in ce.format_table(res)
    # the refit is a task of its own fed by the validations' results (cached or computed in the same run)
    kw = {"epochs": (1, 3), "permutations": 2, "taus": (0.2,), "sizes": (8,), "svm_C": (0.1, 1.0), "figures": False}
    (tmp_path / "o" / "cells" / "svm.test.json").unlink()
    again = ce.run(train, test, tmp_path / "o", **kw)
    same = lambda a: {k: v for k, v in a["svm"].items() if k != "fit_seconds"}  # noqa: E731
    assert again["cells_run"] == 1 and same(again) == same(res)
    (tmp_path / "o" / "cells" / "svm.test.json").unlink()
    (tmp_path / "o" / "cells" / f"svm.C{best:g}.validate.json").unlink()
    again = ce.run(train, test, tmp_path / "o", **kw)
    assert again["cells_run"] == 2 and same(again) == same(res)


def test_the_longest_cells_start_first_and_the_svm_refit_follows_its_validations(stores, tmp_path, monkeypatch):
    train, test = stores
    submitted = []
    real = ce.Cells.run

    def run(self, ex, todo, progress=None):
        submitted.extend(name for name, _, _ in todo)
        return real(self, ex, todo, progress)

    monkeypatch.setattr(ce.Cells, "run", run)
    ce.run(train, test, tmp_path / "o", epochs=(1, 2), permutations=1, taus=(0.05, 0.2), sizes=(4,),
           svm_C=(0.1, 1.0), figures=False)
    assert submitted[:3] == ["svm.C0.1.validate", "svm.C1.validate", "svm.test"]
    # cost = epochs x (1 + N (0.1 + tau)) for OBPM, epochs for the single learners: 4.4, 3.2, 2.2, 2, 2, 1.6, 1, 1
    assert submitted[3:] == ["obpm-tau0.2-N4.e2.p0", "obpm-tau0.05-N4.e2.p0", "obpm-tau0.2-N4.e1.p0",
                             "perceptron.e2.p0", "alma.e2.p0", "obpm-tau0.05-N4.e1.p0", "perceptron.e1.p0",
                             "alma.e1.p0"]


def test_dask_equals_in_process_and_resume(stores, client, tmp_path):
    train, test = stores
    kw = {"epochs": (1, 2), "permutations": 2, "taus": (0.05,), "sizes": (6,), "svm_C": (0.1, 1.0),
          "figures": False}
    here = ce.run(train, test, tmp_path / "a", **kw)
    there = ce.run(train, test, tmp_path / "b", scheduler=client, **kw)
    for r in here["runs"]:
        assert here["runs"][r]["test_error"] == there["runs"][r]["test_error"]
        assert here["runs"][r]["n_updates"] == there["runs"][r]["n_updates"]
    for k in ("C", "test_error", "validation"):  # the refit fed by the validations' futures on Dask
        assert here["svm"][k] == there["svm"][k]
    assert here["cells_run"] == 12 + 3
    (tmp_path / "a" / "cells" / "alma.e2.p1.json").unlink()
    again = ce.run(train, test, tmp_path / "a", **kw)
    assert (again["cells_run"], again["cells_resumed"]) == (1, 14)
    assert again["runs"]["alma"]["test_error"] == here["runs"]["alma"]["test_error"]
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["runs"]["obpm-tau0.05-N6"] == {"kind": "obpm", "tau": 0.05, "n_estimators": 6,
                                                     "conversion": "last"}


def test_cli_celegans(stores, tmp_path, capsys):
    train, test = stores
    assert main(["experiment", "celegans-obpm", "--out", str(tmp_path / "o"), "--train-store", train,
                 "--test-store", test, "--epochs", "1", "--permutations", "1", "--tau", "0.2",
                 "--n-estimators", "4", "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["run", "1", "epoch"] and "obpm-tau0.2-N4" in out
    assert main(["experiment", "celegans-obpm", "--out", str(tmp_path / "p"), "--train-store", train]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give both a training and a test set" in err
