"""An attacker's audit, round 2: work that is interrupted, run twice at once, resumed, or whose
disk fills under it (README "Reliability: bad input and faults").

Every case runs the real CLI in a real process and picks its moment by polling for a file the
command writes (never by sleeping blindly): ``SIGKILL`` for a crash, ``SIGSTOP``/``SIGCONT`` to hold
a writer between its checks and its rename while another process acts, and ``RLIMIT_FSIZE`` (with
``SIGXFSZ`` ignored) for a full disk.  Each asserts the promise: a one-line refusal (exit 2) naming
the file, nothing half-written under the final name, nobody's work lost, and a resumed model equal
to an uninterrupted one bit for bit.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from distlearn.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 120.0  #: seconds any one wait of these tests may take (the 2 shared cores can be busy)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _start(cwd: Path, *argv: object, preexec=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distlearn", *map(str, argv)], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)


def _run(cwd: Path, *argv: object, preexec=None) -> tuple[int, str, str]:
    p = _start(cwd, *argv, preexec=preexec)
    out, err = p.communicate(timeout=DEADLINE)
    return p.returncode, out, err


def _one_line(rc: int, err: str, command: str) -> str:
    """Exit 2 and exactly one error line (no traceback); return the message."""
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    assert lines[0].startswith(f"distlearn {command}: error: "), lines[0]
    return lines[0].split(": error: ", 1)[1]


def _poll(proc: subprocess.Popen, found, what: str):
    """Wait (deadline :data:`DEADLINE`) until ``found()`` is truthy while ``proc`` runs; return it."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < DEADLINE:
        hit = found()
        if hit:
            return hit
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the process ended (rc {proc.returncode}) before {what} appeared: {err[-2000:]}")
        time.sleep(0.002)
    proc.kill()
    pytest.fail(f"no {what} within {DEADLINE} s")


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=DEADLINE)
    assert proc.returncode == -signal.SIGKILL


def _full_disk(limit: int):
    """A ``preexec_fn``: files of this process may grow to ``limit`` bytes (then ``EFBIG``)."""
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _same_model(a: Path, b: Path) -> None:
    """Bit for bit the same arrays (the JSON meta holds the fit's seconds: compared apart)."""
    x, y = _arrays(a), _arrays(b)
    assert sorted(x) == sorted(y)
    for k in x:
        if k == "meta":
            continue
        assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape, k
        assert np.array_equal(x[k], y[k]), k


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """big.svm (~6 MB, for a convert that takes a while), g.zarr (600 rows in 12 blocks of the OBPM
    paper's problem), many.zarr (10,000 rows in 200 blocks: a predict that takes a while), and
    m.npz, a perceptron trained on g.zarr."""
    d = tmp_path_factory.mktemp("attack-time")
    assert main(["generate", "rcv1", str(d / "big.svm"), "--n-samples", "5000", "--n-features", "3000",
                 "--seed", "3"]) == 0
    assert main(["generate", "obpm", str(d / "g.zarr"), "--n-samples", "600", "--block-rows", "50",
                 "--seed", "1"]) == 0
    assert main(["generate", "obpm", str(d / "many.zarr"), "--n-samples", "10000", "--block-rows", "50",
                 "--seed", "2"]) == 0
    assert main(["train", str(d / "g.zarr"), "--model", "perceptron", "--epochs", "1", "--save",
                 str(d / "m.npz")]) == 0
    return d


@pytest.fixture
def work(data, tmp_path) -> Path:
    for name in ("big.svm", "m.npz"):
        os.symlink(data / name, tmp_path / name)
    for name in ("g.zarr", "g-test.zarr", "many.zarr"):
        os.symlink(data / name, tmp_path / name)
    return tmp_path


# --------------------------------------------------------------------------- 1. convert killed


