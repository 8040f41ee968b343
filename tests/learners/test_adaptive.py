"""The adaptive rules (AROW, NAG) against their pure-Python oracles
(``tests/naive_adaptive.py``), round by round, and their laws.

The kernels (``distlearn/learners/_adaptive.py``) run through the same chunk
driver as the classic rules, so the driver's contracts are checked here for
them too: dense == CSR bit for bit, chunk invariance, the running sum of the
``average`` conversion, and the estimators' fit / partial_fit / store paths.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import distlearn
from distlearn.learners import copy_state, running_sum, running_value, state_coef
from distlearn.learners.adaptive import (
    ADAPTIVE_RULES,
    AdaptiveState,
    init_adaptive_state,
    learn_chunk,
    make_adaptive_rule,
)
from distlearn.learners.linear import init_state, make_rule
from tests.naive_adaptive import ADAPTIVE_ORACLES, naive_adaptive_run

D = 12
N = 150

RULE_CONFIGS = [
    pytest.param("arow", {"r": 1.0}, id="arow-r1"),
    pytest.param("arow", {"r": 0.1}, id="arow-r0.1"),
    pytest.param("nag", {"loss": "hinge", "eta": 0.5}, id="nag-hinge"),
    pytest.param("nag", {"loss": "logistic", "eta": 0.3}, id="nag-logistic"),
]


def _data(seed, *, n=N, d=D, K=1, zero_rows=0.05):
    """Rows with ~50 % zeros, feature scales spread over 1e-2..1e2 (so NAG's maxima move),
    labelled by a noisy linear teacher; with K == 1 negatives are 0, 2 or -1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.logspace(-2, 2, d)[rng.permutation(d)]
    X[rng.random((n, d)) < 0.5] = 0.0
    X[rng.random(n) < zero_rows] = 0.0
    T = rng.normal(size=(d, K)) / np.maximum(np.abs(X).max(axis=0), 1e-3)[:, None]
    s = X @ T + 0.5 * rng.normal(size=(n, K))
    if K == 1:
        y = np.where(s[:, 0] > 0, 1, rng.choice([0, 2, -1], size=n))
    else:
        y = s.argmax(axis=1)
    return np.ascontiguousarray(X), y.astype(np.int64)


def _full(state):
    """(K, d + 1) true weights, bias last."""
    coef, b = state_coef(state)
    return np.hstack([coef, b[:, None]])


def _close(a, b, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("fit_intercept,bias", [(False, 1.0), (True, 1.0), (True, 0.5)])
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("name,params", RULE_CONFIGS)
def test_kernel_equals_oracle_after_every_round(name, params, K, fit_intercept, bias, layout):
    X, y = _data(7 * K + int(fit_intercept), K=K)
    ref = naive_adaptive_run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias)
    assert 0 < sum(ref.updated)
    if name == "arow" or params["loss"] == "hinge":
        assert sum(ref.updated) < N  # both branches of the rule run
    rule = make_adaptive_rule(name, **params)
    state = init_adaptive_state(name, D, K)
    Xin = sp.csr_matrix(X) if layout == "csr" else X
    logs = []
    for t in range(N):  # one round per chunk: the weights after every round
        logs.append(learn_chunk(rule, state, Xin[t:t + 1], y[t:t + 1], fit_intercept=fit_intercept, bias=bias))
        _close(_full(state), ref.trace[t], f"weights after round {t}")
    np.testing.assert_array_equal(np.concatenate([lg.mistake for lg in logs]), ref.mistake)
    np.testing.assert_array_equal(np.concatenate([lg.updated for lg in logs]), ref.updated)
    _close(np.concatenate([lg.hinge for lg in logs]), ref.hinge, "hinge")
    assert state.n_updates.tolist() == ref.n_updates
    assert state.n_rounds[0] == N
    stats = state.A.T if fit_intercept else state.A.T[:, :D]
    _close(stats, np.array(ref.stats)[:, : stats.shape[1]], "Sigma / G")
    if name == "nag":
        _close(state.S[:D], ref.s[:D], "s")
        _close(state.T, ref.tN, "t, N")
    # The same rounds as one chunk: bit for bit.
    whole = init_adaptive_state(name, D, K)
    learn_chunk(rule, whole, Xin, y, fit_intercept=fit_intercept, bias=bias)
    for f in whole._fields:
        assert np.array_equal(getattr(whole, f), getattr(state, f)), f


@pytest.mark.parametrize("name,params", RULE_CONFIGS)
@pytest.mark.parametrize("K", [1, 4])
def test_dense_equals_csr_with_explicit_zeros_and_shuffled_order(name, params, K):
    X, y = _data(3, K=K)
    rng = np.random.default_rng(1)
    rows, cols = np.nonzero((X != 0) | (rng.random(X.shape) < 0.1))
    A = sp.csr_matrix((X[rows, cols], (rows, cols)), shape=X.shape)
    assert A.nnz > np.count_nonzero(X)
    order = rng.permutation(N)
    rule = make_adaptive_rule(name, **params)
    runs = []
    for Xin in (X, A, sp.csr_matrix(X)):
        s = init_adaptive_state(name, D, K)
        log = learn_chunk(rule, s, Xin, y, order=order, fit_intercept=True)
        runs.append((s, log))
    for s, log in runs[1:]:
        for f in s._fields:
            assert getattr(s, f).tobytes() == getattr(runs[0][0], f).tobytes(), f
        for f in log._fields:
            assert np.array_equal(getattr(log, f), getattr(runs[0][1], f)), f


@pytest.mark.parametrize("name,params", RULE_CONFIGS)
@pytest.mark.parametrize("K", [1, 3])
def test_running_sum_is_the_average_of_the_oracle(name, params, K):
    """The ``average`` conversion's running sum (P + q W, compensated on every weight change,
    NAG's rescales included) equals the oracle's sum of the hypotheses, in pieces too."""
    X, y = _data(11, K=K)
    ref = naive_adaptive_run(name, params, X, y, K, fit_intercept=True)
    rule = make_adaptive_rule(name, **params)
    s = init_adaptive_state(name, D, K)
    acc = running_sum(s)
    for lo in range(0, N, 37):
        learn_chunk(rule, s, sp.csr_matrix(X[lo:lo + 37]), y[lo:lo + 37], fit_intercept=True, acc=acc)
    assert acc.count == N
    avg = (running_value(acc, s) + _full(s)) / (N + 1)
    np.testing.assert_allclose(avg, ref.average, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(ref.average).max()))


