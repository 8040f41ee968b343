"""Online-to-batch conversions against brute force over every stored hypothesis.

The oracle runs the learner one row at a time (one ``learn_chunk`` call per
row), keeps every hypothesis h_0..h_m and every round's loss and update flag,
and evaluates each conversion straight from its definition in the papers
(Dekel & Singer 2005, "Data-driven online to batch conversions"; Dekel 2008,
"cutoff averaging").  Conventions: round t = 1..m uses h_{t-1}; entry t-1 of
the logs is round t; ``loss[i]`` is the loss of h_i on example i+1.
"""

from __future__ import annotations

import math
import pickle
from functools import lru_cache

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn import rng as dl_rng
from distlearn import ALMA, MIRA, MarginPerceptron, PassiveAggressive, Perceptron
from distlearn.conversions import (
    Average,
    AverageSummary,
    Cutoff,
    CutoffGroups,
    Last,
    Suffix,
    Survivor,
    Tree,
    TreeNode,
    TreeSummary,
    cutoff_bounds,
)
from distlearn.conversions.core import AverageTracker, CutoffTracker, TreeTracker
from distlearn.learners import init_state, learn_chunk, make_rule, state_coef
from distlearn.learners.linear import RoundLog

N, D = 300, 5
DELTA = 0.05


# -- data and learner cases --------------------------------------------------------
KINDS = {"binary": 2, "ovr3": 3, "separable": 2}


@lru_cache(maxsize=None)
def data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Noisy, partly sparse data (plenty of updates, long and short survivals), or
    separable binary data with a margin (long survivals: the cutoff bound picks k > 0)."""
    n_classes = KINDS[kind]
    rng = np.random.default_rng({"binary": 26, "ovr3": 34, "separable": 3}[kind])
    X = rng.normal(size=(10 * N, D)) * 1.5
    X[rng.random(X.shape) < 0.3] = 0.0
    if kind == "separable":
        s = X @ rng.normal(size=D) + 0.2
        keep = np.abs(s) > 2.0
        X, y = X[keep], (s[keep] > 0).astype(np.int64)
    elif n_classes == 2:
        y = (X @ rng.normal(size=D) + 0.8 * rng.normal(size=len(X)) > 0.2).astype(np.int64)
    else:
        W = rng.normal(size=(D, n_classes))
        y = np.argmax(X @ W + 0.8 * rng.normal(size=(len(X), n_classes)), axis=1).astype(np.int64)
    X, y = np.ascontiguousarray(X[:N]), y[:N]
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def radius(X: np.ndarray) -> float:
    """max ||x|| with the bias feature 1 included."""
    return math.sqrt(float((X.astype(np.float64) ** 2).sum(axis=1).max()) + 1.0)


def margin_rule(X: np.ndarray, epochs: int):
    """MarginPerceptron's defaults: horizon m = n * epochs, R = max ||x|| (bias included)."""
    return make_rule("margin", horizon=N * epochs, radius=radius(X))


# name -> (estimator class, its parameters, rule factory (X, epochs), data kind)
CASES = {
    "perceptron-binary": (Perceptron, {}, lambda X, ep: make_rule("perceptron"), "binary"),
    "perceptron-ovr3": (Perceptron, {}, lambda X, ep: make_rule("perceptron"), "ovr3"),
    "margin-binary": (MarginPerceptron, {}, lambda X, ep: margin_rule(X, ep), "binary"),
    "margin-ovr3": (MarginPerceptron, {}, lambda X, ep: margin_rule(X, ep), "ovr3"),
    "pa-binary": (PassiveAggressive, {}, lambda X, ep: make_rule("pa", variant="PA-I", C=1.0), "binary"),
    "pa-ovr3": (PassiveAggressive, {}, lambda X, ep: make_rule("pa", variant="PA-I", C=1.0), "ovr3"),
    "alma-binary": (ALMA, {}, lambda X, ep: make_rule("alma", alpha=0.9, C=math.sqrt(2.0)), "binary"),
    "alma-ovr3": (ALMA, {}, lambda X, ep: make_rule("alma", alpha=0.9, C=math.sqrt(2.0)), "ovr3"),
    "perceptron-separable": (Perceptron, {}, lambda X, ep: make_rule("perceptron"), "separable"),
    "margin-separable": (MarginPerceptron, {}, lambda X, ep: margin_rule(X, ep), "separable"),
    "mira-native3": (MIRA, {"multiclass": "native"}, lambda X, ep: make_rule("mira", beta=0.01, native=True), "ovr3"),
}


def estimator(case: str, conversion, epochs: int, shuffle: bool = False, random_state=0):
    cls, params, _, _ = CASES[case]
    if cls is MarginPerceptron:
        # The same R as the oracle's rule (the measured default is checked separately).
        params = {**params, "radius": radius(data(CASES[case][3])[0])}
    return cls(**params, conversion=conversion, epochs=epochs, shuffle=shuffle, random_state=random_state)


def batch_hypothesis(est) -> np.ndarray:
    return np.hstack([est.coef_, est.intercept_[:, None]])


def fit_dense_and_csr(case: str, conversion, epochs: int):
    X, y = data(CASES[case][3])
    dense = estimator(case, conversion, epochs).fit(X, y)
    csr = estimator(case, conversion, epochs).fit(sp.csr_matrix(X), y)
    return dense, csr


def naive_hypotheses(rule, X, y, K: int, epochs: int, seed: int | None = None):
    """Every hypothesis h_0..h_m, shape (m+1, K, d+1), and the per-round logs.

    ``seed``: visit the rows of each epoch in the estimator's seeded permutation
    (``shuffle=True, random_state=seed``); None: in order."""
    n, d = X.shape
    state = init_state(d, K)

    def hyp():
        coef, intercept = state_coef(state)
        return np.hstack([coef, intercept[:, None]])

    H, mistake, hinge, updated = [hyp()], [], [], []
    for epoch in range(epochs):
        order = np.arange(n) if seed is None else dl_rng.block_generator(seed, "shuffle", epoch).permutation(n)
        for i in order:
            log = learn_chunk(rule, state, X[i:i + 1], y[i:i + 1], fit_intercept=True)
            mistake.append(float(log.mistake[0]))
            hinge.append(float(log.hinge[0]))
            updated.append(bool(log.updated[0]))
            H.append(hyp())
    H = np.array(H)
    H.setflags(write=False)
    losses = {"zero_one": np.array(mistake), "hinge": np.array(hinge)}
    return H, losses, np.array(updated)