def test_a_killed_convert_leaves_no_store_and_the_rerun_replaces_only_its_own(work):
    proc = _start(work, "convert", "big.svm", "out.zarr", "--block-rows", "200")

    def chunk_written():  # the partial store has a chunk on disk: the write is under way
        return [c for d in work.glob(".out.zarr.partial-*") for c in d.glob("X/*/c/*")]

    _poll(proc, chunk_written, "a chunk of the partial store")
    _kill(proc)
    partial = list(work.glob(".out.zarr.partial-*"))
    assert len(partial) == 1 and not (work / "out.zarr").exists()
    # nothing reads the partial store: not under its name, nor under the temporary's
    for argv in (["info", "out.zarr"], ["train", "out.zarr", "--model", "perceptron"],
                 ["predict", "m.npz", "out.zarr"]):
        line = _one_line(*_run(work, *argv)[::2], argv[0])
        assert "out.zarr" in line and ("no such" in line or "not found" in line or "does not exist" in line), line
    line = _one_line(*_run(work, "info", partial[0].name)[::2], "info")
    assert partial[0].name in line and "partial" in line, line
    # the rerun clears the killed run's temporary and writes the store whole
    rc, out, err = _run(work, "convert", "big.svm", "out.zarr", "--block-rows", "200")
    assert rc == 0, err
    assert not list(work.glob(".out.zarr.*")) and (work / "out.zarr" / "zarr.json").exists()
    # again without --overwrite: refused in one line, the store intact
    line = _one_line(*_run(work, "convert", "big.svm", "out.zarr")[::2], "convert")
    assert line == f"{work / 'out.zarr'} already exists; pass --overwrite to replace it" or \
        line == "out.zarr already exists; pass --overwrite to replace it", line
    # a user's file put inside the store is never deleted, --overwrite or not
    (work / "out.zarr" / "notes.txt").write_text("mine")
    line = _one_line(*_run(work, "convert", "big.svm", "out.zarr", "--overwrite")[::2], "convert")
    assert "notes.txt" in line and "did not write" in line, line
    assert (work / "out.zarr" / "notes.txt").read_text() == "mine"


# --------------------------------------------------------------------------- 2. model / predictions killed


def test_a_killed_save_or_predict_leaves_nothing_under_the_final_name(work):
    proc = _start(work, "predict", "m.npz", "many.zarr", "--out", "p.npy")
    _poll(proc, lambda: list(work.glob("p.npy.partial-*")), "the predictions' temporary")
    _kill(proc)
    assert not (work / "p.npy").exists()
    rc, out, err = _run(work, "predict", "m.npz", "many.zarr", "--out", "p.npy")  # the name is free
    assert rc == 0, err
    assert np.load(work / "p.npy").shape == (10000,)
    OBPM = ("--model", "obpm", "--in-process", "--param", "n_estimators=5", "--param", "tau=0.3", "--epochs", "2")
    proc = _start(work, "train", "g.zarr", *OBPM, "--checkpoint", "ck", "--checkpoint-every", "1", "--save", "m2.npz")
    _poll(proc, lambda: (work / "ck" / "latest.json").exists(), "a checkpoint")
    _kill(proc)
    assert not (work / "m2.npz").exists() and not list(work.glob("*m2*"))


# --------------------------------------------------------------------------- 3. two writers at once


OBPM = ("--model", "obpm", "--in-process", "--param", "n_estimators=5", "--param", "tau=0.3", "--epochs", "2")


def _hold_and_write(work: Path, first: subprocess.Popen, ready, what: str, *other: object) -> tuple[int, str]:
    """Stop ``first`` once ``ready()`` (after its output checks, before its rename), run the other
    writer ``other`` to completion meanwhile, let ``first`` go on; return ``first``'s (rc, stderr)."""
    _poll(first, ready, what)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        rc, out, err = _run(work, *other)
        assert rc == 0, err
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=DEADLINE)
    return first.returncode, err


@pytest.mark.slow  # ~11 s: two checkpointed OBPM fits
def test_two_saves_to_one_model_file_never_lose_one_silently(work):
    first = _start(work, "train", "g.zarr", *OBPM, "--checkpoint", "ck", "--checkpoint-every", "1", "--save", "m2.npz")
    rc, err = _hold_and_write(work, first, lambda: (work / "ck" / "latest.json").exists(), "a checkpoint",
                              "train", "g.zarr", "--model", "perceptron", "--epochs", "1", "--save", "m2.npz")
    line = _one_line(rc, err, "train")
    assert line == "m2.npz already exists; pass --overwrite to replace it"  # checked again before writing
    _same_model(work / "m2.npz", work / "m.npz")  # the other writer's model (a perceptron on g.zarr) is kept
    assert _names(work) == ["big.svm", "ck", "g-test.zarr", "g.zarr", "m.npz", "m2.npz", "many.zarr"]
    # with --overwrite the later one wins, as asked
    first = _start(work, "train", "g.zarr", *OBPM, "--checkpoint", "ck", "--checkpoint-every", "1", "--save", "m2.npz",
                   "--overwrite")
    rc, err = _hold_and_write(work, first, lambda: (work / "ck" / "latest.json").exists(), "a checkpoint",
                              "train", "g.zarr", "--model", "perceptron", "--save", "m2.npz", "--overwrite")
    assert rc == 0, err
    assert "OBPM" in str(_arrays(work / "m2.npz")["meta"])


