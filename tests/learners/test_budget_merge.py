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
    engine's RBF rows come from squared norms), and the same running sums of the budget's average
    (the oracle adds every pattern's coefficients after every round and projects the sums at each
    merge; the engine carries them lazily) at ``KERNEL_RTOL`` too, as they inherit the coefficients'
    rounding (:func:`test_budget_average_is_the_running_sum_through_merges` checks the carrying itself
    at 1e-10); a near tie ends the comparison."""
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
        # the budget's average: the oracle's eager running sums, the engine's carried ones (Ac + A (t - born))
        _, Abar, _ = state.budget_average()
        np.testing.assert_allclose(Abar * (t + 2), np.array(want["sums"]).reshape(len(live), K), rtol=KERNEL_RTOL,
                                   atol=1e-9, err_msg=where)
    assert merges >= 3  # the streams exercise the merge, not only the insertions


@pytest.mark.parametrize("size", [1, 3, 8])
@pytest.mark.parametrize("mode", MODES, ids=["binary", "native", "ovr"])
def test_budget_average_is_the_running_sum_through_merges(mode, size):
    """The engine's carried average against plain Python driven by the engine's own rounds (its
    patterns and coefficients, so only the carrying is tested, at rtol 1e-10): after every round every
    cached pattern's sum takes its coefficients; an inserted pattern starts at 0; a round with one
    removal (an update on a cached row, repeated rows here) hands the leaving pattern's sum to the
    returning one; a round with two removals merged them into the new live pattern ``z``, whose sum is
    ``s_m exp(-gamma ||x_m - z||^2) + s_n exp(-gamma ||x_n - z||^2)`` (math.exp on the engine's rows).
    ``budget_average`` is the sums over ``t + 1``, over exactly the cache's patterns."""
    k, native = mode
    K = 1 if k == 2 else k
    X, y = _data(30, k, seed=31 + size)
    X, y = np.repeat(X, 2, axis=0), np.repeat(y, 2)  # each row twice: the second round updates a cached row
    gamma = 0.6
    r = _rule("perceptron", {}, 5.0, K, native)  # margin 5: most rounds update
    state, kern = init_budget_state(3, K, native=native), make_kernel("rbf", gamma=gamma)
    sums: dict[tuple, np.ndarray] = {}  # by (birth round, row): a merged z and the round's row share the round
    seen = {"merge": 0, "twin": 0}

    def key(i):
        return int(state.born[i]), state.S[i].tobytes()

    for t in range(len(y)):
        log = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=5.0, budget=size, removal="merge")
        n = int(state.meta[0])
        born, died, alive = state.born[:n], state.died[:n], state.alive[:n]
        gone = [i for i in range(n) if died[i] == t]
        new = [i for i in range(n) if born[i] == t and alive[i]]
        if log.removed[0] == 2:  # a merge: the two patterns that died at t make z, the last slot
            z = n - 1
            assert len(gone) == 2 and z in new and len(new) <= 2
            sums[key(z)] = sum((sums.pop(key(i)) if born[i] < t else np.zeros(K))
                               * math.exp(-gamma * float(((state.S[i] - state.S[z]) ** 2).sum())) for i in gone)
            sums.update({key(i): np.zeros(K) for i in new if i != z})  # the round's row, if it survived
            seen["merge"] += 1
        elif log.removed[0] == 1:  # a cached row updated again: it leaves and returns
            (v,), (s,) = gone, new
            sums[key(s)] = sums.pop(key(v))
            seen["twin"] += 1
        elif log.updated[0]:
            (s,) = new
            sums[key(s)] = np.zeros(K)
        live = np.flatnonzero(alive)
        for i in live:  # h_{t+1}: every cached pattern's sum takes its coefficients
            sums[key(i)] = sums[key(i)] + state.A[i]
        assert sorted(sums) == sorted(key(i) for i in live)
        S, Abar, _ = state.budget_average()
        assert len(S) == len(live) <= size
        want = np.array([sums[key(i)] for i in live]).reshape(len(live), K)
        np.testing.assert_allclose(Abar * (t + 2), want, rtol=1e-10, atol=1e-12 * (1 + np.abs(want).max()),
                                   err_msg=f"round {t}")
    assert seen["merge"] >= 3 and (seen["twin"] >= 1 or size == 1)  # size 1: a row is merged before it returns


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


