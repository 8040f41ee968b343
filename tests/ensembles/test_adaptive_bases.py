"""The adaptive learners (AROW, NormalizedGradient) as ensemble bases.

PermutationBPM's members are ordinary estimators trained as run-parallel tasks
(:func:`distlearn.distributed.runs.fit_members`), so an adaptive base works
there: member ``j`` is the base estimator fitted on member ``j``'s seeded
permutation, bit for bit, in this process and on a Dask cluster.  OBPM's fused
ensemble kernel and ParameterMixing's weight mixing keep no per-feature
statistics: they refuse an adaptive base at ``fit`` with one line that names
``base`` and what to use instead.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distlearn import (
    AROW,
    OBPM,
    NormalizedGradient,
    ParameterMixing,
    PermutationBPM,
    rng,
)
from distlearn.data import create_dataset, open_dataset
from distlearn.estimators import ADAPTIVE_ESTIMATORS
from distlearn.training import make_estimator


def _data(n=400, d=15, k=2, seed=0):
    """Sparse-ish rows with feature scales over 1e-2..1e2 (NAG's maxima move), a noisy teacher."""
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, d)) * np.logspace(-2, 2, d)[g.permutation(d)] * (g.random((n, d)) < 0.5)
    w = g.normal(size=(k if k > 2 else 1, d)) / np.maximum(np.abs(X).max(axis=0), 1e-3)
    s = X @ w.T + 0.2 * g.normal(size=(n, w.shape[0]))
    y = (s[:, 0] > 0).astype(np.int64) if k == 2 else np.argmax(s, axis=1).astype(np.int64)
    return X, y


BASES = [
    pytest.param(AROW(r=0.5), id="arow"),
    pytest.param(NormalizedGradient(loss="hinge", eta=0.5), id="nag-hinge"),
    pytest.param(NormalizedGradient(loss="logistic"), id="nag-logistic"),
]


def _member_seed(clf, j):
    return int(rng.hash64(clf._seed, rng.stream_id("permutation-bpm"), j)) & 0x7FFFFFFFFFFFFFFF


def _reference(base, seed, **kw):
    return base.__class__(**{**base.get_params(), "shuffle": True, "random_state": seed, **kw})


def _full(est):
    return np.concatenate([est.coef_, est.intercept_[:, None]], axis=1)


