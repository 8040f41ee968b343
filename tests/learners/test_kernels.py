"""The compiled linear rules (``learn_chunk``) against the pure-Python oracles in
``tests/naive.py``, and the chunk driver's contracts: dense == CSR bit for bit,
chunk invariance, ``order=``, empty chunks, all-zero rows, read-only and int64
inputs, ``log=``/``offset=``, float32 state.

Exactness: the additive rules (perceptron, generalised perceptron, PA, binary
MIRA, LMS, multiclass PA) keep ``scale == 1`` and must match the oracle bit for
bit in float64.  ALMA, the margin perceptron and ROMMA rescale through
``scale``/``sqnorm`` and native MIRA solves its QP differently from the oracle,
so those are compared with ``rtol = 1e-9`` -- while their per-round decisions
(mistake, updated, update counts) must still agree exactly.  That is well posed
only away from exact ties: with integer data a margin can be exactly 0 (or a
ROMMA/MIRA constraint exactly tight) by cancellation, and then the last bit
decides.  The fixed seeds below have no such tie; if a change in the kernel's
rounding makes one of these tests fail on a single flipped decision with a
margin of ~1e-16 at that round, that is a tie, not a bug.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from distlearn.learners import RoundLog, copy_state, init_state, learn_chunk, make_rule, state_coef
from distlearn.learners.adaptive import init_adaptive_state, make_adaptive_rule
from distlearn.learners.linear import row_sqnorms
from tests.naive import mira_qp, naive_run, sparse_row

D = 20
N = 240

# (id, rule name, parameters, exact).  Every parameter is given explicitly so that
# the oracle never depends on make_rule's defaults.
BINARY_RULES = [
    ("perceptron", "perceptron", {"eta": 1.0}, True),
    ("perceptron-eta", "perceptron", {"eta": 0.37}, True),
    ("generalized", "generalized", {"rho": 0.1, "eta": 0.7, "rho_schedule": "constant",
                                    "eta_schedule": "constant"}, True),
    ("generalized-invsqrt", "generalized", {"rho": 0.05, "eta": 1.3, "rho_schedule": "inv_sqrt",
                                            "eta_schedule": "inv_sqrt"}, True),
    ("margin", "margin", {"horizon": 300, "radius": 4.0}, False),
    ("alma", "alma", {"alpha": 0.9, "B": None, "C": math.sqrt(2.0)}, False),
    ("alma-B2C1", "alma", {"alpha": 0.5, "B": 2.0, "C": 1.0}, False),
    ("romma", "romma", {"aggressive": False}, False),
    ("romma-aggressive", "romma", {"aggressive": True}, False),
    ("pa", "pa", {"variant": "PA", "C": 1.0}, True),
    ("pa1", "pa", {"variant": "PA-I", "C": 0.1}, True),
    ("pa2", "pa", {"variant": "PA-II", "C": 0.5}, True),
    ("mira-0.01", "mira", {"beta": 0.01}, True),
    ("mira-0.5", "mira", {"beta": 0.5}, True),
    ("lms", "lms", {"eta": 0.01}, True),
]
NATIVE_PA = [
    ("mc-pa", "pa", {"variant": "PA", "C": 1.0, "native": True}, True),
    ("mc-pa1", "pa", {"variant": "PA-I", "C": 0.1, "native": True}, True),
    ("mc-pa2", "pa", {"variant": "PA-II", "C": 0.5, "native": True}, True),
]
NATIVE_MIRA = [
    ("mc-mira-0", "mira", {"beta": 0.0, "native": True}, False),
    ("mc-mira-0.01", "mira", {"beta": 0.01, "native": True}, False),
    ("mc-mira-0.5", "mira", {"beta": 0.5, "native": True}, False),
]
NORM_RULES = {"generalized", "margin", "alma", "romma"}


def _params(rules):
    return [pytest.param(name, p, exact, id=i) for i, name, p, exact in rules]


#: Every rule with the number of output columns it runs with in the cross-cutting tests.
ALL_CONFIGS = (
    [pytest.param(name, p, 1, id=f"{i}-K1") for i, name, p, _ in BINARY_RULES]
    + [pytest.param(name, p, 3, id=f"{i}-K3") for i, name, p, _ in BINARY_RULES]
    + [pytest.param(name, p, 4, id=f"{i}-K4") for i, name, p, _ in NATIVE_PA + NATIVE_MIRA]
)

INTERCEPTS = [
    pytest.param(False, 1.0, id="nobias"),
    pytest.param(True, 1.0, id="bias1"),
    pytest.param(True, 0.5, id="bias0.5"),
]


# ---------------------------------------------------------------------------
# helpers


def _data(seed, *, n=N, d=D, K=1, kind="real", zero_rows=0.05):
    """Rows with ~50% zeros (and some all-zero rows) labelled by a noisy linear teacher.

    With K == 1 the negatives are a mix of 0, 2 and -1: anything but 1 is negative.
    """
    rng = np.random.default_rng(seed)
    if kind == "int":
        X = rng.integers(-3, 4, size=(n, d)).astype(np.float64)
    else:
        X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.5] = 0.0
    X[rng.random(n) < zero_rows] = 0.0
    T = rng.normal(size=(d, K))
    s = X @ T + 0.7 * rng.normal(size=(n, K))
    if K == 1:
        y = np.where(s[:, 0] > 0, 1, rng.choice([0, 2, -1], size=n))
    else:
        y = s.argmax(axis=1)
    return np.ascontiguousarray(X), y.astype(np.int64)


def _state_at(coef0, intercept0, dtype=np.float64):
    """A state holding the given true weights (sqnorm consistent, scale 1)."""
    K, d = coef0.shape
    s = init_state(d, K, dtype=dtype)
    s.W[:d] = coef0.T
    s.W[d] = intercept0
    s.sqnorm[:] = (coef0**2).sum(axis=1) + intercept0**2
    return s


def _run(name, params, X, y, K, *, fit_intercept=False, bias=1.0, state=None, **kw):
    rule = make_rule(name, **params)
    s = init_state(X.shape[1], K) if state is None else state
    log = learn_chunk(rule, s, X, y, fit_intercept=fit_intercept, bias=bias, **kw)
    return s, log


def _check_oracle(state, log, ref, exact, *, rtol=1e-9):
    coef, intercept = state_coef(state)
    rc = np.array(ref.coef, dtype=np.float64).reshape(coef.shape)
    rb = np.array(ref.intercept, dtype=np.float64)
    if exact:
        np.testing.assert_array_equal(coef, rc)
        np.testing.assert_array_equal(intercept, rb)
        np.testing.assert_array_equal(log.hinge, np.array(ref.hinge))
    else:
        scale = max(1.0, float(np.abs(rc).max(initial=0.0)), float(np.abs(rb).max(initial=0.0)))
        np.testing.assert_allclose(coef, rc, rtol=rtol, atol=rtol * scale)
        np.testing.assert_allclose(intercept, rb, rtol=rtol, atol=rtol * scale)
        np.testing.assert_allclose(log.hinge, ref.hinge, rtol=rtol, atol=rtol * max(1.0, max(ref.hinge, default=0)))
    np.testing.assert_array_equal(log.mistake, np.array(ref.mistake, dtype=np.uint8))
    np.testing.assert_array_equal(log.updated, np.array(ref.updated, dtype=np.uint8))
    assert state.n_updates.tolist() == ref.n_updates
    assert state.n_rounds[0] == len(ref.mistake)


def _same_bits(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.tobytes() != b.tobytes():
        bad = np.flatnonzero(a.reshape(-1).view(np.uint8) != b.reshape(-1).view(np.uint8))
        raise AssertionError(f"{what}: not bit-identical (first differing byte {bad[0]})")
    return True


def _same_run(s1, l1, s2, l2):
    for f in s1._fields:
        assert _same_bits(getattr(s1, f), getattr(s2, f), f"state.{f}")
    for f in l1._fields:
        assert _same_bits(getattr(l1, f), getattr(l2, f), f"log.{f}")
    return True


def _csr_with_explicit_zeros(X, rng):
    """CSR of X storing, besides its nonzeros, some explicit zeros (indices still sorted)."""
    rows, cols = np.nonzero((X != 0) | (rng.random(X.shape) < 0.1))
    A = sp.csr_matrix((X[rows, cols], (rows, cols)), shape=X.shape)
    assert A.has_sorted_indices and A.nnz > np.count_nonzero(X)
    return A


def _int64_csr(A):
    A = A.copy()
    A.indices = A.indices.astype(np.int64)
    A.indptr = A.indptr.astype(np.int64)
    return A


# ---------------------------------------------------------------------------
# kernel == oracle


@pytest.mark.parametrize("fit_intercept,bias", INTERCEPTS)
@pytest.mark.parametrize("kind", ["int", "real"])
@pytest.mark.parametrize("K", [1, 3, 5, 15])  # 15 = 8 + 4 + 2 + 1: every group of the margin loop
@pytest.mark.parametrize("name,params,exact", _params(BINARY_RULES))
def test_binary_and_ovr_rules_match_oracle(name, params, exact, K, kind, fit_intercept, bias):
    # With the bias feature, all-zero rows are identical examples; aggressive ROMMA leaves
    # y w.x = 1 up to rounding on the repeat, a tie the oracle and kernel may break apart.
    zero_rows = 0.0 if (params.get("aggressive") and fit_intercept) else 0.05
    X, y = _data(17 * K + (kind == "int"), K=K, kind=kind, zero_rows=zero_rows)
    s, log = _run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias)
    ref = naive_run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias)
    assert sum(ref.updated) > 0
    if K == 1 and name not in ("lms", "margin"):
        assert sum(ref.updated) < N  # both branches of the rule are exercised
    _check_oracle(s, log, ref, exact)
    if name in NORM_RULES:
        coef, b = state_coef(s)
        np.testing.assert_allclose(s.sqnorm, (coef**2).sum(axis=1) + b**2, rtol=1e-9)


@pytest.mark.parametrize("fit_intercept,bias", INTERCEPTS)
@pytest.mark.parametrize("kind", ["int", "real"])
@pytest.mark.parametrize("K", [3, 4, 5, 15])
@pytest.mark.parametrize("name,params,exact", _params(NATIVE_PA))
def test_multiclass_pa_matches_oracle(name, params, exact, K, kind, fit_intercept, bias):
    X, y = _data(31 * K + (kind == "int"), K=K, kind=kind)
    s, log = _run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias)
    ref = naive_run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias)
    assert sum(ref.updated) > 0
    _check_oracle(s, log, ref, exact)
    # One prototype gains what another loses: sum_r w_r stays 0.
    coef, b = state_coef(s)
    np.testing.assert_allclose(coef.sum(axis=0), 0.0, atol=1e-12 * max(1.0, np.abs(coef).max()))


@pytest.mark.parametrize("fit_intercept,bias", INTERCEPTS)
@pytest.mark.parametrize("kind", ["int", "real"])
@pytest.mark.parametrize("K", [3, 5])
@pytest.mark.parametrize("name,params,exact", _params(NATIVE_MIRA))
def test_multiclass_mira_matches_oracle(name, params, exact, K, kind, fit_intercept, bias):
    # From generic (random) weights: starting from w = 0, MIRA's step leaves the updated
    # classes exactly tied on the next examples, and ties are broken by rounding.
    X, y = _data(43 * K + (kind == "int"), K=K, kind=kind, zero_rows=0.0)
    rng = np.random.default_rng(K)
    coef0 = rng.normal(size=(K, D))
    b0 = rng.normal(size=K) if fit_intercept else np.zeros(K)
    s, log = _run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias, state=_state_at(coef0, b0))
    ref = naive_run(name, params, X, y, K, fit_intercept=fit_intercept, bias=bias, coef0=coef0, intercept0=b0)
    assert sum(ref.updated) > 0
    _check_oracle(s, log, ref, exact)


@pytest.mark.parametrize("beta", [0.01, 0.5])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_multiclass_mira_from_zero_weights(beta, fit_intercept):
    """From w = 0 the decisions hit exact ties (see above), so only the weights are compared."""
    params = {"beta": beta, "native": True}
    X, y = _data(5, K=4)
    s, log = _run("mira", params, X, y, 4, fit_intercept=fit_intercept)
    ref = naive_run("mira", params, X, y, 4, fit_intercept=fit_intercept)
    coef, b = state_coef(s)
    scale = np.abs(np.array(ref.coef)).max()
    assert scale > 0
    np.testing.assert_allclose(coef, ref.coef, atol=1e-9 * scale)
    np.testing.assert_allclose(b, ref.intercept, atol=1e-9 * scale)
    np.testing.assert_allclose(log.hinge, ref.hinge, atol=1e-9)


@pytest.mark.parametrize("name,params,exact", _params(BINARY_RULES))
@pytest.mark.parametrize("K", [1, 3])
def test_rules_from_a_nonzero_state(name, params, exact, K):
    """Chunks after the first start from learned weights: the state is the whole memory."""
    X, y = _data(3 + K, K=K, kind="real")
    rng = np.random.default_rng(11)
    coef0 = 0.3 * rng.normal(size=(K, D))
    b0 = 0.3 * rng.normal(size=K)
    s, log = _run(name, params, X, y, K, fit_intercept=True, bias=1.0, state=_state_at(coef0, b0))
    ref = naive_run(name, params, X, y, K, fit_intercept=True, coef0=coef0, intercept0=b0)
    _check_oracle(s, log, ref, exact)


@pytest.mark.parametrize("name,params,K", [
    pytest.param("margin", {"horizon": 1, "radius": 0.001}, 1, id="margin"),
    pytest.param("margin", {"horizon": 1, "radius": 0.01}, 3, id="margin-K3"),
    pytest.param("alma", {"alpha": 0.5, "B": None, "C": 1000.0}, 1, id="alma"),
])
def test_scale_folds_back_into_the_weights(name, params, K):
    """Huge steps make every projection shrink ``scale`` by orders of magnitude, so it
    leaves the kernel's range again and again and is folded back into W."""
    X, y = _data(23, K=K)
    rule = make_rule(name, **params)
    s = init_state(D, K)
    folds = 0
    for t in range(N):
        before = s.scale.copy()
        learn_chunk(rule, s, X[t:t + 1], y[t:t + 1], fit_intercept=True)
        folds += int(((s.scale == 1.0) & (before < 1e-20)).sum())
    assert folds >= 3
    ref = naive_run(name, params, X, y, K, fit_intercept=True)
    coef, b = state_coef(s)
    np.testing.assert_allclose(coef, ref.coef, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b, ref.intercept, rtol=1e-9, atol=1e-9)
    assert s.n_updates.tolist() == ref.n_updates


