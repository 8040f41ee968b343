"""OBPM(tau="auto"): tau groups in one fused pass, the group of fewest progressive mistakes kept.

Group ``g`` draws exactly as ``OBPM(tau=taus[g])`` with the same seed, so every
group is checked against that separate run, bit for bit, and the choice against
the separate runs' online errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn import OBPM, KernelPerceptron
from distlearn.data.store import create_dataset
from distlearn.estimators.bayes_point import TAU_GRID


def _binary(n=600, d=30, seed=0):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d))
    w = r.normal(size=d)
    y = np.where(X @ w + 0.8 * r.normal(size=n) > 0, 1, -1)
    return X, y


def _multi(n=600, d=40, k=4, seed=1):
    r = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, random_state=r, format="csr")
    W = r.normal(size=(d, k))
    y = np.argmax(X @ W + 0.3 * r.normal(size=(n, k)), axis=1)
    return X, y


def _members(est, g):
    N = est.n_estimators
    return est._state.members()[g * N:(g + 1) * N]


@pytest.mark.parametrize("data", ["binary", "multiclass"])
@pytest.mark.parametrize("conversion", ["last", "average"])
def test_each_group_is_the_separate_run_and_the_best_is_kept(data, conversion):
    X, y = _binary() if data == "binary" else _multi()
    taus = (0.1, 0.3, 0.6)
    kw = dict(n_estimators=8, epochs=2, random_state=4, conversion=conversion, record_online=True, keep_members=True)
    auto = OBPM(tau=taus, **kw).fit(X, y)
    singles = [OBPM(tau=t, **kw).fit(X, y) for t in taus]
    for g, s in enumerate(singles):
        np.testing.assert_array_equal(_members(auto, g), s._state.members())
        assert auto.tau_online_errors_[g] == s.epoch_online_errors_.sum()
    best = int(np.argmin([s.epoch_online_errors_.sum() for s in singles]))
    chosen = singles[best]
    assert auto.tau_ == taus[best]
    np.testing.assert_array_equal(auto.taus_, taus)
    # the kept model is the separate run's, attributes included
    np.testing.assert_array_equal(auto.coef_, chosen.coef_)
    np.testing.assert_array_equal(auto.intercept_, chosen.intercept_)
    np.testing.assert_array_equal(auto.members_, chosen.members_)
    np.testing.assert_array_equal(auto.member_rounds_, chosen.member_rounds_)
    np.testing.assert_array_equal(auto.epoch_online_errors_, chosen.epoch_online_errors_)
    np.testing.assert_array_equal(auto.online_mistakes_, chosen.online_mistakes_)
    assert (auto.online_errors_, auto.n_updates_) == (chosen.online_errors_, chosen.n_updates_)
    assert auto.members_.shape[0] == 8
    np.testing.assert_array_equal(auto.predict(X), chosen.predict(X))


def test_auto_uses_the_grid_and_groups_do_not_change_it():
    X, y = _binary(seed=3)
    a = OBPM(n_estimators=6, tau="auto", random_state=1).fit(X, y)
    b = OBPM(n_estimators=6, tau="auto", random_state=1, learner_groups=4, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.taus_, TAU_GRID)
    assert a.tau_ in TAU_GRID and a.tau_ == b.tau_
    np.testing.assert_array_equal(a.coef_, b.coef_)  # pooled running sums: one pool per tau group here
    np.testing.assert_array_equal(a.tau_online_errors_, b.tau_online_errors_)
    assert a.tau_online_errors_[TAU_GRID.index(a.tau_)] == a.tau_online_errors_.min()


def test_partial_fit_in_pieces_equals_one_unshuffled_fit():
    X, y = _multi(seed=7)
    kw = dict(n_estimators=5, tau=(0.2, 0.5), random_state=2, shuffle=False, epochs=1)
    whole = OBPM(**kw).fit(X, y)
    part = OBPM(**kw)
    for a, b in [(0, 250), (250, 251), (251, 600)]:
        part.partial_fit(X[a:b], y[a:b], classes=np.unique(y))
    assert part.tau_ == whole.tau_
    np.testing.assert_array_equal(part.tau_online_errors_, whole.tau_online_errors_)
    np.testing.assert_array_equal(part.coef_, whole.coef_)


@pytest.mark.filterwarnings("ignore:OBPM.*learner groups? run")  # pools allow fewer groups; test_obpm_pooled tests the warning
def test_store_fit_in_process_equals_arrays(tmp_path):
    X, y = _binary(n=900, seed=5)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=100)
    kw = dict(n_estimators=4, tau=(0.25, 0.75), epochs=2, random_state=9, record_online=True)
    a = OBPM(scheduler="in-process", learner_groups=3, checkpoint_every=2, **kw).fit(str(p))
    b = OBPM(**kw, shuffle=True).fit(str(p))  # default: the same learner-parallel job, one group
    np.testing.assert_array_equal(a.coef_, b.coef_)  # pooled running sums
    np.testing.assert_array_equal(a.tau_online_errors_, b.tau_online_errors_)
    single = OBPM(scheduler="in-process", tau=a.tau_, **{k: v for k, v in kw.items() if k != "tau"}).fit(str(p))
    np.testing.assert_array_equal(a.coef_, single.coef_)
    np.testing.assert_array_equal(a.online_mistakes_, single.online_mistakes_)
    assert a.epoch_online_errors_.tolist() == single.epoch_online_errors_.tolist()


def test_store_checkpoint_resume_keeps_the_tau_counters(tmp_path):
    X, y = _binary(n=800, seed=6)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=100)
    kw = dict(n_estimators=4, tau=(0.2, 0.6), random_state=3, scheduler="in-process", checkpoint_every=2)
    ref = OBPM(epochs=2, **kw).fit(str(p))
    ck = tmp_path / "ck"
    OBPM(epochs=1, checkpoint=str(ck), **kw).fit(str(p))
    res = OBPM(epochs=2, checkpoint=str(ck), resume=True, **kw).fit(str(p))
    assert res.job_["resumed_from"] is not None
    np.testing.assert_array_equal(res.coef_, ref.coef_)  # pooled running sums
    np.testing.assert_array_equal(res.intercept_, ref.intercept_)
    np.testing.assert_array_equal(res.tau_online_errors_, ref.tau_online_errors_)
    assert res.tau_ == ref.tau_


@pytest.mark.filterwarnings("ignore:OBPM.*learner groups? run")  # pools allow fewer groups; test_obpm_pooled tests the warning
@pytest.mark.cluster
def test_dask_tau_groups_bit_identical(tmp_path, dask_scheduler):
    X, y = _multi(n=800, seed=8)
    p = tmp_path / "m.zarr"
    create_dataset(p, X, y, block_rows=100)
    kw = dict(n_estimators=5, tau=(0.1, 0.4, 0.7), epochs=2, random_state=5, conversion="average")
    a = OBPM(scheduler="in-process", learner_groups=1, **kw).fit(str(p))
    b = OBPM(scheduler=dask_scheduler["address"], learner_groups=4, checkpoint_every=3, **kw).fit(str(p))
    assert a.tau_ == b.tau_
    np.testing.assert_array_equal(a.tau_online_errors_, b.tau_online_errors_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)  # pooled running sums
    np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("tau, match", [
    ([], "empty"),
    ((0.2, 0.2), "repeated"),
    ((0.2, 1.5), "every value of tau"),
    ("often", "'auto'"),
    (0.0, r"\(0, 1\]"),
])
def test_bad_tau_is_one_clear_error(tau, match):
    X, y = _binary(n=50)
    with pytest.raises(ValueError, match=match):
        OBPM(tau=tau).fit(X, y)


def test_a_kernel_base_is_refused_and_kernel_obpm_runs_one_tau():
    """tau="auto" chooses among tau groups of the fused linear kernel; OBPM refuses a kernel base (one line
    naming KernelOBPM), and KernelOBPM runs one tau, the paper's 0.3 by default."""
    from distlearn import KernelOBPM

    X, y = _binary(n=50)
    with pytest.raises(ValueError, match="KernelOBPM"):
        OBPM(base=KernelPerceptron(), tau=(0.1, 0.3)).fit(X, y)
    with pytest.raises(ValueError, match="real number"):
        KernelOBPM(base=KernelPerceptron(), tau=(0.1, 0.3)).fit(X, y)
    default = KernelOBPM(base=KernelPerceptron(), n_estimators=5, epochs=2, random_state=0).fit(X, y)
    fixed = KernelOBPM(base=KernelPerceptron(), n_estimators=5, epochs=2, tau=0.3, random_state=0).fit(X, y)
    assert default.tau_ == 0.3 and list(default.taus_) == [0.3]
    np.testing.assert_array_equal(default.dual_coef_, fixed.dual_coef_)
    np.testing.assert_array_equal(default.support_vectors_, fixed.support_vectors_)


