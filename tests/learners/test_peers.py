"""Our rules against their peers on the same stream.

scikit-learn's Perceptron and PA-I (``SGDClassifier(learning_rate="pa1")``)
must give the same weights bit for bit (one epoch, same order, no intercept),
on dense and CSR data, binary and 10-class one-vs-rest (a Fashion-MNIST slice).
river's ALMA and PA must give the same weights and predictions.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier
from sklearn.linear_model import Perceptron as SkPerceptron

import distlearn
from distlearn.data._idx import IdxReader

from ..conftest import SHARED_DATA

FMNIST = SHARED_DATA / "fashion-mnist" / "train-images-idx3-ubyte.gz"

needs_fmnist = pytest.mark.skipif(not FMNIST.exists(), reason=f"{FMNIST} not found")


@pytest.fixture(scope="module")
def fmnist():
    """The first 3000 Fashion-MNIST training images (raw 0..255 pixels) and labels."""
    Xs, ys, n = [], [], 0
    for X, y in IdxReader(str(FMNIST)):
        Xs.append(X)
        ys.append(y)
        n += len(y)
        if n >= 3000:
            break
    X = np.concatenate(Xs)[:3000].reshape(-1, 784).astype(np.float64)
    y = np.concatenate(ys)[:3000].astype(np.int64)
    return X, y


def _sk_perceptron():
    return SkPerceptron(fit_intercept=False, shuffle=False, max_iter=1, tol=None, eta0=1.0)


def _sk_pa1(C):
    return SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1", eta0=C,
                         fit_intercept=False, shuffle=False, max_iter=1, tol=None)


def _ours(cls, **kw):
    return cls(fit_intercept=False, shuffle=False, epochs=1, **kw)


def _fit_quiet(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning for max_iter=1
        return est.fit(X, y)


@needs_fmnist
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("task", ["binary", "ovr10"])
def test_perceptron_equals_sklearn(fmnist, layout, task):
    X, y = fmnist
    if task == "binary":  # T-shirt/top vs shirt: hard, many updates
        keep = (y == 0) | (y == 6)
        X, y = X[keep], y[keep]
    Xl = sp.csr_matrix(X) if layout == "csr" else X
    ref = _fit_quiet(_sk_perceptron(), Xl, y)
    ours = _ours(distlearn.Perceptron).fit(Xl, y)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    assert ours.coef_.shape == ref.coef_.shape
    np.testing.assert_array_equal(ours.coef_, ref.coef_)
    np.testing.assert_array_equal(ours.predict(Xl), ref.predict(Xl))
    assert ours.n_updates_ > 100


@needs_fmnist
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("task", ["binary", "ovr10"])
@pytest.mark.parametrize("C", [0.001, 1.0])
def test_pa1_equals_sklearn(fmnist, layout, task, C):
    X, y = fmnist
    X = X / 255.0
    if task == "binary":
        keep = (y == 0) | (y == 6)
        X, y = X[keep], y[keep]
    Xl = sp.csr_matrix(X) if layout == "csr" else X
    ref = _fit_quiet(_sk_pa1(C), Xl, y)
    ours = _ours(distlearn.PassiveAggressive, variant="PA-I", C=C).fit(Xl, y)
    np.testing.assert_array_equal(ours.coef_, ref.coef_)
    np.testing.assert_array_equal(ours.predict(Xl), ref.predict(Xl))


def test_perceptron_equals_sklearn_real_valued():
    # Real-valued data: equal bit for bit because the margins are summed in
    # the same order (sequentially over the row's stored values).
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 40)) * (rng.random((2000, 40)) < 0.3)
    y = (X @ rng.normal(size=40) + 0.3 * rng.normal(size=2000) > 0).astype(int)
    for Xl in (X, sp.csr_matrix(X)):
        ref = _fit_quiet(_sk_perceptron(), Xl, y)
        ours = _ours(distlearn.Perceptron).fit(Xl, y)
        np.testing.assert_array_equal(ours.coef_, ref.coef_)
        ref = _fit_quiet(_sk_pa1(0.1), Xl, y)
        ours = _ours(distlearn.PassiveAggressive, C=0.1).fit(Xl, y)
        np.testing.assert_array_equal(ours.coef_, ref.coef_)


# --------------------------------------------------------------------------- river

river = pytest.importorskip("river")


def _stream(n=3000, d=12, seed=0, normalize=True):
    """A dense stream (every feature nonzero) with a little label noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if normalize:
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    u = rng.normal(size=d)
    y = (X @ u > 0).astype(int)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    return X, y


def _river_learn(model, X, y):
    for row, label in zip(X, y):
        model.learn_one(dict(enumerate(row.tolist())), bool(label))
    return model


def _river_coef(weights, d):
    return np.array([weights.get(i, 0.0) for i in range(d)])


def test_alma_matches_river():
    from river.linear_model import ALMAClassifier

    X, y = _stream()
    Xtest, _ = _stream(seed=1)
    for alpha, C in [(0.9, 2**0.5), (0.5, 1.0)]:
        ref = _river_learn(ALMAClassifier(p=2, alpha=alpha, B=1 / alpha, C=C), X, y)
        ours = _ours(distlearn.ALMA, alpha=alpha, C=C).fit(X, y)
        # river rescales only the coordinates present in x; on a dense stream
        # that is every coordinate, so the two rules coincide.
        np.testing.assert_allclose(ours.coef_[0], _river_coef(ref.w, X.shape[1]), rtol=1e-9, atol=1e-12)
        assert ours.n_updates_ == ref.k - 1
        theirs = np.array([ref._raw_dot(dict(enumerate(r.tolist()))) for r in Xtest])
        sure = np.abs(theirs) > 1e-9
        np.testing.assert_array_equal(ours.predict(Xtest)[sure], (theirs > 0).astype(int)[sure])


@pytest.mark.parametrize("mode,variant", [(0, "PA"), (1, "PA-I"), (2, "PA-II")])
def test_pa_matches_river(mode, variant):
    from river.linear_model import PAClassifier

    X, y = _stream(normalize=False)
    Xtest, _ = _stream(seed=1, normalize=False)
    ref = _river_learn(PAClassifier(C=0.05, mode=mode, learn_intercept=False), X, y)
    ours = _ours(distlearn.PassiveAggressive, variant=variant, C=0.05).fit(X, y)
    np.testing.assert_allclose(ours.coef_[0], _river_coef(ref.weights, X.shape[1]), rtol=1e-9, atol=1e-12)
    theirs = np.array([sum(ref.weights.get(i, 0.0) * v for i, v in enumerate(r)) for r in Xtest])
    sure = np.abs(theirs) > 1e-9
    np.testing.assert_array_equal(ours.predict(Xtest)[sure], (theirs > 0).astype(int)[sure])
