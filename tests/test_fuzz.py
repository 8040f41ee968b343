"""Fuzzing the inputs a user or an attacker can hand distlearn: stores, model files, checkpoints, text.

Every damaged input must end in one of two ways, and nothing else:

* a **one-line error** (exit 2 from the ``distlearn`` command, one line on stderr, no traceback), or
* a **result equal to the undamaged run** (the same saved model bit for bit, the same predictions,
  the same evaluation).

A crash, a hang (pytest-timeout), a traceback or a silent difference fails the test.  Stores are
also held to a stronger law: when ``distlearn info --validate`` accepts a damaged store, every
command on it must give the undamaged result (the validator misses nothing a reader would trip on).

Mutations (hypothesis chooses the file, the kind and the place):

* stores: harmless changes (a stray file, another creation time) that must give the same result;
  delete a file, truncate it, flip a bit, overwrite it with garbage, in any array's chunk
  or metadata file; write an out-of-range, negative or unsorted feature index, a decreasing row
  pointer, a non-finite value, or a huge declared shape through zarr itself (valid chunks,
  invalid content);
* model files: bit flips, truncation, a member replaced by another shape;
* checkpoints: delete, truncate or flip a file of the latest cut, then ``--resume``;
* svmlight text: bit flips, truncation, inserted and deleted bytes; an accepted file must convert to
  exactly what scikit-learn's parser reads from the same bytes.

The default suite runs a bounded number of examples per class (``FUZZ_EXAMPLES``, 25); the long run
is ``python3 run.py test -m slow tests/test_fuzz.py`` (2,000 per class); the README's reliability
section records what it covered.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from distlearn.cli import main

FUZZ_EXAMPLES = int(os.environ.get("DISTLEARN_FUZZ_EXAMPLES", "25"))
SLOW_EXAMPLES = 2000
N_ROWS, N_FEATURES = 240, 40


def _settings(n: int):  # noqa: D103
    return settings(max_examples=n, deadline=None, derandomize=n == FUZZ_EXAMPLES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def run(*argv: str) -> tuple[int, str, str]:
    """``distlearn ARGV`` in this process: (exit status, stdout, stderr); any exception escapes."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def one_line(rc: int, err: str, what: str) -> None:
    assert rc == 2, f"{what}: exit {rc}, stderr {err!r}"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, f"{what}: not one line:\n{err}"
    assert lines[0].startswith("distlearn "), f"{what}: {lines[0]!r}"


def npz_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files if k != "meta"}


def same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k], equal_nan=True)
        for k in a)


# --------------------------------------------------------------------------- the undamaged world


