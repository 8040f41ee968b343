"""Voting, sampling and interval conversions against brute force over every stored hypothesis.

The oracle is ``test_conversions.naive_run``: the learner one row at a time, every
hypothesis h_0..h_m kept with every round's loss and update flag.  The vote and the
sample are Dekel & Singer's (2005) sec. 2 (every index i of the set casts one vote /
is drawn with probability 1/|I|), their suffix variants sec. 3 (J = {a..m-1}, a
minimising beta), and the interval conversion sec. 3 (J = {a..b}, at most
``max_updates`` updates among h_a..h_b, minimising beta).  Conventions as in
``test_conversions``: round t = 1..m uses h_{t-1}; ``loss[i]`` is the loss of h_i on
example i+1; ``updated[i]`` says whether round i+1 changed h_i into h_{i+1}.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn import Perceptron
from distlearn import rng as dl_rng
from distlearn.conversions import (
    EnsembleSummary,
    Interval,
    Sample,
    SampledHypothesis,
    Vote,
    VotedHypothesis,
    best_interval,
)
from distlearn.conversions.ensemble import auto_cap

from .test_conversions import (
    CASE_IDS,
    CASES,
    D,
    EPOCHS,
    KINDS,
    N,
    batch_hypothesis,
    data,
    estimator,
    naive_beta,
    naive_run,
    naive_suffix,
    tol,
)

SEED = 7  # random_state of the shuffled runs
AUTO_BYTES = 256 * 2**20


# -- brute force -------------------------------------------------------------------
def dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def scores(X, H: np.ndarray) -> np.ndarray:
    """Scores of every row under every hypothesis of H (n_h, K, d+1): (n_rows, n_h, K)."""
    return np.einsum("nd,hkd->nhk", dense(X), H[:, :, :-1]) + H[:, :, -1][None, :, :]


def naive_vote(H: np.ndarray, w, X) -> tuple[np.ndarray, np.ndarray]:
    """(decision, predicted class index) of the vote of H[i] with w[i] votes each.

    A hypothesis predicts class index 1 iff its score is >= 0 (binary), else the
    argmax of its scores (first on ties).  Binary decision: 2 * share(1) - 1 (a tie
    predicts index 1); multiclass: every class's share (argmax, first on ties)."""
    w = np.asarray(w, dtype=np.float64)
    S = scores(X, H)
    n, n_h, K = S.shape
    votes = np.zeros((n, max(K, 2)))
    rows = np.arange(n)
    for i in range(n_h):
        pred = (S[:, i, 0] >= 0).astype(int) if K == 1 else np.argmax(S[:, i, :], axis=1)
        votes[rows, pred] += w[i]
    total = w.sum()
    if K == 1:
        return 2.0 * votes[:, 1] / total - 1.0, (votes[:, 1] >= votes[:, 0]).astype(int)
    return votes / total, np.argmax(votes, axis=1)


def distinct(updated: np.ndarray, lo: int = 0, final: bool = True) -> list[tuple[int, int]]:
    """(first index, weight) of every distinct hypothesis of {h_lo..h_{m-1}} (plus h_m if
    ``final``), one unit of weight per index; identity = no update in between."""
    m = len(updated)
    first = [0]  # first[i]: the index where h_i's run of equal hypotheses starts
    for i in range(1, m + 1):
        first.append(i if updated[i - 1] else first[-1])
    idx = list(range(lo, m)) + ([m] if final else [])
    counts = Counter(max(first[i], lo) for i in idx)
    return sorted(counts.items())


def summary_entries(s: EnsembleSummary) -> list[tuple[int, float]]:
    return list(zip(s.starts, s.weights))


