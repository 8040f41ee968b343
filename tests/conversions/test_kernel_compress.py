"""Post-fit compression of a kernel expansion onto a subset of its own patterns (issue 29: no more support
patterns than SVC): the greedy forward selection against a brute-force one, the residual bound as a law,
and the estimators' ``compress`` parameter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distlearn
import distlearn.conversions.kernel as CK
from distlearn.conversions.kernel import compress_expansion, compress_in_parts
from distlearn.data import create_dataset
from distlearn.learners.kernel import kernel_decision, kernel_matrix, make_kernel


def _expansion(m, d, K, seed, spread=1.0):
    rs = np.random.default_rng(seed)
    return rs.normal(size=(m, d)) * spread, rs.normal(size=(m, K))


def _rbf(X, Z, gamma):
    return np.exp(-gamma * ((X[:, None, :] - Z[None, :, :]) ** 2).sum(-1))


def _brute_residual(Kss, A, M, norm):
    """The relative residual of the best expansion over the patterns M, by numpy's least squares on the
    explicit Gram matrix (RKHS: through its symmetric square root, so ||Phi' b|| is ||K^1/2 b||)."""
    F = Kss @ A
    if norm == "data":
        coef = np.linalg.lstsq(Kss[:, M], F, rcond=None)[0]
        return np.linalg.norm(F - Kss[:, M] @ coef) / np.linalg.norm(F), coef
    w, V = np.linalg.eigh(Kss)
    R = (V * np.sqrt(np.clip(w, 0, None))) @ V.T  # K = R R, R symmetric: the rows of R are the patterns' features
    coef = np.linalg.lstsq(R[:, M], R @ A, rcond=None)[0]
    return np.linalg.norm(R @ A - R[:, M] @ coef) / np.linalg.norm(R @ A), coef


def _brute_greedy(Kss, A, tol, norm):
    """Forward selection one pattern at a time, every candidate tried by brute force (numpy's least squares):
    add the one whose addition leaves the least residual, until that is within tol."""
    M, res = [], 1.0
    while res > tol:
        res, j = min((_brute_residual(Kss, A, M + [j], norm)[0], j) for j in range(len(A)) if j not in M)
        M.append(j)
    return np.sort(M)


@pytest.mark.parametrize("norm", ["data", "rkhs"])
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("tol", [0.1, 0.35])
def test_one_at_a_time_selection_equals_the_brute_force_greedy(monkeypatch, norm, K, tol):
    """With blocks of one (COMPRESS_BLOCK = 1), the pivoted Cholesky's exact gains choose the same patterns as
    trying every addition by brute force, and the expansion is the brute-force least squares on that set."""
    monkeypatch.setattr(CK, "COMPRESS_BLOCK", 1)
    S, A = _expansion(18, 3, K, seed=K + int(100 * tol))
    gamma = 0.4
    Kss = _rbf(S, S, gamma)
    got = compress_expansion(make_kernel("rbf", gamma=gamma), S, A, tol, norm=norm)
    want = _brute_greedy(Kss, A, tol, norm)
    assert 1 <= len(want) < len(S)  # the case removes something and keeps something
    np.testing.assert_array_equal(got.keep, want)
    res, coef = _brute_residual(Kss, A, list(want), norm)
    # the expansions agree on the patterns and on fresh rows (the coefficients themselves only as far as the
    # Gram matrix's conditioning lets them)
    Xt, _ = _expansion(25, 3, 1, seed=99)
    for P in (S, Xt):
        G = _rbf(P, S[want], gamma)
        np.testing.assert_allclose(G @ got.coef, G @ coef, rtol=1e-6, atol=1e-6 * np.abs(G @ coef).max())
    assert got.residual == pytest.approx(res, rel=1e-6, abs=1e-9)
    assert got.residual <= tol


@pytest.mark.parametrize("norm", ["data", "rkhs"])
def test_blocks_keep_the_bound_and_nearly_the_greedy_size(monkeypatch, norm):
    """The default blocks (pools of 2 * COMPRESS_BLOCK candidates, up to COMPRESS_BLOCK picks each) stop within
    the tolerance and keep at most a few patterns more than one-at-a-time selection; blocks of 4 too (several
    blocks per fit, so the block updates of the factor are exercised)."""
    S, A = _expansion(200, 4, 2, seed=7)
    kern = make_kernel("rbf", gamma=2.0)
    got = {}
    for block in (CK.COMPRESS_BLOCK, 4, 1):
        monkeypatch.setattr(CK, "COMPRESS_BLOCK", block)
        got[block] = compress_expansion(kern, S, A, 0.2, norm=norm)
    single = got.pop(1)
    assert single.residual <= 0.2 and 10 < len(single.keep) < 200
    for c in got.values():
        assert c.residual <= 0.2
        assert abs(len(c.keep) - len(single.keep)) <= 0.05 * len(single.keep) + 2


@pytest.mark.parametrize("kernel,gamma", [("rbf", 2.0), ("rbf", 0.2), ("poly", 0.5)])
def test_float32_rows_keep_the_exact_bound(monkeypatch, kernel, gamma):
    """The float32 rows of K K (COMPRESS_SINGLE_FROM patterns on; forced here on 200) choose nearly the same
    patterns as float64, and the refined coefficients' residual, recomputed here with numpy, is within the
    tolerance exactly."""
    S, A = _expansion(200, 4, 3, seed=11)
    kern = make_kernel(kernel, gamma=gamma, degree=3, coef0=1.0)
    monkeypatch.setattr(CK, "COMPRESS_SINGLE_FROM", 10**9)
    exact = compress_expansion(kern, S, A, 0.1, norm="data")
    monkeypatch.setattr(CK, "COMPRESS_SINGLE_FROM", 1)
    single = compress_expansion(kern, S, A, 0.1, norm="data")
    from distlearn.learners.kernel import kernel_matrix

    Kss = kernel_matrix(kern, S, S)
    F = Kss @ A
    res = np.linalg.norm(Kss[:, single.keep] @ single.coef - F) / np.linalg.norm(F)
    assert res == pytest.approx(single.residual, rel=1e-9) and res <= 0.1
    assert len(single.keep) < 200 and abs(len(single.keep) - len(exact.keep)) <= 0.02 * len(exact.keep) + 1


@given(m=st.integers(1, 40), d=st.integers(1, 4), K=st.integers(1, 3), seed=st.integers(0, 10_000),
       tol=st.floats(0.0, 0.95), kernel=st.sampled_from(["rbf", "poly", "linear"]), norm=st.sampled_from(["data", "rkhs"]),
       dup=st.booleans())
@settings(max_examples=60, deadline=None)
def test_law_never_more_patterns_and_the_residual_bound_holds(m, d, K, seed, tol, kernel, norm, dup):
    """For any expansion (duplicated patterns included, and rank-deficient linear/poly Gram matrices), the
    compressed one keeps an ascending subset of the patterns, its residual is within the tolerance (up to the
    ridge's rounding) and is the residual of its coefficients, recomputed."""
    S, A = _expansion(m, d, K, seed)
    if dup and m > 2:
        S[m // 2:] = S[: m - m // 2]  # every pattern twice
    kern = make_kernel(kernel, gamma=0.5, degree=2, coef0=1.0)
    c = compress_expansion(kern, S, A, tol, norm=norm)
    assert len(c.keep) <= m and c.coef.shape == (len(c.keep), K)
    assert np.all(np.diff(c.keep) > 0) and (len(c.keep) == 0 or (c.keep[0] >= 0 and c.keep[-1] < m))
    assert c.residual <= tol + 1e-6
    if tol == 0:
        assert len(c.keep) == m and np.array_equal(c.coef, A)
    from distlearn.learners.kernel import kernel_matrix

    Kss = kernel_matrix(kern, S, S)
    F = Kss @ A
    D = Kss[:, c.keep] @ c.coef - F  # f_M - f on the patterns
    if norm == "data":
        scale = np.linalg.norm(F)
        if scale > 1e-6:
            assert np.linalg.norm(D) / scale == pytest.approx(c.residual, abs=1e-5)
    else:
        B = np.zeros_like(A)
        B[c.keep] = c.coef
        r2 = np.sum((B - A) * (Kss @ (B - A)))
        nf2 = np.sum(A * F)
        if nf2 > 1e-6:
            assert np.sqrt(max(0.0, r2) / nf2) == pytest.approx(c.residual, abs=1e-5)


@given(m=st.integers(2, 60), d=st.integers(1, 4), K=st.integers(1, 3), seed=st.integers(0, 10_000),
       tol=st.floats(0.01, 0.95), kernel=st.sampled_from(["rbf", "poly"]), dup=st.booleans())
@settings(max_examples=40, deadline=None)
def test_law_float32_schur_rows_keep_the_bound(m, d, K, seed, tol, kernel, dup):
    """With the float32 path forced (COMPRESS_SINGLE_FROM = 1: the rows of K K and the factor's product in
    float32), the residual of the returned coefficients, recomputed in float64 with numpy, is within the
    tolerance and equals the one reported, and the kept patterns are an ascending subset."""
    S, A = _expansion(m, d, K, seed)
    if dup and m > 2:
        S[m // 2:] = S[: m - m // 2]
    kern = make_kernel(kernel, gamma=0.5, degree=2, coef0=1.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CK, "COMPRESS_SINGLE_FROM", 1)
        c = compress_expansion(kern, S, A, tol, norm="data")
    assert len(c.keep) <= m and np.all(np.diff(c.keep) > 0)
    from distlearn.learners.kernel import kernel_matrix

    Kss = kernel_matrix(kern, S, S)
    F = Kss @ A
    scale = np.linalg.norm(F)
    if scale > 1e-6:
        res = np.linalg.norm(Kss[:, c.keep] @ c.coef - F) / scale
        assert res == pytest.approx(c.residual, abs=1e-5) and res <= tol + 1e-6


# --------------------------------------------------------------------------- compression in parts

def _parts_oracle(S, A, tol, part, gamma):
    """compress_in_parts written out: consecutive parts (a remainder under part // 2 joins the one before),
    each compressed on its own patterns by compress_expansion, the whole's residual by numpy's explicit RBF,
    the parts' tolerance lowered by the excess until the whole is within tol (at most COMPRESS_PART_ROUNDS)."""
    m = len(S)
    starts = list(range(0, m, part))
    if m - starts[-1] < part // 2 and len(starts) > 1:
        starts.pop()
    bounds = starts + [m]
    kern = make_kernel("rbf", gamma=gamma)
    F = _rbf(S, S, gamma) @ A
    tol_g = tol
    for _ in range(CK.COMPRESS_PART_ROUNDS):
        cs = [(lo, compress_expansion(kern, S[lo:hi], A[lo:hi], tol_g, norm="data")) for lo, hi in zip(bounds, bounds[1:])]
        M = np.concatenate([c.keep + lo for lo, c in cs])
        B = np.concatenate([c.coef for _, c in cs])
        res = np.linalg.norm(_rbf(S, S[M], gamma) @ B - F) / np.linalg.norm(F)
        if res <= tol:
            return M, B, res
        tol_g *= min(CK.COMPRESS_PART_LOWER, tol / res)
    return np.arange(m), A, 0.0


@pytest.mark.parametrize("m,part,K,gamma,tol", [(300, 64, 3, 0.5, 0.2), (250, 100, 1, 0.2, 0.5), (200, 50, 2, 0.3, 0.3)])
def test_parts_equal_the_written_out_rule(m, part, K, gamma, tol):
    """compress_in_parts keeps exactly the patterns of the rule written out by hand (compress_expansion per
    part, numpy for the whole's residual), with the same coefficients and residual, which is within tol."""
    S, A = _expansion(m, 3, K, seed=m + part)
    c = compress_in_parts(make_kernel("rbf", gamma=gamma), S, A, tol, part=part)
    M, B, res = _parts_oracle(S, A, tol, part, gamma)
    np.testing.assert_array_equal(c.keep, M)
    np.testing.assert_allclose(c.coef, B, rtol=1e-9, atol=1e-12)
    assert c.residual == pytest.approx(res, rel=1e-6) and c.residual <= tol
    assert len(c.keep) < m


def test_parts_of_one_part_are_the_whole_selection():
    S, A = _expansion(120, 3, 2, seed=5)
    kern = make_kernel("rbf", gamma=0.5)
    for part in (120, 200, 90):  # 90: the 30-pattern remainder joins the first part
        c, w = compress_in_parts(kern, S, A, 0.2, part=part), compress_expansion(kern, S, A, 0.2, norm="data")
        assert np.array_equal(c.keep, w.keep) and np.array_equal(c.coef, w.coef)
    with pytest.raises(ValueError, match="part=0"):
        compress_in_parts(kern, S, A, 0.2, part=0)


@given(m=st.integers(2, 120), part=st.integers(1, 60), K=st.integers(1, 3), seed=st.integers(0, 10_000),
       tol=st.floats(0.0, 0.95), gamma=st.sampled_from([0.1, 0.5, 2.0]), dup=st.booleans())
@settings(max_examples=40, deadline=None)
def test_law_parts_keep_the_bound_on_the_whole(m, part, K, seed, tol, gamma, dup):
    """For any expansion and part size, the parts' union is an ascending subset of the patterns and the
    whole's residual, recomputed with numpy, is within the tolerance and the one reported."""
    S, A = _expansion(m, 2, K, seed)
    if dup and m > 2:
        S[m // 2:] = S[: m - m // 2]
    c = compress_in_parts(make_kernel("rbf", gamma=gamma), S, A, tol, part=part)
    assert len(c.keep) <= m and np.all(np.diff(c.keep) > 0) and c.coef.shape == (len(c.keep), K)
    F = _rbf(S, S, gamma) @ A
    if np.linalg.norm(F) > 1e-6:
        res = np.linalg.norm(_rbf(S, S[c.keep], gamma) @ c.coef - F) / np.linalg.norm(F)
        assert res <= tol + 1e-6 and res == pytest.approx(c.residual, abs=1e-6)


# --------------------------------------------------------------------------- the estimators' compress

def _data(n=300, d=4, k=3, seed=0):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, d))
    y = np.argmax(X[:, :k] + 0.4 * rs.normal(size=(n, k)), axis=1) if k > 2 else \
        (X[:, 0] + 0.5 * X[:, 1] + 0.4 * rs.normal(size=n) > 0).astype(np.int64)
    return X, y


@pytest.mark.parametrize("cls,k,conv", [(distlearn.KernelMIRA, 3, "last"), (distlearn.KernelPerceptron, 2, "last"),
                                        (distlearn.KernelPA, 3, "average")])
def test_compressed_estimator_is_a_subset_that_predict_uses(cls, k, conv):
    """compress="auto" with budget="variable": the support is a subset of the uncompressed fit's patterns, the
    coefficients the least-squares refit of its scores on them (residual within COMPRESS_AUTO; two classes:
    COMPRESS_AUTO_BINARY), and
    decision_function is exactly dual_coef_ @ k(support_vectors_, x) (numpy's explicit RBF)."""
    X, y = _data(k=k)
    kw = dict(gamma=0.5, budget="variable", epochs=2, conversion=conv, random_state=0)
    full = cls(compress=0, **kw).fit(X, y)
    comp = cls(**kw).fit(X, y)
    S, Sm = full.support_vectors_, comp.support_vectors_
    rows = {r.tobytes(): i for i, r in enumerate(S)}
    keep = np.array([rows[r.tobytes()] for r in Sm])
    assert np.all(np.diff(keep) > 0) and len(keep) < len(S)
    assert comp.n_support_.sum() == len(Sm) == comp.dual_coef_.shape[1]
    np.testing.assert_array_equal(comp.n_support_, np.bincount(full._support_lab[keep], minlength=len(comp.classes_)))
    info = comp.conversion_info_
    EK = distlearn.estimators.kernel
    assert info["compressed_from"] == len(S)
    binary = EK.COMPRESS_AUTO_BINARY if cls is distlearn.KernelMIRA else EK.COMPRESS_AUTO
    assert info["compress_residual"] <= (binary if k == 2 else EK.COMPRESS_AUTO)
    F = _rbf(S, S, 0.5) @ full.dual_coef_.T
    Fm = _rbf(S, Sm, 0.5) @ comp.dual_coef_.T
    assert np.linalg.norm(Fm - F) / np.linalg.norm(F) == pytest.approx(info["compress_residual"], rel=1e-6)
    want = _rbf(X[:50], Sm, 0.5) @ comp.dual_coef_.T
    np.testing.assert_allclose(comp.decision_function(X[:50]).reshape(50, -1), want, rtol=1e-9, atol=1e-12)
    assert comp.score(X, y) >= full.score(X, y) - 0.05


def test_compress_auto_is_off_without_a_variable_budget_and_explicit_tolerances_apply_everywhere():
    X, y = _data()
    a = distlearn.KernelMIRA(gamma=0.5, budget=40, random_state=0).fit(X, y)
    b = distlearn.KernelMIRA(gamma=0.5, budget=40, random_state=0, compress=0.0).fit(X, y)
    assert np.array_equal(a.support_vectors_, b.support_vectors_) and "compressed_from" not in a.conversion_info_
    c = distlearn.KernelMIRA(gamma=0.5, random_state=0, compress=0.3).fit(X, y)  # budget=None: every update kept
    assert c.conversion_info_["compressed_from"] > c.n_support_.sum()
    assert c.conversion_info_["compress_residual"] <= 0.3


@pytest.mark.parametrize("k", [2, 3])
def test_compress_auto_tolerance_is_binary_or_multiclass(k, monkeypatch):
    """KernelMIRA's compress="auto" with budget="variable" is compress=COMPRESS_AUTO_BINARY (0.4) for two
    classes and compress=COMPRESS_AUTO (0.2) for more (the perceptron's and PA's: 0.2 for both): without its
    agreement guard (tested apart), the same bits as the explicit value, and not the other one's."""
    import distlearn.estimators.kernel as EK

    monkeypatch.setattr(EK, "COMPRESS_AUTO_AGREE", 0.0)

    X, y = _data(k=k)
    kw = dict(gamma=0.5, budget="variable", random_state=0)
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    want, other = (EK.COMPRESS_AUTO_BINARY, EK.COMPRESS_AUTO) if k == 2 else (EK.COMPRESS_AUTO, EK.COMPRESS_AUTO_BINARY)
    same = distlearn.KernelMIRA(compress=want, **kw).fit(X, y)
    diff = distlearn.KernelMIRA(compress=other, **kw).fit(X, y)
    assert np.array_equal(auto.support_vectors_, same.support_vectors_)
    assert np.array_equal(auto.dual_coef_, same.dual_coef_)
    assert auto.conversion_info_["compress_residual"] <= want
    assert len(auto.support_vectors_) != len(diff.support_vectors_)
    if k == 2:  # the coarser tolerance keeps fewer patterns
        assert len(auto.support_vectors_) < len(diff.support_vectors_)
        # the perceptron and PA keep COMPRESS_AUTO for two classes too (their coefficients compress less)
        for cls in (distlearn.KernelPerceptron, distlearn.KernelPA):
            p_auto = cls(**kw).fit(X, y)
            p_02 = cls(compress=EK.COMPRESS_AUTO, **kw).fit(X, y)
            assert np.array_equal(p_auto.dual_coef_, p_02.dual_coef_)
            assert p_auto.conversion_info_["compressed_from"] > len(p_auto.support_vectors_)


def test_compress_auto_compresses_a_cache_over_its_size_cap_in_parts(monkeypatch):
    """compress="auto" compresses an expansion of more than COMPRESS_AUTO_MAX patterns in parts
    (compress_in_parts, and says so); an explicit tolerance compresses it whole."""
    import distlearn.estimators.kernel as EK

    X, y = _data()
    kw = dict(gamma=0.5, budget="variable", random_state=0)
    full = distlearn.KernelMIRA(compress=0, **kw).fit(X, y)
    S, A = full.support_vectors_, full.dual_coef_.T
    monkeypatch.setattr(EK, "COMPRESS_AUTO_MAX", len(S) - 1)
    monkeypatch.setattr(CK, "COMPRESS_PART", len(S) // 3)
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    want = compress_in_parts(full._kernel_obj, S, A, EK.COMPRESS_AUTO, agree=EK.COMPRESS_AUTO_AGREE)
    assert np.array_equal(auto.support_vectors_, S[want.keep]) and np.array_equal(auto.dual_coef_, want.coef.T)
    assert auto.conversion_info_["compress_in_parts"] and auto.conversion_info_["compress_residual"] <= EK.COMPRESS_AUTO
    explicit = distlearn.KernelMIRA(compress=EK.COMPRESS_AUTO, **kw).fit(X, y)
    whole = compress_expansion(full._kernel_obj, S, A, EK.COMPRESS_AUTO, norm="data")
    assert np.array_equal(explicit.support_vectors_, S[whole.keep])
    assert "compress_in_parts" not in explicit.conversion_info_


def test_compression_is_reproducible_across_chunking(tmp_path):
    """The same fit from an array, from a store read in blocks of 64 rows and by partial_fit in pieces gives
    bit-identical compressed models."""
    X, y = _data(n=300, seed=4)
    path = tmp_path / "s.zarr"
    create_dataset(path, X, y, block_rows=64, dtype="float64")
    kw = dict(budget="variable", gamma=0.5, epochs=1, shuffle=False, random_state=0)
    a = distlearn.KernelMIRA(**kw).fit(X, y)
    b = distlearn.KernelMIRA(**kw).fit(str(path))
    c = distlearn.KernelMIRA(**kw)
    for part in np.array_split(np.arange(len(y)), 5):
        c.partial_fit(X[part], y[part], classes=np.unique(y))
    assert a.conversion_info_["compressed_from"] > a.n_support_.sum()
    for other in (b, c):
        assert np.array_equal(a.support_vectors_, other.support_vectors_)
        assert np.array_equal(a.dual_coef_, other.dual_coef_)
        assert np.array_equal(a.n_support_, other.n_support_)


@pytest.mark.parametrize("value", [1.0, -0.1, "yes", float("nan"), True])
def test_compress_is_validated_in_one_line_naming_it(value):
    X, y = _data(n=40)
    with pytest.raises(ValueError, match=r"^compress must be a real number in \[0, 1\) or 'auto', got ") as e:
        distlearn.KernelMIRA(budget="variable", compress=value).fit(X, y)
    assert "\n" not in str(e.value)


# -- ridge_refit: kernel ridge restricted to the span of the patterns -----------------------------------------------


def _ridge_data(n=120, k=3, seed=0):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, 4))
    y = (np.floor((np.arctan2(X[:, 1], X[:, 0]) + np.pi) / (2 * np.pi) * k) % k).astype(np.int64)
    return X, y


@pytest.mark.parametrize("k", [2, 3])
def test_ridge_refit_over_every_training_row_is_scikit_learn_kernel_ridge(k):
    """With the patterns S = all n training rows, (K K + alpha n K) A = K T is kernel ridge regression
    (K + alpha n I) A = T: scikit-learn's KernelRidge(alpha * n) on the same +-1 targets, the same scores."""
    from sklearn.kernel_ridge import KernelRidge

    from distlearn.conversions.kernel import ridge_refit, ridge_sums, ridge_targets

    X, y = _ridge_data(k=k, seed=k)
    kern = make_kernel("rbf", gamma=0.4)
    out = 1 if k == 2 else k
    alpha = 1e-2
    G, R = ridge_sums(kern, X, X, y, out)
    A = ridge_refit(kern, X, G, R, len(X), alpha)
    T = ridge_targets(y, out)
    assert T.shape == (len(X), out) and set(np.unique(T)) == {-1.0, 1.0}
    peer = KernelRidge(alpha=alpha * len(X), kernel="rbf", gamma=0.4).fit(X, T)
    Xt, _ = _ridge_data(n=50, k=k, seed=10 + k)
    np.testing.assert_allclose(kernel_decision(kern, X, A, Xt), peer.predict(Xt).reshape(50, out), rtol=1e-5, atol=1e-6)


def test_ridge_sums_add_up_over_row_blocks_and_the_refit_fits_the_training_rows_better_than_a_random_expansion():
    from distlearn.conversions.kernel import ridge_refit, ridge_sums

    X, y = _ridge_data(n=200, k=3, seed=5)
    kern = make_kernel("rbf", gamma=0.5)
    S = X[::10]
    G, R = ridge_sums(kern, S, X, y, 3)
    parts = [ridge_sums(kern, S, X[a:b], y[a:b], 3) for a, b in ((0, 70), (70, 200))]
    np.testing.assert_allclose(parts[0][0] + parts[1][0], G, rtol=1e-12)
    np.testing.assert_allclose(parts[0][1] + parts[1][1], R, rtol=1e-12)
    # an independent solve of the normal equations (G + alpha n K_SS) A = R
    alpha = 1e-3
    K, Kss = _rbf(X, S, 0.5), _rbf(S, S, 0.5)
    T = -np.ones((200, 3))
    T[np.arange(200), y] = 1.0
    want = np.linalg.solve(K.T @ K + alpha * 200 * Kss, K.T @ T)
    A = ridge_refit(kern, S, G, R, 200, alpha)
    np.testing.assert_allclose(K @ A, K @ want, rtol=1e-6, atol=1e-6)
    assert np.mean(np.argmax(K @ A, axis=1) == y) > 0.9


def test_one_blas_thread_holds_until_the_last_of_overlapping_threads_leaves():
    """The BLAS limit is process-wide: a thread that leaves its context first must not give the BLAS its
    threads back while another thread is still in its context (the refit's sums run as threads in process),
    and the last one to leave restores the limit found (a context per thread each restoring what it saw did
    both wrong: 2 threads inside, 1 left behind).  In a fresh interpreter: OpenBLAS was seen to ignore a
    limit set from a second thread once the main thread had set one (earlier tests do)."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import threading
        from threadpoolctl import threadpool_info
        from distlearn.conversions.kernel import _one_blas_thread

        def blas_threads():
            return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})

        print(blas_threads())
        inside, leave = threading.Event(), threading.Event()

        def other():
            with _one_blas_thread():
                inside.set()
                leave.wait(30)

        t = threading.Thread(target=other)
        t.start()
        assert inside.wait(30)
        with _one_blas_thread():
            leave.set()
            t.join(30)  # the other thread has left its context; this one is still in
            print(t.is_alive(), blas_threads())
        print(blas_threads())
    """)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    before, inside, after = out.stdout.splitlines()
    if before in ("[]", "[1]"):
        pytest.skip(f"BLAS threads {before}: nothing to limit")
    assert inside == "False [1]" and after == before


