"""Kernel OBPM: N kernel learners on one shared pool, each member bit for bit the single kernel learner."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from tests.naive_budget import KERNEL_RTOL

from distlearn import KernelPA, rng
from distlearn.ensembles.kernel import init_kernel_ensemble, learn_kernel_ensemble_chunk, member_seed
from distlearn.learners import make_rule
from distlearn.learners.kernel import init_budget_state, kernel_decision, learn_budget_chunk, make_kernel


def _data(n=150, d=4, k=2, seed=0):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, d))
    if k == 2:
        y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rs.normal(size=n) > 0).astype(np.int64)
    else:
        y = (np.floor((np.arctan2(X[:, 1], X[:, 0]) + math.pi) / (2 * math.pi) * k) % k).astype(np.int64)
    return X, y


def _ensemble(rule, kern, X, y, k, native, N, tau, seed, budget, removal, beta, chunks=1, epochs=1,
              keep_retired=False):
    K = 1 if k == 2 else k
    st = init_kernel_ensemble(X.shape[1], N, K, native=native, keep_retired=keep_retired)
    logs = []
    for e in range(epochs):
        for part in np.array_split(np.arange(len(y)), chunks):
            logs.append(learn_kernel_ensemble_chunk(rule, kern, st, X[part], y[part], part, seed=seed, tau=tau,
                                                    epoch=e, beta=beta, budget=budget, removal=removal))
    return st, logs


CASES = [  # (rule, its parameters, classes, budget); native multiclass unless the rule says ovr
    ("perceptron", {}, 2, None), ("perceptron", {}, 2, "variable"), ("perceptron", {}, 3, 6),
    ("mira", {"beta": 0.1, "native": True}, 4, "variable"), ("mira", {"beta": 0.1, "native": True}, 4, 5),
    ("pa", {"variant": "PA-I", "C": 0.5, "native": True}, 3, 5), ("pa", {"variant": "PA-II", "C": 0.5}, 3, 5),
    ("pa", {"variant": "PA-II", "C": 0.5}, 2, "variable"),
]


@pytest.mark.parametrize("name,params,k,budget,removal", [
    (*case, removal) for case in CASES for removal in (["margin", "oldest", "random"] if isinstance(case[3], int)
                                                       else ["margin"])])
@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_each_member_is_the_single_learner_on_its_examples(name, params, k, budget, removal, kernel):
    native = k > 2 and (name == "perceptron" or params.get("native", False))
    rule = make_rule(name, **params)
    kern = make_kernel(kernel, gamma=0.5, degree=2, coef0=1.0)
    X, y = _data(k=k)
    N, tau, seed, beta = 7, 0.4, 11, 0.1
    st, _ = _ensemble(rule, kern, X, y, k, native, N, tau, seed, budget, removal, beta, chunks=3)
    mask = rng.obpm_mask(seed, 0, np.arange(len(y)), N, tau)
    K = 1 if k == 2 else k
    for j in range(N):
        rows = np.flatnonzero(mask[:, j])
        single = init_budget_state(X.shape[1], K, native=native)
        learn_budget_chunk(rule, kern, single, X, y, order=rows, beta=beta, budget=budget, removal=removal,
                           seed=member_seed(seed, j))
        S1, A1, lab1 = single.support()
        S2, A2, lab2 = st.member_support(j)
        assert S1.shape == S2.shape and np.array_equal(S1, S2), (j, S1.shape, S2.shape)
        assert np.array_equal(A1, A2) and np.array_equal(lab1, lab2)
        assert st.mmeta[j, 2] == len(rows)
        if isinstance(budget, int):
            assert len(A2) <= budget
    # the pool is the union of the members' caches, each pattern once
    live = st.pkey[: st.pmeta[0]][st.palive[: st.pmeta[0]]]
    held = np.unique(np.concatenate([st.pkey[st.pidx[j, : st.mmeta[j, 0]][st.alive[j, : st.mmeta[j, 0]]]]
                                     for j in range(N)]))
    assert np.array_equal(np.sort(live), held)


@pytest.mark.parametrize("budget", [None, "variable", 6])
def test_bayes_point_is_the_mean_of_the_members(budget):
    X, y = _data(k=3, seed=2)
    rule, kern = make_rule("mira", beta=0.1, native=True), make_kernel("rbf", gamma=0.5)
    N = 5
    st, logs = _ensemble(rule, kern, X, y, 3, True, N, 0.5, 4, budget, "margin", 0.1, chunks=2)
    S, coef, lab = st.bayes_point()
    f = kernel_decision(kern, S, coef, X)
    parts = [kernel_decision(kern, *st.member_support(j)[:2], X) for j in range(N)]
    np.testing.assert_allclose(f, sum(parts) / N, rtol=1e-10, atol=1e-12)
    # the logged ensemble margins score the running Bayes point on every example before it learns
    st2, _ = _ensemble(rule, kern, X[:40], y[:40], 3, True, N, 0.5, 4, budget, "margin", 0.1)
    S2, c2, _ = st2.bayes_point()
    m = logs[0].margin[40] / N
    np.testing.assert_allclose(m, kernel_decision(kern, S2, c2, X[40:41])[0], rtol=1e-9, atol=1e-12)


def test_chunking_and_epochs_do_not_change_the_model():
    X, y = _data(k=2, seed=5)
    rule, kern = make_rule("perceptron"), make_kernel("rbf", gamma=0.5)
    a, la = _ensemble(rule, kern, X, y, 2, False, 9, 0.3, 1, "variable", "margin", 0.1, chunks=1, epochs=2,
                      keep_retired=True)
    b, lb = _ensemble(rule, kern, X, y, 2, False, 9, 0.3, 1, "variable", "margin", 0.1, chunks=5, epochs=2,
                      keep_retired=True)
    for avg in (False, True):
        for u, v in zip(a.bayes_point(average=avg), b.bayes_point(average=avg)):
            assert np.array_equal(u, v)
    assert np.array_equal(np.concatenate([q.margin for q in la]), np.concatenate([q.margin for q in lb]))


def test_long_blocks_without_a_budget_keep_members_margins_and_chunking_exact():
    """Without a budget the engine sums a member's scores over 128-round blocks (eight kernel-row blocks, the
    pool's rows computed at the block's start): members are still the single learner bit for bit, the chunking
    (blocks cut anywhere) changes no bit, and the logged margin of a round deep in a block scores the running
    Bayes point.  K = 20 classes: the gathered sums' last column group is the narrow one."""
    k, N, tau, seed, beta = 20, 6, 0.5, 3, 0.1
    X, y = _data(n=400, d=5, k=k, seed=7)
    rule, kern = make_rule("mira", beta=beta, native=True), make_kernel("rbf", gamma=0.5)
    a, la = _ensemble(rule, kern, X, y, k, True, N, tau, seed, None, "margin", beta, chunks=1)
    b, lb = _ensemble(rule, kern, X, y, k, True, N, tau, seed, None, "margin", beta, chunks=7)
    for u, v in zip(a.bayes_point(), b.bayes_point()):
        assert np.array_equal(u, v)
    assert np.array_equal(la[0].margin, np.concatenate([q.margin for q in lb]))
    mask = rng.obpm_mask(seed, 0, np.arange(len(y)), N, tau)
    for j in range(N):
        single = init_budget_state(X.shape[1], k, native=True)
        learn_budget_chunk(rule, kern, single, X, y, order=np.flatnonzero(mask[:, j]), beta=beta, budget=None)
        for u, v in zip(single.support(), a.member_support(j)):
            assert np.array_equal(u, v)
    t = 128 + 16 + 7  # the second block's second kernel-row block
    st, _ = _ensemble(rule, kern, X[:t], y[:t], k, True, N, tau, seed, None, "margin", beta)
    S, c, _ = st.bayes_point()
    np.testing.assert_allclose(la[0].margin[t] / N, kernel_decision(kern, S, c, X[t:t + 1])[0], rtol=1e-9, atol=1e-12)