def test_auto_conversion_distils_the_average_of_a_merging_budget_only():
    """``conversion="auto"`` (the default) is the average projected onto the final cache for an integer
    budget maintained by merging -- exactly ``conversion="average"`` (distill=True): B patterns, the
    history's size reported -- and the last hypothesis for every other budget or removal (a variable budget:
    the average up to AUTO_AVERAGE_MAX patterns)."""
    from distlearn.estimators.kernel import KernelPA

    X, y = _data(200, 4, seed=8)
    kw = dict(gamma=0.5, random_state=0, epochs=2)
    a = KernelPA(budget=10, **kw).fit(X, y)
    b = KernelPA(budget=10, conversion="average", **kw).fit(X, y)
    assert a.conversion_info_["conversion"] == "average" and "conversion" not in b.conversion_info_
    assert a.support_vectors_.shape == (10, 3) and a.n_support_.sum() == 10
    assert a.conversion_info_["distilled_from"] == b.conversion_info_["distilled_from"] > 10 * 5
    assert np.array_equal(a.support_vectors_, b.support_vectors_) and np.array_equal(a.dual_coef_, b.dual_coef_)
    last = KernelPA(budget=10, conversion="last", **kw).fit(X, y)
    assert np.array_equal(a.support_vectors_, last.support_vectors_)  # the cache's patterns ...
    assert not np.array_equal(a.dual_coef_, last.dual_coef_)  # ... with the average's coefficients
    for budget, removal in [(10, "margin"), ("variable", "auto"), (None, "auto")]:
        c = KernelPA(budget=budget, removal=removal, compress=0, **kw).fit(X, y)
        # a variable budget averages up to AUTO_AVERAGE_MAX patterns (tests/test_kernel_epochs.py)
        want = "average" if budget == "variable" else "last"
        d = KernelPA(budget=budget, removal=removal, conversion=want, compress=0, **kw).fit(X, y)
        assert c.conversion_info_["conversion"] == want, (budget, removal)
        assert np.array_equal(c.dual_coef_, d.dual_coef_) and np.array_equal(c.support_vectors_, d.support_vectors_)


def test_auto_conversion_drops_a_history_above_its_cap_and_reports_the_last_hypothesis(monkeypatch):
    """The history "auto" keeps is capped (``AUTO_HISTORY_BYTES``), so a fixed budget bounds memory: above the
    cap the history is dropped and the fit is the last hypothesis, bit for bit, whatever the chunking (history
    only grows); below it the fit is the distilled average.  An explicit ``conversion="average"`` is not capped."""
    import distlearn.estimators.kernel as ek
    from distlearn.estimators.kernel import KernelPA

    X, y = _data(300, 4, seed=8)
    kw = dict(gamma=0.5, budget=10, random_state=0, epochs=2)
    below = KernelPA(**kw).fit(X, y)
    assert below.conversion_info_["conversion"] == "average" and "history_dropped" not in below.conversion_info_
    monkeypatch.setattr(ek, "AUTO_HISTORY_BYTES", 4096)
    monkeypatch.setattr(ek, "AUTO_HISTORY_CACHES", 1)
    capped = KernelPA(**kw).fit(X, y)
    last = KernelPA(conversion="last", **kw).fit(X, y)
    info = capped.conversion_info_
    assert info["conversion"] == "last" and 0 < info["history_dropped"] <= 2 * len(X)
    assert capped._state.retired_S == [] and capped._logs == [] and not capped._state.keep_retired
    assert np.array_equal(capped.dual_coef_, last.dual_coef_)
    assert np.array_equal(capped.support_vectors_, last.support_vectors_)
    # fed in pieces of 37 rows: the cap is crossed at another call, the model is the same
    pieces = KernelPA(gamma=0.5, budget=10, random_state=0)
    for lo in range(0, len(X), 37):
        pieces.partial_fit(X[lo:lo + 37], y[lo:lo + 37], classes=np.unique(y))
    whole = KernelPA(gamma=0.5, budget=10, random_state=0, epochs=1, shuffle=False).fit(X, y)
    assert pieces.conversion_info_["conversion"] == whole.conversion_info_["conversion"] == "last"
    assert np.array_equal(pieces.dual_coef_, whole.dual_coef_)
    explicit = KernelPA(conversion="average", **kw).fit(X, y)
    assert "history_dropped" not in explicit.conversion_info_ and explicit.conversion_info_["distilled_from"] > 10


SLOW_LETTER = __import__("os").environ.get("DISTLEARN_LETTER")