@pytest.mark.parametrize("out", ["p.npy", "p.csv", "p.zarr"])
def test_two_predicts_to_one_file_never_lose_one_silently(work, out):
    # was: both exit 0, the first one's labels silently replaced by the later one (no --overwrite)
    first = _start(work, "predict", "m.npz", "many.zarr", "--decision", "--out", out)
    rc, err = _hold_and_write(work, first, lambda: list(work.glob(f"{out}.partial-*")), "the temporary",
                              "predict", "m.npz", "g.zarr", "--out", out)
    line = _one_line(rc, err, "predict")
    assert line == f"{out} appeared while writing (another writer?); not replaced: pass --overwrite to replace it"
    if out.endswith(".npy"):
        assert np.load(work / out).shape == (600,)  # the other writer's labels of g.zarr
    assert not list(work.glob(f"{out}.*"))  # no temporary left


def test_two_converts_to_one_store_never_lose_one_silently(work):
    first = _start(work, "convert", "big.svm", "out.zarr", "--block-rows", "200")
    rc, err = _hold_and_write(work, first, lambda: [c for d in work.glob(".out.zarr.partial-*")
                                                   for c in d.glob("X/*/c/*")], "a chunk",
                              "generate", "obpm", "out.zarr", "--n-samples", "50")
    line = _one_line(rc, err, "convert")
    assert "out.zarr appeared while writing" in line, line
    assert main(["info", str(work / "out.zarr"), "--json"]) == 0
    assert not list(work.glob(".out.zarr.*"))


# --------------------------------------------------------------------------- 7. a full disk


@pytest.mark.parametrize("argv, out", [
    (["train", "g.zarr", "--model", "perceptron", "--epochs", "1", "--save", "m2.npz"], "m2.npz"),
    (["predict", "m.npz", "many.zarr", "--out", "p.npy"], "p.npy"),
    (["predict", "m.npz", "many.zarr", "--decision", "--out", "p.csv"], "p.csv"),
    (["predict", "m.npz", "many.zarr", "--decision", "--out", "p.zarr"], "p.zarr"),
    (["convert", "big.svm", "out.zarr", "--block-rows", "500"], "out.zarr"),
])
def test_a_full_disk_is_one_line_naming_the_output(work, argv, out):
    # was: "error: File too large", naming nothing
    rc, _, err = _run(work, *argv)  # once in full: the kernels compiled and cached (the cache is a write too)
    assert rc == 0, err
    for p in work.glob(out):
        os.unlink(p) if p.is_file() else __import__("shutil").rmtree(p)
    before = _names(work)
    rc, _, err = _run(work, *argv, preexec=_full_disk(200))
    assert _one_line(rc, err, argv[0]) == f"cannot write {out}: File too large"
    assert _names(work) == before  # no partial output, under its name or a temporary's


# --------------------------------------------------------------------------- 4. train killed, resumed


def _cut_reached(ck: Path, epoch: int, segment: int):
    def reached() -> bool:
        try:
            at = json.loads((ck / "latest.json").read_text())  # replaced atomically: whole or absent
        except (OSError, ValueError):
            return False
        return (at["epoch"], at["segment"]) >= (epoch, segment)
    return reached


@pytest.fixture(scope="module")
def uninterrupted(data) -> Path:
    """The model of an uninterrupted checkpointed OBPM run on g.zarr (24 cuts: 2 epochs x 12 blocks)."""
    rc, _, err = _run(data, "train", "g.zarr", *OBPM, "--checkpoint", "ck-full", "--checkpoint-every", "1",
                      "--save", "full.npz")
    assert rc == 0, err
    return data / "full.npz"


@pytest.mark.slow  # ~11 s a case: 2 x 12 checkpointed cuts, 5 processes
@pytest.mark.parametrize("epoch, segment", [(0, 1), (1, 4)])
def test_a_killed_train_resumes_to_the_same_model_bit_for_bit(work, uninterrupted, epoch, segment):
    argv = ("train", "g.zarr", *OBPM, "--checkpoint", "ck", "--checkpoint-every", "1", "--save", "r.npz")
    proc = _start(work, *argv)
    _poll(proc, _cut_reached(work / "ck", epoch, segment), f"cut e{epoch}-s{segment}")
    _kill(proc)
    assert not (work / "r.npz").exists()
    # a resume with another seed, other data or another parameter is refused in one line
    for other, field in ((["--seed", "7"], "seed"), (["--param", "n_estimators=6"], "n_learners")):
        line = _one_line(*_run(work, *argv, *other, "--resume")[::2], "train")
        assert line.startswith(f"checkpoint {work / 'ck'} belongs to a different job (") and field in line, line
        assert line.endswith("; use another checkpoint path, or start over without --resume (resume=False)")
    line = _one_line(*_run(work, "train", "g-test.zarr", *argv[2:], "--resume")[::2], "train")
    assert line.startswith(f"checkpoint {work / 'ck'} belongs to a different job (") and "g-test.zarr" in line, line
    rc, out, err = _run(work, *argv, "--resume")
    assert rc == 0, err
    _same_model(work / "r.npz", uninterrupted)