@lru_cache(maxsize=None)
def naive_run(case: str, epochs: int, seed: int | None = None):
    _, _, make, kind = CASES[case]
    X, y = data(kind)
    return naive_hypotheses(make(X, epochs), X, y, 1 if KINDS[kind] == 2 else KINDS[kind], epochs, seed)


def tol(want: np.ndarray) -> dict:
    return {"rtol": 1e-12, "atol": 1e-12 * max(1.0, float(np.abs(want).max()))}


# -- brute-force conversions --------------------------------------------------------
def naive_beta(loss_sum: float, count: int, C: float) -> float:
    """Dekel & Singer eq. 2: mean loss + C / sqrt(|J|)."""
    return loss_sum / count + C / math.sqrt(count)


def naive_suffix(H, loss, C):
    m = len(loss)
    betas = np.array([naive_beta(float(loss[a:].sum()), m - a, C) for a in range(m)])
    a = int(np.argmin(betas))  # first a on ties
    return H[a:m].mean(axis=0), a, betas


def naive_tree(H, loss, leaf_size, C):
    """Eq. 3 over leaves {kb..kb+b-1} (the last one partial), padded to a power of two
    with virtual leaves of infinite loss.  A node is (index array or None, loss, count)."""
    m = len(loss)
    nodes = [np.arange(s, min(s + leaf_size, m)) for s in range(0, m, leaf_size)]
    nodes = [(idx, float(loss[idx].sum()), len(idx)) for idx in nodes]
    size = 1 << (len(nodes) - 1).bit_length()
    nodes += [(None, math.inf, leaf_size)] * (size - len(nodes))
    while len(nodes) > 1:
        nxt = []
        for left, right in zip(nodes[::2], nodes[1::2]):
            if left[0] is None or right[0] is None:
                union = (None, math.inf, left[2] + right[2])
            else:
                idx = np.concatenate([left[0], right[0]])
                union = (idx, float(loss[idx].sum()), len(idx))
            bl, br, bu = (naive_beta(n[1], n[2], C) for n in (left, right, union))
            if bl <= br and bl <= bu:
                nxt.append(left)
            elif br <= bl and br <= bu:
                nxt.append(right)
            else:
                nxt.append(union)
        nodes = nxt
    idx = nodes[0][0]
    return H[idx].mean(axis=0), idx


def survivals(updated):
    """(first hypothesis index, rounds used) of every distinct hypothesis of rounds 1..m."""
    out, start = [], 0
    for j, u in enumerate(updated):
        if u:
            out.append((start, j + 1 - start))
            start = j + 1
    if start < len(updated):
        out.append((start, len(updated) - start))
    return out


def naive_cutoff(H, loss, updated, C, delta):
    """Dekel's B_i (identity of hypotheses = no update in between), Theorem 2 with
    delta/m, for every k = 0..max survival."""
    m = len(loss)
    n_upd = np.concatenate([[0], np.cumsum(updated)])  # n_upd[i] = updates in rounds 1..i
    smax = max(s for _, s in survivals(updated))
    log_term = math.log(m ** 2 / delta)
    bounds, sum_bs, Bs = [], [], []
    i = np.arange(m)
    for k in range(smax + 1):
        # h_{i-k} = ... = h_i  <=>  no update on rounds i-k+1..i (log entries i-k..i-1)
        B = (i >= k) & (n_upd[i] - n_upd[np.maximum(i - k, 0)] == 0)
        B[0] = True
        sum_b = int(B.sum())
        lbar = float(loss[B].sum()) / sum_b  # sum_i L_i with L_i = B_{i-1} loss(h_{i-1}; example i)
        bounds.append(lbar + math.sqrt(2 * C * log_term * lbar / sum_b) + 7 * C * log_term / sum_b)
        sum_bs.append(sum_b)
        Bs.append(B)
    k = int(np.argmin(bounds))  # first on ties
    want = (Bs[k][:, None, None] * H[:m]).sum(axis=0) / sum_bs[k]
    return want, k, np.array(bounds), np.array(sum_bs)


def naive_survivor(H, updated):
    runs = survivals(updated)
    start, length = runs[int(np.argmax([s for _, s in runs]))]  # earliest on ties
    return H[start], start, length


CASE_IDS = list(CASES)
EPOCHS = [1, 2]


# -- 1. every conversion against the oracle ----------------------------------------
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_oracle_hypotheses_change_only_on_updates(case, epochs):
    H, _, updated = naive_run(case, epochs)
    assert len(updated) == N * epochs and H.shape[0] == N * epochs + 1
    assert np.array_equal(H[1:][~updated], H[:-1][~updated])
    assert 3 <= updated.sum() < len(updated)  # the data exercises both kinds of round


@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_last(case, epochs):
    H, _, _ = naive_run(case, epochs)
    dense, csr = fit_dense_and_csr(case, Last(), epochs)
    assert np.array_equal(batch_hypothesis(dense), batch_hypothesis(csr))
    assert np.array_equal(batch_hypothesis(dense), H[-1])


@pytest.mark.parametrize("conversion", ["average", Average()], ids=["name", "object"])
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_average(case, epochs, conversion):
    H, _, _ = naive_run(case, epochs)
    want = H.mean(axis=0)  # (1/(m+1)) sum_{i=0}^{m} h_i, h_m included
    dense, csr = fit_dense_and_csr(case, conversion, epochs)
    got = batch_hypothesis(dense)
    assert np.array_equal(got, batch_hypothesis(csr))
    np.testing.assert_allclose(got, want, **tol(want))


TREES = {"leaf1": Tree(leaf_size=1), "leaf7": Tree(leaf_size=7), "leaf7-hinge": Tree(leaf_size=7, loss="hinge"),
         "leaf1-C1": Tree(C=1.0, leaf_size=1), "leaf1-C0": Tree(C=0.0, leaf_size=1), "leaf64": Tree(leaf_size=64),
         "leaf1000": Tree(leaf_size=1000), "leaf75": Tree(leaf_size=75), "leaf100": Tree(leaf_size=100)}


