"""The compiled budget engine against the pure-Python oracle of the paper's boxes, round by round.

For every rule (perceptron, MIRA, PA / PA-I / PA-II) x cache (none, DistillCache,
fixed size with margin, oldest and random removal) x kernel (RBF, polynomial,
linear) x output mode (binary, native multiclass, one-vs-rest), after every
round: the online mistake, whether the rule updated, how many patterns left,
which patterns are cached (by insertion round, in insertion order), their
coefficients and their removal margins.  The engine's RBF rows come from squared norms, the
oracle's from squared differences: values agree at ``KERNEL_RTOL``, decisions exactly except at a
near tie (:func:`tests.naive_budget.engine_round_matches`).
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.naive_budget import KERNEL_RTOL, engine_round_matches, naive_budget_run

from distlearn.learners import make_rule
from distlearn.learners.kernel import init_budget_state, learn_budget_chunk, make_kernel, removal_margins

RULES = [("perceptron", {}), ("mira", {}), ("pa", {"variant": "PA"}), ("pa", {"variant": "PA-I", "C": 0.3}),
         ("pa", {"variant": "PA-II", "C": 0.3})]
BUDGETS = [(None, "margin"), ("variable", "margin"), (4, "margin"), (4, "oldest"), (4, "random")]
KERNELS = [("rbf", {"gamma": 0.6}), ("poly", {"gamma": 0.5, "degree": 3, "coef0": 1.0}), ("linear", {})]
MODES = [(2, False), (3, True), (3, False)]
BETA = {"perceptron": 0.1, "mira": 0.1, "pa": 0.5}


def _data(n, k, seed):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, 3))
    W = rs.normal(size=(3, k))
    y = np.argmax(X @ W + 0.7 * rs.normal(size=(n, k)), axis=1)
    return X, y


def _engine(name, params, beta, k, native, kname, kp):
    """Outputs, rule, an empty cache and the kernel of one oracle case."""
    K = 1 if k == 2 else k
    rp = dict(params)
    if name == "mira":
        rp["beta"] = beta
    r = make_rule(name, **rp) if name == "perceptron" else make_rule(name, native=native and K > 1, **rp)
    return K, r, init_budget_state(3, K, native=native), make_kernel(kname, **{"gamma": 1.0, **kp})


@pytest.mark.parametrize("mode", MODES, ids=["binary", "native", "ovr"])
@pytest.mark.parametrize("kernel", KERNELS, ids=[k for k, _ in KERNELS])
@pytest.mark.parametrize("budget", BUDGETS, ids=[f"{b}-{r}" for b, r in BUDGETS])
@pytest.mark.parametrize("rule", RULES, ids=[f"{r}-{p.get('variant', '')}" for r, p in RULES])
def test_engine_equals_oracle_round_by_round(rule, budget, kernel, mode):
    (name, params), (cache, removal), (kname, kp), (k, native) = rule, budget, kernel, mode
    X, y = _data(30, k, seed=len(name) + 7 * k)
    beta = BETA[name]
    ref = naive_budget_run(name, X, y, n_classes=k, native=native, kernel=kname, beta=beta, budget=cache,
                           removal=removal, seed=5, **params, **kp)
    K, r, state, kern = _engine(name, params, beta, k, native, kname, kp)
    compared = 0
    for t, want in enumerate(ref):
        log = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=beta, budget=cache,
                                 removal=removal, seed=5)
        where = f"round {t}"
        n = int(state.meta[0])
        live = np.flatnonzero(state.alive[:n])
        if not engine_round_matches(log, want, state.born[live].tolist(), where):
            break  # a near tie: the runs may rightly part here
        compared += 1
        np.testing.assert_allclose(state.A[live], np.array(want["coef"]).reshape(len(live), K), rtol=KERNEL_RTOL,
                                   atol=1e-9, err_msg=where)
        np.testing.assert_allclose(removal_margins(state, kern), want["mu"], rtol=KERNEL_RTOL, atol=1e-9,
                                   err_msg=where)
    assert compared >= len(ref) // 2, compared  # near ties are rare: most of the stream is compared


# eta = 0 with the RBF kernel only: a polynomial kernel's span fills its 20 dimensions, and deciding
# delta^2 <= 0 there is rounding
PROJ = [(KERNELS[0], 0.0), (KERNELS[0], 0.3), (KERNELS[0], 0.8), (KERNELS[1], 0.3), (KERNELS[1], 0.8)]


@pytest.mark.parametrize("mode", MODES, ids=["binary", "native", "ovr"])
@pytest.mark.parametrize("kernel,proj_eta", PROJ, ids=[f"{k}-{e}" for (k, _), e in PROJ])
@pytest.mark.parametrize("rule", RULES, ids=[f"{r}-{p.get('variant', '')}" for r, p in RULES])
def test_projectron_equals_oracle_round_by_round(rule, kernel, proj_eta, mode):
    """The Projectron (Orabona, Keshet & Caputo 2009): the engine's incremental inverse Gram matrix
    against a direct solve on the cache every round -- the same insert-or-project choices, cached
    patterns and coefficients."""
    (name, params), (kname, kp), (k, native) = rule, kernel, mode
    X, y = _data(30, k, seed=len(name) + 7 * k + 1)
    beta = BETA[name]
    ref = naive_budget_run(name, X, y, n_classes=k, native=native, kernel=kname, beta=beta, budget="projectron",
                           proj_eta=proj_eta, **params, **kp)
    K, r, state, kern = _engine(name, params, beta, k, native, kname, kp)
    for t, want in enumerate(ref):
        log = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=beta, budget="projectron",
                                 eta=proj_eta)
        where = f"round {t}"
        n = int(state.meta[0])
        assert state.alive[:n].all(), where
        if not engine_round_matches(log, want, state.born[:n].tolist(), where):
            break  # a near tie: the runs may rightly part here
        np.testing.assert_allclose(state.A[:n], np.array(want["coef"]).reshape(n, K), rtol=1e-7, atol=1e-9,
                                   err_msg=where)
    if proj_eta == 0.0:  # generic data: nothing lies exactly in the span, so this is the unbudgeted learner
        plain = init_budget_state(3, K, native=native)
        learn_budget_chunk(r, kern, plain, X, y, beta=beta)
        assert np.array_equal(plain.A[: plain.meta[0]], state.A[: state.meta[0]])


EPOCH_BUDGETS = BUDGETS + [(4, "merge")]


@pytest.mark.parametrize("mode", MODES[:2], ids=["binary", "native"])
@pytest.mark.parametrize("budget", EPOCH_BUDGETS, ids=[f"{b}-{r}" for b, r in EPOCH_BUDGETS])
@pytest.mark.parametrize("rule", RULES[:3], ids=[r for r, _ in RULES[:3]])
def test_later_epochs_update_cached_rows_as_the_oracle(rule, budget, mode):
    """Three epochs of 10 rows (a permutation each): an update on a row already cached replaces its
    pattern by one with the summed coefficients, in the engine as in the oracle, and the cache never
    holds a row twice."""
    (name, params), (cache, removal), (k, native) = rule, budget, mode
    X0, y0 = _data(10, k, seed=3 + k)
    rs = np.random.default_rng(1)
    idx = np.concatenate([rs.permutation(10) for _ in range(3)])
    X, y = X0[idx], y0[idx]
    beta = BETA[name]
    kp = {"gamma": 0.6}
    ref = naive_budget_run(name, X, y, n_classes=k, native=native, kernel="rbf", beta=beta, budget=cache,
                           removal=removal, seed=5, **params, **kp)
    K, r, state, kern = _engine(name, params, beta, k, native, "rbf", kp)
    replaced = 0
    for t, want in enumerate(ref):
        log = learn_budget_chunk(r, kern, state, X, y, order=np.array([t]), beta=beta, budget=cache,
                                 removal=removal, seed=5)
        where = f"round {t}"
        assert bool(log.updated[0]) == want["fired"] and int(log.removed[0]) == len(want["removed"]), where
        n = int(state.meta[0])
        live = np.flatnonzero(state.alive[:n])
        assert state.born[live].tolist() == [i if isinstance(i, int) else i[1] for i in want["cache"]], where
        np.testing.assert_allclose(state.A[live], np.array(want["coef"]).reshape(len(live), K), rtol=1e-9,
                                   atol=1e-12, err_msg=where)
        assert len({tuple(s) for s in state.S[live]}) == len(live), where  # no row twice
        replaced += int(any(isinstance(i, int) and i < t and idx[i] == idx[t] for i in want["removed"]))
    if not isinstance(cache, int) and name != "perceptron":
        # the case exercises the replacement (a cache of 4 evicts rows first; a perceptron step of 1
        # gives its own pattern the margin k(x, x) = 1 > beta, so a cached row rarely fires again)
        assert replaced > 0