def test_average_equals_the_mean_of_the_running_bayes_points():
    X, y = _data(n=60, k=2, seed=6)
    rule, kern = make_rule("perceptron"), make_kernel("rbf", gamma=0.5)
    N = 4
    st = init_kernel_ensemble(X.shape[1], N, 1, keep_retired=True)
    fs = [np.zeros(len(y))]  # h_0 = 0
    for t in range(len(y)):
        learn_kernel_ensemble_chunk(rule, kern, st, X[t:t + 1], y[t:t + 1], np.array([t]), seed=3, tau=0.5,
                                    beta=0.1, budget=5)
        S, c, _ = st.bayes_point()
        fs.append(kernel_decision(kern, S, c, X)[:, 0] if len(S) else np.zeros(len(y)))
    S, c, _ = st.bayes_point(average=True)
    np.testing.assert_allclose(kernel_decision(kern, S, c, X)[:, 0], np.mean(fs, axis=0), rtol=1e-9, atol=1e-12)


def test_shared_pool_is_smaller_than_the_members_caches_together():
    X, y = _data(n=300, k=2, seed=7)
    st, logs = _ensemble(make_rule("perceptron"), make_kernel("rbf", gamma=0.5), X, y, 2, False, 20, 0.3, 0,
                         None, "margin", 0.0)
    held = int(st.mmeta[:, 1].sum())
    assert st.pool_size < held / 2, (st.pool_size, held)  # each pattern held by about 2.6 members here
    assert logs[0].pool_size[-1] == st.pool_size


# -- the estimators: KernelOBPM(base=Kernel...) and KernelPermutationBPM(base=Kernel...) ---------------------