# --------------------------------------------------------------------------- 6. the input changes


REPLACED = "the store was replaced while it was being read"  # the check that sees it first says it


@pytest.mark.parametrize("change, said", [
    ("delete", ("no such store", REPLACED)),
    ("regenerate", ("the store changed after the job was planned", REPLACED)),
])
def test_a_store_changed_under_a_train_is_one_line_naming_it(work, change, said):
    shutil.copytree(work / "g.zarr", work / "c.zarr")
    first = _start(work, "train", "c.zarr", *OBPM, "--checkpoint", "ck", "--checkpoint-every", "1", "--save", "r.npz")
    _poll(first, _cut_reached(work / "ck", 0, 1), "a checkpoint")
    os.kill(first.pid, signal.SIGSTOP)
    try:
        if change == "delete":
            shutil.rmtree(work / "c.zarr")
        else:  # the same shape, other rows
            assert main(["generate", "obpm", str(work / "c.zarr"), "--n-samples", "600", "--block-rows", "50",
                         "--seed", "5", "--overwrite"]) == 0
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=DEADLINE)
    line = _one_line(first.returncode, err, "train")
    assert any(line.startswith(f"{work / 'c.zarr'}: {s}") for s in said), line
    assert not (work / "r.npz").exists()


# --------------------------------------------------------------------------- 5. experiment killed, tampered


EXPERIMENT = ("experiment", "obpm-figure1", "--quick", "--repeats", "8", "--no-figures", "--out")


def _results(out: Path) -> dict:
    """The experiment's JSON without what differs between runs of the same cells (times, counts, paths)."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()
                    if "seconds" not in k and k not in ("cells_run", "cells_resumed", "files")}
        return [strip(x) for x in v] if isinstance(v, list) else v
    return strip(json.loads((out / "obpm-figure1" / "obpm-figure1.json").read_text()))


@pytest.fixture(scope="module")
def experiment_whole(data) -> dict:
    rc, _, err = _run(data, *EXPERIMENT, "ex-whole")
    assert rc == 0, err
    return _results(data / "ex-whole")


def test_a_killed_experiment_resumes_to_the_same_results(work, experiment_whole):
    cells = work / "ex" / "obpm-figure1" / "cells"
    proc = _start(work, *EXPERIMENT, "ex")
    _poll(proc, lambda: list(cells.glob("run*.json")), "a cell")
    _kill(proc)
    done = len(list(cells.glob("run*.json")))
    assert 1 <= done < 8 and not (work / "ex" / "obpm-figure1" / "obpm-figure1.json").exists()
    rc, _, err = _run(work, *EXPERIMENT, "ex")
    assert rc == 0, err
    assert f"obpm-figure1: 8 cells, {done} already done, {8 - done} to run" in err
    assert _results(work / "ex") == experiment_whole


@pytest.mark.parametrize("tamper", ["truncate", "empty object", "delete"])
def test_a_tampered_cell_is_refused_naming_it_or_run_again(work, experiment_whole, tamper):
    rc, _, err = _run(work, *EXPERIMENT, "ex")
    assert rc == 0, err
    cell = work / "ex" / "obpm-figure1" / "cells" / "run3.json"
    if tamper == "delete":  # a missing cell is simply run again
        cell.unlink()
        rc, _, err = _run(work, *EXPERIMENT, "ex")
        assert rc == 0 and "obpm-figure1: 8 cells, 7 already done, 1 to run" in err, err
        assert _results(work / "ex") == experiment_whole
        return
    # was: "Unterminated string starting at: line 3 column 3 (char 23)" naming nothing, and for {} a
    # KeyError traceback from the report
    cell.write_text(cell.read_text()[:30] if tamper == "truncate" else "{}")
    line = _one_line(*_run(work, *EXPERIMENT, "ex")[::2], "experiment")
    assert line.startswith(f"ex/obpm-figure1/cells/run3.json: not the cell this experiment wrote (changed or "
                           "truncated since"), line
    assert line.endswith("); delete it to run the cell again, or pass --overwrite to start over"), line