def test_estimator_average_matches_the_oracle_and_partial_fit_continues_fit():
    X, y = _data(5, K=3)
    ref = naive_adaptive_run("arow", {"r": 0.5}, X, y, 3, fit_intercept=True)
    est = distlearn.AROW(r=0.5, epochs=1, shuffle=False, conversion="average").fit(X, y)
    np.testing.assert_allclose(np.hstack([est.coef_, est.intercept_[:, None]]), ref.average, rtol=1e-10,
                               atol=1e-12)
    last = distlearn.AROW(r=0.5, epochs=1, shuffle=False).fit(X, y)
    _close(np.hstack([last.coef_, last.intercept_[:, None]]), [w for w in ref.trace[-1]], "last")
    assert last.online_errors_ == sum(ref.mistake) and last.n_updates_ == sum(ref.updated)
    # partial_fit in two halves == one pass.
    pf = distlearn.NormalizedGradient(loss="hinge", shuffle=False)
    pf.partial_fit(X[:70], y[:70], classes=[0, 1, 2]).partial_fit(X[70:], y[70:])
    one = distlearn.NormalizedGradient(loss="hinge", epochs=1, shuffle=False).fit(X, y)
    np.testing.assert_array_equal(pf.coef_, one.coef_)
    np.testing.assert_array_equal(pf.intercept_, one.intercept_)


@pytest.mark.parametrize("cls,kw", [(distlearn.AROW, {"r": 0.3}), (distlearn.NormalizedGradient, {}),
                                    (distlearn.NormalizedGradient, {"loss": "hinge"})])
def test_estimator_from_a_store_equals_arrays(tmp_path, cls, kw):
    from distlearn.data import create_dataset

    X, y = _data(9, n=300)
    X = X.astype(np.float32).astype(np.float64)  # the store keeps float32 values
    y = np.where(y == 1, 1, -1)
    path = create_dataset(tmp_path / "s.zarr", sp.csr_matrix(X), y, block_rows=64).path
    a = cls(**kw, epochs=2, random_state=3, conversion="average").fit(path)
    b = cls(**kw, epochs=2, shuffle=False, conversion="average").fit(sp.csr_matrix(X), y)
    c = cls(**kw, epochs=2, shuffle=False, conversion="average").fit(path)
    np.testing.assert_allclose(b.coef_, c.coef_, rtol=1e-12, atol=1e-14)
    assert a.t_ == 600 and a.n_iter_ == 2
    assert a.score(X, y) > 0.6