def test_mira_auto_beta_is_one_for_multiclass_merging_budgets_only():
    """KernelMIRA's ``beta="auto"`` (the default) is 1 with more than two classes (native) under a merging
    budget, and 0.01 for two classes, one-vs-rest, margin removal, DistillCache and no budget: the same
    model, bit for bit, as naming that beta; ``beta_`` reports it, and an explicit beta is kept."""
    from distlearn.estimators.kernel import MIRA_BETA, MIRA_BETA_MERGING, KernelMIRA

    X3, y3 = _data(150, 3, seed=4)
    X2, y2 = X3, (y3 > 0).astype(int)
    cases = [(X3, y3, dict(budget=8), MIRA_BETA_MERGING), (X3, y3, dict(budget=8, removal="merge"), MIRA_BETA_MERGING),
             (X2, y2, dict(budget=8), MIRA_BETA), (X3, y3, dict(budget=8, multiclass="ovr"), MIRA_BETA),
             (X3, y3, dict(budget=8, removal="margin"), MIRA_BETA), (X3, y3, dict(budget="variable"), MIRA_BETA),
             (X3, y3, dict(budget=None), MIRA_BETA), (X3, y3, dict(budget=8, kernel="poly"), MIRA_BETA)]
    for X, y, kw, beta in cases:
        kw = dict(kw, gamma=0.5, random_state=0, epochs=2, compress=0)
        a = KernelMIRA(**kw).fit(X, y)
        b = KernelMIRA(beta=beta, **kw).fit(X, y)
        assert a.beta == "auto" and a.beta_ == beta == b.beta_, kw
        assert np.array_equal(a.support_vectors_, b.support_vectors_) and np.array_equal(a.dual_coef_, b.dual_coef_), kw
        assert a.n_updates_ == b.n_updates_, kw
    assert MIRA_BETA_MERGING != MIRA_BETA
    one, small = (KernelMIRA(beta=v, budget=8, gamma=0.5, random_state=0).fit(X3, y3) for v in (1.0, 0.01))
    assert not np.array_equal(one.dual_coef_, small.dual_coef_)  # the margin matters here
    assert KernelMIRA(beta=0.3, budget=8, gamma=0.5, random_state=0).fit(X3, y3).beta_ == 0.3


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_LETTER or not __import__("os").path.exists(SLOW_LETTER),
                    reason="set $DISTLEARN_LETTER to the LETTER svmlight file")
def test_letter_budget_500_merge_beats_the_bsgd_target():
    """LETTER, one pass, B = 500, KernelMIRA with the default removal (merge) and conversion (the average
    distilled into the cache), gamma 8 (the benchmark's grid on the training rows): 500 patterns, below
    BSGD's 10.3 % test error, and below the last hypothesis; margin removal is far worse."""
    from pathlib import Path

    from benchmarks.bench_budget_merge import fit_score, load_letter
    from distlearn.estimators.kernel import KernelMIRA

    Xtr, ytr, Xte, yte = load_letter(Path(SLOW_LETTER))
    kw = dict(gamma=8.0, budget=500, random_state=0, epochs=1)
    err, _, ns = fit_score(KernelMIRA, kw, Xtr, ytr, Xte, yte)
    assert ns == 500 and err < 0.103
    err_last, _, _ = fit_score(KernelMIRA, dict(kw, conversion="last"), Xtr, ytr, Xte, yte)
    assert err < err_last
    err_margin, _, _ = fit_score(KernelMIRA, dict(kw, removal="margin"), Xtr, ytr, Xte, yte)
    assert err_margin > err + 0.2


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_LETTER or not __import__("os").path.exists(SLOW_LETTER),
                    reason="set $DISTLEARN_LETTER to the LETTER svmlight file")
def test_letter_budget_100_merge_below_25_percent():
    """The issue's B = 100 target: LETTER, one pass, KernelPA's defaults (PA-I, C = 1; merging; the average
    distilled into the 100 cached patterns), gamma 4 (the benchmark's grid at this budget), shuffles 0-4:
    mean test error below 25 % (measured 23.99 +- 0.88 %; the last hypothesis 25.69 +- 0.28 %), 100 patterns;
    and KernelMIRA's defaults (beta="auto" = 1 here: measured 23.97 +- 0.37 %)."""
    from pathlib import Path

    from benchmarks.bench_budget_merge import fit_score, load_letter
    from distlearn.estimators.kernel import KernelMIRA, KernelPA

    Xtr, ytr, Xte, yte = load_letter(Path(SLOW_LETTER))
    for cls in (KernelPA, KernelMIRA):  # KernelMIRA with beta="auto": 1 here
        res = [fit_score(cls, dict(gamma=4.0, budget=100, random_state=s, epochs=1), Xtr, ytr, Xte, yte)
               for s in range(5)]
        assert all(ns == 100 for _, _, ns in res), cls
        assert np.mean([e for e, _, _ in res]) < 0.25, cls


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
