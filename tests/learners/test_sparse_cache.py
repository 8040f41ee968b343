"""The kernel cache's sparse mirror and sparse store (learners/kernel.py: ``BudgetState.mirror``, ``mirror_for``;
learners/_budget.py: ``_slot_dot``, ``_next_mirrored``): a pure speed and memory change, so every model, log and
average must be the dense cache's bit for bit -- whatever the budget, removal, rule, kernel, chunking, blocking,
or a switch between sparse and dense chunks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import distlearn
from distlearn.learners import make_rule
from distlearn.learners.kernel import MIRROR_SPARSITY, init_budget_state, learn_budget_chunk, make_kernel


def _text(n=160, d=400, nnz=6, k=2, seed=0, dup=True):
    """Rows with ``nnz`` (1..2 nnz) nonzero columns of ``d`` (Zipf-like: low columns often), a few rows twice
    (an update on a cached row: the twin path), labels from a few columns."""
    rs = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for i in range(n):
        m = int(rs.integers(1, 2 * nnz + 1))
        c = np.unique(np.minimum(d - 1, rs.zipf(1.3, size=m) - 1 + rs.integers(0, 3, size=m)))
        rows += [i] * len(c)
        cols += c.tolist()
        vals += rs.uniform(0.1, 1.0, size=len(c)).round(3).tolist()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, d))
    if dup:
        X = sp.vstack([X, X[: n // 8]]).tocsr()
    score = np.asarray(X[:, :4].sum(axis=1)).ravel() - np.asarray(X[:, 4:12].sum(axis=1)).ravel()
    y = (score > np.median(score)).astype(np.int64) if k == 2 else (np.arange(X.shape[0]) * 7 + (score > 0)) % k
    return X, y.astype(np.int64)


def _fit(X, y, k, budget, removal="margin", kernel="rbf", rule="mira", chunks=1, blocked=True, mirror=True,
         monkeypatch=None):
    K = 1 if k == 2 else k
    native = k > 2 and rule != "pa2"
    r = {"mira": make_rule("mira", beta=0.1, native=native), "perceptron": make_rule("perceptron"),
         "pa2": make_rule("pa", variant="PA-II", C=0.5)}[rule]
    kern = make_kernel(kernel, gamma=0.7, degree=3, coef0=1.0)
    state = init_budget_state(X.shape[1], K, native=native, keep_retired=True)
    if monkeypatch is not None:
        monkeypatch.setattr("distlearn.learners.kernel.MIRROR_SPARSITY", MIRROR_SPARSITY if mirror else 10**9)
    logs = []
    order = np.random.default_rng(1).permutation(X.shape[0])
    for part in np.array_split(order, chunks):
        logs.append(learn_budget_chunk(r, kern, state, X, y, order=part, beta=0.1, budget=budget, removal=removal,
                                       seed=3, blocked=blocked))
    return state, logs


def _dense(a):
    return a.toarray() if sp.issparse(a) else a


def _equal(x, z):
    """Equal values and the same kind: a sparse store's patterns come as CSR, a dense cache's as arrays."""
    assert np.array_equal(_dense(x), _dense(z))


def _same(a, b):
    (sa, la), (sb, lb) = a, b
    for x, z in zip(sa.support(), sb.support()):
        _equal(x, z)
    for x, z in zip(sa.average(), sb.average()):
        _equal(x, z)
    if sa.Kinv is None:
        for x, z in zip(sa.budget_average(), sb.budget_average()):
            _equal(x, z)
    for f in ("mistake", "hinge", "updated", "cache_size", "removed"):
        assert np.array_equal(np.concatenate([getattr(g, f) for g in la]), np.concatenate([getattr(g, f) for g in lb]))
    assert (sa.n_inserted, sa.n_removed, sa.t) == (sb.n_inserted, sb.n_removed, sb.t)
    return True


CASES = [(None, "margin"), ("variable", "margin"), (9, "margin"), (9, "oldest"), (9, "random"), (9, "merge"),
         ("projectron", "margin")]


@pytest.mark.parametrize("budget,removal", CASES)
@pytest.mark.parametrize("k", [2, 3])
def test_sparse_store_gives_the_dense_model_bit_for_bit(budget, removal, k):
    X, y = _text(k=k)
    dense = _fit(X.toarray(), y, k, budget, removal)
    sparse = _fit(X, y, k, budget, removal, chunks=3)
    assert sparse[0].Zm[1] > 0 and dense[0].Zm[1] == 0
    # merging keeps dense patterns (a merged pattern has two rows' nonzeros) with the mirror beside them
    assert sparse[0].store == (removal != "merge") and not dense[0].store
    assert _same(dense, sparse)


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
@pytest.mark.parametrize("rule", ["perceptron", "pa2"])
def test_sparse_store_kernels_rules_and_per_row_rounds(kernel, rule):
    X, y = _text(k=3, seed=2)
    ref = _fit(X.toarray(), y, 3, "variable", kernel=kernel, rule=rule, blocked=False)
    for blocked in (True, False):
        assert _same(ref, _fit(X, y, 3, "variable", kernel=kernel, rule=rule, blocked=blocked, chunks=2))


def test_mirror_off_and_on_give_the_same_model(monkeypatch):
    X, y = _text(seed=4)
    on = _fit(X, y, 2, "variable", mirror=True, monkeypatch=monkeypatch)
    off = _fit(X, y, 2, "variable", mirror=False, monkeypatch=monkeypatch)
    assert on[0].store and not off[0].store and off[0].Zm[1] == 0
    assert _same(on, off)


def test_a_dense_chunk_after_a_sparse_one_makes_the_store_dense_and_changes_nothing():
    X, y = _text(n=200, seed=5)
    Xd = X.toarray()
    Xd[::5, : X.shape[1] // 2] += 0.5  # every fifth row dense over half the columns: too dense for a store
    r, kern = make_rule("mira", beta=0.1), make_kernel("rbf", gamma=0.7)
    ref = init_budget_state(X.shape[1], 1, keep_retired=True)
    mix = init_budget_state(X.shape[1], 1, keep_retired=True)
    half = X.shape[0] // 2
    for state, first, second in ((ref, Xd, Xd), (mix, sp.csr_matrix(Xd), Xd)):
        learn_budget_chunk(r, kern, state, first, y, order=np.arange(0, half, dtype=np.int64), beta=0.1,
                           budget="variable")
        if state is mix:
            assert not state.store  # the first chunk has dense rows: a mirror beside dense patterns
        learn_budget_chunk(r, kern, state, second, y, order=np.arange(half, X.shape[0], dtype=np.int64), beta=0.1,
                           budget="variable")
    for a, b in zip(ref.support(), mix.support()):
        _equal(a, b)
    # a store that meets dense rows becomes dense, with the same patterns
    Xs, ys = _text(n=120, seed=6)
    st_ = init_budget_state(Xs.shape[1], 1)
    learn_budget_chunk(r, kern, st_, Xs, ys, order=np.arange(60, dtype=np.int64), beta=0.1, budget="variable")
    assert st_.store
    before = st_.support()[0]
    Xdd = np.full((4, Xs.shape[1]), 0.25)
    learn_budget_chunk(r, kern, st_, Xdd, np.array([0, 1, 0, 1]), beta=0.1, budget="variable")
    assert not st_.store and np.array_equal(st_.support()[0][: before.shape[0]], before.toarray())


def test_a_store_takes_longer_rows_later():
    X, y = _text(n=150, d=2000, nnz=3, seed=7, dup=False)
    wide = X.toarray()[:40]
    wide[:, 100:190] = 0.5  # 90 more nonzeros a row: still sparse enough for a store, wider than its mirror
    Xl = sp.vstack([X, sp.csr_matrix(wide)]).tocsr()
    yl = np.concatenate([y, np.arange(40) % 2])
    assert wide.shape[1] >= MIRROR_SPARSITY * 100
    r, kern = make_rule("mira", beta=0.1), make_kernel("rbf", gamma=0.7)
    a, b = init_budget_state(Xl.shape[1], 1), init_budget_state(Xl.shape[1], 1)
    for state, data in ((a, Xl), (b, Xl.toarray())):
        learn_budget_chunk(r, kern, state, data, yl, order=np.arange(150, dtype=np.int64), beta=0.1, budget="variable")
        used = int(state.Zm[0])
        learn_budget_chunk(r, kern, state, data, yl, order=np.arange(150, 190, dtype=np.int64), beta=0.1,
                           budget="variable")
        if state is a:
            assert state.store and state.Zm[0] > used + 40 * 90  # the longer rows' nonzeros joined the pool
    for x, z in zip(a.support(), b.support()):
        _equal(x, z)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), budget=st.sampled_from(["variable", 5, None]), chunks=st.integers(1, 4),
       nnz=st.integers(1, 8), neg=st.booleans())
def test_sparse_store_fuzz(seed, budget, chunks, nnz, neg):
    X, y = _text(n=90, d=300, nnz=nnz, seed=seed)
    if neg:  # signed values, and some explicit zeros stored in the matrix
        X.data *= np.where(np.arange(X.nnz) % 3 == 0, -1.0, 1.0)
        X.data[::11] = 0.0
    assert _same(_fit(X.toarray(), y, 2, budget), _fit(X, y, 2, budget, chunks=chunks))


def test_estimator_on_text_uses_a_store_and_matches_the_dense_fit(monkeypatch):
    X, y = _text(n=400, d=3000, seed=8)
    # an explicit tolerance: "auto" takes COMPRESS_AUTO_SPARSE for sparse patterns (the next test)
    a = distlearn.KernelMIRA(budget="variable", random_state=0, gamma=0.5, compress=0.4).fit(X, y)
    b = distlearn.KernelMIRA(budget="variable", random_state=0, gamma=0.5, compress=0.4).fit(X.toarray(), y)
    assert a._state.store and not b._state.store
    assert sp.issparse(a.support_vectors_) and not sp.issparse(b.support_vectors_)  # as SVC keeps them
    assert np.array_equal(a.support_vectors_.toarray(), b.support_vectors_)
    # the compression after the fit solves with a sparse Gram matrix: the same patterns, coefficients to rounding
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-12)
    assert a.conversion_info_["compressed_from"] == b.conversion_info_["compressed_from"]
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X.toarray()), rtol=1e-9, atol=1e-12)
    # gamma="auto": every runner of the race keeps a store (sharing its dot products at d = 3,000); the race and
    # the fit end as with dense patterns (both on the CSR rows: the "scale" width of CSR and dense rows differs
    # in its last bit)
    c = distlearn.KernelMIRA(budget="variable", random_state=0, compress=0.0).fit(X, y)
    monkeypatch.setattr("distlearn.learners.kernel.MIRROR_SPARSITY", 10**9)
    e = distlearn.KernelMIRA(budget="variable", random_state=0, compress=0.0).fit(X, y)
    assert c._state.store and not e._state.store and c.gamma_ == e.gamma_ and c.score(X, y) > 0.6
    assert np.array_equal(c.gamma_online_errors_, e.gamma_online_errors_)
    assert (c.online_errors_, c.n_updates_, c.n_removed_) == (e.online_errors_, e.n_updates_, e.n_removed_)


def test_compress_auto_takes_the_sparse_tolerance_for_text_patterns():
    """compress="auto" compresses a sparse store's CSR patterns to COMPRESS_AUTO_SPARSE (0.1) whatever the class
    count, where dense rows of two classes take KernelMIRA's COMPRESS_AUTO_BINARY (0.4): the fit is the same bits,
    the tolerance alone differs, and the result is what the explicit value gives."""
    from distlearn.estimators.kernel import COMPRESS_AUTO_BINARY, COMPRESS_AUTO_SPARSE

    X, y = _text(n=400, d=3000, seed=8)
    kw = dict(budget="variable", random_state=0, gamma=0.5)
    a = distlearn.KernelMIRA(**kw).fit(X, y)
    b = distlearn.KernelMIRA(**kw).fit(X.toarray(), y)
    assert a._state.store and a._compress_tol(sparse=True) == COMPRESS_AUTO_SPARSE == 0.1
    assert b._compress_tol(sparse=False) == COMPRESS_AUTO_BINARY == 0.4
    assert a.conversion_info_["compressed_from"] == b.conversion_info_["compressed_from"]  # the same fit
    assert a.conversion_info_["compress_residual"] <= COMPRESS_AUTO_SPARSE
    assert b.conversion_info_["compress_residual"] <= COMPRESS_AUTO_BINARY
    assert a.support_vectors_.shape[0] >= b.support_vectors_.shape[0]  # a finer tolerance keeps at least as many
    c = distlearn.KernelMIRA(**kw, compress=COMPRESS_AUTO_SPARSE).fit(X, y)  # explicit: no agreement guard
    assert a.support_vectors_.shape[0] >= c.support_vectors_.shape[0]
    # the multiclass text takes it too
    y3 = np.arange(X.shape[0]) % 3
    m = distlearn.KernelMIRA(**kw).fit(X, y3)
    assert m._compress_tol(sparse=True) == 0.1 and m.conversion_info_["compress_residual"] <= 0.1


def test_a_model_fitted_on_text_saves_loads_and_predicts_as_fitted(tmp_path):
    from distlearn.model import load_model, save_model

    X, y = _text(n=300, d=2500, seed=9)
    clf = distlearn.KernelMIRA(budget="variable", random_state=0, gamma=0.5).fit(X, y)
    assert sp.issparse(clf.support_vectors_)
    path = save_model(clf, tmp_path / "k.npz")
    m = load_model(path)  # the file holds the nonzeros, read back as CSR
    assert m.meta["kind"] == "sparse-kernel" and sp.issparse(m.support_vectors_)
    assert (m.support_vectors_ != clf.support_vectors_).nnz == 0
    assert path.stat().st_size < 8 * clf.support_vectors_.shape[0] * X.shape[1] / 20  # not dense rows
    np.testing.assert_allclose(m.decision_function(X), clf.decision_function(X), rtol=1e-12, atol=1e-14)
    assert np.array_equal(m.predict(X.toarray()), clf.predict(X))


def _tampered(tmp_path, path, **change):
    """A copy of the model file ``path`` with members replaced (and the declared shapes with them)."""
    import json

    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("meta")))
    for k, v in change.items():
        arrays[k] = v
        meta["shapes"][k] = list(np.shape(v))
    out = tmp_path / f"bad-{len(list(tmp_path.iterdir()))}.npz"
    np.savez(out, **arrays, meta=np.array(json.dumps(meta)))
    return out


def test_a_crafted_sparse_model_file_is_refused_in_one_line(tmp_path):
    from distlearn.model import load_model, save_model

    X, y = _text(n=200, d=2500, seed=15)
    path = save_model(distlearn.KernelMIRA(budget="variable", random_state=0, gamma=0.5).fit(X, y),
                      tmp_path / "k.npz")
    with np.load(path) as z:
        ind, ptr, data = z["sv_indices"], z["sv_indptr"], z["sv_data"]
    bad = {
        "a column past the last": dict(sv_indices=np.where(np.arange(len(ind)) == 3, 2500, ind)),
        "a negative column": dict(sv_indices=np.where(np.arange(len(ind)) == 3, -1, ind)),
        "columns out of order in a row": dict(sv_indices=np.concatenate([ind[:1] + 1, ind[:1], ind[2:]])
                                               if ptr[1] >= 2 else ind[::-1].copy()),
        "pointers that step back": dict(sv_indptr=np.concatenate([ptr[:2], ptr[1:2] - 1, ptr[3:]])),
        "pointers not ending at the nonzeros": dict(sv_indptr=np.concatenate([ptr[:-1], ptr[-1:] + 5])),
        "pointers not starting at 0": dict(sv_indptr=np.concatenate([[1], ptr[1:]])),
        "one row too few": dict(sv_indptr=ptr[:-1]),
        "fewer values than columns": dict(sv_data=data[:-1]),
        "float columns": dict(sv_indices=ind.astype(np.float64)),
    }
    for why, change in bad.items():
        with pytest.raises(ValueError) as e:
            load_model(_tampered(tmp_path, path, **change))
        msg = str(e.value)
        assert "\n" not in msg and "bad-" in msg and ("sparse kernel" in msg or "dtype" in msg or "shape" in msg), why


def test_permutation_bayes_point_of_text_members_merges_their_csr_patterns():
    X, y = _text(n=240, d=2500, seed=10)
    kw = dict(base=distlearn.KernelMIRA(budget="variable", gamma=0.5, compress=0.4), n_estimators=3, random_state=0)
    a = distlearn.KernelPermutationBPM(**kw).fit(X, y)
    b = distlearn.KernelPermutationBPM(**kw).fit(X.toarray(), y)
    assert sp.issparse(a.support_vectors_) and a.support_vectors_.shape[0] == b.support_vectors_.shape[0]
    # the same distinct patterns (in first-seen order for CSR, sorted for dense) with the same summed coefficients
    order = np.lexsort(a.support_vectors_.toarray().T[::-1])
    assert np.array_equal(a.support_vectors_.toarray()[order], b.support_vectors_)
    np.testing.assert_allclose(a.dual_coef_[:, order], b.dual_coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X.toarray()), rtol=1e-8, atol=1e-10)


def test_unsorted_and_float32_csr_rows_give_the_same_model():
    X, y = _text(n=150, d=2000, seed=11)
    ref = _fit(X, y, 2, "variable")
    Xu = X.copy()
    for r in range(Xu.shape[0]):  # each row's entries reversed: columns descending
        lo, hi = Xu.indptr[r], Xu.indptr[r + 1]
        Xu.indices[lo:hi] = Xu.indices[lo:hi][::-1].copy()
        Xu.data[lo:hi] = Xu.data[lo:hi][::-1].copy()
    Xu.has_sorted_indices = False
    assert _same(ref, _fit(Xu, y, 2, "variable"))
    X32 = X.astype(np.float32)
    assert _same(_fit(sp.csr_matrix(X32, dtype=np.float64), y, 2, "variable"), _fit(X32, y, 2, "variable"))


def test_a_csr_index_the_engine_cannot_use_is_refused_before_it_reads_it():
    X, y = _text(n=60, d=500, seed=12)
    bad = X.copy()
    bad.indices[5] = 500  # one past the last column
    state = init_budget_state(500, 1)
    with pytest.raises(ValueError, match="must be < 500"):
        learn_budget_chunk(make_rule("mira", beta=0.1), make_kernel("rbf", gamma=0.7), state, bad, y, beta=0.1,
                           budget="variable")


@pytest.mark.parametrize("conversion", ["average", "vote", "suffix", "auto"])
def test_history_conversions_of_a_sparse_store_are_the_dense_ones(conversion):
    X, y = _text(n=260, d=2500, seed=13)
    kw = dict(budget="variable", random_state=0, gamma=0.5, conversion=conversion, compress=0.0)
    a = distlearn.KernelMIRA(**kw).fit(X, y)
    b = distlearn.KernelMIRA(**kw).fit(X.toarray(), y)
    assert a._state.store
    assert a.conversion_info_.get("history_dropped") is None  # the sparse history is kept, as the dense one
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X.toarray()), rtol=1e-8, atol=1e-10)
    assert np.array_equal(a.predict(X), b.predict(X.toarray()))


def test_history_order_of_csr_patterns_is_the_dense_order_ties_included():
    rs = np.random.default_rng(14)
    S = (rs.random((40, 30)) < 0.2) * rs.integers(1, 4, size=(40, 30)).astype(float)
    born = rs.integers(0, 12, size=40)  # many rounds hold several patterns
    from distlearn.learners.kernel import history_order

    assert np.array_equal(history_order(born, sp.csr_matrix(S)), history_order(born, S))


def test_a_text_model_exports_to_onnx_with_its_patterns_densified(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from distlearn.export import export_onnx
    from distlearn.model import load_model, save_model

    X, y = _text(n=200, d=400, seed=16)
    clf = distlearn.KernelMIRA(budget="variable", random_state=0, gamma=0.5).fit(X, y)
    assert clf._state.store and sp.issparse(clf.support_vectors_)
    for model, name in ((clf, "fitted"), (load_model(save_model(clf, tmp_path / "k.npz")), "loaded")):
        export_onnx(model, tmp_path / f"{name}.onnx")
        s = ort.InferenceSession(str(tmp_path / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        labels, scores = s.run(None, {"X": X.toarray().astype(np.float32)})
        assert np.mean(labels == clf.predict(X)) > 0.97  # float32 inputs: a few near-zero scores may flip
        np.testing.assert_allclose(scores[:, 1], clf.decision_function(X), atol=1e-4)


def test_one_long_document_does_not_make_text_dense():
    X, y = _text(n=150, d=2000, seed=17)
    Xd = X.toarray()
    Xd[7, :1500] = 0.3  # one row with 3/4 of the columns nonzero: the chunk is still sparse on average
    a = _fit(sp.csr_matrix(Xd), y, 2, "variable", chunks=1)
    assert a[0].store
    assert _same(_fit(Xd, y, 2, "variable"), a)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(0, 40), st.integers(0, 40), st.integers(1, 30), st.booleans())
def test_csr_kernel_matrices_are_the_dense_ones(seed, n, m, d, messy):
    """kernel_matrix of CSR rows against CSR patterns (``_budget.csr_dots``, not scipy's product) equals the
    dense one to rounding for every kernel: any row and pattern counts (blocks of 16 and their remainders,
    none), empty rows, stored zeros, negative values and -- ``messy`` -- unsorted and repeated columns."""
    from distlearn.learners.kernel import kernel_matrix

    rs = np.random.default_rng(seed)

    def csr(rows):
        D = rs.normal(size=(rows, d)) * (rs.random((rows, d)) < 0.3)
        M = sp.csr_matrix(D)
        if messy and M.nnz:  # the same entries, each split in two halves under a shuffled order
            r = np.repeat(np.arange(rows), np.diff(M.indptr))
            cols = np.concatenate([M.indices, M.indices])
            vals = np.concatenate([M.data / 2, M.data / 2])
            perm = rs.permutation(len(cols))
            rr = np.concatenate([r, r])[perm]
            order = np.argsort(rr, kind="stable")
            M = sp.csr_matrix((vals[perm][order], cols[perm][order], np.searchsorted(rr[order], np.arange(rows + 1))),
                              shape=(rows, d))
            assert not M.has_canonical_format or M.nnz == 0
        return M, D

    X, XD = csr(n)
    S, SD = csr(m)
    for kern in (make_kernel("rbf", gamma=0.3), make_kernel("poly", gamma=0.5, degree=3, coef0=1.0),
                 make_kernel("linear")):
        got, want = kernel_matrix(kern, X, S), kernel_matrix(kern, XD, SD)
        assert got.shape == (n, m) and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_crafted_csr_row_is_refused_before_a_kernel_matrix_reads_it():
    """A CSR matrix whose column index is out of range (or whose pointers are not monotone) is refused by
    kernel_matrix's structure check in one ValueError, never read by the compiled product."""
    from distlearn.learners.kernel import kernel_matrix

    S = sp.csr_matrix(np.eye(4))
    bad = sp.csr_matrix((np.ones(2), np.array([1, 2]), np.array([0, 1, 2])), shape=(2, 4))
    bad.indices[1] = 10**6
    with pytest.raises(ValueError):
        kernel_matrix(make_kernel("rbf", gamma=1.0), bad, S)
    bad = sp.csr_matrix((np.ones(2), np.array([1, 2]), np.array([0, 1, 2])), shape=(2, 4))
    bad.indptr[1] = 5
    with pytest.raises(ValueError):
        kernel_matrix(make_kernel("rbf", gamma=1.0), S, bad)
    with pytest.raises(ValueError, match="features"):
        kernel_matrix(make_kernel("rbf", gamma=1.0), sp.csr_matrix(np.eye(3)), S)


def test_csr_kernel_matrices_cost_the_columns_met_not_the_width():
    """The CSR products number the columns they meet densely (``dense_keys``), in column order: the same rows
    spread over 2**31 - 1 columns (a d-wide column map would be 8 GiB) give the same bits as at 300 columns."""
    from distlearn.learners.kernel import kernel_matrix

    X, _ = _text(n=40, d=300, seed=5)
    kern = make_kernel("rbf", gamma=0.4)
    want = kernel_matrix(kern, X, X[:25])
    wide = sp.csr_matrix((X.data, X.indices.astype(np.int64) * 7_000_000 + 11, X.indptr),
                         shape=(X.shape[0], 2**31 - 1))
    got = kernel_matrix(kern, wide, wide[:25])
    assert got.tobytes() == want.tobytes()


def test_repeated_columns_in_csr_rows_are_summed_as_scipy_does():
    """A CSR row that stores a column twice means their sum (scipy's ``toarray``): the engine's rows
    (``_csr_rows`` sums them before anything reads them) fit the model of the summed rows, bit for bit."""
    X, y = _text(n=150, d=1500, seed=21)
    idx, val, ptr = [], [], [0]
    for i in range(X.shape[0]):  # every stored column twice: a quarter, then three quarters of its value
        lo, hi = X.indptr[i], X.indptr[i + 1]
        idx += [X.indices[lo:hi], X.indices[lo:hi]]
        val += [X.data[lo:hi] * 0.25, X.data[lo:hi] * 0.75]
        ptr.append(ptr[-1] + 2 * (hi - lo))
    dup = sp.csr_matrix((np.concatenate(val), np.concatenate(idx), np.array(ptr)), shape=X.shape)
    summed = sp.csr_matrix(dup.toarray())
    assert not dup.has_canonical_format and np.array_equal(summed.toarray(), dup.toarray())
    assert _same(_fit(dup, y, 2, "variable"), _fit(summed, y, 2, "variable"))


@pytest.mark.parametrize("budget,removal", [("variable", "auto"), (40, "margin"), (40, "random"), (None, "auto")])
def test_kernel_obpm_on_text_mirrors_its_pool_and_matches_the_dense_fit(budget, removal):
    """KernelOBPM on sparse rows turns its pool's sparse mirror on (kernel rows and removals cost the patterns'
    nonzeros) and keeps the Bayes point's support as CSR; members, Bayes point and online errors are the dense
    fit's bit for bit, whatever the budget."""
    from distlearn.ensembles.kernel import init_kernel_ensemble, learn_kernel_ensemble_chunk
    from distlearn.learners.kernel import make_kernel as mk

    X, y = _text(n=300, d=3000, seed=8)
    kw = dict(random_state=0, n_estimators=5, base_params=dict(gamma=0.5, budget=budget, removal=removal))
    a = distlearn.KernelOBPM(**kw).fit(X, y)
    b = distlearn.KernelOBPM(**kw).fit(X.toarray(), y)
    assert a._state.Zm[1] > 0 and b._state.Zm[1] == 0
    assert a._state.store and a._state.PS.shape[1] == 0 and not b._state.store  # text: its nonzeros, not d
    assert sp.issparse(a.support_vectors_) and not sp.issparse(b.support_vectors_)
    assert np.array_equal(a.support_vectors_.toarray(), b.support_vectors_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert a.online_errors_ == b.online_errors_ and np.array_equal(a.member_n_support_, b.member_n_support_)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X.toarray()), rtol=1e-9, atol=1e-12)
    # the engine alone, chunk by chunk: every member's pool rows and coefficients as the dense state's; two long
    # documents (more nonzeros than a mirrored dense pool takes a pattern: read from its dense rows; a sparse
    # store holds them whole) among the rows
    X = X.tolil()
    X[5, :400] = 0.3
    X[77, 100:600] = -0.2
    X = X.tocsr()
    rule, kern = make_rule("mira", beta=0.1), mk("rbf", gamma=0.7)
    yi = (y > 0).astype(np.int64)
    chunks = np.array_split(np.arange(X.shape[0]), 3)
    # the store (every chunk sparse), a mirrored dense pool (a dense chunk first: "d" the same rows as an array), a
    # store made dense again (a chunk of dense rows last, "D": every zero 0.01), each against the dense pool of
    # the same rows: every member and the Bayes point the same bits
    def rows(c, kind):
        if kind == "s":
            return X[c]
        Xc = X[c].toarray()
        if kind == "D":
            Xc[Xc == 0] = 0.01
        return Xc

    plans = {"store": "sss", "mirrored": "dss", "densified": "ssD", "dense": "ddd", "dense-D": "ddD"}
    states = {}
    for name, plan in plans.items():
        st = init_kernel_ensemble(3000, 4, 1, keep_retired=True)
        for c, kind in zip(chunks, plan):
            learn_kernel_ensemble_chunk(rule, kern, st, rows(c, kind), yi[c], c, seed=1, tau=0.5, beta=0.1, budget=25)
        states[name] = st
    assert states["store"].store and states["store"].PS.shape[1] == 0 and states["store"].retired
    assert int(states["store"].Zm[0]) == sum(int(np.count_nonzero(states["dense"].PS[i]))
                                             for i in range(int(states["dense"].pmeta[0])))
    assert states["mirrored"].Zm[1] > 0 and not states["mirrored"].store and np.any(states["mirrored"].Zn < 0)
    assert not states["densified"].store and states["densified"].PS.shape[1] == 3000
    dense = lambda S: S.toarray() if sp.issparse(S) else S  # noqa: E731
    for name, st in states.items():
        ref = states["dense-D" if "D" in plans[name] else "dense"]
        for j in range(4):
            (Ss, As, _), (Sd, Ad, _) = st.member_support(j), ref.member_support(j)
            assert np.array_equal(dense(Ss), Sd) and np.array_equal(As, Ad), (name, j)
        Sb, Ab, _ = st.bayes_point(average=True)
        Sc, Ac, _ = ref.bayes_point(average=True)
        assert np.array_equal(dense(Sb), Sc) and np.array_equal(Ab, Ac), name
        assert sp.issparse(Sb) == (st.Zm[1] > 0), name