def test_mira_qp_oracle_agrees_with_scipy():
    """The oracle's brute-force QP against a generic constrained solver."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    for trial in range(40):
        K = int(rng.integers(3, 6))
        m = rng.normal(size=K)
        y = int(rng.integers(K))
        xx = float(rng.uniform(0.1, 5.0))
        beta = float(rng.choice([0.0, 0.3]))
        g = m - beta * (np.arange(K) == y)
        cap = (np.arange(K) == y).astype(float)
        res = minimize(
            lambda t: t @ g + 0.5 * xx * t @ t, np.zeros(K), jac=lambda t: g + xx * t, method="SLSQP",
            constraints=[{"type": "eq", "fun": lambda t: t.sum(), "jac": lambda t: np.ones(K)},
                         {"type": "ineq", "fun": lambda t: cap - t, "jac": lambda t: -np.eye(K)}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert res.success
        np.testing.assert_allclose(mira_qp(m.tolist(), y, xx, beta), res.x, atol=1e-6)


def test_romma_scale_factor_exactly_zero():
    """Aggressive ROMMA with c = 0: w = (1/2, 0), x = (1, 1), y = +1 gives c = 0, d = 1/2."""
    X = np.array([[2.0, 0.0], [1.0, 1.0]])
    y = np.array([1, 1])
    s, log = _run("romma", {"aggressive": True}, X, y, 1)
    ref = naive_run("romma", {"aggressive": True}, X, y, 1)
    assert ref.coef == [[0.5, 0.5]]
    coef, _ = state_coef(s)
    np.testing.assert_array_equal(coef, [[0.5, 0.5]])
    assert log.updated.tolist() == [1, 1]
    np.testing.assert_allclose(s.sqnorm, [0.5])


# ---------------------------------------------------------------------------
# input forms: dense == CSR, read-only, int64 indices, dtypes


@pytest.mark.parametrize("name,params,K", ALL_CONFIGS)
def test_dense_and_csr_are_bit_identical(name, params, K):
    X, y = _data(7, K=K)
    rng = np.random.default_rng(1)
    order = rng.permutation(N)
    ref = _run(name, params, X, y, K, fit_intercept=True, bias=0.75, order=order)
    inputs = {
        "csr_matrix": sp.csr_matrix(X),
        "csr_array": sp.csr_array(X),
        "explicit zeros": _csr_with_explicit_zeros(X, rng),
        "int64 indices": _int64_csr(sp.csr_matrix(X)),
        "csc": sp.csc_matrix(X),
        "coo": sp.coo_matrix(X),
        "fortran dense": np.asfortranarray(X),
        "strided dense": np.repeat(X, 2, axis=1)[:, ::2],
    }
    for what, Xin in inputs.items():
        try:
            assert _same_run(*ref, *_run(name, params, Xin, y, K, fit_intercept=True, bias=0.75, order=order))
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None


def test_csr_index_dtypes_and_data_dtypes():
    X, y = _data(8, kind="int")
    A = sp.csr_matrix(X)
    mixed = A.copy()
    mixed.indptr = mixed.indptr.astype(np.int64)  # indices int32, indptr int64
    assert mixed.indices.dtype == np.int32
    i64 = _int64_csr(A)
    assert i64.indices.dtype == np.int64 and i64.indptr.dtype == np.int64
    int_data = sp.csr_matrix(X.astype(np.int32))
    ref = _run("pa", {"variant": "PA-I", "C": 0.3}, X, y, 1, fit_intercept=True)
    for Xin in (mixed, i64, int_data, X.astype(np.int64)):
        s, log = _run("pa", {"variant": "PA-I", "C": 0.3}, Xin, y, 1, fit_intercept=True)
        assert _same_run(*ref, s, log)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_read_only_inputs(sparse):
    X, y = _data(9, K=3)
    order = np.random.default_rng(0).permutation(N)
    ref = _run("pa", {"variant": "PA", "C": 1.0, "native": True}, X, y, 3, order=order)
    Xr = sp.csr_matrix(X) if sparse else X.copy()
    arrays = (Xr.data, Xr.indices, Xr.indptr) if sparse else (Xr,)
    yr, orr = y.copy(), order.copy()
    for a in (*arrays, yr, orr):
        a.setflags(write=False)
    s, log = _run("pa", {"variant": "PA", "C": 1.0, "native": True}, Xr, yr, 3, order=orr)
    assert _same_run(*ref, s, log)
    # and the inputs were not touched
    np.testing.assert_array_equal(Xr.toarray() if sparse else Xr, X)


@pytest.mark.parametrize("name,params,K,exact", [
    pytest.param("perceptron", {"eta": 1.0}, 1, True, id="perceptron"),
    pytest.param("pa", {"variant": "PA-I", "C": 0.1}, 3, True, id="pa1-K3"),
    pytest.param("alma", {"alpha": 0.9}, 1, False, id="alma"),
    pytest.param("pa", {"variant": "PA-II", "C": 0.5, "native": True}, 4, True, id="mc-pa2"),
])
def test_wide_dense_rows_cross_row_blocks(name, params, K, exact):
    """Dense rows are compacted a block of rows at a time (fewer rows per block the wider
    X is): results must not depend on where the blocks fall, with or without order=."""
    rng = np.random.default_rng(22)
    n, d = 300, 4096
    X = np.zeros((n, d))
    for i in range(n):
        cols = rng.choice(d, size=int(rng.integers(0, 40)), replace=False)
        X[i, cols] = rng.normal(size=len(cols))
    y = rng.integers(0, max(K, 2), size=n)
    order = np.concatenate([rng.permutation(n), rng.permutation(n)[:77]])
    log_d = RoundLog(np.zeros(400, np.uint8), np.zeros(400), np.zeros(400, np.uint8))
    dense = _run(name, params, X, y, K, fit_intercept=True, order=order, log=log_d, offset=9)
    csr = _run(name, params, sp.csr_matrix(X), y, K, fit_intercept=True, order=order)
    assert _same_run(dense[0], RoundLog(*(a[9:9 + len(order)] for a in log_d)), *csr)
    ref = naive_run(name, params, X[order], y[order], K, fit_intercept=True)
    _check_oracle(*csr, ref, exact)


@pytest.mark.parametrize("name,params,K", [
    pytest.param("perceptron", {"eta": 1.0}, 1, id="perceptron"),
    pytest.param("pa", {"variant": "PA-I", "C": 0.1}, 3, id="pa1-K3"),
    pytest.param("alma", {"alpha": 0.9}, 1, id="alma"),
    pytest.param("margin", {"horizon": 300, "radius": 4.0}, 3, id="margin-K3"),
    pytest.param("romma", {"aggressive": True}, 1, id="romma-aggressive"),
    pytest.param("lms", {"eta": 0.01}, 3, id="lms-K3"),
    pytest.param("pa", {"variant": "PA", "native": True}, 4, id="mc-pa"),
    pytest.param("mira", {"beta": 0.1, "native": True}, 4, id="mc-mira"),
])
def test_float32_state_close_to_float64(name, params, K):
    X, y = _data(10, K=K)
    X = np.round(X * 16) / 16  # exactly representable in float32
    rule = make_rule(name, **params)
    s64, s32 = init_state(D, K), init_state(D, K, dtype=np.float32)
    l64 = learn_chunk(rule, s64, X, y, fit_intercept=True)
    l32 = learn_chunk(rule, s32, X, y, fit_intercept=True)
    assert s32.W.dtype == np.float32
    c64, b64 = state_coef(s64)
    c32, b32 = state_coef(s32)
    scale = np.abs(c64).max()
    np.testing.assert_allclose(c32, c64, atol=1e-5 * scale)
    np.testing.assert_allclose(b32, b64, atol=1e-5 * scale)
    np.testing.assert_allclose(l32.hinge, l64.hinge, atol=1e-4)
    # Float32 rounding may flip a decision on a near-tie, not more than that.
    assert (l32.mistake != l64.mistake).sum() <= 3
    assert (l32.updated != l64.updated).sum() <= 3


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("layout", ["csr", "dense"])
@pytest.mark.parametrize("rule", ["perceptron", "pa", "arow", "nag"])
def test_float32_margins_are_float32_sums(K, layout, rule):
    """What float32 means: each product w_j x_j and the running sum of a margin are float32
    (steps, norms and scales stay float64).  1 + 2**-25 + 2**-25 is 1 in float32 (each
    addend is below half an ulp) and 1 + 2**-24 in float64; the round's hinge shows which."""
    d = 8
    x = np.zeros((1, d))
    x[0, :3] = 1.0
    col = np.zeros(d)
    col[:3] = [1.0, 2.0**-25, 2.0**-25]
    for dtype, margin in ((np.float32, 1.0), (np.float64, 1.0 + 2.0**-24)):
        if rule in ("arow", "nag"):
            r, st = make_adaptive_rule(rule), init_adaptive_state(rule, d, K, dtype=dtype)
        else:
            r, st = make_rule(rule), init_state(d, K, dtype=dtype)
        st.W[:d, K - 1] = col  # y = 0: for K = 1 the row is negative, for K = 3 column 2 is the rival
        X = sp.csr_matrix(x) if layout == "csr" else x
        log = learn_chunk(r, st, X, np.array([0]))
        assert log.hinge[0] == 1.0 + margin, (dtype, log.hinge[0])