def test_parts_with_the_learners_scores_equal_the_parts_without():
    """compress_in_parts given f(S) (the engine's kept scores) keeps the same patterns with the same coefficients,
    and its residual is the one recomputed from them."""
    S, A = _expansion(300, 3, 3, seed=21)
    kern = make_kernel("rbf", gamma=0.5)
    F = _rbf(S, S, 0.5) @ A
    a = compress_in_parts(kern, S, A, 0.2, part=64)
    b = compress_in_parts(kern, S, A, 0.2, part=64, scores=F)
    assert len(a.keep) < 300 and np.array_equal(a.keep, b.keep) and np.array_equal(a.coef, b.coef)
    assert b.residual == pytest.approx(np.linalg.norm(_rbf(S, S[b.keep], 0.5) @ b.coef - F) / np.linalg.norm(F),
                                       rel=1e-9)


def test_estimator_passes_the_kept_scores_to_the_parts(monkeypatch):
    """A variable budget keeps f(S): the compression in parts gets it (and it is f(S), to rounding)."""
    import distlearn.estimators.kernel as EK

    seen = {}

    def spy(kernel, S, A, tol, part=None, scores=None, agree=0.0):
        seen["scores"], seen["exact"], seen["agree"] = scores, kernel_decision(kernel, S, A, S), agree
        return compress_in_parts(kernel, S, A, tol, part=part, scores=scores, agree=agree)

    X, y = _data()
    monkeypatch.setattr(EK, "COMPRESS_AUTO_MAX", 10)
    monkeypatch.setattr(EK, "compress_in_parts", spy)
    distlearn.KernelMIRA(gamma=0.5, budget="variable", epochs=2, conversion="last", random_state=0).fit(X, y)
    assert seen["scores"] is not None and seen["scores"].shape == seen["exact"].shape
    assert seen["agree"] == EK.COMPRESS_AUTO_AGREE
    np.testing.assert_allclose(seen["scores"], seen["exact"], rtol=1e-9, atol=1e-9 * np.abs(seen["exact"]).max())


