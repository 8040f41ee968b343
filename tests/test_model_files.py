"""Model files that are damaged, truncated, inconsistent or inflated: one line, exit 2, nothing inflated.

Real model files are written with ``save_model``, then damaged on disk; ``distlearn predict`` and
``distlearn evaluate`` must answer each with one ``error:`` line naming the file (and the member),
or, where the damage touched nothing that is read, with the undamaged result.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

import distlearn.model as model_module
from distlearn import OBPM, KernelPerceptron, Perceptron
from distlearn.cli import main
from distlearn.data.store import create_dataset
from distlearn.model import load_model, save_model
from distlearn.training import evaluate


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    X, y = load_digits(return_X_y=True)
    X = X[:400] / 16.0
    yb = np.where(y[:400] > 4, 1, -1)
    create_dataset(d / "test.zarr", X[300:], yb[300:], block_rows=50)
    create_dataset(d / "test10.zarr", X[300:], y[300:400], block_rows=50)
    saved = {
        "linear": save_model(Perceptron(random_state=0).fit(X[:300], yb[:300]), d / "linear.npz"),
        "multi": save_model(Perceptron(random_state=0).fit(X[:300], y[:300]), d / "multi.npz"),
        "vote": save_model(Perceptron(conversion="vote", random_state=0).fit(X[:300], yb[:300]), d / "vote.npz"),
        "kernel": save_model(KernelPerceptron(gamma=0.05, budget=30, conversion="vote", random_state=0)
                             .fit(X[:300], yb[:300]), d / "kernel.npz"),
        "members": save_model(OBPM(n_estimators=4, tau=0.5, epochs=1, random_state=0, keep_members=True).fit(X[:300], yb[:300]),
                              d / "members.npz", members=True),
    }
    return d, saved, X[300:]


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _meta(arrays: dict[str, np.ndarray]) -> dict:
    return json.loads(str(arrays["meta"]))


def _with_meta(arrays, **changes):
    meta = {**_meta(arrays), **changes}
    return {**arrays, "meta": np.array(json.dumps(meta))}


def _one_line(capsys, *argv) -> str:
    """Run the command: exit 2 and exactly one error line (no traceback); return the line."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"distlearn {argv[0]}: error: ")
    return lines[0]


def test_round_trip_every_kind_and_the_declared_shapes(files):
    d, saved, Xt = files
    for kind, path in saved.items():
        arrays = _arrays(path)
        shapes = _meta(arrays)["shapes"]
        assert shapes == {k: list(v.shape) for k, v in arrays.items() if k != "meta"}, kind
        m = load_model(path)
        assert m.predict(Xt).shape == (len(Xt),)
    assert load_model(saved["members"]).members_.shape == (4, 1, 65)


