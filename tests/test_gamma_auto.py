"""``gamma="auto"``: the kernel width raced over the first pass (distlearn.estimators.kernel).

The proof the issue asks for: the width kept is the one of fewest progressive mistakes, checked against
separate single-learner runs over the same rows in the same order (every stage of the race: its survivors
are exactly the better half), and the fitted model is, bit for bit, a separate fit at ``gamma=gamma_``.

The candidates share their kernel rows' dot products (computed once per engine call for every candidate:
``shared_dots``); every candidate is still, bit for bit, its own separate run -- the same kernel values, so
the same decisions at every round, threshold or not (the issue allows rtol 1e-6 on kernel values; the shared
products are summed as the engine sums them, so no tolerance is needed and none is used).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.base import clone
from sklearn.preprocessing import minmax_scale

import distlearn
from distlearn import KernelMIRA, KernelOBPM, KernelPA, KernelPerceptron, KernelPermutationBPM
from distlearn import rng
from distlearn.cli import main
from distlearn.data.store import create_dataset
import distlearn.estimators.kernel as EK
from distlearn.estimators.kernel import (GAMMA_POWERS, GAMMA_RACE_ROWS, GAMMA_WIDEN, GAMMA_WIDEN_SHORT, GAMMA_SHARE_BYTES, GAMMA_SHARE_FEATURES,
                                         race_length, race_winner)
from distlearn.learners import make_rule
from distlearn.learners._budget import shared_csr_dots, shared_dots
from distlearn.learners.kernel import init_budget_state, learn_budget_chunk, make_kernel
from distlearn.stream import array_order


def _digits(n=1797):
    X, y = load_digits(return_X_y=True)
    return minmax_scale(X.astype(np.float64))[:n], y[:n]


def _cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return minmax_scale(X), y


def _synthetic(seed, n=2600):
    X, y = make_classification(n, n_features=12, n_informative=6, n_classes=3, random_state=seed)
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
    # longer than the race (4,096 rows): it ends within the first pass's chunk, and the kept learner goes on
    ("synthetic-long", lambda: _synthetic(2, 5000), KernelMIRA(budget="variable", random_state=5)),
]


@pytest.mark.parametrize("name,data,est", CASES, ids=[c[0] for c in CASES])
def test_auto_keeps_the_lowest_progressive_error_to_one_standard_error(name, data, est):
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
    # each stage keeps the better half (fewest mistakes on that stage's rows, ties the smaller width), and the
    # leader's wider neighbour runs beside them (the shadow): the runners past a stage are exactly those
    alive, shadow = list(range(len(auto.gammas_))), None
    for r in sorted(set(rows.tolist()))[:-1]:
        assert r % GAMMA_RACE_ROWS == 0  # arrays: a stage ends at an engine-call boundary
        at_r = {i: _separate_errors(est, auto.gammas_[i], X, y, order[:r]) for i in alive}
        best = sorted(alive, key=lambda i: (at_r[i], i))[:(len(alive) + 1) // 2]
        lead = min(best, key=lambda i: (at_r[i], i))
        shadow = lead - GAMMA_WIDEN if lead - GAMMA_WIDEN >= 0 and lead - GAMMA_WIDEN not in best else None
        survivors = [i for i in range(len(rows)) if rows[i] > r]
        assert sorted(best + ([] if shadow is None else [shadow])) == survivors, (r, at_r)
        alive = best
    win = _one_se(errs, alive, rows.max())
    assert auto.gamma_race_winner_ == auto.gammas_[win]
    assert errs[win] <= min(errs[i] for i in alive) + np.sqrt(max(min(errs[i] for i in alive), 1))
    # the width kept: when the race had every row of the first pass (settled by its end, before its last stage),
    # one power of two wider than the winner if that one ran the whole race; else the winner
    if _short(est, n):  # the race ran as a pass of its own and the fit refitted the width its check kept
        assert auto.gamma_ == _checked_width(auto)
    else:
        assert auto.gamma_ == auto.gammas_[_kept(win, rows, settled=rows.max() == n < race_length(len(GAMMA_POWERS)))]
    assert rows.max() == min(n, race_length(len(GAMMA_POWERS)))


def _short(est, n):
    """Whether ``gamma="auto"`` races as a pass of its own and refits (GAMMA_WIDEN_SHORT): epochs "auto", a variable
    budget, an RBF or polynomial kernel and a first pass within the race's rows."""
    return est.epochs == "auto" and est.budget == "variable" and est.kernel != "linear" \
        and n <= race_length(len(GAMMA_POWERS))


def _checked_width(auto):
    """The width a short fit keeps: a quarter of the race's winner, unless the cross-validated check
    (``gamma_check_errors_``: the quarter's mistakes, the winner's) found strictly fewer at the winner."""
    check = auto.gamma_check_errors_
    assert check.shape in ((0,), (2,))
    keep_winner = check.size == 2 and check[1] < check[0]
    return auto.gamma_race_winner_ if keep_winner else auto.gamma_race_winner_ * 2.0 ** -GAMMA_WIDEN_SHORT


def _kept(win, rows, settled):
    """The place of the width ``gamma="auto"`` keeps: one power of two wider than the winner ``win`` when the
    race was settled by the end of the first pass and that width ran all of it, else the winner."""
    wider = win - GAMMA_WIDEN
    return wider if settled and wider >= 0 and rows[wider] == rows.max() else win


def _one_se(errs, last, n):
    """The last cut's rule, written out: the smallest gamma among ``last`` whose mistakes are within one
    binomial standard error of the fewest."""
    e = min(int(errs[i]) for i in last)
    return min(i for i in last if errs[i] <= e + np.sqrt(max(e, 1) * (1 - e / n)))


