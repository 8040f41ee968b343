"""OBPM's step 15 (w~ / max(1, ||w~||)) changes scores, never predictions, also with several output columns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn import OBPM, PermutationBPM


def _data(seed, k, n=300, d=12):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d)) * r.uniform(0.5, 20.0, size=d)  # large weights: the rescale acts
    y = np.argmax(X @ r.normal(size=(d, k)) + r.normal(size=(n, k)), axis=1)
    return X, y


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.sampled_from([2, 3, 7]), conversion=st.sampled_from(["last", "average"]))
def test_normalize_changes_no_prediction(seed, k, conversion):
    X, y = _data(seed, k)
    kw = dict(n_estimators=6, tau=0.5, epochs=2, conversion=conversion, random_state=seed)
    a = OBPM(normalize=True, **kw).fit(X, y)
    b = OBPM(normalize=False, **kw).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    W = np.hstack([a.coef_, a.intercept_[:, None]])
    assert np.linalg.norm(W, axis=1).max() <= 1.0 + 1e-12
    # one factor for every column: the scores are proportional
    sa, sb = a.decision_function(X), b.decision_function(X)
    c = np.linalg.norm(sb) / np.linalg.norm(sa)
    np.testing.assert_allclose(sa * c, sb, rtol=1e-9, atol=1e-9 * np.abs(sb).max())


@pytest.mark.parametrize("k", [3, 5])
def test_permutation_bpm_normalize_changes_no_prediction(k):
    X, y = _data(1, k)
    a = PermutationBPM(n_estimators=4, normalize=True, random_state=0).fit(X, y)
    b = PermutationBPM(n_estimators=4, normalize=False, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
