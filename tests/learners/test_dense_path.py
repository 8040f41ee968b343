"""The dense multiclass kernel (``_learn_dense_multi``: K margins summed side by side in
vector lanes, no compaction of the rows) against the CSR kernel, bit for bit.

Every rule of the registry, one-vs-rest and native, with and without the bias feature,
float32 and float64 weights, every number of columns the vector loops split differently
(1..4 lanes of a group, one to four groups, several passes over the row), rows whose
length is not a multiple of the zero-skipping block, a permuted order, the running sum of
the conversions, weights holding -0.0, and non-finite weights at a zero feature (which the
dense sum sees as 0 * inf = NaN and the CSR sum never sees).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn.learners import RULES, init_state, learn_chunk, make_rule, running_sum

#: Parameters for the rules that have required ones (the others run with their defaults).
PARAMS = {"margin": {"horizon": 300, "radius": 4.0}}


def _configs():
    out = []
    for name, spec in RULES.items():
        out.append(pytest.param(name, dict(PARAMS.get(name, {})), id=name))
        if spec.native:
            out.append(pytest.param(name, {**PARAMS.get(name, {}), "native": True}, id=f"{name}-native"))
    return out


CONFIGS = _configs()


def _data(seed, n=150, d=37, K=3, dtype=np.float64):
    """~55% zeros, whole zero blocks included, labelled by a noisy linear teacher; values
    exactly representable in float32 (so the float32 runs see the same numbers)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)) * 8) / 8
    X[rng.random((n, d)) < 0.45] = 0.0
    X[:, 4:12][rng.random(n) < 0.5] = 0.0  # all-zero blocks of features
    X[rng.random(n) < 0.05] = 0.0           # all-zero rows
    s = X @ rng.normal(size=(d, K)) + 0.5 * rng.normal(size=(n, K))
    y = s.argmax(axis=1) if K > 1 else (s[:, 0] > 0).astype(np.int64)
    return np.ascontiguousarray(X, dtype=dtype), y.astype(np.int64)


def _same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, what
    assert a.tobytes() == b.tobytes(), f"{what}: not bit-identical"


def assert_dense_equals_csr(name, params, X, y, K, *, dtype, fit_intercept, bias=0.75, order=None, acc=False, state=None):
    rule = make_rule(name, **params)
    out = []
    for Xin in (X, sp.csr_matrix(X)):
        s = init_state(X.shape[1], K, dtype=dtype) if state is None else type(state)(*(a.copy() for a in state))
        a = running_sum(s, start=3, cut=0) if acc else None
        log = learn_chunk(rule, s, Xin, y, order=order, fit_intercept=fit_intercept, bias=bias, acc=a)
        out.append((s, log, a))
    (s1, l1, a1), (s2, l2, a2) = out
    for f in s1._fields:
        _same(getattr(s1, f), getattr(s2, f), f"state.{f}")
    for f in l1._fields:
        _same(getattr(l1, f), getattr(l2, f), f"log.{f}")
    if acc:
        for f in a1._fields:
            _same(getattr(a1, f), getattr(a2, f), f"acc.{f}")
    return s1, l1


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("fit_intercept", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("name,params", CONFIGS)
def test_dense_equals_csr_every_rule(name, params, fit_intercept, dtype):
    K = 4 if params.get("native") else 10
    X, y = _data(3, K=K, dtype=dtype)
    order = np.random.default_rng(1).permutation(len(y))
    s, log = assert_dense_equals_csr(name, params, X, y, K, dtype=dtype, fit_intercept=fit_intercept, order=order)
    assert log.updated.any()
    if K > 1:  # one-vs-rest: several columns step on some rows
        assert (s.n_updates > 0).sum() >= 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name,params", CONFIGS)
def test_dense_equals_csr_binary(name, params, dtype):
    if params.get("native"):
        pytest.skip("native rules need K >= 3")
    X, y = _data(4, K=1, dtype=dtype)
    assert_dense_equals_csr(name, params, X, y, 1, dtype=dtype, fit_intercept=True)


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 20, 33, 37])
@pytest.mark.parametrize("d", [1, 3, 4, 9, 64])
def test_every_lane_split(K, d):
    """Every group count and partial last group of the margin loop, more passes than one
    (K > 16), and rows shorter than, equal to and not a multiple of the skipped block."""
    for dtype in (np.float64, np.float32):
        X, y = _data(K * 100 + d, n=60, d=d, K=K, dtype=dtype)
        assert_dense_equals_csr("pa", {"variant": "PA-I", "C": 0.3}, X, y, K, dtype=dtype, fit_intercept=True)
        assert_dense_equals_csr("perceptron", {}, X, y, K, dtype=dtype, fit_intercept=False)


@pytest.mark.parametrize("name,params", [
    pytest.param("perceptron", {}, id="perceptron"),
    pytest.param("alma", {}, id="alma"),
    pytest.param("pa", {"variant": "PA", "native": True}, id="mc-pa"),
])
def test_running_sum_dense_equals_csr(name, params):
    X, y = _data(5, K=4)
    assert_dense_equals_csr(name, params, X, y, 4, dtype=np.float64, fit_intercept=True, acc=True)


def test_negative_zero_weights_stay_negative_zero():
    """A zero feature's weight is not touched: -0.0 stays -0.0 (``w + 0 * u`` would give +0.0)."""
    X, y = _data(6, K=3)
    X[:, 5] = 0.0  # a feature no row uses
    s0 = init_state(X.shape[1], 3)
    s0.W[:] = -0.0
    s, log = assert_dense_equals_csr("perceptron", {}, X, y, 3, dtype=np.float64, fit_intercept=False, state=s0)
    assert log.updated.any()
    assert np.signbit(s.W[5]).all()


def test_non_finite_weight_at_a_zero_feature():
    """An infinite weight whose feature is zero in every row: absent from the sparse sums, NaN
    in a dense sum that adds 0 * inf.  The dense kernel must still follow the CSR kernel."""
    X, y = _data(7, K=3)
    X[:, 2] = 0.0
    s0 = init_state(X.shape[1], 3)
    s0.W[2, :] = np.inf
    s0.W[3, 1] = -np.inf
    X[:, 3] = 0.0
    s, log = assert_dense_equals_csr("perceptron", {}, X, y, 3, dtype=np.float64, fit_intercept=True, state=s0)
    assert len(log.mistake) == len(y) and np.isinf(s.W[2]).all()


@pytest.mark.parametrize("name", ["perceptron", "pa", "mira"])
def test_paired_rows_reuse_the_next_rows_sums_only_when_nothing_moved(name):
    """float64 dense rows are summed in pairs (the next row's margins come with this row's and
    are reused when this row does not update).  Later epochs of a nearly separable problem
    update rarely, so most rounds reuse the paired sums; runs of updates in between force the
    recomputation.  Both must be the CSR kernel's bits, over an odd number of rows (the last
    row has no partner) and in a permuted order."""
    X, y = _data(7, n=201, d=41, K=5)
    y = (X @ np.random.default_rng(3).normal(size=(41, 5))).argmax(axis=1).astype(np.int64)  # separable
    state = None
    moved = still = 0
    for epoch in range(6):
        order = np.random.default_rng(epoch).permutation(len(y))
        state, log = assert_dense_equals_csr(name, {}, X, y, 5, dtype=np.float64, fit_intercept=True,
                                             order=order, state=state)
        moved += int(np.sum(log.updated))
        still += int(np.sum(~np.asarray(log.updated, bool)))
    assert moved > 50 and still > 50  # both kinds of round occurred, many times