def heaviest(runs: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    """The cap heaviest runs (ties: the earlier start), in start order."""
    return sorted(sorted(runs, key=lambda r: (-r[1], r[0]))[:cap])


def naive_intervals(loss: np.ndarray, updated: np.ndarray, U: int, C: float) -> np.ndarray:
    """beta({a..b}) for every interval of {0..m-1} with sum(updated[a:b]) <= U; inf elsewhere.
    The loss sum runs left to right from a (the order of a sequential sum)."""
    m = len(loss)
    B = np.full((m, m), np.inf)
    for a in range(m):
        s = np.cumsum(loss[a:])  # s[j] = loss[a] + ... + loss[a+j], summed in order
        n = np.arange(1, m - a + 1)
        ups = np.concatenate([[0], np.cumsum(updated[a:m - 1], dtype=np.int64)])  # ups[j] = sum(updated[a:a+j])
        B[a, a:] = np.where(ups <= U, s / n + C / np.sqrt(n), np.inf)
    return B


def naive_interval(loss, updated, U, C) -> tuple[int, int, float, np.ndarray]:
    B = naive_intervals(np.asarray(loss, np.float64), np.asarray(updated), U, C)
    a, b = np.unravel_index(int(np.argmin(B)), B.shape)  # row-major: the first in (a, b) order
    return int(a), int(b), float(B[a, b]), B


def fit_both(case: str, conversion, epochs: int, shuffle: bool = False):
    X, y = data(CASES[case][3])
    d = estimator(case, conversion, epochs, shuffle=shuffle, random_state=SEED).fit(X, y)
    c = estimator(case, conversion, epochs, shuffle=shuffle, random_state=SEED).fit(sp.csr_matrix(X), y)
    return d, c


def oracle(case: str, epochs: int, shuffle: bool = False):
    return naive_run(case, epochs, dl_rng.normalize_seed(SEED) if shuffle else None)


def assert_summary_is(s: EnsembleSummary, H: np.ndarray, runs: list[tuple[int, int]]) -> None:
    assert summary_entries(s) == [(a, float(w)) for a, w in runs]
    assert all(np.array_equal(h, H[a]) for h, a in zip(s.H, s.starts))


# -- 1. vote over h_0..h_m ---------------------------------------------------------
@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_vote(case, epochs, shuffle):
    H, _, updated = oracle(case, epochs, shuffle)
    X, _ = data(CASES[case][3])
    want_dec, want_idx = naive_vote(H, np.ones(len(H)), X)  # every index h_0..h_m, one vote each
    for est in fit_both(case, "vote", epochs, shuffle):
        assert not hasattr(est, "coef_") and isinstance(est.hypothesis_, VotedHypothesis)
        for Xin in (X, sp.csr_matrix(X)):
            np.testing.assert_allclose(est.decision_function(Xin), want_dec, rtol=0, atol=1e-12)
            assert np.array_equal(est.predict(Xin), est.classes_[want_idx])
        runs = distinct(updated)
        assert sum(w for _, w in runs) == len(H)
        assert_summary_is(est.summary_.summary(est._state), H, runs)
        assert est.summary_.n_hypotheses_ == len(runs) and est.summary_.dropped_ == 0


def test_vote_cases_have_split_votes():
    """The vote is not a single hypothesis in disguise: on the non-separable cases some
    rows get a split vote, and on some cases it predicts differently from the average."""
    differs = 0
    for case in CASE_IDS:
        H, _, _ = naive_run(case, 1)
        X, _ = data(CASES[case][3])
        dec, idx = naive_vote(H, np.ones(len(H)), X)
        share = (dec + 1) / 2 if dec.ndim == 1 else dec.max(axis=1)
        if "separable" not in case:
            assert ((share > 0.55) & (share < 0.95)).sum() >= 10, case
        avg = scores(X, H.mean(axis=0)[None])[:, 0]
        avg_idx = (avg[:, 0] >= 0).astype(int) if avg.shape[1] == 1 else np.argmax(avg, axis=1)
        differs += bool((avg_idx != idx).any())
    assert differs >= 3


# -- 2. vote over the beta-suffix ----------------------------------------------------
SUFFIX_VOTES = {"default": Vote(suffix=True), "C0": Vote(suffix=True, C=0.0), "hinge": Vote(suffix=True, loss="hinge")}


@pytest.mark.parametrize("vote", list(SUFFIX_VOTES))
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_suffix_vote(case, epochs, vote):
    conv = SUFFIX_VOTES[vote]
    H, losses, updated = naive_run(case, epochs)
    m = len(updated)
    _, a, betas = naive_suffix(H, losses[conv.loss], conv.C)
    X, _ = data(CASES[case][3])
    want_dec, want_idx = naive_vote(H[a:m], np.ones(m - a), X)  # J = {a..m-1}: h_m is not in it
    dense_est, csr_est = fit_both(case, conv, epochs)
    for est in (dense_est, csr_est):
        assert est.summary_.start_ == a
        np.testing.assert_allclose(est.summary_.betas_, betas, rtol=1e-12)
        np.testing.assert_allclose(est.decision_function(X), want_dec, rtol=0, atol=1e-12)
        assert np.array_equal(est.predict(X), est.classes_[want_idx])
        runs = distinct(updated, a, final=False)
        assert sum(w for _, w in runs) == m - a
        assert_summary_is(est.summary_.summary(est._state), H, runs)
        assert est.summary_.n_hypotheses_ == len(runs)
    # The online counters are pass 1's, not doubled by the replay.
    assert dense_est.t_ == m and dense_est.n_updates_ == int(updated.sum())


def test_suffix_votes_exercise_positive_starts():
    starts = [fit_both(case, conv, 1)[0].summary_.start_ for case in ("perceptron-binary", "pa-ovr3", "alma-binary")
              for conv in SUFFIX_VOTES.values()]
    assert sum(a > 0 for a in starts) >= 4


def test_suffix_vote_excludes_a_final_hypothesis_that_was_never_used():
    """The last round updates: h_m is new, used by no round, so it has no weight in
    the suffix vote (and is not counted); the plain vote gives it its one index.
    Perceptron on x = 1 (plus the bias): w goes 0 -> -1 -> 0 -> 1 (rounds 1-3; round
    3 has margin 0: no mistake, but an update), stays for rounds 4-6, and round 7
    (a mistake) takes it back to 0."""
    X, y = np.ones((7, 1)), np.array([0, 1, 1, 1, 1, 1, 0])
    plain = Perceptron(conversion="vote", epochs=1, shuffle=False).fit(X, y)
    suffix = Perceptron(conversion=Vote(suffix=True, C=0.0), epochs=1, shuffle=False).fit(X, y)
    assert (plain.n_updates_, plain.online_errors_) == (4, 3)
    assert summary_entries(plain.summary_.summary(plain._state)) == [(0, 1.0), (1, 1.0), (2, 1.0), (3, 4.0), (7, 1.0)]
    assert plain.summary_.n_hypotheses_ == 5
    # beta = mean loss of rounds a+1..7 (losses 1 1 0 0 0 0 1): smallest at a = 2 (1/5).
    assert suffix.summary_.start_ == 2
    assert summary_entries(suffix.summary_.summary(suffix._state)) == [(2, 1.0), (3, 4.0)]
    assert suffix.summary_.n_hypotheses_ == 2
    assert suffix.hypothesis_.w.tolist() == [1.0, 4.0]
    # h_2 = 0 votes (1 vote) for classes_[1] (score 0); h_3 = (1, 1) (4 votes) for
    # classes_[0] at x = -2 and for classes_[1] at x = 3.
    assert suffix.decision_function(np.array([[-2.0], [3.0]])) == pytest.approx([-0.6, 1.0], abs=1e-15)
    assert suffix.predict(np.array([[-2.0], [3.0]])).tolist() == [0, 1]


# -- 3. sample -------------------------------------------------------------------------
def chi2(counts: np.ndarray, p: np.ndarray) -> tuple[float, int]:
    e = counts.sum() * p
    return float(((counts - e) ** 2 / e).sum()), len(p) - 1


def assert_chi2_ok(counts: np.ndarray, p: np.ndarray) -> None:
    """Pearson's statistic within dof + 6 sd (deterministic seeds: no flakiness)."""
    stat, dof = chi2(counts, p)
    assert stat < dof + 6 * math.sqrt(2 * dof), (stat, dof)


@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "mira-native3", "margin-separable"])
def test_sample_draws_follow_the_weights(case):
    H, _, updated = naive_run(case, 2)
    est = estimator(case, "sample", 2).fit(*data(CASES[case][3]))
    hyp = est.hypothesis_
    assert isinstance(hyp, SampledHypothesis) and not hasattr(est, "coef_")
    runs = distinct(updated)
    assert np.array_equal(hyp.w, [w for _, w in runs]) and np.array_equal(hyp.H, H[[a for a, _ in runs]])
    p = hyp.w / hyp.w.sum()
    n = 200_000
    Z = np.zeros((n, D))
    idx = hyp.draw(Z, random_state=123)
    assert np.array_equal(idx, hyp.draw(Z, random_state=123))
    assert (idx != hyp.draw(Z, random_state=124)).mean() > 0.5
    counts = np.bincount(idx, minlength=len(p))
    assert len(counts) == len(p)
    assert_chi2_ok(counts, p)
    # The same draws, with the uniform distribution over the hypotheses instead, fail.
    assert chi2(counts, np.full(len(p), 1 / len(p)))[0] > 10 * len(p)