def test_the_last_cut_keeps_the_widest_kernel_within_one_standard_error():
    # breast cancer's race (455 rows): 8 x "scale" erred 17 times, 4 x 21 -- inside one standard error (4.0)
    assert race_winner([25, 24, 22, 21, 17, 19, 21], 455) == 3
    assert race_winner([25, 24, 22, 22, 17, 19, 21], 455) == 4  # 22 > 17 + 4.0: the fewest
    assert race_winner([752, 784], 4096) == 0 and race_winner([784, 752], 4096) == 1  # LETTER finalists: one standard error 24.8
    assert race_winner([5, 5], 100) == 0 and race_winner([0, 1], 50) == 0 and race_winner([2, 0], 50) == 1
    assert race_winner([3], 0) == 0
    with pytest.raises(ValueError, match="no runner"):
        race_winner([], 10)


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


def test_a_race_that_ends_within_the_first_pass_hands_over_to_the_kept_width():
    """5,000 rows: the race is decided after 4,096 of them, within the pass, and the winner itself (not widened:
    the pass goes on over new rows) learns the rest; the model is a fit at gamma_ (two passes, the second
    without a race)."""
    X, y = _synthetic(3, 5000)
    auto = KernelMIRA(budget="variable", epochs=2, random_state=1).fit(X, y)
    assert auto.gamma_race_rows_.max() == race_length(len(GAMMA_POWERS)) < len(y)
    assert auto.gamma_ == auto.gamma_race_winner_
    _same_model(auto, KernelMIRA(budget="variable", epochs=2, gamma=auto.gamma_, random_state=1).fit(X, y))


def _passes(est, X, y, gamma, most, share):
    """The fits at ``gamma`` of 1 .. ``most`` passes, and the passes ``epochs="auto"`` asks for: the first whose
    updates (the difference of consecutive fits' ``n_updates_``) are under ``share`` of the rows, else ``most``."""
    fits = {e: clone(est).set_params(gamma=gamma, epochs=e).fit(X, y) for e in range(1, most + 1)}
    upd = [fits[e].n_updates_ - (fits[e - 1].n_updates_ if e > 1 else 0) for e in fits]
    return fits, next((e for e in fits if upd[e - 1] < share * len(y)), most)


@pytest.mark.parametrize("n,most", [(1200, 2), (1500, 30)])
def test_a_short_first_pass_races_alone_then_refits_a_quarter_of_the_winner(monkeypatch, n, most):
    """``epochs="auto"``, ``budget="variable"`` and a first pass within the race's rows: the race runs as a pass
    of its own (its record is a one-pass fit's), and the model is bit for bit a fit at a quarter of its winner's
    width (``GAMMA_WIDEN_SHORT``; a runner's width or one wider than all) for the passes the short rule asks for: the first whose
    update share is under ``AUTO_EPOCH_UPDATES_SHORT``, at most ``AUTO_EPOCHS_SHORT`` (here ``most``: 2 stops on the
    cap, 30 on the share).  The cross-validated check of the width is off here (its own tests are below)."""
    monkeypatch.setattr(EK, "AUTO_EPOCHS_SHORT", most)
    monkeypatch.setattr(EK, "GAMMA_CHECK_FOLDS", 0)
    X, y = _digits(n)
    est = KernelMIRA(budget="variable", random_state=0)
    auto = clone(est).fit(X, y)
    race = clone(est).set_params(epochs=1).fit(X, y)
    for name in ("gammas_", "gamma_online_errors_", "gamma_race_rows_"):
        assert np.array_equal(getattr(auto, name), getattr(race, name)), name
    assert auto.gamma_race_winner_ == race.gamma_race_winner_ and GAMMA_WIDEN_SHORT == 2
    assert auto.gamma_ == race.gamma_race_winner_ / 4 and auto.gamma_check_errors_.size == 0
    fits, want = _passes(est, X, y, auto.gamma_, most, EK.AUTO_EPOCH_UPDATES_SHORT)
    assert auto.n_iter_ == want and (want == most) == (most == 2)  # the cap, then the share, decided it
    _same_model(auto, fits[want])
    assert np.array_equal(auto.decision_function(X[:40]), fits[want].decision_function(X[:40]))


@pytest.mark.parametrize("rows,want", [(2400, 4), (1, 3), (10**6, 6)])
def test_a_short_fit_runs_at_most_the_passes_its_rows_allow(monkeypatch, rows, want):
    """The short rule's passes are bounded by AUTO_ROWS_SHORT rows in all (at least AUTO_EPOCHS_MAX passes, at most
    AUTO_EPOCHS_SHORT): 600 rows with a budget of 2,400 run 4; of 1, the floor of 3; of a million, the cap (6 here).
    The update share is set to 0 so that only the caps stop it, and the width's check is off."""
    monkeypatch.setattr(EK, "AUTO_ROWS_SHORT", rows)
    monkeypatch.setattr(EK, "GAMMA_CHECK_FOLDS", 0)
    monkeypatch.setattr(EK, "AUTO_EPOCHS_SHORT", 6)
    monkeypatch.setattr(EK, "AUTO_EPOCH_UPDATES_SHORT", 0.0)
    X, y = _digits(600)
    auto = KernelMIRA(budget="variable", random_state=0).fit(X, y)
    assert auto.n_iter_ == want and auto.gamma_ == auto.gamma_race_winner_ / 4