def test_kernel_obpm_is_the_engines_bayes_point():
    from sklearn.datasets import load_digits

    from distlearn import KernelMIRA, KernelOBPM

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    base = KernelMIRA(kernel="rbf", gamma=0.5, budget="variable")
    est = KernelOBPM(n_estimators=12, tau=0.4, base=base, epochs=1, conversion="last", random_state=3).fit(X[:1000],
                                                                                                   y[:1000])
    st = est._state
    assert est.pool_size_ == st.pool_size <= st.mmeta[:, 1].sum()
    assert est.support_vectors_.shape[0] == est.dual_coef_.shape[1] == est.n_support_.sum() == est.pool_size_
    members = sum(kernel_decision(est._kernel_obj, *st.member_support(j)[:2], X[1000:]) for j in range(12)) / 12
    np.testing.assert_allclose(est.decision_function(X[1000:]), members, rtol=1e-10, atol=1e-12)
    single = KernelMIRA(kernel="rbf", gamma=0.5, budget="variable", random_state=3).fit(X[:1000], y[:1000])
    # the Bayes point of 12 members that each saw 40 % of the data is about as good as one learner on all of it
    assert est.score(X[1000:], y[1000:]) >= single.score(X[1000:], y[1000:]) - 0.03
    assert 0 < est.online_errors_ < 1000 and est.t_ == 1000 and est.n_removed_ > 0


@pytest.mark.parametrize("conversion", ["last", "average"])
def test_kernel_obpm_partial_fit_and_store_equal_fit(tmp_path, conversion):
    from distlearn import KernelOBPM, KernelPerceptron
    from distlearn.data import create_dataset

    X, y = _data(n=200, k=3, seed=9)
    kw = dict(n_estimators=6, tau=0.5, base=KernelPerceptron(beta=0.1, gamma=0.5, budget=8), shuffle=False,
              random_state=2, conversion=conversion, epochs=1)
    a = KernelOBPM(**kw).fit(X, y)
    b = KernelOBPM(**kw)
    for part in np.array_split(np.arange(200), 4):
        b.partial_fit(X[part], y[part], classes=[0, 1, 2])
    create_dataset(tmp_path / "k.zarr", X, y, block_rows=64, dtype="float64")
    c = KernelOBPM(**kw).fit(str(tmp_path / "k.zarr"))
    for other in (b, c):
        assert np.array_equal(a.support_vectors_, other.support_vectors_)
        assert np.array_equal(a.dual_coef_, other.dual_coef_)
        assert a.online_errors_ == other.online_errors_
    assert a.dual_coef_.shape == (3, a.support_vectors_.shape[0])


@pytest.mark.parametrize("params,message", [
    ({"base": KernelPA(budget="projectron")}, r"base=KernelPA\(\.\.\.\): budget='projectron' is not available to the kernel OBPM"),
    ({"base": "pa"}, r"base='pa': KernelOBPM runs kernel learners .*OBPM\(base='pa'"),
    ({"base": KernelPA(), "tau": (0.1, 0.3)}, "tau must be a real number in \\(0, 1\\]"),
    ({"base": KernelPA(), "tau": "auto"}, "tau must be a real number in \\(0, 1\\]"),
    ({"base": KernelPA(C=-1.0)}, "C"),
    ({"base": KernelPA(), "conversion": "tree"}, "'last' or 'average'"),
])
def test_kernel_obpm_refuses_what_it_cannot_do(params, message):
    from distlearn import KernelOBPM

    X, y = _data(n=40)
    est = KernelOBPM(**params)
    with pytest.raises(ValueError, match=message):
        est.fit(X, y)
    assert not hasattr(est, "classes_")


def test_kernel_obpm_has_no_linear_only_parameters_and_obpm_refuses_a_kernel_base():
    """Two estimators, two explicit signatures: OBPM's linear-only parameters are not KernelOBPM's, and
    OBPM with a kernel base is one line that names KernelOBPM."""
    from distlearn import OBPM, KernelOBPM

    X, y = _data(n=40)
    for linear_only in ("normalize", "conversion_scope", "weights", "fit_intercept", "dtype"):
        with pytest.raises(TypeError, match=linear_only):
            KernelOBPM(**{linear_only: None})
    assert set(KernelOBPM().get_params()) == {"n_estimators", "tau", "base", "base_params", "epochs", "shuffle",
                                              "conversion", "record_online", "random_state",
                                              # the learner-parallel store fit, as OBPM's
                                              "scheduler", "learner_groups", "n_jobs", "checkpoint",
                                              "checkpoint_every", "resume", "progress"}
    for base in (KernelPA(), "kernel-mira"):
        est = OBPM(base=base)
        with pytest.raises(ValueError, match=r"OBPM runs linear rules; the kernel OBPM is KernelOBPM\(base=") as e:
            est.fit(X, y)
        assert "\n" not in str(e.value) and not hasattr(est, "classes_")


