"""Cutoff averaging's one-pass mode (survival-time group sums), its intermediate
hypotheses, and early stopping on the Theorem 2 bound -- against the brute-force
cutoff of ``test_conversions`` (every h_i stored)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn import Perceptron
from distlearn.conversions import Cutoff

from .test_conversions import CASE_IDS, CASES, DELTA, batch_hypothesis, data, estimator, naive_cutoff, naive_run, tol

GROUP_CUTOFFS = {
    "zero_one": Cutoff(mode="groups"),
    "zero_one-C1e-3": Cutoff(mode="groups", C=1e-3),
    "hinge-d0.5-C0.01": Cutoff(mode="groups", delta=0.5, C=0.01, loss="hinge"),
}


@pytest.mark.parametrize("cutoff", list(GROUP_CUTOFFS))
@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("case", CASE_IDS)
def test_groups_mode_equals_brute_force(case, epochs, cutoff):
    conv = GROUP_CUTOFFS[cutoff]
    H, losses, updated = naive_run(case, epochs)
    C = conv.C if conv.C is not None else 1.0
    if conv.loss == "hinge" and conv.C is None:
        pytest.skip("hinge with the measured C is covered in test_conversions")
    want, k, bounds, _ = naive_cutoff(H, losses[conv.loss], updated, C, conv.delta)
    X, y = data(CASES[case][3])
    dense = estimator(case, conv, epochs).fit(X, y)
    csr = estimator(case, conv, epochs).fit(sp.csr_matrix(X), y)
    assert dense.summary_.k_ == k == csr.summary_.k_
    np.testing.assert_allclose(dense.summary_.bounds_, bounds, rtol=1e-12)
    np.testing.assert_allclose(batch_hypothesis(dense), want, **tol(want))
    np.testing.assert_allclose(batch_hypothesis(csr), want, **tol(want))
    # The replay mode gives the same hypothesis.
    replay = estimator(case, Cutoff(delta=conv.delta, C=conv.C, loss=conv.loss), epochs).fit(X, y)
    np.testing.assert_allclose(batch_hypothesis(replay), want, **tol(want))


@pytest.mark.parametrize("case", ["perceptron-separable", "margin-binary", "pa-ovr3"])
def test_groups_mode_gives_every_cutoff_hypothesis(case):
    """summary_.hypothesis(state, k) for every k equals Dekel's B-weighted average."""
    H, losses, updated = naive_run(case, 1)
    X, y = data(CASES[case][3])
    est = estimator(case, Cutoff(mode="groups"), 1).fit(X, y)
    m = len(updated)
    n_upd = np.concatenate([[0], np.cumsum(updated)])
    i = np.arange(m)
    for k in range(len(est.summary_.bounds_)):
        B = (i >= k) & (n_upd[i] - n_upd[np.maximum(i - k, 0)] == 0)
        B[0] = True
        want = (B[:, None, None] * H[:m]).sum(axis=0) / B.sum()
        got = est.summary_.hypothesis(est._state, k)
        np.testing.assert_allclose(got, want, **tol(want))
    with pytest.raises(ValueError, match="k must be"):
        est.summary_.hypothesis(est._state, len(est.summary_.bounds_))


@pytest.mark.parametrize("case", ["perceptron-binary", "pa-ovr3", "mira-native3"])
def test_groups_mode_partial_fit_gives_intermediate_hypotheses(case):
    """After each partial_fit call the model is the cutoff hypothesis of the rounds so far."""
    X, y = data(CASES[case][3])
    H, losses, updated = naive_run(case, 1)
    part = estimator(case, Cutoff(mode="groups"), 1)
    classes = np.unique(y)
    for lo, hi in [(0, 1), (1, 40), (40, 41), (41, 170), (170, len(y))]:
        Xp = sp.csr_matrix(X[lo:hi]) if lo % 2 else X[lo:hi]
        part.partial_fit(Xp, y[lo:hi], classes=classes)
        want, k, _, _ = naive_cutoff(H[:hi + 1], losses["zero_one"][:hi], updated[:hi], 1.0, DELTA)
        assert part.summary_.k_ == k
        np.testing.assert_allclose(batch_hypothesis(part), want, **tol(want))