def test_float32_state_exact_for_integer_perceptron():
    """Integer data and eta = 1: every weight is a small integer, exact in float32."""
    X, y = _data(12, K=3, kind="int")
    s64, l64 = _run("perceptron", {"eta": 1.0}, X, y, 3, fit_intercept=True)
    s32 = init_state(D, 3, dtype=np.float32)
    l32 = learn_chunk(make_rule("perceptron"), s32, X, y, fit_intercept=True)
    assert _same_bits(state_coef(s32)[0], state_coef(s64)[0])
    for f in l64._fields:
        assert _same_bits(getattr(l32, f), getattr(l64, f), f)


def test_row_sqnorms_sum_like_the_rules():
    """``row_sqnorms`` gives ||x||^2 summed in column order, as the oracle (and PA's step) does."""
    X, y = _data(24)
    want = np.array([sum(v * v for _, v in sparse_row(row)) for row in X])
    A = sp.csr_matrix(X)
    A.indices[:] = np.concatenate([A.indices[a:b][::-1] for a, b in zip(A.indptr[:-1], A.indptr[1:])])
    A.data[:] = np.concatenate([A.data[a:b][::-1] for a, b in zip(A.indptr[:-1], A.indptr[1:])])
    A.has_sorted_indices = False
    for Xin in (X, sp.csr_matrix(X), A):
        assert _same_bits(row_sqnorms(Xin), want)


