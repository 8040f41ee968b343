"""OBPM and PermutationBPM against brute force.

The oracles: the counter-based draws in numpy (:func:`distlearn.rng.obpm_mask`),
and the single-learner kernel (itself tested against the pure-Python rules and
scikit-learn/river) run on exactly the examples each member was shown.
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import distlearn
from distlearn import OBPM, PermutationBPM, rng
from distlearn.data import create_dataset
from distlearn.ensembles import _kernels as EK
from distlearn.ensembles import init_ensemble, learn_ensemble_chunk, margin_bound, margin_bound_weights
from distlearn.learners import init_state, learn_chunk, make_rule, running_sum, running_value
from distlearn.learners.linear import NonFiniteError


def _data(n=300, d=12, k=2, seed=0, density=0.6):
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, d)) * (g.random((n, d)) < density)
    w = g.normal(size=(k if k > 2 else 1, d))
    s = X @ w.T
    y = (s[:, 0] > 0).astype(np.int64) if k == 2 else np.argmax(s, axis=1).astype(np.int64)
    flip = g.random(n) < 0.05
    y[flip] = g.integers(0, k, flip.sum())
    return X, y


# ---------------------------------------------------------------- the draws


def test_kernel_draws_equal_numpy_reference():
    out = np.zeros(5, np.uint64)
    for seed, epoch, t in [(0, 0, 0), (123, 2, 77), (2**40, 7, 10**9)]:
        EK.mask_words(np.uint64(rng.epoch_key(seed, epoch)), np.uint64(t), 5, out)
        bits = np.stack([out & np.uint64(0xFFFFFFFF), out >> np.uint64(32)], 1).ravel()
        for tau in (0.1, 0.3, 0.77):
            ref = rng.obpm_mask(seed, epoch, [t], 10, tau)[0]
            assert np.array_equal(bits < np.uint64(rng.mask_threshold(tau)), ref)


def test_compiled_draw_masks_equal_numpy_reference():
    """The kernel OBPM's chunk masks (``draw_mask``) are ``rng.obpm_mask``'s, any first learner, odd or even."""
    tids = np.array([0, 5, 77, 10**9, 2**40 + 3], dtype=np.int64)
    for seed, epoch, first, n, tau in [(0, 0, 0, 10, 0.3), (123, 2, 9, 7, 0.77), (2**40, 7, 4, 5, 0.1),
                                       (1, 0, 3, 4, 1.0), (1, 0, 0, 4, 0.0)]:
        out = np.zeros((tids.size, n), dtype=bool)
        EK.draw_mask(np.uint64(rng.epoch_key(seed, epoch)), tids, np.uint64(rng.mask_threshold(tau)), first, out)
        ref = rng.obpm_mask(seed, epoch, tids, n, tau, first=first)
        assert ref.any() or tau == 0.0
        assert np.array_equal(out, ref)


def test_draws_are_bernoulli_tau_and_independent():
    M = rng.obpm_mask(5, 0, np.arange(200_000), 64, 0.3)
    p = M.mean()
    assert abs(p - 0.3) < 0.002, p
    per_learner = M.mean(0)
    assert per_learner.std() < 0.003, per_learner.std()
    # pairs sharing a 64-bit word (2g, 2g+1) and neighbours in t are uncorrelated
    c_pair = np.corrcoef(M[:, 0], M[:, 1])[0, 1]
    c_time = np.corrcoef(M[:-1, 5], M[1:, 5])[0, 1]
    c_epoch = np.corrcoef(M[:, 3], rng.obpm_mask(5, 1, np.arange(200_000), 64, 0.3)[:, 3])[0, 1]
    assert max(abs(c_pair), abs(c_time), abs(c_epoch)) < 0.01, (c_pair, c_time, c_epoch)
    # a learner's draws do not depend on which learners are computed with it
    assert np.array_equal(rng.obpm_mask(5, 0, np.arange(50), 7, 0.3, first=9), M[:50, 9:16])


def test_tau_one_shows_everything():
    assert rng.obpm_mask(1, 0, np.arange(10), 3, 1.0).all()
    assert rng.mask_threshold(1.0) == 2**32


# ------------------------------------------------ members = the base learner


RULES = [
    ("perceptron", {}, 2),
    ("generalized", {"rho": 0.1, "eta": 0.5, "rho_schedule": "inv_sqrt"}, 2),
    ("margin", {"horizon": 300, "radius": 5.0}, 2),
    ("alma", {"alpha": 0.9, "B": 1.1, "C": 0.7}, 2),
    ("romma", {}, 2),
    ("romma", {"aggressive": True}, 2),
    ("pa", {"variant": "PA-II", "C": 0.5}, 2),
    ("mira", {"beta": 0.1}, 2),
    ("lms", {"eta": 0.01}, 2),
    ("perceptron", {}, 4),
    ("alma", {}, 4),
    ("pa", {"variant": "PA-I", "native": True}, 4),
    ("pa", {"variant": "PA", "native": True}, 4),
    ("mira", {"beta": 0.05, "native": True}, 4),
]


@pytest.mark.parametrize("name,params,k", RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_member_is_the_base_learner_on_its_examples(name, params, k, dtype):
    X, y = _data(k=k, seed=len(name) + k)
    X = X.astype(dtype)
    n, d = X.shape
    N, tau, seed = 7, 0.4, 11
    K = 1 if k == 2 else k
    rule = make_rule(name, **params)
    ens = init_ensemble(d, N, K, dtype=dtype)
    order = np.random.default_rng(1).permutation(n)
    tids = np.arange(100, 100 + n)
    margin, upd = learn_ensemble_chunk(rule, ens, sp.csr_matrix(X), y, tids, seed=seed, tau=tau, epoch=3,
                                       order=order, fit_intercept=True)
    mask = rng.obpm_mask(seed, 3, tids, N, tau)
    members = ens.members()
    total_updates = 0
    for j in range(N):
        st = init_state(d, K, dtype=dtype)
        rows = order[mask[order, j]]
        assert ens.member_rounds[j] == len(rows)
        log = learn_chunk(rule, st, X, y, order=rows, fit_intercept=True)
        total_updates += int(log.updated.sum())
        ref = (st.W.astype(np.float64) * st.scale[None, :]).T
        assert np.array_equal(members[j], ref), f"member {j} differs from the base learner on its {len(rows)} rows"
    assert int(upd.sum()) == total_updates
    assert margin.shape == (n, K)


@pytest.mark.parametrize("name,params", [("perceptron", {}), ("romma", {}), ("alma", {"alpha": 0.9, "B": 1.1, "C": 0.7}),
                                         ("pa", {"variant": "PA-II", "C": 0.5})])
def test_each_members_running_sum_is_the_base_learners(name, params):
    """conversion_scope="members": member j's running sum (its own rounds) is, bit for bit, the
    single learner's running sum over the rows it was shown, through ROMMA's and ALMA's rescales
    (each rebase folds q W into P) and two epochs, with the members in two learner groups.  The
    running sum's layout and order of terms is what any faster form of it must keep (issue 30)."""
    X, y = _data(seed=9)
    n, d = X.shape
    N, tau, seed = 6, 0.5, 5
    rule = make_rule(name, **params)
    ens = init_ensemble(d, N, 1, running_sum=True)
    orders = [np.random.default_rng(e).permutation(n) for e in range(2)]
    for e, order in enumerate(orders):
        learn_ensemble_chunk(rule, ens, sp.csr_matrix(X), y, np.arange(n), seed=seed, tau=tau, epoch=e,
                             order=order, fit_intercept=True, acc_mode=EK.ACC_MEMBERS, groups=2)
    sums = ens.member_sums()
    rebased = 0
    for j in range(N):
        st = init_state(d, 1)
        acc = running_sum(st)
        for e, order in enumerate(orders):
            rows = order[rng.obpm_mask(seed, e, np.arange(n), N, tau)[order, j]]
            learn_chunk(rule, st, X, y, order=rows, fit_intercept=True, acc=acc)
        assert np.array_equal(sums[j], running_value(acc, st)), f"member {j}'s running sum differs"
        rebased += int(acc.q[1, 0] != 1.0)
    if name == "alma":  # its projections shrink the scale: every member's sum was rebased
        assert rebased == N