@pytest.mark.parametrize("tree", list(TREES))
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_tree(case, epochs, tree):
    conv = TREES[tree]
    H, losses, _ = naive_run(case, epochs)
    want, idx = naive_tree(H, losses[conv.loss], conv.leaf_size, conv.C)
    dense, csr = fit_dense_and_csr(case, conv, epochs)
    got = batch_hypothesis(dense)
    assert np.array_equal(got, batch_hypothesis(csr))
    np.testing.assert_allclose(got, want, **tol(want))
    n_leaves = math.ceil(len(losses[conv.loss]) / conv.leaf_size)
    assert isinstance(dense.summary_.tree, TreeSummary)
    assert dense.summary_.tree.peak_nodes <= math.log2(n_leaves) + 1


def test_tree_default_is_single_hypothesis_leaves_for_small_models():
    H, losses, _ = naive_run("perceptron-binary", 1)
    want, _ = naive_tree(H, losses["zero_one"], 1, 3.0)
    est, _ = fit_dense_and_csr("perceptron-binary", "tree", 1)
    assert est.summary_.leaf_size == 1
    assert est.summary_.C == 3.0
    np.testing.assert_allclose(batch_hypothesis(est), want, **tol(want))


# C = 0: beta is the mean loss alone, so exact ties (first a wins) are common.
SUFFIXES = {"default": Suffix(), "C1": Suffix(C=1.0), "C0": Suffix(C=0.0), "hinge": Suffix(loss="hinge")}


@pytest.mark.parametrize("suffix", list(SUFFIXES))
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_suffix(case, epochs, suffix):
    conv = SUFFIXES[suffix]
    H, losses, _ = naive_run(case, epochs)
    want, a, betas = naive_suffix(H, losses[conv.loss], conv.C)
    dense, csr = fit_dense_and_csr(case, conv, epochs)
    got = batch_hypothesis(dense)
    assert np.array_equal(got, batch_hypothesis(csr))
    assert dense.summary_.start_ == a
    np.testing.assert_allclose(dense.summary_.betas_, betas, rtol=1e-12)
    np.testing.assert_allclose(got, want, **tol(want))


# Small C weighs the empirical loss over the sample size: k* > 0 on most cases.
CUTOFFS = {"zero_one": Cutoff(), "hinge": Cutoff(loss="hinge"), "zero_one-d0.3-C2": Cutoff(delta=0.3, C=2.0),
           "zero_one-C1e-3": Cutoff(C=1e-3), "hinge-d0.5-C0.01": Cutoff(delta=0.5, C=0.01, loss="hinge")}


@pytest.mark.parametrize("cutoff", list(CUTOFFS))
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_cutoff(case, epochs, cutoff):
    conv = CUTOFFS[cutoff]
    H, losses, updated = naive_run(case, epochs)
    X, _ = data(CASES[case][3])
    C = conv.C if conv.C is not None else (1.0 if conv.loss == "zero_one" else radius(X) + 1.0)
    want, k, bounds, sum_b = naive_cutoff(H, losses[conv.loss], updated, C, conv.delta)
    dense, csr = fit_dense_and_csr(case, conv, epochs)
    got = batch_hypothesis(dense)
    assert np.array_equal(got, batch_hypothesis(csr))
    assert dense.summary_.C == pytest.approx(C, rel=1e-14)
    assert dense.summary_.k_ == k
    assert np.array_equal(dense.summary_.sum_b_, sum_b)
    assert dense.summary_.bounds_.shape == bounds.shape
    np.testing.assert_allclose(dense.summary_.bounds_, bounds, rtol=1e-12)
    np.testing.assert_allclose(got, want, **tol(want))


def test_cutoff_breaks_ties_towards_the_first_k():
    """A learner that never errs never updates: k = 0 and k = 1 then give the same
    B-sums (B_0 replaces h_0's position 0), the smallest bound, and k* must be the first."""
    m = 500
    loss = np.zeros(m)
    tr = CutoffTracker(DELTA, 2.0, "hinge")
    tr.observe(_FakeState(0), RoundLog(np.zeros(m, np.uint8), loss, np.zeros(m, np.uint8)), 0, m, 0)
    tr.plan(_FakeState(m))
    assert tr.bounds_[0] == tr.bounds_[1] == tr.bounds_.min()
    assert tr.k_ == 0
    assert tr.sum_b_.tolist() == [m, m, *range(m - 1, 0, -1)]


def test_cutoff_cases_exercise_positive_cutoffs():
    """k* > 0 (a strict subset of the hypotheses, weighted by survival) is covered:
    with the default bound on separable data, and with a small C on most cases."""
    for epochs in EPOCHS:
        est, _ = fit_dense_and_csr("perceptron-separable", "cutoff", epochs)
        assert est.summary_.k_ > 0
    ks = [fit_dense_and_csr(case, CUTOFFS["zero_one-C1e-3"], epochs)[0].summary_.k_
          for case in CASE_IDS for epochs in EPOCHS]
    assert sum(k > 0 for k in ks) >= 0.75 * len(ks)


@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("case", CASE_IDS)
def test_survivor(case, epochs):
    H, _, updated = naive_run(case, epochs)
    want, start, length = naive_survivor(H, updated)
    dense, csr = fit_dense_and_csr(case, Survivor(), epochs)
    got = batch_hypothesis(dense)
    assert np.array_equal(got, batch_hypothesis(csr))
    assert (dense.summary_.best_start, dense.summary_.best_len) == (start, length)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("name,obj", [("last", Last()), ("average", Average()), ("tree", Tree()),
                                      ("suffix", Suffix()), ("cutoff", Cutoff()), ("survivor", Survivor())],
                         ids=["last", "average", "tree", "suffix", "cutoff", "survivor"])
def test_conversion_names_are_the_default_objects(name, obj):
    X, y = data("binary")
    by_name = estimator("pa-binary", name, 2).fit(X, y)
    by_obj = estimator("pa-binary", obj, 2).fit(X, y)
    assert np.array_equal(batch_hypothesis(by_name), batch_hypothesis(by_obj))