# ---------------------------------------------------------------------------
# chunks, order, empty chunks, all-zero rows, the log


def _random_splits(n, rng, n_chunks=9):
    cuts = np.sort(rng.integers(0, n + 1, size=n_chunks - 1))
    cuts = np.concatenate([[0, 0], cuts, [n, n]])  # an empty chunk at both ends
    return list(zip(cuts[:-1], cuts[1:]))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("name,params,K", ALL_CONFIGS)
def test_chunk_invariance(name, params, K, sparse):
    X, y = _data(13, K=K)
    Xin = sp.csr_matrix(X) if sparse else X
    rule = make_rule(name, **params)
    whole = init_state(D, K)
    lw = learn_chunk(rule, whole, Xin, y, fit_intercept=True)
    rng = np.random.default_rng(K)
    splits = _random_splits(N, rng)
    assert any(a == b for a, b in splits)
    parts = init_state(D, K)
    logs = [learn_chunk(rule, parts, Xin[a:b], y[a:b], fit_intercept=True) for a, b in splits]
    joined = RoundLog(*(np.concatenate([getattr(lg, f) for lg in logs]) for f in RoundLog._fields))
    assert _same_run(whole, lw, parts, joined)
    # the same through one preallocated log
    into = init_state(D, K)
    log = RoundLog(np.zeros(N, np.uint8), np.zeros(N, np.float64), np.zeros(N, np.uint8))
    for a, b in splits:
        out = learn_chunk(rule, into, Xin[a:b], y[a:b], fit_intercept=True, log=log, offset=int(a))
        assert out is log
    assert _same_run(whole, lw, into, log)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("name,params,K", [
    pytest.param("romma", {"aggressive": False}, 1, id="romma"),
    pytest.param("pa", {"variant": "PA-II", "C": 0.5}, 3, id="pa2-K3"),
    pytest.param("mira", {"beta": 0.01, "native": True}, 4, id="mc-mira"),
])
def test_order_equals_permuted_rows(name, params, K, sparse):
    X, y = _data(14, K=K)
    Xin = sp.csr_matrix(X) if sparse else X
    rng = np.random.default_rng(2)
    perm = rng.permutation(N)
    two_epochs = np.concatenate([perm, rng.permutation(N)])
    for order in (perm, two_epochs, perm[:17], perm.astype(np.int32).tolist()):
        idx = np.asarray(order)
        a = _run(name, params, Xin, y, K, fit_intercept=True, order=order)
        b = _run(name, params, Xin[idx], y[idx], K, fit_intercept=True)
        assert _same_run(*a, *b)
        assert len(a[1].mistake) == len(idx) and a[0].n_rounds[0] == len(idx)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("name,params,K", ALL_CONFIGS)
