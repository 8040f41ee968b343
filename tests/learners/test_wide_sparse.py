"""Hashed text: CSR rows of millions of columns cost the kernel engines their nonzeros, never their width.

The engines' per-call scratch for CSR rows (the densified block of 16 rounds, the column map, a removal's row) is
made once per thread and width (``csr_scratch``) and kept clean between calls; the gathered block is as tall as a
block's nonzeros.  What is proved here: the scratch is reused and clean after every call (a failed one too), and
the model of rows spread over 2**22 columns is the model of the same rows in their own few columns, bit for bit
(the kernel values are sums of the same products in the same order).  The time (1,500 hashed RCV1-like rows at
2**20 columns: 90 -> 1.15 CPU s; 2**24: 41 -> 1.6 s) is in ``benchmarks/README.md``, not here.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from distlearn import KernelMIRA, KernelOBPM, KernelPerceptron
from distlearn.learners import make_rule
from distlearn.learners.kernel import csr_scratch, init_budget_state, learn_budget_chunk, make_kernel


def _text(n, d, seed):
    rs = np.random.RandomState(seed)
    rows = np.repeat(np.arange(n), 12)
    cols = np.minimum(rs.zipf(1.4, n * 12) - 1, d - 1)
    X = sp.csr_matrix((rs.rand(n * 12) + 0.1, (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    y = (np.asarray(X[:, :8].sum(axis=1)).ravel() > np.median(np.asarray(X[:, :8].sum(axis=1)))).astype(np.int64)
    return X, y


def _spread(X, width, seed=0):
    """X's columns placed, in their order, among ``width`` columns, and where they went."""
    at = np.sort(np.random.RandomState(seed).choice(width, X.shape[1], replace=False))
    return sp.csr_matrix((X.data, at[X.indices], X.indptr), shape=(X.shape[0], width)), at


def _clean(d):
    buf, cmap, xw = csr_scratch(d)
    return not buf.any() and (cmap == -1).all() and not xw.any()


@pytest.mark.parametrize("est", [KernelMIRA(gamma=0.7, budget="variable", random_state=0),
                                 KernelMIRA(budget="variable", random_state=1),  # the race, on shared products
                                 KernelPerceptron(gamma=0.5, beta=0.1, budget=40, removal="random", random_state=2),
                                 KernelOBPM(n_estimators=4, epochs=2, base_params={"gamma": 0.6}, random_state=3)],
                         ids=["mira", "mira-race", "perceptron-fixed", "kernel-obpm"])
def test_rows_spread_over_millions_of_columns_fit_their_own_model(est):
    """The same rows in 300 columns and spread over 2**22: the same online fit and the same model, bit for bit,
    and the thread's scratch is one array set, clean after the fit."""
    X, y = _text(500, 300, 0)
    W, at = _spread(X, 2**22)
    if getattr(est, "gamma", None) == "auto":  # "scale" reads the width: give both the narrow fit's width as the race's base
        base = clone(est).fit(X, y).gammas_[1]
        a = clone(est).fit(X, y)
        from distlearn.estimators import kernel as EK

        real = EK.KernelClassifier._measure_gamma
        EK.KernelClassifier._measure_gamma = lambda self, X_: base
        try:
            b = clone(est).fit(W, y)
        finally:
            EK.KernelClassifier._measure_gamma = real
        assert np.array_equal(a.gamma_online_errors_, b.gamma_online_errors_)
    else:
        a, b = clone(est).fit(X, y), clone(est).fit(W, y)
    assert sp.issparse(b.support_vectors_) and b.support_vectors_.shape[1] == 2**22
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert a.support_vectors_.shape[0] == b.support_vectors_.shape[0]
    Sa = sp.csr_matrix(a.support_vectors_)
    assert np.array_equal(Sa.toarray(), b.support_vectors_[:, at].toarray())
    assert b.support_vectors_.nnz == Sa.nnz  # nothing outside those columns
    first = csr_scratch(2**22)
    assert _clean(2**22) and all(p is q for p, q in zip(first, csr_scratch(2**22)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 90), seed=st.integers(0, 2**31 - 1), budget=st.sampled_from(["variable", None, 7]),
       removal=st.sampled_from(["margin", "oldest", "random"]), cut=st.integers(0, 89))