def test_cutoff_hinge_default_C_uses_the_measured_radius():
    """C = R + 1 with R = max ||x|| (bias included): measured for MarginPerceptron's
    radius_ and for a learner without a radius."""
    X, y = data("binary")
    R = radius(X)
    margin = MarginPerceptron(conversion=Cutoff(loss="hinge"), epochs=1, shuffle=False).fit(X, y)
    assert margin.radius_ == pytest.approx(R, rel=1e-14)
    assert margin.horizon_ == N
    assert margin.summary_.C == margin.radius_ + 1.0
    perc = Perceptron(conversion=Cutoff(loss="hinge"), epochs=1, shuffle=False).fit(X, y)
    assert perc.summary_.C == pytest.approx(R + 1.0, rel=1e-14)
    assert Perceptron(conversion="cutoff", epochs=1, shuffle=False).fit(X, y).summary_.C == 1.0
    # Without an intercept there is no bias feature in R.
    no_bias = Perceptron(conversion=Cutoff(loss="hinge"), epochs=1, shuffle=False, fit_intercept=False).fit(X, y)
    assert no_bias.summary_.C == pytest.approx(math.sqrt(R ** 2 - 1.0) + 1.0, rel=1e-14)


SHUFFLED = {"tree": Tree(leaf_size=7), "suffix": Suffix(), "cutoff": Cutoff(C=1e-3), "survivor": Survivor(),
            "average": Average()}


@pytest.mark.parametrize("conversion", list(SHUFFLED))
@pytest.mark.parametrize("case", ["perceptron-binary", "alma-ovr3", "margin-separable"])
def test_shuffled_epochs_replay_the_same_hypotheses(case, conversion):
    """shuffle=True: every epoch visits a seeded permutation, and the replay of a
    two-pass conversion must see the same hypotheses as its first pass."""
    conv = SHUFFLED[conversion]
    H, losses, updated = naive_run(case, 2, dl_rng.normalize_seed(7))
    if conversion == "tree":
        want, _ = naive_tree(H, losses["zero_one"], 7, 3.0)
    elif conversion == "suffix":
        want, a, _ = naive_suffix(H, losses["zero_one"], 3.0)
    elif conversion == "cutoff":
        want, k, bounds, _ = naive_cutoff(H, losses["zero_one"], updated, 1e-3, DELTA)
    elif conversion == "survivor":
        want, start, length = naive_survivor(H, updated)
    else:
        want = H.mean(axis=0)
    X, y = data(CASES[case][3])
    est = estimator(case, conv, 2, shuffle=True, random_state=7).fit(X, y)
    np.testing.assert_allclose(batch_hypothesis(est), want, **tol(want))
    if conversion == "cutoff":
        assert est.summary_.k_ == k
        np.testing.assert_allclose(est.summary_.bounds_, bounds, rtol=1e-12)


@pytest.mark.parametrize("random_state", [None, np.random.RandomState(3), np.random.default_rng(4)],
                         ids=["None", "RandomState", "Generator"])
def test_unseeded_shuffle_replays_consistently(random_state):
    """Whatever the seed, pass 2 of cutoff/suffix adds exactly the hypotheses pass 1 chose."""
    X, y = data("binary")
    cut = estimator("perceptron-binary", Cutoff(C=1e-3), 2, shuffle=True, random_state=random_state).fit(X, y)
    assert cut.summary_.acc.count == cut.summary_.sum_b_[cut.summary_.k_]
    suf = estimator("perceptron-binary", "suffix", 2, shuffle=True, random_state=random_state).fit(X, y)
    assert suf.summary_.acc.count == 2 * N - suf.summary_.start_


def pocket_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A perceptron run (1 feature + bias) whose longest survivor starts at round
    65, i.e. is h_64: round 1 updates w = 0 to (1, 1); rounds 2..64 keep it except
    the last (x = -1, y = 0 has margin 0: an update to (2, 0)); (2, 0) then
    classifies everything."""
    X, y = np.ones((n, 1)), np.ones(n, np.int64)
    X[63], y[63] = -1.0, 0
    X[64::3], y[64::3] = -1.0, 0
    return X, y


def always_wrong_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every perceptron round updates (w flips between 0 and (1, 1)): every
    hypothesis survives one round, so the earliest, h_0 = 0, is the survivor."""
    return np.ones((n, 1)), (np.arange(n) % 2 == 0).astype(np.int64)


BOUNDARY_CONVERSIONS = {"survivor": Survivor(), "cutoff": Cutoff(C=1e-3), "suffix": Suffix(),
                        "tree7": Tree(leaf_size=7), "average": Average()}


@pytest.mark.parametrize("conversion", list(BOUNDARY_CONVERSIONS))
@pytest.mark.parametrize("source", ["memory", "store64", "store32", "store7"])
@pytest.mark.parametrize("n,epochs", [(160, 1), (64, 2), (64, 3)])
def test_survivor_starting_on_a_block_or_epoch_boundary(tmp_path, n, epochs, source, conversion):
    """h_64 is the longest survivor; round 65 opens a block (block_rows 64, 32) or an
    epoch (n = 64): the replay must capture it exactly there."""
    from distlearn.data.store import write_dataset

    X, y = pocket_data(n)
    H, losses, updated = naive_hypotheses(make_rule("perceptron"), X, y, 1, epochs)
    assert survivals(updated)[:3] == [(0, 1), (1, 63), (64, n * epochs - 64)]
    conv = BOUNDARY_CONVERSIONS[conversion]
    est = Perceptron(conversion=conv, epochs=epochs, shuffle=False)
    if source == "memory":
        est.fit(X, y)
    else:
        write_dataset(tmp_path / "p.zarr", [(X, y)], block_rows=int(source[5:]), dtype="float64")
        est.fit(tmp_path / "p.zarr")
    got = batch_hypothesis(est)
    if conversion == "survivor":
        assert (est.summary_.best_start, est.summary_.best_len) == (64, n * epochs - 64)
        assert got.tolist() == [[2.0, 0.0]] == H[64].tolist()
    elif conversion == "cutoff":
        want, k, bounds, _ = naive_cutoff(H, losses["zero_one"], updated, 1e-3, DELTA)
        assert est.summary_.k_ == k
        np.testing.assert_allclose(est.summary_.bounds_, bounds, rtol=1e-12)
        np.testing.assert_allclose(got, want, **tol(want))
    elif conversion == "suffix":
        want, a, _ = naive_suffix(H, losses["zero_one"], 3.0)
        assert est.summary_.start_ == a
        np.testing.assert_allclose(got, want, **tol(want))
    elif conversion == "tree7":
        want, _ = naive_tree(H, losses["zero_one"], 7, 3.0)
        np.testing.assert_allclose(got, want, **tol(want))
    else:
        np.testing.assert_allclose(got, H.mean(axis=0), **tol(H))