def test_empty_chunk_changes_nothing(name, params, K, sparse):
    X, y = _data(15, K=K)
    s, _ = _run(name, params, X, y, K, fit_intercept=True)
    before = copy_state(s)
    empty = sp.csr_matrix((0, D)) if sparse else np.zeros((0, D))
    log = learn_chunk(make_rule(name, **params), s, empty, np.zeros(0, np.int64), fit_intercept=True)
    assert all(len(a) == 0 for a in log)
    log = learn_chunk(make_rule(name, **params), s, X, y, fit_intercept=True, order=np.zeros(0, np.int64))
    assert all(len(a) == 0 for a in log)
    for f in s._fields:
        assert _same_bits(getattr(s, f), getattr(before, f), f)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("name,params,K", ALL_CONFIGS)
def test_all_zero_rows(name, params, K, fit_intercept):
    """Rows of zeros in the middle of a chunk (and a chunk of nothing else).  Without the
    bias feature x = 0: margins are 0 and no rule may move w, though the rules whose
    condition holds at m = 0 still count an update (a step along x = 0)."""
    # With the bias feature, zero rows are identical (bias-only) examples; for aggressive
    # ROMMA and native MIRA a repeat is an exact tie broken by rounding, so only one.
    tie_prone = fit_intercept and (params.get("aggressive") or (name == "mira" and params.get("native")))
    X, y = _data(16, n=60, K=K, zero_rows=0.0 if tie_prone else 0.3)
    n_zero = 1 if tie_prone else 12
    Z = np.zeros((n_zero, D))
    yz = np.arange(n_zero) % max(K, 2)
    Xall = np.vstack([X[:30], Z, X[30:]])
    yall = np.concatenate([y[:30], yz, y[30:]])
    exact = not (name in ("margin", "alma", "romma") or (name == "mira" and params.get("native")))
    s, log = _run(name, params, Xall, yall, K, fit_intercept=fit_intercept)
    ref = naive_run(name, params, Xall, yall, K, fit_intercept=fit_intercept)
    _check_oracle(s, log, ref, exact)
    # A chunk of zeros only, from w = 0.
    s, log = _run(name, params, np.zeros((12, D)), np.arange(12) % max(K, 2), K, fit_intercept=False)
    coef, b = state_coef(s)
    assert not coef.any() and not b.any()
    assert log.hinge.tolist() == [1.0] * 12
    # Rules whose condition holds at m = 0 and whose step does not need ||x|| > 0.
    expect_update = name in ("perceptron", "generalized", "margin", "alma", "lms") or params.get("variant") == "PA-II"
    assert log.updated.tolist() == [int(expect_update)] * 12


