"""Writers never delete what they did not write, and an output that cannot be written is one line
with exit 2 before the work starts (issue 26): every writer command through ``distlearn.cli.main``."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from distlearn import _outputs, training
from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.experiments._cells import Cells

ROWS = "1 1:0.5 2:1\n-1 1:-1 3:2\n1 2:0.3\n-1 3:1.5\n"
ROOT = os.geteuid() == 0


def _one_line(capsys, *needles: str) -> str:
    cap = capsys.readouterr()
    err = cap.err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("distlearn "), err
    for n in needles:
        assert n in err, err
    return err


def _user_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "sentinel").write_text("mine")
    return path


def _survives(path: Path) -> None:
    assert (path / "sentinel").read_text() == "mine", sorted(path.iterdir())


@pytest.fixture
def work(tmp_path, monkeypatch):
    """tmp_path/in/a.svm, a store tmp_path/s.zarr, and the working directory tmp_path/cwd."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.svm").write_text(ROWS)
    assert main(["convert", str(tmp_path / "in" / "a.svm"), str(tmp_path / "s.zarr")]) == 0
    cwd = _user_dir(tmp_path / "cwd")
    monkeypatch.chdir(cwd)
    return tmp_path


@pytest.fixture
def fits(monkeypatch):
    """Records every fit of `distlearn train` (and runs it)."""
    calls: list[str] = []
    make = training.make_estimator

    def spy(*args, **kwargs):
        est = make(*args, **kwargs)
        fit = est.fit

        def recorded(*a, **k):
            calls.append(str(a[0]))
            return fit(*a, **k)
        est.fit = recorded
        return est

    monkeypatch.setattr(training, "make_estimator", spy)
    return calls