@pytest.mark.parametrize("source", ["memory", "store5"])
def test_survivor_is_h0_when_every_round_updates(tmp_path, source):
    from distlearn.data.store import write_dataset

    X, y = always_wrong_data(40)
    est = Perceptron(conversion="survivor", epochs=2, shuffle=False)
    if source == "memory":
        est.fit(X, y)
    else:
        write_dataset(tmp_path / "w.zarr", [(X, y)], block_rows=5, dtype="float64")
        est.fit(tmp_path / "w.zarr")
    assert est.n_updates_ == 80
    assert (est.summary_.best_start, est.summary_.best_len) == (0, 1)
    assert batch_hypothesis(est).tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize("conversion", ["last", "average", "tree", "tree2", "suffix", "cutoff", "survivor"])
@pytest.mark.parametrize("n,epochs", [(2, 1), (3, 1), (2, 2), (5, 1)])
def test_tiny_runs(n, epochs, conversion):
    """m = 2..5 rounds: one or two leaves, one-element suffixes, a single survivor group."""
    X, y = data("binary")
    X, y = X[:n].copy(), y[:n].copy()
    y[:2] = [0, 1]
    H, losses, updated = naive_hypotheses(make_rule("pa"), X, y, 1, epochs)
    conv = Tree(leaf_size=2) if conversion == "tree2" else conversion
    est = PassiveAggressive(conversion=conv, epochs=epochs, shuffle=False).fit(X, y)
    want = {
        "last": lambda: H[-1],
        "average": lambda: H.mean(axis=0),
        "tree": lambda: naive_tree(H, losses["zero_one"], 1, 3.0)[0],
        "tree2": lambda: naive_tree(H, losses["zero_one"], 2, 3.0)[0],
        "suffix": lambda: naive_suffix(H, losses["zero_one"], 3.0)[0],
        "cutoff": lambda: naive_cutoff(H, losses["zero_one"], updated, 1.0, DELTA)[0],
        "survivor": lambda: naive_survivor(H, updated)[0],
    }[conversion]()
    np.testing.assert_allclose(batch_hypothesis(est), want, **tol(want))


@pytest.mark.parametrize("conversion", ["last", "average", "tree", "suffix", "cutoff", "survivor"])
def test_fitted_conversions_pickle_and_clone(conversion):
    """Fitted estimators travel through pickle (Dask) with their summary; clone()
    copies the conversion parameter and refits to the same model."""
    from sklearn.base import clone

    X, y = data("ovr3")
    est = estimator("pa-ovr3", conversion, 2).fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(batch_hypothesis(again), batch_hypothesis(est))
    assert np.array_equal(again.predict(X), est.predict(X))
    assert type(again.summary_) is type(est.summary_)
    for attr in ("k_", "bounds_", "start_", "betas_", "best_start", "best_len"):
        assert np.array_equal(getattr(again.summary_, attr, None), getattr(est.summary_, attr, None))
    refit = clone(est).fit(X, y)
    assert np.array_equal(batch_hypothesis(refit), batch_hypothesis(est))


# -- 2. store input ---------------------------------------------------------------
@pytest.mark.parametrize("epochs", EPOCHS)
@pytest.mark.parametrize("conversion", ["tree", "cutoff", "suffix", Tree(leaf_size=7), Cutoff(C=1e-3), "survivor",
                                        "average"],
                         ids=["tree", "cutoff", "suffix", "tree-leaf7", "cutoff-C1e-3", "survivor", "average"])
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "margin-binary"])
def test_store_input_equals_in_memory(tmp_path, case, conversion, epochs):
    from distlearn.data.store import write_dataset

    X, y = data(CASES[case][3])
    write_dataset(tmp_path / "d.zarr", [(X, y)], block_rows=64, dtype="float64")
    mem = estimator(case, conversion, epochs).fit(X, y)
    store = estimator(case, conversion, epochs).fit(tmp_path / "d.zarr")
    want = batch_hypothesis(mem)
    np.testing.assert_allclose(batch_hypothesis(store), want, **tol(want))
    for attr in ("k_", "start_"):
        assert getattr(store.summary_, attr, None) == getattr(mem.summary_, attr, None)
    assert (store.t_, store.n_updates_, store.online_errors_) == (mem.t_, mem.n_updates_, mem.online_errors_)


@pytest.mark.parametrize("conversion", ["average", "tree", Tree(leaf_size=7)], ids=["average", "tree", "tree-leaf7"])
def test_partial_fit_on_store_blocks_equals_fit(tmp_path, conversion):
    from distlearn.data.store import write_dataset

    X, y = data("ovr3")
    write_dataset(tmp_path / "d.zarr", [(X, y)], block_rows=64, dtype="float64")
    full = estimator("pa-ovr3", conversion, 1).fit(X, y)
    part = estimator("pa-ovr3", conversion, 1).partial_fit(tmp_path / "d.zarr")
    want = batch_hypothesis(full)
    np.testing.assert_allclose(batch_hypothesis(part), want, **tol(want))


# -- 3. summaries: merge laws and pickling ------------------------------------------
def random_leaves(seed: int, n: int, continuous: bool) -> list[TreeNode]:
    rng = np.random.default_rng(seed)
    loss = rng.random(n) * 2 if continuous else rng.integers(0, 2, n).astype(np.float64)
    return [TreeNode(0, rng.normal(size=3), float(loss[i]), 1) for i in range(n)]


def one_pass(leaves: list[TreeNode], C: float) -> TreeSummary:
    s = TreeSummary(C)
    for node in leaves:
        s.push(node)
    return s


def node_list(s: TreeSummary) -> list[tuple]:
    return [(n.level, n.count, n.loss, n.total.tolist()) for n in s.nodes]


def aligned(left_blocks: int, right_blocks: int) -> bool:
    """The left block count is a multiple of 2**(top level of the right, in blocks)."""
    return left_blocks % (1 << (right_blocks.bit_length() - 1)) == 0


