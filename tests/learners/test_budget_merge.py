"""Budget maintenance by merging (BSGD, Wang, Crammer & Vucetic 2012): the compiled engine against
the pure-Python oracle's merge step, round by round, and the laws of a merge."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.naive_budget import KERNEL_RTOL, engine_round_matches, naive_budget_run, naive_merge_step

from distlearn.learners import make_rule
from distlearn.learners._budget import merge_step
from distlearn.learners.kernel import (
    init_budget_state,
    kernel_decision,
    learn_budget_chunk,
    make_kernel,
)

RULES = [("perceptron", {}), ("mira", {}), ("pa", {"variant": "PA"}), ("pa", {"variant": "PA-I", "C": 0.3})]
MODES = [(2, False), (3, True), (3, False)]
BETA = {"perceptron": 0.1, "mira": 0.1, "pa": 0.5}


def _data(n, k, seed, d=3):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, d))
    W = rs.normal(size=(d, k))
    y = np.argmax(X @ W + 0.7 * rs.normal(size=(n, k)), axis=1)
    return X, y


def _rule(name, params, beta, K, native):
    rp = dict(params)
    if name == "mira":
        rp["beta"] = beta
    return make_rule(name, **rp) if name == "perceptron" else make_rule(name, native=native and K > 1, **rp)


@pytest.mark.parametrize("size", [1, 2, 5])
@pytest.mark.parametrize("mode", MODES, ids=["binary", "native", "ovr"])
@pytest.mark.parametrize("rule", RULES, ids=[f"{r}-{p.get('variant', '')}" for r, p in RULES])
def test_merge_engine_equals_oracle_round_by_round(rule, mode, size):
    """After every round: the same mistake, update and merge decisions, the same cached patterns (by
    birth round, synthetic ones included) with the same rows and coefficients at ``KERNEL_RTOL`` (the
    engine's RBF rows come from squared norms); a near tie ends the comparison."""
    (name, params), (k, native) = rule, mode
    K = 1 if k == 2 else k
    X, y = _data(40, k, seed=len(name) + 7 * k + size)
    beta = BETA[name]
    ref = naive_budget_run(name, X, y, n_classes=k, native=native, kernel="rbf", gamma=0.6, beta=beta,
                           budget=size, removal="merge", **params)
    r = _rule(name, params, beta, K, native)
    state, kern = init_budget_state(3, K, native=native), make_kernel("rbf", gamma=0.6)
    merges = 0
    for t, want in enumerate(ref):
        log = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=beta, budget=size, removal="merge")
        where = f"round {t}"
        n = int(state.meta[0])
        live = np.flatnonzero(state.alive[:n])
        assert len(live) <= size, where
        if not engine_round_matches(log, want, state.born[live].tolist(), where):
            break  # a near tie: the runs may rightly part here
        merges += len(want["removed"]) // 2
        np.testing.assert_allclose(state.S[live], np.array(want["patterns"]).reshape(len(live), 3), rtol=KERNEL_RTOL,
                                   atol=1e-9, err_msg=where)
        np.testing.assert_allclose(state.A[live], np.array(want["coef"]).reshape(len(live), K), rtol=KERNEL_RTOL,
                                   atol=1e-9, err_msg=where)
    assert merges >= 3  # the streams exercise the merge, not only the insertions