def test_members_match_for_dense_and_csr_input():
    X, y = _data(k=3)
    rule = make_rule("pa", native=True)
    a = init_ensemble(X.shape[1], 5, 3)
    b = init_ensemble(X.shape[1], 5, 3)
    ma, _ = learn_ensemble_chunk(rule, a, X, y, np.arange(len(y)), seed=1, tau=0.5)
    mb, _ = learn_ensemble_chunk(rule, b, sp.csr_matrix(X), y, np.arange(len(y)), seed=1, tau=0.5)
    assert np.array_equal(a.W, b.W) and np.array_equal(ma, mb)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("acc_mode", [EK.ACC_NONE, EK.ACC_ENSEMBLE, EK.ACC_MEMBERS])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_perceptron_kernel_equals_the_general_kernel(dtype, acc_mode, fit_intercept, monkeypatch):
    """The pass compiled for the perceptron (engine's choice) and the general pass give the
    same weights, running sums and per-round outputs, bit for bit, over two tau groups."""
    X, y = _data(n=400, d=15, seed=4, density=0.4)
    rule = make_rule("perceptron")
    assert EK.obpm_kernel(rule.code) is EK._obpm_csr_perceptron
    assert EK.obpm_kernel(make_rule("pa").code) is EK._obpm_csr
    runs = []
    for kern in (EK._obpm_csr_perceptron, EK._obpm_csr):
        monkeypatch.setattr(EK, "obpm_kernel", lambda code, k=kern: k)
        ens = init_ensemble(X.shape[1], 6, 1, dtype=dtype, running_sum=acc_mode != EK.ACC_NONE)
        out = [learn_ensemble_chunk(rule, ens, X, y, np.arange(len(y)), seed=2, tau=(0.3, 0.6), tau_block=3,
                                    epoch=e, order=np.random.default_rng(e).permutation(len(y)),
                                    fit_intercept=fit_intercept, acc_mode=acc_mode, groups=2) for e in range(2)]
        runs.append((ens, out))
    (a, oa), (b, ob) = runs
    assert int(a.n_updates.sum()) > 50  # the members did learn
    for name in ("W", "scale", "n_updates", "member_rounds", "accP", "accq"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for (ma, ua), (mb, ub) in zip(oa, ob):
        assert np.array_equal(ma, mb) and np.array_equal(ua, ub)


# ------------------------------------------------------------ invariance


@pytest.mark.parametrize("block", [1, 7, 1000])
@pytest.mark.parametrize("groups", [1, 3, 25])
def test_bit_identical_for_any_block_size_and_learner_groups(block, groups):
    X, y = _data(n=400, k=3, seed=4)
    ref = OBPM(n_estimators=25, tau=0.3, random_state=7, conversion="average", keep_members=True).partial_fit(X, y)
    clf = OBPM(n_estimators=25, tau=0.3, random_state=7, conversion="average", learner_groups=groups,
               keep_members=True)
    for s in range(0, len(y), block):
        clf.partial_fit(X[s : s + block], y[s : s + block], classes=[0, 1, 2])
    assert np.array_equal(clf.members_, ref.members_)
    assert np.array_equal(clf.coef_, ref.coef_)
    assert clf.t_ == ref.t_ == len(y)
    assert abs(clf.online_errors_ - ref.online_errors_) <= 1  # (see OBPM's Notes on rounding)


def test_threads_and_groups_give_the_same_fit():
    X, y = _data(n=2000, d=30, seed=9)
    a = OBPM(n_estimators=40, random_state=3, epochs=2).fit(X, y)
    b = OBPM(n_estimators=40, random_state=3, epochs=2, n_jobs=2).fit(X, y)
    c = OBPM(n_estimators=40, random_state=3, epochs=2, learner_groups=40, n_jobs=2).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.coef_, c.coef_)
    assert a.n_updates_ == b.n_updates_ == c.n_updates_