def test_the_short_rule_applies_only_to_its_case(monkeypatch):
    """A first pass longer than the race (here 256 rows: GAMMA_RACE_ROWS = 64), explicit epochs, or a budget
    other than "variable": the race within the first pass, as before (gamma_ one of the runners' widths, at
    most AUTO_EPOCHS_MAX passes)."""
    monkeypatch.setattr(EK, "GAMMA_RACE_ROWS", 64)
    assert race_length(len(GAMMA_POWERS)) == 256
    X, y = _digits(400)
    for est, n in [(KernelMIRA(budget="variable", random_state=0), 300),
                   (KernelMIRA(budget="variable", epochs=3, random_state=0), 200),
                   (KernelMIRA(budget=None, random_state=0), 200), (KernelMIRA(budget=60, random_state=0), 200)]:
        auto = est.fit(X[:n], y[:n])
        assert auto.gamma_ in auto.gammas_ and auto.n_iter_ <= EK.AUTO_EPOCHS_MAX, est
    short = KernelMIRA(budget="variable", random_state=0).fit(X[:200], y[:200])
    assert short.gamma_ == _checked_width(short) and short.gamma_race_rows_.max() == 200
    assert short.gamma_check_errors_.shape == (2,)


def _quantiles(n=600):
    from sklearn.datasets import make_gaussian_quantiles

    X, y = make_gaussian_quantiles(n_samples=n, n_features=4, n_classes=3, random_state=1)
    return minmax_scale(X), y


def _moons(n=400):
    from sklearn.datasets import make_moons

    X, y = make_moons(n, noise=0.25, random_state=1)
    return minmax_scale(X), y


@pytest.mark.parametrize("name,data,kept", [("digits-600", lambda: _digits(600), "winner"),
                                            ("quantiles-600", _quantiles, "quarter"),
                                            ("moons-400", _moons, "tie: the quarter")])
def test_a_short_fit_checks_the_quarter_against_the_winner_by_cross_validation(monkeypatch, name, data, kept):
    """The short fit's check, written out: 3 folds stratified by class from the seed; on each, the quarter of the
    race's winner fitted for the passes the short rule asks for (its update share, at most AUTO_EPOCHS_SHORT: 4
    here) and the winner with the usual epochs="auto", both separate public fits, predict the held-out fold.  The
    counts are gamma_check_errors_, the winner is kept only with strictly fewer, and the model is a fit at the
    width kept.  The three sets take the three outcomes (winner, quarter, a tie that keeps the quarter)."""
    monkeypatch.setattr(EK, "AUTO_EPOCHS_SHORT", 4)
    X, y = data()
    est = KernelMIRA(budget="variable", random_state=0)
    auto = clone(est).fit(X, y)
    winner, quarter = auto.gamma_race_winner_, auto.gamma_race_winner_ / 4
    folds = EK._stratified_folds(y, EK.GAMMA_CHECK_FOLDS, rng.normalize_seed(0))
    want = np.zeros(2, dtype=np.int64)
    for k in range(EK.GAMMA_CHECK_FOLDS):
        tr, te = folds != k, folds == k
        fits, passes = _passes(est, X[tr], y[tr], quarter, 4, EK.AUTO_EPOCH_UPDATES_SHORT)
        want[0] += np.count_nonzero(fits[passes].predict(X[te]) != y[te])
        at_winner = clone(est).set_params(gamma=winner).fit(X[tr], y[tr])
        want[1] += np.count_nonzero(at_winner.predict(X[te]) != y[te])
    assert auto.gamma_check_errors_.tolist() == want.tolist()
    outcome = "winner" if want[1] < want[0] else ("quarter" if want[1] > want[0] else "tie: the quarter")
    assert outcome == kept, want
    if kept == "winner":  # the usual passes at the winner's width
        assert auto.gamma_ == winner and auto.n_iter_ <= EK.AUTO_EPOCHS_MAX
        _same_model(auto, clone(est).set_params(gamma=winner).fit(X, y))
    else:
        assert auto.gamma_ == quarter
        _same_model(auto, clone(est).set_params(gamma=quarter, epochs=auto.n_iter_).fit(X, y))


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=6), k=st.integers(2, 5), seed=st.integers(0, 2**31))
def test_stratified_folds_deal_every_class_evenly_from_the_seed(counts, k, seed):
    """The check's folds: a partition of the rows into k folds in which every class's rows differ by at most one
    between folds (so every fold's complement holds every class), drawn from the seed alone; None when a class
    has fewer than k rows."""
    rs = np.random.default_rng(seed)
    y = rs.permutation(np.repeat(np.arange(len(counts)) * 7, counts))
    if not len(y):
        return
    folds = EK._stratified_folds(y, k, seed)
    if min(c for c in counts if c) < k:
        assert folds is None
        return
    assert folds.shape == y.shape and set(folds.tolist()) <= set(range(k))
    for c in np.unique(y):
        per = np.bincount(folds[y == c], minlength=k)
        assert per.max() - per.min() <= 1 and per.min() >= 1
    assert np.array_equal(folds, EK._stratified_folds(y, k, seed))  # the seed alone decides


def test_stratified_folds_differ_with_the_seed():
    y = np.repeat(np.arange(3), 50)
    assert not np.array_equal(EK._stratified_folds(y, 3, 1), EK._stratified_folds(y, 3, 2))


def test_a_class_too_small_to_fold_skips_the_check():
    """A class of fewer rows than folds: no fold could train on every class, so no check runs and the short rule's
    quarter is kept."""
    X, y = _digits(600)
    y = y.copy()
    y[np.flatnonzero(y == 3)[2:]] = 4  # class 3 keeps two rows
    auto = KernelMIRA(budget="variable", random_state=0).fit(X, y)
    assert auto.gamma_check_errors_.size == 0 and auto.gamma_ == auto.gamma_race_winner_ / 4