def test_learner_groups_balance_the_cost_of_tau_groups():
    from distlearn.ensembles.engine import UPDATE_COST, learner_groups

    taus = np.repeat([0.05, 0.1, 0.2, 0.3, 0.5], 20)
    cost = 1.0 + UPDATE_COST * taus
    for g in (2, 3, 4, 7):
        ranges = learner_groups(100, g, taus=taus)
        assert len(ranges) == g and ranges[0][0] == 0 and ranges[-1][1] == 100
        assert all(a < b and b == c for (a, b), (c, _) in zip(ranges, ranges[1:] + [(100, 0)]))  # contiguous
        parts = [cost[a:b].sum() for a, b in ranges]
        equal = [cost[a:b].sum() for a, b in learner_groups(100, g)]
        assert max(parts) - min(parts) <= 2 * cost.max()        # as even as contiguous ranges allow
        assert max(parts) < max(equal)                            # and better than equal counts
    # equal taus: the equal-count split; more groups than learners: one each
    assert learner_groups(100, 2, taus=np.full(100, 0.3)) == learner_groups(100, 2) == [(0, 50), (50, 100)]
    assert learner_groups(3, 5, taus=[0.1, 0.2, 0.3]) == [(0, 1), (1, 2), (2, 3)]
    with pytest.raises(ValueError, match="one value per learner"):
        learner_groups(4, 2, taus=[0.1, 0.2])