def _ensemble_on_text(n: int = 240, chunks: int = 2):
    from distlearn.ensembles.kernel import init_kernel_ensemble, learn_kernel_ensemble_chunk
    from distlearn.learners.kernel import make_kernel as mk

    X, y = _text(n=n, d=2000, seed=31)
    rule, kern = make_rule("mira", beta=0.1), mk("rbf", gamma=0.6)
    yi = (y > 0).astype(np.int64)

    def run(st, parts):
        for c in parts:
            learn_kernel_ensemble_chunk(rule, kern, st, X[c], yi[c], c, seed=3, tau=0.5, beta=0.1, budget="variable")
        return st

    parts = np.array_split(np.arange(n), 2 * chunks)
    return init_kernel_ensemble(2000, 5, 1, keep_retired=True), run, parts[:chunks], parts[chunks:]


def test_a_sparse_store_checkpoint_keeps_csr_and_resumes_to_the_same_bits():
    """A kernel OBPM's sparse store saves its pool and retired patterns as CSR (no d-wide array in the
    checkpoint), and the state built back from the arrays resumes to the uninterrupted run's bits."""
    from distlearn.ensembles.kernel import KernelEnsembleState

    st, run, first, second = _ensemble_on_text()
    whole = run(run(st.copy(), first), second)
    half = run(st, first)
    arrays = half.to_arrays()
    assert arrays["PS"].shape[1] == 0 and arrays["retired_S"].shape[1] == 0
    assert arrays["pool_data"].size == int(half.Zm[0]) > 0 and arrays["retired_indptr"].shape[0] > 1
    assert all(a.ndim < 2 or a.shape[1] < 2000 for a in arrays.values())
    back = run(KernelEnsembleState.from_arrays({k: np.array(v) for k, v in arrays.items()}), second)
    assert back.store
    for average in (False, True):
        (S1, A1, l1), (S2, A2, l2) = whole.bayes_point(average), back.bayes_point(average)
        assert (S1 != S2).nnz == 0 and np.array_equal(A1, A2) and np.array_equal(l1, l2)
    for j in range(5):
        assert np.array_equal(whole.A[j], back.A[j]) and np.array_equal(whole.pidx[j], back.pidx[j])


