"""Damaged checkpoints: every cut is verified against its record before a resume uses it.

A cut with a missing file, changed bytes or a different shape is refused; the job resumes from the
previous complete cut (one line on stderr says which cut was damaged and which is used) and ends
with the weights of an uninterrupted run, or stops in one line when no cut is intact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distlearn import OBPM
from distlearn.cli import main
from distlearn.data.store import create_dataset
from distlearn.data.synthetic import make_obpm_artificial
from distlearn.distributed import checkpoint as ckpt

N_BLOCKS = 12  # 6 segments of 2 blocks per epoch


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = make_obpm_artificial(600, 10, n_features=12, label_noise=0.05, random_state=7)
    p = tmp_path_factory.mktemp("ck") / "train.zarr"
    assert create_dataset(p, d.X_train, d.y_train, block_rows=50).n_blocks == N_BLOCKS
    return str(p)


def _obpm(**kw):
    base = dict(n_estimators=8, tau=0.4, epochs=2, random_state=5, scheduler="in-process", learner_groups=2,
                checkpoint_every=2, keep_members=True)
    base.update(kw)
    return OBPM(**base)


@pytest.fixture(scope="module")
def reference(store):
    return _obpm().fit(store)


def _first_epoch(store, ck):
    _obpm(epochs=1, checkpoint=ck).fit(store)
    cuts = sorted(d.name for d in ck.iterdir() if d.is_dir())
    assert cuts == ["e0000-s00004", "e0000-s00005"]  # the newest cut and the previous complete one
    assert ckpt.check_cut(ck, "e0000-s00005", 2) is None and ckpt.check_cut(ck, "e0000-s00004", 2) is None
    return ck / "e0000-s00005", ck / "e0000-s00004"


def _chunk(cut: Path, g: int = 1, array: str = "W") -> Path:
    files = sorted(f for f in (cut / f"g{g:04d}" / array / "c").rglob("*") if f.is_file())
    assert files, f"no chunk file under {cut}"
    return files[0]


def _flip(f: Path, at: int | None = None) -> None:
    b = bytearray(f.read_bytes())
    b[len(b) // 2 if at is None else at] ^= 0x5A
    f.write_bytes(bytes(b))


def _delete_chunk(cut):
    _chunk(cut).unlink()


def _flip_byte(cut):
    _flip(_chunk(cut, 0, "accP"))


def _reshape(cut):  # the array's metadata says another shape (its chunks unchanged)
    meta_file = cut / "g0000" / "W" / "zarr.json"
    meta = json.loads(meta_file.read_text())
    meta["shape"] = [meta["shape"][0] - 1, *meta["shape"][1:]]
    meta_file.write_text(json.dumps(meta))


def _drop_record(cut):
    (cut / "cut.json").unlink()


def _drop_part(cut):
    import shutil

    shutil.rmtree(cut / "g0001")


def _counters(cut):  # one digit of a counter changed: still valid JSON
    f = cut / "cut.json"
    rec = json.loads(f.read_text())
    rec["counters"]["epoch_rows"][0] += 1
    f.write_text(json.dumps(rec))


@pytest.mark.parametrize("damage", [_delete_chunk, _flip_byte, _reshape, _drop_record, _drop_part, _counters])
def test_damaged_latest_cut_falls_back_to_the_previous(store, reference, tmp_path, capsys, damage):
    newest, previous = _first_epoch(store, tmp_path / "ck.zarr")
    capsys.readouterr()
    damage(newest)
    assert ckpt.check_cut(tmp_path / "ck.zarr", newest.name, 2) is not None
    resumed = _obpm(checkpoint=tmp_path / "ck.zarr", resume=True).fit(store)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "e0000-s00005" in err[0] and "damaged" in err[0] and "resuming from cut e0000-s00004" in err[0]
    assert resumed.job_["resumed_from"] == (0, 4)
    np.testing.assert_array_equal(resumed.members_, reference.members_)  # bit-identical to an uninterrupted run
    np.testing.assert_array_equal(resumed.coef_, reference.coef_)
    assert resumed.job_["group_blocks"] == (N_BLOCKS + 2) * 2  # the last segment of epoch 0 again, then epoch 1
    # the damaged cut was replaced by the resumed run's intact one
    assert ckpt.check_cut(tmp_path / "ck.zarr", "e0001-s00005", 2) is None


def test_intact_checkpoint_resumes_silently(store, reference, tmp_path, capsys):
    _first_epoch(store, tmp_path / "ck.zarr")
    capsys.readouterr()
    resumed = _obpm(checkpoint=tmp_path / "ck.zarr", resume=True).fit(store)
    assert capsys.readouterr().err == ""
    assert resumed.job_["resumed_from"] == (0, 5)
    np.testing.assert_array_equal(resumed.members_, reference.members_)


def test_damaged_pointer_uses_the_newest_intact_record(store, reference, tmp_path, capsys):
    ck = tmp_path / "ck.zarr"
    _first_epoch(store, ck)
    (ck / "latest.json").write_text('{"epoch": 0, "segm')
    capsys.readouterr()
    resumed = _obpm(checkpoint=ck, resume=True).fit(store)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "latest.json is damaged" in err[0] and "e0000-s00005" in err[0]
    assert resumed.job_["resumed_from"] == (0, 5)
    np.testing.assert_array_equal(resumed.members_, reference.members_)


def test_no_intact_cut_is_one_line_through_the_cli(store, tmp_path, capsys):
    ck = tmp_path / "ck.zarr"
    argv = ["train", store, "--model", "obpm", "--param", "n_estimators=8", "--param", "tau=0.4", "--seed", "5",
            "--checkpoint", str(ck), "--checkpoint-every", "2", "--param", "learner_groups=2", "--param", "keep_members=true", "--epochs", "1"]
    assert main(argv) == 0
    newest, previous = sorted(d for d in ck.iterdir() if d.is_dir())[::-1]
    _delete_chunk(newest)
    _flip(_chunk(previous, 0))
    capsys.readouterr()
    assert main([*argv[:-1], "2", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "no intact cut" in err and "start over without --resume" in err
    assert newest.name in err and previous.name in err
    # and starting over (no --resume) works on the same path
    assert main(argv) == 0
    assert ckpt.check_cut(ck, newest.name, 2) is None


def test_cli_resume_from_a_damaged_cut_says_which(store, tmp_path, capsys):
    ck = tmp_path / "ck.zarr"
    argv = ["train", store, "--model", "obpm", "--param", "n_estimators=8", "--param", "tau=0.4", "--seed", "5",
            "--checkpoint", str(ck), "--checkpoint-every", "2", "--param", "learner_groups=2", "--param", "keep_members=true"]
    assert main([*argv, "--epochs", "1"]) == 0
    newest = ck / "e0000-s00005"
    _flip(_chunk(newest, 1), at=0)
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--resume", "--json"]) == 0
    out = capsys.readouterr()
    notes = [line for line in out.err.splitlines() if "damaged" in line]
    assert len(notes) == 1 and "e0000-s00005" in notes[0] and "e0000-s00004" in notes[0]
    assert json.loads(out.out)["job"]["resumed_from"] == [0, 4]


def test_read_part_checks_the_part_where_it_is_read(store, tmp_path):
    ck = tmp_path / "ck.zarr"
    newest, previous = _first_epoch(store, ck)
    state = ckpt.read_part(ck, 0, 5, 1)
    assert state.W.shape[0] == 12 + 1 or state.W.shape[0] == 12
    _flip(_chunk(newest, 1))
    with pytest.raises(ckpt.CheckpointError, match="e0000-s00005.*g0001/W/c/.*has changed"):
        ckpt.read_part(ck, 0, 5, 1)
    with pytest.raises(ckpt.CheckpointError, match="not in the record of a complete cut"):
        ckpt.read_part(ck, 0, 3, 0)  # an older cut, deleted when s00005 completed


def test_mark_complete_refuses_a_missing_part(store, tmp_path):
    """A part the driver cannot see (workers writing to storage the client does not share) is an error."""
    ck = tmp_path / "ck.zarr"
    newest, _ = _first_epoch(store, ck)
    state = ckpt.read_part(ck, 0, 5, 0)
    ckpt.write_part(ck, 1, 0, 0, state)  # group 1's part of cut e0001-s00000 never arrives
    with pytest.raises(ckpt.CheckpointError, match=r"e0001-s00000: parts \['g0000'\] where the job writes 2"):
        ckpt.mark_complete(ck, 1, 0, {})
    assert ckpt.latest(ck)["segment"] == 5


def test_parts_of_a_cut_never_completed_are_not_reused(store, tmp_path):
    """A crash inside the first segment leaves parts but no record: resume starts from scratch and removes
    them (else write_part would keep a leftover part as a retried task's first copy and record it)."""
    import shutil

    ck = tmp_path / "ck.zarr"
    _first_epoch(store, ck)
    stale = ckpt.read_part(ck, 0, 4, 0)  # some other state, left where the first cut will be written
    for d in ck.iterdir():
        if d.is_dir():
            shutil.rmtree(d)
    (ck / "latest.json").unlink()
    ckpt.write_part(ck, 0, 0, 0, stale)
    assert (ck / "e0000-s00000" / "g0000").is_dir()
    assert ckpt.prepare(ck, ckpt._fingerprint(ck), resume=True) is None
    assert not (ck / "e0000-s00000").exists()


def test_damaged_root_metadata_is_one_line(store, tmp_path, capsys):
    import zarr

    ck = tmp_path / "ck.zarr"
    _first_epoch(store, ck)
    g = zarr.open_group(str(ck), mode="r+")
    attrs = dict(g.attrs)
    for key, meta in attrs.items():  # the fingerprint key renamed, as a flipped bit in zarr.json does
        if isinstance(meta, dict) and "fingerprint" in meta:
            g.attrs[key] = {**{k: v for k, v in meta.items() if k != "fingerprint"}, "fingerprinu": meta["fingerprint"]}
    with pytest.raises(ckpt.CheckpointError, match="metadata is damaged.*start over without --resume"):
        _obpm(epochs=2, checkpoint=ck, resume=True).fit(store)


def test_dropping_a_cut_still_being_written_retries_then_names_it(tmp_path, monkeypatch):
    """Tasks of a killed client's run may still write into a cut that a resume removes: the removal is
    retried (here it fails twice with "Directory not empty", then succeeds), and a cut still written into
    after ``DROP_SECONDS`` is one CheckpointError naming it."""
    import errno

    real = ckpt.rmtree
    fails = {"n": 2}

    def busy(d):  # noqa: ANN001
        if fails["n"] > 0:
            fails["n"] -= 1
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(d))
        real(d)

    for name in ("e0000-s00001", "e0000-s00002", "e0000-s00003"):
        (tmp_path / name / ".g0001.tmp-x").mkdir(parents=True)
    monkeypatch.setattr(ckpt, "rmtree", busy)
    ckpt._drop_cuts_after(tmp_path, "e0000-s00001")
    assert sorted(d.name for d in tmp_path.iterdir()) == ["e0000-s00001"] and fails["n"] == 0
    (tmp_path / "e0000-s00002").mkdir()
    fails["n"] = 10**9
    monkeypatch.setattr(ckpt, "DROP_SECONDS", 0.2)
    with pytest.raises(ckpt.CheckpointError, match=r"cannot remove cut e0000-s00002.*still writing") as e:
        ckpt._drop_cuts_after(tmp_path, "e0000-s00001")
    assert "\n" not in str(e.value)
