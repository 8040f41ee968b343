"""``epochs="auto"`` of the kernel learners (issue 29): passes until one in which fewer than
AUTO_EPOCH_UPDATES of the rows updated the learner, at most AUTO_EPOCHS_MAX; checked against separate fits
with integer epochs, across chunkings, and its validation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_moons

import distlearn
import distlearn.estimators.kernel as EK
from distlearn.data import create_dataset


def _digits(n):
    X, y = load_digits(return_X_y=True)
    return X[:n] / 16.0, y[:n]


CASES = {  # data, gamma: the passes "auto" should run (below: from the separate fits' update counts)
    "moons-one": (lambda: make_moons(300, noise=0.1, random_state=0), 1.0),
    # (the gamma race on a pass this short runs as a pass of its own and refits: tests/test_gamma_auto.py)
    "digits-two": (lambda: _digits(1200), 0.22),
    "digits-cap": (lambda: _digits(300), 0.05),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_auto_runs_the_passes_the_update_share_asks_for_and_equals_that_integer_fit(case):
    """The passes run are the first whose updates (n_updates_ of a fit with e epochs minus one with e - 1) are
    under AUTO_EPOCH_UPDATES of the rows, else AUTO_EPOCHS_MAX; the model is bit for bit that integer fit."""
    make, gamma = CASES[case]
    X, y = make()
    n = len(y)
    kw = dict(budget="variable", gamma=gamma, random_state=0)
    fits = {e: distlearn.KernelMIRA(epochs=e, **kw).fit(X, y) for e in range(1, EK.AUTO_EPOCHS_MAX + 1)}
    updates = [fits[e].n_updates_ - (fits[e - 1].n_updates_ if e > 1 else 0) for e in fits]
    want = next((e for e in fits if updates[e - 1] < EK.AUTO_EPOCH_UPDATES * n), EK.AUTO_EPOCHS_MAX)
    assert want == {"moons-one": 1, "digits-two": 2, "digits-cap": 3}[case]  # the three cases differ
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    assert auto.epochs == "auto" and auto.n_iter_ == want
    same = fits[want]
    assert auto.gamma_ == same.gamma_ and auto.n_updates_ == same.n_updates_
    assert np.array_equal(auto.support_vectors_, same.support_vectors_)
    assert np.array_equal(auto.dual_coef_, same.dual_coef_)


def test_auto_passes_are_the_same_from_a_store_in_blocks(tmp_path):
    """A store read in blocks of 64 rows stops after the same pass as the array (the share is counted over
    whole passes) and gives the same model."""
    X, y = _digits(500)
    path = tmp_path / "d.zarr"
    create_dataset(path, X, y, block_rows=64, dtype="float64")
    kw = dict(budget="variable", gamma=0.05, shuffle=False, random_state=0)
    a = distlearn.KernelMIRA(**kw).fit(X, y)
    b = distlearn.KernelMIRA(**kw).fit(str(path))
    assert a.n_iter_ == b.n_iter_ and a.n_updates_ == b.n_updates_
    assert np.array_equal(a.support_vectors_, b.support_vectors_) and np.array_equal(a.dual_coef_, b.dual_coef_)


def test_a_second_fit_counts_its_own_passes():
    X, y = make_moons(300, noise=0.1, random_state=0)
    est = distlearn.KernelMIRA(budget="variable", gamma=1.0, random_state=0)
    first = est.fit(X, y).n_iter_
    assert est.fit(X, y).n_iter_ == first == 1


def test_defaults_are_auto_for_mira_and_three_for_the_others():
    assert distlearn.KernelMIRA().epochs == "auto"
    assert distlearn.KernelPerceptron().epochs == 3 and distlearn.KernelPA().epochs == 3
    X, y = make_moons(100, noise=0.1, random_state=0)
    assert distlearn.KernelPA(epochs="auto", gamma=1.0, random_state=0).fit(X, y).n_iter_ <= EK.AUTO_EPOCHS_MAX


@pytest.mark.parametrize("value", [0, 1.5, "two", True, None])
def test_epochs_is_validated_in_one_line_naming_it(value):
    X, y = make_moons(40, random_state=0)
    with pytest.raises(ValueError, match=r"^epochs must be an integer in \[1, inf\] or 'auto', got ") as e:
        distlearn.KernelMIRA(epochs=value).fit(X, y)
    assert "\n" not in str(e.value)


def _noisy():
    X, y = make_moons(400, noise=0.3, random_state=3)
    return (X - X.min(0)) / (X.max(0) - X.min(0)), y


@pytest.mark.parametrize("case", ["noisy", "moons-one", "digits-two"])
def test_auto_conversion_of_a_variable_budget_is_the_distilled_average(case, tmp_path):
    """conversion="auto" with budget="variable" reports the distilled average -- the bits of an explicit
    conversion="average" fit -- and says so, whether the fit kept updating (noisy two moons, three passes) or
    settled (one pass, or two); not the last hypothesis."""
    X, y = _noisy() if case == "noisy" else CASES[case][0]()
    kw = dict(budget="variable", gamma=8.0 if case == "noisy" else CASES[case][1], random_state=0)
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    assert auto.conversion_info_["conversion"] == "average"
    avg = distlearn.KernelMIRA(conversion="average", **kw).fit(X, y)
    assert np.array_equal(auto.support_vectors_, avg.support_vectors_)
    assert np.array_equal(auto.dual_coef_, avg.dual_coef_)
    last = distlearn.KernelMIRA(conversion="last", **kw).fit(X, y)
    assert not np.array_equal(auto.dual_coef_, last.dual_coef_)


def test_auto_conversion_is_the_same_from_a_store_in_blocks(tmp_path):
    """From a store read in blocks of 64 rows, the same conversion and the same model as from the array."""
    X, y = _noisy()
    kw = dict(budget="variable", gamma=8.0, shuffle=False, random_state=0)
    path = tmp_path / "m.zarr"
    create_dataset(path, X, y, block_rows=64, dtype="float64")
    b = distlearn.KernelMIRA(**kw).fit(str(path))
    a = distlearn.KernelMIRA(**kw).fit(X, y)
    assert a.conversion_info_["conversion"] == b.conversion_info_["conversion"] == "average"
    assert np.array_equal(a.support_vectors_, b.support_vectors_) and np.array_equal(a.dual_coef_, b.dual_coef_)


def test_auto_conversion_keeps_the_last_hypothesis_above_its_cache_cap(monkeypatch):
    """Above AUTO_AVERAGE_MAX final patterns the distillation's O(|Z|^3) is not paid: the last hypothesis."""
    X, y = _noisy()
    kw = dict(budget="variable", gamma=8.0, random_state=0)
    monkeypatch.setattr(EK, "AUTO_AVERAGE_MAX", 10)
    auto = distlearn.KernelMIRA(**kw).fit(X, y)
    assert len(auto.support_vectors_) > 0 and auto.conversion_info_["conversion"] == "last"
    last = distlearn.KernelMIRA(conversion="last", **kw).fit(X, y)
    assert np.array_equal(auto.dual_coef_, last.dual_coef_)