def test_log_and_offset_write_only_their_slice():
    X, y = _data(18, K=3)
    rule = make_rule("pa", variant="PA-I", C=0.1)
    ref = learn_chunk(rule, init_state(D, 3), X, y)
    size, off = N + 50, 20
    log = RoundLog(np.full(size, 7, np.uint8), np.full(size, -1.0), np.full(size, 9, np.uint8))
    out = learn_chunk(rule, init_state(D, 3), X, y, log=log, offset=off)
    assert out is log
    for f in RoundLog._fields:
        a = getattr(log, f)
        assert _same_bits(a[off:off + N], getattr(ref, f), f)
        assert (a[:off] == a[0]).all() and (a[off + N:] == a[-1]).all()
    assert log.mistake[0] == 7 and log.hinge[0] == -1.0 and log.updated[-1] == 9
    # Without a log, offset is ignored: a fresh log from position 0.
    fresh = learn_chunk(rule, init_state(D, 3), X, y, offset=5)
    for f in RoundLog._fields:
        assert _same_bits(getattr(fresh, f), getattr(ref, f), f)


# ---------------------------------------------------------------------------
# CSR matrices that are not canonical, and logs that are too small


def test_log_too_small_is_rejected():
    X, y = _data(19, n=10)
    # The log arrays are views of bigger buffers, so the overflow lands in memory we own.
    bufs = (np.zeros(32, np.uint8), np.zeros(32, np.float64), np.zeros(32, np.uint8))
    log = RoundLog(*(b[:8] for b in bufs))
    with pytest.raises(ValueError, match="cannot hold"):
        learn_chunk(make_rule("perceptron"), init_state(D, 1), X, y, log=log, offset=3)
    assert not any(b[8:].any() for b in bufs)