def test_fit_on_stores_does_not_depend_on_block_size(tmp_path):
    X, y = _data(n=500, d=10, k=2, seed=2)
    paths = []
    for rows in (1, 7, 1000):
        p = tmp_path / f"s{rows}.zarr"
        create_dataset(p, sp.csr_matrix(X), y, block_rows=rows, dtype="float64")
        paths.append(p)
    kw = dict(n_estimators=10, tau=0.4, random_state=5, shuffle=False, epochs=2)
    ref = OBPM(**kw).fit(X, y)
    for p in paths:
        got = OBPM(**kw).fit(p)
        assert np.array_equal(got.coef_, ref.coef_), p
        assert got.online_errors_ == ref.online_errors_


# ------------------------------------------------- the ensemble, brute force


def _brute_obpm(X, y, N, tau, seed, epochs=1):
    """Algorithm 2 written out: perceptrons (eta = 1, bias feature 1), numpy masks,
    w~_{t-1} scored before round t, the running averages of both scopes."""
    n, d = X.shape
    Xb = np.hstack([X, np.ones((n, 1))])
    ys = np.where(y == 1, 1.0, -1.0)
    W = np.zeros((N, d + 1))
    mistakes = []
    ens_sum = np.zeros((N, d + 1))
    mem_sum = np.zeros((N, d + 1))
    mem_cnt = np.zeros(N)
    T = 0
    for e in range(epochs):
        mask = rng.obpm_mask(seed, e, np.arange(n), N, tau)
        for t in range(n):
            x = Xb[t]
            m = W @ x
            mistakes.append((m.sum() >= 0) != (ys[t] > 0))
            ens_sum += W
            T += 1
            for j in np.flatnonzero(mask[t]):
                mem_sum[j] += W[j]
                mem_cnt[j] += 1
                if ys[t] * m[j] <= 0:
                    W[j] = W[j] + ys[t] * x
    last = W.mean(0)
    ens_avg = ((ens_sum + W) / (T + 1)).mean(0)
    mem_avg = ((mem_sum + W) / (mem_cnt[:, None] + 1)).mean(0)
    return last, ens_avg, mem_avg, np.array(mistakes)


