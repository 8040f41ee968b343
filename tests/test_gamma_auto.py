"""``gamma="auto"``: the kernel width raced over the first pass (distlearn.estimators.kernel).

The proof the issue asks for: the width kept is the one of fewest progressive mistakes, checked against
separate single-learner runs over the same rows in the same order (every stage of the race: its survivors
are exactly the better half), and the fitted model is, bit for bit, a separate fit at ``gamma=gamma_``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.base import clone
from sklearn.preprocessing import minmax_scale

import distlearn
from distlearn import KernelMIRA, KernelOBPM, KernelPA, KernelPerceptron, KernelPermutationBPM
from distlearn import rng
from distlearn.cli import main
from distlearn.data.store import create_dataset
from distlearn.estimators.kernel import GAMMA_POWERS, GAMMA_RACE_ROWS, race_length
from distlearn.stream import array_order


def _digits(n=1797):
    X, y = load_digits(return_X_y=True)
    return minmax_scale(X.astype(np.float64))[:n], y[:n]


def _cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return minmax_scale(X), y


def _synthetic(seed):
    X, y = make_classification(2600, n_features=12, n_informative=6, n_classes=3, random_state=seed)
    return X, y


def _separate_errors(est, gamma, X, y, rows):
    """Progressive mistakes of a separate single learner of width ``gamma`` over ``rows`` (in that order)."""
    one = clone(est).set_params(gamma=gamma, epochs=1)
    return one.partial_fit(X[rows], y[rows], classes=np.unique(y)).online_errors_


CASES = [
    ("digits", lambda: _digits(), KernelMIRA(budget="variable", random_state=0)),
    ("digits-poly", lambda: _digits(), KernelPA(kernel="poly", degree=3, coef0=1.0, random_state=1)),
    ("cancer", _cancer, KernelPA(random_state=0)),
    ("synthetic-0", lambda: _synthetic(0), KernelPerceptron(beta=0.1, budget=60, removal="random", random_state=2)),
    ("synthetic-1", lambda: _synthetic(1), KernelMIRA(budget=100, shuffle=False, random_state=3)),
]


@pytest.mark.parametrize("name,data,est", CASES, ids=[c[0] for c in CASES])
def test_auto_keeps_the_lowest_progressive_error(name, data, est):
    X, y = data()
    auto = clone(est).set_params(gamma="auto").fit(X, y)
    n = len(y)
    seed = rng.normalize_seed(est.random_state)
    order = array_order(seed, 0, n, est.shuffle)
    order = np.arange(n) if order is None else order
    scale = 1.0 / (X.shape[1] * X.var())
    assert np.allclose(auto.gammas_, scale * 2.0 ** np.asarray(GAMMA_POWERS))
    rows, errs = auto.gamma_race_rows_, auto.gamma_online_errors_
    # every candidate's count is a separate learner's progressive mistakes over the same rows in the same order
    for g, r, e in zip(auto.gammas_, rows, errs):
        assert e == _separate_errors(est, g, X, y, order[:r]), (g, r)
    # each stage keeps the better half (fewest mistakes on that stage's rows, ties the smaller width)
    alive = list(range(len(auto.gammas_)))
    for r in sorted(set(rows.tolist()))[:-1]:
        assert r % GAMMA_RACE_ROWS == 0  # arrays: a stage ends at an engine-call boundary
        at_r = {i: _separate_errors(est, auto.gammas_[i], X, y, order[:r]) for i in alive}
        best = sorted(alive, key=lambda i: (at_r[i], i))[:(len(alive) + 1) // 2]
        survivors = [i for i in alive if rows[i] > r]
        assert sorted(best) == survivors, (r, at_r)
        alive = survivors
    last = [i for i in alive if rows[i] == rows.max()]
    win = min(last, key=lambda i: (errs[i], i))
    assert auto.gamma_ == auto.gammas_[win]
    assert errs[win] == min(errs[i] for i in last)
    assert rows.max() == min(n, race_length(len(GAMMA_POWERS)))


def _same_model(a, b):
    assert a.gamma_ == b.gamma_
    assert np.array_equal(a.support_vectors_, b.support_vectors_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert np.array_equal(a.cache_size_, b.cache_size_)
    assert (a.online_errors_, a.n_updates_, a.n_removed_, a.n_merged_, a.t_) == \
        (b.online_errors_, b.n_updates_, b.n_removed_, b.n_merged_, b.t_)
    assert a.conversion_info_.keys() == b.conversion_info_.keys()


@pytest.mark.parametrize("est", [
    KernelMIRA(budget="variable", epochs=2, conversion="average", random_state=0),
    KernelPerceptron(beta=0.1, budget=50, removal="random", random_state=5),
    KernelMIRA(budget=40, random_state=1),  # removal "auto": merge
    KernelPA(kernel="poly", degree=2, coef0=1.0, conversion="vote", random_state=2),
], ids=["variable-average-2ep", "fixed-random", "fixed-merge", "poly-vote"])
def test_auto_fit_is_bit_identical_to_a_fit_at_gamma_(est):
    X, y = _digits(1700)
    auto = clone(est).set_params(gamma="auto").fit(X, y)
    assert auto.gamma_online_errors_.min() > 0 and len(set(auto.gamma_race_rows_)) > 1  # a real race ran
    _same_model(auto, clone(est).set_params(gamma=auto.gamma_).fit(X, y))
    assert np.array_equal(auto.decision_function(X[:50]),
                          clone(est).set_params(gamma=auto.gamma_).fit(X, y).decision_function(X[:50]))


def test_auto_on_a_store_is_streamed_and_bit_identical(tmp_path):
    X, y = _digits(1500)
    path = tmp_path / "d.zarr"
    create_dataset(path, X, y, block_rows=300, dtype="float64")
    auto = KernelMIRA(gamma="auto", budget="variable", random_state=0).fit(path)
    assert set(auto.gamma_race_rows_) <= {1200, 1500}  # a stage ends at a block's end (1024 -> 1200)
    _same_model(auto, KernelMIRA(gamma=auto.gamma_, budget="variable", random_state=0).fit(path))
    # the width scales "scale"'s, measured over the whole store, as for arrays
    assert np.allclose(auto.gammas_, KernelMIRA(gamma="auto").fit(X, y).gammas_)


def test_partial_fit_chooses_on_the_first_call_then_keeps():
    X, y = _digits(1600)
    parts = np.array_split(np.arange(len(y)), 4)
    auto = KernelPA(gamma="auto", budget="variable", random_state=0)
    auto.partial_fit(X[parts[0]], y[parts[0]], classes=np.arange(10))
    chosen, errs = auto.gamma_, auto.gamma_online_errors_.copy()
    assert (auto.gamma_race_rows_ == len(parts[0])).all()  # the first call (400 rows) settles the race
    assert auto.gamma_ == auto.gammas_[np.argmin(errs)]
    fixed = KernelPA(gamma=chosen, budget="variable", random_state=0)
    fixed.partial_fit(X[parts[0]], y[parts[0]], classes=np.arange(10))
    for p in parts[1:]:
        auto.partial_fit(X[p], y[p])
        fixed.partial_fit(X[p], y[p])
        assert auto.gamma_ == chosen and np.array_equal(auto.gamma_online_errors_, errs)
    _same_model(auto, fixed)


def test_linear_kernel_has_no_race_and_one_candidate():
    X, y = _cancer()
    m = KernelPerceptron(kernel="linear", gamma="auto", random_state=0).fit(X, y)
    assert m.gammas_.shape == (1,) and m.gamma_race_rows_.tolist() == [0]
    _same_model(m, KernelPerceptron(kernel="linear", gamma=m.gamma_, random_state=0).fit(X, y))


def test_a_failed_auto_fit_leaves_no_model():
    X, y = _digits(1200)
    X = X.copy()
    X[700, 3] = np.nan  # in the race (the first 1024 rows, unshuffled)
    m = KernelMIRA(gamma="auto", shuffle=False)
    with pytest.raises(ValueError, match="row 700"):
        m.fit(X, y)
    assert not hasattr(m, "gamma_") and not hasattr(m, "_race")


def test_ensembles_choose_once_and_give_every_member_the_width(tmp_path):
    X, y = _digits(1300)
    single = KernelMIRA(gamma="auto", budget="variable", random_state=4).fit(X, y)
    # KernelOBPM: the base's race over the first chunk, in the members' order (arrays: a single fit's order)
    obpm = KernelOBPM(n_estimators=4, base=KernelMIRA(gamma="auto", budget="variable"), epochs=2,
                      random_state=4).fit(X, y)
    assert obpm.gamma_ == single.gamma_
    assert np.array_equal(obpm.gamma_online_errors_, single.gamma_online_errors_)
    fixed = KernelOBPM(n_estimators=4, base=KernelMIRA(gamma=obpm.gamma_, budget="variable"), epochs=2,
                       random_state=4).fit(X, y)
    assert np.array_equal(obpm.dual_coef_, fixed.dual_coef_)
    assert np.array_equal(obpm.support_vectors_, fixed.support_vectors_)
    # a fixed RBF budget: the race runs the members' removal ("auto" is "margin" in the kernel OBPM)
    small = KernelOBPM(n_estimators=2, base=KernelMIRA(gamma="auto", budget=40), epochs=1, random_state=4).fit(X, y)
    margin = KernelMIRA(gamma="auto", budget=40, removal="margin", random_state=4).fit(X, y)
    assert small.gamma_ == margin.gamma_
    assert np.array_equal(small.gamma_online_errors_, margin.gamma_online_errors_)
    # KernelPermutationBPM: the race once, as a single fit seeded by random_state runs it; every member takes it
    pbpm = KernelPermutationBPM(n_estimators=3, base="kernel-mira", base_params={"gamma": "auto", "budget": "variable"},
                                epochs=1, random_state=4).fit(X, y)
    assert pbpm.gamma_ == single.gamma_
    assert {e.gamma_ for e in pbpm.estimators_} == {single.gamma_}
    fixed = KernelPermutationBPM(n_estimators=3, base="kernel-mira",
                                 base_params={"gamma": pbpm.gamma_, "budget": "variable"}, epochs=1,
                                 random_state=4).fit(X, y)
    assert np.array_equal(pbpm.dual_coef_, fixed.dual_coef_)
    # a store: both choose on its first blocks, one width for every member
    path = tmp_path / "d.zarr"
    create_dataset(path, X, y, block_rows=650, dtype="float64")
    s = KernelPermutationBPM(n_estimators=2, base=KernelPA(gamma="auto"), epochs=1, random_state=0).fit(path)
    assert {e.gamma_ for e in s.estimators_} == {s.gamma_} and s.gamma_ in s.gammas_
    o = KernelOBPM(n_estimators=3, base=KernelPA(gamma="auto"), epochs=1, random_state=0).fit(path)
    assert o.gamma_ in o.gammas_ and (o.gamma_race_rows_ == 650).all()  # the first block
    # the store fit is the learner-parallel job: it races before the job, then equals the job at gamma_
    at = KernelOBPM(n_estimators=3, base=KernelPA(gamma=o.gamma_), epochs=1, random_state=0).fit(path)
    assert np.array_equal(o.dual_coef_, at.dual_coef_) and np.array_equal(o.support_vectors_, at.support_vectors_)


def test_cli_trains_with_gamma_auto(tmp_path, capsys):
    import json

    from distlearn.model import load_model

    X, y = _digits(600)
    path = tmp_path / "d.zarr"
    create_dataset(path, X, y, block_rows=200, dtype="float64")
    saved = tmp_path / "m.npz"
    assert main(["train", str(path), "--model", "kernel-pa", "--param", "gamma=auto", "--seed", "0", "--json",
                 "--save", str(saved)]) == 0
    out = json.loads(capsys.readouterr().out)
    est = KernelPA(gamma="auto", random_state=0).fit(str(path))
    assert out["online_errors"] == est.online_errors_
    assert load_model(saved).meta["kernel_params"]["gamma"] == est.gamma_ != est.gammas_[0]


@pytest.mark.parametrize("d", [16, 9000, 20000])
def test_piece_bounds_are_the_engine_calls(d):
    """A split at a bound starts a call whose pieces are the whole chunk's from there on."""
    from distlearn.learners.kernel import compacted_pieces, piece_bounds

    m = 5000
    X = np.zeros((1, d))
    whole = [(lo, hi) for lo, hi, *_ in compacted_pieces(X, np.zeros(1, np.int64), np.zeros(m, np.int64))]
    bounds = piece_bounds(d, m)
    assert bounds[0] == 0 and bounds[-1] == m and set(bounds[:-1].tolist()) <= {lo for lo, _ in whole}
    for b in bounds[1:-1]:
        rest = [(b + lo, b + hi) for lo, hi, *_ in compacted_pieces(X, np.zeros(1, np.int64),
                                                                     np.zeros(m - b, np.int64))]
        assert rest == [p for p in whole if p[0] >= b], (d, b)
    if d == 16:
        assert bounds.tolist() == [0, 1024, 2048, 3072, 4096, 5000]