@pytest.mark.parametrize("scale", [1e-12, 1e-3, 1.0, 1e3, 1e9, 1e15])
def test_keyed_draws_follow_the_weights_whatever_the_scale(scale):
    """The default draw is a hash of the instance; over many distinct instances the
    hypotheses still come up in proportion to their weights, whatever the units."""
    rng = np.random.default_rng(11)
    w = np.array([1.0, 2.0, 3.0, 10.0, 1.0, 4.0, 7.0])
    hyp = SampledHypothesis(rng.normal(size=(len(w), 1, D + 1)), w, seed=5)
    X = rng.normal(size=(60_000, D))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[:, 0] += 1.0  # no zero rows (one instance, one draw)
    counts = np.bincount(hyp.draw(X * scale), minlength=len(w))
    assert_chi2_ok(counts, w / w.sum())


@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3"])
def test_keyed_draws_are_per_instance(case):
    X, y = data(CASES[case][3])
    est = estimator(case, "sample", 2).fit(X, y)
    hyp = est.hypothesis_
    idx = hyp.draw(X)
    assert len(np.unique(idx)) > 20  # the rows do not share one draw
    Xc = sp.csr_matrix(X)
    assert np.array_equal(hyp.draw(X), idx) and np.array_equal(hyp.draw(Xc), idx)
    perm = np.random.default_rng(0).permutation(N)
    assert np.array_equal(hyp.draw(X[perm]), idx[perm])
    assert np.array_equal(hyp.draw(Xc[perm[:17]]), idx[perm[:17]])
    assert np.array_equal(hyp.draw(X[5:6]), idx[5:6])
    # The decision of every row is the scores of its drawn hypothesis.
    want = np.einsum("nd,nkd->nk", X, hyp.H[idx, :, :-1]) + hyp.H[idx, :, -1]
    want = want[:, 0] if want.shape[1] == 1 else want
    for Xin in (X, Xc):
        dec = est.decision_function(Xin)
        assert dec.shape == want.shape
        np.testing.assert_allclose(dec, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(est.decision_function(X[perm]), want[perm], rtol=1e-12, atol=1e-12)
    # Another seed, other draws; an explicit random_state gives fresh ones.
    other = estimator(case, Sample(random_state=12345), 2).fit(X, y)
    assert np.array_equal(other.hypothesis_.w, hyp.w)
    assert (other.hypothesis_.draw(X) != idx).mean() > 0.3
    assert (hyp.draw(X, random_state=1) != idx).mean() > 0.3
    fresh = hyp.decision_function(X, random_state=1)
    j = hyp.draw(X, random_state=1)
    np.testing.assert_allclose(fresh, (np.einsum("nd,nkd->nk", X, hyp.H[j, :, :-1]) + hyp.H[j, :, -1]).squeeze(),
                               rtol=1e-12, atol=1e-12)


def zero_one(est_idx: np.ndarray, y_idx: np.ndarray) -> float:
    return float((est_idx != y_idx).mean())


@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "alma-binary"])
def test_sample_risk_is_the_weighted_average_risk(case):
    """Lemma 1(3): the sample's risk is the weighted average of the hypotheses' risks."""
    H, _, updated = naive_run(case, 2)
    X, y = data(CASES[case][3])
    est = estimator(case, "sample", 2).fit(X, y)
    hyp = est.hypothesis_
    yi = np.searchsorted(est.classes_, y)
    _, K, _ = hyp.H.shape
    S = scores(X, hyp.H)
    pred = (S[:, :, 0] >= 0).astype(int) if K == 1 else np.argmax(S, axis=2)  # (rows, hyps)
    want = float(((pred != yi[:, None]).mean(axis=0) * hyp.w).sum() / hyp.w.sum())
    assert 0.02 < want < 0.6
    # Keyed draws, one per training row: sampling error ~ 0.03.
    assert abs(zero_one(est.predict(X), y) - want) < 0.12
    # Fresh draws over 40 copies of the data: sampling error ~ 0.004.
    rep = np.tile(X, (40, 1))
    dec = hyp.decision_function(rep, random_state=9)
    got = (dec >= 0).astype(int) if dec.ndim == 1 else np.argmax(dec, axis=1)
    assert abs(zero_one(got, np.tile(yi, 40)) - want) < 0.02


