"""Learner-parallel kernel OBPM: groups of members, each on its own pool, in process and on Dask.

Every member is the single kernel learner on its examples, so splitting the members into groups
(each with its own pool of its members' patterns) changes no member and no Bayes point: the model is
the same bits for any number of groups, in process and on real ``dask worker`` processes, and after a
checkpoint resume.
"""

from __future__ import annotations

import numpy as np
import pytest

from distlearn import KernelMIRA, KernelOBPM, KernelPerceptron
from distlearn.data.store import create_dataset
from distlearn.ensembles.kernel import KernelEnsembleState, concat_kernel_states

BUDGET = 40


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A 3-class and a binary dense store (digits scaled to [0, 1]), 12 and 10 blocks."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    d = tmp_path_factory.mktemp("klp")
    keep = y < 3
    multi = create_dataset(d / "multi.zarr", X[keep][:480], y[keep][:480], block_rows=40)
    binary = create_dataset(d / "binary.zarr", X[:500], (y[:500] >= 5).astype(int), block_rows=50)
    assert (multi.n_blocks, binary.n_blocks) == (12, 10)
    return {"multi": str(multi.path), "binary": str(binary.path)}


def _obpm(**kw):
    base = dict(n_estimators=6, tau=0.4, epochs=2, random_state=5, checkpoint_every=3,
                base=KernelMIRA(gamma=0.03, budget=BUDGET, removal="random"))
    base.update(kw)
    return KernelOBPM(**base)


def _same(a, b):
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.member_n_support_, b.member_n_support_)
    np.testing.assert_array_equal(a.member_rounds_, b.member_rounds_)
    assert (a.pool_size_, a.n_removed_, a.n_updates_) == (b.pool_size_, b.n_removed_, b.n_updates_)


@pytest.fixture(scope="module")
def reference(stores):
    """One group: all members on one pool (the engine as it runs on arrays)."""
    return {conv: _obpm(learner_groups=1, conversion=conv).fit(stores["multi"]) for conv in ("last", "average")}


@pytest.mark.parametrize("conversion", ["last", "average"])
@pytest.mark.parametrize("groups,every,n_jobs", [(2, 3, 1), (3, 5, 2), (6, 12, 1)])
def test_model_does_not_depend_on_groups(stores, reference, conversion, groups, every, n_jobs):
    ref = reference[conversion]
    est = _obpm(learner_groups=groups, checkpoint_every=every, n_jobs=n_jobs, conversion=conversion).fit(stores["multi"])
    _same(est, ref)
    assert len(est.job_["groups"]) == groups and est.job_["group_blocks"] == 2 * 12 * groups
    assert ref.n_removed_ > 0  # the random removals ran, each member drawing its own
    assert est.member_n_support_.max() <= BUDGET  # each member's cache is its budget ...
    assert est.pool_size_ <= 6 * BUDGET  # ... and a pool the union of its members' caches
    np.testing.assert_array_equal(est.predict(stores["multi"]), ref.predict(stores["multi"]))


def test_job_path_equals_the_streaming_loop(stores):
    """fit on a store (the task chain, one epoch, no shuffle, 3 groups) == partial_fit (one pool)."""
    kw = dict(n_estimators=5, tau=0.5, random_state=2, record_online=True, base=KernelPerceptron(gamma=0.05, beta=0.1, budget="variable"))
    a = KernelOBPM(epochs=1, shuffle=False, learner_groups=3, checkpoint_every=4, **kw).fit(stores["binary"])
    b = KernelOBPM(**kw).partial_fit(stores["binary"])
    _same(a, b)
    assert a.t_ == b.t_ == 500
    assert a.online_errors_ == b.online_errors_ > 0
    np.testing.assert_array_equal(a.online_mistakes_, b.online_mistakes_)


def test_state_arrays_round_trip_and_merge(stores):
    """A group state through its arrays (a checkpoint part) is the same state; merging one group is itself."""
    est = _obpm(learner_groups=1, conversion="average", epochs=1).fit(stores["multi"])
    st = est._state
    back = KernelEnsembleState.from_arrays(st.to_arrays())
    for name in KernelEnsembleState._ARRAYS:
        np.testing.assert_array_equal(getattr(back, name), getattr(st, name))
    for x, y in zip(back.bayes_point(average=True), st.bayes_point(average=True)):
        np.testing.assert_array_equal(x, y)
    assert concat_kernel_states([st]) is st
    with pytest.raises(ValueError, match="same rounds"):
        other = KernelEnsembleState.from_arrays(st.to_arrays())
        other.pmeta[2] += 1
        concat_kernel_states([st, other])


def test_checkpoint_resume_in_process(stores, reference, tmp_path):
    ck = tmp_path / "ck.zarr"
    first = _obpm(epochs=1, learner_groups=2, checkpoint=ck, conversion="average").fit(stores["multi"])
    more = _obpm(learner_groups=2, checkpoint=ck, conversion="average", resume=True).fit(stores["multi"])
    assert more.job_["resumed_from"] == (0, 3)  # 12 blocks, 3 per segment: the first epoch's last cut
    assert more.job_["group_blocks"] == 12 * 2  # only the second epoch ran
    assert more.online_errors_ == first.online_errors_
    _same(more, reference["average"])
    with pytest.raises(ValueError, match="different job"):  # another kernel width is another job
        _obpm(learner_groups=2, checkpoint=ck, conversion="average", resume=True,
              base=KernelMIRA(gamma=0.5, budget=BUDGET, removal="random")).fit(stores["multi"])


