"""Iterative parameter mixing (data-parallel mode): brute force, trees, and the cluster.

The reference for the weights is a sequential re-implementation of McDonald's
IPM over the rule's chunk driver (``learn_chunk``) with the stream order the
module documents; the reference for ``n_shards=1`` is the base estimator
itself.  Merges are checked against sequential folds with exact
(integer-valued) inputs, the graph's fan-in is read off the delayed graph, and
the Dask runs are compared bit for bit with the in-process run.
"""

from __future__ import annotations

import operator
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from dask.core import get_dependencies
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

import distlearn
from distlearn.conversions import Cutoff
from distlearn.conversions.core import AverageSummary, CutoffGroups, CutoffSummary, TreeNode, TreeSummary
from distlearn.data.store import create_dataset, open_dataset
from distlearn.data.synthetic import make_obpm_artificial
from distlearn.distributed import mixing as M
from distlearn.distributed.executor import Executor
from distlearn.distributed.graph import fold, tree_depth, tree_reduce
from distlearn import ParameterMixing
from distlearn.learners import copy_state, init_state, learn_chunk, make_rule
from distlearn.learners.linear import LinearState

BASES = {"perceptron": distlearn.Perceptron, "alma": distlearn.ALMA, "margin": distlearn.MarginPerceptron,
         "romma": distlearn.ROMMA, "pa": distlearn.PassiveAggressive, "mira": distlearn.MIRA}


@pytest.fixture(scope="module")
def data():
    return make_obpm_artificial(2400, 600, n_features=40, margin=0.05, random_state=3)


@pytest.fixture(scope="module")
def store(data, tmp_path_factory):
    """24 blocks of 100 rows (dense float64)."""
    path = tmp_path_factory.mktemp("ipm") / "train.zarr"
    create_dataset(path, data.X_train, data.y_train, block_rows=100, dtype="float64")
    return str(path)


@pytest.fixture(scope="module")
def multiclass(tmp_path_factory):
    rs = np.random.default_rng(5)
    centers = rs.normal(size=(3, 12)) * 3
    y = rs.integers(0, 3, 900)
    X = centers[y] + rs.normal(size=(900, 12))
    path = tmp_path_factory.mktemp("ipm3") / "mc.zarr"
    create_dataset(path, sp.csr_matrix(X), y * 10, block_rows=64, dtype="float32")
    return str(path), X, y * 10