@pytest.mark.parametrize("crafted", ["column", "indptr", "nan", "pidx", "label", "pmeta", "shape"])
def test_a_crafted_kernel_ensemble_checkpoint_is_refused_before_the_engine_reads_it(crafted):
    """Arrays of a kernel OBPM state with an index the engine cannot use (a column past d, row pointers out of
    order, a non-finite value, a member slot pointing past the pool, a class past the outputs, a counter past
    its array, a wrong shape) are refused in one ValueError naming the array, never read."""
    from distlearn.ensembles.kernel import KernelEnsembleState

    st, run, first, _ = _ensemble_on_text(n=120, chunks=1)
    arrays = {k: np.array(v) for k, v in run(st, first).to_arrays().items()}
    if crafted == "column":
        arrays["pool_indices"][3] = 2000
    elif crafted == "indptr":
        arrays["pool_indptr"][2] = arrays["pool_indptr"][-1] + 5
    elif crafted == "nan":
        arrays["pool_data"][0] = np.nan
    elif crafted == "pidx":
        arrays["pidx"][0, 0] = int(arrays["pmeta"][0]) + 3
    elif crafted == "label":
        arrays["labm"][1, 0] = 7
    elif crafted == "pmeta":
        arrays["pmeta"][0] = arrays["PS"].shape[0] + 1
    else:
        arrays["Abar"] = arrays["Abar"][:, :0]
    with pytest.raises(ValueError):
        KernelEnsembleState.from_arrays(arrays)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), case=st.sampled_from(CASES), chunks=st.integers(1, 4), k=st.sampled_from([2, 3]),
       sparse=st.booleans())
