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
from distlearn.stream import coerce, epoch_chunks, read_block, store_token


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


def _cell_before(view, token, split, seed, test_fraction, sizes, radius):
    """``run_cell`` as it was before the whole protocol was timed (issue 30): ``partial_fit`` on every
    piece of every block, the test rows read again with ``read_block``; the oracle of the tests below."""
    ds = rc.open_store(view, token)
    test = rc.test_rows(seed, split, ds.n_samples, test_fraction)
    n_train = int((~test).sum())
    sizes = [s for s in sizes if s <= n_train]
    classes = np.array([-1, 1])
    ests = rc._estimators(n_train, radius, seed)
    hyps, k_cut, updates = [], {"perceptron": [], "margin": []}, {"perceptron": [], "margin": []}
    seen, nxt = 0, 0
    order_seed = int(rc.rng.hash64(seed, rc.rng.stream_id("rcv1-cutoff/order"), split))
    for ch in epoch_chunks(ds, seed=order_seed, epoch=0, shuffle=True, classes=classes, dtype=np.float64):
        idx = np.arange(ch.X.shape[0]) if ch.order is None else ch.order
        idx = idx[~test[ch.first_row + idx]]
        at = 0
        while at < len(idx) and nxt < len(sizes):
            take = idx[at:at + sizes[nxt] - seen]
            for e in ests.values():
                e.partial_fit(ch.X[take], classes[ch.y[take]], classes=classes)
            seen += len(take)
            at += len(take)
            if seen == sizes[nxt]:
                hyps.extend(np.append(np.ravel(e.coef_), np.ravel(e.intercept_)) for e in ests.values())
                for lr in rc.LEARNERS:
                    k_cut[lr].append(int(ests[f"{lr}/cutoff"].summary_.k_))
                    updates[lr].append(int(ests[f"{lr}/last"].n_updates_))
                nxt += 1
        if nxt == len(sizes):
            break
    W = np.vstack(hyps).T
    err, hinge, n_test = np.zeros(W.shape[1]), np.zeros(W.shape[1]), 0
    for b in range(ds.n_blocks):
        blk = read_block(ds, b)
        rows = np.flatnonzero(test[blk.first_row:blk.first_row + blk.X.shape[0]])
        if len(rows):
            f = np.asarray(coerce(blk.X, np.float64)[rows] @ W[:-1]) + W[-1]
            yv = np.asarray(blk.y)[rows].astype(np.float64)[:, None]
            err += ((f >= 0) != (yv > 0)).sum(axis=0)
            hinge += np.maximum(0.0, 1.0 - yv * f).sum(axis=0)
            n_test += len(rows)
    err, hinge, k = err / n_test, hinge / n_test, len(ests)
    out = {"problem": view.rpartition("#")[2], "split": split, "sizes": sizes, "n_train": n_train,
           "n_test": n_test, "radius": radius}
    for j, name in enumerate(ests):
        out[name] = (err if name.startswith("perceptron") else hinge)[j::k].tolist()
        if name.startswith("margin"):
            out[f"{name}/error"] = err[j::k].tolist()
    for lr in rc.LEARNERS:
        out[f"{lr}/cutoff_k"], out[f"{lr}/updates"] = k_cut[lr], updates[lr]
    return out


def _same_aggregates(new, old):
    """Every 0-1 error, k* and update count equal; hinge losses within summation-order tolerance."""
    assert new.keys() == old.keys()
    for key in new:
        if key.startswith("margin/") and not key.endswith(("/error", "_k", "/updates")):
            np.testing.assert_allclose(new[key], old[key], rtol=1e-12, atol=0)
        else:
            assert new[key] == old[key], key


@pytest.mark.parametrize("batch_rows", [97, 65_536])
def test_cells_equal_the_per_piece_cell_of_before(store, monkeypatch, batch_rows):
    # The cell now gives its learners the rows between two sizes in pieces of up to _BATCH_ROWS rows
    # (97: pieces that cross blocks and split sizes; 65,536: one call per size) and scores the test
    # rows from the block cache: the same numbers as a partial_fit per block piece and a second read.
    monkeypatch.setattr(rc, "_BATCH_ROWS", batch_rows)
    for problem, split in (("CCAT-vs-GCAT", 0), ("ECAT-vs-OTHER", 3)):
        path = f"{store}#{problem}"
        ds = open_dataset(path)
        sizes = sorted({int(round(s)) for s in np.geomspace(10, int(ds.n_samples * 0.8 * 0.98), 8)})
        args = (path, store_token(ds), split, 2, 0.2, sizes, 3.0)
        new, old = rc.run_cell(*args), _cell_before(*args)
        assert new.pop("seconds") > 0 and new.pop("cpu_seconds") > 0
        _same_aggregates(new, old)


@pytest.mark.slow
def test_protocol_aggregates_equal_the_per_piece_protocol_of_before(tmp_path):
    # the whole protocol (10 problems x 2 splits) on a 60,000-document corpus: results.json's
    # aggregates equal those of the cells of before (every mean and std over the splits)
    info = write_rcv1_corpus(tmp_path / "c", 60_000, random_state=0)
    ds = convert_rcv1(info["tokens"], tmp_path / "r.zarr", qrels=info["qrels"])
    res = rc.run(ds.path, tmp_path / "o", splits=2, figures=False)
    path, radius = str(ds.path), res["meta"]["radius"]
    cells = {}
    for p, entry in res["problems"].items():
        view = f"{path}#{p}"
        for c in entry["per_split"]:
            cells[(p, c["split"])] = _cell_before(view, store_token(open_dataset(view)), c["split"], 0, 0.2,
                                                  c["sizes"], radius)
    old = rc.aggregate(cells, list(res["problems"]), res["skipped"])
    assert len(cells) == 20 and old["problems"].keys() == res["problems"].keys()
    for p, entry in res["problems"].items():
        for key, value in entry.items():
            if key == "per_split":
                for a, b in zip(value, old["problems"][p]["per_split"]):
                    _same_aggregates({k: v for k, v in a.items() if k not in ("seconds", "cpu_seconds")}, b)
            elif isinstance(value, dict):  # mean and std per size
                _same_aggregates({f"{key}/mean": value["mean"], f"{key}/std": value["std"]},
                                 {f"{key}/mean": old["problems"][p][key]["mean"],
                                  f"{key}/std": old["problems"][p][key]["std"]})
            else:
                assert value == old["problems"][p][key], key


def test_dask_cells_equal_in_process_and_resume(store, client, tmp_path):
    kw = {"problems": ["CCAT-vs-MCAT", "GCAT-vs-OTHER"], "splits": 2, "n_sizes": 5, "figures": False}
    here = rc.run(store, tmp_path / "a", **kw)
    there = rc.run(store, tmp_path / "b", scheduler=client, **kw)
    for p in kw["problems"]:
        for s in range(2):
            a = json.loads((tmp_path / "a" / "cells" / f"{p}.split{s}.json").read_text())
            b = json.loads((tmp_path / "b" / "cells" / f"{p}.split{s}.json").read_text())
            for c in (a, b):
                c.pop("seconds"), c.pop("cpu_seconds")
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