def test_the_scratch_is_clean_after_every_call(n, seed, budget, removal, cut):
    """Whatever the rows, budget and removal, and wherever a chunk is cut, every engine call leaves the thread's
    scratch as it found it: the block zero, the column map -1, the removal's row zero."""
    X, y = _text(max(n, 2), 5000, seed % 1000)
    X, y = X[:n], y[:n]
    st_ = init_budget_state(5000, 1)
    rule, kern = make_rule("mira"), make_kernel("rbf", gamma=0.8)
    order = np.random.RandomState(seed).permutation(n)
    for part in np.split(order, [min(cut, n)]):
        if len(part):
            learn_budget_chunk(rule, kern, st_, X, y, order=part, budget=budget, removal=removal, beta=0.1, seed=seed)
            assert st_.store and _clean(5000)


def test_a_failed_call_leaves_the_scratch_clean():
    """A row the engine refuses (its squared norm overflows) ends the call with an error naming it; the thread's
    scratch is clean after it, so the next fit is the fit it would have been."""
    X, y = _text(60, 5000, 1)
    bad = X.copy()
    bad.data[bad.indptr[40]] = 1e200
    with pytest.raises(ValueError, match="row 40"):
        KernelMIRA(gamma=0.5, budget="variable", random_state=0).fit(bad, y)
    assert _clean(5000)
    a = KernelMIRA(gamma=0.5, budget="variable", random_state=0).fit(X, y)
    csr_scratch(7)  # another width in between: the scratch is made again
    b = KernelMIRA(gamma=0.5, budget="variable", random_state=0).fit(X, y)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)


def test_a_kernel_obpm_pool_on_sparse_rows_is_a_store_before_it_grows(monkeypatch):
    """Without a budget the kernel OBPM sizes its pool for the whole chunk at once: on sparse rows the empty pool is
    made a store of nonzeros first, so no d-wide row is ever allocated or copied for it (at 2**20 columns the 64
    dense rows it starts with were copied into as many as the chunk's rows: 1.2 s a chunk)."""
    import distlearn.ensembles.kernel as EK

    widths = []
    grow = EK.KernelEnsembleState._grow

    def spy(self, *a, **kw):
        widths.append(self.PS.shape[1])
        return grow(self, *a, **kw)

    monkeypatch.setattr(EK.KernelEnsembleState, "_grow", spy)
    X, y = _text(300, 2**20, 4)
    est = KernelOBPM(n_estimators=3, epochs=2, base_params={"gamma": 0.6}, random_state=0).fit(X, y)
    assert widths and set(widths) == {0}
    assert sp.issparse(est.support_vectors_)


@pytest.mark.parametrize("est", [KernelMIRA(gamma=0.7, budget="variable", epochs=1, random_state=0),
                                 KernelMIRA(budget="variable", epochs=1, random_state=1)], ids=["mira", "mira-race"])
def test_engine_calls_on_sparse_rows_do_not_shrink_with_the_width(monkeypatch, est):
    """CSR rows on a sparse cache are read by their nonzeros, never densified, so an engine call covers as many
    rounds at 2**24 columns as at 300 (a call cut by width was one round there: each pattern's nonzeros walked for
    one row instead of a block of 16), and the model is the narrow one's."""
    import distlearn.learners._budget as B

    calls = []
    real = B.learn_budget_block

    def counted(X, y, order, *rest):
        calls.append(len(order))
        return real(X, y, order, *rest)

    monkeypatch.setattr(B, "learn_budget_block", counted)
    X, y = _text(1500, 300, 4)
    W, at = _spread(X, 2**24)
    a = clone(est).fit(X, y)
    narrow, calls[:] = list(calls), []
    if getattr(est, "gamma", None) == "auto":  # the race's base width from the narrow fit ("scale" reads d)
        monkeypatch.setattr(type(est), "_measure_gamma", lambda self, X_: a.gammas_[1])
    b = clone(est).fit(W, y)
    assert calls == narrow and max(calls) >= 1024 // (8 if est.gamma == "auto" else 1)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert np.array_equal(sp.csr_matrix(a.support_vectors_).toarray(), b.support_vectors_[:, at].toarray())