# -- 4. interval -------------------------------------------------------------------------
HUGE = 10 ** 30


def check_interval(loss, updated, U, C, exact: bool) -> tuple[int, int]:
    a, b, beta = best_interval(loss, updated, U, C)
    na, nb, nbeta, B = naive_interval(loss, updated, U, C)
    assert 0 <= a <= b < len(loss)
    assert int(np.sum(updated[a:b])) <= U
    assert beta == B[a, b]  # the value it reports is the beta of the interval it returns
    if exact:  # integer or dyadic losses: every sum is exact, ties too
        assert (a, b, beta) == (na, nb, nbeta)
        assert beta == naive_beta(float(np.sum(loss[a:b + 1])), b - a + 1, C)
    else:
        assert beta == pytest.approx(nbeta, rel=1e-12, abs=1e-12)
        if (B <= nbeta + 1e-9 * max(1.0, nbeta)).sum() == 1:  # a unique minimiser
            assert (a, b) == (na, nb)
    return a, b


@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_best_interval_on_the_cases_logs(case, epochs):
    _, losses, updated = naive_run(case, epochs)
    upd = updated.astype(np.uint8)
    for loss, C in [("zero_one", 3.0), ("zero_one", 0.5), ("hinge", 3.0)]:
        for U in (0, 3, 40, HUGE):
            check_interval(losses[loss], upd, U, C, exact=loss == "zero_one")


def loss_arrays(draw, m: int) -> tuple[np.ndarray, bool]:
    kind = draw(st.sampled_from(["zero_one", "few", "continuous"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "zero_one":
        return (rng.random(m) < draw(st.sampled_from([0.0, 0.1, 0.5, 0.9]))).astype(np.float64), True
    if kind == "few":  # dyadic values: sums are exact, so ties are exact too
        return rng.choice([0.0, 0.25, 0.5, 1.0, 2.0], size=m), True
    return rng.random(m) * draw(st.sampled_from([1.0, 3.0])), False


@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 70), p_upd=st.sampled_from([0.0, 0.1, 0.5, 1.0]), U=st.sampled_from([0, 1, 2, 5, 20, HUGE]),
       C=st.sampled_from([0.0, 0.5, 1.0, 3.0]), data_=st.data())
def test_best_interval_equals_brute_force(m, p_upd, U, C, data_):
    loss, exact = data_.draw(st.composite(lambda draw: loss_arrays(draw, m))())
    rng = np.random.default_rng(data_.draw(st.integers(0, 2**32 - 1)))
    updated = (rng.random(m) < p_upd).astype(np.uint8)
    check_interval(loss, updated, U, C, exact)
    # bool flags and a numpy integer budget are taken as well.
    assert best_interval(loss, updated.astype(bool), np.int64(min(U, 10**6)), C) == \
        best_interval(loss, updated, min(U, 10**6), C)


def test_best_interval_ties_go_to_the_first_interval():
    # C = 0 and no loss anywhere: every interval has beta 0; the first is {0..0}.
    assert best_interval(np.zeros(9), np.zeros(9), 3, 0.0) == (0, 0, 0.0)
    # C > 0, all intervals allowed: the longest, {0..m-1}, wins.
    assert best_interval(np.zeros(9), np.ones(9), HUGE, 1.0) == (0, 8, 1 / 3)
    # Every round updates and U = 2: three hypotheses at most; the first such interval.
    assert best_interval(np.zeros(9), np.ones(9), 2, 1.0) == (0, 2, 1 / math.sqrt(3))
    # Two zero-loss windows of equal length: the earlier one.
    loss = np.array([1, 0, 0, 1, 0, 0, 1.0])
    upd = np.array([1, 0, 1, 1, 0, 1, 1], np.uint8)
    assert best_interval(loss, upd, 1, 1.0) == (1, 2, 1 / math.sqrt(2))


@pytest.mark.parametrize("bad,match", [(dict(loss=np.zeros(0), updated=np.zeros(0)), "empty"),
                                       (dict(loss=np.zeros(3), updated=np.zeros(2)), "update flags"),
                                       (dict(loss=np.zeros(3), updated=np.zeros(3), max_updates=-1), "max_updates")])
def test_best_interval_rejects_bad_input(bad, match):
    args = {"max_updates": 1, "C": 3.0, **bad}
    with pytest.raises(ValueError, match=match):
        best_interval(**args)


INTERVALS = {"default": Interval(), "U0": Interval(max_updates=0), "U5-hinge": Interval(max_updates=5, loss="hinge"),
             "U20-C1": Interval(max_updates=20, C=1.0), "huge": Interval(max_updates=HUGE, C=0.5)}


@pytest.mark.parametrize("interval", list(INTERVALS))
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_interval(case, epochs, interval):
    conv = INTERVALS[interval]
    H, losses, updated = naive_run(case, epochs)
    a, b, beta, _ = naive_interval(losses[conv.loss], updated, conv.max_updates, conv.C)
    want = H[a:b + 1].mean(axis=0)
    dense_est, csr_est = fit_both(case, conv, epochs)
    got = batch_hypothesis(dense_est)
    assert np.array_equal(got, batch_hypothesis(csr_est))
    s = dense_est.summary_
    assert (s.start_, s.stop_) == (a, b)
    assert s.beta_ == pytest.approx(beta, rel=1e-12, abs=1e-12)
    if conv.loss == "zero_one":
        assert s.beta_ == beta
    assert s.n_updates_in_ == int(updated[a:b].sum()) <= conv.max_updates
    np.testing.assert_allclose(got, want, **tol(want))
    assert (dense_est.t_, dense_est.n_updates_) == (len(updated), int(updated.sum()))


def test_interval_cases_exercise_the_constraint():
    """The update budget binds (the unconstrained interval has more updates) on most
    cases, and the budget and the loss change the answer."""
    binding = 0
    for case in CASE_IDS:
        _, losses, updated = naive_run(case, 1)
        a, b, _, _ = naive_interval(losses["zero_one"], updated, HUGE, 3.0)
        binding += int(updated[a:b].sum()) > 5
        chosen = {naive_interval(losses[loss], updated, U, 3.0)[:2] for loss in ("zero_one", "hinge")
                  for U in (0, 3, 40, HUGE)}
        assert len(chosen) >= (2 if "separable" in case else 3), case
    assert binding >= 8


@pytest.mark.parametrize("case", ["perceptron-binary", "alma-ovr3", "margin-separable"])
def test_shuffled_interval(case):
    H, losses, updated = oracle(case, 2, shuffle=True)
    conv = Interval(max_updates=10)
    a, b, _, _ = naive_interval(losses["zero_one"], updated, 10, 3.0)
    est, _ = fit_both(case, conv, 2, shuffle=True)
    assert (est.summary_.start_, est.summary_.stop_) == (a, b)
    want = H[a:b + 1].mean(axis=0)
    np.testing.assert_allclose(batch_hypothesis(est), want, **tol(want))


# -- 5. summaries: merge laws and pickling -----------------------------------------------
def entry(start: int) -> np.ndarray:
    """The hypothesis keyed by ``start`` (equal keys: the same hypothesis)."""
    return np.array([[float(start), -0.5 * start, 1.0]])


@st.composite
def summaries(draw, starts=st.integers(0, 30), caps=st.sampled_from([None, 1, 2, 3, 5])):
    keys = draw(st.lists(starts, max_size=8, unique=True))
    s = EnsembleSummary(draw(caps))
    for k in keys:
        s.add(entry(k), float(draw(st.integers(1, 9))), k)
    return s


def as_tuple(s: EnsembleSummary) -> tuple:
    assert all(np.array_equal(h, entry(k)) for h, k in zip(s.H, s.starts))
    assert s.starts == sorted(s.starts)
    return s.cap, s.starts, s.weights, s.dropped, s.dropped_weight


@settings(max_examples=200, deadline=None)
@given(a=summaries(), b=summaries())
def test_ensemble_merge_is_commutative_with_the_empty_identity(a, b):
    assert as_tuple(a.merge(b)) == as_tuple(b.merge(a))
    for s in (a, b, a.merge(b)):
        for caps in (None, s.cap):
            assert as_tuple(EnsembleSummary(caps).merge(s)) == as_tuple(s)
            assert as_tuple(s.merge(EnsembleSummary(caps))) == as_tuple(s)


@settings(max_examples=200, deadline=None)
@given(a=summaries(caps=st.just(None)), b=summaries(caps=st.just(None)), c=summaries(caps=st.just(None)))
def test_uncapped_ensemble_merge_is_associative(a, b, c):
    """Shared keys (a hypothesis split across summaries) add their weights."""
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    assert as_tuple(left) == as_tuple(right)
    union = Counter()
    for s in (a, b, c):
        union.update(dict(zip(s.starts, s.weights)))
    assert summary_entries(left) == sorted(union.items())


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 40), min_size=0, max_size=18, unique=True), cuts=st.tuples(st.integers(0, 18),
       st.integers(0, 18)).map(sorted), weights=st.lists(st.integers(1, 9), min_size=18, max_size=18),
       cap=st.sampled_from([1, 2, 3, 5, 8]), caps=st.lists(st.sampled_from([None, "cap"]), min_size=3, max_size=3))