ALIGNED_TRIPLES = [(a, b, c) for a in range(1, 9) for b in range(1, 9) for c in range(1, 9)
                   if aligned(a, b) and aligned(a + b, c) and aligned(b, c) and aligned(a, b + c)]
TREE_C = st.sampled_from([0.0, 0.5, 3.0])


@settings(max_examples=50, deadline=None)
@given(j=st.integers(0, 3), n_blocks=st.integers(1, 9), seed=st.integers(0, 2**32 - 1), C=TREE_C,
       continuous=st.booleans())
def test_tree_merge_of_aligned_blocks_equals_one_pass(j, n_blocks, seed, C, continuous):
    b = 1 << j
    leaves = random_leaves(seed, b * n_blocks, continuous)
    blocks = [one_pass(leaves[i * b:(i + 1) * b], C) for i in range(n_blocks)]
    want = one_pass(leaves, C)
    # Left to right, as a sequential reduction does.
    folded = TreeSummary(C)
    for blk in blocks:
        folded = folded.merge(blk)
    assert node_list(folded) == node_list(want)
    assert np.array_equal(folded.finalize(), want.finalize())
    # Pairwise, as a tree reduction does (the left operand always holds 2**r blocks).
    level = blocks
    while len(level) > 1:
        level = [level[i].merge(level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    assert node_list(level[0]) == node_list(want)
    assert np.array_equal(level[0].finalize(), want.finalize())


@settings(max_examples=50, deadline=None)
@given(j=st.integers(0, 2), sizes=st.sampled_from(ALIGNED_TRIPLES), seed=st.integers(0, 2**32 - 1), C=TREE_C,
       continuous=st.booleans())
def test_tree_merge_is_associative_for_aligned_blocks(j, sizes, seed, C, continuous):
    b = 1 << j
    na, nb, nc = sizes
    leaves = random_leaves(seed, b * (na + nb + nc), continuous)
    A = one_pass(leaves[:b * na], C)
    B = one_pass(leaves[b * na:b * (na + nb)], C)
    Cs = one_pass(leaves[b * (na + nb):], C)
    left_first = A.merge(B).merge(Cs)
    right_first = A.merge(B.merge(Cs))
    want = one_pass(leaves, C)
    assert node_list(left_first) == node_list(right_first) == node_list(want)
    assert np.array_equal(left_first.finalize(), right_first.finalize())
    assert np.array_equal(left_first.finalize(), want.finalize())
    # The empty summary is an identity on both sides.
    assert node_list(TreeSummary(C).merge(A)) == node_list(A)
    assert node_list(A.merge(TreeSummary(C))) == node_list(A)


def test_aligned_triples_cover_interesting_shapes():
    assert (4, 2, 2) in ALIGNED_TRIPLES and (2, 2, 1) in ALIGNED_TRIPLES and (8, 4, 3) in ALIGNED_TRIPLES
    assert (1, 1, 1) not in ALIGNED_TRIPLES  # 1 block merged with 2: not aligned


def tree_trackers_over(rule, X, y, cuts, leaf_size, C):
    """One TreeTracker per block of rounds [cuts[i], cuts[i+1]) of one learner run."""
    state = init_state(X.shape[1], 1)
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        tr = TreeTracker(C, leaf_size)
        tr.begin(state)
        tr.run_chunk(rule, state, X[lo:hi], y[lo:hi], None, True)
        out.append(tr.summary(state))
    return out, state


@settings(max_examples=50, deadline=None)
@given(leaf_exp=st.integers(0, 2), block_exp=st.integers(0, 4), C=TREE_C)
def test_tree_tracker_blocks_merge_to_the_one_pass_tracker(leaf_exp, block_exp, C):
    """Blocks of equal power-of-two leaf counts from real learner runs, merged in
    order, give the same summary as one tracker over the whole run."""
    X, y = data("binary")
    leaf, rows = 1 << leaf_exp, (1 << leaf_exp) * (1 << block_exp)
    rule = make_rule("perceptron")
    n = (N // rows) * rows
    (whole,), _ = tree_trackers_over(rule, X, y, [0, n], leaf, C)
    blocks, _ = tree_trackers_over(rule, X, y, list(range(0, n + 1, rows)), leaf, C)
    merged = blocks[0]
    for blk in blocks[1:]:
        merged = merged.merge(blk)
    assert node_list(merged) == node_list(whole)
    assert np.array_equal(merged.finalize(), whole.finalize())


AVG_VEC = st.lists(st.integers(-1000, 1000), min_size=4, max_size=4).map(lambda v: np.array(v, np.float64))
AVG_SUMMARY = st.builds(AverageSummary, total=AVG_VEC, count=st.integers(1, 50), last=AVG_VEC)


@settings(max_examples=50, deadline=None)
@given(a=AVG_SUMMARY, b=AVG_SUMMARY, c=AVG_SUMMARY)
def test_average_merge_is_associative_with_empty_identity(a, b, c):
    """Integer-valued vectors: float sums are exact, so 'equal' is bit-for-bit."""
    left, right = a.merge(b).merge(c), a.merge(b.merge(c))
    assert np.array_equal(left.total, right.total) and left.count == right.count
    assert np.array_equal(left.last, right.last) and np.array_equal(left.last, c.last)
    assert np.array_equal(left.finalize(), right.finalize())
    for s in (a, left):
        for merged in (AverageSummary().merge(s), s.merge(AverageSummary())):
            assert np.array_equal(merged.total, s.total) and merged.count == s.count
            assert np.array_equal(merged.last, s.last)
            assert np.array_equal(merged.finalize(), s.finalize())


@settings(max_examples=50, deadline=None)
@given(m=st.integers(1, 60), data_=st.data())
def test_average_block_summaries_merge_to_one_pass(m, data_):
    rng = np.random.default_rng(data_.draw(st.integers(0, 2**32 - 1)))
    H = rng.integers(-100, 100, size=(m + 1, 2, 3)).astype(np.float64)  # h_0..h_m
    cuts = sorted(set(data_.draw(st.lists(st.integers(1, m - 1), max_size=6)) if m > 1 else []))
    cuts = [0, *cuts, m]
    merged = AverageSummary()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        merged = merged.merge(AverageSummary(H[lo:hi].sum(axis=0), hi - lo, H[hi]))
    whole = AverageSummary(H[:m].sum(axis=0), m, H[m])
    assert merged.count == m
    assert np.array_equal(merged.total, whole.total) and np.array_equal(merged.last, whole.last)
    assert np.array_equal(merged.finalize(), H.mean(axis=0))


@settings(max_examples=50, deadline=None)
@given(cuts=st.lists(st.integers(1, N - 1), max_size=5, unique=True).map(sorted))
def test_average_tracker_blocks_merge_to_one_pass(cuts):
    X, y = data("ovr3")
    rule = make_rule("pa")
    state = init_state(D, 3)
    merged = AverageSummary()
    for lo, hi in zip([0, *cuts], [*cuts, N]):
        tr = AverageTracker()
        tr.begin(state)
        tr.run_chunk(rule, state, X[lo:hi], y[lo:hi], None, True)
        merged = merged.merge(tr.summary(state))
    H, _, _ = naive_run("pa-ovr3", 1)
    assert merged.count == N
    np.testing.assert_allclose(merged.finalize(), H.mean(axis=0), **tol(H))


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), C=TREE_C)
def test_pickle_round_trip_of_summaries(seed, n, C):
    tree = one_pass(random_leaves(seed, n, True), C)
    tree2 = pickle.loads(pickle.dumps(tree))
    assert np.array_equal(tree2.finalize(), tree.finalize())
    assert node_list(tree2) == node_list(tree) and tree2.C == tree.C and tree2.peak_nodes == tree.peak_nodes

    rng = np.random.default_rng(seed)
    avg = AverageSummary(rng.normal(size=(2, 4)), n, rng.normal(size=(2, 4)))
    assert np.array_equal(pickle.loads(pickle.dumps(avg)).finalize(), avg.finalize())

    groups = CutoffGroups(m=n * 10, loss0=1.0)
    for s in rng.integers(1, 12, size=n):
        groups.add(int(s), float(rng.integers(0, 2)))
    groups.extra[3] = 0.5
    groups2 = pickle.loads(pickle.dumps(groups))
    for got, want in zip(cutoff_bounds(groups2, 1.0, DELTA), cutoff_bounds(groups, 1.0, DELTA)):
        assert np.array_equal(got, want)


# -- 4. memory -------------------------------------------------------------------
def test_tree_summary_keeps_log_m_nodes():
    m = 10 ** 6
    rng = np.random.default_rng(0)
    losses = rng.integers(0, 2, m).astype(float).tolist()
    tree = TreeSummary(3.0)
    one = np.ones(1)
    for i in range(m):
        tree.push(TreeNode(0, one, losses[i], 1))
    assert tree.peak_nodes <= math.log2(m) + 1
    # A binary counter: after leaf i the stack holds popcount(i) nodes.
    assert len(tree.nodes) == bin(m).count("1")
    assert tree.peak_nodes == max(bin(i).count("1") for i in range(1, m + 1)) == 19
    node = tree.chosen()
    assert 1 <= node.count <= m
    assert tree.finalize().tolist() == [1.0]  # every leaf is the vector [1]


class _FakeState:
    def __init__(self, age: int) -> None:
        self.age = np.array([age], np.int64)
        self.n_rounds = np.array([0], np.int64)


def feed_cutoff(updated: np.ndarray, loss: np.ndarray, chunk: int) -> tuple[CutoffTracker, int]:
    """Observe a synthetic run in chunks; returns the tracker and the final age."""
    tr = CutoffTracker(DELTA, 1.0)
    age = 0
    for lo in range(0, len(updated), chunk):
        upd = updated[lo:lo + chunk].astype(np.uint8)
        log = RoundLog((loss[lo:lo + chunk] > 0).astype(np.uint8), np.zeros(len(upd)), upd)
        tr.observe(_FakeState(age), log, 0, len(upd), age)
        last = np.flatnonzero(upd)
        age = len(upd) - 1 - int(last[-1]) if len(last) else age + len(upd)
    return tr, age


def bincount_bounds(updated: np.ndarray, loss: np.ndarray, C: float, delta: float):
    """O(m) oracle: B_i = [age_i >= k] (+ B_0), from the age of each round's hypothesis."""
    m = len(updated)
    idx = np.arange(m)
    last_upd = np.maximum.accumulate(np.where(updated, idx, -1))
    prev = np.concatenate([[-1], last_upd[:-1]])
    age = idx - prev - 1
    smax = int(age.max()) + 1  # the longest survival (the open hypothesis included)
    cnt = np.bincount(age, minlength=smax + 1).astype(float)
    lsum = np.bincount(age, weights=loss, minlength=smax + 1)
    ge_cnt = np.cumsum(cnt[::-1])[::-1]
    ge_loss = np.cumsum(lsum[::-1])[::-1]
    ks = np.arange(len(cnt))
    sum_b = ge_cnt + (ks > 0)
    sum_l = ge_loss + np.where(ks > 0, loss[0], 0.0)
    log_term = math.log(m ** 2 / delta)
    lbar = sum_l / sum_b
    return lbar + np.sqrt(2 * C * log_term * lbar / sum_b) + 7 * C * log_term / sum_b, sum_b


@pytest.mark.parametrize("kind", ["decaying", "staircase"])
def test_cutoff_tracker_keeps_sqrt_2m_groups(kind):
    m = 10 ** 6
    rng = np.random.default_rng(1)
    if kind == "decaying":  # a learner whose update rate decays like 1/sqrt(t)
        t = np.arange(1, m + 1)
        updated = rng.random(m) < np.minimum(1.0, 2.0 / np.sqrt(t))
        loss = updated * 1.0  # conservative: loss exactly on the updates
    else:  # the worst case: survival times 1, 2, 3, ... all distinct
        ends = np.cumsum(np.arange(1, 1500))
        ends = ends[ends <= m] - 1
        updated = np.zeros(m, bool)
        updated[ends] = True
        loss = updated * 1.0
    tr, age = feed_cutoff(updated, loss, chunk=10_000)
    assert tr.peak_groups <= math.sqrt(2 * m)
    assert tr.peak_groups >= tr.groups.n_groups > 10
    if kind == "staircase":
        assert tr.peak_groups == len(ends) > 1400  # the bound is nearly tight
    tr.plan(_FakeState(age))
    want, sum_b = bincount_bounds(updated, loss, 1.0, DELTA)
    assert tr.bounds_.shape == want.shape
    assert np.array_equal(tr.sum_b_, sum_b)
    assert sum_b[-1] == 1  # k = the longest survival: only B_0 is left
    np.testing.assert_allclose(tr.bounds_, want, rtol=1e-12)


# -- 5. partial_fit ---------------------------------------------------------------
PIECES = [0, 1, 37, 38, 150, 251, N]


@pytest.mark.parametrize("conversion", ["average", "tree", Tree(leaf_size=1), Tree(leaf_size=7), "last"],
                         ids=["average", "tree", "tree-leaf1", "tree-leaf7", "last"])
@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "mira-native3"])
def test_partial_fit_in_pieces_equals_fit(case, conversion):
    X, y = data(CASES[case][3])
    full = estimator(case, conversion, 1).fit(X, y)
    part = estimator(case, conversion, 1)
    for lo, hi in zip(PIECES[:-1], PIECES[1:]):
        Xp = sp.csr_matrix(X[lo:hi]) if lo % 2 else X[lo:hi]
        part.partial_fit(Xp, y[lo:hi], classes=np.unique(y))
    want = batch_hypothesis(full)
    np.testing.assert_allclose(batch_hypothesis(part), want, **tol(want))
    assert (part.t_, part.n_updates_, part.online_errors_) == (full.t_, full.n_updates_, full.online_errors_)