def test_online_errors_and_conversions_against_algorithm_2():
    X, y = _data(n=300, d=8, seed=6)
    N, tau = 9, 0.35
    last, ens_avg, mem_avg, mistakes = _brute_obpm(X, y, N, tau, seed=4, epochs=2)
    kw = dict(n_estimators=N, tau=tau, random_state=4, shuffle=False, epochs=2, normalize=False)
    a = OBPM(**kw, record_online=True, conversion="last").fit(X, y)
    np.testing.assert_allclose(np.r_[a.coef_[0], a.intercept_], last, rtol=1e-12, atol=1e-12)
    # online errors: the first epoch (fit), as documented
    assert a.online_errors_ == int(mistakes[: len(y)].sum())
    assert np.array_equal(a.online_mistakes_, mistakes[: len(y)].astype(np.uint8))
    b = OBPM(**kw, conversion="average").fit(X, y)  # pooled running sums (keep_members="auto")
    np.testing.assert_allclose(np.r_[b.coef_[0], b.intercept_], ens_avg, rtol=1e-10, atol=1e-12)
    kept = OBPM(**kw, conversion="average", keep_members=True).fit(X, y)  # one running sum per member
    np.testing.assert_allclose(np.r_[kept.coef_[0], kept.intercept_], ens_avg, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kept.members_.mean(axis=0)[0], ens_avg, rtol=1e-10, atol=1e-12)
    c = OBPM(**kw, conversion="average", conversion_scope="members").fit(X, y)
    np.testing.assert_allclose(np.r_[c.coef_[0], c.intercept_], mem_avg, rtol=1e-10, atol=1e-12)
    assert not np.allclose(ens_avg, mem_avg)  # the two scopes are different conversions