def test_kernel_obpm_model_files_from_before_the_split_load_and_are_refitted(tmp_path):
    """kernel_obpm_before_issue27.npz was saved by OBPM(base=KernelMIRA(...)) before KernelOBPM existed: it
    loads as a kernel model, and KernelOBPM with the same parameters is the same model: the same distinct support
    patterns (a repeated one merged) and predictions, coefficients and scores at KERNEL_RTOL (the file predates kernel rows from
    squared norms, issue 29; a refit saved and loaded is the refit bit for bit)."""
    from pathlib import Path

    from distlearn import KernelMIRA, KernelOBPM
    from distlearn.model import KernelModel, load_model, save_model

    rs = np.random.default_rng(5)
    X = rs.normal(size=(120, 3))
    y = (np.floor((np.arctan2(X[:, 1], X[:, 0]) + math.pi) / (2 * math.pi) * 3) % 3).astype(np.int64)
    old = load_model(Path(__file__).with_name("kernel_obpm_before_issue27.npz"))
    assert isinstance(old, KernelModel) and old.meta["estimator"] == "OBPM"
    est = KernelOBPM(n_estimators=4, tau=0.5, base=KernelMIRA(gamma=0.5, budget=12), epochs=2,
                     random_state=7).fit(X[:100], y[:100])
    # the old file lists a training row once per pooling; the refit lists each distinct row once, its
    # coefficients summed (merge_repeated_patterns): the same expansion
    from distlearn.estimators.kernel_bayes_point import merge_repeated_patterns

    S_old, A_old, _ = merge_repeated_patterns(old.support_vectors_, old.dual_coef_.T, np.zeros(len(old.dual_coef_.T),
                                                                                              dtype=np.int64))
    assert len(S_old) < len(old.support_vectors_)
    assert np.array_equal(est.support_vectors_, S_old)
    np.testing.assert_allclose(est.dual_coef_, A_old.T, rtol=KERNEL_RTOL, atol=1e-12)
    np.testing.assert_allclose(est.decision_function(X[100:]), old.decision_function(X[100:]), rtol=KERNEL_RTOL,
                               atol=1e-9)
    assert np.array_equal(est.predict(X[100:]), old.predict(X[100:]))
    new = load_model(save_model(est, tmp_path / "k.npz"))
    assert new.meta["estimator"] == "KernelOBPM" and new.meta["params"]["tau"] == 0.5
    assert np.array_equal(new.decision_function(X[100:]), est.decision_function(X[100:]))


def test_kernel_permutation_bpm_is_the_mean_of_its_members():
    from distlearn import KernelPerceptron, KernelPermutationBPM

    X, y = _data(n=200, k=2, seed=4)
    est = KernelPermutationBPM(n_estimators=4, base=KernelPerceptron(beta=0.1, gamma=0.5, budget="variable"),
                               conversion="average", random_state=1).fit(X[:150], y[:150])
    # a training row that several members keep is one pattern of the Bayes point
    rows = np.unique(np.concatenate([e.support_vectors_ for e in est.estimators_]), axis=0)
    assert len(est.estimators_) == 4 and np.array_equal(est.support_vectors_, rows) and len(rows) <= 150
    assert est.n_support_.sum() == len(rows) and est.dual_coef_.shape == (1, len(rows))
    assert est.permutation_ == "exact" and est.weights_.shape == (1, 4) and est.gamma_ == 0.5
    mean = np.mean([e.decision_function(X[150:]) for e in est.estimators_], axis=0)
    np.testing.assert_allclose(est.decision_function(X[150:]), mean, rtol=1e-10, atol=1e-12)
    assert est.score(X[150:], y[150:]) > 0.7


