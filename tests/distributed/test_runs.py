"""Run-parallel mode: grids x repeats x folds as independent, seeded tasks (distlearn.distributed.runs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distlearn import ALMA, OBPM, Perceptron
from distlearn.data.store import create_dataset
from distlearn.data.synthetic import make_obpm_artificial
from distlearn.distributed.runs import RunError, RunTable, data_seed, kfold_bounds, run_grid, run_seed

N_TRAIN, N_TEST, D, BLOCK = 600, 300, 20, 100
OBPM_GRID = {"tau": [0.1, 0.4], "n_estimators": [5, 20]}
ALMA_GRID = {"B": [0.5, 1.25], "C": [0.71, 1.41]}


@pytest.fixture(scope="module")
def data():
    return make_obpm_artificial(N_TRAIN, N_TEST, n_features=D, label_noise=0.05, random_state=3)


@pytest.fixture(scope="module")
def stores(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("runs")
    tr = create_dataset(d / "train.zarr", data.X_train, data.y_train, block_rows=BLOCK, dtype="float64")
    te = create_dataset(d / "test.zarr", data.X_test, data.y_test, block_rows=BLOCK, dtype="float64")
    assert tr.n_blocks == 6
    return str(tr.path), str(te.path)


# Data factories: a fresh data set per repeat.  Lambdas, so that Dask ships them by value
# (cloudpickle) -- the workers cannot import this test module by name.
_factory_train = lambda seed: make_obpm_artificial(200, 0, n_features=D, random_state=seed)[:2]  # noqa: E731
_factory_test = lambda seed: make_obpm_artificial(0, 200, n_features=D, random_state=seed)[2:4]  # noqa: E731


def _strip(table):
    """Rows without the one measured column."""
    return [{k: v for k, v in r.items() if k != "fit_seconds"} for r in table]


# ---------------------------------------------------------------- in-process vs a real cluster


@pytest.mark.cluster
def test_cluster_rows_equal_in_process(client, stores, data):
    """Same rows, float for float, here and on 2 worker processes: stores, scattered arrays, folds, factories."""
    train, test = stores
    cases = [
        (OBPM(epochs=1, fit_intercept=False), OBPM_GRID, train, test, {"repeats": 2}),
        (ALMA(epochs=2), ALMA_GRID, train, None, {"folds": 3}),
        (ALMA(epochs=1), ALMA_GRID, (data.X_train, data.y_train), (data.X_test, data.y_test), {"repeats": 2}),
        (OBPM(n_estimators=10), {"tau": [0.2, 0.5]}, _factory_train, _factory_test, {"repeats": 2}),
    ]
    metrics = ("test_error", "train_error", "online_error", "n_updates", "train_margin", "fit_seconds")
    for (est, grid, tr, te, kw), n_runs in zip(cases, (8, 12, 8, 4)):
        here = run_grid(est, grid, tr, te, metrics=metrics, return_models=True, **kw)
        there = run_grid(est, grid, tr, te, metrics=metrics, return_models=True, scheduler=client, **kw)
        assert _strip(here) == _strip(there)
        assert len(here) == len(there) == n_runs
        for a, b in zip(here.models, there.models):
            assert np.array_equal(a["coef"], b["coef"]) and np.array_equal(a["intercept"], b["intercept"])
        assert all(isinstance(r["fit_seconds"], float) for r in there)
    # Resubmitting gives the same deterministic keys and rows.
    again = run_grid(*cases[0][:4], scheduler=client, **cases[0][4])
    assert _strip(again) == _strip(run_grid(*cases[0][:4], **cases[0][4]))


@pytest.mark.cluster
def test_cluster_budget_grid_equals_in_process(client, data):
    """The budget paper's protocol -- cache sizes x permutations -- and a kernel OBPM, as seeded tasks: the same
    rows and the same support vectors and coefficients here and on 2 worker processes."""
    from distlearn import KernelMIRA, KernelOBPM

    tr, te = (data.X_train, data.y_train), (data.X_test, data.y_test)
    cases = [(KernelMIRA(gamma=0.05), {"budget": [None, "variable", 30, 60]}),
             (KernelOBPM(n_estimators=4, base=KernelMIRA(gamma=0.05, budget="variable")), {"tau": [0.5, 0.9]})]
    metrics = ("test_error", "online_error", "n_support", "n_updates")
    for est, grid in cases:
        here = run_grid(est, grid, tr, te, repeats=3, metrics=metrics, return_models=True)
        there = run_grid(est, grid, tr, te, repeats=3, metrics=metrics, return_models=True, scheduler=client)
        assert _strip(here) == _strip(there) and len(here) == 3 * len(next(iter(grid.values())))
        for a, b in zip(here.models, there.models):
            assert np.array_equal(a["support_vectors"], b["support_vectors"])
            assert np.array_equal(a["dual_coef"], b["dual_coef"])
        assert len({r["n_support"] for r in here}) > 1  # the repeats are different permutations


@pytest.mark.cluster
def test_cluster_failure_names_the_run(client, tmp_path):
    X = np.vstack([np.eye(4), -np.eye(4)]).repeat(25, axis=0)
    y = np.array([1] * 50 + [-1] * 150)  # fold 0 of 4 (block 0) holds every +1: its training set has one class
    path = create_dataset(tmp_path / "sorted.zarr", X, y, block_rows=50).path
    with pytest.raises(RunError, match=r"setting 0 \{'C': 1.0\}, repeat 0, fold 0 .*at least 2 classes") as e:
        run_grid(ALMA(epochs=1), {"C": [1.0]}, path, folds=4, scheduler=client, retries=1)
    assert (e.value.params, e.value.repeat, e.value.fold) == ({"C": 1.0}, 0, 0)


# ---------------------------------------------------------------- seeds and repeats


def test_repeats_have_distinct_reproducible_seeds(stores):
    train, test = stores
    t1 = run_grid(OBPM(epochs=1), OBPM_GRID, train, test, repeats=3, random_state=7)
    t2 = run_grid(OBPM(epochs=1), OBPM_GRID, train, test, repeats=3, random_state=7)
    assert _strip(t1) == _strip(t2)
    seeds = {(r["setting"], r["repeat"]): r["seed"] for r in t1}
    for s in range(4):  # distinct per repeat, common to every setting (common random numbers)
        assert [seeds[s, r] for r in range(3)] == [run_seed(7, r) for r in range(3)]
    assert len({run_seed(7, r) for r in range(3)}) == 3
    # The seed reaches the estimator: repeat r equals a plain fit with that random_state.
    r1 = t1.rows[1]
    est = OBPM(epochs=1, tau=r1["tau"], n_estimators=r1["n_estimators"], random_state=r1["seed"]).fit(train)
    assert r1["n_updates"] == est.n_updates_
    assert r1["test_error"] == float(np.mean(est.predict(test) != _labels(test)))
    assert len({r["n_updates"] for r in t1 if r["setting"] == 3}) > 1  # repeats differ
    t3 = run_grid(OBPM(epochs=1), OBPM_GRID, train, test, repeats=3, random_state=8)
    assert {r["seed"] for r in t3}.isdisjoint({r["seed"] for r in t1})
    # A longer run extends a shorter one: repeats 0..2 are the same runs.
    t4 = run_grid(OBPM(epochs=1), OBPM_GRID, train, test, repeats=4, random_state=7)
    assert _strip([r for r in t4 if r["repeat"] < 3]) == _strip(t1)


def test_factory_gets_one_data_seed_per_repeat():
    t = run_grid(OBPM(n_estimators=5), {"tau": [0.3, 0.6]}, _factory_train, _factory_test, repeats=3, random_state=1)
    assert [r["data_seed"] for r in t if r["setting"] == 0] == [data_seed(1, r) for r in range(3)]
    assert [r["data_seed"] for r in t if r["setting"] == 1] == [data_seed(1, r) for r in range(3)]
    d = make_obpm_artificial(200, 200, n_features=D, random_state=data_seed(1, 2))
    est = OBPM(n_estimators=5, tau=0.6, random_state=run_seed(1, 2)).fit(d.X_train, d.y_train)
    assert t.rows[-1]["test_error"] == float(np.mean(est.predict(d.X_test) != d.y_test))
    assert t.rows[-1]["n_train"] == t.rows[-1]["n_test"] == 200


# ---------------------------------------------------------------- folds


def _labels(path):
    from distlearn.data.store import open_dataset

    return open_dataset(path).to_numpy()[1]


@pytest.mark.parametrize("kind", ["store", "arrays"])
def test_folds_partition_the_data(kind, stores, data):
    train = stores[0] if kind == "store" else (data.X_train, data.y_train)
    k = 4
    t = run_grid(Perceptron(epochs=1), {"fit_intercept": [True, False]}, train, folds=k, repeats=2,
                 metrics=("test_error", "n_updates"), return_models=True)
    assert len(t) == 2 * 2 * k
    for s in range(2):
        for r in range(2):
            rows = [row for row in t if row["setting"] == s and row["repeat"] == r]
            assert [row["fold"] for row in rows] == list(range(k))
            covered = np.zeros(N_TRAIN, int)
            for row in rows:
                covered[row["test_start"] : row["test_stop"]] += 1
                assert row["n_test"] == row["test_stop"] - row["test_start"]
                assert row["n_train"] + row["n_test"] == N_TRAIN
            assert np.all(covered == 1)  # each row in exactly one test fold
    if kind == "store":  # whole blocks: 6 blocks in 4 runs of 2, 2, 1, 1
        assert [(row["test_start"], row["test_stop"]) for row in t.rows[:k]] == [(0, 200), (200, 400), (400, 500), (500, 600)]
    else:
        assert [(row["test_start"], row["test_stop"]) for row in t.rows[:k]] == kfold_bounds(N_TRAIN, k)
    # Fold f trains on exactly the other rows and tests on its own.
    X, y = data.X_train, data.y_train
    for i in (2, 5):
        row, model = t.rows[i], t.models[i]
        a, b = row["test_start"], row["test_stop"]
        keep = np.r_[0:a, b:N_TRAIN]
        est = Perceptron(epochs=1, fit_intercept=row["fit_intercept"], random_state=row["seed"]).fit(X[keep], y[keep])
        assert np.array_equal(model["coef"], est.coef_) and np.array_equal(model["intercept"], est.intercept_)
        assert row["test_error"] == float(np.mean(est.predict(X[a:b]) != y[a:b]))


def test_kfold_bounds():
    assert kfold_bounds(6, 4) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert kfold_bounds(5, 5) == [(i, i + 1) for i in range(5)]
    with pytest.raises(ValueError, match="cannot cut 3 items into 4"):
        kfold_bounds(3, 4)


# ---------------------------------------------------------------- the table


def test_table_summary_format_json(stores, tmp_path):
    train, test = stores
    t = run_grid(ALMA(epochs=1), ALMA_GRID, train, test, repeats=3, metrics=("test_error", "n_updates", "train_margin"))
    assert len(t) == 12 and [r["setting"] for r in t][:4] == [0, 0, 0, 1] and t.param_names == ["B", "C"]
    assert all(isinstance(v, (int, float, str, type(None))) for r in t for v in r.values())
    summ = t.summary()
    assert [(s["B"], s["C"]) for s in summ] == [(0.5, 0.71), (0.5, 1.41), (1.25, 0.71), (1.25, 1.41)]
    errs = [r["test_error"] for r in t if r["setting"] == 2]
    assert summ[2]["runs"] == 3
    assert summ[2]["test_error_mean"] == pytest.approx(np.mean(errs))
    assert summ[2]["test_error_std"] == pytest.approx(np.std(errs, ddof=1))

    text = t.format()
    lines = text.splitlines()
    assert lines[0].split() == ["B", "C", "runs", "test_error", "n_updates", "train_margin"]
    assert set(lines[1].replace(" ", "")) == {"-"} and len(lines) == 2 + 4
    # Aligned: every column ends where its header ends (numbers right-aligned).
    end = lines[0].index("test_error") + len("test_error")
    for line in lines[2:]:
        assert line.count("±") == 3
        assert line[end - 1] != " " and (len(line) == end or line[end] == " ")
    assert lines[2].split()[:3] == ["0.5", "0.71", "3"]
    m = summ[0]["test_error_mean"]
    assert f"{m:.4f}" in lines[2] or f"{m:.5f}" in lines[2]
    assert t.format(["n_updates"]).splitlines()[0].split() == ["B", "C", "runs", "n_updates"]
    assert str(t) == text and "12 runs, 4 settings of B, C" in repr(t)

    best = t.best("test_error")
    assert best["mean"] == min(s["test_error_mean"] for s in summ)
    assert ALMA(epochs=1).set_params(**best["params"]).B == best["B"]
    assert t.best("train_margin")["mean"] == max(s["train_margin_mean"] for s in summ)

    text_json = t.to_json(tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert json.loads(text_json) == doc and doc["rows"] == t.rows and doc["config"]["repeats"] == 3
    back = RunTable.from_dict(doc)
    assert back.format() == text and back.rows == t.rows and back.best()["params"] == best["params"]


def test_table_with_estimator_values_and_missing_metrics(data):
    from distlearn import PermutationBPM

    t = run_grid(PermutationBPM(n_estimators=3), {"base": ["perceptron", ALMA(C=0.5)]},
                 (data.X_train, data.y_train), (data.X_test, data.y_test), metrics=("test_error", "online_error"))
    assert t.rows[1]["base"] == "ALMA(C=0.5)" and isinstance(t.settings[1]["base"], ALMA)
    assert t.rows[0]["online_error"] is None  # PermutationBPM keeps no progressive mistakes
    line = t.format().splitlines()[2]
    assert line.rstrip().endswith("-") and "perceptron" in line
    json.loads(t.to_json())


def test_progress_bar(stores, capsys):
    run_grid(Perceptron(epochs=1), {"fit_intercept": [True, False]}, stores[0], stores[1], progress=True)
    err = capsys.readouterr().err
    assert "runs" in err and "2/2" in err
    run_grid(Perceptron(epochs=1), None, stores[0], stores[1])
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- errors


def test_errors(stores, data):
    train, test = stores
    est = OBPM(epochs=1)
    with pytest.raises(ValueError, match=r"OBPM has no parameter 'taus'; did you mean 'tau'"):
        run_grid(est, {"taus": [0.1]}, train, test)
    with pytest.raises(ValueError, match="param_grid is empty"):
        run_grid(est, [], train, test)
    with pytest.raises(ValueError, match="parameter 'tau' has an empty list"):
        run_grid(est, {"tau": []}, train, test)
    with pytest.raises(TypeError, match="values of 'tau' must be a list"):
        run_grid(est, {"tau": 0.3}, train, test)
    with pytest.raises(ValueError, match="random_state is set per run"):
        run_grid(est, {"random_state": [1, 2]}, train, test)
    with pytest.raises(ValueError, match=r"setting \{'tau': 1.5\}: tau must be"):
        run_grid(est, {"tau": [0.3, 1.5]}, train, test)
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="folds must be an int >= 2"):
            run_grid(est, None, train, folds=bad)
    with pytest.raises(ValueError, match="folds=7 needs at least 7 blocks, but store .* has 6"):
        run_grid(est, None, train, folds=7)
    with pytest.raises(ValueError, match="not both"):
        run_grid(est, None, train, test, folds=3)
    with pytest.raises(ValueError, match="repeats must be"):
        run_grid(est, None, train, test, repeats=0)
    with pytest.raises(ValueError, match=r"unknown metrics \['accuracy'\]"):
        run_grid(est, None, train, test, metrics=["accuracy"])
    with pytest.raises(ValueError, match="'test_error' needs test= or folds="):
        run_grid(est, None, train, metrics=["test_error"])
    with pytest.raises(TypeError, match="needs training data"):
        run_grid(est, {"tau": [0.1]})
    with pytest.raises(FileNotFoundError):
        run_grid(est, None, train + ".missing", test)
    with pytest.raises(ValueError, match="as many rows"):
        run_grid(est, None, (data.X_train, data.y_train[:-1]))
    # No test set: the default metrics leave test_error out.
    t = run_grid(est, None, train)
    assert t.metrics == ("online_error", "fit_seconds", "n_updates") and t.param_names == [] and len(t) == 1
    with pytest.raises(ValueError, match="was not recorded"):
        t.best("test_error")


def test_failing_run_names_params_repeat_and_fold():
    X = np.vstack([np.eye(4), -np.eye(4)]).repeat(10, axis=0)
    y = np.array([1] * 20 + [-1] * 60)  # fold 0 of 4 holds every +1, so its training set has one class
    with pytest.raises(RunError, match=r"setting 0 \{'B': 1.0\}, repeat 0, fold 0 \(seed \d+\): ValueError: .*2 classes") as e:
        run_grid(ALMA(epochs=1), {"B": [1.0, 2.0]}, (X, y), folds=4)
    assert (e.value.setting, e.value.params, e.value.repeat, e.value.fold) == (0, {"B": 1.0}, 0, 0)
    assert isinstance(e.value.__cause__, ValueError)
