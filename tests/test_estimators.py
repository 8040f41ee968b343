"""Estimator behaviour beyond scikit-learn's contract: stores, seeds, partial_fit, errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import distlearn
from distlearn.data.store import write_dataset

ALL = [
    distlearn.Perceptron, distlearn.GeneralizedPerceptron, distlearn.MarginPerceptron, distlearn.ALMA,
    distlearn.ROMMA, distlearn.PassiveAggressive, distlearn.MIRA, distlearn.LMS,
]


def _data(n=600, d=15, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3, size=(k, d))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.3] = 0.0
    return X, y * 10 + 1  # numeric labels (stores hold numbers), not 0..k-1


@pytest.mark.parametrize("cls", ALL)
def test_store_input_equals_in_memory(tmp_path, cls):
    X, y = _data()
    ds = write_dataset(tmp_path / "d.zarr", [(X, y)], block_rows=128, dtype="float64")
    a = cls(shuffle=False, epochs=2).fit(X, y)
    b = cls(shuffle=False, epochs=2).fit(str(ds.path))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.online_errors_ == b.online_errors_ and a.n_updates_ == b.n_updates_
    np.testing.assert_array_equal(b.predict(ds), a.predict(X))
    # Shuffled store epochs are reproducible from the seed.
    c1 = cls(random_state=5, epochs=2).fit(ds)
    c2 = cls(random_state=5, epochs=2).fit(ds)
    np.testing.assert_array_equal(c1.coef_, c2.coef_)


def test_seeded_shuffle_is_reproducible_and_layout_free():
    X, y = _data()
    a = distlearn.Perceptron(random_state=3).fit(X, y)
    b = distlearn.Perceptron(random_state=3).fit(sp.csr_matrix(X), y)
    c = distlearn.Perceptron(random_state=4).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)


def test_partial_fit_equals_fit_in_pieces():
    X, y = _data()
    full = distlearn.PassiveAggressive(shuffle=False, epochs=1).fit(X, y)
    inc = distlearn.PassiveAggressive()
    for lo in range(0, len(y), 100):
        inc.partial_fit(X[lo:lo + 100], y[lo:lo + 100], classes=np.unique(y))
    np.testing.assert_array_equal(full.coef_, inc.coef_)
    assert inc.t_ == len(y) and inc.online_errors_ == full.online_errors_


def test_binary_labels_and_sign_convention():
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    clf = distlearn.Perceptron(fit_intercept=False, shuffle=False, epochs=1).fit(X, ["no", "yes"])
    # A zero score predicts classes_[1] (sgn(0) = +1).
    assert clf.predict(np.zeros((1, 2)))[0] == "yes"
    assert clf.decision_function(X).shape == (2,)


@pytest.mark.parametrize("cls,param,value,match", [
    (distlearn.Perceptron, "epochs", 0, "epochs must be an integer in \\[1, inf\\]"),
    (distlearn.Perceptron, "eta", -1.0, "eta must be a real number in \\(0, inf\\)"),
    (distlearn.Perceptron, "dtype", "float16", "dtype must be one of"),
    (distlearn.Perceptron, "conversion", "averaging", "conversion must be one of 'last'"),
    (distlearn.ALMA, "alpha", 1.5, "alpha must be a real number in \\(0, 1\\]"),
    (distlearn.PassiveAggressive, "variant", "PA-III", "variant must be one of"),
    (distlearn.PassiveAggressive, "C", 0.0, "C must be a real number in \\(0, inf\\)"),
    (distlearn.MIRA, "beta", -0.1, "beta must be a real number in \\[0, inf\\)"),
    (distlearn.GeneralizedPerceptron, "rho_schedule", "log", "rho_schedule must be one of"),
    (distlearn.MarginPerceptron, "radius", -2.0, "radius must be a real number"),
])
def test_parameter_errors_name_the_parameter(cls, param, value, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        cls(**{param: value}).fit(X, y)


def test_input_errors():
    X, y = _data()
    with pytest.raises(ValueError, match="at least 2 classes"):
        distlearn.Perceptron().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="NaN"):
        distlearn.Perceptron().fit(np.full((3, 2), np.nan), [0, 1, 0])
    clf = distlearn.Perceptron().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])
    with pytest.raises(ValueError, match="not in classes_"):
        clf.partial_fit(X, np.full(len(y), 7))


def test_store_with_y_is_refused(tmp_path):
    X, y = _data()
    ds = write_dataset(tmp_path / "d.zarr", [(X, y)])
    with pytest.raises(ValueError, match="y must be None"):
        distlearn.Perceptron().fit(ds, y)


@pytest.mark.parametrize("cls", ALL)
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("k", [2, 3])
def test_non_finite_row_is_named_and_nothing_is_kept(cls, layout, k):
    # The kernels find a NaN/inf by its non-finite margin (no separate pass over
    # X); fit then leaves no fitted model, partial_fit restores the one before.
    X, y = _data(k=k)
    bad = X.copy()
    bad[417, 6] = np.inf if cls is distlearn.ALMA else np.nan
    conv = sp.csr_matrix if layout == "csr" else np.asarray
    clf = cls(random_state=0)
    with pytest.raises(ValueError, match=r"NaN or infinity: row 417 .*column \[6\]"):
        clf.fit(conv(bad), y)
    assert not hasattr(clf, "coef_") and not hasattr(clf, "classes_")

    clf = cls(random_state=0).partial_fit(conv(X[:300]), y[:300], classes=np.unique(y))
    before = (clf.coef_.copy(), clf.intercept_.copy(), clf.n_updates_, clf.online_errors_, clf.t_, clf.n_iter_)
    with pytest.raises(ValueError, match=r"row 117 .*column \[6\]"):
        clf.partial_fit(conv(bad[300:]), y[300:])
    after = (clf.coef_, clf.intercept_, clf.n_updates_, clf.online_errors_, clf.t_, clf.n_iter_)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    assert before[2:] == after[2:]
    # ... and it goes on exactly as if the bad call had not happened.
    ref = cls(random_state=0).partial_fit(conv(X[:300]), y[:300], classes=np.unique(y))
    assert np.array_equal(clf.partial_fit(conv(X[300:]), y[300:]).coef_, ref.partial_fit(conv(X[300:]), y[300:]).coef_)


def test_diverging_lms_stops_with_an_error_and_auto_step_is_stable():
    X, y = _data()
    X = X * 1e3  # ||x||^2 ~ 1e8: a fixed step of 0.01 diverges
    with pytest.raises(ValueError, match="weights overflowed.*smaller step"):
        distlearn.LMS(eta=0.01, random_state=0, epochs=20).fit(X, y)
    clf = distlearn.LMS(random_state=0).fit(X, y)  # eta="auto" = 1 / max ||x||^2
    assert np.isfinite(clf.coef_).all()
    assert clf.eta_ == pytest.approx(1.0 / (float(np.max(np.sum(X * X, axis=1))) + 1.0))
    assert clf.score(X, y) > 0.8


@pytest.mark.parametrize("labels", [
    np.array([-5, 3, 1_000_000]), np.array([0, 1, 2], np.uint8), np.array([2**40, 2**40 + 1, -(2**40)]),
    np.array(["a", "b", "c"]), np.array([1.0, 2.0, 4.0]),
])
def test_integer_label_fast_path_equals_generic_path(labels):
    # Small-range integer labels are encoded by a lookup table, wide ranges and
    # other types by search; the fitted model is the same either way.
    X, y = _data(k=3)
    y = labels[(y - 1) // 10]
    clf = distlearn.Perceptron(random_state=0).fit(X, y)
    assert clf.classes_.tolist() == sorted(labels.tolist())
    ref = distlearn.Perceptron(random_state=0).fit(X, np.searchsorted(np.sort(labels), y))
    assert np.array_equal(clf.coef_, ref.coef_)
    assert np.array_equal(clf.predict(X), np.sort(labels)[ref.predict(X)])
    with pytest.raises(ValueError, match="not in classes_"):
        clf.partial_fit(X[:5], np.full(5, "zzz") if labels.dtype.kind == "U" else np.full(5, 7, labels.dtype))


@pytest.mark.parametrize("make", [
    lambda: distlearn.Perceptron(random_state=7, epochs=3),
    lambda: distlearn.PassiveAggressive(random_state=7, epochs=2, conversion="average"),
    lambda: distlearn.OBPM(n_estimators=6, random_state=7, epochs=2),
], ids=["perceptron", "pa-average", "obpm"])
def test_array_and_one_block_store_shuffle_alike(tmp_path, make):
    # shuffle=True: an array is visited as a one-block store (one permutation, one seed), so the
    # same data as an array and as a one-block store gives the same model, bit for bit.
    X, y = _data()
    ds = write_dataset(tmp_path / "one.zarr", [(X, y)], block_rows=len(y), dtype="float64")
    assert ds.n_blocks == 1
    a = make().fit(X, y)
    b = make().fit(str(ds.path))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.online_errors_ == b.online_errors_
    # Several blocks: a permutation of the blocks and of the rows inside each (documented), so the
    # model differs from the array's, yet is reproducible from the seed.
    many = write_dataset(tmp_path / "many.zarr", [(X, y)], block_rows=128, dtype="float64")
    c1, c2 = make().fit(many), make().fit(many)
    np.testing.assert_array_equal(c1.coef_, c2.coef_)
    assert not np.array_equal(c1.coef_, a.coef_)


@pytest.mark.parametrize("make", [
    lambda n: distlearn.OBPM(n_estimators=6, random_state=0, epochs=2, n_jobs=n),
    lambda n: distlearn.PermutationBPM(n_estimators=3, random_state=0, n_jobs=n),
    lambda n: distlearn.KernelPermutationBPM(n_estimators=2, base=distlearn.KernelPerceptron(budget=20), epochs=1,
                                             random_state=0, n_jobs=n),
], ids=["obpm", "permutation-bpm", "kernel-permutation-bpm"])
def test_n_jobs_follows_scikit_learn(make):
    from distlearn._validation import cpu_count, effective_n_jobs

    X, y = _data(n=200)
    ref = make(1).fit(X, y)
    for n in (-1, -2, None, 2):  # all cores, all but one, the default, two: the same model
        clf = make(n).fit(X, y)
        np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))
    with pytest.raises(ValueError, match=r"n_jobs must be None \(1\), a positive integer.*-1: all"):
        make(0).fit(X, y)
    with pytest.raises(ValueError, match="n_jobs must be"):
        make(1.5).fit(X, y)
    assert effective_n_jobs(-1) == cpu_count() and effective_n_jobs(-2) == max(1, cpu_count() - 1)
    assert effective_n_jobs(None) == 1 and effective_n_jobs(3) == 3 and effective_n_jobs(-10**6) == 1


@pytest.mark.parametrize("make", [
    lambda: distlearn.Perceptron(random_state=2, epochs=2),
    lambda: distlearn.PassiveAggressive(random_state=2, conversion="average"),
    lambda: distlearn.OBPM(n_estimators=4, random_state=2, epochs=2),
], ids=["perceptron", "pa", "obpm"])
def test_pandas_and_dask_dataframes_fit_as_the_numpy_array(make):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y = _data(n=300)
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names).assign(label=y)
    ddf = dd.from_pandas(frame, npartitions=4)  # the label is a column of the frame
    ref = make().fit(X, y)
    for Xf, yf in [(frame[names], frame["label"]), (ddf[names], ddf["label"])]:
        clf = make().fit(Xf, yf)
        np.testing.assert_array_equal(clf.coef_, ref.coef_)
        np.testing.assert_array_equal(clf.intercept_, ref.intercept_)
        assert clf.feature_names_in_.tolist() == names  # scikit-learn's feature names, from either frame
        np.testing.assert_array_equal(clf.predict(Xf), ref.predict(X))
    # a dask array and a dask sample_weight, too
    da = pytest.importorskip("dask.array")
    w = np.linspace(0.0, 2.0, len(y))
    a = distlearn.Perceptron(random_state=0).fit(da.from_array(X, chunks=70), dd.from_pandas(frame["label"], 3),
                                                 sample_weight=da.from_array(w, chunks=70))
    np.testing.assert_array_equal(a.coef_, distlearn.Perceptron(random_state=0).fit(X, y, sample_weight=w).coef_)
    with pytest.raises(ValueError, match="feature names"):  # columns in another order: scikit-learn's check
        clf.predict(ddf[names[::-1]])


def test_fit_on_a_data_file_path_says_it_is_a_file_not_a_store(tmp_path):
    """The estimators stream stores; a data file's path (iris.csv) gave zarr's "not a zarr group
    (GroupNotFoundError ...)".  Now one line says what it is and the two ways on, and the first works."""
    from distlearn import OBPM
    from distlearn.data import StoreError
    from distlearn.data.readers import read_arrays

    p = tmp_path / "iris.csv"
    p.write_text("a,b,species\n" + "".join(f"{i % 3},{i % 5},{'xy'[i % 2]}\n" for i in range(40)))
    with pytest.raises(StoreError, match=r"iris\.csv: a file, not a store .* distlearn\.data\.readers\.read_arrays"):
        OBPM(random_state=0).fit(str(p))
    X, y = read_arrays(p, label_column="species")
    assert list(OBPM(random_state=0).fit(X, y).classes_) == ["x", "y"]