@pytest.mark.parametrize("name,params,K", [
    pytest.param("pa", {"variant": "PA-I", "C": 0.1}, 1, id="pa1"),
    pytest.param("alma", {"alpha": 0.9}, 3, id="alma-K3"),
    pytest.param("mira", {"beta": 0.01, "native": True}, 4, id="mc-mira"),
])
def test_csr_with_unsorted_indices_equals_dense(name, params, K):
    """Margins are summed in column order whatever the storage order (and the caller's
    matrix is left as it was)."""
    X, y = _data(20, K=K)
    A = sp.csr_matrix(X)
    for i in range(N):  # reverse each row's storage order
        a, b = A.indptr[i], A.indptr[i + 1]
        A.indices[a:b] = A.indices[a:b][::-1].copy()
        A.data[a:b] = A.data[a:b][::-1].copy()
    A.has_sorted_indices = False
    assert (A != sp.csr_matrix(X)).nnz == 0
    kept = A.indices.copy()
    ref = _run(name, params, X, y, K, fit_intercept=True)
    got = _run(name, params, A, y, K, fit_intercept=True)
    assert _same_run(*ref, *got)
    np.testing.assert_array_equal(A.indices, kept)


def test_csr_with_duplicate_entries_equals_dense():
    X, y = _data(21, kind="int")
    # Store each x_ij as two adjacent entries (x_ij - 1) and 1 of the same column (exact in
    # float64); scipy's meaning of duplicates is their sum, so A == X.
    data, indices, indptr = [], [], [0]
    for row in X:
        for j in np.flatnonzero(row):
            data += [row[j] - 1.0, 1.0]
            indices += [j, j]
        indptr.append(len(indices))
    A = sp.csr_matrix((np.array(data), np.array(indices, np.int32), np.array(indptr, np.int32)), shape=X.shape)
    assert not A.has_canonical_format and A.has_sorted_indices and np.array_equal(A.toarray(), X)
    ref = _run("pa", {"variant": "PA", "C": 1.0}, X, y, 1)
    got = _run("pa", {"variant": "PA", "C": 1.0}, A, y, 1)
    assert _same_run(*ref, *got)


# ---------------------------------------------------------------------------
# properties (hypothesis)

_values = st.sampled_from([0.0, 0.0, 0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.25, 1.75])
_int_values = st.sampled_from([0, 0, 0, 1, -1, 2, -2, 3])


@st.composite
def _problems(draw, values=_values, max_rows=30, max_features=6, K=1):
    n = draw(st.integers(1, max_rows))
    d = draw(st.integers(1, max_features))
    X = draw(hnp.arrays(np.float64, (n, d), elements=values))
    y = draw(hnp.arrays(np.int64, n, elements=st.integers(0, max(K, 2) - 1)))
    return X, y


_PROP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROP
@given(problem=_problems(), fit_intercept=st.booleans(),
       rule=st.sampled_from([("alma", {"alpha": 0.9}), ("alma", {"alpha": 0.3, "B": 4.0, "C": 3.0}),
                             ("margin", {"horizon": 4, "radius": 0.5}), ("margin", {"horizon": 100, "radius": 1.0})]),
       K=st.sampled_from([1, 3]))
def test_projected_rules_stay_in_the_unit_ball(problem, fit_intercept, rule, K):
    X, y = problem
    y = y % K if K > 1 else y
    r = make_rule(rule[0], **rule[1])
    s = init_state(X.shape[1], K)
    for t in range(len(y)):
        learn_chunk(r, s, X[t:t + 1], y[t:t + 1], fit_intercept=fit_intercept)
        coef, b = state_coef(s)
        sq = (coef**2).sum(axis=1) + b**2
        assert (np.sqrt(sq) <= 1.0 + 1e-9).all()
        np.testing.assert_allclose(s.sqnorm, sq, rtol=1e-9, atol=1e-12)


