"""Checkpoints of long jobs in a zarr group.

Layout of a checkpoint directory ``ckpt.zarr``::

    ckpt.zarr/                 zarr group; attrs["distlearn_checkpoint"] = {format, job fingerprint}
      e0001-s00003/g0000/      zarr group: one learner group's state after epoch 1, segment 3,
      e0001-s00003/g0001/      with its manifest.json (sha256 and size of every file of the part,
      ...                      shape and dtype of every array); written by the task that computed
                               it under a temporary name, then renamed: a part is whole or absent
      e0001-s00003/cut.json    the cut's record, written by the driver once every group's part and
                               the segment's progressive-error count are done: {epoch, segment,
                               counters, parts: every part's manifest}
      latest.json              the last *complete* cut: {epoch, segment, counters}, replaced
                               atomically after cut.json

Resuming (:func:`prepare` with ``resume=True``) verifies the newest complete cut against its
record (every file present, of its size and sha256; one part per learner group), and starts each
group's task chain from its part of that cut; :func:`read_part` checks the part again where it is
read (a worker may see other storage).  A damaged cut is refused: the job resumes from the previous
complete cut if that one is intact, saying so in one line on stderr, or stops in one line that says
to start over without ``--resume``.  Parts of later cuts are removed before the resumed run
rewrites them bit for bit.  The two newest complete cuts are kept, older ones are deleted, so a
checkpoint holds about two models' worth of state.

Workers write their parts themselves, so the directory must be on storage
every worker and the client can reach (as the data store already is).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .._outputs import check_output, remove
from .._urls import UrlPath, at, move, rmtree, zarr_store
from .._urls import sha256_file as _sha256
from ..ensembles import EnsembleState

FORMAT = 2  #: 2: parts carry a manifest, cuts a record (cut.json); format 1 cannot be verified
_ATTR = "distlearn_checkpoint"
_FIELDS = ("W", "scale", "sqnorm", "n_updates", "member_rounds", "n_rounds", "accP", "accq")


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed (another job's, damaged, or not a checkpoint)."""


_CUT_NAME = re.compile(r"e\d{4,}-s\d{5,}")


def _group(p: Any, mode: str) -> Any:
    """The zarr group at a local directory or a URL (:class:`~distlearn._urls.UrlPath`)."""
    import zarr

    store = zarr_store(str(p), read_only=mode == "r") if isinstance(p, UrlPath) else str(p)
    return zarr.open_group(store=store, mode=mode)


def _is_cut(d: Path) -> bool:
    """A cut directory of this checkpoint (nothing else in it is ever deleted)."""
    return d.is_dir() and _CUT_NAME.fullmatch(d.name) is not None


def _cut(epoch: int, segment: int) -> str:
    return f"e{int(epoch):04d}-s{int(segment):05d}"


def _is_checkpoint(path: Path) -> bool:
    try:
        meta = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    return _ATTR in meta.get("attributes", {})