def test_arrays_fit_on_one_pool_and_refuse_nothing_new(stores):
    """Arrays fit in this process as before: the same bits as a one-group store fit of the same stream."""
    from distlearn.data.store import open_dataset

    X, y = open_dataset(stores["binary"]).to_numpy()
    kw = dict(n_estimators=4, tau=0.5, random_state=1, base=KernelMIRA(gamma=0.05, budget="variable"))
    a = KernelOBPM(**kw).partial_fit(X, y)
    b = KernelOBPM(epochs=1, shuffle=False, learner_groups=2, **kw).fit(stores["binary"])
    _same(a, b)
    with pytest.raises(ValueError, match="learner_groups"):
        KernelOBPM(learner_groups=0).fit(X, y)


@pytest.mark.cluster
def test_dask_cluster_bit_identical(stores, reference, dask_scheduler):
    est = _obpm(scheduler=dask_scheduler["address"], conversion="average").fit(stores["multi"])
    assert len(est.job_["groups"]) == 2  # one per worker
    _same(est, reference["average"])
    from distributed import Client

    with Client(dask_scheduler["address"]) as c:
        est2 = _obpm(scheduler=c, learner_groups=5, checkpoint_every=4, conversion="last").fit(stores["multi"])
    _same(est2, reference["last"])


def test_a_sparse_store_gives_the_same_model_for_any_groups(tmp_path):
    """Text in a CSR store: the pools mirror their nonzeros (and compact their dense rows lazily), the Bayes point
    is CSR, and 1, 2 or 3 learner groups (merged by example, every dead pattern dropped first) give the same bits,
    pool size included, as the same rows stored dense."""
    import scipy.sparse as sp

    rs = np.random.default_rng(3)
    n, d = 240, 2000
    X = sp.random(n, d, density=0.004, random_state=4, format="csr", data_rvs=lambda k: rs.uniform(0.1, 1, k))
    X = sp.csr_matrix(X.toarray() + np.eye(n, d) * 0.5)  # every row nonzero
    y = (np.asarray(X[:, :400].sum(axis=1)).ravel() > np.median(np.asarray(X[:, :400].sum(axis=1)))).astype(int)
    path = create_dataset(tmp_path / "text.zarr", X, y, block_rows=40).path
    kw = dict(n_estimators=6, tau=0.4, epochs=2, random_state=5, base=KernelMIRA(gamma=0.5, budget=15))
    ref = KernelOBPM(learner_groups=1, **kw).fit(str(path))
    assert sp.issparse(ref.support_vectors_)
    for g in (2, 3):
        got = KernelOBPM(learner_groups=g, **kw).fit(str(path))
        assert sp.issparse(got.support_vectors_)
        assert np.array_equal(got.support_vectors_.toarray(), ref.support_vectors_.toarray())
        assert np.array_equal(got.dual_coef_, ref.dual_coef_)
        assert (got.pool_size_, got.n_removed_) == (ref.pool_size_, ref.n_removed_)
    # the same store read as dense rows: the same model (the mirror changes no bit)
    dense = create_dataset(tmp_path / "dense.zarr", X.toarray(), y, block_rows=40).path
    ref_dense = KernelOBPM(learner_groups=2, **kw).fit(str(dense))
    assert not sp.issparse(ref_dense.support_vectors_)
    assert np.array_equal(ref_dense.support_vectors_, ref.support_vectors_.toarray())
    assert np.array_equal(ref_dense.dual_coef_, ref.dual_coef_) and ref_dense.pool_size_ == ref.pool_size_


def test_a_sparse_store_checkpoint_resumes_to_the_same_model(tmp_path):
    """Text in a CSR store, learner groups with checkpoints: each group's pool is a sparse store, its checkpoint
    part keeps the patterns as CSR (no array of d columns), and a resumed fit is the uninterrupted fit's bits."""
    import json

    import scipy.sparse as sp

    rs = np.random.default_rng(7)
    n, d = 200, 3000
    X = sp.random(n, d, density=0.003, random_state=8, format="csr", data_rvs=lambda k: rs.uniform(0.1, 1, k))
    X = sp.csr_matrix(X.toarray() + np.eye(n, d) * 0.5)
    y = (np.asarray(X[:, :500].sum(axis=1)).ravel() > np.median(np.asarray(X[:, :500].sum(axis=1)))).astype(int)
    path = str(create_dataset(tmp_path / "text.zarr", X, y, block_rows=40).path)
    kw = dict(n_estimators=4, tau=0.5, random_state=2, learner_groups=2, checkpoint_every=2, conversion="average",
              base=KernelMIRA(gamma=0.5, budget="variable"))
    whole = KernelOBPM(epochs=2, **kw).fit(path)
    ck = tmp_path / "ck.zarr"
    KernelOBPM(epochs=1, checkpoint=ck, **kw).fit(path)
    parts = sorted(p for p in ck.rglob("g0*") if p.is_dir())
    assert parts
    for part in parts:  # every array of the part, as its manifest lists them
        shapes = {k: v["shape"] for k, v in json.loads((part / "manifest.json").read_text())["arrays"].items()}
        assert shapes["PS"][1] == 0 and shapes["pool_data"][0] > 0
        assert all(len(s) < 2 or s[1] < d for s in shapes.values())
    more = KernelOBPM(epochs=2, checkpoint=ck, resume=True, **kw).fit(path)
    assert more.job_["resumed_from"] is not None
    assert sp.issparse(more.support_vectors_)
    assert (more.support_vectors_ != whole.support_vectors_).nnz == 0
    assert np.array_equal(more.dual_coef_, whole.dual_coef_) and more.pool_size_ == whole.pool_size_
