"""OBPM's pooled running sums (``keep_members="auto"``, issue 30): the uniform Bayes point of the
members' averages from one running sum per pool of members instead of one per member.

The definition is unchanged, ``(1/N) sum_j (1/(T+1)) sum_t w_{j,t}``; only the order of the
additions differs, so the pooled model is checked against the pure-Python Algorithm 2
(``test_obpm.py: _brute_obpm``) and the per-member form at ``rtol=1e-10``, and against itself for
bit-identity over chunking, learner groups, stores, checkpoints and resume.  The members' own
(last) weights are untouched: the same bits as with a running sum per member.
"""

from __future__ import annotations

import numpy as np
import pytest

from distlearn import OBPM
from distlearn.data import create_dataset
from distlearn.ensembles import _kernels as EK
from distlearn.ensembles import engine
from distlearn.model import save_model

from .test_obpm import _brute_obpm, _data


def _model(est):
    return np.concatenate([est.coef_, est.intercept_[:, None]], axis=1)


@pytest.fixture
def small_pools(monkeypatch):
    """Pools of 4 members, so that a small ensemble has several pools (and learner groups)."""
    monkeypatch.setattr(engine, "POOL_MEMBERS", 4)


def test_auto_pools_only_when_nothing_needs_the_members():
    kw = dict(n_estimators=5, tau=0.5)
    assert OBPM(**kw)._acc_mode == EK.ACC_POOLED  # the default: average, scope "ensemble", uniform
    assert OBPM(**kw, keep_members=True)._acc_mode == EK.ACC_ENSEMBLE
    assert OBPM(**kw, weights="margin_bound")._acc_mode == EK.ACC_ENSEMBLE  # needs every member's average
    assert OBPM(**kw, conversion_scope="members")._acc_mode == EK.ACC_MEMBERS
    assert OBPM(**kw, conversion="last")._acc_mode == EK.ACC_NONE


@pytest.mark.parametrize("k", [2, 3])
def test_pooled_equals_the_oracle_and_the_per_member_sums(small_pools, k):
    X, y = _data(n=300, d=8, k=k, seed=6)
    N, tau = 9, 0.35
    kw = dict(n_estimators=N, tau=tau, random_state=4, shuffle=False, epochs=2, normalize=False)
    pooled = OBPM(**kw).fit(X, y)
    kept = OBPM(**kw, keep_members=True).fit(X, y)
    assert pooled._state.accP.shape[1] == 3  # 9 members in pools of 4: 3 pools
    # the members (their last weights) are the same bits either way
    for name in ("W", "scale", "sqnorm", "n_updates", "member_rounds"):
        np.testing.assert_array_equal(getattr(pooled._state, name), getattr(kept._state, name))
    np.testing.assert_allclose(_model(pooled), _model(kept), rtol=1e-10, atol=1e-12)
    if k == 2:
        _, ens_avg, _, _ = _brute_obpm(X, y, N, tau, seed=4, epochs=2)
        np.testing.assert_allclose(_model(pooled)[0], ens_avg, rtol=1e-10, atol=1e-12)
    assert pooled.online_errors_ == kept.online_errors_
    assert "members_" not in pooled.__dict__ and kept.members_.shape == (N, 1 if k == 2 else k, 9)