def test_capped_ensemble_merge_keeps_the_heaviest_of_the_union(keys, cuts, weights, cap, caps):
    """Disjoint keys: merging in any grouping keeps the cap heaviest of the union
    (ties: the earlier start), and counts what the caps dropped."""
    parts = [keys[:cuts[0]], keys[cuts[0]:cuts[1]], keys[cuts[1]:]]
    w = dict(zip(keys, weights))
    a, b, c = (EnsembleSummary(cap if cp else None) for cp in caps)
    for s, ks in zip((a, b, c), parts):
        for k in ks:
            s.add(entry(k), float(w[k]), k)
    eff = cap if any(caps) else None
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    assert as_tuple(left) == as_tuple(right) == as_tuple(c.merge(a).merge(b))
    kept = heaviest(list(w.items()), cap) if eff else sorted(w.items())
    assert summary_entries(left) == [(k, float(v)) for k, v in kept]
    assert left.cap == eff
    assert left.dropped == len(w) - len(kept)
    assert left.dropped_weight == sum(w.values()) - sum(v for _, v in kept)


def test_capped_merge_of_a_split_hypothesis_sums_before_the_cap():
    """x and y share the hypothesis keyed 5: the union gives it 2 + 2 = 4 and keeps it,
    whichever operand comes first."""
    x = EnsembleSummary(2)
    y = EnsembleSummary(2)
    for s, items in ((x, [(0, 3.0), (5, 2.0)]), (y, [(5, 2.0), (7, 3.0)])):
        for k, wt in items:
            s.add(entry(k), wt, k)
    for merged in (x.merge(y), y.merge(x)):
        assert summary_entries(merged) == [(0, 3.0), (5, 4.0)]
        assert (merged.dropped, merged.dropped_weight) == (1, 3.0)


