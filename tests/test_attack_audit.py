"""An attacker's audit of the safety promises (README "Reliability: bad input and faults").

Each test is an attack that broke a promise before its fix: a traceback, a wrong exit code, a
silent wrong result, or a user's file deleted.  Each asserts the exact one-line refusal (exit 2)
and, where something must survive, that it did.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import distlearn._validation as validation
from distlearn import Perceptron
from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.data.store import StoreError
from distlearn.model import load_model

ROWS = "".join(f"{1 if i % 2 else -1} 1:{0.5 + i % 3} {2 + i % 4}:{1 + i % 5}\n" for i in range(60))


def _one_line(capsys, *argv) -> str:
    """Run the command: exit 2 and exactly one error line (no traceback, no warning); return it."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's refusals (the CLI makes them one line too)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"distlearn {argv[0]}: error: "), lines[0]
    return lines[0].split(": error: ", 1)[1]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """tmp_path/a.svm, its CSR store a.zarr (3 blocks), and a perceptron model m.npz trained on it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.svm").write_text(ROWS)
    assert main(["convert", "a.svm", "a.zarr", "--block-rows", "20"]) == 0
    assert main(["train", "a.zarr", "--model", "perceptron", "--in-process", "--epochs", "1",
                 "--save", "m.npz"]) == 0
    return tmp_path


def _edit_root(store: Path, **changes) -> None:
    p = store / "zarr.json"
    doc = json.loads(p.read_text())
    doc["attributes"]["distlearn"].update(changes)
    p.write_text(json.dumps(doc))


# --------------------------------------------------------------------------- arguments


def test_a_seed_beyond_64_bits_is_one_line(work, capsys):
    # was: OverflowError traceback from rng.hash64 (exit 1)
    line = _one_line(capsys, "train", "a.zarr", "--model", "perceptron", "--in-process", "--seed", 2**64)
    assert line == f"argument --seed: must be in [0, 2**64), got {2**64} (see distlearn train --help)"
    line = _one_line(capsys, "generate", "obpm", "g.zarr", "--n-samples", 10, "--seed", 2**64)
    assert line == f"argument --seed: must be in [0, 2**64), got {2**64} (see distlearn generate --help)"
    X, y = np.eye(4), np.array([1, -1, 1, -1])
    with pytest.raises(ValueError, match=r"random_state must be None, a non-negative int below 2\*\*64"):
        Perceptron(random_state=2**70).fit(X, y)
    assert Perceptron(random_state=2**64 - 1, epochs=1).fit(X, y).predict(X).shape == (4,)  # the largest one


@pytest.mark.parametrize("argv, name", [
    (["--save", ""], "--save"),          # was: exit 0 and no model written
    (["--save="], "--save"),
    (["--target", ""], "--target"),      # was: the whole store, silently
    (["--test", ""], "--test"),
])
def test_an_empty_option_is_one_line(work, capsys, argv, name):
    line = _one_line(capsys, "train", "a.zarr", "--model", "perceptron", "--in-process", "--epochs", 1, *argv)
    assert line == f"argument {name}: an empty value (see distlearn train --help)"
    assert sorted(p.name for p in work.iterdir()) == ["a.svm", "a.zarr", "m.npz"]


def test_an_empty_checkpoint_is_one_line(work, capsys):
    # was: "/tmp/...: exists and is not a distlearn checkpoint" about the working directory
    line = _one_line(capsys, "train", "a.zarr", "--model", "obpm", "--in-process", "--checkpoint", "")
    assert line == "argument --checkpoint: an empty value (see distlearn train --help)"


def test_weights_beyond_the_available_memory_are_refused(work, capsys, monkeypatch):
    # was: a bound of the physical memory; weights just under it were killed by the OOM killer (exit 137)
    monkeypatch.setattr(validation, "available_memory", lambda: 40)
    line = _one_line(capsys, "train", "a.zarr", "--model", "perceptron", "--in-process")
    assert line == ("the weights (6 x 1, 8 bytes each) would need 48.0 B, more than the 40.0 B of memory "
                    "this machine has available; is n_features right (the largest feature index of the data)?")
    have = validation.physical_memory()
    monkeypatch.undo()
    assert have is not None and 0 < validation.available_memory() <= have


# --------------------------------------------------------------------------- data files


@pytest.mark.parametrize("body, fmt", [(b"1 1:1e39 2:1\n-1 1:1 2:2\n", "svm"), (b"y,a\n1,1e39\n0,2\n", "csv")])
def test_a_value_beyond_float32_is_one_line(tmp_path, capsys, body, fmt):
    # was: numpy's RuntimeWarning (2 more lines on stderr) and "value inf is not finite"
    src = tmp_path / f"big.{fmt}"
    src.write_bytes(body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the overflow is refused, not warned about
        line = _one_line(capsys, "convert", src, tmp_path / "o.zarr")
    assert line == (f"{src}: row 0: value 1e+39 overflows float32; store it with --dtype float64 "
                    "(dtype='float64') or scale the features")
    assert not (tmp_path / "o.zarr").exists()
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "--dtype", "float64"]) == 0
    assert open_dataset(tmp_path / "o.zarr").to_numpy()[0].max() == 1e39


# --------------------------------------------------------------------------- stores


def test_a_store_whose_layout_lies_is_one_line(work, capsys, tmp_path):
    # was: AttributeError traceback ('Group' object has no attribute 'shape')
    shutil.copytree(work / "a.zarr", work / "lie.zarr")
    _edit_root(work / "lie.zarr", layout="dense")
    want = f"lie.zarr: X is a zarr group, but the store's metadata says layout 'dense' (damaged or edited)"
    for argv in (["info", "lie.zarr", "--validate"], ["evaluate", "m.npz", "lie.zarr"],
                 ["train", "lie.zarr", "--model", "perceptron", "--in-process"]):
        assert _one_line(capsys, *argv) == want
    # the other way: a dense store that says it is CSR
    X = np.arange(12.0).reshape(6, 2)
    assert main(["convert", "a.svm", "dense.zarr", "--dense"]) == 0
    _edit_root(work / "dense.zarr", layout="csr")
    assert _one_line(capsys, "info", "dense.zarr") == (
        "dense.zarr: X is a zarr array, but the store's metadata says layout 'csr' (damaged or edited)")
    del X


def test_a_checksum_codec_dropped_from_the_metadata_is_one_line(work, capsys):
    # was: a flipped byte in a chunk whose array metadata lost its crc32c codec: evaluate exit 0 with
    # another confusion matrix (the values silently changed)
    shutil.copytree(work / "a.zarr", work / "edit.zarr")
    meta = work / "edit.zarr" / "X" / "data" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["codecs"] = [c for c in doc["codecs"] if c["name"] != "crc32c"]
    meta.write_text(json.dumps(doc))
    want = ("edit.zarr: X/data has no crc32c codec, but the store was written with a checksum in every chunk "
            "(damaged or edited metadata)")
    assert _one_line(capsys, "evaluate", "m.npz", "edit.zarr") == want
    with pytest.raises(StoreError, match="no crc32c codec"):
        open_dataset(work / "edit.zarr")


# --------------------------------------------------------------------------- model files


def _rewrite_model(src: Path, dst: Path, **arrays) -> None:
    with np.load(src, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    members.update(arrays)
    np.savez(dst, **members)


@pytest.mark.parametrize("member, value, want", [
    ("coef", np.nan, "member coef.npy holds non-finite values (NaN or inf): a damaged model"),
    ("coef", np.inf, "member coef.npy holds non-finite values (NaN or inf): a damaged model"),
    ("intercept", np.nan, "member intercept.npy holds non-finite values (NaN or inf): a damaged model"),
    ("classes", [np.nan, 1.0], "member classes.npy holds non-finite values (NaN or inf): a damaged model"),
    ("classes", [1, 1], "member classes.npy repeats a class ([1, 1]): a damaged model"),
])
def test_a_model_of_non_finite_or_repeated_values_is_one_line(work, capsys, member, value, want):
    # was: NaN scores predicted as one class with exit 0 (a 53 % error "evaluated"), inf scores the
    # other; NaN classes a KeyError traceback; repeated classes accepted
    with np.load(work / "m.npz", allow_pickle=False) as z:
        a = z[member]
    bad = np.full_like(a, value) if np.isscalar(value) else np.array(value)
    _rewrite_model(work / "m.npz", work / "bad.npz", **{member: bad})
    assert _one_line(capsys, "evaluate", "bad.npz", "a.zarr") == f"bad.npz: {want}"
    assert _one_line(capsys, "predict", "bad.npz", "a.svm") == f"{work / 'bad.npz'}: {want}"
    with pytest.raises(ValueError, match="a damaged model"):
        load_model(work / "bad.npz")


# --------------------------------------------------------------------------- writers


def test_overwrite_never_deletes_a_file_put_inside_a_store(work, capsys):
    # was: convert --overwrite removed the whole directory, notes.txt with it
    (work / "a.zarr" / "notes.txt").write_text("mine")
    line = _one_line(capsys, "convert", "a.svm", "a.zarr", "--overwrite")
    assert line == ("a.zarr holds 'notes.txt', which distlearn did not write; refusing to delete it "
                    "(move it out first, or use another path)")
    assert (work / "a.zarr" / "notes.txt").read_text() == "mine" and open_dataset(work / "a.zarr").n_samples == 60
    (work / "a.zarr" / "notes.txt").unlink()
    assert main(["convert", "a.svm", "a.zarr", "--overwrite"]) == 0  # its own files only: replaced


def test_predictions_overwrite_never_deletes_a_file_put_inside(work, capsys):
    assert main(["predict", "m.npz", "a.zarr", "--out", "p.zarr"]) == 0
    (work / "p.zarr" / "keep").mkdir()
    (work / "p.zarr" / "keep" / "x.npz").write_bytes(b"mine")
    line = _one_line(capsys, "predict", "m.npz", "a.zarr", "--out", "p.zarr", "--overwrite")
    assert line == ("p.zarr holds 'keep/x.npz', which distlearn did not write; refusing to delete it "
                    "(move it out first, or use another path)")
    assert (work / "p.zarr" / "keep" / "x.npz").read_bytes() == b"mine"


@pytest.mark.parametrize("intruder", ["model", "link"])
def test_a_new_checkpoint_never_deletes_a_file_put_inside_the_old_one(work, capsys, intruder):
    # was: train --checkpoint CK (no --resume) over an earlier checkpoint removed it whole, with a model
    # saved into it (train --save CK/m.npz) or a symbolic link under a cut
    argv = ["train", "a.zarr", "--model", "obpm", "--in-process", "--param", "n_estimators=2", "--epochs", "1",
            "--checkpoint", "ck"]
    assert main(argv) == 0
    if intruder == "model":
        assert main([*argv, "--resume", "--save", "ck/m.npz"]) == 0
        rel = "m.npz"
    else:
        cut = sorted(p for p in (work / "ck").iterdir() if p.name.startswith("e"))[-1]
        (cut / "link").symlink_to(work / "a.svm")
        rel = f"{cut.name}/link"
    line = _one_line(capsys, *argv)
    assert line == (f"ck holds '{rel}', which distlearn did not write; refusing to delete it "
                    "(move it out first, or use another path)")
    assert (work / "ck" / rel).exists() and (work / "a.svm").read_text() == ROWS


def test_a_budget_beyond_int64_is_one_line(work, capsys):
    # was: OverflowError traceback ("int too big to convert") from the budget engine's record
    line = _one_line(capsys, "train", "a.zarr", "--model", "kernel-perceptron", "--in-process",
                     "--param", f"budget={2**64}")
    assert line == ("budget must be None (no removal), 'variable' (DistillCache), 'projectron' or an integer "
                    f"cache size >= 1 (below 2**63); got {2**64}")


def test_predict_overwrite_never_replaces_a_text_file_of_prose(work, capsys):
    # was: any UTF-8 text counted as earlier predictions: --out notes.txt --overwrite replaced the notes
    (work / "notes.txt").write_text("keep me\nand this line\n")
    line = _one_line(capsys, "predict", "m.npz", "a.zarr", "--out", "notes.txt", "--overwrite")
    assert line == ("notes.txt exists and does not look like predictions distlearn predict wrote (line 1 is not "
                    "comma-separated values without blanks); refusing to replace it")
    assert (work / "notes.txt").read_text() == "keep me\nand this line\n"
    for out, extra in (("p.txt", []), ("p.csv", ["--decision"])):  # its own predictions are still replaced
        assert main(["predict", "m.npz", "a.zarr", "--out", out, *extra]) == 0
        assert main(["predict", "m.npz", "a.zarr", "--out", out, "--overwrite", *extra]) == 0
    assert len((work / "p.txt").read_text().splitlines()) == 60


@pytest.mark.parametrize("argv, want", [
    (["--seed", str(2**64)], f"argument --seed: must be in [0, 2**64), got {2**64}"),
    (["--tau", "0"], "argument --tau: must be in (0, 1], got 0.0"),
    (["--tau", "0.2", "nan"], "argument --tau: must be in (0, 1], got nan"),
])
def test_an_experiment_refuses_a_bad_seed_or_tau_before_recording_its_run(tmp_path, capsys, argv, want):
    # was: meta.json of the bad run written, then the error from inside a cell (after a progress line);
    # every later correct run into that --out was refused as "another run's cells"
    line = _one_line(capsys, "experiment", "obpm-table1", "--out", tmp_path / "exo", "--quick", *argv)
    assert line == f"{want} (see distlearn experiment --help)"
    assert not (tmp_path / "exo").exists()


def test_a_fifo_or_a_device_as_input_is_one_line_not_a_hang(work, capsys):
    # was: `convert fifo.svm` and `predict fifo.npz STORE` blocked in open() forever, without a word
    import os

    os.mkfifo(work / "fifo.svm")
    want = "is a FIFO (named pipe), not a regular file; distlearn reads files (save the data to one first)"
    assert _one_line(capsys, "convert", "fifo.svm", "f.zarr") == f"fifo.svm: {want}"
    assert _one_line(capsys, "evaluate", "fifo.svm", "a.zarr") == f"fifo.svm: {want}"
    assert _one_line(capsys, "predict", "fifo.svm", "a.zarr").endswith(f"fifo.svm: {want}")
    (work / "tok.dat").write_bytes(b".I 5\n.W\nbank rate\n\n")
    assert _one_line(capsys, "convert", "tok.dat", "f.zarr", "--qrels", "fifo.svm").endswith(f"fifo.svm: {want}")
    if os.path.exists("/dev/zero"):  # was: "/dev/zero: no such file"
        assert _one_line(capsys, "convert", "/dev/zero", "z.zarr", "--format", "svmlight") == (
            "/dev/zero: is a device, not a regular file; distlearn reads files (save the data to one first)")
    assert not (work / "f.zarr").exists() and not (work / "z.zarr").exists()


def test_mixing_without_shards_is_one_line(work, capsys):
    # was: --mixing updates without --shards silently ignored (exit 0)
    line = _one_line(capsys, "train", "a.zarr", "--model", "perceptron", "--in-process", "--mixing", "updates")
    assert line == "--mixing weights the shards of --shards S; without --shards there is nothing to mix"
    assert main(["train", "a.zarr", "--model", "perceptron", "--in-process", "--shards", "2",
                 "--mixing", "updates", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mixing"] == "updates"


def test_a_header_naming_the_label_twice_is_one_line(tmp_path, capsys):
    # was: the first 'label' column taken silently, the second trained as a feature
    src = tmp_path / "dup.csv"
    src.write_text("label,Label,b\n1,0,2\n0,1,3\n1,1,1\n")
    line = _one_line(capsys, "convert", src, tmp_path / "o.zarr")
    assert line == (f"{src}:1: the header has 2 columns named 'label' (columns 0, 1); "
                    "pick the label with --label-column INDEX")
    assert main(["convert", str(src), str(tmp_path / "o.zarr"), "--label-column", "1"]) == 0
    X, y = open_dataset(tmp_path / "o.zarr").to_numpy()
    assert y.tolist() == [0, 1, 1] and X.tolist() == [[1, 2], [0, 3], [1, 1]]


def test_generate_rcv1_with_too_few_features_names_the_option(tmp_path, capsys):
    # was: "mean_distinct must be in [1.0, 1.0]; got 75", a parameter the command does not have
    line = _one_line(capsys, "generate", "rcv1", tmp_path / "g.svm", "--n-samples", 10, "--n-features", 1)
    assert line == ("n_features=1 (--n-features) is fewer than the 75 distinct words a document holds on "
                    "average (mean_distinct); give more features")
    assert main(["generate", "rcv1", str(tmp_path / "g.svm"), "--n-samples", "10", "--n-features", "2000"]) == 0


def test_a_model_with_non_finite_values_is_never_written(tmp_path):
    """save_model refuses, before writing, what load_model would refuse: NaN or inf coefficients (a fit that
    diverged), in one line naming the member; nothing is left at the path."""
    from sklearn.datasets import make_classification

    import distlearn
    from distlearn.model import save_model

    X, y = make_classification(60, 5, random_state=0)
    est = distlearn.Perceptron(random_state=0).fit(X, y)
    est.coef_ = est.coef_.copy()
    est.coef_[0, 1] = np.nan
    out = tmp_path / "m.npz"
    with pytest.raises(ValueError, match=r"^Perceptron: its coef holds non-finite values \(NaN or inf\)"):
        save_model(est, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    k = distlearn.KernelMIRA(gamma=1.0, random_state=0).fit(X, y)
    k.dual_coef_ = k.dual_coef_.copy()
    k.dual_coef_[0, 0] = np.inf
    with pytest.raises(ValueError, match="its dual_coef holds non-finite values"):
        save_model(k, out)
    assert not out.exists()


# --------------------------------------------------------------------------- kernel parameters (safe2)

TINY = float(np.finfo(np.float64).tiny)
GAMMA_MSG = f"gamma must be a real number in [{TINY:g}, inf) or 'scale' or 'auto', got "


def _two_blobs(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2, 1, -1)
    return rng.normal(size=(n, 2)) + 2.0 * y[:, None], y


def test_a_subnormal_gamma_is_one_line(work, capsys):
    # was: gamma=1e-320 (a subnormal float) accepted; every RBF row is 1, and the fit trained to ~50 % error
    import distlearn

    line = _one_line(capsys, "train", "a.zarr", "--model", "kernel-mira", "--in-process", "--param", "gamma=1e-320")
    assert line == GAMMA_MSG + "1e-320"
    X, y = _two_blobs()
    for est in (distlearn.KernelMIRA(gamma=1e-320), distlearn.KernelPerceptron(gamma=5e-324, kernel="poly"),
                distlearn.KernelOBPM(n_estimators=2, base=distlearn.KernelMIRA(gamma=1e-310)),
                distlearn.KernelPermutationBPM(n_estimators=2, base=distlearn.KernelMIRA(gamma=1e-320))):
        with pytest.raises(ValueError, match=r"gamma must be a real number in \[2\.22507e-308, inf\)"):
            est.fit(X, y)
    from distlearn.learners.kernel import make_kernel

    with pytest.raises(ValueError, match="gamma must be a normal float"):
        make_kernel("rbf", gamma=1e-320)
    assert distlearn.KernelMIRA(gamma=TINY, budget=4).fit(X, y).gamma_ == TINY  # the smallest normal one is taken


BUDGET1 = ("budget=1 with kernel={k}: the expansion of one cached pattern, a*k(x, z), has the same sign "
           "everywhere ({why}), so the fit predicts a single class; use budget >= 2")


@pytest.mark.parametrize("params, why", [
    ({"kernel": "rbf"}, "k(x, z) > 0"),
    ({"kernel": "rbf", "removal": "merge"}, "k(x, z) > 0"),
    ({"kernel": "rbf", "removal": "oldest"}, "k(x, z) > 0"),
    ({"kernel": "poly", "degree": 2, "coef0": 1.0}, "k(x, z) >= 0 for an even degree"),
    ({"kernel": "poly", "degree": 4}, "k(x, z) >= 0 for an even degree"),
])
def test_a_budget_of_one_that_cannot_hold_two_classes_is_refused(work, capsys, params, why):
    # was: removal="merge", budget=1 (RBF) trained to ~50 % error with exit 0: one pattern's a*k(x, z) has
    # one sign everywhere, so every row got the same label
    import distlearn

    k = params["kernel"] if params["kernel"] == "rbf" else f"'poly' of degree {params['degree']}"
    k = "'rbf'" if k == "rbf" else k
    want = BUDGET1.format(k=k, why=why)
    argv = [a for n, v in params.items() for a in ("--param", f"{n}={v}")]
    assert _one_line(capsys, "train", "a.zarr", "--model", "kernel-mira", "--in-process", "--param", "budget=1",
                     "--param", "gamma=1.0", *argv) == want
    X, y = _two_blobs()
    for est in (distlearn.KernelMIRA(budget=1, gamma=1.0, **params), distlearn.KernelPA(budget=1, gamma=1.0, **params),
                distlearn.KernelOBPM(n_estimators=2, base=distlearn.KernelPerceptron(budget=1, gamma=1.0, **params)),
                distlearn.KernelPermutationBPM(n_estimators=2, base=distlearn.KernelMIRA(budget=1, gamma=1.0, **params))):
        with pytest.raises(ValueError, match=r"^" + want.replace("(", r"\(").replace(")", r"\)")
                           .replace("*", r"\*").replace(".", r"\.") + "$"):
            est.fit(X, y)


@pytest.mark.parametrize("params", [{"kernel": "poly", "degree": 3, "coef0": 1.0}, {"kernel": "poly", "degree": 1},
                                    {"kernel": "linear"}])
def test_a_budget_of_one_that_can_change_sign_is_kept(params):
    # an odd-degree polynomial (any coef0) or a linear kernel: a*k(x, z) changes sign across a hyperplane
    # x.z = -coef0/gamma, so one pattern separates two classes; these fits learn two blobs on each side of 0
    import distlearn

    X, y = _two_blobs(200)
    est = distlearn.KernelPerceptron(budget=1, gamma=0.5, epochs=3, random_state=0, **params).fit(X, y)
    assert est.support_vectors_.shape[0] == 1
    assert set(est.predict(X).tolist()) == {-1, 1} and est.score(X, y) > 0.9


# --------------------------------------------------------------------------- stores (safe2)


def _strip_checksums(store: Path, *, root: bool = True, codecs: bool = True) -> None:
    """What an edit that hides the checksums does: the root's integrity record and every array's crc32c
    codec removed (the chunks keep their 4 checksum bytes, read as data by nothing: a flipped byte follows)."""
    if root:
        doc = json.loads((store / "zarr.json").read_text())
        del doc["attributes"]["distlearn"]["integrity"]
        (store / "zarr.json").write_text(json.dumps(doc))
    if codecs:
        for meta in store.rglob("zarr.json"):
            doc = json.loads(meta.read_text())
            if doc.get("node_type") == "array":
                doc["codecs"] = [c for c in doc["codecs"] if c["name"] != "crc32c"]
                meta.write_text(json.dumps(doc))


@pytest.mark.parametrize("root, codecs, why", [
    (True, True, "its fill value NaN, never data"),  # was: read as a pre-checksum store, a flipped byte silent
    (True, False, "its crc32c codec"),
])
def test_a_store_whose_integrity_record_was_removed_is_one_line(work, capsys, root, codecs, why):
    shutil.copytree(work / "a.zarr", work / "edit.zarr")
    _strip_checksums(work / "edit.zarr", root=root, codecs=codecs)
    want = (f"edit.zarr: the store's metadata has no integrity record, but y was written with a checksum in every "
            f"chunk ({why}): damaged or edited metadata")
    assert _one_line(capsys, "evaluate", "m.npz", "edit.zarr") == want
    assert _one_line(capsys, "info", "edit.zarr") == want
    with pytest.raises(StoreError, match="has no integrity record, but y was written"):
        open_dataset(work / "edit.zarr")


def test_a_store_whose_integrity_record_and_codecs_were_removed_never_reads_a_flipped_byte(work, capsys):
    # the attack in full, on an uncompressed store (codec "none": no decompressor to trip over): integrity and
    # crc32c gone, every chunk cut of its 4 checksum bytes, then a byte of the values flipped.  Was: evaluate
    # exit 0 on the changed values.  Now the one-line refusal comes before any read (the fill values still
    # tell), as the same flip without the edit is a checksum error.
    from distlearn.data import create_dataset

    X, y = open_dataset(work / "a.zarr").to_numpy()
    for store in ("edit.zarr", "flip.zarr"):
        create_dataset(work / store, X, y, block_rows=20, codec="none")
        p = work / store / "X" / "c" / "0" / "0"
        b = bytearray(p.read_bytes())
        b[len(b) // 2] ^= 0x10
        p.write_bytes(bytes(b))
    _strip_checksums(work / "edit.zarr")
    for f in (work / "edit.zarr").rglob("*"):
        if f.is_file() and "c" in f.relative_to(work / "edit.zarr").parts:  # a chunk (zarr v3 keys: .../c/i/j)
            f.write_bytes(f.read_bytes()[:-4])
    line = _one_line(capsys, "evaluate", "m.npz", "edit.zarr")
    assert line == ("edit.zarr: the store's metadata has no integrity record, but y was written with a checksum "
                    "in every chunk (its fill value NaN, never data): damaged or edited metadata")
    assert _one_line(capsys, "evaluate", "m.npz", "flip.zarr").startswith("flip.zarr: block 0 (rows 0..19)")


# --------------------------------------------------------------------------- predict --out --overwrite (safe2)


def _refused_out(capsys, out: str, why: str, *extra) -> None:
    line = _one_line(capsys, "predict", "m.npz", "a.zarr", "--out", out, "--overwrite", *extra)
    assert line == f"{out} exists and does not look like predictions distlearn predict wrote ({why}); " \
                   "refusing to replace it"


def test_predict_overwrite_never_replaces_a_users_npy(work, capsys):
    # was: any .npy counted as earlier predictions: --out X.npy --overwrite destroyed a feature matrix
    rng = np.random.default_rng(0)
    users = {"X.npy": rng.normal(size=(50, 30)),                       # a feature matrix (np.save: format 1.0)
             "y.npy": np.where(np.arange(60) % 2, 1, -1),              # the user's own labels, 1-D
             "f.npy": np.asfortranarray(rng.normal(size=(4, 3)))}
    for name, a in users.items():
        np.save(work / name, a)
    before = {n: (work / n).read_bytes() for n in users}
    _refused_out(capsys, "X.npy", ".npy format 1.0 (np.save); distlearn predict writes format 2.0")
    _refused_out(capsys, "y.npy", ".npy format 1.0 (np.save); distlearn predict writes format 2.0")
    _refused_out(capsys, "f.npy", ".npy format 1.0 (np.save); distlearn predict writes format 2.0")
    # the same arrays in format 2.0 (a header written as predict writes it): the shape and dtype still tell
    with open(work / "X2.npy", "wb") as f:
        np.lib.format.write_array(f, users["X.npy"], version=(2, 0))
    before["X2.npy"] = (work / "X2.npy").read_bytes()
    _refused_out(capsys, "X2.npy", "shape (50, 30); distlearn predict writes shape (n,) for this model")
    with open(work / "o.npy", "wb") as f:
        np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), version=(2, 0), allow_pickle=True)
    before["o.npy"] = (work / "o.npy").read_bytes()
    _refused_out(capsys, "o.npy", "dtype object, not labels or scores")
    (work / "t.npy").write_text("1\n2\n")
    before["t.npy"] = (work / "t.npy").read_bytes()
    _refused_out(capsys, "t.npy", "not a .npy file")
    assert {n: (work / n).read_bytes() for n in before} == before


@pytest.mark.parametrize("name, body, why", [
    ("data.csv", "".join(",".join(str(v) for v in range(i, i + 30)) + "\n" for i in range(40)),
     "30 values a line; distlearn predict writes 1 for this model"),
    ("h.csv", "label\n1\n-1\n1\n", "line 1 is a header (the lines below are numbers)"),
    ("ragged.csv", "1\n-1,2\n", "lines of 1 and 2 values"),
    ("nl.txt", "1\n-1", "the last line does not end with a newline"),
    ("long.csv", "1," * 40_000 + "1\n", "no complete line in the first 65536 bytes"),
    ("words.txt", "keep me\n", "line 1 is not comma-separated values without blanks"),
    ("mixed.txt", "1\nspam\n-1\n", "line 2 is not a number, line 1 is (labels are all numbers or all names)"),
])
def test_predict_overwrite_never_replaces_a_users_text_data(work, capsys, name, body, why):
    # was: any CSV/TXT of comma-separated numbers counted as earlier predictions (data.csv destroyed); a header
    # line (a table's column name) or a ragged table too
    (work / name).write_text(body)
    _refused_out(capsys, name, why)
    assert (work / name).read_text() == body


def test_predict_overwrite_replaces_its_own_predictions_and_they_read_back(work, capsys, tmp_path):
    # its own outputs, of every kind predict writes, are still replaced, and read back with np.load/np.loadtxt
    from distlearn.data import create_dataset
    from distlearn.training import write_values

    rng = np.random.default_rng(1)
    X3, y3 = rng.normal(size=(90, 4)), np.repeat([0, 1, 2], 30)
    create_dataset(work / "t3.zarr", X3, y3, block_rows=30)
    assert main(["train", "t3.zarr", "--model", "perceptron", "--in-process", "--epochs", "1", "--save", "m3.npz"]) == 0
    for model, store, width in (("m.npz", "a.zarr", 1), ("m3.npz", "t3.zarr", 3)):
        for out in ("p.npy", "p.csv", "p.txt"):
            for extra in ([], ["--decision"], []):  # labels, scores over them, labels over the scores
                argv = ["predict", model, store, "--out", out, "--overwrite", *extra]
                assert main(argv) == 0, (model, out, extra)
                v = np.load(work / out) if out.endswith(".npy") else np.loadtxt(work / out, delimiter=",")
                n = 60 if model == "m.npz" else 90
                assert v.shape == ((n, width) if extra and width > 1 else (n,)), (model, out, extra)
            (work / out).unlink()
    # the scores of the 3-class model are not predictions for the binary one (it writes 1 value a row)
    assert main(["predict", "m3.npz", "t3.zarr", "--out", "s.npy", "--decision"]) == 0
    _refused_out(capsys, "s.npy", "shape (90, 3); distlearn predict writes shape (n,) for this model")
    # string labels go to format 2.0 too, and read back as they were
    for _ in range(2):
        assert write_values([np.array(["spam", "ham"]), np.array(["eggs"])], tmp_path / "w.npy") == 3
    assert np.load(tmp_path / "w.npy").tolist() == ["spam", "ham", "eggs"]
    with open(tmp_path / "w.npy", "rb") as f:
        assert np.lib.format.read_magic(f) == (2, 0)
    assert write_values([], tmp_path / "e.npy") == 0 and write_values([], tmp_path / "e.npy") == 0


def test_predict_overwrite_cannot_tell_a_headerless_table_of_its_width(work, capsys):
    # the documented limit (predict --help, --overwrite): a headerless text file of numbers, one a line (or C a
    # line for a model of C classes), is what predict writes there, and is replaced
    (work / "col.csv").write_text("3\n1\n4\n")
    assert main(["predict", "m.npz", "a.zarr", "--out", "col.csv", "--overwrite"]) == 0
    assert np.loadtxt(work / "col.csv").shape == (60,)


def test_a_kernel_cache_beyond_the_available_memory_is_one_line(tmp_path, capsys, monkeypatch):
    """The kernel learners keep their patterns as dense rows, except on sparse CSR rows (a sparse store, the single
    learner's cache and the kernel OBPM's pool alike: a pattern costs its nonzeros): on wide dense data the cache
    needs 8 d bytes a pattern.  A cache (or a fixed budget) that the machine cannot hold is refused before it is
    allocated, in one line that says why and what to do, for the single learner and the kernel OBPM's pool alike
    (the bound is the memory available, patched small here).  On the CSR rows both fit in that memory: the kernel
    OBPM's pool becomes a store before it is sized for the chunk (until 2026-11-27 it grew dense first and was
    refused here)."""
    import scipy.sparse as sp

    import distlearn._validation as V
    from distlearn import KernelMIRA, KernelOBPM

    rs = np.random.default_rng(0)
    X = sp.random(200, 50_000, density=0.002, format="csr", random_state=1)
    y = rs.integers(0, 2, 200)
    monkeypatch.setattr(V, "available_memory", lambda: 64 * 50_000 * 8)  # room for 64 dense patterns
    for est, data in ((KernelMIRA(budget="variable", gamma=1.0, random_state=0), X.toarray()),
                      (KernelMIRA(budget=100, removal="margin", gamma=1.0, random_state=0), X.toarray()),
                      (KernelOBPM(n_estimators=3, base=KernelMIRA(gamma=1.0), random_state=0), X.toarray())):
        with pytest.raises(ValueError, match=r"kernel (cache's|ensemble's pool of) patterns \(\d+ x 50,000, 8 bytes "
                                             r"each\) would need .* keep their patterns as dense rows .*: on wide "
                                             r"data bound the cache with budget=N, or use a linear model"):
            est.fit(data, y)
    # on the CSR rows a single learner's cache is a sparse store: the same memory holds it
    sparse = KernelMIRA(budget="variable", gamma=1.0, random_state=0).fit(X, y)
    assert sparse._state.store and sparse.support_vectors_.shape[1] == 50_000
    pooled = KernelOBPM(n_estimators=3, base=KernelMIRA(gamma=1.0), random_state=0).fit(X, y)
    assert sp.issparse(pooled.support_vectors_) and pooled.support_vectors_.shape[1] == 50_000
    monkeypatch.setattr(V, "available_memory", lambda: 10 * 2**30)
    assert KernelMIRA(budget=30, removal="margin", gamma=1.0, random_state=0).fit(X.toarray(), y) \
        .support_vectors_.shape[1] == 50_000  # with the memory, the same data fits dense too