@pytest.mark.parametrize("base", ["pa", "romma", "alma"])
def test_pooled_rules_with_rescales_and_rebases(small_pools, base):
    X, y = _data(n=400, d=10, seed=2)
    kw = dict(n_estimators=6, tau=0.6, random_state=1, epochs=3, base=base, dtype="float32")
    pooled = OBPM(**kw).fit(X, y)
    kept = OBPM(**kw, keep_members=True).fit(X, y)
    np.testing.assert_array_equal(pooled._state.W, kept._state.W)
    np.testing.assert_allclose(_model(pooled), _model(kept), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block,groups", [(1, 1), (7, 2), (1000, 3), (13, 5)])
def test_pooled_bit_identical_for_any_chunking_and_learner_groups(small_pools, block, groups):
    X, y = _data(n=400, k=3, seed=4)
    kw = dict(n_estimators=10, tau=(0.3, 0.6), random_state=7)
    ref = OBPM(**kw).partial_fit(X, y)
    clf = OBPM(**kw, learner_groups=groups, n_jobs=2)
    for s in range(0, len(y), block):
        clf.partial_fit(X[s : s + block], y[s : s + block], classes=[0, 1, 2])
    np.testing.assert_array_equal(_model(clf), _model(ref))
    np.testing.assert_array_equal(clf._state.accP, ref._state.accP)


def test_learner_groups_never_cut_a_pool(small_pools):
    starts = OBPM(n_estimators=10, tau=0.5)._pools()
    assert starts.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    bounds = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    assert engine.learner_groups(10, 2, bounds=bounds) == [(0, 4), (4, 10)]
    assert engine.learner_groups(10, 5, bounds=bounds) == [(0, 4), (4, 8), (8, 10)]  # at most one per pool


def test_store_groups_checkpoint_and_resume_give_the_same_bits(small_pools, tmp_path):
    X, y = _data(n=900, d=15, seed=5)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=100)
    kw = dict(n_estimators=10, tau=0.4, random_state=9, scheduler="in-process")
    ref = OBPM(epochs=2, learner_groups=1, checkpoint_every=100, **kw).fit(str(p))
    split = OBPM(epochs=2, learner_groups=3, checkpoint_every=2, **kw).fit(str(p))
    assert split.job_["groups"] == [[0, 4], [4, 8], [8, 10]]
    np.testing.assert_array_equal(_model(split), _model(ref))
    ck = tmp_path / "ck"
    OBPM(epochs=1, learner_groups=2, checkpoint=str(ck), checkpoint_every=2, **kw).fit(str(p))
    res = OBPM(epochs=2, learner_groups=2, checkpoint=str(ck), checkpoint_every=2, resume=True, **kw).fit(str(p))
    assert res.job_["resumed_from"] is not None
    np.testing.assert_array_equal(_model(res), _model(ref))
    # the same model as the per-member running sums, to rounding; the same members
    kept = OBPM(epochs=2, keep_members=True, **kw).fit(str(p))
    np.testing.assert_allclose(_model(ref), _model(kept), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(ref._state.W, kept._state.W)


def test_members_are_never_silently_missing(tmp_path):
    X, y = _data(n=200, seed=1)
    pooled = OBPM(n_estimators=4, tau=0.5, random_state=0).fit(X, y)
    with pytest.raises(AttributeError, match="keep_members=True"):
        pooled.members_  # noqa: B018
    assert not hasattr(pooled, "members_")
    with pytest.raises(ValueError, match=r"kept no members_ \(keep_members='auto'\)"):
        save_model(pooled, tmp_path / "m.npz", members=True)
    with pytest.raises(ValueError, match="keep_members=False: weights='margin_bound'"):
        OBPM(keep_members=False, weights="margin_bound").fit(X, y)
    with pytest.raises(ValueError, match="keep_members must be one of"):
        OBPM(keep_members="yes").fit(X, y)
    bound = OBPM(n_estimators=4, tau=0.5, random_state=0, weights="margin_bound").fit(X, y)  # "auto" keeps them
    assert bound.members_.shape == (4, 1, 13) and bound.weights_.shape == (1, 4)
    last = OBPM(n_estimators=4, tau=0.5, random_state=0, conversion="last", keep_members=False).fit(X, y)
    assert "members_" not in last.__dict__


def test_cli_save_members_keeps_them(tmp_path, capsys):
    from distlearn.cli import main
    from distlearn.model import load_model

    X, y = _data(n=300, seed=3)
    create_dataset(tmp_path / "t.zarr", X, y, block_rows=100)
    out = tmp_path / "m.npz"
    assert main(["train", str(tmp_path / "t.zarr"), "--model", "obpm", "--param", "n_estimators=3",
                 "--param", "tau=0.5", "--save", str(out), "--save-members", "--in-process"]) == 0
    assert load_model(out).members_.shape == (3, 1, 13)
    capsys.readouterr()
    assert main(["train", str(tmp_path / "t.zarr"), "--model", "obpm", "--param", "keep_members=false",
                 "--save", str(tmp_path / "n.npz"), "--save-members", "--in-process"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "keep_members" in err[0]


@pytest.mark.cluster
def test_pooled_on_dask_is_the_same_bits(small_pools, tmp_path, dask_scheduler):
    X, y = _data(n=800, k=3, seed=8)
    p = tmp_path / "m.zarr"
    create_dataset(p, X, y, block_rows=100)
    kw = dict(n_estimators=10, tau=0.5, epochs=2, random_state=5)  # pools of 4: the job carries the size to workers
    a = OBPM(scheduler="in-process", learner_groups=1, **kw).fit(str(p))
    b = OBPM(scheduler=dask_scheduler["address"], learner_groups=3, checkpoint_every=3, **kw).fit(str(p))
    assert b.job_["groups"] == [[0, 4], [4, 8], [8, 10]]
    np.testing.assert_array_equal(_model(a), _model(b))


def test_asking_for_more_learner_groups_than_pools_warns_and_names_keep_members(tmp_path):
    """Pooled sums allow one group per pool: a fit asking for more says so (never silently fewer)."""
    import warnings

    X, y = _data(n=300, d=10, seed=0)
    store = tmp_path / "s.zarr"
    create_dataset(store, X, y, block_rows=100)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        m = OBPM(n_estimators=100, tau=0.3, learner_groups=4, random_state=0).fit(str(store))
    msgs = [str(w.message) for w in got if "learner group" in str(w.message)]
    assert len(msgs) == 1 and "2 learner groups run, not 4" in msgs[0] and "keep_members=True" in msgs[0], msgs
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = OBPM(n_estimators=100, tau=0.3, learner_groups=4, keep_members=True, random_state=0).fit(str(store))
    assert not [w for w in got if "learner group" in str(w.message)]
    np.testing.assert_allclose(m.coef_, k.coef_, rtol=1e-10, atol=1e-12)