def test_kernel_permutation_bpm_on_a_store_equals_arrays(tmp_path):
    from distlearn import KernelMIRA, KernelPermutationBPM
    from distlearn.data import create_dataset

    X, y = _data(n=160, k=3, seed=6)
    kw = dict(n_estimators=3, base=KernelMIRA(gamma=0.5, budget=10), epochs=2, random_state=4)
    a = KernelPermutationBPM(**kw).fit(X, y)
    store = create_dataset(tmp_path / "k.zarr", X, y, block_rows=50, dtype="float64").path
    b = KernelPermutationBPM(**kw).fit(str(store))
    assert b.permutation_ == "exact" and np.array_equal(a.support_vectors_, b.support_vectors_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    # a store is scored block by block (50 rows), arrays in one call: the same up to the rounding of the sums
    np.testing.assert_allclose(b.decision_function(str(store)), a.decision_function(X), rtol=1e-10, atol=1e-14)
    blocks = KernelPermutationBPM(permutation="blocks", **kw).fit(str(store))
    assert blocks.permutation_ == "blocks" and blocks.dual_coef_.shape[0] == 3


@pytest.mark.parametrize("params,message", [
    ({"base": "pa"}, r"^base='pa': KernelPermutationBPM runs kernel learners .*PermutationBPM\(base='pa', \.\.\.\)$"),
    ({"base": "arow"}, r"^base='arow': KernelPermutationBPM runs kernel learners"),
    ({"base": KernelPA(), "conversion": "cutoff"}, "no kernel form"),
    ({"base": KernelPA(), "conversion": "vote"}, "not a linear hypothesis"),
    ({"base": KernelPA(C=-1.0)}, "C"),
    ({"base": "kernel-pa", "base_params": {"nope": 1}}, "has no parameter"),
])
def test_kernel_permutation_bpm_refuses_what_it_cannot_do(params, message):
    from distlearn import KernelPermutationBPM

    X, y = _data(n=40)
    est = KernelPermutationBPM(**params)
    with pytest.raises(ValueError, match=message) as e:
        est.fit(X, y)
    assert "\n" not in str(e.value) and not hasattr(est, "classes_")


def test_kernel_permutation_bpm_has_no_linear_only_parameters_and_permutation_bpm_refuses_a_kernel_base():
    """Two estimators, two explicit signatures (no weights=, normalize=, fit_intercept=, dtype= on the kernel
    one); PermutationBPM with a kernel base is one line that names KernelPermutationBPM."""
    from distlearn import KernelPerceptron, KernelPermutationBPM, PermutationBPM

    X, y = _data(n=40)
    for linear_only in ("weights", "normalize", "fit_intercept", "dtype"):
        with pytest.raises(TypeError, match=linear_only):
            KernelPermutationBPM(**{linear_only: None})
    assert set(KernelPermutationBPM().get_params()) == {"n_estimators", "base", "base_params", "epochs", "conversion",
                                                        "permutation", "n_jobs", "random_state", "scheduler", "refit"}
    for base, shown in ((KernelPerceptron(), r"KernelPerceptron\(\.\.\.\)"), ("kernel-mira", "'kernel-mira'")):
        est = PermutationBPM(base=base)
        with pytest.raises(ValueError, match=rf"^base={shown}: PermutationBPM averages weight vectors; the kernel "
                                             rf"permutation Bayes point is KernelPermutationBPM\(base={shown}, "
                                             r"\.\.\.\)$") as e:
            est.fit(X, y)
        assert "\n" not in str(e.value) and not hasattr(est, "classes_")


def test_kernel_permutation_bpm_model_files_from_before_the_split_load_and_predict_as_saved(tmp_path):
    """kernel_permutation_bpm_before_issue27.npz was saved by PermutationBPM(base=KernelPerceptron(...)) before
    KernelPermutationBPM existed: it loads as a kernel model and predicts with its saved expansion.  (Its refit
    was bit for bit the same model until issue 29: since then a later epoch's update on a cached row replaces
    that pattern instead of caching the row twice, so epochs=2 follows another trajectory.)"""
    from pathlib import Path

    from distlearn import KernelPerceptron, KernelPermutationBPM
    from distlearn.learners.kernel import kernel_decision
    from distlearn.model import KernelModel, load_model, save_model

    rs = np.random.default_rng(11)
    X = rs.normal(size=(120, 3))
    y = (np.floor((np.arctan2(X[:, 1], X[:, 0]) + math.pi) / (2 * math.pi) * 3) % 3).astype(np.int64)
    old = load_model(Path(__file__).with_name("kernel_permutation_bpm_before_issue27.npz"))
    assert isinstance(old, KernelModel) and old.meta["estimator"] == "PermutationBPM"
    assert old.meta["params"]["n_estimators"] == 3 and old.meta["params"]["weights"] == "uniform"
    want = kernel_decision(old.kernel_, old.support_vectors_, old.dual_coef_.T, X[100:])
    np.testing.assert_allclose(old.decision_function(X[100:]), want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(old.predict(X[100:]), old.classes_[np.argmax(want, axis=1)])
    # removal="margin": the fixed cache's default when the file was saved (since issue 29 "auto" merges RBF caches)
    est = KernelPermutationBPM(n_estimators=3, base=KernelPerceptron(beta=0.1, gamma=0.5, budget=15, removal="margin"),
                               epochs=2, conversion="average", random_state=7).fit(X[:100], y[:100])
    assert np.mean(est.predict(X[100:]) == old.predict(X[100:])) >= 0.9
    new = load_model(save_model(est, tmp_path / "k.npz"))
    assert new.meta["estimator"] == "KernelPermutationBPM" and new.meta["params"]["epochs"] == 2
    assert np.array_equal(new.decision_function(X[100:]), est.decision_function(X[100:]))


def test_kernel_bases_by_name_and_where_they_do_not_apply():
    from distlearn import KernelOBPM, ParameterMixing

    X, y = _data(n=80, k=2, seed=8)
    est = KernelOBPM(n_estimators=3, base="kernel-perceptron", base_params={"gamma": 0.5, "budget": 10},
               conversion="last", random_state=0).fit(X, y)
    # the pool may hold a row twice (pooled in two rounds); the Bayes point lists it once
    assert est.pool_size_ <= 30 and est.dual_coef_.shape[0] == 1
    assert est.dual_coef_.shape[1] == len(np.unique(est.support_vectors_, axis=0)) <= est.pool_size_
    with pytest.raises(ValueError, match="a kernel learner has none"):
        ParameterMixing(base="kernel-mira").fit(X, y)


def test_distlearn_train_model_kernel_obpm_and_the_old_obpm_kernel_base(tmp_path, capsys):
    """``distlearn train --model kernel-obpm`` trains and saves the KernelOBPM of the same parameters;
    ``--model obpm --param base=kernel-mira`` (the kernel OBPM before it had its own name) is one line
    naming ``--model kernel-obpm``, exit 2."""
    import json

    from distlearn import KernelOBPM
    from distlearn.cli import main
    from distlearn.data import create_dataset
    from distlearn.model import load_model

    X, y = _data(n=120, k=3, seed=2)
    store = create_dataset(tmp_path / "t.zarr", X, y, block_rows=50, dtype="float64").path
    argv = ["train", str(store), "--model", "kernel-obpm", "--param", "n_estimators=4", "--param", "base=kernel-mira",
            "--param", "tau=0.5", "--epochs", "2", "--seed", "1", "--json", "--save", str(tmp_path / "m.npz")]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "KernelOBPM" and out["n_support"] > 0
    est = KernelOBPM(n_estimators=4, base="kernel-mira", tau=0.5, epochs=2, random_state=1).fit(str(store))
    assert np.array_equal(load_model(tmp_path / "m.npz").decision_function(X), est.decision_function(X))
    assert main(["train", str(store), "--model", "obpm", "--param", "base=kernel-mira", "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--model kernel-obpm" in err and "KernelOBPM(base='kernel-mira'" in err and "\n" not in err


def test_kernel_permutation_bpm_refit_keeps_the_patterns_and_solves_kernel_ridge_on_them(tmp_path):
    """refit=alpha: the same members and patterns as without it; the coefficients solve the normal equations
    (K'K + alpha n K_SS) A = K'T (numpy, explicit matrices); a store fit sums them block by block (one part
    per block, added in a tree) and gives the same model as arrays (to the rounding of the sums' order), the
    same bits on one thread or two."""
    from distlearn import KernelMIRA, KernelPermutationBPM
    from distlearn.conversions.kernel import DISTIL_RIDGE
    from distlearn.data import create_dataset

    X, y = _data(n=240, k=3, seed=8)
    kw = dict(n_estimators=2, base=KernelMIRA(gamma=0.5, budget=30, removal="merge"), epochs=1, random_state=3)
    plain = KernelPermutationBPM(**kw).fit(X[:200], y[:200])
    est = KernelPermutationBPM(refit=1e-3, **kw).fit(X[:200], y[:200])
    assert np.array_equal(est.support_vectors_, plain.support_vectors_)
    assert est.refit_ == {"alpha": 1e-3, "n": 200, "patterns": len(est.support_vectors_)}
    S = est.support_vectors_
    K = np.exp(-0.5 * ((X[:200, None, :] - S[None, :, :]) ** 2).sum(-1))
    Kss = np.exp(-0.5 * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
    T = -np.ones((200, 3))
    T[np.arange(200), y[:200]] = 1.0
    M = K.T @ K + 1e-3 * 200 * Kss
    M += DISTIL_RIDGE * np.mean(np.diag(M)) * np.eye(len(S))  # the solve's own ridge, relative to the diagonal
    A = np.linalg.solve(M, K.T @ T)
    np.testing.assert_allclose(est.decision_function(X[:200]), K @ A, rtol=1e-7, atol=1e-9)
    assert est.score(X[:200], y[:200]) > plain.score(X[:200], y[:200])
    store = create_dataset(tmp_path / "k.zarr", X[:200], y[:200], block_rows=50, dtype="float64").path
    b = KernelPermutationBPM(refit=1e-3, permutation="exact", n_jobs=2, **kw).fit(str(store))
    assert np.array_equal(b.support_vectors_, est.support_vectors_) and b.refit_ == est.refit_
    np.testing.assert_allclose(b.dual_coef_, est.dual_coef_, rtol=1e-7, atol=1e-9)
    c = KernelPermutationBPM(refit=1e-3, permutation="exact", n_jobs=1, **kw).fit(str(store))
    assert np.array_equal(c.dual_coef_, b.dual_coef_)
    with pytest.raises(ValueError, match=r"^refit must be a real number in \[0, inf\) or None, got -1\.0$"):
        KernelPermutationBPM(refit=-1.0, **kw).fit(X, y)


def test_kernel_permutation_bpm_refit_is_the_same_bits_in_process_on_one_worker_and_on_two(
        tmp_path, dask_scheduler, dask_scheduler_one_worker):
    """The refit's pass over a store of 8 blocks (8 parts, a tree of depth 3) in this process, on one real
    dask worker and on two (the patterns scattered once): the members and the refitted coefficients are the
    same bits everywhere (the parts and their tree are the store's, not the workers')."""
    import hashlib

    from distlearn import KernelMIRA, KernelPermutationBPM
    from distlearn.data import create_dataset
    from distlearn.distributed.runs import store_sums, sum_cuts
    from distlearn.estimators.kernel_bayes_point import _refit_sums

    X, y = _data(n=300, k=3, seed=9)
    store = str(create_dataset(tmp_path / "k.zarr", X, y, block_rows=40, dtype="float64").path)
    assert sum_cuts(8) == list(range(9)) and sum_cuts(200)[:3] == [0, 3, 6] and len(sum_cuts(200)) == 65
    kw = dict(n_estimators=2, base=KernelMIRA(gamma=0.5, budget=25, removal="merge"), epochs=1, random_state=5,
              permutation="blocks", refit=1e-3)
    fits = [KernelPermutationBPM(**kw).fit(store),
            KernelPermutationBPM(n_jobs=2, **kw).fit(store),
            KernelPermutationBPM(scheduler=dask_scheduler_one_worker["address"], **kw).fit(store),
            KernelPermutationBPM(scheduler=dask_scheduler["address"], **kw).fit(store)]
    a = fits[0]
    assert a.refit_ == {"alpha": 1e-3, "n": 300, "patterns": len(a.support_vectors_)}
    digests = {hashlib.sha256(f.dual_coef_.tobytes()).hexdigest() for f in fits}
    assert len(digests) == 1, digests
    for b in fits[1:]:
        assert np.array_equal(a.support_vectors_, b.support_vectors_) and a.refit_ == b.refit_
        assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert a.score(X, y) > 0.8
    # the sums themselves: equal bits; the rows in another grouping (one pass over the arrays) to rounding
    fn = functools.partial(_refit_sums, a._kernel_obj, a.support_vectors_, a.classes_, 3)
    G, R = store_sums(fn, store)
    G2, R2 = store_sums(fn, store, scheduler=dask_scheduler["address"])
    assert np.array_equal(G, G2) and np.array_equal(R, R2)
    from distlearn.conversions.kernel import ridge_sums

    G1, R1 = ridge_sums(a._kernel_obj, a.support_vectors_, X, y, 3)
    np.testing.assert_allclose(G, G1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(R, R1, rtol=1e-12, atol=1e-12)



def test_the_kernel_obpm_lists_each_distinct_pattern_once():
    """A training row pooled again (a later pass, or after a removal) is one pattern of the Bayes point, its
    coefficients summed: the same scores to rounding, fewer kernel rows per prediction; dense and CSR alike."""
    import scipy.sparse as sp

    from distlearn import KernelMIRA, KernelOBPM
    from distlearn.estimators.kernel_bayes_point import merge_repeated_patterns

    X, y = _data(n=160, k=3, seed=9)
    est = KernelOBPM(n_estimators=6, tau=0.5, base=KernelMIRA(gamma=0.5, budget="variable"), epochs=3,
                     random_state=2).fit(X, y)
    S = est.support_vectors_
    assert len(np.unique(S, axis=0)) == len(S)
    raw, coef, lab = est._state.bayes_point(average=True)
    assert len(raw) > len(S)  # the pool's keys did repeat rows
    F = est.decision_function(X)
    from distlearn.learners.kernel import kernel_decision
    np.testing.assert_allclose(F, kernel_decision(est._kernel_obj, raw, coef, X), rtol=1e-9, atol=1e-12)
    assert np.array_equal(est.n_support_, np.bincount(merge_repeated_patterns(raw, coef, lab)[2], minlength=3))
    # CSR and -0.0: the same merge
    Sc, Ac, _ = merge_repeated_patterns(sp.csr_matrix(raw), coef, lab)
    assert sp.issparse(Sc) and np.array_equal(Sc.toarray(), S) and np.array_equal(Ac, est.dual_coef_.T)
    Z = np.array([[0.0, 1.0], [-0.0, 1.0], [0.0, 2.0]])
    Sz, Az, _ = merge_repeated_patterns(Z, np.array([[1.0], [2.0], [4.0]]), np.zeros(3, dtype=np.int64))
    assert np.array_equal(Sz, [[0.0, 1.0], [0.0, 2.0]]) and np.array_equal(Az, [[3.0], [4.0]])


@pytest.mark.parametrize("budget,removal", [(None, "margin"), ("variable", "margin"), (12, "random"), (12, "margin")])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_row_pooled_again_reads_its_kernel_values_from_its_first_slot(monkeypatch, budget, removal, sparse):
    """Over passes the members insert a row in different rounds, so the pool holds it in several slots; the engine
    computes the kernel values of the first live slot of each row only (``pcanon``) and copies them to the others,
    reassigning the first slot when it leaves.  Members, scores, online margins and Bayes points are the bits of
    the engine that computes every slot (every row unknown), whatever the budget, dense or CSR rows."""
    import scipy.sparse as sp

    import distlearn.ensembles.kernel as EK

    X, y = _data(n=90, d=6, k=3, seed=4)
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.9, X, 0.0))
    rule, kern = make_rule("mira", beta=0.1), make_kernel("rbf", gamma=0.4)

    def fit():
        return _ensemble(rule, kern, X, y, 3, True, 6, 0.5, 3, budget, removal, 0.1, chunks=3, epochs=4,
                         keep_retired=True)

    st, logs = fit()
    n = int(st.pmeta[0])
    live = np.flatnonzero(st.palive[:n])
    assert np.any(st.pcanon[live] != live)  # some rows are pooled more than once, and copied
    assert np.all(st.palive[st.pcanon[live]]) and np.all(st.ptid[st.pcanon[live]] == st.ptid[live])
    monkeypatch.setattr(EK, "_round_tids", lambda tids, rows: np.full(len(rows), -1, dtype=np.int64))
    ref, ref_logs = fit()
    assert np.all(ref.pcanon[live] == live)  # nothing known: every slot computed
    for a, b in zip(logs, ref_logs):
        assert all(np.array_equal(u, v) for u, v in zip(a, b))
    for name in ("A", "F", "pidx", "alive", "Abar", "pref", "palive", "mmeta"):
        assert np.array_equal(getattr(st, name), getattr(ref, name)), name
    for average in (False, True):
        (S1, A1, l1), (S2, A2, l2) = st.bayes_point(average), ref.bayes_point(average)
        S1, S2 = (s.toarray() if sp.issparse(s) else s for s in (S1, S2))
        assert np.array_equal(S1, S2) and np.array_equal(A1, A2) and np.array_equal(l1, l2)


@pytest.mark.parametrize("budget,removal", [(None, "margin"), (6, "margin"), (6, "oldest")])
def test_a_sparse_pool_keys_columns_across_chunks_and_compactions(budget, removal):
    """The pool as a sparse store numbers the columns it meets (``MirrorPool.key_columns``): rows whose columns
    move on every chunk (1,800 of them, past the key table's first 512), members removing patterns until half the
    pool is dead and it compacts (the keys move with the nonzeros), passes that reuse the table: members, scores
    and Bayes points are the dense pool's bits, and every live nonzero's key names its column."""
    import scipy.sparse as sp

    from distlearn.learners._budget import key_columns

    rs = np.random.default_rng(5)
    n, d = 120, 1800
    rows = np.repeat(np.arange(n), 6)
    cols = (15 * rows + rs.integers(0, 40, size=rows.size)) % d  # each row near its own columns
    X = sp.csr_matrix((rs.uniform(0.2, 1.0, size=rows.size), (rows, cols)), shape=(n, d))
    y = (np.asarray(X[:, ::3].sum(axis=1)).ravel() > np.median(np.asarray(X[:, ::3].sum(axis=1)))).astype(np.int64)
    rule, kern = make_rule("mira", beta=0.1), make_kernel("rbf", gamma=0.3)

    def fit(Xs):
        return _ensemble(rule, kern, Xs, y, 2, False, 5, 0.6, 7, budget, removal, 0.1, chunks=6, epochs=3,
                         keep_retired=True)

    st, logs = fit(X)
    ref, ref_logs = fit(X.toarray())
    assert st.store and not ref.store and st.Zkn > 512
    if budget is not None:
        assert st.n_removed > int(st.pmeta[0])  # enough dead slots that the store's pool compacted
    used = int(st.Zm[0])
    keys = np.empty(used, dtype=np.int32)
    assert key_columns(st.Zkt.copy(), st.Zkn, st.Zi[:used], keys) == st.Zkn
    assert np.array_equal(keys, st.Zk[:used])
    for a, b in zip(logs, ref_logs):
        assert all(np.array_equal(u, v) for u, v in zip(a, b))
    for name in ("A", "F", "alive", "mmeta"):  # by member slot; the pools' slots differ (a dense pool compacts
        assert np.array_equal(getattr(st, name), getattr(ref, name)), name  # every call, a store once half dead)
    for average in (False, True):
        (S1, A1, l1), (S2, A2, l2) = st.bayes_point(average), ref.bayes_point(average)
        assert np.array_equal(S1.toarray(), S2) and np.array_equal(A1, A2) and np.array_equal(l1, l2)