def prefix_bound(case: str, epochs: int, r: int, conv: Cutoff) -> float:
    H, losses, updated = naive_run(case, epochs)
    _, _, bounds, _ = naive_cutoff(H[:r + 1], losses[conv.loss][:r], updated[:r], conv.C, conv.delta)
    return float(bounds.min())


@pytest.mark.parametrize("mode", ["replay", "groups"])
@pytest.mark.parametrize("case", ["perceptron-separable", "perceptron-binary"])
def test_early_stopping_at_the_first_check_below_the_threshold(case, mode):
    epochs, every = 3, 50
    thresholds = {"perceptron-separable": 0.6, "perceptron-binary": 0.9}
    conv = Cutoff(mode=mode, C=1.0, stop_below=thresholds[case], check_every=every)
    m = 300 * epochs
    checks = [r for r in range(every, m + 1, every)]
    first = next((r for r in checks if prefix_bound(case, epochs, r, conv) < conv.stop_below), None)
    assert first is not None and first < m  # the threshold is reachable before the end
    X, y = data(CASES[case][3])
    est = estimator(case, conv, epochs).fit(X, y)
    assert est.summary_.stopped_ and est.summary_.stop_round_ == first and est.t_ == first
    H, losses, updated = naive_run(case, epochs)
    want, k, _, _ = naive_cutoff(H[:first + 1], losses["zero_one"][:first], updated[:first], 1.0, DELTA)
    assert est.summary_.k_ == k
    np.testing.assert_allclose(batch_hypothesis(est), want, **tol(want))
    assert est.n_iter_ == -(-first // 300)  # epochs started


def test_early_stopping_never_triggers_above_the_bound():
    X, y = data("binary")
    est = Perceptron(conversion=Cutoff(stop_below=1e-6, check_every=10), epochs=2, random_state=0).fit(X, y)
    assert not est.summary_.stopped_ and est.t_ == 2 * len(y)


def test_groups_mode_stop_freezes_partial_fit():
    X, y = data("separable")
    est = Perceptron(conversion=Cutoff(mode="groups", stop_below=0.6, check_every=50), shuffle=False)
    est.partial_fit(X, y, classes=[0, 1])
    assert est.summary_.stopped_ and est.t_ == est.summary_.stop_round_ < len(y)
    before = batch_hypothesis(est)
    est.partial_fit(X, y)
    assert est.t_ == est.summary_.stop_round_  # no further rounds
    assert np.array_equal(batch_hypothesis(est), before)


def test_store_early_stopping_equals_in_memory(tmp_path):
    from distlearn.data.store import write_dataset

    X, y = data("separable")
    path = tmp_path / "sep.zarr"
    write_dataset(path, [(X, y)], block_rows=64, dtype="float64")
    conv = Cutoff(stop_below=0.6, check_every=50)
    mem = Perceptron(conversion=conv, shuffle=False, epochs=3).fit(X, y)
    store = Perceptron(conversion=conv, shuffle=False, epochs=3).fit(str(path))
    assert store.summary_.stop_round_ == mem.summary_.stop_round_ and store.t_ == mem.t_
    np.testing.assert_allclose(batch_hypothesis(store), batch_hypothesis(mem), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make,name", [
    (lambda: Cutoff(mode="online"), "mode"),
    (lambda: Cutoff(stop_below=0.0), "stop_below"),
    (lambda: Cutoff(stop_below=-1.0), "stop_below"),
    (lambda: Cutoff(check_every=0), "check_every"),
    (lambda: Cutoff(check_every=2.5), "check_every"),
    (lambda: Cutoff(check_every=True), "check_every"),
])
def test_bad_cutoff_mode_parameters_raise(make, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        make()


def test_replay_mode_is_still_refused_by_partial_fit():
    X, y = data("binary")
    with pytest.raises(ValueError, match="partial_fit"):
        Perceptron(conversion=Cutoff()).partial_fit(X, y)


# -- the survival-group summary's merge law ------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from .test_conversions import feed_cutoff  # noqa: E402


def _groups_of_blocks(updated: np.ndarray, loss: np.ndarray, cuts: list[int]):
    """One CutoffGroups per block, each observed with the running age."""
    from distlearn.conversions.core import CutoffTracker
    from distlearn.learners.linear import RoundLog

    from .test_conversions import _FakeState

    out, age = [], 0
    bounds = [0, *cuts, len(updated)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        tr = CutoffTracker(DELTA, 1.0)
        upd = updated[lo:hi].astype(np.uint8)
        if hi > lo:
            tr.observe(_FakeState(age), RoundLog((loss[lo:hi] > 0).astype(np.uint8), np.zeros(hi - lo), upd),
                       0, hi - lo, age)
        last = np.flatnonzero(upd)
        age = hi - lo - 1 - int(last[-1]) if len(last) else age + hi - lo
        out.append(tr.groups)
    return out


def _as_tuple(g):
    return (sorted(g.counts.items()), sorted(g.last_loss.items()), sorted(g.extra.items()), g.loss0, g.m)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**31), st.lists(st.floats(0, 1), min_size=2, max_size=2))