@_PROP
@given(problem=_problems(values=_int_values, max_rows=40), fit_intercept=st.booleans())
def test_perceptron_log_is_its_own_history(problem, fit_intercept):
    """Integer data, eta = 1: margins are exact, so the log must follow from the rule:
    w_t = sum of y_s x_s over the updated rounds s < t; updated_t == (y_t m_t <= 0);
    mistake_t == (sgn m_t != y_t), hence mistakes == updates wherever m_t != 0."""
    X, y = problem
    Xb = np.hstack([X, np.ones((len(y), 1))]) if fit_intercept else X
    s = init_state(X.shape[1], 1)
    log = learn_chunk(make_rule("perceptron", eta=1.0), s, X, y, fit_intercept=fit_intercept)
    ys = np.where(y == 1, 1.0, -1.0)
    steps = (log.updated[:, None] * ys[:, None]) * Xb
    w_before = np.vstack([np.zeros(Xb.shape[1]), np.cumsum(steps, axis=0)[:-1]])
    m = (w_before * Xb).sum(axis=1)
    np.testing.assert_array_equal(log.updated, (ys * m <= 0).astype(np.uint8))
    np.testing.assert_array_equal(log.mistake, (np.where(m >= 0, 1.0, -1.0) != ys).astype(np.uint8))
    np.testing.assert_array_equal(log.hinge, np.maximum(0.0, 1.0 - ys * m))
    nz = m != 0
    np.testing.assert_array_equal(log.mistake[nz], log.updated[nz])
    coef, b = state_coef(s)
    np.testing.assert_array_equal(coef[0], steps.sum(axis=0)[: X.shape[1]])
    assert s.n_updates[0] == log.updated.sum()


_ANY_RULE = st.sampled_from([(name, p, K) for name, p, K in (c.values for c in ALL_CONFIGS)])


@_PROP
@given(problem=_problems(K=4), fit_intercept=st.booleans(), rule=_ANY_RULE)
def test_rounds_without_update_leave_the_state_alone(problem, fit_intercept, rule):
    name, params, K = rule
    X, y = problem
    y = y % K if K > 1 else y
    r = make_rule(name, **params)
    s = init_state(X.shape[1], K)
    for t in range(len(y)):
        before = copy_state(s)
        log = learn_chunk(r, s, X[t:t + 1], y[t:t + 1], fit_intercept=fit_intercept)
        assert log.hinge[0] >= 0.0 and (not log.mistake[0] or log.hinge[0] >= 1.0)
        if not log.updated[0]:
            for f in ("W", "scale", "sqnorm", "n_updates"):
                assert _same_bits(getattr(s, f), getattr(before, f), f)
        else:
            assert (s.n_updates > before.n_updates).any()


@_PROP
@given(problem=_problems(K=4, max_rows=40), fit_intercept=st.booleans(), rule=_ANY_RULE,
       cuts=st.lists(st.integers(0, 40), max_size=6), sparse=st.booleans())
def test_chunking_never_changes_a_bit(problem, fit_intercept, rule, cuts, sparse):
    name, params, K = rule
    X, y = problem
    y = y % K if K > 1 else y
    Xin = sp.csr_matrix(X) if sparse else X
    r = make_rule(name, **params)
    whole = init_state(X.shape[1], K)
    lw = learn_chunk(r, whole, Xin, y, fit_intercept=fit_intercept)
    bounds = [0, *sorted(min(c, len(y)) for c in cuts), len(y)]
    parts = init_state(X.shape[1], K)
    logs = [learn_chunk(r, parts, Xin[a:b], y[a:b], fit_intercept=fit_intercept)
            for a, b in zip(bounds[:-1], bounds[1:])]
    joined = RoundLog(*(np.concatenate([getattr(lg, f) for lg in logs]) for f in RoundLog._fields))
    assert _same_run(whole, lw, parts, joined)


def test_kernel_bounds_are_checked_by_the_wrapper():
    X, y = _data(22, K=3)
    rule = make_rule("pa", variant="PA-I", C=1.0, native=True)
    with pytest.raises(ValueError, match="class indices"):
        learn_chunk(rule, init_state(D, 3), X, np.full(len(y), 3))
    with pytest.raises(ValueError, match="at least 3 output columns"):
        learn_chunk(rule, init_state(D, 1), X, y % 2)
    with pytest.raises(ValueError, match="one class index per row"):
        learn_chunk(make_rule("perceptron"), init_state(D, 1), X, y[:-1])
    with pytest.raises(ValueError, match="order has row indices"):
        learn_chunk(make_rule("perceptron"), init_state(D, 1), X, y, order=np.array([0, len(y)]))
    with pytest.raises(ValueError, match="features"):
        learn_chunk(make_rule("perceptron"), init_state(D + 1, 1), X, y)


@pytest.mark.parametrize("k", [1, 4])
def test_non_finite_row_stops_the_chunk_before_updating(k):
    from distlearn.learners import NonFiniteError, init_state, learn_chunk, make_rule

    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 6))
    y = rng.integers(0, max(k, 2), 50)
    X[31, 2] = np.nan
    order = rng.permutation(50)
    state = init_state(6, k)
    with pytest.raises(NonFiniteError) as info:
        learn_chunk(make_rule("perceptron"), state, X, y, order=order)
    t = int(np.flatnonzero(order == 31)[0])
    assert (info.value.row, info.value.round) == (31, t)
    # The state holds exactly the rounds before the bad one.
    ref = init_state(6, k)
    learn_chunk(make_rule("perceptron"), ref, X, y, order=order[:t])
    assert np.array_equal(state.W, ref.W) and state.n_rounds[0] == t