def test_agreement_counts_the_rows_predicted_alike():
    """agreement(F, FM): the share of rows whose predicted label (sign of one column, argmax of several, the
    first largest on ties, as predict) is the same under both score matrices."""
    from distlearn.conversions.kernel import agreement

    assert agreement(np.array([[1.0], [-1.0], [0.5], [-2.0]]), np.array([[2.0], [1.0], [0.1], [-0.1]])) == 0.75
    assert agreement(np.array([[1.0], [0.0]]), np.array([[0.0], [-1.0]])) == 0.5  # 0 predicts the negative class
    F = np.array([[1.0, 2.0, 0.0], [3.0, 1.0, 3.0], [0.0, 0.0, 1.0]])
    FM = np.array([[0.0, 1.0, 0.5], [2.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert agreement(F, FM) == pytest.approx(2 / 3)  # row 1 ties 0 and 2: the first, 0, both times
    assert agreement(np.zeros((0, 3)), np.zeros((0, 3))) == 1.0


def _moons(n=600, seed=1):
    from sklearn.datasets import make_moons
    from sklearn.preprocessing import minmax_scale

    X, y = make_moons(n, noise=0.25, random_state=seed)
    return minmax_scale(X), y


def test_the_agreement_guard_keeps_the_predictions_on_the_patterns():
    """compress_expansion(agree=a): the residual stays within the tolerance AND the compressed expansion predicts
    at least a of the patterns as the fitted one (halving the tolerance as needed, the selection going on from
    the patterns chosen).  On a noisy two-class problem the residual alone moved the boundary across more than
    1 % of the patterns: the guard is exercised, and keeps more patterns."""
    from distlearn.conversions.kernel import agreement

    X, y = _moons()
    full = distlearn.KernelMIRA(budget="variable", gamma=8.0, compress=0, random_state=0).fit(X, y)
    S, A, kern = full.support_vectors_, full.dual_coef_.T, full._kernel_obj
    F = kernel_decision(kern, S, A, S)
    plain = compress_expansion(kern, S, A, 0.4, norm="data")
    assert agreement(F, kernel_decision(kern, S[plain.keep], plain.coef, S)) < 0.99  # the guard has work
    for a in (0.99, 1.0):
        g = compress_expansion(kern, S, A, 0.4, norm="data", agree=a)
        FM = kernel_decision(kern, S[g.keep], g.coef, S)
        assert agreement(F, FM) >= a and g.residual <= 0.4
        assert len(plain.keep) < len(g.keep) <= len(S)
        assert g.residual == pytest.approx(np.linalg.norm(FM - F) / np.linalg.norm(F), rel=1e-6)
    # agree=0 is the plain compression, bit for bit; and so is a guard the plain result already meets
    z = compress_expansion(kern, S, A, 0.4, norm="data", agree=0.0)
    assert np.array_equal(z.keep, plain.keep) and np.array_equal(z.coef, plain.coef)
    met = agreement(F, kernel_decision(kern, S[plain.keep], plain.coef, S))
    m = compress_expansion(kern, S, A, 0.4, norm="data", agree=met)
    assert np.array_equal(m.keep, plain.keep) and np.array_equal(m.coef, plain.coef)


def test_the_agreement_guard_in_parts_is_checked_on_the_whole():
    """compress_in_parts(agree=a): the whole expansion's compressed predictions agree on at least a of the
    patterns (the parts' tolerance halved until they do), the residual of the whole within the tolerance."""
    from distlearn.conversions.kernel import agreement

    X, y = _moons(900, seed=2)
    full = distlearn.KernelMIRA(budget="variable", gamma=8.0, compress=0, random_state=0).fit(X, y)
    S, A, kern = full.support_vectors_, full.dual_coef_.T, full._kernel_obj
    F = kernel_decision(kern, S, A, S)
    part = max(8, len(S) // 3)
    plain = compress_in_parts(kern, S, A, 0.4, part=part)
    g = compress_in_parts(kern, S, A, 0.4, part=part, agree=0.99)
    assert agreement(F, kernel_decision(kern, S[plain.keep], plain.coef, S)) < 0.99
    assert agreement(F, kernel_decision(kern, S[g.keep], g.coef, S)) >= 0.99 and g.residual <= 0.4
    assert len(g.keep) > len(plain.keep)


def test_compress_auto_guards_its_predictions_explicit_values_do_not(monkeypatch):
    """compress="auto" is the tolerance with the guard COMPRESS_AUTO_AGREE (the bits of compress_expansion with
    agree=); an explicit tolerance is the residual alone, as documented."""
    import distlearn.estimators.kernel as EK
    from distlearn.conversions.kernel import agreement

    X, y = _moons()
    kw = dict(budget="variable", gamma=8.0, random_state=0)
    full = distlearn.KernelMIRA(compress=0, **kw).fit(X, y)
    S, A, kern = full.support_vectors_, full.dual_coef_.T, full._kernel_obj
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    want = compress_expansion(kern, S, A, EK.COMPRESS_AUTO_BINARY, norm="data", agree=EK.COMPRESS_AUTO_AGREE)
    assert np.array_equal(auto.support_vectors_, S[want.keep]) and np.array_equal(auto.dual_coef_, want.coef.T)
    F = kernel_decision(kern, S, A, S)
    assert agreement(F, auto.decision_function(S).reshape(len(S), -1)) >= EK.COMPRESS_AUTO_AGREE
    explicit = distlearn.KernelMIRA(compress=EK.COMPRESS_AUTO_BINARY, **kw).fit(X, y)
    assert len(explicit.support_vectors_) < len(auto.support_vectors_)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.sampled_from([1, 3]), tol=st.floats(0.05, 0.6), agree=st.floats(0.5, 1.0))
def test_the_guard_is_a_law(seed, k, tol, agree):
    """Whatever the expansion, tolerance and guard: the result meets both (residual <= tol, agreement >= agree)
    or keeps every pattern with its coefficients."""
    from distlearn.conversions.kernel import agreement

    rs = np.random.default_rng(seed)
    S = rs.random((60, 3))
    A = rs.standard_normal((60, k))
    kern = make_kernel("rbf", gamma=4.0)
    g = compress_expansion(kern, S, A, tol, norm="data", agree=agree)
    F = kernel_decision(kern, S, A, S)
    if len(g.keep) == len(S) and np.array_equal(g.coef, A):
        return
    assert g.residual <= tol + 1e-12
    assert agreement(F, kernel_decision(kern, S[g.keep], g.coef, S)) >= agree


@pytest.mark.parametrize("failure", ["singular", "rounding"])
def test_a_factor_lost_to_rounding_falls_back_to_the_orthogonal_selection(monkeypatch, failure):
    """When the factor of K K fails to rounding (a singular triangle: ``LinAlgError``; a residual the coefficients
    do not reach: ``_Rounding``), the selection runs again on the kernel columns orthogonalized one at a time: the
    bound and the guard hold (or every pattern is kept), whole and in parts, and the fit never raises."""
    from distlearn.conversions.kernel import agreement

    rs = np.random.default_rng(0)
    S, A = rs.normal(size=(40, 3)), rs.normal(size=(40, 2))
    kern = make_kernel("rbf", gamma=0.5)

    def lost(*args, **kwargs):
        raise np.linalg.LinAlgError("singular matrix") if failure == "singular" else CK._Rounding("no candidate left")

    calls = []
    real = CK._orthogonal_selection
    monkeypatch.setattr(CK, "_greedy_selection", lost)
    monkeypatch.setattr(CK, "_orthogonal_selection", lambda *a, **k: calls.append(a[1].shape[0]) or real(*a, **k))
    whole = compress_expansion(kern, S, A, 0.2, norm="data", agree=0.99)
    parts = compress_in_parts(kern, S, A, 0.2, part=16, agree=0.99)
    assert calls[0] == 40 and set(calls[1:]) == {16, 8}  # the whole, then the parts 16, 16, 8 (in rounds)
    F = kernel_decision(kern, S, A, S)
    assert 0 < len(whole.keep) < 40 and whole.residual <= 0.2
    assert np.linalg.norm(F - kernel_decision(kern, S[whole.keep], whole.coef, S)) <= 0.2 * np.linalg.norm(F) + 1e-12
    assert agreement(F, kernel_decision(kern, S[whole.keep], whole.coef, S)) >= 0.99
    # the parts' refits miss the whole's guard on these 40 random patterns: every pattern kept, never a raise
    assert np.array_equal(parts.keep, np.arange(40)) and np.array_equal(parts.coef, A)
    # the rkhs norm has no such fallback: it keeps the expansion
    r = compress_expansion(kern, S, A, 0.2, norm="rkhs")
    assert np.array_equal(r.keep, np.arange(40)) and np.array_equal(r.coef, A) and r.residual == 0.0


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("tol", [0.1, 0.35])
def test_the_orthogonal_selection_is_the_brute_force_greedy(monkeypatch, K, tol):
    """The fallback chooses, one pattern at a time, exactly the patterns that trying every addition by brute force
    chooses (blocks of one: COMPRESS_BLOCK = 1), and its coefficients are that set's least squares."""
    monkeypatch.setattr(CK, "COMPRESS_BLOCK", 1)
    S, A = _expansion(18, 3, K, seed=K + int(100 * tol))
    gamma = 0.4
    Kss = _rbf(S, S, gamma)
    got = CK._orthogonal_selection(make_kernel("rbf", gamma=gamma), S, A, tol, 0.0)
    want = _brute_greedy(Kss, A, tol, "data")
    assert 1 <= len(want) < len(S)
    np.testing.assert_array_equal(got.keep, want)
    res, coef = _brute_residual(Kss, A, list(want), "data")
    np.testing.assert_allclose(Kss[:, want] @ got.coef, Kss[:, want] @ coef, rtol=1e-6, atol=1e-9)
    assert got.residual == pytest.approx(res, rel=1e-6, abs=1e-9) and got.residual <= tol


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.sampled_from([1, 3]), tol=st.floats(0.02, 0.6), agree=st.floats(0.0, 1.0),
       gamma=st.sampled_from([0.01, 0.1, 4.0]))
def test_law_the_orthogonal_selection_meets_the_bound_and_the_guard(seed, k, tol, agree, gamma):
    """Whatever the expansion (wide widths included, where K is numerically singular), the fallback meets the
    residual bound and the guard on its own patterns, or keeps every pattern with its coefficients."""
    from distlearn.conversions.kernel import agreement

    rs = np.random.default_rng(seed)
    S, A = rs.random((70, 4)), rs.standard_normal((70, k))
    kern = make_kernel("rbf", gamma=gamma)
    g = CK._orthogonal_selection(kern, S, A, tol, agree)
    if len(g.keep) == len(S) and np.array_equal(g.coef, A):
        return
    F = kernel_decision(kern, S, A, S)
    FM = kernel_decision(kern, S[g.keep], g.coef, S)
    assert len(np.unique(g.keep)) == len(g.keep) < len(S)
    assert np.linalg.norm(F - FM) <= (tol + 1e-9) * np.linalg.norm(F) and g.residual <= tol + 1e-12
    assert agreement(F, FM) >= agree


def test_a_wide_kernel_the_factor_loses_compresses_through_the_fallback():
    """The measured case: KernelMIRA at a quarter of the race's winner, 20 passes, on the Gaussian quantiles
    (1,062 patterns).  The factor of K K loses the residual to rounding once the guard has lowered the tolerance
    (it kept every pattern before); the fallback keeps a few dozen within the bound and the guard."""
    from sklearn.datasets import make_gaussian_quantiles
    from sklearn.model_selection import train_test_split

    from distlearn.conversions.kernel import COMPRESS_AGREE_LOWER, agreement

    X, y = make_gaussian_quantiles(n_samples=3000, n_features=5, n_classes=3, random_state=1)
    Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    Xtr = (Xtr - Xtr.min(0)) / (Xtr.max(0) - Xtr.min(0))
    m = distlearn.KernelMIRA(budget="variable", gamma=2.3879773199906823, epochs=20, compress=0,
                             random_state=0).fit(Xtr, ytr)
    S, A, kern = m.support_vectors_, m.dual_coef_.T, m._kernel_obj
    assert S.shape[0] > 1000
    tol = 0.2 * COMPRESS_AGREE_LOWER ** 2  # where the guard's lowering took it
    with pytest.raises(CK._Rounding):
        CK._greedy_selection(kern, S, A, tol, "data", 0.0)
    c = compress_expansion(kern, S, A, 0.2, norm="data", agree=0.99)
    F = kernel_decision(kern, S, A, S)
    FM = kernel_decision(kern, S[c.keep], c.coef, S)
    assert len(c.keep) < 100 and c.residual <= 0.2 and agreement(F, FM) >= 0.99


def test_a_wide_kernel_on_the_gaussian_quantiles_fits_with_compress_auto():
    """The case that raised: KernelMIRA at a quarter of its race's width on the Gaussian quantiles (seeded
    stratified 70/30 split, min-max scaled) made the compression's factor singular in float32 (a zero pivot after
    the agreement guard lowered the tolerance) and the fit raised ``LinAlgError``.  Now it fits, and its model
    predicts as the uncompressed one where the expansion was kept, or meets the guard where it was compressed."""
    from sklearn.datasets import make_gaussian_quantiles
    from sklearn.model_selection import train_test_split

    X, y = make_gaussian_quantiles(n_samples=3000, n_features=5, n_classes=3, random_state=1)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=2, stratify=y)
    lo, hi = Xtr.min(0), Xtr.max(0)
    Xtr, Xte = (Xtr - lo) / (hi - lo), (Xte - lo) / (hi - lo)
    kw = dict(budget="variable", gamma=4.775954639981364, random_state=0)
    a = distlearn.KernelMIRA(compress="auto", **kw).fit(Xtr, ytr)
    b = distlearn.KernelMIRA(compress=0, **kw).fit(Xtr, ytr)
    info = a.conversion_info_
    assert info["compressed_from"] == b.support_vectors_.shape[0]
    if info["compress_residual"] == 0.0:  # kept whole
        assert np.array_equal(a.predict(Xte), b.predict(Xte))
    else:
        assert info["compress_residual"] <= 0.2 and a.support_vectors_.shape[0] < b.support_vectors_.shape[0]


# -- the distillation hands its K_ZZ on; a history's repeated rows scored once -------------------------------------


def test_a_given_gram_is_the_computed_one_bit_for_bit():
    """compress_expansion(gram=K_SS) keeps the same patterns and coefficients, bit for bit, as computing K_SS itself
    (the distillation's K_ZZ, return_gram, is that matrix); a gram of the wrong shape is refused."""
    S, A = _expansion(60, 4, 3, 1)
    k = make_kernel("rbf", gamma=0.3)
    B, G = CK.distil_expansion(k, S, A, S[:40], return_gram=True)
    assert np.array_equal(B, CK.distil_expansion(k, S, A, S[:40]))
    assert np.array_equal(G, CK._gram(k, S[:40]))
    for norm in ("data", "rkhs"):
        own = compress_expansion(k, S[:40], B, 0.2, norm=norm, agree=0.9)
        given_ = compress_expansion(k, S[:40], B, 0.2, norm=norm, agree=0.9, gram=G)
        assert len(own.keep) < 40
        assert np.array_equal(own.keep, given_.keep) and np.array_equal(own.coef, given_.coef)
        assert own.residual == given_.residual
    with pytest.raises(ValueError, match="K_SS of 40 patterns"):
        compress_expansion(k, S[:40], B, 0.2, norm="data", gram=G[:39, :39])


@pytest.mark.parametrize("sparse", [False, True])
def test_the_distillation_scores_each_distinct_pattern_once(monkeypatch, sparse):
    """A history that lists rows several times (re-inserted) is scored over its distinct rows, coefficients
    summed: the same projection to rounding, and the scores computed over the distinct rows only."""
    import scipy.sparse as sp

    rs = np.random.default_rng(3)
    U = rs.normal(size=(30, 5)) * (rs.random((30, 5)) < 0.6)
    reps = rs.integers(0, 30, 90)
    S, A = U[reps], rs.normal(size=(90, 2))
    Z = U[:20]
    k = make_kernel("rbf", gamma=0.4)
    seen = []
    real = CK.kernel_decision

    def spy(kernel, P, C, X, *a, **kw):
        seen.append(P.shape[0])
        return real(kernel, P, C, X, *a, **kw)

    # dense rows: the scores over the distinct patterns; CSR: one pass of kernel rows against the distinct patterns
    # of the history and Z together (Z's first 20 rows are U's, so the same set), which also gives K_ZZ
    monkeypatch.setattr(CK, "kernel_decision", spy)
    monkeypatch.setattr(CK, "kernel_matrix", lambda kernel, X, P, *a: (seen.append(P.shape[0]),
                                                                       kernel_matrix(kernel, X, P, *a))[1])
    got = CK.distil_expansion(k, sp.csr_matrix(S) if sparse else S, A, sp.csr_matrix(Z) if sparse else Z)
    assert seen == ([len(np.unique(np.concatenate([reps, np.arange(20)])))] if sparse
                    else [len(np.unique(reps)), 20])
    want = np.linalg.solve(CK._ridged(_rbf(Z, Z, 0.4)), _rbf(Z, S, 0.4) @ A)  # the written-out projection
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_sparse_distillation_reads_k_zz_off_its_scores_pass():
    """On CSR patterns the distillation's K_ZZ comes from the scores' kernel rows (Z's columns among the distinct
    patterns): bit for bit kernel_matrix(Z, Z) made symmetric, so compressing with it is compressing without it;
    the coefficients equal the dense distillation's to rounding, repeated and explicit-zero rows included."""
    import scipy.sparse as sp

    rs = np.random.default_rng(5)
    U = rs.random((40, 300)) * (rs.random((40, 300)) < 0.05)
    U[:, 0] += 0.1  # no empty row
    reps = rs.integers(0, 40, 120)
    S, A, Z = U[reps], rs.normal(size=(120, 3)), U[:25]
    Sc, Zc = sp.csr_matrix(S), sp.csr_matrix(Z)
    C = Zc.tocoo()
    free = np.setdiff1d(np.arange(300), Zc[24].indices)[0]
    Zx = sp.csr_matrix((np.append(C.data, 0.0), (np.append(C.row, 24), np.append(C.col, free))), shape=Zc.shape)
    assert Zx.nnz == Zc.nnz + 1  # an explicit zero stored in the last row
    k = make_kernel("rbf", gamma=0.7)
    for Zs in (Zc, Zx):
        B, G = CK.distil_expansion(k, Sc, A, Zs, return_gram=True)
        assert np.array_equal(G, CK._gram(k, Zs))
        np.testing.assert_allclose(B, CK.distil_expansion(k, S, A, Z), rtol=1e-7, atol=1e-9)
        own = compress_expansion(k, Zs, B, 0.3, norm="data", agree=0.9)
        given_ = compress_expansion(k, Zs, B, 0.3, norm="data", agree=0.9, gram=G)
        assert len(own.keep) < 25
        assert np.array_equal(own.keep, given_.keep) and np.array_equal(own.coef, given_.coef)