def test_normalize_is_step_15():
    X, y = _data(n=500, seed=1)
    raw = OBPM(n_estimators=10, normalize=False, random_state=0).fit(X, y)
    nrm = OBPM(n_estimators=10, normalize=True, random_state=0).fit(X, y)
    w = np.r_[raw.coef_[0], raw.intercept_]
    assert np.linalg.norm(w) > 1
    np.testing.assert_allclose(np.r_[nrm.coef_[0], nrm.intercept_], w / np.linalg.norm(w), rtol=1e-12)
    assert np.array_equal(raw.predict(X), nrm.predict(X))


def test_partial_fit_stream_equals_fit_without_shuffle():
    X, y = _data(n=600, d=15, seed=8)
    a = OBPM(n_estimators=12, random_state=1, shuffle=False, epochs=1).fit(X, y)
    b = OBPM(n_estimators=12, random_state=1)
    for s in range(0, 600, 128):
        b.partial_fit(X[s : s + 128], y[s : s + 128], classes=[0, 1])
    assert np.array_equal(a.coef_, b.coef_) and a.online_errors_ == b.online_errors_


def test_multiclass_ovr_and_native_learn():
    X, y = _data(n=1500, d=10, k=4, seed=3, density=1.0)
    for base, params in [("perceptron", None), ("pa", {"multiclass": "native"}), ("mira", None)]:
        clf = OBPM(n_estimators=20, base=base, base_params=params, epochs=3, random_state=0,
                   keep_members=True).fit(X, y)
        assert clf.coef_.shape == (4, 10)
        assert clf.score(X, y) > 0.75, (base, clf.score(X, y))
        assert clf.members_.shape == (20, 4, 11)


def test_obpm_beats_a_single_perceptron_on_the_paper_problem():
    from distlearn.data.synthetic import make_obpm_artificial

    errs = []
    for run in range(5):
        d = make_obpm_artificial(1000, 1000, random_state=run)
        o = OBPM(n_estimators=100, tau=0.35, random_state=run, fit_intercept=False).fit(d.X_train, d.y_train)
        p = distlearn.Perceptron(epochs=1, random_state=run, fit_intercept=False).fit(d.X_train, d.y_train)
        errs.append((1 - o.score(d.X_test, d.y_test), 1 - p.score(d.X_test, d.y_test)))
    e = np.mean(errs, axis=0)
    assert e[0] < 0.005 < e[1], f"OBPM {e[0]:.4f}, perceptron {e[1]:.4f} (paper: 0.00% vs 2.03%)"


def test_base_given_as_an_estimator():
    X, y = _data(n=400)
    a = OBPM(n_estimators=5, base=distlearn.ALMA(B=1.1, C=0.7), random_state=0).fit(X, y)
    b = OBPM(n_estimators=5, base="alma", base_params={"B": 1.1, "C": 0.7}, random_state=0).fit(X, y)
    assert np.array_equal(a.coef_, b.coef_)


# ------------------------------------------------------------ margin bound


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 8))
def test_eq2_is_a_lower_bound_and_the_weights_maximise_it(seed, N):
    g = np.random.default_rng(seed)
    d = 5
    u = g.normal(size=d)
    X = g.normal(size=(60, d))
    X = X[np.abs(X @ u) / np.linalg.norm(u) > 0.3]
    y = np.sign(X @ u)
    members = u[None, :] + 0.5 * g.normal(size=(N, d))
    Wn = members / np.linalg.norm(members, axis=1, keepdims=True)
    gam = np.min(y[:, None] * (X @ Wn.T), axis=0)
    alpha, b, b_uni = margin_bound_weights(members, gam)
    assert abs(alpha.sum() - 1) < 1e-9 and (alpha >= 0).all()
    assert b >= b_uni - 1e-12
    for a in (alpha, np.full(N, 1 / N)):
        w = a @ Wn
        true_margin = np.min(y * (X @ w)) / np.linalg.norm(w)
        bound = margin_bound(gam, Wn @ Wn.T, a)
        assert true_margin >= bound - 1e-9, (true_margin, bound)