# -- PermutationBPM: members are the base fitted on their permutations -------------------------------------


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("k,conversion", [(2, "last"), (3, "average")])
def test_permutation_bpm_members_are_the_adaptive_base_on_their_permutation(base, k, conversion):
    X, y = _data(k=k, seed=k)
    clf = PermutationBPM(n_estimators=4, base=base, epochs=2, conversion=conversion, random_state=7).fit(X, y)
    assert clf.permutation_ == "exact" and len(clf.estimators_) == 4
    for j, est in enumerate(clf.estimators_):
        assert type(est) is type(base)
        ref = _reference(base, _member_seed(clf, j), epochs=2, conversion=conversion).fit(X, y)
        np.testing.assert_array_equal(_full(est), _full(ref))
        np.testing.assert_array_equal(est._state.A, ref._state.A)  # the per-feature statistics too
        np.testing.assert_array_equal(clf.members_[j], _full(ref))
    np.testing.assert_allclose(clf.coef_, np.mean([e.coef_ for e in clf.estimators_], axis=0), rtol=1e-12)
    assert not np.array_equal(clf.members_[0], clf.members_[1])  # different permutations
    threads = PermutationBPM(n_estimators=4, base=base, epochs=2, conversion=conversion, random_state=7,
                             n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(threads.members_, clf.members_)
    assert clf.score(X, y) > 0.6


@pytest.mark.parametrize("name,params", [("arow", {"r": 0.5}), ("nag", {"loss": "hinge"})])
def test_permutation_bpm_adaptive_base_by_name_and_margin_bound(name, params):
    X, y = _data(seed=3)
    a = PermutationBPM(n_estimators=3, base=name, base_params=params, random_state=1).fit(X, y)
    b = PermutationBPM(n_estimators=3, base=ADAPTIVE_ESTIMATORS[name](**params), random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.members_, b.members_)
    mb = PermutationBPM(n_estimators=3, base=name, base_params=params, weights="margin_bound",
                        random_state=1).fit(X, y)
    assert mb.weights_.shape == (1, 3) and abs(mb.weights_.sum() - 1) < 1e-9


@pytest.mark.parametrize("base", BASES)
def test_permutation_bpm_adaptive_base_on_a_store(tmp_path, base):
    X, y = _data(seed=4)
    p = tmp_path / "s.zarr"
    create_dataset(p, sp.csr_matrix(X), y, block_rows=64, dtype="float64")
    Xs, ys = open_dataset(p).to_scipy()
    mem = PermutationBPM(n_estimators=3, base=base, epochs=1, conversion="last", random_state=2).fit(Xs, ys)
    exact = PermutationBPM(n_estimators=3, base=base, epochs=1, conversion="last", random_state=2).fit(p)
    assert exact.permutation_ == "exact"
    np.testing.assert_array_equal(exact.members_, mem.members_)
    blocks = PermutationBPM(n_estimators=3, base=base, epochs=1, conversion="last", random_state=2,
                            permutation="blocks").fit(p)
    assert blocks.permutation_ == "blocks"
    for j, est in enumerate(blocks.estimators_):  # each member streamed the store in its own block order
        ref = _reference(base, _member_seed(blocks, j), epochs=1, conversion="last").fit(str(p))
        np.testing.assert_array_equal(_full(est), _full(ref))


@pytest.fixture(scope="module")
def adaptive_store(tmp_path_factory):
    X, y = _data(n=600, seed=9)
    p = tmp_path_factory.mktemp("adaptive") / "train.zarr"
    create_dataset(p, sp.csr_matrix(X), y, block_rows=50, dtype="float64")
    return str(p)


@pytest.mark.cluster
@pytest.mark.parametrize("permutation", ["exact", "blocks"])
@pytest.mark.parametrize("base", [AROW(r=0.5), NormalizedGradient(loss="hinge", eta=0.5)], ids=["arow", "nag"])
def test_permutation_bpm_adaptive_members_as_dask_tasks(adaptive_store, dask_scheduler, permutation, base):
    kw = {"n_estimators": 4, "base": base, "epochs": 2, "random_state": 4, "permutation": permutation,
          "conversion": "average"}
    a = PermutationBPM(**kw).fit(adaptive_store)
    b = PermutationBPM(scheduler=dask_scheduler["address"], **kw).fit(adaptive_store)
    assert a.permutation_ == b.permutation_ == permutation
    np.testing.assert_array_equal(a.members_, b.members_)
    np.testing.assert_array_equal(_full(a), _full(b))
    for ea, eb in zip(a.estimators_, b.estimators_):
        np.testing.assert_array_equal(ea._state.A, eb._state.A)


# -- where an adaptive base cannot run: one line at fit ------------------------------------------------------


@pytest.mark.parametrize("base,shown,cls", [
    (AROW(), r"AROW\(\.\.\.\)", "AROW"),
    ("arow", "'arow'", "AROW"),
    (NormalizedGradient(loss="hinge"), r"NormalizedGradient\(\.\.\.\)", "NormalizedGradient"),
    ("nag", "'nag'", "NormalizedGradient"),
])
def test_obpm_refuses_an_adaptive_base_in_one_line(base, shown, cls):
    X, y = _data(n=60)
    for call in (lambda: OBPM(n_estimators=3, base=base).fit(X, y),
                 lambda: OBPM(n_estimators=3, base=base).partial_fit(X, y)):
        with pytest.raises(ValueError, match=rf"^base={shown}: OBPM .*per-feature statistics.*"
                                             rf"PermutationBPM\(base={cls}\(\.\.\.\)\)") as e:
            call()
        assert "\n" not in str(e.value)
    est = OBPM(n_estimators=3, base="perceptron", base_params=None)
    with pytest.raises(ValueError, match="^base='arow': OBPM"):
        est.set_params(base="arow").fit(X, y)
    assert not hasattr(est, "coef_")


def test_obpm_refuses_an_adaptive_base_on_a_store(tmp_path):
    X, y = _data(n=60)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=20)
    with pytest.raises(ValueError, match=r"^base=AROW\(\.\.\.\): OBPM"):
        OBPM(n_estimators=3, base=AROW()).fit(p)


@pytest.mark.parametrize("base,cls", [(AROW(), "AROW"), ("nag", "NormalizedGradient")])
def test_parameter_mixing_refuses_an_adaptive_base_in_one_line(tmp_path, base, cls):
    X, y = _data(n=60)
    p = tmp_path / "s.zarr"
    create_dataset(p, X, y, block_rows=20)
    for data in ((X, y), (str(p),)):
        with pytest.raises(ValueError, match=rf"^base=.*: ParameterMixing mixes weight vectors only.*not defined; "
                                             rf"train {cls} alone, or use PermutationBPM") as e:
            ParameterMixing(base=base, n_shards=2).fit(*data)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="shards .* do not apply to arow"):
        make_estimator("arow", {}, shards=2)


def test_unknown_base_lists_the_adaptive_names():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match=r"base must be one of \[.*'arow'.*'nag'"):
        PermutationBPM(base="nope").fit(X, y)