def test_when_the_cache_compacts_changes_no_bit(seed, case, chunks, k, sparse):
    """Compacting at every engine call (share 0), at COMPACT_SHARE of dead slots, or only when every slot is dead
    (share 1) gives the same model and logs: the engine skips dead slots, and the history is ordered by
    insertion, never by slot.  The 16-row calls of wide rows (``_sub_rows``) make it count."""
    import distlearn.learners.kernel as LK

    budget, removal = case
    X, y = _text(n=70, d=300, seed=seed, k=k)
    X = X if sparse else X.toarray()
    fits = []
    for share in (0.0, LK.COMPACT_SHARE, 1.0):
        old = LK.COMPACT_SHARE
        LK.COMPACT_SHARE = share
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(LK, "_SUB_ROWS", 16)  # many engine calls, each one a chance to compact
                fits.append(_fit(X, y, k, budget, removal, chunks=chunks))
        finally:
            LK.COMPACT_SHARE = old
    assert _same(fits[0], fits[1]) and _same(fits[0], fits[2])
    st0, st2 = fits[0][0], fits[2][0]
    if st0.n_removed:  # the lazy caches did keep dead slots between calls
        assert int(st2.meta[0]) > int(st2.meta[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**31 - 2), max_size=300), min_size=1, max_size=5))