def _data(seed: int = 0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(N_ROWS, N_FEATURES, density=0.2, random_state=seed, format="csr", dtype=np.float64)
    X.data = rng.standard_normal(X.nnz)
    w = rng.standard_normal(N_FEATURES)
    y = np.where(X @ w > 0, 1, -1)
    return X, y


class World:
    """The undamaged stores, model, checkpoint and text, and every command's result on them."""

    def __init__(self, root: Path) -> None:
        from sklearn.datasets import dump_svmlight_file

        from distlearn.data import create_dataset

        self.root = root
        X, y = _data()
        self.csr = create_dataset(root / "csr.zarr", X, y, block_rows=48, nnz_chunk=400).path
        self.dense = create_dataset(root / "dense.zarr", X.toarray(), y, block_rows=48).path
        self.test = create_dataset(root / "test.zarr", X[:100], y[:100], block_rows=48).path
        self.svm = root / "data.svm"
        dump_svmlight_file(X, y, str(self.svm), zero_based=False)
        self.results: dict[str, dict[str, object]] = {}
        for name in ("csr", "dense"):
            self.results[name] = self.commands(root / f"{name}.zarr", root / f"base-{name}")
        self.model = root / "base-csr" / "m.npz"
        rc, out, err = run("predict", self.model, self.test, "--out", root / "base-pred.npy")
        assert rc == 0, err
        self.pred = np.load(root / "base-pred.npy")
        self.ckpt_model = root / "ck-model.npz"
        self.ckpt = root / "ck.zarr"
        rc, _, err = run("train", self.csr, "--model", "obpm", "--param", "n_estimators=6", "--param", "tau=0.5", "--param", "epochs=2",
                         "--param", "checkpoint_every=1", "--checkpoint", self.ckpt, "--save", self.ckpt_model)
        assert rc == 0, err

    @staticmethod
    def commands(store: Path, out: Path) -> dict[str, object]:
        """What train, predict and evaluate give on ``store`` (files under ``out``)."""
        out.mkdir(parents=True, exist_ok=True)
        got: dict[str, object] = {}
        rc, _, err = run("train", store, "--model", "perceptron", "--param", "epochs=2", "--save", out / "m.npz")
        got["train"] = (rc, err, npz_arrays(out / "m.npz") if rc == 0 else None)
        model = out.parent / "base-csr" / "m.npz"
        if not model.exists():
            model = out / "m.npz"
        rc, _, err = run("predict", model, store, "--out", out / "p.npy")
        got["predict"] = (rc, err, np.load(out / "p.npy") if rc == 0 else None)
        rc, so, err = run("evaluate", model, store, "--json")
        got["evaluate"] = (rc, err, json.loads(so) if rc == 0 else None)
        return got


@pytest.fixture(scope="module")
def world():
    with tempfile.TemporaryDirectory(prefix="distlearn-fuzz-") as d:
        yield World(Path(d))


def _same_result(base: object, got: object) -> bool:
    if isinstance(base, dict) and base and all(isinstance(v, np.ndarray) for v in base.values()):
        return isinstance(got, dict) and same_arrays(base, got)  # type: ignore[arg-type]
    if isinstance(base, np.ndarray):
        return isinstance(got, np.ndarray) and got.shape == base.shape and np.array_equal(got, base)
    if isinstance(base, dict):  # evaluate's JSON: the numbers, not the file names
        drop = {"model", "store", "path", "data", "time_s", "seconds"}
        return {k: v for k, v in base.items() if k not in drop} == \
            {k: v for k, v in got.items() if k not in drop}  # type: ignore[union-attr]
    return base == got


# --------------------------------------------------------------------------- mutations

BYTE_KINDS = ("delete", "truncate", "flip", "garbage")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def mutate_bytes(path: Path, kind: str, where: float, bit: int, garbage: bytes) -> str:
    """Damage one file in place; returns a label for hypothesis' statistics."""
    if kind == "delete":
        path.unlink()
        return "delete"
    data = bytearray(path.read_bytes())
    pos = min(int(where * len(data)), max(len(data) - 1, 0))
    if kind == "truncate":
        path.write_bytes(bytes(data[:pos]))
    elif kind == "flip" and data:
        data[pos] ^= 1 << bit
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(bytes(data[:pos]) + garbage + bytes(data[pos + len(garbage):]))
    return kind


SEMANTIC = ("index_high", "index_negative", "index_unsorted", "indptr_down", "value_nan", "value_inf",
            "label_nan", "huge_shape", "nnz_lie", "stray_file", "touch_created")


def mutate_semantic(store: Path, kind: str, where: float) -> str:
    """Write invalid *content* through zarr (valid chunks, checksums and all)."""
    import zarr

    if kind == "stray_file":  # harmless: what a file manager or a sync tool leaves in a directory
        (store / "X" / ".DS_Store").write_bytes(b"\x00\x01junk")
        return kind
    g = zarr.open_group(str(store), mode="r+")
    csr = "indices" in (g["X"] if isinstance(g["X"], zarr.Group) else {})
    if kind.startswith("index_") or kind == "indptr_down":
        if not csr:
            kind = "value_nan"
        else:
            idx = g["X"]["indices"]
            k = min(int(where * idx.shape[0]), idx.shape[0] - 2)
            if kind == "index_high":
                idx[k] = N_FEATURES + 7
            elif kind == "index_negative":
                idx[k] = -3
            elif kind == "index_unsorted":
                a, b = idx[k], idx[k + 1]
                idx[k], idx[k + 1] = b, a
            else:
                ptr = g["X"]["indptr"]
                r = 1 + min(int(where * (ptr.shape[0] - 2)), ptr.shape[0] - 3)
                ptr[r] = int(ptr[r + 1]) + 5
            return kind
    if kind in ("value_nan", "value_inf"):
        arr = g["X"]["data"] if csr else g["X"]
        flat = min(int(where * arr.shape[0]), arr.shape[0] - 1)
        if csr:
            arr[flat] = np.nan if kind == "value_nan" else np.inf
        else:
            arr[flat, int(where * N_FEATURES) % N_FEATURES] = np.nan if kind == "value_nan" else np.inf
        return kind
    if kind == "label_nan":
        y = g["y"]
        y[min(int(where * y.shape[0]), y.shape[0] - 1)] = np.nan
        return kind
    meta = dict(g.attrs["distlearn"])
    if kind == "touch_created":  # harmless: another creation time
        meta["created"] = "2001-01-01T00:00:00+00:00"
    elif kind == "huge_shape":
        meta["n_samples" if where < 0.5 else "n_features"] = 2**40
    else:  # nnz_lie
        meta["nnz"] = int(meta["nnz"]) + 1 + int(where * 10)
    g.attrs["distlearn"] = meta
    return kind


store_mutation = st.one_of(
    st.tuples(st.just("bytes"), st.sampled_from(BYTE_KINDS), st.floats(0, 1), st.integers(0, 7),
              st.binary(min_size=1, max_size=16), st.integers(0, 10**6)),
    st.tuples(st.just("semantic"), st.sampled_from(SEMANTIC), st.floats(0, 1), st.just(0), st.just(b""),
              st.just(0)),
)


def _check_store(world: World, layout: str, mutation: tuple) -> None:
    how, kind, where, bit, garbage, pick = mutation
    with tempfile.TemporaryDirectory(dir=world.root) as d:
        store = Path(d) / f"{layout}.zarr"
        shutil.copytree(world.root / f"{layout}.zarr", store)
        if how == "bytes":
            files = _files(store)
            target = files[pick % len(files)]
            label = f"{target.relative_to(store).parts[0]}/{target.name}: {mutate_bytes(target, kind, where, bit, garbage)}"
        else:
            label = mutate_semantic(store, kind, where)
        event(f"{layout} {how} {kind if how == 'bytes' else label}")
        rc, _, err = run("info", store, "--validate")
        valid = rc == 0
        if not valid:
            one_line(rc, err, f"info --validate after {label}")
        base = world.results[layout]
        got = World.commands(store, Path(d) / "out")
        for cmd, (rc_c, err_c, value) in got.items():
            if rc_c == 0:
                assert _same_result(base[cmd][2], value), f"{cmd} after {label}: a silent difference"
            else:
                one_line(rc_c, err_c, f"{cmd} after {label}")
                assert not valid, f"info --validate passed after {label}, but {cmd} failed: {err_c!r}"
        event("validate refused" if not valid else "validate passed, results equal")




# --------------------------------------------------------------------------- model files

model_mutation = st.tuples(st.sampled_from(("truncate", "flip", "garbage", "reshape")), st.floats(0, 1),
                           st.integers(0, 7), st.binary(min_size=1, max_size=16))


def _check_model(world: World, mutation: tuple) -> None:
    kind, where, bit, garbage = mutation
    with tempfile.TemporaryDirectory(dir=world.root) as d:
        m = Path(d) / "m.npz"
        if kind == "reshape":  # a well-formed zip whose arrays disagree with each other or the metadata
            with np.load(world.model, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            name = sorted(k for k in arrays if k != "meta")[int(where * 10) % (len(arrays) - 1)]
            a = arrays[name]
            arrays[name] = np.zeros((a.shape[0] + 1,) + a.shape[1:], a.dtype) if a.ndim else np.zeros(3, a.dtype)
            np.savez(m, **arrays)
        else:
            shutil.copy(world.model, m)
            mutate_bytes(m, kind, where, bit, garbage)
        event(f"model {kind}")
        rc, _, err = run("predict", m, world.test, "--out", Path(d) / "p.npy")
        if rc == 0:
            assert np.array_equal(np.load(Path(d) / "p.npy"), world.pred), f"model {kind}: a silent difference"
            event("the same predictions")
        else:
            one_line(rc, err, f"predict with a model after {kind}")
            event("refused in one line")




# --------------------------------------------------------------------------- checkpoints

ckpt_mutation = st.tuples(st.sampled_from(BYTE_KINDS), st.floats(0, 1), st.integers(0, 7),
                          st.binary(min_size=1, max_size=16), st.integers(0, 10**6))


def _check_checkpoint(world: World, mutation: tuple) -> None:
    kind, where, bit, garbage, pick = mutation
    with tempfile.TemporaryDirectory(dir=world.root) as d:
        ck = Path(d) / "ck.zarr"
        shutil.copytree(world.ckpt, ck)
        files = _files(ck)
        target = files[pick % len(files)]
        mutate_bytes(target, kind, where, bit, garbage)
        event(f"checkpoint {kind}")
        m = Path(d) / "m.npz"
        rc, _, err = run("train", world.csr, "--model", "obpm", "--param", "n_estimators=6", "--param", "tau=0.5", "--param", "epochs=2",
                         "--param", "checkpoint_every=1", "--checkpoint", ck, "--resume", "--save", m)
        if rc == 0:
            assert same_arrays(npz_arrays(m), npz_arrays(world.ckpt_model)), \
                f"resume after {kind} of {target.relative_to(ck)}: a silent difference"
            event("resumed (or fell back), the same model")
        else:
            one_line(rc, err, f"resume after {kind} of {target.relative_to(ck)}")
            event("refused in one line")




# --------------------------------------------------------------------------- svmlight text

text_mutation = st.tuples(st.sampled_from(("truncate", "flip", "garbage", "insert", "drop")), st.floats(0, 1),
                          st.integers(0, 7),
                          st.one_of(st.binary(min_size=1, max_size=12),
                                    st.sampled_from([b":", b" ", b"\n", b"-", b"e999", b"99999999999999999999",
                                                     b"2147483648:1", b"0:1", b"nan", b"#", b"\x00", b"1:1 1:2"])))


def _check_text(world: World, mutation: tuple) -> None:
    from sklearn.datasets import load_svmlight_file

    kind, where, bit, chunk = mutation
    with tempfile.TemporaryDirectory(dir=world.root) as d:
        f = Path(d) / "data.svm"
        data = world.svm.read_bytes()
        pos = int(where * len(data))
        if kind == "insert":
            f.write_bytes(data[:pos] + chunk + data[pos:])
        elif kind == "drop":
            f.write_bytes(data[:pos] + data[pos + len(chunk):])
        else:
            shutil.copy(world.svm, f)
            mutate_bytes(f, kind, where, bit, chunk)
        event(f"text {kind}")
        rc, _, err = run("convert", f, Path(d) / "s.zarr", "--dtype", "float64", "--no-progress")
        if rc != 0:
            one_line(rc, err, f"convert after {kind}")
            return
        from distlearn.data import open_dataset

        X, y = open_dataset(Path(d) / "s.zarr", validate="full").to_scipy()
        try:
            Xr, yr = load_svmlight_file(str(f), zero_based=False, dtype=np.float64)
        except Exception:  # noqa: BLE001 - the peer refuses bytes we accept: nothing to compare with
            event("accepted; scikit-learn refuses")
            return
        Xr.sum_duplicates()
        assert np.array_equal(y, yr), f"convert after {kind}: labels differ from scikit-learn's"
        assert X.shape[0] == Xr.shape[0] and (X[:, :Xr.shape[1]] != Xr[:, :X.shape[1]]).nnz == 0, \
            f"convert after {kind}: values differ from scikit-learn's"




# --------------------------------------------------------------------------- the tests: a bounded run, and a long one


def _tests(check, strategy, layouts: bool = False):
    """The default-suite test (FUZZ_EXAMPLES cases) and the long run (marked slow) of one mutation class."""
    if layouts:
        def bounded(world, layout, mutation):
            check(world, layout, mutation)

        def long_run(world, layout, mutation):
            check(world, layout, mutation)
    else:
        def bounded(world, mutation):
            check(world, mutation)

        def long_run(world, mutation):
            check(world, mutation)

    made = []
    for fn, n, slow in ((bounded, FUZZ_EXAMPLES, False), (long_run, SLOW_EXAMPLES, True)):
        t = given(mutation=strategy)(_settings(n)(fn))
        if layouts:
            t = pytest.mark.parametrize("layout", ["csr", "dense"])(t)
        made.append(pytest.mark.timeout(4 * 3600)(pytest.mark.slow(t)) if slow else t)  # 2,000 cases: not 600 s
    return made


test_damaged_store_is_one_line_or_the_same_result, test_damaged_store_long_run = _tests(
    _check_store, store_mutation, layouts=True)
test_damaged_model_is_one_line_or_the_same_predictions, test_damaged_model_long_run = _tests(
    _check_model, model_mutation)
test_damaged_checkpoint_is_one_line_or_the_same_model, test_damaged_checkpoint_long_run = _tests(
    _check_checkpoint, ckpt_mutation)
test_damaged_text_is_one_line_or_what_the_peer_reads, test_damaged_text_long_run = _tests(
    _check_text, text_mutation)