@pytest.mark.parametrize("k,native", [(2, False), (4, True)], ids=["binary", "native"])
def test_a_merge_moves_the_scores_by_at_most_its_degradation(k, native):
    """One round past a full cache, run twice: without a budget (the hypothesis before the merge) and
    with merging.  The merged pair is of one class, one of them of smallest ||a||^2, and for every x
    sum_k (f_k(x) - f'_k(x))^2 <= ||Delta||^2 (Cauchy-Schwarz, k(x, x) = 1), Delta from the oracle's step."""
    import copy

    K = 1 if k == 2 else k
    X, y = _data(80, k, seed=21)
    Xt, _ = _data(200, k, seed=22)
    kern, gamma = make_kernel("rbf", gamma=0.6), 0.6
    r = _rule("mira", {}, 0.1, K, native)
    state = init_budget_state(3, K, native=native)
    log = learn_budget_chunk(r, kern, state, X[:60], y[:60], beta=0.1, budget=12, removal="merge")
    assert log.removed.sum() > 0
    checked = 0
    for t in range(60, 80):
        plain = copy.deepcopy(state)
        lp = learn_budget_chunk(r, kern, plain, X, y, order=np.array([t]), beta=0.1)
        lm = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=0.1, budget=12, removal="merge")
        assert bool(lp.updated[0]) == bool(lm.updated[0]) and bool(lp.mistake[0]) == bool(lm.mistake[0])
        if not lm.removed[0]:
            continue
        n = int(state.meta[0])
        dead = [i for i in range(n) if not state.alive[i] and state.died[i] == state.t - 1]
        assert len(dead) == 2 and state.lab[dead[0]] == state.lab[dead[1]]
        _, Ap, _ = plain.support()
        w = (state.A[dead] ** 2).sum(axis=1)
        assert w.min() == (Ap ** 2).sum(axis=1).min()
        m, p = (dead[0], dead[1]) if w[0] <= w[1] else (dead[1], dead[0])
        *_, deg = naive_merge_step(state.A[m].tolist(), state.A[p].tolist(), state.S[m].tolist(),
                                   state.S[p].tolist(), gamma)
        fp = kernel_decision(kern, *plain.support()[:2], Xt).reshape(len(Xt), K)
        fm = kernel_decision(kern, *state.support()[:2], Xt).reshape(len(Xt), K)
        assert ((fp - fm) ** 2).sum(axis=1).max() <= deg * (1 + 1e-9) + 1e-12
        assert deg > 0
        checked += 1
    assert checked >= 3


@given(am=st.lists(st.floats(-3, 3), min_size=1, max_size=4), seed=st.integers(0, 10_000),
       gamma=st.floats(0.01, 5.0))
@settings(max_examples=60, deadline=None)
def test_merge_step_laws(am, seed, gamma):
    """The compiled step equals the oracle's; the degradation is >= 0 and is the squared distance
    ||a_m phi(x_m) + a_n phi(x_n) - a_z phi(z)||^2 computed from kernel values; identical patterns
    merge exactly (z = x, a_z = a_m + a_n, degradation 0)."""
    rs = np.random.default_rng(seed)
    K = len(am)
    am = np.array(am)
    an = rs.normal(size=K)
    xm, xn = rs.normal(size=3), rs.normal(size=3)
    gd2 = gamma * float(((xm - xn) ** 2).sum())
    h, gain, deg = merge_step(am, an, gd2)
    h0, z0, az0, deg0 = naive_merge_step(am.tolist(), an.tolist(), xm.tolist(), xn.tolist(), gamma)
    assert 0.0 <= h <= 1.0
    assert math.isclose(h, h0, rel_tol=1e-12, abs_tol=1e-15)
    scale = float((am ** 2).sum() + (an ** 2).sum() + 1e-300)
    assert deg >= -1e-12 * scale
    assert math.isclose(deg, deg0, rel_tol=1e-9, abs_tol=1e-12 * scale)
    # the degradation from first principles, over kernel values only
    z = np.array(z0)
    az = np.array(az0)
    k = lambda a, b: math.exp(-gamma * float(((a - b) ** 2).sum()))  # noqa: E731
    direct = ((am ** 2).sum() + (an ** 2).sum() + (az ** 2).sum() + 2 * (am * an).sum() * k(xm, xn)
              - 2 * (am * az).sum() * k(xm, z) - 2 * (an * az).sum() * k(xn, z))
    assert math.isclose(deg, direct, rel_tol=1e-7, abs_tol=1e-9 * scale)
    np.testing.assert_allclose(gain, (az ** 2).sum(), rtol=1e-12)
    # no h on a grid does better than the golden-section h (up to the bracket's width)
    grid = [naive_merge_step(am.tolist(), an.tolist(), xm.tolist(), xn.tolist(), gamma)[3]]
    for hh in np.linspace(0, 1, 41):
        km, kn = math.exp(-gd2 * (1 - hh) ** 2), math.exp(-gd2 * hh * hh)
        grid.append(((am ** 2).sum() + (an ** 2).sum() + 2 * (am * an).sum() * math.exp(-gd2))
                    - ((am * km + an * kn) ** 2).sum())
    if gd2 < 1.0:  # unimodal in h there: golden section finds the optimum
        assert deg <= min(grid) + 1e-6 * scale
    # identical patterns
    h1, gain1, deg1 = merge_step(am, an, 0.0)
    assert gain1 == ((am + an) ** 2).sum() and abs(deg1) <= 1e-12 * scale
    _, z1, az1, _ = naive_merge_step(am.tolist(), an.tolist(), xm.tolist(), xm.tolist(), gamma)
    assert z1 == xm.tolist() and az1 == (am + an).tolist()