def test_margin_bound_weights_in_fit():
    from distlearn.data.synthetic import make_obpm_artificial

    d = make_obpm_artificial(600, 10, n_features=20, margin=0.1, random_state=1)
    clf = OBPM(n_estimators=20, tau=0.5, epochs=5, weights="margin_bound", random_state=0,
               fit_intercept=False).fit(d.X_train, d.y_train)
    assert clf.weights_.shape == (1, 20) and abs(clf.weights_.sum() - 1) < 1e-9
    assert clf.bound_ >= clf.bound_uniform_
    w = clf.coef_[0]
    margin = np.min(np.where(d.y_train == 1, 1, -1) * (d.X_train @ w)) / np.linalg.norm(w)
    assert margin >= clf.bound_ - 1e-9


# ------------------------------------------------------------ PermutationBPM


def test_permutation_bpm_members_are_seeded_base_runs():
    X, y = _data(n=500, seed=5)
    clf = PermutationBPM(n_estimators=4, epochs=2, conversion="last", random_state=3).fit(X, y)
    assert clf.permutation_ == "exact"
    for j, est in enumerate(clf.estimators_):
        seed = int(rng.hash64(clf._seed, rng.stream_id("permutation-bpm"), j)) & 0x7FFFFFFFFFFFFFFF
        ref = distlearn.Perceptron(epochs=2, random_state=seed).fit(X, y)
        assert np.array_equal(est.coef_, ref.coef_)
    np.testing.assert_allclose(clf.coef_, np.mean([e.coef_ for e in clf.estimators_], axis=0), rtol=1e-12)
    par = PermutationBPM(n_estimators=4, epochs=2, conversion="last", random_state=3, n_jobs=2).fit(X, y)
    assert np.array_equal(par.coef_, clf.coef_)
    # different members saw different orders
    assert not np.array_equal(clf.estimators_[0].coef_, clf.estimators_[1].coef_)


def test_permutation_bpm_on_a_store_exact_and_blocks(tmp_path):
    X, y = _data(n=500, seed=5)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=64, dtype="float64")
    mem = PermutationBPM(n_estimators=3, random_state=2).fit(X, y)
    exact = PermutationBPM(n_estimators=3, random_state=2).fit(p)
    assert exact.permutation_ == "exact" and np.array_equal(exact.coef_, mem.coef_)
    blocks = PermutationBPM(n_estimators=3, random_state=2, permutation="blocks").fit(p)
    assert blocks.permutation_ == "blocks"
    assert blocks.score(X, y) > 0.7


def test_permutation_bpm_with_a_data_driven_conversion():
    X, y = _data(n=500, seed=5)
    clf = PermutationBPM(n_estimators=3, conversion="suffix", random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.7


# ------------------------------------------------------------ errors


@pytest.mark.parametrize("kw,msg", [
    ({"tau": 0.0}, "tau"),
    ({"tau": 1.5}, "tau"),
    ({"n_estimators": 0}, "n_estimators"),
    ({"base": "svm"}, "base must be one of"),
    ({"base_params": {"nope": 1}}, "has no parameter"),
    ({"conversion": "suffix"}, "conversion must be 'last' or 'average'"),
    ({"conversion_scope": "all"}, "conversion_scope"),
])
def test_bad_parameters_are_named(kw, msg):
    X, y = _data(n=50)
    with pytest.raises(ValueError, match=msg):
        OBPM(**kw).fit(X, y)


def test_nan_row_is_named_and_partial_fit_rolls_back():
    X, y = _data(n=100)
    clf = OBPM(n_estimators=4, random_state=0).partial_fit(X[:50], y[:50])
    before = clf.coef_.copy()
    Xb = X[50:].copy()
    Xb[10, 3] = np.nan
    with pytest.raises(NonFiniteError, match="row 10"):
        clf.partial_fit(Xb, y[50:])
    assert np.array_equal(clf.coef_, before) and clf.t_ == 50


def test_batch_only_options_refuse_streams():
    X, y = _data(n=50)
    with pytest.raises(ValueError, match="margin_bound"):
        OBPM(weights="margin_bound").partial_fit(X, y)
    assert not hasattr(PermutationBPM(), "partial_fit")
    with pytest.raises(ValueError, match="not a linear hypothesis"):
        PermutationBPM(conversion="vote").fit(X, y)