@pytest.mark.parametrize("fmt", ["csr", "dense"])
def test_sparse_rows_keep_the_race_within_the_first_pass(fmt):
    """Rows sparse by the kernel caches' rule (at most 1/16 of the columns nonzero on average: text, where the
    short rule measured worse) keep the race within the first pass, whatever their format."""
    import scipy.sparse as sp

    rs = np.random.default_rng(0)
    n, d = 300, 160
    X = sp.random(n, d, density=0.05, random_state=1, format="csr")
    y = (np.asarray(X[:, :20].sum(axis=1)).ravel() > 0.25).astype(int)
    est = KernelMIRA(budget="variable", random_state=0)
    auto = est.fit(X if fmt == "csr" else X.toarray(), y)
    assert auto.gamma_ in auto.gammas_ and auto.n_iter_ <= EK.AUTO_EPOCHS_MAX
    # the rule reads nonzeros, not the format (the widths themselves differ in the last bit: "scale"'s variance
    # is summed differently over CSR and dense rows)
    other = clone(est).fit(X.toarray() if fmt == "csr" else X, y)
    assert other.gamma_ in other.gammas_ and other.n_iter_ <= EK.AUTO_EPOCHS_MAX
    assert np.isclose(auto.gamma_, other.gamma_, rtol=1e-12) and auto.n_iter_ == other.n_iter_
    # ... while the same rows with every zero shifted (dense by the rule) take the short rule
    dense = KernelMIRA(budget="variable", random_state=0).fit(X.toarray() + 0.01 * rs.random((n, d)), y)
    assert dense.gamma_ == _checked_width(dense) and dense.gamma_check_errors_.shape == (2,)
    assert auto.gamma_check_errors_.size == 0 and other.gamma_check_errors_.size == 0  # no short fit: no check


def test_auto_on_a_store_is_streamed_and_bit_identical(tmp_path):
    X, y = _digits(1500)
    path = tmp_path / "d.zarr"
    create_dataset(path, X, y, block_rows=300, dtype="float64")
    auto = KernelMIRA(gamma="auto", budget="variable", random_state=0).fit(path)
    assert set(auto.gamma_race_rows_) <= {1200, 1500}  # a stage ends at a block's end (1024 -> 1200)
    # 1,500 rows: the short rule (a pass of race, then a refit at the width its check keeps), from the store as
    # well: the check reads the store's rows whole, so it counts what it counts on the same rows in memory (the
    # race itself may differ: its stages end at the store's blocks)
    assert auto.gamma_ == _checked_width(auto) and auto.gamma_check_errors_.shape == (2,)
    _same_model(auto, KernelMIRA(gamma=auto.gamma_, epochs=auto.n_iter_, budget="variable", random_state=0).fit(path))
    win = auto.gamma_race_winner_
    mem = KernelMIRA(gamma="auto", budget="variable", random_state=0)._check_widths(X, y, win, win / 4)
    assert mem.tolist() == auto.gamma_check_errors_.tolist()
    # the width scales "scale"'s, measured over the whole store, as for arrays
    assert np.allclose(auto.gammas_, KernelMIRA(gamma="auto").fit(X, y).gammas_)


def test_partial_fit_chooses_on_the_first_call_then_keeps():
    X, y = _digits(1600)
    parts = np.array_split(np.arange(len(y)), 4)
    auto = KernelPA(gamma="auto", budget="variable", random_state=0)
    auto.partial_fit(X[parts[0]], y[parts[0]], classes=np.arange(10))
    chosen, errs = auto.gamma_, auto.gamma_online_errors_.copy()
    assert (auto.gamma_race_rows_ == len(parts[0])).all()  # the first call (400 rows) settles the race
    win = _one_se(errs, range(len(errs)), len(parts[0]))  # every width ran those rows: one wider is kept
    assert auto.gamma_race_winner_ == auto.gammas_[win] and auto.gamma_ == auto.gammas_[max(win - GAMMA_WIDEN, 0)]
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


def _same_race(ensemble, single):
    """The ensemble's race is the single learner's, but for the single one's shadow (the width one power wider
    than a stage's leader runs on beside the contenders there; the ensembles keep the winner and run none)."""
    same = ensemble.gamma_race_rows_ == single.gamma_race_rows_
    assert same.sum() >= len(same) - 1
    assert np.array_equal(ensemble.gamma_online_errors_[same], single.gamma_online_errors_[same])
    assert (ensemble.gamma_race_rows_ <= single.gamma_race_rows_).all()


def test_ensembles_choose_once_and_give_every_member_the_width(tmp_path):
    X, y = _digits(1300)
    single = KernelMIRA(gamma="auto", budget="variable", random_state=4).fit(X, y)
    # KernelOBPM: the base's race over the first chunk, in the members' order (arrays: a single fit's order)
    obpm = KernelOBPM(n_estimators=4, base=KernelMIRA(gamma="auto", budget="variable"), epochs=2,
                      random_state=4).fit(X, y)
    assert obpm.gamma_ == single.gamma_race_winner_  # the ensembles keep the race's winner itself
    _same_race(obpm, single)
    fixed = KernelOBPM(n_estimators=4, base=KernelMIRA(gamma=obpm.gamma_, budget="variable"), epochs=2,
                       random_state=4).fit(X, y)
    assert np.array_equal(obpm.dual_coef_, fixed.dual_coef_)
    assert np.array_equal(obpm.support_vectors_, fixed.support_vectors_)
    # a fixed RBF budget: the race runs the members' removal ("auto" is "margin" in the kernel OBPM)
    small = KernelOBPM(n_estimators=2, base=KernelMIRA(gamma="auto", budget=40), epochs=1, random_state=4).fit(X, y)
    margin = KernelMIRA(gamma="auto", budget=40, removal="margin", random_state=4).fit(X, y)
    assert small.gamma_ == margin.gamma_race_winner_
    _same_race(small, margin)
    # KernelPermutationBPM: the race once, as a single fit seeded by random_state runs it; every member takes it
    pbpm = KernelPermutationBPM(n_estimators=3, base="kernel-mira", base_params={"gamma": "auto", "budget": "variable"},
                                epochs=1, random_state=4).fit(X, y)
    assert pbpm.gamma_ == single.gamma_race_winner_
    assert {e.gamma_ for e in pbpm.estimators_} == {single.gamma_race_winner_}
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