def same_model(a, b) -> None:
    assert np.array_equal(a.coef_, b.coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert a.coef_.dtype == b.coef_.dtype


# ------------------------------------------------------------------ brute force
@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("on", ["store", "array"])
def test_one_shard_is_the_base_estimator(base, on, data, store):
    X = store if on == "store" else data.X_train
    y = None if on == "store" else data.y_train
    ref = BASES[base](epochs=3, random_state=7).fit(X, y)
    ipm = ParameterMixing(base=base, n_shards=1, epochs=3, random_state=7).fit(X, y)
    same_model(ref, ipm)
    assert ipm.online_errors_ == int(ipm.epoch_online_errors_.sum()) == ref.online_errors_
    assert ipm.n_updates_ == ref.n_updates_ and ipm.t_ == ref.t_ == 3 * 2400
    assert ipm.n_iter_ == 3 and ipm.epoch_online_errors_.shape == (3,)


@pytest.mark.parametrize("base,params", [("perceptron", {}), ("margin", {}), ("mira", {"multiclass": "native"}),
                                        ("pa", {"multiclass": "native", "shuffle": False})])
def test_one_shard_is_the_base_estimator_multiclass_float32(base, params, multiclass):
    path = multiclass[0]
    ref = BASES[base](epochs=2, random_state=1, dtype="float32", **params).fit(path)
    ipm = ParameterMixing(base=base, base_params=params, n_shards=1, epochs=2, random_state=1,
                          dtype="float32").fit(path)
    same_model(ref, ipm)
    assert ipm.coef_.shape == (3, 12)
    X, y = multiclass[1:]
    assert ref.score(X, y) == ipm.score(X, y) > 0.9


def test_one_shard_average_is_the_base_average(data, store):
    # The same sum of hypotheses, added per epoch instead of in one running sum.
    ref = distlearn.PassiveAggressive(epochs=3, random_state=2, conversion="average").fit(store)
    ipm = ParameterMixing(base="pa", n_shards=1, epochs=3, random_state=2, conversion="average").fit(store)
    np.testing.assert_allclose(ipm.coef_, ref.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ipm.intercept_, ref.intercept_, rtol=1e-12, atol=1e-14)


def brute_force_ipm(path, rule, n_shards, epochs, seed, mixing):
    """McDonald's IPM, sequentially: every shard from the mixed vector, one pass over
    its blocks in the single learner's epoch order, then the weighted average."""
    ds = open_dataset(path)
    nb = ds.n_blocks
    edges = [s * nb // n_shards for s in range(n_shards + 1)]
    mixed = init_state(ds.n_features, 1)
    errors = []
    for e in range(epochs):
        perm = distlearn.rng.block_generator(seed, "shuffle-blocks", e).permutation(nb)
        ws, cs, ups, err = [], [], [], 0
        for s in range(n_shards):
            state = copy_state(mixed)
            u0 = int(state.n_updates[0])
            rows = 0
            for b in perm:
                if not edges[s] <= b < edges[s + 1]:
                    continue
                X, y, _ = ds.read_block(int(b))
                order = distlearn.rng.block_generator(seed, "shuffle-rows", e * (1 << 32) + int(b)).permutation(len(y))
                log = learn_chunk(rule, state, X, (y == 1).astype(np.int64), order=order, fit_intercept=True)
                err += int(log.mistake.sum())
                rows += len(y)
            u = int(state.n_updates[0]) - u0
            ws.append(state.W[:, 0] * state.scale[0])
            ups.append(u)
            cs.append(rows if mixing == "uniform" else u)
        errors.append(err)
        W = mixed.W.copy()
        if sum(ups) == 0:
            pass  # nobody moved: every shard holds the mixed vector
        elif sum(c > 0 for c in cs) == 1:
            W[:, 0] = ws[[c > 0 for c in cs].index(True)]
        else:
            total = cs[0] * ws[0]
            for c, w in zip(cs[1:], ws[1:]):
                total = total + c * w
            W[:, 0] = total / sum(cs)
        mixed = LinearState(W, np.ones(1), np.zeros(1), mixed.n_updates + sum(ups), mixed.n_rounds, mixed.age)
    return mixed.W[:, 0], np.array(errors)


@pytest.mark.parametrize("mixing", ["uniform", "updates"])
@pytest.mark.parametrize("base", ["perceptron", "pa"])
def test_shards_equal_sequential_ipm(mixing, base, store):
    rule = make_rule("perceptron") if base == "perceptron" else make_rule("pa", variant="PA-I", C=1.0)
    w, errors = brute_force_ipm(store, rule, 5, 4, 11, mixing)
    ipm = ParameterMixing(base=base, n_shards=5, epochs=4, mixing=mixing, random_state=11).fit(store)
    assert np.array_equal(ipm.coef_[0], w[:-1])
    assert np.array_equal(ipm.intercept_, w[-1:])
    assert np.array_equal(ipm.epoch_online_errors_, errors)
    assert ipm.shard_bounds_.tolist() == [[0, 4], [4, 9], [9, 14], [14, 19], [19, 24]]
    np.testing.assert_allclose(ipm.mixing_weights_.sum(axis=1), 1.0)


# ------------------------------------------------------------------ purity and merges
def test_shard_task_is_pure(store):
    est = ParameterMixing(base="alma", n_shards=4, conversion="cutoff", random_state=0)
    sources, spec, _ = est._plan(store, None)
    start = M.finish_mix(M.merge_mix(*[M.shard_epoch(s, i, 0, None, spec)[0] for i, s in enumerate(sources)]),
                         None, spec)
    before = copy_state(start)
    a = M.shard_epoch(sources[2], 2, 1, start, spec)
    b = M.shard_epoch(sources[2], 2, 1, start, spec)  # a retry
    assert all(np.array_equal(x, y) for x, y in zip(start, before))  # the input is not touched
    assert np.array_equal(a[0].total, b[0].total)
    assert a[2][:5] == b[2][:5] and np.array_equal(a[2].updates, b[2].updates)
    assert a[1].groups == b[1].groups
    assert all(np.array_equal(a[1].G[s], b[1].G[s]) for s in a[1].G)


int_vec = st.lists(st.integers(-50, 50), min_size=6, max_size=6)
part_st = st.tuples(st.lists(int_vec, min_size=2, max_size=2),  # K = 2 columns, d + 1 = 6
                    st.lists(st.integers(0, 3), min_size=2, max_size=2),  # updates per column
                    st.integers(1, 40))  # rows


def make_part(p, mixing) -> M.MixPart:
    h, u, rows = p
    W = np.array(h, np.float64).T
    state = LinearState(W, np.ones(2), (W ** 2).sum(axis=0), np.zeros(2, np.int64), np.zeros(1, np.int64),
                        np.zeros(1, np.int64))
    c = np.array(u) if mixing == "updates" else np.full(2, rows)
    return M._leaf_part(state, c, np.array(u), rows)


def same_part(a: M.MixPart, b: M.MixPart) -> None:
    assert np.array_equal(a.total, b.total)
    for f in ("weight", "contributors", "updates"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert a.rows == b.rows
    assert (a.sole is None) == (b.sole is None)
    if a.sole is not None:
        assert all(np.array_equal(x, y) for x, y in zip(a.sole, b.sole))


@settings(max_examples=40, deadline=None)
@given(st.lists(part_st, min_size=1, max_size=12), st.sampled_from(["uniform", "updates"]), st.integers(2, 5),
       st.randoms(use_true_random=False))
def test_mix_merge_is_associative_and_order_free(parts, mixing, split_every, rnd):
    # Integer-valued hypotheses and weights: every grouping and order gives the same bits.
    parts = [make_part(p, mixing) for p in parts]
    seq = fold(parts, M.merge_mix, split_every=len(parts) + 1)
    same_part(fold(parts, M.merge_mix, split_every=split_every), seq)
    shuffled = list(parts)
    rnd.shuffle(shuffled)
    same_part(fold(shuffled, M.merge_mix, split_every=split_every), seq)
    spec = M.MixSpec(make_rule("perceptron"), 5, 2, "float64", True, 0, True, mixing, ("last",), np.arange(3))
    start = init_state(5, 2)
    start.W[:] = 7.0
    out = M.finish_mix(seq, start, spec)
    for k in range(2):
        if seq.updates[k] == 0:
            assert np.all(out.W[:, k] == 7.0)
        elif seq.contributors[k] == 1:
            assert np.array_equal(out.W[:, k], seq.sole[0][:, k])
        else:  # the weighted mean, by brute force
            hs = [p.total[k] / p.weight[k] for p in parts if p.weight[k] > 0]
            ws = [p.weight[k] for p in parts if p.weight[k] > 0]
            np.testing.assert_allclose(out.W[:, k], np.average(hs, axis=0, weights=ws), rtol=1e-12)


summary_st = st.lists(st.tuples(st.lists(st.integers(-9, 9), min_size=3, max_size=3), st.integers(1, 30),
                                st.dictionaries(st.integers(1, 6), st.integers(1, 4), max_size=4)),
                      min_size=1, max_size=10)


@settings(max_examples=40, deadline=None)
@given(summary_st, st.integers(2, 4))
def test_summary_trees_equal_sequential_folds(raw, split_every):
    avg = [AverageSummary(np.array(t, np.float64)[None], m, np.array(t, np.float64)[None] * 2) for t, m, _ in raw]
    cut = []
    for t, m, groups in raw:
        g = CutoffGroups({s: c for s, c in groups.items()}, {s: float(c) for s, c in groups.items()}, {}, 1.0, m)
        G = {s: c * np.array(t, np.float64)[None] for s, c in groups.items()}
        cut.append(CutoffSummary(1.0, 0.05, g, G, np.array(t, np.float64)[None]))
    for parts in (avg, cut):
        tree = fold(parts, M.merge_summaries, split_every=split_every)
        seq = fold(parts, M.merge_summaries, split_every=len(parts) + 1)
        if isinstance(tree, AverageSummary):
            assert np.array_equal(tree.total, seq.total) and tree.count == seq.count
            assert np.array_equal(tree.last, seq.last)
        else:
            assert tree.groups == seq.groups and sorted(tree.G) == sorted(seq.G)
            assert all(np.array_equal(tree.G[s], seq.G[s]) for s in tree.G)
            assert np.array_equal(tree.h0, seq.h0)
            if tree.groups.counts:
                assert np.array_equal(tree.finalize(), seq.finalize())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3), st.integers(1, 3), st.sampled_from([2, 4]), st.data())
def test_tree_summaries_aligned_tree_equals_sequential(log_parts, level, split_every, draw):
    # Parts of 2**level leaves each, 2**log_parts parts, power-of-two fan-in: the
    # merge tree is exactly the eq. 3 tree over the concatenated leaves.
    n_parts, leaves = 2 ** log_parts, 2 ** level
    parts = []
    for _ in range(n_parts):
        t = TreeSummary(3.0)
        for _ in range(leaves):
            x = draw.draw(st.integers(-5, 5))
            t.push(TreeNode(0, np.array([[float(x)]]), float(draw.draw(st.integers(0, 3))), 1))
        parts.append(t)
    flat = TreeSummary(3.0)
    for p in parts:
        for node in p.nodes:
            flat.push(node)
    tree = fold(parts, M.merge_summaries, split_every=split_every)
    seq = fold(parts, M.merge_summaries, split_every=n_parts + 1)
    for a in (tree, seq):
        c, f = a.chosen(), flat.chosen()
        assert (c.level, c.loss, c.count) == (f.level, f.loss, f.count) and np.array_equal(c.total, f.total)


@pytest.mark.parametrize("conversion", ["last", "average", "cutoff"])
def test_split_every_does_not_change_an_exact_run(conversion, tmp_path):
    # Integer features, perceptron from 0, one epoch: every hypothesis and sum is an
    # integer, so the tree's grouping cannot change a bit.
    rs = np.random.default_rng(0)
    X = rs.integers(-2, 3, size=(640, 10)).astype(np.float64)
    y = np.where(X @ rs.normal(size=10) > 0, 1, -1)
    path = create_dataset(tmp_path / "int.zarr", X, y, block_rows=20, dtype="float64").path
    runs = [ParameterMixing(n_shards=16, epochs=1, conversion=conversion, split_every=s, random_state=3).fit(path)
            for s in (2, 3, 64)]
    assert np.any(runs[0].coef_ != 0)  # the run learnt something
    for r in runs[1:]:
        assert np.array_equal(r.coef_, runs[0].coef_) and np.array_equal(r.intercept_, runs[0].intercept_)
        assert np.array_equal(r.epoch_online_errors_, runs[0].epoch_online_errors_)


# ------------------------------------------------------------------ the graph
class _DelayedExecutor(Executor):
    """Builds the plan as ``dask.delayed`` objects instead of running it, to look at its graph."""

    kind = "graph"

    def submit(self, key, fn, *args, nout=None):
        from dask import delayed

        name, *index = key
        out = delayed(fn, pure=True, nout=nout)(*args, dask_key_name=key)
        if nout is None:
            return out
        return [delayed(operator.getitem, pure=True)(out, i, dask_key_name=(f"{name}-out{i}", *index))
                for i in range(nout)]

    def tree(self, key, parts, merge, split_every=8):
        return tree_reduce(parts, merge, split_every=split_every, name=key)


def test_one_epoch_mixing_graph_has_bounded_fan_in(store):
    est = ParameterMixing(n_shards=20, epochs=2, conversion="average", split_every=3, random_state=0)
    sources, spec, _ = est._plan(store, None)
    plan = M.build_ipm(_DelayedExecutor(), sources, spec, 2, split_every=3, run="test")
    graph = dict(plan.mix_roots[0].__dask_graph__())
    merges = [k for k in graph if isinstance(k, tuple) and str(k[0]).startswith("ipm-mix-e0")]
    assert len(merges) == 7 + 3 + 1  # ceil(20/3), ceil(7/3), 1
    assert max(k[1] for k in merges) == tree_depth(20, 3) == 3
    assert all(len(get_dependencies(graph, k)) <= 3 for k in merges)
    shards = [k for k in graph if isinstance(k, tuple) and k[0] == "ipm-shard-test"]
    assert sorted(k[1:] for k in shards) == [(0, s) for s in range(20)]
    assert all(not get_dependencies(graph, k) for k in shards)  # epoch 0 starts from zeros
    # Epoch 1: every shard task depends on the one mixed state of epoch 0.
    full = dict(plan.state.__dask_graph__())
    start1 = ("ipm-start-test", 1)
    for s in range(20):
        assert get_dependencies(full, ("ipm-shard-test", 1, s)) == {start1}
    summary = dict(plan.summary.__dask_graph__())
    sm = [k for k in summary if isinstance(k, tuple) and str(k[0]).startswith("ipm-summary")]
    assert all(len(get_dependencies(summary, k)) <= 3 for k in sm)
    assert max(k[1] for k in sm) == tree_depth(40, 3)


# ------------------------------------------------------------------ on a cluster
@pytest.mark.cluster
@pytest.mark.parametrize("conversion,mixing,base", [("last", "uniform", "perceptron"), ("average", "updates", "pa"),
                                                    ("tree", "uniform", "alma"), ("cutoff", "updates", "margin")])
def test_cluster_is_bit_identical_to_in_process(conversion, mixing, base, client, store):
    kw = dict(base=base, n_shards=7, epochs=3, mixing=mixing, conversion=conversion, split_every=2, random_state=5)
    local = ParameterMixing(**kw).fit(store)
    remote = ParameterMixing(**kw, scheduler=client).fit(store)
    same_model(local, remote)
    assert np.array_equal(local.epoch_online_errors_, remote.epoch_online_errors_)
    assert np.array_equal(local.shard_updates_, remote.shard_updates_)
    if conversion == "cutoff":
        assert local.summary_.k_ == remote.summary_.k_


@pytest.mark.cluster
def test_cluster_in_memory_shards(client, data):
    kw = dict(base="romma", n_shards=6, epochs=2, conversion="tree", random_state=8)
    local = ParameterMixing(**kw).fit(data.X_train, data.y_train)
    remote = ParameterMixing(**kw, scheduler=client.scheduler.address).fit(data.X_train, data.y_train)
    assert np.array_equal(local.coef_, remote.coef_) and np.array_equal(local.intercept_, remote.intercept_)
    assert np.array_equal(local.shard_updates_, remote.shard_updates_)
    assert local.score(data.X_test, data.y_test) > 0.9


@pytest.fixture(scope="module")
def threads_cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=3, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        yield c


_FAILED: set = set()
_FAILED_LOCK = threading.Lock()
_REAL_SHARD_EPOCH = M.shard_epoch


def flaky_shard_epoch(source, shard, epoch, start, spec):
    """Fails the first attempt of every (epoch, shard) task, as a lost worker would."""
    with _FAILED_LOCK:
        first = (epoch, shard) not in _FAILED
        _FAILED.add((epoch, shard))
    if first:
        raise RuntimeError(f"simulated failure of shard {shard}, epoch {epoch}")
    return _REAL_SHARD_EPOCH(source, shard, epoch, start, spec)


def test_same_model_for_any_workers_and_after_retries(threads_cluster, store, monkeypatch):
    kw = dict(base="alma", n_shards=6, epochs=3, conversion="average", random_state=9)
    ref = ParameterMixing(**kw).fit(store)
    same_model(ref, ParameterMixing(**kw, scheduler=threads_cluster).fit(store))  # 3 threads, any order
    _FAILED.clear()
    monkeypatch.setattr(M, "shard_epoch", flaky_shard_epoch)
    with pytest.raises(RuntimeError, match="simulated failure"):
        ParameterMixing(**kw, scheduler=threads_cluster).fit(store)
    _FAILED.clear()
    retried = ParameterMixing(**kw, scheduler=threads_cluster, retries=1).fit(store)
    assert len(_FAILED) == 18  # every task failed once and was recomputed
    same_model(ref, retried)
    assert np.array_equal(ref.epoch_online_errors_, retried.epoch_online_errors_)


# ------------------------------------------------------------------ accuracy and API
def test_four_shards_reach_the_single_learner_accuracy(data):
    single = distlearn.Perceptron(epochs=5, random_state=0, conversion="average").fit(data.X_train, data.y_train)
    ipm = ParameterMixing(n_shards=4, epochs=5, conversion="average", random_state=0).fit(data.X_train, data.y_train)
    e_single = 1 - single.score(data.X_test, data.y_test)
    e_ipm = 1 - ipm.score(data.X_test, data.y_test)
    assert e_ipm <= 0.03 and e_ipm <= e_single + 0.01
    assert ipm.epoch_online_errors_[-1] < ipm.epoch_online_errors_[0] / 5  # the mixed start keeps improving


def test_errors_are_clear(store, data):
    with pytest.raises(ValueError, match="n_shards=25 is more than the 24 blocks"):
        ParameterMixing(n_shards=25).fit(store)
    with pytest.raises(ValueError, match="more than the 2400 training rows"):
        ParameterMixing(n_shards=2401).fit(data.X_train, data.y_train)
    with pytest.raises(ValueError, match="summaries merge across shards"):
        ParameterMixing(conversion="vote").fit(store)
    with pytest.raises(ValueError, match="stop_below"):
        ParameterMixing(conversion=Cutoff(stop_below=0.1)).fit(store)
    with pytest.raises(ValueError, match="y must be None"):
        ParameterMixing().fit(store, data.y_train)
    with pytest.raises(ValueError, match="scheduler must be"):
        ParameterMixing(scheduler=3).fit(store)
    with pytest.raises(ValueError, match="mixing must be one of"):
        ParameterMixing(mixing="errors").fit(store)
    with pytest.raises(ValueError, match="base must be one of"):
        ParameterMixing(base="svm").fit(store)
    with pytest.raises(ValueError, match="at least 2 classes"):
        ParameterMixing(n_shards=2).fit(data.X_train[:1], data.y_train[:1])
    est = ParameterMixing(n_shards=25)
    with pytest.raises(ValueError):
        est.fit(store)
    assert not hasattr(est, "coef_")  # a failed fit leaves no model
    assert not hasattr(ParameterMixing(), "partial_fit")


def test_sklearn_api(data, store):
    est = ParameterMixing(base="pa", base_params={"C": 0.5}, n_shards=3, epochs=2, random_state=0)
    c = clone(est)
    assert c.get_params() == est.get_params()
    est.fit(store)
    assert est.predict(data.X_test).shape == (600,)
    assert est.decision_function(store).shape == (2400,)
    assert est.mixing_weights_.shape == (2, 3, 1)
    assert est.shard_errors_.shape == (2, 3) and est.epoch_updates_.shape == (2,)
    assert est.n_features_in_ == 40
