"""sample_weight: a row's step scaled by its weight (scikit-learn's Perceptron/SGDClassifier semantics).

Proved against scikit-learn's Perceptron on the same stream, and by the laws that hold for our rules:
weight 1 is the unweighted run bit for bit; a row of weight 0 is a round without update (with the
"last" conversion the weights are those of the run without that row, when the rule's parameters do
not depend on the number of rows); a uniform weight c is the step eta scaled by c (perceptron,
generalised perceptron with constant schedules, LMS).  A weight is not a repetition (a repeated row
re-checks its margin), so no law says so.  Rules with a normalised step, the ensembles, the kernel and
the adaptive learners refuse it in one line.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Perceptron as SkPerceptron

import distlearn
from distlearn.data.store import write_dataset


def _data(n=120, d=6, k=2, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2, size=(k, d))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.25] = 0.0
    return X, y


def _weights(n, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.0, 3.0, n)
    w[rng.random(n) < 0.2] = 0.0
    return w


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("epochs", [1, 3])
def test_perceptron_weights_equal_scikit_learn(k, fit_intercept, epochs):
    X, y = _data(k=k)
    sw = _weights(len(y))
    ours = distlearn.Perceptron(eta=0.7, epochs=epochs, shuffle=False, fit_intercept=fit_intercept).fit(
        X, y, sample_weight=sw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = SkPerceptron(eta0=0.7, max_iter=epochs, tol=None, shuffle=False, fit_intercept=fit_intercept).fit(
            X, y, sample_weight=sw)
    np.testing.assert_array_equal(ours.coef_, ref.coef_)
    np.testing.assert_array_equal(ours.intercept_, ref.intercept_)
    # ... and the weights changed the model (the test can fail).
    plain = distlearn.Perceptron(eta=0.7, epochs=epochs, shuffle=False, fit_intercept=fit_intercept).fit(X, y)
    assert not np.array_equal(plain.coef_, ours.coef_)


WEIGHTED = {
    "perceptron": lambda **kw: distlearn.Perceptron(eta=0.5, **kw),
    "generalized": lambda **kw: distlearn.GeneralizedPerceptron(rho=0.1, eta_schedule="inv_sqrt", **kw),
    "margin": lambda **kw: distlearn.MarginPerceptron(horizon=500, radius=8.0, **kw),
    "lms": lambda **kw: distlearn.LMS(eta=0.01, **kw),
}


@pytest.mark.parametrize("name", sorted(WEIGHTED))
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.sampled_from([2, 3]), sparse=st.booleans(),
       conversion=st.sampled_from(["last", "average", "cutoff"]))
def test_weight_one_is_the_unweighted_run(name, seed, k, sparse, conversion):
    X, y = _data(n=60, k=k, seed=seed)
    X = sp.csr_matrix(X) if sparse else X
    make = WEIGHTED[name]
    a = make(random_state=seed, epochs=2, conversion=conversion).fit(X, y)
    b = make(random_state=seed, epochs=2, conversion=conversion).fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert (a.online_errors_, a.n_updates_, a.t_) == (b.online_errors_, b.n_updates_, b.t_)


@pytest.mark.parametrize("name", sorted(WEIGHTED))
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.sampled_from([2, 3]), sparse=st.booleans(), data=st.data())
def test_weight_zero_is_the_row_removed(name, seed, k, sparse, data):
    X, y = _data(n=60, k=k, seed=seed)
    drop = np.array(data.draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y))))
    keep = ~drop
    if len(np.unique(y[keep])) < k:
        return
    sw = np.where(drop, 0.0, 1.0)
    conv = sp.csr_matrix if sparse else np.asarray
    make = WEIGHTED[name]
    a = make(shuffle=False, epochs=2).fit(conv(X), y, sample_weight=sw)
    b = make(shuffle=False, epochs=2).fit(conv(X[keep]), y[keep])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.n_updates_ == b.n_updates_
    assert a.t_ == 2 * len(y)  # a weight-0 row is still a round (scored, not learnt from)


@pytest.mark.parametrize("make,scaled", [
    (lambda **kw: distlearn.Perceptron(**kw), lambda c, **kw: distlearn.Perceptron(eta=c, **kw)),
    (lambda **kw: distlearn.GeneralizedPerceptron(rho=0.2, **kw),
     lambda c, **kw: distlearn.GeneralizedPerceptron(rho=0.2, eta=c, **kw)),
    (lambda **kw: distlearn.LMS(eta=1.0, **kw), lambda c, **kw: distlearn.LMS(eta=c, **kw)),
], ids=["perceptron", "generalized", "lms"])
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), c=st.floats(1e-3, 1e3), k=st.sampled_from([2, 3]))
def test_uniform_weight_is_the_step_scaled(make, scaled, seed, c, k):
    X, y = _data(n=60, k=k, seed=seed)
    if make().__class__ is distlearn.LMS:
        X = X / (4 * np.abs(X).max())  # a stable step for every c tried
        c = min(c, 1.0)
    a = make(random_state=seed, epochs=2).fit(X, y, sample_weight=np.full(len(y), c))
    b = scaled(c, random_state=seed, epochs=2).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def test_partial_fit_weights_equal_fit_in_pieces():
    X, y = _data(n=200, k=3)
    sw = _weights(len(y))
    full = distlearn.Perceptron(shuffle=False, epochs=1).fit(X, y, sample_weight=sw)
    inc = distlearn.Perceptron()
    for lo in range(0, len(y), 70):
        inc.partial_fit(X[lo:lo + 70], y[lo:lo + 70], classes=np.unique(y), sample_weight=sw[lo:lo + 70])
    np.testing.assert_array_equal(full.coef_, inc.coef_)
    assert inc.n_updates_ == full.n_updates_


@pytest.mark.parametrize("est,name", [
    (distlearn.ALMA(), "ALMA"), (distlearn.ROMMA(), "ROMMA"), (distlearn.PassiveAggressive(), "PassiveAggressive"),
    (distlearn.MIRA(), "MIRA"), (distlearn.OBPM(n_estimators=2), "OBPM"),
    (distlearn.PermutationBPM(n_estimators=2), "PermutationBPM"), (distlearn.ParameterMixing(n_shards=2), "ParameterMixing"),
    (distlearn.KernelPerceptron(budget=10), "KernelPerceptron"), (distlearn.AROW(), "AROW"),
])
def test_rules_without_a_weighted_step_refuse_in_one_line(est, name):
    X, y = _data()
    with pytest.raises(ValueError, match=rf"^sample_weight: {name} takes no sample weights \(.*\); the estimators "
                                         r"that do: Perceptron, GeneralizedPerceptron, MarginPerceptron, LMS$") as exc:
        est.fit(X, y, sample_weight=np.ones(len(y)))
    assert "\n" not in str(exc.value)
    assert not hasattr(est, "coef_")
    est.fit(X[:20], y[:20], sample_weight=None)  # None is no weights
    if hasattr(est, "partial_fit"):
        with pytest.raises(ValueError, match=f"^sample_weight: {name} takes no sample weights"):
            est.partial_fit(X, y, sample_weight=np.ones(len(y)))
    with pytest.raises(TypeError, match="unexpected keyword argument 'sample_weights'"):
        est.fit(X, y, sample_weights=np.ones(len(y)))


def test_bad_weights_and_stores_are_refused(tmp_path):
    X, y = _data()
    clf = distlearn.Perceptron()
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        clf.fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(3,\), expected \(120,\)"):
        clf.fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="Input sample_weight contains infinity"):
        clf.fit(X, y, sample_weight=np.where(np.arange(len(y)) == 4, np.inf, 1.0))
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero number"):
        clf.fit(X, y, sample_weight=np.zeros(len(y)))
    ds = write_dataset(tmp_path / "d.zarr", [(X, y)])
    with pytest.raises(ValueError, match=r"sample_weight with a store .*a store holds no weights"):
        clf.fit(str(ds.path), sample_weight=np.ones(len(y)))
    # a scalar weight is every row's
    a = distlearn.Perceptron(random_state=0).fit(X, y, sample_weight=2.0)
    b = distlearn.Perceptron(random_state=0, eta=2.0).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