@pytest.mark.parametrize("d", [16, 9000, 20000, 2**24])
@pytest.mark.parametrize("csr", [False, True])
def test_piece_bounds_are_the_engine_calls(d, csr):
    """A split at a bound starts a call whose pieces are the whole chunk's from there on: rows cut by width (dense,
    or CSR the engine densifies), and CSR rows read by their nonzeros, whose calls do not shrink with the width."""
    import scipy.sparse as sp

    from distlearn.learners.kernel import compacted_pieces, piece_bounds

    m = 5000
    X = sp.csr_matrix((1, d)) if csr else np.zeros((1, 16 if d == 2**24 else d))
    if d == 2**24 and not csr:
        d = 16  # no dense row that wide here: the width's rule is the 20000 case's
    y = np.zeros(1, np.int64)
    whole = [(lo, hi) for lo, hi, *_ in compacted_pieces(X, y, np.zeros(m, np.int64), densify=not csr)]
    bounds = piece_bounds(d, m, not csr)
    assert bounds[0] == 0 and bounds[-1] == m and set(bounds[:-1].tolist()) <= {lo for lo, _ in whole}
    for b in bounds[1:-1]:
        rest = [(b + lo, b + hi) for lo, hi, *_ in compacted_pieces(X, y, np.zeros(m - b, np.int64), densify=not csr)]
        assert rest == [p for p in whole if p[0] >= b], (d, b)
    if d == 16 or csr:
        assert bounds.tolist() == [0, 1024, 2048, 3072, 4096, 5000]


# -- the shared dot products ---------------------------------------------------------------------------------