@given(n=st.integers(1, 6), seed=st.integers(0, 10_000))
@settings(max_examples=20, deadline=None)
def test_identical_rows_collapse_into_one_pattern_in_the_engine(n, seed):
    """A stream of one repeated row of one class, every round an update (perceptron margin 1e9): an
    update on a cached row replaces its pattern by one with the summed coefficients (one removal per
    round after the first), so under any budget the cache holds that row once and its coefficient
    adds up to the 30 steps -- nothing is left to merge."""
    rs = np.random.default_rng(seed)
    x = rs.normal(size=(1, 4))
    X = np.repeat(x, 30, axis=0)
    y = np.ones(30, dtype=np.int64)
    kern = make_kernel("rbf", gamma=0.8)
    rule = make_rule("perceptron")
    for budget in (n, None):
        st_m = init_budget_state(4, 1)
        log = learn_budget_chunk(rule, kern, st_m, X, y, beta=1e9, budget=budget, removal="merge")
        assert log.updated.all() and log.cache_size.max() == 1 and st_m.n_support == 1
        assert int(log.removed.sum()) == 29
        S, A, _ = st_m.support()
        assert (S == x).all()
        assert A[0, 0] == 30.0  # the perceptron's 30 unit steps


def test_merge_refusals_name_the_kernel_and_the_learner():
    X, y = _data(20, 2, seed=1)
    for name in ("poly", "linear"):
        with pytest.raises(ValueError, match=f"removal='merge' needs kernel='rbf' \\(got kernel='{name}'\\)"):
            learn_budget_chunk(make_rule("perceptron"), make_kernel(name), init_budget_state(3, 1), X, y, budget=5,
                               removal="merge")
    from distlearn.ensembles.kernel import init_kernel_ensemble, learn_kernel_ensemble_chunk

    with pytest.raises(ValueError, match="removal='merge' is not available to the kernel OBPM"):
        learn_kernel_ensemble_chunk(make_rule("perceptron"), make_kernel("rbf"), init_kernel_ensemble(3, 2, 1), X, y,
                                    np.arange(20), seed=0, tau=0.5, budget=5, removal="merge")


def test_auto_removal_merges_rbf_fixed_budgets_only():
    """``removal="auto"`` (the estimators' default) is "merge" for an RBF fixed budget and "margin"
    otherwise: the same models as naming them; variable and unbudgeted caches are unchanged."""
    from distlearn.estimators.kernel import KernelMIRA

    X, y = _data(150, 3, seed=4)
    for kernel, budget, same in [("rbf", 8, "merge"), ("poly", 8, "margin"), ("rbf", "variable", "margin"),
                                 ("rbf", None, "margin")]:
        a = KernelMIRA(kernel=kernel, gamma=0.5, budget=budget, random_state=0).fit(X, y)
        b = KernelMIRA(kernel=kernel, gamma=0.5, budget=budget, removal=same, random_state=0).fit(X, y)
        assert np.array_equal(a.support_vectors_, b.support_vectors_), (kernel, budget)
        assert np.array_equal(a.decision_function(X), b.decision_function(X)), (kernel, budget)
    m = KernelMIRA(gamma=0.5, budget=8, random_state=0).fit(X, y)
    g = KernelMIRA(gamma=0.5, budget=8, removal="margin", random_state=0).fit(X, y)
    assert m.support_vectors_.shape[0] == 8 and not np.array_equal(m.support_vectors_, g.support_vectors_)
    # merged rows are not training rows
    assert not all((X == sv).all(axis=1).any() for sv in m.support_vectors_)


@pytest.mark.parametrize("conversion", ["last", "average"])
def test_estimators_fit_with_merging_under_the_last_and_the_averaged_conversion(conversion):
    from distlearn.estimators.kernel import KernelPA

    X, y = _data(200, 4, seed=8)
    est = KernelPA(gamma=0.5, budget=10, removal="merge", conversion=conversion, random_state=0).fit(X, y)
    assert est.n_removed_ > 0
    assert est.predict(X).shape == (200,)
    assert (est.predict(X) == y).mean() > 0.5


