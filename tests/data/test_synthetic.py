"""Tests of distlearn.data.synthetic: the OBPM paper's generators and the RCV1-like corpus."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn.data import open_dataset
from distlearn.data.synthetic import (
    GENERATION_ROWS,
    iter_rcv1_like,
    make_drifting_stream,
    make_obpm_artificial,
    make_rcv1_like,
    write_obpm_artificial,
)

# --------------------------------------------------------------------------- OBPM artificial (sec. 4.1)


def _margins(X: np.ndarray, u: np.ndarray) -> np.ndarray:
    return np.abs(X @ u) / np.linalg.norm(u)


def test_obpm_shapes_types_and_norms():
    d = make_obpm_artificial(300, 200, random_state=3)
    assert d.X_train.shape == (300, 100) and d.X_test.shape == (200, 100)
    assert d.X_train.dtype == np.float64 and d.X_test.dtype == np.float64
    for y in (d.y_train, d.y_test, d.y_train_clean):
        assert y.dtype == np.int64 and set(np.unique(y).tolist()) <= {-1, 1}
    np.testing.assert_allclose(np.linalg.norm(d.X_train, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(d.X_test, axis=1), 1.0, atol=1e-12)
    assert d.target.shape == (100,) and set(np.unique(d.target).tolist()) <= {-1, 0, 1}
    assert np.any(d.target != 0)


@pytest.mark.parametrize(("n_features", "margin"), [(100, 0.05), (100, 0.2), (10, 0.5), (2, 0.9), (1, 0.3), (50, 0.0)])
def test_obpm_every_instance_has_the_margin(n_features, margin):
    d = make_obpm_artificial(500, 300, n_features=n_features, margin=margin, random_state=1)
    u = d.target.astype(float)
    assert _margins(d.X_train, u).min() >= margin - 1e-12
    assert _margins(d.X_test, u).min() >= margin - 1e-12
    # labels are sign(u . x); the test set is clean
    np.testing.assert_array_equal(d.y_train_clean, np.where(d.X_train @ u >= 0, 1, -1))
    np.testing.assert_array_equal(d.y_test, np.where(d.X_test @ u >= 0, 1, -1))
    np.testing.assert_array_equal(d.y_train, d.y_train_clean)  # label_noise=0


def test_obpm_instances_spread_over_the_sphere():
    # Rejection keeps the rest of the sphere: the coordinates stay centred with variance 1/d.
    d = make_obpm_artificial(4000, 0, random_state=0)
    assert abs(d.X_train.mean()) < 0.01
    assert d.X_train.var() == pytest.approx(1 / 100, rel=0.05)
    assert 0.3 < np.mean(d.y_train == 1) < 0.7


@pytest.mark.parametrize("noise", [0.01, 0.1, 0.3])
def test_obpm_label_noise_rate(noise):
    n = 20_000
    d = make_obpm_artificial(n, 10, label_noise=noise, random_state=5)
    rate = np.mean(d.y_train != d.y_train_clean)
    assert abs(rate - noise) < 5 * math.sqrt(noise * (1 - noise) / n)
    # only the training labels are noisy
    np.testing.assert_array_equal(d.y_test, np.where(d.X_test @ d.target >= 0, 1, -1))


def test_obpm_noise_changes_only_the_labels():
    a = make_obpm_artificial(500, 100, random_state=2)
    b = make_obpm_artificial(500, 100, label_noise=0.1, random_state=2)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    np.testing.assert_array_equal(a.y_train_clean, b.y_train_clean)
    assert np.any(b.y_train != b.y_train_clean)


def test_obpm_reproducible_and_seeded():
    a = make_obpm_artificial(200, 100, label_noise=0.1, random_state=7)
    b = make_obpm_artificial(200, 100, label_noise=0.1, random_state=7)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = make_obpm_artificial(200, 100, label_noise=0.1, random_state=8)
    assert not np.array_equal(a.X_train, c.X_train)
    assert not np.array_equal(a.X_test, c.X_test)
    assert not np.array_equal(a.target, c.target)


def test_obpm_prefix_stable_and_test_from_its_own_stream():
    n = GENERATION_ROWS + 500  # crosses a generation block
    big = make_obpm_artificial(n, 50, label_noise=0.2, random_state=4)
    small = make_obpm_artificial(GENERATION_ROWS + 7, 20, label_noise=0.2, random_state=4)
    k = GENERATION_ROWS + 7
    np.testing.assert_array_equal(big.X_train[:k], small.X_train)
    np.testing.assert_array_equal(big.y_train[:k], small.y_train)
    np.testing.assert_array_equal(big.X_test[:20], small.X_test)
    # the test sample is not a copy of the training sample's first rows
    assert not np.array_equal(big.X_train[:50], big.X_test)
    empty = make_obpm_artificial(0, 0, random_state=4)
    assert empty.X_train.shape == (0, 100) and empty.y_train.shape == (0,)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"margin": 1.0},
        {"margin": -0.1},
        {"label_noise": 1.5},
        {"n_features": 0},
        {"n_test": -1},
        {"n_features": 100, "margin": 0.6},  # a vanishing fraction of the sphere
        {"random_state": -3},
    ],
)
def test_obpm_rejects_bad_parameters(kwargs):
    kwargs = {"n_train": 10, "n_test": 10, **kwargs}
    with pytest.raises(ValueError):
        make_obpm_artificial(**kwargs)


def test_write_obpm_artificial_does_not_depend_on_block_rows(tmp_path: Path):
    kw = {"n_train": 700, "n_test": 300, "label_noise": 0.1, "random_state": 9}
    tr1, te1 = write_obpm_artificial(tmp_path / "a_tr.zarr", tmp_path / "a_te.zarr", block_rows=64, **kw)
    tr2, te2 = write_obpm_artificial(tmp_path / "b_tr.zarr", tmp_path / "b_te.zarr", block_rows=333, **kw)
    d = make_obpm_artificial(**kw)
    for ds1, ds2, X, y in ((tr1, tr2, d.X_train, d.y_train), (te1, te2, d.X_test, d.y_test)):
        assert ds1.n_blocks != ds2.n_blocks
        for ds in (ds1, ds2):
            Xs, ys = open_dataset(ds.path, validate="full").to_numpy()
            np.testing.assert_array_equal(Xs, X)
            np.testing.assert_array_equal(ys, y)
        assert ds1.meta["params"]["random_state"] == 9
    assert tr1.meta["params"]["split"] == "train" and te1.meta["params"]["split"] == "test"


# --------------------------------------------------------------------------- RCV1-like corpus


def _collect(parts) -> tuple[sp.csr_matrix, np.ndarray]:
    parts = list(parts)
    return sp.vstack([X for X, _ in parts], format="csr"), np.concatenate([y for _, y in parts])


@pytest.fixture(scope="module")
def rcv1_default():
    """6,000 documents at the default (RCV1-v2) shape, noise free."""
    return _collect(iter_rcv1_like(6000, label_noise=0.0, random_state=11))


def _assert_canonical(X: sp.csr_matrix) -> None:
    assert X.indptr[0] == 0 and np.all(np.diff(X.indptr) >= 1)  # no empty document
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    same_row = row_of[1:] == row_of[:-1]
    assert np.all(np.diff(X.indices.astype(np.int64))[same_row] > 0)  # sorted, unique
    assert X.indices.min() >= 0 and X.indices.max() < X.shape[1]
    assert np.all(X.data > 0)
    assert X.has_canonical_format


def test_rcv1_like_statistics(rcv1_default):
    X, y = rcv1_default
    assert X.shape == (6000, 47_236)
    assert X.dtype == np.float32 and y.dtype == np.int64
    distinct = np.diff(X.indptr)
    assert distinct.mean() == pytest.approx(75, rel=0.10)
    assert distinct.std() > 10  # document lengths vary (lognormal)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    # threshold calibrated on a separate sample: sampling error of ~0.006 each
    assert np.mean(y == 1) == pytest.approx(0.47, abs=0.03)
    _assert_canonical(X)


def test_rcv1_like_values_are_log_tf(rcv1_default):
    X, _ = rcv1_default
    # Within a row, value / min value = log2(1 + c) / log2(1 + c_min); for the many
    # rows that hold a single-occurrence term, scaling by that value gives log2(1 + count).
    X = X[:500].astype(np.float64)
    mins = np.minimum.reduceat(X.data, X.indptr[:-1])
    counts = 2.0 ** (X.data / np.repeat(mins, np.diff(X.indptr))) - 1
    assert np.allclose(counts, np.rint(counts), atol=1e-3)  # whole counts...
    assert counts.max() > 1.5  # ...and repeated terms occur


def test_rcv1_like_is_zipfian(rcv1_default):
    X, _ = rcv1_default
    df = np.sort(np.bincount(X.indices, minlength=X.shape[1]))[::-1]
    assert df[0] > 0.5 * X.shape[0]  # the commonest term is in most documents
    # rank-frequency slope on a log-log scale over the head, roughly -s = -1.1
    ranks = np.arange(10, 1000)
    slope = np.polyfit(np.log(ranks + 1), np.log(df[ranks]), 1)[0]
    assert -1.6 < slope < -0.5


def test_rcv1_like_blocks_dtype_and_small_vocabulary():
    parts = list(iter_rcv1_like(GENERATION_ROWS + 100, n_features=2000, mean_distinct=30, dtype="float64"))
    assert [X.shape[0] for X, _ in parts] == [GENERATION_ROWS, 100]
    X, y = _collect(parts)
    assert X.dtype == np.float64 and X.shape[1] == 2000
    assert np.diff(X.indptr).mean() == pytest.approx(30, rel=0.10)
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0, atol=1e-12)
    _assert_canonical(X)
    assert list(iter_rcv1_like(0)) == []


def test_rcv1_like_label_noise_flips_only_labels():
    kw = {"n_features": 3000, "mean_distinct": 40, "random_state": 2}
    X0, y0 = _collect(iter_rcv1_like(5000, label_noise=0.0, **kw))
    X1, y1 = _collect(iter_rcv1_like(5000, label_noise=0.2, **kw))
    assert (X0 != X1).nnz == 0
    rate = np.mean(y0 != y1)
    assert abs(rate - 0.2) < 5 * math.sqrt(0.2 * 0.8 / 5000)


def test_rcv1_like_reproducible_prefix_stable_and_seeded():
    kw = {"n_features": 3000, "mean_distinct": 25}
    Xa, ya = _collect(iter_rcv1_like(GENERATION_ROWS + 300, random_state=5, **kw))
    Xb, yb = _collect(iter_rcv1_like(GENERATION_ROWS + 300, random_state=5, **kw))
    assert (Xa != Xb).nnz == 0 and np.array_equal(ya, yb)
    Xp, yp = _collect(iter_rcv1_like(GENERATION_ROWS + 40, random_state=5, **kw))
    assert (Xa[: Xp.shape[0]] != Xp).nnz == 0 and np.array_equal(ya[: yp.shape[0]], yp)
    Xc, yc = _collect(iter_rcv1_like(GENERATION_ROWS + 300, random_state=6, **kw))
    assert (Xa != Xc).nnz > 0 and not np.array_equal(ya, yc)


def test_make_rcv1_like_round_trip_and_block_rows(tmp_path: Path):
    kw = {"n_features": 4000, "mean_distinct": 30, "label_noise": 0.05, "random_state": 3}
    n = GENERATION_ROWS + 904
    X, y = _collect(iter_rcv1_like(n, **kw))
    stores = [make_rcv1_like(tmp_path / f"r{b}.zarr", n, block_rows=b, **kw) for b in (1000, 3000)]
    assert stores[0].n_blocks != stores[1].n_blocks
    for ds in stores:
        ds = open_dataset(ds.path, validate="full")
        assert ds.layout == "csr" and ds.shape == (n, 4000) and ds.dtype == np.float32
        Xs, ys = ds.to_scipy()
        assert Xs.dtype == np.float32
        np.testing.assert_array_equal(Xs.indptr, X.indptr)
        np.testing.assert_array_equal(Xs.indices, X.indices)
        np.testing.assert_array_equal(Xs.data, X.data)
        np.testing.assert_array_equal(ys, y)
        p = ds.meta["params"]
        assert p["generator"] == "rcv1_like" and p["random_state"] == 3 and p["n_relevant"] == 400
    with pytest.raises(FileExistsError):
        make_rcv1_like(tmp_path / "r1000.zarr", 10, **kw)
    ds = make_rcv1_like(tmp_path / "r1000.zarr", 10, overwrite=True, **kw)
    assert ds.n_samples == 10


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mean_distinct": 0.5},
        {"mean_distinct": 5000.0, "n_features": 1000},
        {"positive_fraction": 1.0},
        {"label_noise": -0.1},
        {"n_relevant": 0},
        {"n_relevant": 2000, "n_features": 1000},
        {"dtype": "int32"},
        {"length_sigma": -1.0},
    ],
)
def test_rcv1_like_rejects_bad_parameters(kwargs):
    kwargs.setdefault("n_features", 1000)
    kwargs.setdefault("mean_distinct", 20)
    with pytest.raises(ValueError):
        iter_rcv1_like(10, **kwargs)


@pytest.mark.slow
def test_make_rcv1_like_full_scale(tmp_path: Path):
    """RCV1 scale in one store; its time and memory are measured in benchmarks/, not asserted here."""
    ds = make_rcv1_like(tmp_path / "rcv1.zarr", 800_000)
    assert ds.shape == (800_000, 47_236)
    assert ds.nnz / ds.n_samples == pytest.approx(75, rel=0.05)
    assert abs(float(np.mean(ds.read_block(ds.n_blocks - 1).y == 1)) - 0.47) < 0.05


# --------------------------------------------------------------------------- drifting concept (sec. 4.2)


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(500, 6, 6), dtype=np.uint8)
    labels = np.arange(500) % 10
    return X, labels


def _oracle_positive(r: np.ndarray, T: int, pos: tuple) -> list:
    """The paper's pseudo-code, literally, one t at a time."""
    out = []
    for t in range(1, T + 1):
        z = pos[0]
        if r[t - 1] > (1 - t / (T / 2)):
            z = pos[1]
        if r[t - 1] > (1 - t / (1.11 * T)):
            z = pos[2]
        out.append(z)
    return out