@pytest.mark.parametrize("conversion", ["average", Tree(leaf_size=7), Tree(leaf_size=1)],
                         ids=["average", "tree-leaf7", "tree-leaf1"])
def test_failed_partial_fit_leaves_the_conversion_untouched(conversion):
    """A NaN in row 20 of a piece: the call fails, and the summary is as before it
    (the rounds it ran before the NaN are forgotten), so continuing equals a run
    without that piece."""
    X, y = data("binary")
    bad = X[100:150].copy()
    bad[20, 1] = np.nan
    full = estimator("perceptron-binary", conversion, 1)
    part = estimator("perceptron-binary", conversion, 1)
    for lo, hi in [(0, 33), (33, 100)]:
        full.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
        part.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
    before = batch_hypothesis(part)
    with pytest.raises(ValueError, match="NaN"):
        part.partial_fit(bad, y[100:150])
    assert np.array_equal(batch_hypothesis(part), before) and part.t_ == 100
    full.partial_fit(X[150:], y[150:])
    part.partial_fit(X[150:], y[150:])
    want = batch_hypothesis(full)
    np.testing.assert_allclose(batch_hypothesis(part), want, **tol(want))


@pytest.mark.parametrize("conversion", ["suffix", "cutoff", "survivor", Suffix(), Cutoff(delta=0.1), Survivor()],
                         ids=["suffix", "cutoff", "survivor", "Suffix()", "Cutoff()", "Survivor()"])