def block_summaries(updated: np.ndarray, H: np.ndarray, cuts: list[int]) -> list[EnsembleSummary]:
    """One summary per block of indices [lo, hi) of {0..m}; a hypothesis whose rounds
    span two blocks appears in both with its first index as key."""
    m = len(updated)
    first = [0]
    for i in range(1, m + 1):
        first.append(i if updated[i - 1] else first[-1])
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        s = EnsembleSummary()
        for k, wt in sorted(Counter(first[lo:hi]).items()):
            s.add(H[k], float(wt), k)
        out.append(s)
    return out


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(["perceptron-binary", "pa-ovr3", "margin-separable"]),
       cuts=st.lists(st.integers(1, N), max_size=6, unique=True).map(sorted))
def test_block_summaries_merge_to_the_one_pass_summary(case, cuts):
    H, _, updated = naive_run(case, 1)
    cuts = [0, *cuts, N + 1]  # indices 0..m: the last block holds h_m
    blocks = block_summaries(updated, H, cuts)
    folded = EnsembleSummary()
    for blk in blocks:
        folded = folded.merge(blk)
    level = blocks
    while len(level) > 1:
        level = [level[i].merge(level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    est = estimator(case, Vote(max_hypotheses=None), 1).fit(*data(CASES[case][3]))
    one_pass = est.summary_.summary(est._state)
    reverse = EnsembleSummary()
    for blk in reversed(blocks):  # commutative: any order of the blocks
        reverse = reverse.merge(blk)
    for merged in (folded, level[0], reverse):
        assert summary_entries(merged) == summary_entries(one_pass)
        assert all(np.array_equal(h, g) for h, g in zip(merged.H, one_pass.H))


def test_adding_hypotheses_in_order_costs_little_per_hypothesis():
    """The tracker adds each hypothesis once, in start order: 40k adds take well
    under a second (a list-to-array copy per add made this quadratic: ~15 s)."""
    import time

    s = EnsembleSummary()
    h = np.zeros((1, 3))
    t0 = time.process_time()
    for i in range(40_000):
        s.add(h, 1.0, 2 * i)
    assert time.process_time() - t0 < 3.0
    assert s.starts == list(range(0, 80_000, 2)) and s.total_weight == 40_000
    s.add(h, 2.0, 3)  # out of order: inserted in place
    s.add(h, 1.0, 4)  # an existing start: its weight grows
    assert s.starts[:4] == [0, 2, 3, 4] and s.weights[:4] == [1.0, 1.0, 2.0, 2.0]


@settings(max_examples=50, deadline=None)
@given(s=summaries())
def test_pickle_round_trip_of_ensemble_summaries(s):
    again = pickle.loads(pickle.dumps(s))
    assert as_tuple(again) == as_tuple(s)
    if s.H:
        X = np.random.default_rng(0).normal(size=(50, 2))
        assert np.array_equal(again.vote().decision_function(X), s.vote().decision_function(X))
        assert np.array_equal(again.sample(3).draw(X), s.sample(3).draw(X))


@pytest.mark.parametrize("conversion", ["vote", "sample", Vote(suffix=True), Sample(suffix=True, max_hypotheses=9)],
                         ids=["vote", "sample", "vote-suffix", "sample-suffix-cap9"])
def test_fitted_vote_and_sample_pickle_and_clone(conversion):
    from sklearn.base import clone

    X, y = data("ovr3")
    est = estimator("pa-ovr3", conversion, 2).fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.hypothesis_.H, est.hypothesis_.H)
    assert np.array_equal(again.hypothesis_.w, est.hypothesis_.w)
    assert np.array_equal(again.decision_function(X), est.decision_function(X))
    assert np.array_equal(again.predict(X), est.predict(X))
    assert again.summary_.n_hypotheses_ == est.summary_.n_hypotheses_
    assert again.summary_.start_ == est.summary_.start_
    refit = clone(est).fit(X, y)
    assert np.array_equal(refit.decision_function(X), est.decision_function(X))


@pytest.mark.parametrize("name,obj", [("vote", Vote()), ("sample", Sample()), ("interval", Interval())])
def test_names_are_the_default_objects(name, obj):
    X, y = data("binary")
    by_name = estimator("pa-binary", name, 2).fit(X, y)
    by_obj = estimator("pa-binary", obj, 2).fit(X, y)
    assert np.array_equal(by_name.decision_function(X), by_obj.decision_function(X))
    assert type(by_name.summary_) is type(by_obj.summary_)


# -- 6. partial_fit ---------------------------------------------------------------------
PIECES = [0, 1, 2, 37, 38, 150, 251, 299, N]  # 1-row pieces at 0, 1, 37 and the end


def ensemble_state(est) -> tuple:
    s = est.summary_.summary(est._state)
    return summary_entries(s), s.dropped, s.dropped_weight, np.stack(s.H)


@pytest.mark.parametrize("conversion", ["vote", "sample", Vote(max_hypotheses=7), Sample(random_state=3)],
                         ids=["vote", "sample", "vote-cap7", "sample-seed3"])
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "mira-native3"])
def test_partial_fit_in_pieces_equals_fit(case, conversion):
    X, y = data(CASES[case][3])
    full = estimator(case, conversion, 1).fit(X, y)
    part = estimator(case, conversion, 1)
    for j, (lo, hi) in enumerate(zip(PIECES[:-1], PIECES[1:])):
        Xp = sp.csr_matrix(X[lo:hi]) if j % 2 else X[lo:hi]
        part.partial_fit(Xp, y[lo:hi], classes=np.unique(y))
        assert part.t_ == hi and part.summary_.n_hypotheses_ >= 1
        if j == 2:  # an empty piece is refused, and changes nothing
            before = ensemble_state(part)
            with pytest.raises(ValueError, match="0 sample"):
                part.partial_fit(Xp[:0], y[:0])
            assert ensemble_state(part)[:3] == before[:3] and part.t_ == hi
    got, want = ensemble_state(part), ensemble_state(full)
    assert got[:3] == want[:3]
    np.testing.assert_allclose(got[3], want[3], **tol(want[3]))
    np.testing.assert_allclose(part.decision_function(X), full.decision_function(X), rtol=1e-12, atol=1e-12)
    assert np.array_equal(part.predict(X), full.predict(X))
    assert (part.t_, part.n_updates_, part.online_errors_) == (full.t_, full.n_updates_, full.online_errors_)
    assert part.summary_.dropped_ == full.summary_.dropped_