def test_float32_weights_and_rollback_on_nan():
    X, y = _data(2)
    a = distlearn.AROW(dtype="float32", epochs=2, random_state=0).fit(X, y)
    assert a.coef_.dtype == np.float32
    b = distlearn.AROW(epochs=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-4, atol=1e-5)
    est = distlearn.NormalizedGradient(shuffle=False).partial_fit(X[:50], y[:50], classes=[-1, 0, 1, 2])
    before = est.coef_.copy(), est._state.S.copy(), est._state.T.copy()
    Xb = X[50:80].copy()
    Xb[10, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.partial_fit(Xb, y[50:80])
    np.testing.assert_array_equal(est.coef_, before[0])
    np.testing.assert_array_equal(est._state.S, before[1])
    np.testing.assert_array_equal(est._state.T, before[2])


def test_state_and_rule_must_match():
    X, y = _data(1, n=10)
    with pytest.raises(ValueError, match="needs an AdaptiveState"):
        learn_chunk(make_adaptive_rule("arow"), init_state(D, 1), X, y)
    with pytest.raises(ValueError, match="needs a LinearState"):
        learn_chunk(make_rule("perceptron"), init_adaptive_state("arow", D, 1), X, y)
    with pytest.raises(ValueError, match="unknown adaptive rule"):
        make_adaptive_rule("scw")
    with pytest.raises(ValueError, match="loss must be"):
        make_adaptive_rule("nag", loss="squared")
    with pytest.raises(ValueError, match="r must be"):
        make_adaptive_rule("arow", r=0.0)
    s = init_adaptive_state("nag", D, 2)
    c = copy_state(s)
    assert isinstance(c, AdaptiveState) and c.S is not s.S


def test_registry_oracles_and_estimators_agree():
    assert set(ADAPTIVE_RULES) == set(ADAPTIVE_ORACLES)
    for name, spec in ADAPTIVE_RULES.items():
        cls = getattr(distlearn, spec.estimator)
        assert distlearn.estimators.ADAPTIVE_ESTIMATORS[name] is cls
        assert cls()._rule(2)[0] == name
        assert make_adaptive_rule(name).code >= 100


# ---------------------------------------------------------------------------- laws

_rows = hnp.arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 6)),
                   elements=st.floats(-100, 100, allow_nan=False, width=64).map(lambda v: 0.0 if abs(v) < 1e-3 else v))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(X=_rows, r=st.floats(1e-3, 1e3), seed=st.integers(0, 2**16), K=st.sampled_from([1, 3]))
def test_arow_sigma_stays_in_unit_interval_and_never_grows(X, r, seed, K):
    y = np.random.default_rng(seed).integers(0, K if K > 1 else 2, size=X.shape[0])
    rule = make_adaptive_rule("arow", r=r)
    s = init_adaptive_state("arow", X.shape[1], K)
    prev = s.A.copy()
    for t in range(X.shape[0]):
        learn_chunk(rule, s, X[t:t + 1], y[t:t + 1], fit_intercept=True)
        assert np.all(s.A > 0) and np.all(s.A <= 1)
        assert np.all(s.A <= prev)
        prev = s.A.copy()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(X=_rows, seed=st.integers(0, 2**16), loss=st.sampled_from(["hinge", "logistic"]),
       powers=st.lists(st.integers(-8, 8), min_size=6, max_size=6))
def test_nag_is_invariant_to_feature_scales(X, seed, loss, powers):
    """Multiplying feature i by 2^p (exact in floating point) divides its learnt weight by 2^p
    and changes no decision: the point of normalised learning.  Also: s is the running max |x_i|."""
    y = np.random.default_rng(seed).integers(0, 2, size=X.shape[0])
    c = np.exp2(np.array(powers[: X.shape[1]], dtype=np.float64))
    rule = make_adaptive_rule("nag", loss=loss, eta=0.5)
    a = init_adaptive_state("nag", X.shape[1], 1)
    b = init_adaptive_state("nag", X.shape[1], 1)
    la = learn_chunk(rule, a, X, y, fit_intercept=True)
    lb = learn_chunk(rule, b, X * c, y, fit_intercept=True)
    np.testing.assert_array_equal(la.mistake, lb.mistake)
    np.testing.assert_array_equal(la.updated, lb.updated)
    np.testing.assert_array_equal(a.W[:-1, 0], b.W[:-1, 0] * c)
    np.testing.assert_array_equal(a.W[-1], b.W[-1])
    np.testing.assert_array_equal(a.S[:-1], np.abs(X).max(axis=0))
    assert a.T[0] == X.shape[0] and np.all(a.A >= 0)