def test_partial_fit_rejects_two_pass_conversions(conversion):
    X, y = data("binary")
    est = Perceptron(conversion=conversion)
    with pytest.raises(ValueError, match="conversion"):
        est.partial_fit(X, y)
    assert not hasattr(est, "coef_")
    # Switching a fitted one-pass model to a two-pass conversion is refused too, and
    # the model is left as it was.
    est = Perceptron(conversion="average", shuffle=False).partial_fit(X[:100], y[:100])
    before = batch_hypothesis(est)
    est.set_params(conversion=conversion)
    with pytest.raises(ValueError, match="partial_fit"):
        est.partial_fit(X[100:], y[100:])
    assert np.array_equal(batch_hypothesis(est), before) and est.t_ == 100


# -- 6. parameter errors -----------------------------------------------------------
@pytest.mark.parametrize("make,name", [
    (lambda: Cutoff(delta=2), "delta"),
    (lambda: Cutoff(delta=0), "delta"),
    (lambda: Cutoff(delta=1.0), "delta"),
    (lambda: Cutoff(delta=float("nan")), "delta"),
    (lambda: Cutoff(delta=True), "delta"),
    (lambda: Cutoff(C=0.0), "C"),
    (lambda: Cutoff(C=-1.0), "C"),
    (lambda: Cutoff(loss="squared"), "loss"),
    (lambda: Tree(leaf_size=0), "leaf_size"),
    (lambda: Tree(leaf_size=-3), "leaf_size"),
    (lambda: Tree(leaf_size=2.5), "leaf_size"),
    (lambda: Tree(leaf_size=True), "leaf_size"),
    (lambda: Tree(leaf_size=np.bool_(True)), "leaf_size"),
    (lambda: Tree(leaf_size="big"), "leaf_size"),
    (lambda: Tree(C=-1.0), "C"),
    (lambda: Tree(C=float("nan")), "C"),
    (lambda: Tree(loss="log"), "loss"),
    (lambda: Suffix(C=-0.5), "C"),
    (lambda: Suffix(loss="hinge2"), "loss"),
])
def test_bad_conversion_parameters_raise(make, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        make()


@pytest.mark.parametrize("conversion", ["foo", "Trees", Tree, 3, None])  # "Tree" is "tree" (any case)
def test_unknown_conversion_raises_naming_the_parameter(conversion):
    X, y = data("binary")
    with pytest.raises(ValueError, match="conversion"):
        Perceptron(conversion=conversion).fit(X, y)
    with pytest.raises(ValueError, match="conversion"):
        Perceptron(conversion=conversion).partial_fit(X, y)


@pytest.mark.parametrize("make", [
    lambda: Tree(leaf_size=np.int64(7)),
    lambda: Tree(C=np.float32(3.0)),
    lambda: Cutoff(delta=np.float32(0.05)),
    lambda: Cutoff(C=np.int64(2)),
    lambda: Suffix(C=np.int32(1)),
], ids=["Tree-leaf_size-int64", "Tree-C-float32", "Cutoff-delta-float32", "Cutoff-C-int64", "Suffix-C-int32"])
def test_conversion_parameters_accept_numpy_scalars(make):
    """Like the estimators' own parameters (epochs=np.int64(2) is fine), e.g. from a
    parameter grid built with numpy."""
    X, y = data("binary")
    est = Perceptron(conversion=make(), epochs=1, shuffle=False).fit(X, y)
    assert est.coef_.shape == (1, D)