@pytest.mark.parametrize("T", [1000, 777])
def test_drift_follows_the_pseudo_code(images, T):
    X, labels = images
    s = make_drifting_stream(X, labels, n_samples=T, positive_labels=(3, 7, 1), random_state=4)
    assert s.positive_labels == (3, 7, 1)
    assert s.X.shape == (T, 36) and s.X.dtype == np.uint8
    np.testing.assert_array_equal(s.X, X.reshape(500, -1)[s.source_index])
    assert s.r.min() >= 0 and s.r.max() < 1
    assert s.positive_label.tolist() == _oracle_positive(s.r, T, (3, 7, 1))
    np.testing.assert_array_equal(s.y, np.where(labels[s.source_index] == s.positive_label, 1, -1))
    assert s.y.dtype == np.int64


def test_drift_phases(images):
    X, labels = images
    T = 20_000
    s = make_drifting_stream(X, labels, n_samples=T, positive_labels=(0, 1, 2), random_state=1)
    pl = s.positive_label
    # early on label 1 dominates: P(not l1 at t) <= t / (T/2) <= 0.1 for t <= T/20
    assert np.mean(pl[: T // 20] == 0) > 0.85
    assert not np.any(pl[T // 2 :] == 0)  # never l1 after T/2
    # near t = T, l3 has probability t / (1.11 T) ~ 0.9 -- not 1, despite the paper's prose
    assert np.mean(pl[-T // 20 :] == 2) == pytest.approx(0.88, abs=0.03)
    # rows are drawn uniformly; about a tenth of them are positive
    assert np.bincount(s.source_index, minlength=500).min() > 10
    assert np.mean(s.y == 1) == pytest.approx(0.1, abs=0.02)


def test_drift_reproducible_and_default_labels(images):
    X, labels = images
    a = make_drifting_stream(X, labels, n_samples=300, random_state=2)
    b = make_drifting_stream(X, labels, n_samples=300, random_state=2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert len(set(a.positive_labels)) == 3 and set(a.positive_labels) <= set(range(10))
    c = make_drifting_stream(X, labels, n_samples=300, random_state=3)
    assert not np.array_equal(a.source_index, c.source_index)
    assert not np.array_equal(a.r, c.r)
    # the rows are keyed by t: a longer stream starts with the same rows
    d = make_drifting_stream(X, labels, n_samples=600, random_state=2)
    np.testing.assert_array_equal(d.source_index[:300], a.source_index)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"positive_labels": (1, 1, 2)},
        {"positive_labels": (1, 2)},
        {"positive_labels": (1, 2, 42)},
        {"n_samples": 0},
    ],
)
def test_drift_rejects_bad_parameters(images, kwargs):
    X, labels = images
    with pytest.raises(ValueError):
        make_drifting_stream(X, labels, **kwargs)


def test_drift_rejects_bad_inputs(images):
    X, labels = images
    with pytest.raises(ValueError):
        make_drifting_stream(X, labels[:-1])
    with pytest.raises(ValueError):
        make_drifting_stream(X[:, 0, 0], labels)
    with pytest.raises(ValueError):
        make_drifting_stream(X, labels % 2)  # fewer than 3 classes
