"""Checkpoints of long jobs in a zarr group.

Layout of a checkpoint directory ``ckpt.zarr``::

    ckpt.zarr/                 zarr group; attrs["distlearn_checkpoint"] = {format, job fingerprint}
      e0001-s00003/g0000/      zarr group: one learner group's state after epoch 1, segment 3
      e0001-s00003/g0001/      (written by the task that computed it, under a temporary
      ...                       name, then renamed: a part is whole or absent)
      latest.json              the last *complete* cut: {epoch, segment, counters}, replaced
                               atomically by the driver once every group's part of that
                               cut and its progressive-error count are done

Resuming reads ``latest.json`` and starts each group's task chain from its
part of that cut; parts of later, incomplete cuts are ignored (and rewritten
bit for bit by the resumed run).  Older cuts are deleted once a newer one is
complete, so a checkpoint holds about one model's worth of state.

Workers write their parts themselves, so the directory must be on storage
every worker and the client can reach (as the data store already is).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..ensembles import EnsembleState

FORMAT = 1
_ATTR = "distlearn_checkpoint"
_FIELDS = ("W", "scale", "sqnorm", "n_updates", "member_rounds", "n_rounds", "accP", "accq")


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed (another job's, damaged, or not a checkpoint)."""


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
    import zarr

    p = Path(path)
    if p.exists():
        if not _is_checkpoint(p):
            raise CheckpointError(f"{p} exists and is not a distlearn checkpoint; refusing to overwrite it")
        if resume:
            meta = dict(zarr.open_group(str(p), mode="r").attrs[_ATTR])
            if meta.get("format") != FORMAT:
                raise CheckpointError(f"checkpoint {p} has format {meta.get('format')}, this distlearn writes {FORMAT}")
            old = meta["fingerprint"]
            diff = sorted(k for k in set(old) | set(fingerprint) if old.get(k) != _jsonable(fingerprint.get(k)))
            if diff:
                show = "; ".join(f"{k}: checkpoint {old.get(k)!r} vs now {_jsonable(fingerprint.get(k))!r}"
                                 for k in diff[:4])
                raise CheckpointError(f"checkpoint {p} belongs to a different job ({show}); "
                                      "use another checkpoint path or resume=False to start over")
            return latest(p)
        shutil.rmtree(p)
    root = zarr.open_group(str(p), mode="w")
    root.attrs[_ATTR] = {"format": FORMAT, "fingerprint": _jsonable(fingerprint)}
    return None


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def latest(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last complete cut, or ``None``."""
    f = Path(path) / "latest.json"
    if not f.exists():
        return None
    try:
        return json.loads(f.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{f}: not valid JSON ({exc}); the checkpoint is damaged") from exc


def write_part(path: str | os.PathLike[str], epoch: int, segment: int, g: int, state: Any) -> None:
    """Write learner group ``g``'s state after (epoch, segment): whole or not at all."""
    import zarr

    cut = Path(path) / _cut(epoch, segment)
    cut.mkdir(parents=True, exist_ok=True)
    final = cut / f"g{int(g):04d}"
    tmp = cut / f".g{int(g):04d}.tmp-{uuid.uuid4().hex[:8]}"
    grp = zarr.open_group(str(tmp), mode="w")
    for name in _FIELDS:
        a = np.asarray(getattr(state, name))
        row_bytes = max(1, a.itemsize * (int(np.prod(a.shape[1:])) if a.ndim > 1 else 1))
        chunks = (max(1, min(a.shape[0] if a.ndim else 1, (16 << 20) // row_bytes)),) + tuple(max(1, n) for n in a.shape[1:])
        arr = grp.create_array(name, shape=a.shape, dtype=a.dtype, chunks=chunks[: a.ndim] if a.ndim else ())
        if a.size:
            arr[...] = a
    grp.attrs["complete"] = True
    try:
        if final.exists():  # a retried task: the same bits, keep the first copy
            shutil.rmtree(tmp)
            return
        os.replace(tmp, final)
    except OSError:
        if final.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            return
        raise


def read_part(path: str | os.PathLike[str], epoch: int, segment: int, g: int) -> EnsembleState:
    """Learner group ``g``'s state saved after (epoch, segment)."""
    import zarr

    part = Path(path) / _cut(epoch, segment) / f"g{int(g):04d}"
    try:
        grp = zarr.open_group(str(part), mode="r")
        if not grp.attrs.get("complete"):
            raise CheckpointError(f"{part}: incomplete part")
        arrays = [np.asarray(grp[name][...]) for name in _FIELDS]
    except FileNotFoundError as exc:
        raise CheckpointError(f"{part}: missing from a cut marked complete; the checkpoint is damaged") from exc
    return EnsembleState(*arrays)


def mark_complete(path: str | os.PathLike[str], epoch: int, segment: int, counters: dict[str, Any]) -> None:
    """Record (epoch, segment) as the last complete cut, then delete older cuts."""
    p = Path(path)
    rec = {"epoch": int(epoch), "segment": int(segment), "counters": _jsonable(counters)}
    tmp = p / f".latest.tmp-{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, p / "latest.json")
    keep = _cut(epoch, segment)
    for d in p.iterdir():
        if d.is_dir() and d.name.startswith("e") and d.name < keep:
            shutil.rmtree(d, ignore_errors=True)