SLOW_LETTER = __import__("os").environ.get("DISTLEARN_LETTER")


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_LETTER or not __import__("os").path.exists(SLOW_LETTER),
                    reason="set $DISTLEARN_LETTER to the LETTER svmlight file")
def test_letter_budget_500_merge_beats_the_bsgd_target():
    """LETTER, one pass, B = 500, KernelMIRA with the default removal (merge), gamma 8 (the benchmark's
    grid on the training rows): below BSGD's 10.3 % test error; margin removal is far worse."""
    from pathlib import Path

    from benchmarks.bench_budget_merge import fit_score, load_letter
    from distlearn.estimators.kernel import KernelMIRA

    Xtr, ytr, Xte, yte = load_letter(Path(SLOW_LETTER))
    err, _, ns = fit_score(KernelMIRA, dict(gamma=8.0, budget=500, random_state=0), Xtr, ytr, Xte, yte)
    assert ns == 500 and err < 0.103
    err_margin, _, _ = fit_score(KernelMIRA, dict(gamma=8.0, budget=500, removal="margin", random_state=0),
                                 Xtr, ytr, Xte, yte)
    assert err_margin > err + 0.2



_B100: dict = {}


def _letter_b100_errors() -> np.ndarray:
    """LETTER, one pass, B = 100, KernelPA's defaults (PA-I, C = 1) with merging, gamma 4 (the benchmark's
    grid at this budget), shuffles 0-4: the test errors (computed once per session)."""
    if "err" not in _B100:
        from pathlib import Path

        from benchmarks.bench_budget_merge import fit_score, load_letter
        from distlearn.estimators.kernel import KernelPA

        Xtr, ytr, Xte, yte = load_letter(Path(SLOW_LETTER))
        _B100["err"] = np.array([fit_score(KernelPA, dict(gamma=4.0, budget=100, random_state=s), Xtr, ytr, Xte, yte)[0]
                                 for s in range(5)])
    return _B100["err"]


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_LETTER or not __import__("os").path.exists(SLOW_LETTER),
                    reason="set $DISTLEARN_LETTER to the LETTER svmlight file")
def test_letter_budget_100_merge_lands_in_bsgds_range():
    """B = 100: the mean over five shuffles is at most BSGD's 26.4 % (measured 25.73 +- 0.29 %)."""
    assert _letter_b100_errors().mean() <= 0.264


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the issue's B = 100 target: measured 25.73 % mean over five shuffles")
@pytest.mark.skipif(not SLOW_LETTER or not __import__("os").path.exists(SLOW_LETTER),
                    reason="set $DISTLEARN_LETTER to the LETTER svmlight file")
def test_letter_budget_100_merge_below_25_percent():
    assert _letter_b100_errors().mean() < 0.25

def test_sparse_rows_merge_into_the_dense_model_and_the_model_file_keeps_the_merged_rows(tmp_path):
    """CSR input gives the dense input's model bit for bit (the cache rows are dense: a merged row is
    dense over the union of its parents' features); a saved model predicts as the estimator."""
    import scipy.sparse as sp

    from distlearn.estimators.kernel import KernelMIRA
    from distlearn.model import load_model, save_model

    X, y = _data(150, 3, seed=5, d=6)
    X[np.abs(X) < 0.6] = 0.0
    r = make_rule("mira", beta=0.1, native=True)
    kern = make_kernel("rbf", gamma=0.4)
    a, b = init_budget_state(6, 3, native=True), init_budget_state(6, 3, native=True)
    order = np.random.default_rng(0).permutation(len(y))
    la = learn_budget_chunk(r, kern, a, X, y, order=order, beta=0.1, budget=9, removal="merge")
    learn_budget_chunk(r, kern, b, sp.csr_matrix(X), y, order=order, beta=0.1, budget=9, removal="merge")
    assert la.removed.sum() > 0
    for u, v in zip(a.support(), b.support()):
        assert np.array_equal(u, v)
    est = KernelMIRA(gamma=0.4, budget=9, random_state=0).fit(sp.csr_matrix(X), y)
    m = load_model(save_model(est, tmp_path / "m.npz"))
    assert np.array_equal(m.support_vectors_, est.support_vectors_)
    np.testing.assert_array_equal(m.predict(X), est.predict(X))