def _run_engine(X, y, rule, kern, chunks, share, **kw):
    """One learner over the rows of ``chunks`` (in order); ``share``: its kernel rows from :func:`shared_dots`
    over the rows run so far, every entry it does not compute left NaN (a read of one would be a non-finite
    score: the engine refuses the round)."""
    st = init_budget_state(X.shape[1], 1 if len(np.unique(y)) == 2 else len(np.unique(y)),
                           native=len(np.unique(y)) > 2)
    R = X[np.concatenate(chunks)]
    logs, t0 = [], 0
    for rows in chunks:
        dots = None
        if share:
            m = len(rows)
            dots = shared_dots(R, np.ones(t0 + m, bool), t0, m, np.full((-(-m // 16), t0 + m, 16), np.nan))
        logs.append(learn_budget_chunk(rule, kern, st, X, y, order=rows, dots=dots, **kw))
        t0 += len(rows)
    return st, logs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(20, 160), d=st.integers(1, 9), k=st.sampled_from([2, 3]), seed=st.integers(0, 2**31 - 1),
       kernel=st.sampled_from(["rbf", "poly"]), budget=st.sampled_from(["variable", None, 12, "projectron"]),
       removal=st.sampled_from(["margin", "oldest", "random"]), dup=st.booleans())
def test_shared_dot_rows_are_the_learners_own(n, d, k, seed, kernel, budget, removal, dup):
    """learn_budget_chunk reading shared dot products is, bit for bit, the learner computing its own rows:
    every round's decision, loss and removals, and the cache.  Repeated rows (``dup``) make twins."""
    rs = np.random.RandomState(seed)
    X = rs.randn(n, d) * rs.choice([0.1, 1.0, 3.0])
    if dup:
        X[n // 2:] = X[: n - n // 2]
    y = rs.randint(0, k, n)
    kern = make_kernel(kernel, gamma=float(rs.choice([0.05, 0.5, 2.0])), degree=3, coef0=1.0)
    rule = make_rule("mira", native=k > 2) if seed % 2 else make_rule("perceptron")
    order = rs.permutation(n)
    cuts = sorted(set(rs.randint(1, n, 3).tolist()))
    chunks = np.split(order, cuts)
    kw = {"beta": 0.1, "budget": budget, "removal": removal, "seed": seed}
    a, la = _run_engine(X, y, rule, kern, chunks, False, **kw)
    b, lb = _run_engine(X, y, rule, kern, chunks, True, **kw)
    for x, z in zip(la, lb):
        for f in x._fields:
            assert np.array_equal(getattr(x, f), getattr(z, f)), f
    for p, q in zip(a.support(), b.support()):
        assert np.array_equal(p, q)
    assert a.t == b.t == n


def test_shared_dots_are_each_pairs_engine_product():
    """shared_dots: the flagged rows below each block's end, each the sum of the pair's products in feature
    order (np.dot's blocked sums may differ in the last bits: compared at rtol 1e-12), the rest untouched."""
    rs = np.random.RandomState(0)
    R = rs.rand(90, 7)
    cols = rs.rand(90) < 0.6
    t0, m = 40, 50
    cols[t0:] = True
    blocks = shared_dots(R, cols, t0, m, np.full((4, t0 + m, 16), np.nan))
    out = blocks.transpose(1, 0, 2).reshape(t0 + m, 64)  # out[c, j]: row c . round t0 + j
    for j in range(64):
        end = min(t0 + (j // 16 + 1) * 16, t0 + m)
        for c in range(t0 + m):
            if cols[c] and c < end and j < m:
                want = 0.0
                for f in range(R.shape[1]):
                    want += R[c, f] * R[t0 + j, f]
                assert out[c, j] == want, (c, j)
            elif cols[c] and c < end:  # the last block's rows past m
                assert out[c, j] == 0.0, (c, j)
            else:
                assert np.isnan(out[c, j]), (c, j)
    assert np.allclose(out[:t0, :m][cols[:t0]], (R[:t0][cols[:t0]] @ R[t0:].T), rtol=1e-12)


def test_shared_dots_refused_with_merging():
    X, y = _digits(40)
    with pytest.raises(ValueError, match="not with removal='merge'"):
        learn_budget_chunk(make_rule("perceptron"), make_kernel("rbf"), init_budget_state(64, 10, native=True),
                           X, y, budget=10, removal="merge", dots=np.zeros((3, 40, 16)))


def _race_of(est, X, y, rows):
    """Race ``est`` (gamma="auto") over ``X[rows]`` in that order, as a fit's first pass: the race object
    (its runners as each was when dropped or won) and the learner."""
    r = clone(est).set_params(gamma="auto", epochs=1)
    classes = np.unique(y)
    r._start(classes, X.shape[1])
    r._prepare(X, len(y))
    race = r._race
    yi = np.searchsorted(classes, y).astype(np.int64)
    r._learn(X, yi, np.asarray(rows, np.int64), np.arange(len(rows), dtype=np.int64), 0, True)
    r._settle()
    return race, r


@pytest.mark.parametrize("est", [
    KernelMIRA(budget="variable", random_state=0),
    KernelPerceptron(beta=0.1, budget=60, removal="random", random_state=2),
    KernelPA(kernel="poly", degree=3, coef0=1.0, budget=80, removal="oldest", random_state=1),
    KernelMIRA(budget=40, random_state=1),  # removal "auto": merge -- no sharing, each its own rows
], ids=["rbf-variable", "rbf-random", "poly-oldest", "rbf-merge"])
def test_every_candidate_is_its_separate_run(est):
    """Every candidate of a race over shared dot products -- losers at the round they were dropped, and the
    winner -- has, bit for bit, the cache, coefficients, counters and per-round cache sizes of a separate
    learner of its width over the same rows; the kept width has the fewest progressive mistakes among the
    last stage's candidates to within one standard error (the smallest gamma there)."""
    X, y = _digits()
    rows = np.random.RandomState(7).permutation(len(y))
    race, r = _race_of(est, X, y, rows)
    assert X.shape[1] >= GAMMA_SHARE_FEATURES
    assert (race.R is None) == (est.removal == "auto" and est.budget == 40)  # merging: no sharing
    if race.R is not None:
        assert np.array_equal(race.R[:race.rows], X[rows[:race.rows]])
    assert len(set(r.gamma_race_rows_.tolist())) > 1
    for i, (g, n_rows) in enumerate(zip(r.gammas_, r.gamma_race_rows_)):
        c = race.runners[i]
        one = clone(est).set_params(gamma=float(g), epochs=1)
        one._start(np.unique(y), X.shape[1])
        one._prepare(X, len(y))
        part = rows[:n_rows]
        one._learn(X, np.searchsorted(np.unique(y), y).astype(np.int64), part,
                   np.arange(len(part), dtype=np.int64), 0, True)
        assert c.gamma_ == one.gamma_ == g
        assert (c.online_errors_, c.n_updates_, c.n_removed_, c.n_merged_, c.t_) == \
            (one.online_errors_, one.n_updates_, one.n_removed_, one.n_merged_, one.t_) == \
            (r.gamma_online_errors_[i], c.n_updates_, c.n_removed_, c.n_merged_, n_rows)
        for p, q in zip(c._state.support(), one._state.support()):
            assert np.array_equal(p, q)
        assert np.array_equal(np.concatenate(c._sizes), np.concatenate(one._sizes))
    last = race.alive  # the last stage's contenders (not the shadow beside them)
    assert all(r.gamma_race_rows_[i] == r.gamma_race_rows_.max() for i in last)
    win = _one_se(r.gamma_online_errors_, last, r.gamma_race_rows_.max())
    kept = _kept(win, r.gamma_race_rows_, settled=r.gamma_race_rows_.max() < race_length(len(GAMMA_POWERS)))
    assert r.gamma_race_winner_ == r.gammas_[win]
    assert r.gamma_ == r.gammas_[kept] and r._state is race.runners[kept]._state


def test_who_shares():
    """The race shares on data of GAMMA_SHARE_FEATURES features or more, without merging: dense rows while the
    race's rows fit GAMMA_SHARE_BYTES dense, sparse rows (kept as CSR) at any width.  The race's first rows
    decide the form, and later rows of the other form are converted to it."""
    import scipy.sparse as sp

    rows = race_length(len(GAMMA_POWERS))
    widest = GAMMA_SHARE_BYTES // (8 * rows)
    for d, est, dense, sparse in [
            (GAMMA_SHARE_FEATURES - 1, KernelMIRA(), False, False), (GAMMA_SHARE_FEATURES, KernelMIRA(), True, True),
            (widest, KernelPA(kernel="poly"), True, True), (widest + 1, KernelMIRA(), False, True),
            (64, KernelMIRA(budget=50), False, False), (64, KernelMIRA(budget=50, removal="margin"), True, True)]:
        for first, shares in [(np.eye(2, d), dense), (sp.csr_matrix(np.eye(2, d)), sparse)]:
            r = clone(est).set_params(gamma="auto")
            r._start(np.arange(3), d)
            r._set_gamma(1.0)
            race = r._race
            assert race.shares(first) == shares, (d, est, type(first))
            assert race.shares(sp.csr_matrix(np.eye(2, d)) if isinstance(first, np.ndarray) else np.eye(2, d)) \
                == shares  # decided once, by the first rows
            assert (race.P is not None) == (shares and sp.issparse(first))
            assert (race.R is not None) == (shares and not sp.issparse(first))
            if shares:  # the other form's rows join in the first one's
                race.append(first, np.array([1, 0]))
                race.rows += 2
                other = sp.csr_matrix(np.eye(3, d, 1)) if not sp.issparse(first) else np.eye(3, d, 1)
                race.append(other, np.array([2]))
                race.rows += 1
                got = race.rows_run()
                assert sp.issparse(got) == sp.issparse(first)
                want = np.vstack([np.eye(2, d)[[1, 0]], np.eye(3, d, 1)[[2]]])
                assert np.array_equal(got.toarray() if sp.issparse(got) else got, want)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.integers(1, 40), min_size=1, max_size=30), d=st.integers(1, 3000),
       sparse=st.booleans(), seed=st.integers(0, 2**16))
def test_the_race_rows_grow_by_doubling_and_hold_every_piece(pieces, d, sparse, seed):
    """The race's rows appended piece by piece are the rows run, in order (duplicated and unsorted CSR columns
    summed and sorted as the engine reads them), and the buffers grow by doubling: appending n rows reallocates
    O(log n) times, so it copies O(n) entries in all (a concatenation per piece copied O(n^2 / piece) at 2**24
    columns, one row a piece)."""
    import scipy.sparse as sp

    g = np.random.default_rng(seed)
    n = sum(pieces)
    nnz = g.integers(0, 6, n)
    p = np.concatenate([[0], np.cumsum(nnz)])
    X = sp.csr_matrix((g.normal(size=p[-1]), g.integers(0, d, p[-1]), p), shape=(n, d))  # repeats, unsorted
    order = g.permutation(n)
    first = X if sparse else X.toarray()
    r = KernelMIRA(gamma="auto")
    r._start(np.arange(2), d)
    r._set_gamma(1.0)
    race = r._race
    race.share = "any"
    if not race.shares(first):
        return  # too wide to keep dense rows: the "any" share falls back to none (test_who_shares)
    grown, pos = 0, 0
    for m in pieces:
        before = race.P if sparse else race.R
        race.append(first, order[pos:pos + m])
        race.rows += m
        pos += m
        grown += (race.P if sparse else race.R) is not before
    got = race.rows_run()
    want = X[order].toarray()
    assert np.array_equal(got.toarray() if sparse else got, want)
    assert grown <= int(np.log2(n + 1)) + 2


def test_a_sparse_race_shares_and_equals_the_dense_one():
    import scipy.sparse as sp

    X, y = _digits()
    X = np.where(X > 0.5, X, 0.0)
    dense = KernelMIRA(gamma="auto", budget="variable", random_state=3).fit(X, y)
    sparse = KernelMIRA(gamma="auto", budget="variable", random_state=3).fit(sp.csr_matrix(X), y)
    assert len(set(dense.gamma_race_rows_)) > 1
    assert np.array_equal(dense.gamma_online_errors_, sparse.gamma_online_errors_)
    _same_model(dense, sparse)
    race, _ = _race_of(KernelMIRA(budget="variable", random_state=3), sp.csr_matrix(X), y, np.arange(len(y)))
    assert race.P is not None and np.array_equal(race.rows_run().toarray(), X)  # kept as CSR


def test_dots_need_aligned_engine_calls():
    import scipy.sparse as sp

    from distlearn.learners.kernel import _sub_rows

    d = 20_000
    assert _sub_rows(d) % 16  # the densified pieces' length is no multiple of a block
    # rows too dense for the sparse cache (7 % of the columns): densified, so cut by width
    X = sp.random(_sub_rows(d) + 1, d, density=0.07, format="csr", random_state=0)
    y = np.zeros(X.shape[0], np.int64)
    with pytest.raises(ValueError, match="multiples of 16"):
        learn_budget_chunk(make_rule("perceptron"), make_kernel("rbf"), init_budget_state(d, 1), X, y,
                           dots=np.zeros((1, 1, 16)))
    # sparse rows are read by their nonzeros, in calls that do not shrink with the width: no such cut
    assert _sub_rows(d, by_width=False) % 16 == 0


# -- the shared dot products of sparse rows (text) ---------------------------------------------------------------


def _text(n=1400, d=6000, seed=0):
    """Sparse rows as text has them: ~25 of ``d`` columns nonzero a row (a Zipf-like column choice, so rows
    share columns), nonnegative values, unit norm; 3 classes from a sparse linear rule with 5 % noise."""
    rs = np.random.RandomState(seed)
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    for r in range(n):
        k = rs.randint(5, 45)
        c = np.unique(np.minimum(rs.zipf(1.3, k) - 1, d - 1))
        v = rs.rand(len(c)) + 0.1
        rows += [r] * len(c)
        cols += c.tolist()
        vals += (v / np.linalg.norm(v)).tolist()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
    W = rs.randn(d, 3) * (rs.rand(d, 1) < 0.05)
    y = np.argmax(X @ W + 0.05 * rs.randn(n, 3), axis=1)
    flip = rs.rand(n) < 0.05
    y[flip] = rs.randint(0, 3, flip.sum())
    return X, y


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 70), d=st.integers(1, 40), density=st.sampled_from([0.05, 0.3, 1.0]),
       t0=st.integers(0, 40), seed=st.integers(0, 2**31 - 1), zeros=st.booleans())
def test_shared_csr_dots_are_the_dense_ones(n, d, density, t0, seed, zeros):
    """shared_csr_dots on CSR rows is shared_dots on the same rows dense, bit for bit: every flagged entry below
    its block's end (the last block's rows past m 0), every other entry left as it was.  Explicit zeros in the
    CSR rows (``zeros``) change nothing."""
    import scipy.sparse as sp

    from distlearn.learners.kernel import _csr_rows

    rs = np.random.RandomState(seed)
    t0 = min(t0, n - 1)
    m = n - t0
    R = rs.randn(n, d) * (rs.rand(n, d) < density)
    C = sp.csr_matrix(R)
    if zeros and C.nnz:
        C.data[rs.rand(C.nnz) < 0.3] = 0.0  # stored, zero
        R = C.toarray()
    p, j, v = _csr_rows(C)
    cols = rs.rand(n) < 0.7
    cols[t0:] = True
    shape = (-(-m // 16), n, 16)
    want = shared_dots(R, cols, t0, m, np.full(shape, np.nan))
    cmap = np.full(d, -1, dtype=np.int32)
    got = shared_csr_dots(p, j, v, cols, t0, m, cmap, np.full(shape, np.nan))
    assert (cmap == -1).all()  # left as it was given
    assert np.array_equal(np.isnan(want), np.isnan(got))
    assert np.array_equal(np.nan_to_num(want, nan=7.0), np.nan_to_num(got, nan=7.0))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(20, 200), k=st.sampled_from([2, 3]), seed=st.integers(0, 2**31 - 1),
       kernel=st.sampled_from(["rbf", "poly"]), budget=st.sampled_from(["variable", None, 12]),
       removal=st.sampled_from(["margin", "oldest", "random"]), dup=st.booleans())
def test_shared_csr_dot_rows_are_the_learners_own(n, k, seed, kernel, budget, removal, dup):
    """learn_budget_chunk on sparse rows (a sparse store: the engine reads them as CSR) reading shared products
    from shared_csr_dots is, bit for bit, the learner computing its own rows: every round's decision, loss and
    removals, and the cache."""
    import scipy.sparse as sp

    from distlearn.learners.kernel import _csr_rows

    X, _ = _text(n, d=400, seed=seed % 1000)
    if dup:
        X = sp.vstack([X[: n - n // 2], X[: n // 2]]).tocsr()
    rs = np.random.RandomState(seed)
    y = rs.randint(0, k, n)
    kern = make_kernel(kernel, gamma=float(rs.choice([0.5, 2.0])), degree=3, coef0=1.0)
    rule = make_rule("mira", native=k > 2) if seed % 2 else make_rule("perceptron")
    order = rs.permutation(n)
    chunks = np.split(order, sorted(set(rs.randint(1, n, 3).tolist())))
    kw = {"beta": 0.1, "budget": budget, "removal": removal, "seed": seed}

    def run(share):
        st_ = init_budget_state(X.shape[1], 1 if k == 2 else k, native=k > 2)
        p, j, v = _csr_rows(X[np.concatenate(chunks)])
        logs, t0 = [], 0
        for rows in chunks:
            m = len(rows)
            dots = shared_csr_dots(p, j, v, np.ones(t0 + m, bool), t0, m, np.full(X.shape[1], -1, dtype=np.int32),
                                   np.full((-(-m // 16), t0 + m, 16), np.nan)) if share else None
            logs.append(learn_budget_chunk(rule, kern, st_, X, y, order=rows, dots=dots, **kw))
            t0 += m
        assert st_.store  # the rows were read as CSR, by the sparse store
        return st_, logs

    a, la = run(False)
    b, lb = run(True)
    for x, z in zip(la, lb):
        for f in x._fields:
            assert np.array_equal(getattr(x, f), getattr(z, f)), f
    for p_, q in zip(a.support(), b.support()):
        assert np.array_equal(p_.toarray() if hasattr(p_, "toarray") else p_,
                              q.toarray() if hasattr(q, "toarray") else q)
    assert a.t == b.t == n


@pytest.mark.parametrize("est", [KernelMIRA(budget="variable", random_state=0),
                                 KernelPerceptron(beta=0.1, budget=60, removal="random", random_state=2)],
                         ids=["mira-variable", "perceptron-random"])
def test_a_text_race_shares_as_csr_and_every_candidate_is_its_separate_run(est):
    """Text too wide for dense race rows (GAMMA_SHARE_BYTES) races on shared products kept as CSR, and every
    candidate -- losers where they were dropped, and the winner -- is bit for bit a separate learner of its
    width over the same rows; the whole fit is the same model as with the candidates computing their own."""
    import scipy.sparse as sp

    X, y = _text()
    assert 8 * X.shape[1] * race_length(len(GAMMA_POWERS)) > GAMMA_SHARE_BYTES  # too wide to keep dense
    rows = np.random.RandomState(7).permutation(len(y))
    race, r = _race_of(est, X, y, rows)
    assert race.P is not None and race.R is None
    assert (race.rows_run() != X[rows[:race.rows]]).nnz == 0
    assert len(set(r.gamma_race_rows_.tolist())) > 1  # a cut was made
    classes = np.unique(y)
    for i, (g, n_rows) in enumerate(zip(r.gammas_, r.gamma_race_rows_)):
        c = race.runners[i]
        one = clone(est).set_params(gamma=float(g), epochs=1)
        one._start(classes, X.shape[1])
        one._prepare(X, len(y))
        part = rows[:n_rows]
        one._learn(X, np.searchsorted(classes, y).astype(np.int64), part, np.arange(len(part), dtype=np.int64), 0,
                   True)
        assert (c.online_errors_, c.n_updates_, c.n_removed_, c.t_) == \
            (one.online_errors_, one.n_updates_, one.n_removed_, one.t_) == \
            (r.gamma_online_errors_[i], one.n_updates_, one.n_removed_, n_rows)
        for p, q in zip(c._state.support(), one._state.support()):
            assert np.array_equal(p.toarray() if sp.issparse(p) else p, q.toarray() if sp.issparse(q) else q)
        assert np.array_equal(np.concatenate(c._sizes), np.concatenate(one._sizes))
    shared = clone(est).set_params(epochs=2).fit(X, y)
    orig = EK.GAMMA_SHARE_FEATURES
    EK.GAMMA_SHARE_FEATURES = 10**9  # nobody shares
    try:
        own = clone(est).set_params(epochs=2).fit(X, y)
    finally:
        EK.GAMMA_SHARE_FEATURES = orig
    assert sp.issparse(shared.support_vectors_)
    assert shared.gamma_ == own.gamma_ and np.array_equal(shared.gamma_online_errors_, own.gamma_online_errors_)
    assert (shared.support_vectors_ != own.support_vectors_).nnz == 0
    assert np.array_equal(shared.dual_coef_, own.dual_coef_)
    assert np.array_equal(shared.cache_size_, own.cache_size_)
