"""The numeric guard: features too large or too small for the learners' dtype are refused in one
line that says to scale them -- by every rule (the registry's linear rules, the adaptive rules,
the kernel learners, OBPM over them) in float64 and float32, dense and CSR, binary and
multiclass -- never trained into a silently degenerate model; on features of ordinary size
nothing changes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import distlearn
from distlearn import cli
from distlearn.data.store import DatasetWriter
from distlearn.estimators import ADAPTIVE_ESTIMATORS, ESTIMATORS, KERNEL_ESTIMATORS
from distlearn.learners import RULES
from distlearn.learners.adaptive import ADAPTIVE_RULES


def _data(n=90, d=6, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = X @ rng.normal(size=d)
    y = (s > 0).astype(int) if classes == 2 else np.digitize(s, np.quantile(s, [1 / 3, 2 / 3]))
    return X, y


# every registered rule through its estimator, plus the native multiclass forms and NAG's two losses
CASES = {name: (lambda cls=cls, **kw: cls(**kw)) for name, cls in ESTIMATORS.items()}
CASES["pa-native"] = lambda **kw: ESTIMATORS["pa"](multiclass="native", **kw)
CASES["mira-ovr"] = lambda **kw: ESTIMATORS["mira"](multiclass="ovr", **kw)
CASES.update({name: (lambda cls=cls, **kw: cls(**kw)) for name, cls in ADAPTIVE_ESTIMATORS.items()})
CASES["nag-hinge"] = lambda **kw: ADAPTIVE_ESTIMATORS["nag"](loss="hinge", **kw)
CASES.update({name: (lambda cls=cls, **kw: cls(**kw)) for name, cls in KERNEL_ESTIMATORS.items()})
CASES["kernel-pa-linear"] = lambda **kw: KERNEL_ESTIMATORS["kernel-pa"](kernel="linear", **kw)
CASES["kernel-perceptron-poly"] = lambda **kw: KERNEL_ESTIMATORS["kernel-perceptron"](kernel="poly", **kw)
KERNEL_CASES = {n for n in CASES if n.startswith("kernel")}


def test_the_cases_cover_every_registry():
    assert set(RULES) <= set(CASES) and set(ADAPTIVE_RULES) <= set(CASES) and set(KERNEL_ESTIMATORS) <= set(CASES)


def _one_line_scale(exc: BaseException, scale: float) -> str:
    msg = str(exc)
    assert "\n" not in msg
    assert f"features too {'large' if scale > 1 else 'small'} for float" in msg
    assert "scale them (e.g. to unit norm)" in msg
    return msg


# the kernel learners compute in float64 on densified pieces: dense float64 covers them
EXTREME = [(case, scale, dtype, classes, layout) for case in sorted(CASES) for scale in (1e200, 1e-200)
           for dtype in ("float64", "float32") for classes in (2, 3) for layout in ("dense", "csr")
           if case not in KERNEL_CASES or (dtype, layout) == ("float64", "dense")]


@pytest.mark.parametrize("case,scale,dtype,classes,layout", EXTREME)
def test_extreme_features_are_refused_in_one_line(case, scale, dtype, classes, layout):
    X, y = _data(classes=classes)
    Xs = X * scale
    Xs = sp.csr_matrix(Xs) if layout == "csr" else Xs
    est = CASES[case](random_state=0, **({} if case in KERNEL_CASES else {"dtype": dtype}))
    with pytest.raises(ValueError) as e:
        est.fit(Xs, y)
    _one_line_scale(e.value, scale)
    assert not hasattr(est, "coef_") or not np.array_equal(est.coef_, np.zeros_like(est.coef_))


@pytest.mark.parametrize("case,dtype", [(c, t) for c in sorted(CASES) for t in ("float64", "float32")
                                        if c not in KERNEL_CASES or t == "float64"])
def test_ordinary_features_still_learn(case, dtype):
    X, y = _data(n=200)
    kw = {"random_state": 0, **({} if case in KERNEL_CASES else {"dtype": dtype})}
    est = CASES[case](**kw).fit(X, y)
    assert est.score(X, y) > 0.75
    # small or large features of a normal range are not refused (the guard has no false alarm;
    # whether a rule's fixed margins and steps suit that scale is the rule's business)
    for s in ((1e-12, 1e8) if dtype == "float32" else (1e-140, 1e120)):
        est = CASES[case](**kw).fit(X * s, y)
        assert len(est.predict(X * s)) == len(y)


@pytest.mark.parametrize("base", ["perceptron", "pa", "romma", "alma"])
@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_obpm_refuses_like_its_base(base, scale):
    X, y = _data()
    with pytest.raises(ValueError) as e:
        distlearn.OBPM(base=base, n_estimators=4, tau=0.5, epochs=1, normalize=False, random_state=0).fit(X * scale, y)
    _one_line_scale(e.value, scale)


def test_one_bad_row_is_named():
    X, y = _data(n=120)
    X[37] *= 1e-200  # PA divides by ||x||^2, which underflows to 0 on this row only
    with pytest.raises(ValueError, match=r"^row 37 \(round \d+ of this chunk\): features too small for float64"):
        distlearn.PassiveAggressive(random_state=0).fit(X, y)


def test_partial_fit_keeps_the_model_on_a_refused_batch():
    X, y = _data(n=120)
    clf = distlearn.PassiveAggressive(random_state=0).partial_fit(X[:60], y[:60], classes=[0, 1])
    before = clf.coef_.copy()
    with pytest.raises(ValueError, match="too large"):
        clf.partial_fit(X[60:] * 1e200, y[60:])
    assert np.array_equal(clf.coef_, before)


def test_float32_cast_that_rounds_values_to_zero_is_refused():
    X, y = _data()
    X[5, 2] = 1e-50  # one value below float32's range; the rest are ordinary
    with pytest.raises(ValueError, match=r"^1 nonzero value of X .* round to 0 in float32: features too small"):
        distlearn.Perceptron(dtype="float32").fit(X, y)
    distlearn.Perceptron(dtype="float64").fit(X, y)  # float64 holds it


@pytest.mark.parametrize("model,scale", [("pa", 1e-200), ("romma", 1e200), ("mira", 1e-200)])
def test_train_command_is_one_line_exit_2(tmp_path, capsys, model, scale):
    X, y = _data(n=100)
    with DatasetWriter(tmp_path / "s.zarr", layout="dense", n_features=X.shape[1], dtype="float64",
                       block_rows=40) as w:
        w.append(X * scale, y)
    assert cli.main(["train", str(tmp_path / "s.zarr"), "--model", model, "--in-process"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("distlearn train: error: ")
    assert f"too {'large' if scale > 1 else 'small'} for float64" in err[0] and "scale them" in err[0]


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_kernel_obpm_refuses_like_its_base(scale):
    X = np.random.default_rng(1).standard_normal((40, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="scale them") as info:
        distlearn.KernelOBPM(n_estimators=3, base="kernel-mira").fit(X * scale, y)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", ["pa", "kernel-pa", "kernel-obpm"])  # rules that need ||x||^2
def test_a_store_refusal_names_the_store_block_and_row(tmp_path, capsys, model):
    from distlearn.data import create_dataset

    X = np.random.default_rng(2).standard_normal((50, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    X[20:] *= 1e200  # blocks 1 and 2; block 0 is read first (no shuffle) and trains
    create_dataset(tmp_path / "s.zarr", X, y, block_rows=20, dtype="float64")
    assert cli.main(["train", str(tmp_path / "s.zarr"), "--model", model, "--param", "shuffle=false"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "Warning" not in err, err
    assert "s.zarr" in err and "block 1, store row 2" in err and "scale them" in err, err
