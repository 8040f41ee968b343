"""The kernels' running sum of hypotheses against the brute-force sum of every h_i."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn.learners import init_state, learn_chunk, make_rule, running_sum, running_value, state_coef

RULES = [("perceptron", {}), ("alma", {}), ("romma", {}), ("romma", {"aggressive": True}), ("pa", {}),
         ("lms", {"eta": 0.05}), ("margin", {"horizon": 300, "radius": 4.0}), ("mira", {}),
         ("generalized", {"rho": 0.1, "rho_schedule": "inv_sqrt"})]


def _hyp(state):
    coef, intercept = state_coef(state)
    return np.hstack([coef, intercept[:, None]])


def naive_sum(rule, X, y, K, *, start, cut, fit_intercept=True):
    """Store every hypothesis h_0 .. h_{m-1} the slow way (a chunk per row)."""
    st = init_state(X.shape[1], K)
    total = np.zeros((K, X.shape[1] + 1))
    age, count = 0, 0
    for i in range(X.shape[0]):
        if i >= start and (age >= cut or i == 0):
            total += _hyp(st)
            count += 1
        log = learn_chunk(rule, st, X[i:i + 1], y[i:i + 1], fit_intercept=fit_intercept)
        age = 0 if log.updated[0] else age + 1
    return total, count, st


@pytest.mark.parametrize("name,params", RULES + [("pa", {"native": True}), ("mira", {"native": True})])
@pytest.mark.parametrize("K", [1, 4])
@pytest.mark.parametrize("cut,start", [(0, 0), (0, 37), (3, 0), (9, 11)])
def test_running_sum_equals_sum_of_every_hypothesis(name, params, K, cut, start):
    if params.get("native") and K < 3:
        pytest.skip("native multiclass needs >= 3 columns")
    rng = np.random.default_rng(K * 7 + cut)
    n, d = 300, 8
    X = rng.normal(size=(n, d)) * 2
    X[rng.random(X.shape) < 0.4] = 0.0
    y = rng.integers(0, max(K, 2), n)
    rule = make_rule(name, **params)
    want, count, ref = naive_sum(rule, X, y, K, start=start, cut=cut)
    # Streamed in uneven chunks, dense and CSR mixed.
    st = init_state(d, K)
    acc = running_sum(st, start=start, cut=cut)
    for lo, hi, csr in [(0, 1, False), (1, 120, True), (120, 121, False), (121, 300, False)]:
        Xc = sp.csr_matrix(X[lo:hi]) if csr else X[lo:hi]
        learn_chunk(rule, st, Xc, y[lo:hi], fit_intercept=True, acc=acc)
    assert np.array_equal(st.W, ref.W)
    assert acc.count == count
    got = running_value(acc, st)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))