def test_model_files_of_earlier_versions_still_load(files, tmp_path):
    d, saved, Xt = files
    want = load_model(saved["linear"]).decision_function(Xt)
    arrays = _arrays(saved["linear"])
    meta = _meta(arrays)
    # before the declared shapes ...
    old = {k: v for k, v in meta.items() if k != "shapes"}
    np.savez(tmp_path / "v2.npz", **{**arrays, "meta": np.array(json.dumps(old))})
    # ... and the first model files: no kind, no n_features
    first = {"format": 1, "estimator": "Perceptron", "params": meta["params"], "distlearn_version": "0.1.0"}
    np.savez(tmp_path / "v1.npz", coef=arrays["coef"], intercept=arrays["intercept"], classes=arrays["classes"],
             meta=np.array(json.dumps(first)))
    for name in ("v2.npz", "v1.npz"):
        np.testing.assert_array_equal(load_model(tmp_path / name).decision_function(Xt), want)
    # a kernel vote file without the declared shapes
    k = _arrays(saved["kernel"])
    kmeta = {a: b for a, b in _meta(k).items() if a != "shapes"}
    np.savez(tmp_path / "k2.npz", **{**k, "meta": np.array(json.dumps(kmeta))})
    np.testing.assert_array_equal(load_model(tmp_path / "k2.npz").predict(Xt), load_model(saved["kernel"]).predict(Xt))


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_truncated_files_are_one_line(files, tmp_path, capsys, kind):
    d, saved, _ = files
    raw = saved[kind].read_bytes()
    for cut in (0, 1, 30, len(raw) // 3, len(raw) // 2, len(raw) - 100, len(raw) - 22, len(raw) - 1):
        bad = tmp_path / f"t{cut}.npz"
        bad.write_bytes(raw[:cut])
        line = _one_line(capsys, "predict", str(bad), str(d / "test.zarr"))
        assert f"t{cut}.npz: not a readable distlearn model file (truncated or damaged" in line


@pytest.mark.parametrize("kind", ["linear", "members"])
def test_flipped_bytes_are_one_line_or_harmless(files, tmp_path, capsys, kind):
    """A flip anywhere: one error line, or (a byte nothing reads, e.g. a time stamp) the same labels."""
    d, saved, _ = files
    assert main(["predict", str(saved[kind]), str(d / "test.zarr"), "--json"]) == 0
    want = json.loads(capsys.readouterr().out)["values"]
    raw = saved[kind].read_bytes()
    refused = 0
    for at in range(0, len(raw), max(1, len(raw) // 60)):
        b = bytearray(raw)
        b[at] ^= 0xFF
        bad = tmp_path / "f.npz"
        bad.write_bytes(bytes(b))
        code = main(["predict", str(bad), str(d / "test.zarr"), "--json"])
        out = capsys.readouterr()
        assert "Traceback" not in out.err
        if code == 0:
            assert json.loads(out.out)["values"] == want, f"byte {at}: a silent difference"
        else:
            assert code == 2 and len(out.err.strip().splitlines()) == 1 and "f.npz" in out.err, (at, out.err)
            refused += 1
    assert refused > 40  # most bytes are array data, headers or the zip directory: all checked


def _rewrite(path: Path, out: Path, member: str, data: bytes, *, compress: bool = False) -> None:
    """Copy a model file with one member's bytes replaced (its zip entry rewritten whole)."""
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            blob = data if info.filename == member else zin.read(info)
            zout.writestr(info.filename, blob, compress_type=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def test_inflated_shapes_and_zip_bombs_are_refused_before_inflating(files, tmp_path, capsys):
    d, saved, _ = files
    src = saved["linear"]
    # a header declaring 2**40 features over the real 65 values (the ArrayMemoryError)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (1, 2 ** 40)})
    _rewrite(src, tmp_path / "huge.npz", "coef.npy", head.getvalue() + np.zeros(64).tobytes())
    line = _one_line(capsys, "predict", str(tmp_path / "huge.npz"), str(d / "test.zarr"))
    assert "huge.npz: member coef.npy declares" in line and "(1, 1099511627776)" in line
    # a zip bomb: 16 MB of zeros deflated to a few kB, far beyond what the metadata declares (64 features)
    _rewrite(src, tmp_path / "bomb.npz", "coef.npy", _npy(np.zeros((1, 2 << 20))), compress=True)
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    line = _one_line(capsys, "evaluate", str(tmp_path / "bomb.npz"), str(d / "test.zarr"))
    assert "bomb.npz: inconsistent linear model: member coef.npy has shape (1, 2097152)" in line
    assert "64 features" in line
    # the same bomb with metadata that agrees (n_features and shapes rewritten): consistent, but past the cap
    arrays = _arrays(src)
    meta = _meta(arrays)
    meta.update(n_features=2 << 20, shapes={**meta["shapes"], "coef": [1, 2 << 20]})
    _rewrite(tmp_path / "bomb.npz", tmp_path / "bomb2.npz", "meta.npy", _npy(np.array(json.dumps(meta))),
             compress=True)
    real = model_module.physical_memory
    try:
        model_module.physical_memory = lambda: 8 << 20  # a machine of 8 MB: the 16 MB declared do not fit
        with pytest.raises(ValueError, match=r"bomb2.npz: its arrays declare 16,77\d,\d{3} bytes, more than half"):
            load_model(tmp_path / "bomb2.npz")
    finally:
        model_module.physical_memory = real
    # a member whose zip entry declares more bytes than its header (hidden data behind the array)
    _rewrite(src, tmp_path / "tail.npz", "intercept.npy", _npy(arrays["intercept"]) + bytes(10 << 20), compress=True)
    line = _one_line(capsys, "predict", str(tmp_path / "tail.npz"), str(d / "test.zarr"))
    assert "member intercept.npy declares 10,485,896 bytes but its header says shape (1,) float64 (136 bytes)" in line
    # metadata itself inflated past its cap (a 20 MB JSON text deflated)
    _rewrite(src, tmp_path / "meta.npz", "meta.npy", _npy(np.array(" " * (5 << 20))), compress=True)
    line = _one_line(capsys, "predict", str(tmp_path / "meta.npz"), str(d / "test.zarr"))
    assert "member meta.npy is <U5242880 () of 20,971,520 bytes, not a JSON text of at most" in line


@pytest.mark.parametrize("case", ["linear-rows", "multi-rows", "vote-rows", "kernel-rows", "members-rows",
                                  "features", "declared", "extra", "missing", "objects", "one-class", "not-json"])
def test_inconsistent_files_are_one_line(files, tmp_path, capsys, case):
    d, saved, _ = files
    src = {"linear-rows": "linear", "multi-rows": "multi", "vote-rows": "vote", "kernel-rows": "kernel",
           "members-rows": "members"}.get(case, "linear")
    arrays = _arrays(saved[src])
    if case.endswith("-rows"):  # the classes disagree with the coefficient rows
        arrays["classes"] = np.array([-1, 1, 2]) if src != "multi" else np.arange(9)
        want = "inconsistent"
    elif case == "features":
        arrays = _with_meta(arrays, n_features=63)
        want = "member coef.npy has shape (1, 64), expected (K=1, d=63) for 2 classes and 63 features"
    elif case == "declared":
        arrays = _with_meta(arrays, shapes={**_meta(arrays)["shapes"], "intercept": [2]})
        want = "member intercept.npy has shape (1,), its metadata declares (2,)"
    elif case == "extra":
        arrays["payload"] = np.zeros(3)
        want = "member payload.npy is not part of a linear model"
    elif case == "missing":
        del arrays["intercept"]
        want = "member intercept.npy is missing"
    elif case == "objects":
        np.savez(tmp_path / "bad.npz", **{**arrays, "coef": np.array([None, 1], dtype=object)})
        want = "member coef.npy holds Python objects"
    elif case == "one-class":
        arrays["classes"] = np.array([1])
        want = "classes has shape (1,): a model knows two or more classes"
    else:
        arrays["meta"] = np.array("{not json")
        want = "member meta.npy is not JSON"
    if case != "objects":
        if case in ("extra", "missing") or case.endswith("-rows"):
            arrays = _with_meta(arrays, shapes=None)  # as written before the shapes were declared
        np.savez(tmp_path / "bad.npz", **arrays)
    line = _one_line(capsys, "predict", str(tmp_path / "bad.npz"), str(d / "test.zarr"))
    assert "bad.npz: " in line and want in line, line
    with pytest.raises(ValueError, match="bad.npz"):
        load_model(tmp_path / "bad.npz")


def test_a_directory_or_a_missing_file_is_one_line(files, tmp_path, capsys):
    d, _, _ = files
    (tmp_path / "dir.npz").mkdir()
    assert "dir.npz" in _one_line(capsys, "predict", str(tmp_path / "dir.npz"), str(d / "test.zarr"))
    assert "nope.npz" in _one_line(capsys, "evaluate", str(tmp_path / "nope.npz"), str(d / "test.zarr"))


def test_evaluate_refuses_a_model_of_another_problem(files, tmp_path, capsys):
    d, saved, Xt = files
    arrays = _arrays(saved["linear"])
    np.savez(tmp_path / "other.npz", **{**arrays, "classes": np.array([5, 7])})
    line = _one_line(capsys, "evaluate", str(tmp_path / "other.npz"), str(d / "test.zarr"))
    assert "test.zarr: no test label" in line and "(5, 7)" in line and "another problem" in line
    # some labels unknown (a binary model on the 10 digits): counted as errors, named in one notice
    assert main(["evaluate", str(saved["linear"]), str(d / "test10.zarr"), "--json"]) == 0
    out = capsys.readouterr()
    res = json.loads(out.out)
    notes = out.err.strip().splitlines()
    assert len(notes) == 1 and "labels the model does not know" in notes[0] and "counted as errors" in notes[0]
    assert res["unknown_labels"] and set(res["unknown_labels"]) == set(range(10)) - {1}
    # through the library: the same refusal on arrays
    with pytest.raises(ValueError, match="no test label"):
        evaluate(load_model(tmp_path / "other.npz"), Xt, np.full(len(Xt), 3))


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_evaluate_on_a_damaged_label_chunk_is_one_line(files, tmp_path, capsys, damage):
    import shutil

    d, saved, _ = files
    store = tmp_path / "test.zarr"
    shutil.copytree(d / "test.zarr", store)
    chunk = sorted(f for f in (store / "y").rglob("*") if f.is_file() and f.name != "zarr.json")[1]
    if damage == "flip":
        b = bytearray(chunk.read_bytes())
        b[len(b) // 2] ^= 0xFF
        chunk.write_bytes(bytes(b))
    else:
        chunk.unlink()
    line = _one_line(capsys, "evaluate", str(saved["linear"]), str(store))
    assert "test.zarr" in line and "block 1" in line


def _patch_zip_entries(raw: bytes, *, version: int | None = None, encrypted: bool = False) -> bytes:
    """Every entry's "version needed to extract" (local header offset 4, central directory offset 6) set to
    ``version``, and/or its flag bit 0 (encrypted) set, as a crafted or future zip would have them."""
    import struct

    b = bytearray(raw)
    for sig, ver_at, flag_at in ((b"PK\x03\x04", 4, 6), (b"PK\x01\x02", 6, 8)):
        i = b.find(sig)
        while i >= 0:
            if version is not None:
                b[i + ver_at:i + ver_at + 2] = struct.pack("<H", version)
            if encrypted:
                b[i + flag_at] |= 1
            i = b.find(sig, i + 4)
    return bytes(b)


@pytest.mark.parametrize("patch", [{"version": 64}, {"encrypted": True}], ids=["zip 6.4", "encrypted"])
def test_a_future_or_encrypted_zip_is_one_line_where_it_is_read_and_where_it_is_replaced(files, tmp_path, capsys,
                                                                                         patch):
    """zipfile raises NotImplementedError for a version it does not know (6.4: found by the long fuzz run)
    and RuntimeError for an encrypted member: predict says the file is damaged, and ``train --save`` over it
    does not take it for a model of ours (the output check reads it too), in one line each."""
    d, saved, _ = files
    bad = tmp_path / "bad.npz"
    bad.write_bytes(_patch_zip_entries(saved["linear"].read_bytes(), **patch))
    with pytest.raises((NotImplementedError, RuntimeError)):  # the patch is what zipfile refuses
        with zipfile.ZipFile(bad) as z:
            z.read("meta.npy")
    assert "bad.npz: not a readable distlearn model file" in _one_line(capsys, "predict", str(bad), str(d / "test.zarr"))
    line = _one_line(capsys, "train", str(d / "test.zarr"), "--model", "perceptron", "--save", str(bad), "--overwrite")
    assert "bad.npz" in line and "not a distlearn model file" in line, line
    assert bad.read_bytes() == _patch_zip_entries(saved["linear"].read_bytes(), **patch)  # left as it was