def test_column_keys_name_each_column_once_in_the_order_met(chunks):
    """``key_into`` (the stores' column keys, the CSR products'): every column gets one key, the next number the
    first time it is met, whatever the table's growth on the way (1,024 entries at first, doubled past half full),
    across calls that carry the table on -- a dict's numbering of the same stream."""
    from distlearn.learners.kernel import key_into

    table, n, seen = None, 0, {}
    for chunk in chunks:
        cols = np.asarray(chunk, dtype=np.int32)
        out = np.full(cols.shape[0], -7, dtype=np.int32)
        table, n = key_into(table, n, cols, out)
        want = [seen.setdefault(int(c), len(seen)) for c in cols]
        assert out.tolist() == want
        assert n == len(seen)
        assert 2 * n <= table.shape[0]


def test_many_columns_grow_the_key_table_and_keep_their_keys():
    """Past half of the first table (512 columns) the keys met before the growth stay theirs."""
    from distlearn.learners.kernel import key_into

    cols = np.random.default_rng(3).permutation(50_000)[:5_000].astype(np.int32)
    out = np.empty(5_000, dtype=np.int32)
    table, n = key_into(None, 0, cols, out)
    assert n == 5_000 and out.tolist() == list(range(5_000))
    again = np.empty(5_000, dtype=np.int32)
    table, n = key_into(table, n, cols[::-1].copy(), again)
    assert n == 5_000 and again.tolist() == list(range(4_999, -1, -1))