@pytest.mark.parametrize("csr", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("conversion", ["vote", "sample"])
def test_failed_partial_fit_leaves_the_vote_untouched(conversion, csr):
    """A NaN in row 20 of a piece: the call fails and the ensemble is as before it,
    so continuing equals a run without that piece."""
    X, y = data("binary")
    bad = X[100:150].copy()
    bad[20, 1] = np.nan
    full = estimator("perceptron-binary", conversion, 1)
    part = estimator("perceptron-binary", conversion, 1)
    for lo, hi in [(0, 33), (33, 100)]:
        full.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
        part.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
    before, dec = ensemble_state(part), part.decision_function(X)
    with pytest.raises(ValueError, match="NaN"):
        part.partial_fit(sp.csr_matrix(bad) if csr else bad, y[100:150])
    after = ensemble_state(part)
    assert after[:3] == before[:3] and np.array_equal(after[3], before[3])
    assert np.array_equal(part.decision_function(X), dec) and part.t_ == 100
    full.partial_fit(X[150:], y[150:])
    part.partial_fit(X[150:], y[150:])
    assert ensemble_state(part)[:3] == ensemble_state(full)[:3]
    np.testing.assert_allclose(part.decision_function(X), full.decision_function(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("conversion", [Vote(suffix=True), Sample(suffix=True), "interval", Interval(max_updates=3)],
                         ids=["vote-suffix", "sample-suffix", "interval", "Interval(3)"])
def test_partial_fit_rejects_two_pass_ensembles_and_intervals(conversion):
    X, y = data("binary")
    est = Perceptron(conversion=conversion)
    with pytest.raises(ValueError, match="partial_fit"):
        est.partial_fit(X, y)
    assert not hasattr(est, "coef_") and not hasattr(est, "hypothesis_") and not hasattr(est, "summary_")
    # A fitted one-pass vote switched to it is refused and left as it was.
    est = Perceptron(conversion="vote", shuffle=False).partial_fit(X[:100], y[:100])
    before, dec = ensemble_state(est), est.decision_function(X)
    est.set_params(conversion=conversion)
    with pytest.raises(ValueError, match="partial_fit"):
        est.partial_fit(X[100:], y[100:])
    assert ensemble_state(est)[:3] == before[:3]
    assert np.array_equal(est.decision_function(X), dec) and est.t_ == 100


# -- 7. the cap and parameter checks --------------------------------------------------------
@pytest.mark.parametrize("cap", [1, 5, "half"])
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "mira-native3", "perceptron-separable"])
def test_cap_keeps_the_heaviest(case, epochs, cap):
    H, _, updated = naive_run(case, epochs)
    runs = distinct(updated)
    cap = len(runs) // 2 if cap == "half" else cap
    kept = heaviest(runs, cap)
    assert len(runs) > cap
    X, _ = data(CASES[case][3])
    want_dec, want_idx = naive_vote(H[[a for a, _ in kept]], [w for _, w in kept], X)
    for conv in (Vote(max_hypotheses=cap), Sample(max_hypotheses=cap)):
        est = estimator(case, conv, epochs).fit(X, data(CASES[case][3])[1])
        assert_summary_is(est.summary_.summary(est._state), H, kept)
        assert est.summary_.n_hypotheses_ == cap == len(est.hypothesis_.w)
        assert est.summary_.dropped_ == len(runs) - cap
        assert est.summary_.dropped_weight_ == sum(w for _, w in runs) - sum(w for _, w in kept)
        if isinstance(conv, Vote):
            np.testing.assert_allclose(est.decision_function(X), want_dec, rtol=0, atol=1e-12)
            assert np.array_equal(est.predict(X), est.classes_[want_idx])


def test_cap_above_the_number_of_hypotheses_drops_nothing():
    H, _, updated = naive_run("perceptron-binary", 1)
    runs = distinct(updated)
    for cap in (len(runs), len(runs) + 1, None):
        est = estimator("perceptron-binary", Vote(max_hypotheses=cap), 1).fit(*data("binary"))
        assert est.summary_.n_hypotheses_ == len(runs)
        assert (est.summary_.dropped_, est.summary_.dropped_weight_) == (0, 0.0)
    est = estimator("perceptron-binary", Vote(max_hypotheses=len(runs) - 1), 1).fit(*data("binary"))
    assert (est.summary_.n_hypotheses_, est.summary_.dropped_) == (len(runs) - 1, 1)


@pytest.mark.parametrize("conversion", [Vote(), Sample(), Vote(suffix=True), "vote"], ids=["vote", "sample",
                                                                                       "vote-suffix", "name"])
@pytest.mark.parametrize("kind", ["binary", "ovr3"])
def test_auto_cap(kind, conversion):
    X, y = data(kind)
    K = 1 if KINDS[kind] == 2 else KINDS[kind]
    est = Perceptron(conversion=conversion, epochs=1).fit(X, y)
    assert est.summary_.ensemble.cap == max(16, AUTO_BYTES // (8 * K * (D + 1))) == auto_cap(D, K)
    assert est.summary_.dropped_ == 0


def test_auto_cap_values():
    assert auto_cap(5, 1) == AUTO_BYTES // 48
    assert auto_cap(2**21 - 1, 1) == 16  # exactly 256 MiB / 16 MiB per hypothesis
    assert auto_cap(2**21, 1) == 16 and auto_cap(10**7, 3) == 16  # the floor
    assert auto_cap(16, 26) == AUTO_BYTES // (8 * 26 * 17) == 75_915  # letter: 16 features, 26 classes
    ctx = {"n_features": 3_000_000, "n_outputs": 1, "nnz_per_row": 10, "seed": 0}
    assert Vote().tracker(ctx).ensemble.cap == 16
    assert Sample(max_hypotheses=None).tracker(ctx).ensemble.cap is None
    assert Vote(max_hypotheses=np.int64(3)).tracker(ctx).ensemble.cap == 3


@pytest.mark.parametrize("make,name", [
    (lambda: Vote(max_hypotheses=0), "max_hypotheses"),
    (lambda: Vote(max_hypotheses=-1), "max_hypotheses"),
    (lambda: Vote(max_hypotheses=2.5), "max_hypotheses"),
    (lambda: Vote(max_hypotheses=True), "max_hypotheses"),
    (lambda: Vote(max_hypotheses="big"), "max_hypotheses"),
    (lambda: Sample(max_hypotheses=0), "max_hypotheses"),
    (lambda: Sample(max_hypotheses=np.bool_(True)), "max_hypotheses"),
    (lambda: Vote(C=-1.0), "C"),
    (lambda: Vote(loss="log"), "loss"),
    (lambda: Interval(max_updates=-1), "max_updates"),
    (lambda: Interval(max_updates=1.5), "max_updates"),
    (lambda: Interval(max_updates=True), "max_updates"),
    (lambda: Interval(max_updates=None), "max_updates"),
    (lambda: Interval(C=float("nan")), "C"),
    (lambda: Interval(loss="squared"), "loss"),
    (lambda: Sample(random_state=-1), "random_state"),
    (lambda: Sample(random_state=1.5), "random_state"),
    (lambda: Sample(random_state=True), "random_state"),
    (lambda: Sample(random_state=np.random.default_rng(0)), "random_state"),
])
def test_bad_parameters_raise(make, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        make()


def test_huge_max_updates_is_no_constraint():
    X, y = data("binary")
    huge = Perceptron(conversion=Interval(max_updates=HUGE), epochs=2, random_state=0).fit(X, y)
    big = Perceptron(conversion=Interval(max_updates=10**6), epochs=2, random_state=0).fit(X, y)
    assert (huge.summary_.start_, huge.summary_.stop_) == (big.summary_.start_, big.summary_.stop_)
    assert np.array_equal(batch_hypothesis(huge), batch_hypothesis(big))


# -- 8. store input ------------------------------------------------------------------------
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("conversion", ["vote", Vote(suffix=True, max_hypotheses=6), "interval",
                                        Interval(max_updates=4), "sample"],
                         ids=["vote", "vote-suffix-cap6", "interval", "interval-U4", "sample"])
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3"])
def test_store_input_equals_in_memory(tmp_path, case, conversion, epochs):
    from distlearn.data.store import write_dataset

    X, y = data(CASES[case][3])
    write_dataset(tmp_path / "d.zarr", [(X, y)], block_rows=64, dtype="float64")
    mem = estimator(case, conversion, epochs).fit(X, y)
    store = estimator(case, conversion, epochs).fit(tmp_path / "d.zarr")
    assert (store.t_, store.n_updates_, store.online_errors_) == (mem.t_, mem.n_updates_, mem.online_errors_)
    if hasattr(mem, "coef_"):
        want = batch_hypothesis(mem)
        np.testing.assert_allclose(batch_hypothesis(store), want, **tol(want))
        for attr in ("start_", "stop_", "beta_", "n_updates_in_"):
            assert getattr(store.summary_, attr) == getattr(mem.summary_, attr)
    else:
        got, want = ensemble_state(store), ensemble_state(mem)
        assert got[:3] == want[:3]
        np.testing.assert_allclose(got[3], want[3], **tol(want[3]))
        assert store.summary_.start_ == mem.summary_.start_
        dec = mem.decision_function(X)
        np.testing.assert_allclose(store.decision_function(X), dec, rtol=1e-12, atol=1e-12)
        # A store to predict on, too: block by block, the same answers.
        np.testing.assert_allclose(store.decision_function(tmp_path / "d.zarr"), dec, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cap", [None, 1000])
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3"])
def test_block_trackers_merge_to_the_one_pass_summary(case, cap):
    """Trackers started on consecutive blocks of one run (as workers would), each
    summarised with final=False except the last, merge to the one-pass summary:
    a hypothesis open across a boundary keeps its start key (n_rounds - age)."""
    from distlearn.conversions.ensemble import EnsembleTracker
    from distlearn.learners import init_state

    X, y = data(CASES[case][3])
    K = 1 if KINDS[CASES[case][3]] == 2 else KINDS[CASES[case][3]]
    rule = CASES[case][2](X, 1)
    one = EnsembleTracker("vote", cap)
    st1 = init_state(D, K)
    one.begin(st1)
    one.run_chunk(rule, st1, X, y, None, True)
    want = one.summary(st1)
    st2 = init_state(D, K)
    parts = []
    bounds = [0, 37, 38, 150, N]
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        tr = EnsembleTracker("vote", cap)
        tr.begin(st2)
        tr.run_chunk(rule, st2, X[lo:hi], y[lo:hi], None, True)
        parts.append(tr.summary(st2, final=hi == N))
    got = parts[0]
    for p in parts[1:]:
        got = got.merge(p)
    assert got.starts == want.starts and got.weights == want.weights
    assert all(np.array_equal(a, b) for a, b in zip(got.H, want.H))