def prepare(path: str | os.PathLike[str], fingerprint: dict[str, Any], *, resume: bool) -> dict[str, Any] | None:
    """Open (``resume=True``) or start a checkpoint directory for a job.

    Returns the last complete cut ``{"epoch", "segment", "counters"}`` to
    resume from, or ``None`` to start from scratch.  ``resume=True`` with no
    checkpoint (or none complete yet) starts from scratch too.  A checkpoint
    of a different job is refused with the fields that differ; a directory
    that is not a distlearn checkpoint is never deleted.
    """
    p = at(path)
    if p.exists():
        if not _is_checkpoint(p):
            raise CheckpointError(f"{p} exists and is not a distlearn checkpoint; refusing to overwrite it")
        if resume:
            meta = dict(_group(p, "r").attrs[_ATTR])
            if meta.get("format") != FORMAT:
                raise CheckpointError(f"checkpoint {p} has format {meta.get('format')}, this distlearn writes {FORMAT} "
                                      "(and verifies before resuming); start over without --resume (resume=False)")
            old = meta.get("fingerprint")
            if not isinstance(old, dict):
                raise CheckpointError(f"checkpoint {p}: its metadata is damaged (no job fingerprint); "
                                      "start over without --resume (resume=False)")
            diff = sorted(k for k in set(old) | set(fingerprint) if old.get(k) != _jsonable(fingerprint.get(k)))
            if diff:
                show = "; ".join(f"{k}: checkpoint {old.get(k)!r} vs now {_jsonable(fingerprint.get(k))!r}"
                                 for k in diff[:4])
                raise CheckpointError(f"checkpoint {p} belongs to a different job ({show}); use another "
                                      "checkpoint path, or start over without --resume (resume=False)")
            return resume_point(p, len(fingerprint.get("groups") or []) or None)
        remove(p, "checkpoint")  # checked again: only a distlearn checkpoint is ever deleted
    check_output(p, "checkpoint", overwrite=False)  # not the working, home or root directory; writable
    root = _group(p, "w")
    root.attrs[_ATTR] = {"format": FORMAT, "fingerprint": _jsonable(fingerprint)}
    return None


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def latest(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last complete cut as recorded (not verified: :func:`resume_point` verifies), or ``None``."""
    f = at(path) / "latest.json"
    if not f.exists():
        return None
    try:
        return json.loads(f.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{f}: not valid JSON ({exc}); the checkpoint is damaged") from exc


_MANIFEST = "manifest.json"
_RECORD = "cut.json"


def _write_json(f: Path, obj: Any) -> None:
    if isinstance(f, UrlPath):  # one PUT: the object is whole or absent
        f.write_text(json.dumps(obj))
        return
    tmp = f.with_name(f".{f.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, f)


def _file_digests(part: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of every file of a part (its manifest aside), by path inside the part."""
    return {f.relative_to(part).as_posix(): {"sha256": _sha256(f), "bytes": f.stat().st_size}
            for f in sorted(part.rglob("*")) if f.is_file() and f.name != _MANIFEST}


def _check_part(part: Path, manifest: Any) -> str | None:
    """What is wrong with a part against its manifest (None: every file present, same size and bytes)."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        return f"{part.name}: no manifest"
    for rel, want in files.items():
        f = part / rel
        if not f.is_file():
            return f"{part.name}/{rel} is missing"
        if f.stat().st_size != want.get("bytes") or _sha256(f) != want.get("sha256"):
            return f"{part.name}/{rel} has changed (size or sha256 differs from the manifest)"
    return None


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _record(cut: Path) -> dict[str, Any] | None:
    """A cut's record, if it is JSON and its own sha256 (of everything else in it) still matches."""
    try:
        rec = json.loads((cut / _RECORD).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(rec, dict):
        return None
    check = rec.pop("sha256", None)
    return rec if check == _digest(rec) else None


def check_cut(path: str | os.PathLike[str], name: str, n_groups: int | None = None) -> str | None:
    """Verify cut ``name`` against its record: ``None`` if intact, else what is damaged (one phrase)."""
    cut = at(path) / name
    rec = _record(cut)
    if rec is None:
        return f"{_RECORD} is missing, not valid JSON or changed (its sha256 differs)"
    parts = rec.get("parts")
    if not isinstance(parts, dict) or not parts:
        return f"{_RECORD} lists no parts"
    if n_groups is not None and sorted(parts) != [f"g{g:04d}" for g in range(n_groups)]:
        return f"{_RECORD} lists parts {sorted(parts)}, the job has {n_groups} learner groups"
    if _cut(rec.get("epoch", -1), rec.get("segment", -1)) != name:
        return f"{_RECORD} names another cut"
    try:
        for g, manifest in sorted(parts.items()):
            why = _check_part(cut / g, manifest)
            if why is not None:
                return why
    except (AttributeError, TypeError, ValueError, OSError) as exc:
        return f"{_RECORD} is malformed or a file cannot be read ({exc})"
    return None


def _complete_cuts(p: Path) -> list[str]:
    """The cuts with a record, newest first."""
    return sorted((d.name for d in p.iterdir() if _is_cut(d) and (d / _RECORD).is_file()),
                  reverse=True)


#: Seconds :func:`_drop_cuts_after` keeps trying to remove a cut that something is still writing into.
DROP_SECONDS = 10.0


def _drop_cuts_after(p: Path, name: str) -> None:
    """Remove the cuts after ``name`` (damaged or incomplete): the resumed run writes them again, and a
    part left there would be kept as a retried task's first copy.

    Tasks of the run that wrote them may still be running on the cluster (its client was killed, its
    tasks were not) and write a part while the cut is removed; removal is retried until
    :data:`DROP_SECONDS` have passed, then is one :class:`CheckpointError` naming the cut.  A part such a
    task writes later holds the same bits the resumed run computes (the same cut, the same seeds)."""
    for d in p.iterdir():
        if not (_is_cut(d) and d.name > name):
            continue
        deadline = time.monotonic() + DROP_SECONDS
        while True:
            try:
                rmtree(d)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise CheckpointError(f"checkpoint {p}: cannot remove cut {d.name}, written into while it was "
                                          f"removed for {DROP_SECONDS:g} s ({exc.strerror}): tasks of an earlier "
                                          "run are still writing there; wait for them to end, then resume") from None
                time.sleep(0.05)


def resume_point(path: str | os.PathLike[str], n_groups: int | None = None) -> dict[str, Any] | None:
    """The newest *intact* complete cut ``{"epoch", "segment", "counters"}`` to resume from.

    Each complete cut, newest first, is verified against its record (:func:`check_cut`); a damaged
    one is passed over with one line on stderr naming it and the cut used instead.  Cuts after the
    one chosen (damaged, or incomplete) are removed: the resumed run writes them again.  ``None``
    when nothing was ever completed; :class:`CheckpointError` when no complete cut is intact.
    """
    p = at(path)
    damaged: list[tuple[str, str]] = []
    try:
        pointer = latest(p)
    except CheckpointError:
        pointer = None
        damaged.append(("latest.json", "not valid JSON"))
    cuts = _complete_cuts(p)
    if pointer is None and not cuts and not damaged:
        _drop_cuts_after(p, "")  # parts of a first cut never completed: written again from scratch
        return None
    if isinstance(pointer, dict):
        named = _cut(pointer.get("epoch", -1), pointer.get("segment", -1))
        if named not in cuts:
            damaged.append((f"cut {named}", f"{_RECORD} is missing"))
    for name in cuts:
        why = check_cut(p, name, n_groups)
        if why is None:
            break
        damaged.append((f"cut {name}", why))
    else:
        what = "; ".join(f"{n}: {w}" for n, w in damaged[:3])
        raise CheckpointError(f"checkpoint {p}: no intact cut to resume from ({what}); start over without "
                              "--resume (resume=False)")
    rec = _record(p / name)
    assert rec is not None
    if damaged:
        print(f"distlearn: checkpoint {p}: {damaged[0][0]} is damaged ({damaged[0][1]}); resuming from cut "
              f"{name}, the newest intact complete cut", file=sys.stderr)
    _drop_cuts_after(p, name)
    out = {"epoch": int(rec["epoch"]), "segment": int(rec["segment"]), "counters": rec.get("counters", {})}
    if damaged:
        _write_json(p / "latest.json", out)
    return out


def _arrays_of(state: Any) -> dict[str, np.ndarray]:
    """A group state as named arrays: its own ``to_arrays()`` (the kernel OBPM's), else the linear
    ensemble's fields."""
    if hasattr(state, "to_arrays"):
        return {name: np.asarray(a) for name, a in state.to_arrays().items()}
    return {name: np.asarray(getattr(state, name)) for name in _FIELDS}


def write_part(path: str | os.PathLike[str], epoch: int, segment: int, g: int, state: Any) -> None:
    """Write learner group ``g``'s state after (epoch, segment): whole or not at all.  ``state``: the
    linear ensemble's :class:`EnsembleState`, or any state with ``to_arrays()`` (a dict of arrays)."""
    cut = at(path) / _cut(epoch, segment)
    cut.mkdir(parents=True, exist_ok=True)
    final = cut / f"g{int(g):04d}"
    tmp = cut / f".g{int(g):04d}.tmp-{uuid.uuid4().hex[:8]}"
    grp = _group(tmp, "w")
    arrays = _arrays_of(state)
    for name, a in arrays.items():
        row_bytes = max(1, a.itemsize * (int(np.prod(a.shape[1:])) if a.ndim > 1 else 1))
        chunks = (max(1, min(a.shape[0] if a.ndim else 1, (16 << 20) // row_bytes)),) + tuple(max(1, n) for n in a.shape[1:])
        arr = grp.create_array(name, shape=a.shape, dtype=a.dtype, chunks=chunks[: a.ndim] if a.ndim else ())
        if a.size:
            arr[...] = a
    grp.attrs["complete"] = True
    manifest = {"files": _file_digests(tmp),
                "arrays": {name: {"shape": list(a.shape), "dtype": a.dtype.str} for name, a in arrays.items()}}
    _write_json(tmp / _MANIFEST, manifest)
    try:
        if final.exists():  # a retried task: the same bits, keep the first copy
            rmtree(tmp)
            return
        move(tmp, final, last=_MANIFEST)  # at a URL: copied, its manifest last
    except OSError:
        if final.exists():
            rmtree(tmp, ignore_errors=True)
            return
        raise


def read_part(path: str | os.PathLike[str], epoch: int, segment: int, g: int,
              restore: Any = None) -> Any:
    """Learner group ``g``'s state saved after (epoch, segment), checked against the cut's record
    where it is read: every file of its size and sha256, every array of its shape and dtype.
    ``restore``: builds the state from its arrays by name (a state with ``to_arrays()``);
    default the linear :class:`EnsembleState`."""
    cut = at(path) / _cut(epoch, segment)
    part = cut / f"g{int(g):04d}"
    rec = _record(cut)
    manifest = (rec.get("parts") or {}).get(part.name) if rec is not None else None
    if manifest is None:
        raise CheckpointError(f"{part}: not in the record of a complete cut ({cut / _RECORD}); the checkpoint is "
                              "damaged: start over without --resume (resume=False)")
    why = _check_part(part, manifest)
    if why is not None:
        raise CheckpointError(f"{cut}: {why}; the checkpoint is damaged: start over without --resume (resume=False)")
    try:
        grp = _group(part, "r")
        names = _FIELDS if restore is None else tuple(manifest.get("arrays", {}))
        arrays = {name: np.asarray(grp[name][...]) for name in names}
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise CheckpointError(f"{part}: cannot be read ({exc}); the checkpoint is damaged") from None
    for name, a in arrays.items():
        want = manifest.get("arrays", {}).get(name, {})
        if list(a.shape) != want.get("shape") or a.dtype.str != want.get("dtype"):
            raise CheckpointError(f"{part}/{name}: {a.dtype.str} {a.shape}, its manifest says {want.get('dtype')} "
                                  f"{want.get('shape')}; the checkpoint is damaged")
    if restore is None:
        return EnsembleState(*arrays.values())
    try:
        return restore(arrays)
    except (KeyError, ValueError, IndexError) as exc:
        raise CheckpointError(f"{part}: not a state of this job ({exc!r}); the checkpoint is damaged") from None


def mark_complete(path: str | os.PathLike[str], epoch: int, segment: int, counters: dict[str, Any]) -> None:
    """Record (epoch, segment) as the last complete cut (its record with every part's manifest,
    then ``latest.json``), then delete the cuts older than the previous complete one."""
    p = at(path)
    name = _cut(epoch, segment)
    cut = p / name
    parts: dict[str, Any] = {}
    for d in sorted(cut.glob("g[0-9][0-9][0-9][0-9]")):
        try:
            parts[d.name] = json.loads((d / _MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{d}: its manifest cannot be read ({exc}); the checkpoint directory must be on "
                                  "storage every worker and the client share") from None
    groups = _fingerprint(p).get("groups")
    want = [f"g{g:04d}" for g in range(len(groups))] if isinstance(groups, list) and groups else None
    if want is not None and sorted(parts) != want:
        raise CheckpointError(f"{cut}: parts {sorted(parts)} where the job writes {len(want)}; the checkpoint "
                              "directory must be on storage every worker and the client share")
    rec = {"epoch": int(epoch), "segment": int(segment), "counters": _jsonable(counters)}
    body = {**rec, "parts": parts}
    _write_json(cut / _RECORD, {**body, "sha256": _digest(body)})
    _write_json(p / "latest.json", rec)
    complete = [c for c in _complete_cuts(p) if c <= name]
    if len(complete) >= 2:
        for d in p.iterdir():
            if _is_cut(d) and d.name < complete[1]:
                rmtree(d, ignore_errors=True)


def _fingerprint(p: Path) -> dict[str, Any]:
    try:
        meta = json.loads((p / "zarr.json").read_text())
        return dict(meta["attributes"][_ATTR]["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