def test_cutoff_groups_of_blocks_merge_to_one_pass(m, seed, fracs):
    rng = np.random.default_rng(seed)
    updated = rng.random(m) < rng.uniform(0.05, 0.9)
    loss = (rng.random(m) < 0.5).astype(float) * updated  # conservative: losses only on updates
    cuts = sorted({int(f * m) for f in fracs})
    a, b, c = _groups_of_blocks(updated, loss, cuts) if len(cuts) == 2 else (*_groups_of_blocks(updated, loss, cuts), None)
    whole, _ = feed_cutoff(updated, loss, m)
    blocks = [g for g in (a, b, c) if g is not None]
    merged = blocks[0]
    for g in blocks[1:]:
        merged = merged.merge(g)
    assert _as_tuple(merged) == _as_tuple(whole.groups)
    if c is not None:
        assert _as_tuple(a.merge(b).merge(c)) == _as_tuple(a.merge(b.merge(c)))  # associative
    from distlearn.conversions import CutoffGroups

    assert _as_tuple(CutoffGroups().merge(whole.groups)) == _as_tuple(whole.groups)  # identity
    assert _as_tuple(whole.groups.merge(CutoffGroups())) == _as_tuple(whole.groups)


@pytest.mark.parametrize("case", ["perceptron-binary", "margin-binary", "alma-binary"])
def test_groups_mode_kernel_sums_are_the_same_bits_for_any_chunking(case):
    """Binary rounds keep the group sums in the kernels (``GroupSums``, update-event form): their folds
    happen at rounds the data decide, never at a read or a chunk boundary, so partial_fit in uneven
    pieces (dense and CSR, read after every piece, slots added mid-piece) gives the same bits as one
    fit, for every cutoff k."""
    X, y = data(CASES[case][3])
    n = len(y)

    def make():  # the margin perceptron's step from the same horizon, whether fit or partial_fit
        est = estimator(case, Cutoff(mode="groups"), 1)
        return est.set_params(horizon=n) if case.startswith("margin") else est

    whole = make().fit(X, y)
    kg = whole.summary_._kg
    assert kg is not None
    if case == "perceptron-binary":
        assert kg.P.shape[1] > 8  # the 8 first slots filled up: the kernel stopped and resumed
    assert kg.n_used == whole.summary_.peak_groups == whole.summary_.groups.n_groups
    if case == "alma-binary":
        assert kg.q[-1] != 1.0  # the projections moved the scale 16-fold: the sums were rebased
    part = make()
    for lo, hi in [(0, 1), (1, 8), (8, n // 3), (n // 3, n // 3 + 1), (n // 3 + 1, n - 5), (n - 5, n)]:
        part.partial_fit(sp.csr_matrix(X[lo:hi]) if lo % 2 else X[lo:hi], y[lo:hi], classes=[0, 1])
        assert part.summary_._kg is not None
        batch_hypothesis(part)
    assert np.array_equal(batch_hypothesis(part), batch_hypothesis(whole))
    for k in range(len(whole.summary_.bounds_)):
        assert np.array_equal(part.summary_.hypothesis(part._state, k), whole.summary_.hypothesis(whole._state, k))


def test_groups_mode_multiclass_keeps_the_copies():
    """K > 1 columns (one-vs-rest or native): the driver cuts at every update and copies (no kernel sums)."""
    X, y = data("ovr3")
    est = estimator("pa-ovr3", Cutoff(mode="groups"), 1).fit(X, y)
    assert est.summary_._kg is None and est.summary_.G


# -- the replay's pass 2 from pass 1's update rounds ----------------------------------------------
def _full_replay(monkeypatch, make, X, y, **fit):
    """The same fit with pass 2 replaying every round (the update record capped at 0)."""
    from distlearn.conversions.core import CutoffTracker

    with monkeypatch.context() as mp:
        mp.setattr(CutoffTracker, "max_events", 0)
        est = make().fit(X, y, **fit)
    assert est.summary_._by_events is None  # no record: every round replayed
    return est


def _same_fit(a, b):
    assert a.summary_.k_ == b.summary_.k_
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    for got, want in zip(a._state, b._state):  # the final state too (rounds, age, updates, weights)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("est_name,params,n_classes,want_mode", [
    ("Perceptron", {}, 2, "steps"),
    ("Perceptron", {"dtype": "float32", "fit_intercept": True}, 2, "steps"),
    ("GeneralizedPerceptron", {"rho": 0.1, "eta_schedule": "inv_sqrt"}, 2, "steps"),
    ("MarginPerceptron", {"horizon": 600, "radius": 3.0}, 2, "rounds"),   # projected: the scale moves
    ("ROMMA", {}, 2, "rounds"),                                            # rescales w
    ("PassiveAggressive", {}, 2, "rounds"),                                # step reads the margin
    ("Perceptron", {}, 3, "rounds"),                                       # one-vs-rest columns
    ("MIRA", {"multiclass": "native"}, 3, "rounds"),
])
@pytest.mark.parametrize("dense", [False, True], ids=["csr", "dense"])
@pytest.mark.parametrize("conv", [Cutoff(), Cutoff(C=1e-3), Cutoff(loss="hinge", C=2.0),
                                  Cutoff(C=1e-3, stop_below=0.9, check_every=50)],
                         ids=["default", "C1e-3", "hinge", "stop"])