@pytest.mark.parametrize("budget", [None, "variable", 12])
def test_keys_carried_across_chunks_that_meet_new_columns(budget):
    """A sparse store's column keys (``key_columns``) over chunks whose rows each meet columns no earlier chunk had
    -- 2,400 columns in all, so the key table grows past its first 512 keys mid-fit -- with removals, compactions
    and dead slots between calls: the dense cache's model and logs, bit for bit, and every live nonzero's key names
    its column."""
    X, y = _text(n=300, d=3000, nnz=8, seed=23, dup=True)
    shift = sp.csr_matrix((X.data, (X.indices + 8 * np.arange(X.shape[0]).repeat(np.diff(X.indptr))) % 3000,
                           X.indptr), shape=X.shape)  # each row's columns moved by 8 per row: new columns every chunk
    shift.sort_indices()
    a = _fit(shift, y, 3, budget, chunks=7)
    st_ = a[0]
    assert st_.store and st_.Zk is not None and st_.Zkn > 512
    used = int(st_.Zm[0])
    keys = np.empty(used, dtype=np.int32)
    table = st_.Zkt.copy()
    from distlearn.learners._budget import key_columns

    assert key_columns(table, st_.Zkn, st_.Zi[:used], keys) == st_.Zkn  # no column is new to the table
    assert np.array_equal(keys, st_.Zk[:used])
    assert _same(_fit(shift.toarray(), y, 3, budget, chunks=7), a)
