"""Conversions of kernel learners: spans from the cache's history, equal to the linear conversions' choices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distlearn
from distlearn.conversions import Average, Interval, Suffix, Tree, TreeNode, TreeSummary, Vote
from distlearn.conversions.kernel import Spans, history, span_expansion
from distlearn.learners import make_rule
from distlearn.learners.kernel import init_budget_state, kernel_decision, learn_budget_chunk, make_kernel


def _data(n=200, d=5, seed=0, k=2):
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(n, d))
    if k == 2:
        y = (X[:, 0] + 0.5 * X[:, 1] + 0.8 * rs.normal(size=n) > 0).astype(np.int64)
    else:
        y = np.argmax(X[:, :k] + 0.5 * rs.normal(size=(n, k)), axis=1)
    return X, y


@pytest.mark.parametrize("budget", [None, "variable", 9])
def test_span_average_is_the_mean_of_the_hypotheses_in_the_span(budget):
    X, y = _data(n=70, k=3, seed=1)
    Xt, _ = _data(n=30, k=3, seed=2)
    kern = make_kernel("rbf", gamma=0.4)
    state = init_budget_state(X.shape[1], 3, native=True, keep_retired=True)
    rule = make_rule("mira", beta=0.2, native=True)
    snaps = [np.zeros((len(Xt), 3))]  # h_0
    for t in range(len(y)):
        learn_budget_chunk(rule, kern, state, X, y, order=np.array([t]), beta=0.2, budget=budget)
        S, A, _ = state.support()
        snaps.append(kernel_decision(kern, S, A, Xt) if len(S) else np.zeros((len(Xt), 3)))
    h = history(state)
    rs = np.random.default_rng(0)
    for _ in range(10):
        a, b = sorted(rs.integers(0, len(y) + 1, size=2))
        c, d = sorted(rs.integers(0, len(y) + 1, size=2))
        spans = [(a, b)] if (c <= b and d >= a) else [(a, b), (c, d)]
        S, A, _ = span_expansion(h, spans)
        want = sum(snaps[t] for s0, s1 in spans for t in range(s0, s1 + 1)) / sum(s1 - s0 + 1 for s0, s1 in spans)
        got = kernel_decision(kern, S, A, Xt) if len(S) else np.zeros_like(want)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


CONVERSIONS = [Average(), Suffix(C=1.0), Interval(max_updates=15, C=1.0), Tree(C=1.0, leaf_size=1), Vote(),
               Vote(suffix=True, C=1.0), Interval(max_updates=10, C=2.0, loss="hinge")]


@pytest.mark.parametrize("conv", CONVERSIONS, ids=lambda c: repr(c))
def test_linear_kernel_conversions_equal_the_linear_perceptrons(conv):
    """Without a budget, the linear-kernel perceptron is the perceptron round by round,
    so every conversion picks the same hypotheses and predicts the same."""
    X, y = _data(n=300, seed=3)
    Xt, _ = _data(n=100, seed=4)
    lin = distlearn.Perceptron(fit_intercept=False, shuffle=False, epochs=2, conversion=conv).fit(X, y)
    ker = distlearn.KernelPerceptron(kernel="linear", shuffle=False, epochs=2, conversion=conv).fit(X, y)
    np.testing.assert_allclose(ker.decision_function(Xt), lin.decision_function(Xt), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(ker.predict(Xt), lin.predict(Xt))


@pytest.mark.parametrize("B", [8, 20, 40])
def test_interval_of_half_budget_keeps_at_most_the_budget(B):
    """Dekel & Singer sec. 3: max_updates = B/2 on a learner with a cache of B/2 gives at most B patterns."""
    X, y = _data(n=400, k=3, seed=5)
    clf = distlearn.KernelMIRA(budget=B // 2, conversion=Interval(max_updates=B // 2), gamma=0.5,
                               random_state=0, epochs=2).fit(X, y)
    assert clf.n_support_.sum() <= B
    a, b = clf.conversion_info_["spans"][0]
    assert clf.conversion_info_["n_updates_in"] <= B // 2 and 0 <= a <= b


@given(levels=st.integers(0, 4), extra=st.integers(1, 20), seed=st.integers(0, 1000))
@settings(max_examples=30, deadline=None)
def test_tree_of_spans_merges_like_the_tree_over_all_leaves(levels, extra, seed):
    """The kernel tree reuses TreeSummary: merging a left block of 2^L leaves with any right
    block chooses the same spans as one tree over the concatenated leaves."""
    rs = np.random.default_rng(seed)
    n_left = 2 ** levels
    losses = rs.integers(0, 2, size=n_left + extra).astype(float)

    def tree(lo, hi):
        t = TreeSummary(1.0)
        for i in range(lo, hi):
            t.push(TreeNode(0, Spans(((i, i),)), losses[i], 1))
        return t

    whole = tree(0, n_left + extra).chosen()
    merged = tree(0, n_left).merge(tree(n_left, n_left + extra)).chosen()
    assert whole.total.spans == merged.total.spans and whole.count == merged.count


def test_vote_decision_is_the_vote_share():
    X, y = _data(n=150, k=3, seed=6)
    clf = distlearn.KernelPA(conversion="vote", gamma=0.5, random_state=0).fit(X, y)
    shares = clf.decision_function(X[:20])
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert clf.score(X, y) > 0.6


def _poly2_features(X, gamma, coef0):
    """The explicit feature map of (gamma x.x' + coef0)^2: [coef0, sqrt(2 coef0 gamma) x, gamma x (x) x]."""
    quad = np.einsum("ni,nj->nij", X, X).reshape(len(X), -1)
    return np.hstack([np.full((len(X), 1), coef0), np.sqrt(2 * coef0 * gamma) * X, gamma * quad])


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("kernel", ["linear", "poly"])
def test_distilled_average_is_the_feature_space_projection_onto_the_cache(kernel, k):
    """distill=True: the average's expansion projected onto the span of the final cache's patterns, checked
    in an explicit feature space: w_avg = Phi(S_hist)' A_avg projected by least squares onto the rows
    Phi(Z) gives the same scores on fresh rows; the support is the cache's."""
    X, y = _data(n=150, d=3, seed=4, k=k)
    Xt, _ = _data(n=40, d=3, seed=5, k=k)
    kw = dict(kernel=kernel, gamma=0.5, degree=2, coef0=1.0, budget="variable", epochs=3, conversion="average",
              random_state=0, compress=0)  # the distillation alone (compress: test_kernel_compress.py)
    full = distlearn.KernelMIRA(distill=False, beta=0.3, **kw).fit(X, y)
    dist = distlearn.KernelMIRA(beta=0.3, **kw).fit(X, y)
    phi = (lambda M: M) if kernel == "linear" else (lambda M: _poly2_features(M, 0.5, 1.0))
    w_avg = phi(full.support_vectors_).T @ full.dual_coef_.T  # (features, K)
    Z = dist.support_vectors_
    assert len(Z) == dist.cache_size_[-1] == dist.n_support_.sum() < full.n_support_.sum()
    assert dist.conversion_info_["distilled_from"] == full.n_support_.sum()
    coef, *_ = np.linalg.lstsq(phi(Z).T, w_avg, rcond=None)  # brute force: min ||w_avg - Phi(Z)' B||
    want = phi(Xt) @ (phi(Z).T @ coef)
    got = dist.decision_function(Xt).reshape(len(Xt), -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # the same patterns and order as the cache of the "last" conversion
    last = distlearn.KernelMIRA(beta=0.3, **{**kw, "conversion": "last"}).fit(X, y)
    np.testing.assert_array_equal(last.support_vectors_, Z)


def test_distilled_average_rbf_solves_the_gram_system():
    """RBF: B solves K_ZZ B = f_avg(Z) (numpy's dense solve against explicit kernel sums), and the distilled
    hypothesis agrees with the full average on most rows."""
    X, y = _data(n=200, d=4, seed=6, k=3)
    kw = dict(gamma=0.3, budget="variable", epochs=2, conversion="average", random_state=0, compress=0)
    full = distlearn.KernelPA(distill=False, **kw).fit(X, y)
    dist = distlearn.KernelPA(**kw).fit(X, y)
    S, A, Z = full.support_vectors_, full.dual_coef_.T, dist.support_vectors_
    d2 = ((Z[:, None, :] - S[None, :, :]) ** 2).sum(-1)
    f_z = np.exp(-0.3 * d2) @ A
    G = np.exp(-0.3 * ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(G @ dist.dual_coef_.T, f_z, rtol=1e-4, atol=1e-4 * np.abs(f_z).max())
    assert np.mean(dist.predict(X) == full.predict(X)) >= 0.9