def test_replay_from_update_rounds_is_the_full_replay_bit_for_bit(monkeypatch, est_name, params, n_classes,
                                                                   want_mode, dense, conv):
    """Pass 2 on the updating rounds only (``"rounds"``), or on the running sum's steps alone
    (``"steps"``), adds the same hypotheses in the same order as replaying every round: the same
    bits, k*, and final state, over two shuffled epochs."""
    import distlearn

    rng = np.random.default_rng(5)
    X = sp.random(600, 40, density=0.2, random_state=2, format="csr")
    y = np.argmax(X @ rng.normal(size=(40, n_classes)) + 0.3 * rng.normal(size=(600, n_classes)), axis=1)
    if dense:
        X = X.toarray()

    def make():
        return getattr(distlearn, est_name)(conversion=conv, epochs=2, shuffle=True, random_state=1, **params)

    est = make().fit(X, y)
    assert est.summary_._by_events == want_mode
    _same_fit(est, _full_replay(monkeypatch, make, X, y))


def test_replay_steps_with_sample_weights_and_a_store(monkeypatch, tmp_path):
    """Sample weights scale the recorded steps (a weight of 0 is no update); a store's pass 2
    reads its blocks again and takes the same steps."""
    from distlearn.data.store import write_dataset

    X, y = data("binary")
    sw = np.random.default_rng(0).uniform(0, 2, size=len(y)).round(1)

    def make():
        return Perceptron(conversion=Cutoff(C=1e-3), epochs=2, shuffle=False)

    est = make().fit(X, y, sample_weight=sw)
    assert est.summary_._by_events == "steps" and est.summary_.k_ > 0
    _same_fit(est, _full_replay(monkeypatch, make, X, y, sample_weight=sw))
    path = tmp_path / "b.zarr"
    write_dataset(path, [(X, y)], block_rows=37, dtype="float64")
    store = make().fit(str(path))
    assert store.summary_._by_events == "steps"
    _same_fit(store, make().fit(X, y))


def test_replay_counts_and_steps_refuse_what_they_cannot_do():
    from distlearn.learners.linear import init_state, learn_chunk, make_rule, running_sum, step_sums

    X, y = np.eye(3), np.array([1, 0, 1])
    state = init_state(3, 1)
    with pytest.raises(ValueError, match="running sum"):
        learn_chunk(make_rule("perceptron"), state, X, y, reps=np.ones(3, np.int64))
    with pytest.raises(ValueError, match="perceptron"):
        step_sums(make_rule("pa"), state, X, y, np.arange(3), np.ones(3, np.int64), running_sum(state),
                  n_updates=0)