def _attack_targets(work: Path) -> dict[str, Path]:
    """Directories a user owns that an --overwrite must never delete."""
    user = _user_dir(work / "user")
    holder = _user_dir(work / "holder")
    assert main(["convert", str(work / "in" / "a.svm"), str(holder / "inner.zarr")]) == 0
    foreign = _user_dir(work / "foreign.zarr")  # a zarr group, not distlearn's
    (foreign / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    (work / "link").symlink_to(user)
    return {"user": user, "input parent": work / "in", "cwd": Path("."), "parent of cwd": Path(".."),
            "holder of a store": holder, "foreign zarr": foreign, "symlink to user": work / "link"}


def test_convert_overwrite_never_deletes_a_user_directory(work, capsys):
    for name, target in _attack_targets(work).items():
        capsys.readouterr()
        assert main(["convert", str(work / "in" / "a.svm"), str(target), "--overwrite"]) == 2, name
        _one_line(capsys, "refusing")
    for d in ("user", "cwd", "holder", "foreign.zarr"):
        _survives(work / d)
    assert (work / "in" / "a.svm").read_text() == ROWS
    assert open_dataset(work / "holder" / "inner.zarr").n_samples == 4
    for target in (os.path.expanduser("~"), "/", str(work / "in" / "a.svm")):
        assert main(["convert", str(work / "in" / "a.svm"), target, "--overwrite"]) == 2
        _one_line(capsys, "refusing to write over")


def test_convert_overwrite_replaces_a_previous_store(work, capsys):
    (work / "in" / "b.svm").write_text(ROWS + "1 4:2\n")
    assert main(["convert", str(work / "in" / "b.svm"), str(work / "s.zarr")]) == 2
    _one_line(capsys, "already exists", "--overwrite")
    assert main(["convert", str(work / "in" / "b.svm"), str(work / "s.zarr"), "--overwrite"]) == 0
    ds = open_dataset(work / "s.zarr")
    assert (ds.n_samples, ds.n_features) == (5, 4)
    assert not [p for p in work.iterdir() if ".old-" in p.name or ".partial-" in p.name]


def test_convert_a_file_where_the_store_goes(work, capsys):
    (work / "f").write_text("not a directory")
    assert main(["convert", str(work / "in" / "a.svm"), str(work / "f"), "--overwrite"]) == 2
    _one_line(capsys, "cannot write", "Not a directory")
    assert main(["convert", str(work / "in" / "a.svm"), str(work / "f" / "sub.zarr")]) == 2
    _one_line(capsys, "cannot write", "Not a directory")
    assert (work / "f").read_text() == "not a directory"


def test_generate_overwrite(work, capsys):
    user = _user_dir(work / "user")
    notes = work / "notes.txt"
    notes.write_text("my notes, not svmlight\n")
    for argv in (["rcv1", str(user)], ["obpm", str(user)], ["rcv1", str(notes)], ["splice-files", str(user)],
                 ["rcv1-files", "."]):
        assert main(["generate", *argv, "--n-samples", "20", "--overwrite"]) == 2, argv
        _one_line(capsys, "refusing")
    _survives(user)
    _survives(work / "cwd")
    assert notes.read_text() == "my notes, not svmlight\n"
    # a previous generated store, svmlight file or directory is replaced by the new data
    for out in ("g.zarr", "g.svm"):
        assert main(["generate", "rcv1", str(work / out), "--n-samples", "20"]) == 0
        assert main(["generate", "rcv1", str(work / out), "--n-samples", "30", "--overwrite"]) == 0
    assert open_dataset(work / "g.zarr").n_samples == 30
    assert len((work / "g.svm").read_text().splitlines()) == 30
    assert main(["generate", "splice-files", str(work / "sp"), "--n-samples", "10"]) == 0
    assert main(["generate", "splice-files", str(work / "sp"), "--n-samples", "20"]) == 2
    assert main(["generate", "splice-files", str(work / "sp"), "--n-samples", "20", "--overwrite"]) == 0
    assert len((work / "sp" / "train.tsv").read_text().splitlines()) == 20


def test_train_save_and_checkpoint(work, capsys, fits):
    store = str(work / "s.zarr")
    user = _user_dir(work / "user")
    not_model = work / "x.npz"
    not_model.write_bytes(b"user bytes")
    (work / "d.npz").mkdir()
    cases = [(["--save", str(not_model), "--overwrite"], "refusing"),
             (["--save", str(work / "d.npz")], "cannot write"),
             (["--save", str(work / "in" / "a.npz"), "--overwrite"], None),  # new file inside no input: fine
             (["--model", "obpm", "--checkpoint", str(user)], "refusing"),
             (["--model", "obpm", "--checkpoint", "."], "refusing"),
             (["--save", str(work / "in"), "--overwrite"], "end in .npz")]
    for extra, msg in cases:
        argv = ["train", store, "--in-process", *(["--model", "perceptron"] if "--model" not in extra else []), *extra]
        if msg is None:
            assert main(argv) == 0
            capsys.readouterr()
            continue
        n = len(fits)
        assert main(argv) == 2, extra
        _one_line(capsys, msg)
        assert len(fits) == n, f"{extra}: trained before refusing"
    _survives(user)
    assert not_model.read_bytes() == b"user bytes"
    # a previous model file is replaced only with --overwrite, and holds the new model
    m = work / "m.npz"
    assert main(["train", store, "--model", "perceptron", "--save", str(m)]) == 0
    assert main(["train", store, "--model", "perceptron", "--save", str(m)]) == 2
    _one_line(capsys, "already exists")
    assert main(["train", store, "--model", "pa", "--save", str(m), "--overwrite"]) == 0
    with np.load(m, allow_pickle=False) as z:
        assert json.loads(str(z["meta"]))["estimator"] != "Perceptron"


def test_predict_out(work, capsys):
    store = str(work / "s.zarr")
    m = work / "m.npz"
    assert main(["train", store, "--model", "perceptron", "--save", str(m)]) == 0
    user = _user_dir(work / "labels.zarr")
    for out in (str(user), store, str(work / "s.zarr" / "p.npy"), "."):
        assert main(["predict", str(m), store, "--out", out, "--overwrite"]) == 2, out
        _one_line(capsys, "refusing")
    _survives(user)
    assert open_dataset(store).n_samples == 4
    for name in ("p.zarr", "p.npy", "p.txt"):
        out = work / name
        assert main(["predict", str(m), store, "--out", str(out)]) == 0
        assert main(["predict", str(m), store, "--out", str(out)]) == 2
        _one_line(capsys, "already exists")
        assert main(["predict", str(m), store, "--out", str(out), "--overwrite", "--decision"]) == 0
    import zarr

    arr = zarr.open_array(str(work / "p.zarr"), mode="r")
    assert arr.dtype.kind == "f" and _outputs.PREDICTIONS_ATTR in arr.attrs  # the scores replaced the labels
    assert np.load(work / "p.npy").dtype.kind == "f"
    assert not [p for p in work.iterdir() if ".old-" in p.name or ".partial-" in p.name]


def test_experiment_out(work, capsys):
    user = _user_dir(work / "user")
    for out in (str(user), ".", ".."):
        assert main(["experiment", "obpm-table1", "--quick", "--out", out, "--overwrite"]) == 2, out
        _one_line(capsys, "refusing")
    _survives(user)
    _survives(work / "cwd")
    # Cells --overwrite deletes only the cells of a run of its own (a directory with meta.json)
    d = work / "cellsdir"
    (d / "cells").mkdir(parents=True)
    (d / "cells" / "mine.json").write_text("{}")
    Cells(d, {"k": 1}, overwrite=True)
    assert (d / "cells" / "mine.json").exists()
    Cells(d, {"k": 2}, overwrite=True)  # now it is ours
    assert not (d / "cells" / "mine.json").exists()


def test_demo_out(work, capsys):
    user = _user_dir(work / "user")
    assert main(["demo", "--out", str(user), "--n-samples", "100"]) == 2
    _one_line(capsys, "refusing to write into it")
    _survives(user)


def _unwritable(monkeypatch, ro: Path) -> None:
    """Make ``ro`` read-only: chmod for a user, an os.access that says so for root (which ignores
    permissions)."""
    ro.mkdir()
    if ROOT:
        real = os.access
        monkeypatch.setattr(_outputs.os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    else:
        ro.chmod(0o500)


@pytest.mark.parametrize("where", ["read-only", "under a file"])
def test_unwritable_outputs_fail_before_the_work(work, capsys, monkeypatch, fits, where):
    store, svm = str(work / "s.zarr"), str(work / "in" / "a.svm")
    assert main(["train", store, "--model", "perceptron", "--save", str(work / "m.npz")]) == 0
    fits.clear()
    if where == "read-only":
        _unwritable(monkeypatch, work / "ro")
        base, why = work / "ro", "Permission denied"
    else:
        (work / "file").write_text("x")
        base, why = work / "file", "Not a directory"
    commands = [
        ["convert", svm, str(base / "o.zarr")],
        ["generate", "rcv1", str(base / "g.zarr"), "--n-samples", "10"],
        ["generate", "splice-files", str(base / "sp"), "--n-samples", "10"],
        ["train", store, "--model", "perceptron", "--save", str(base / "m.npz")],
        ["train", store, "--model", "obpm", "--in-process", "--checkpoint", str(base / "ck")],
        ["predict", str(work / "m.npz"), store, "--out", str(base / "p.npy")],
        ["predict", str(work / "m.npz"), store, "--out", str(base / "p.zarr")],
        ["experiment", "obpm-table1", "--quick", "--out", str(base / "x")],
    ]
    try:
        for argv in commands:
            assert main(argv) == 2, argv
            _one_line(capsys, f"distlearn {argv[0]}: error: cannot write {base}", why)
    finally:
        if not ROOT and (work / "ro").exists():
            (work / "ro").chmod(0o700)
    assert fits == [], "a fit ran before the output was checked"
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(".")) == []


def test_an_os_error_during_the_write_is_one_line(work, capsys, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(work / "s2.zarr"))

    monkeypatch.setattr(_outputs, "replace", full)
    import distlearn.data.store as store_mod

    monkeypatch.setattr(store_mod, "replace", full)
    assert main(["convert", str(work / "in" / "a.svm"), str(work / "s2.zarr")]) == 2
    _one_line(capsys, "cannot write", "No space left on device")
    assert not (work / "s2.zarr").exists() and not [p for p in work.iterdir() if ".partial-" in p.name]


def test_replace_and_remove_check_the_kind_again(work):
    tmp = work / "new"
    tmp.mkdir()
    user = _user_dir(work / "user")
    with pytest.raises(FileExistsError, match="not a distlearn store"):
        _outputs.replace(tmp, user, "store")  # what appeared there is not replaced
    with pytest.raises(FileExistsError, match="refusing to delete"):
        _outputs.remove(user, "checkpoint")
    _survives(user)
    assert _outputs.is_kind(work / "s.zarr", "store") and not _outputs.is_kind(work / "s.zarr", "checkpoint")
    assert not _outputs.is_kind(user, "experiment")
