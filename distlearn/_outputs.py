"""One policy for every output path: checked before the work starts, replaced atomically, and
nothing deleted that distlearn did not write.

Every writer (``convert``, ``generate``, ``predict --out``, ``train --save/--checkpoint``, ``export``,
``experiment --out``, ``demo``) calls :func:`check_output` *before* any work and moves its result
into place with :func:`replace`:

- an existing path is refused unless ``overwrite``; with ``overwrite`` only a previous distlearn
  output **of the same kind**, recognised by its own metadata (:func:`is_kind`), is replaced;
- the working directory, the home directory, the filesystem root, an input, and any directory that
  holds one of those are never an output (whatever ``overwrite`` says);
- the place is writable: its parent exists (or can be created) and a file can be made there, and a
  file output is not an existing directory (nor a directory output an existing file);
- :func:`replace` writes beside, renames the old one aside, renames the new one in, and removes the
  old only after checking again that it is of the same kind.

A refusal is one line naming the path: ``FileExistsError`` or ``ValueError``, or the ``OSError``
(``PermissionError``, ``IsADirectoryError``, ``NotADirectoryError``) that the write would have hit,
with the output as its ``filename``.

**Object storage** (an fsspec URL, :mod:`distlearn._urls`): stores and checkpoints only (any other
output at a URL is refused in one line).  A URL is a prefix of objects; a distlearn output there is
recognised (:func:`url_keys`) by its root ``zarr.json`` carrying the kind's attribute *and* every
object under the prefix being one distlearn writes (zarr metadata and chunk keys; a checkpoint's
JSON records and cut directories).  A prefix holding anything else is refused, ``overwrite`` or
not, and never deleted.  A whole bucket is never an output, nor an input URL or a prefix holding
one.  Writable means a probe object can be put beside the output (and is removed).  There is no
rename: :func:`replace` removes the old output's objects (the listed ones, still recognised; its
root ``zarr.json`` last) only once the new one is whole under its temporary prefix, then copies the
new one in (its root ``zarr.json``, which marks a store complete, last) and removes the temporary.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import uuid
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._urls import UrlError, filesystem, is_root, is_url

#: The attribute of a predictions zarr array written by ``training.write_values``.
PREDICTIONS_ATTR = "distlearn_predictions"
#: The marker file of a directory distlearn writes into (``generate rcv1-files/splice-files``,
#: ``experiment --out``, ``demo --out``), written by :func:`claim_dir` before the work.
MARKER = ".distlearn-output.json"
#: The attribute of a checkpoint group (``distributed/checkpoint.py``).
CHECKPOINT_ATTR = "distlearn_checkpoint"

#: A line of predictions as ``np.savetxt`` writes them: values without blanks, separated by commas.
_PREDICTIONS_LINE = re.compile(rb"[^\s,]+(?:,[^\s,]+)*")
_SVMLIGHT_LINE = re.compile(rb"^[-+]?[0-9.eE+-]+(,[-+]?[0-9.eE+-]+)*( (qid:)?[0-9]+:\S+)*\s*(#.*)?$")


def _zarr_attributes(path: Path) -> dict | None:
    try:
        meta = json.loads((path / "zarr.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    return attrs if isinstance(attrs, dict) else None


def _is_store(p: Path) -> bool:
    attrs = _zarr_attributes(p) if p.is_dir() else None
    return attrs is not None and isinstance(attrs.get("distlearn"), dict)


def _is_checkpoint(p: Path) -> bool:
    attrs = _zarr_attributes(p) if p.is_dir() else None
    return attrs is not None and isinstance(attrs.get(CHECKPOINT_ATTR), dict)


def is_number(token: str | bytes) -> bool:
    """Whether a text field (``str`` or ``bytes``) reads as a number (``float`` accepts it: ``1``, ``-2.5e3``,
    ``nan``, ``inf``); the CSV reader's header and label tests and the predictions recogniser share it."""
    try:
        float(token)
    except ValueError:
        return False
    return True


def _is_model(p: Path) -> bool:
    """An ``.npz`` whose ``meta`` entry is distlearn's model JSON (``model.save_model``)."""
    if not p.is_file():
        return False
    try:
        with zipfile.ZipFile(p) as z:
            info = z.getinfo("meta.npy")
            if info.file_size > 1 << 20:
                return False
            head = z.read(info)
    # what a damaged or crafted zip raises: a future format version (NotImplementedError), an encrypted
    # member (RuntimeError), a damaged deflate stream (zlib.error) or a truncated one (EOFError)
    except (OSError, KeyError, zipfile.BadZipFile, ValueError, NotImplementedError, RuntimeError, EOFError,
            zlib.error):
        return False
    try:
        import io

        import numpy as np

        meta = json.loads(str(np.lib.format.read_array(io.BytesIO(head), allow_pickle=False)))
    except Exception:  # noqa: BLE001 -- anything unreadable is simply not a model file of ours
        return False
    return isinstance(meta, dict) and "format" in meta and "kind" in meta and "distlearn_version" in meta


def _is_onnx(p: Path) -> bool:
    """An ONNX file distlearn wrote (``export.export_onnx``): its ``ModelProto`` starts with
    ``ir_version`` (field 1, a varint) and ``producer_name`` (field 2) ``"distlearn"``."""
    head = _head(p, 64) if p.is_file() else None
    if not head or head[0] != 0x08:
        return False
    i = 1
    while i < len(head) and head[i] & 0x80:  # the varint's continuation bytes
        i += 1
    name = b"distlearn"
    return head[i + 1:i + 3 + len(name)] == bytes([0x12, len(name)]) + name


def _head(p: Path, n: int = 4096) -> bytes | None:
    try:
        with open(p, "rb") as f:
            return f.read(n)
    except OSError:
        return None


def _is_text(p: Path) -> bool:
    head = _head(p) if p.is_file() else None
    if head is None or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:  # a multi-byte character cut at the end is fine
        return e.start >= len(head) - 3
    return True


def _is_svmlight(p: Path) -> bool:
    if not _is_text(p):
        return False
    head = _head(p) or b""
    lines = head.splitlines()[:-1] if len(head) == 4096 else head.splitlines()
    return all(_SVMLIGHT_LINE.match(line) for line in lines[:20])


#: How much of a ``.csv``/``.txt`` the predictions check reads: every complete line in it is looked at.
_TEXT_HEAD = 1 << 16


def predictions_mismatch(p: Path, suffix: str | None = None, widths: tuple[int, ...] = (1,)) -> str | None:
    """Why ``p`` does not look like predictions ``distlearn predict`` wrote (``None``: it does), read
    from its header or first lines only (never unpickled, never its data past ``_TEXT_HEAD`` bytes).

    ``widths`` are the numbers of values a row may hold: 1 (labels, or a binary model's scores) and,
    for a model of ``C > 2`` classes, ``C`` (its scores); ``training.prediction_widths``.  What
    ``training.write_values`` writes, and so what is recognised:

    - ``.zarr``: an array with the attribute :data:`PREDICTIONS_ATTR`;
    - ``.npy``: format 2.0 (``np.save`` writes 1.0: a user's ``X.npy`` or ``y.npy`` is never ours), C
      order, a dtype of numbers, booleans or strings, shape ``(n,)`` or (floats) ``(n, C)``;
    - ``.csv``/``.txt`` (``np.savetxt``): UTF-8, every line ending in a newline, comma-separated values
      without blanks, the same count on every line and a count in ``widths``; several values a line are
      numbers; one a line are all numbers or all names (a first line of a name above numbers is a header).

    The honest limit: a headerless text file of one number (or one name) a line, or of ``C`` numbers a
    line for a model of ``C`` classes, is exactly what predict writes there and cannot be told apart.
    """
    suffix = (p.suffix if suffix is None else suffix).lower()
    if suffix == ".zarr":
        attrs = _zarr_attributes(p) if p.is_dir() else None
        return None if attrs is not None and PREDICTIONS_ATTR in attrs else f"no {PREDICTIONS_ATTR} attribute"
    if not p.is_file():
        return "not a regular file"
    return _npy_mismatch(p, widths) if suffix == ".npy" else _text_mismatch(p, widths)


def _widths_text(widths: tuple[int, ...]) -> str:
    return " or ".join(str(w) for w in sorted(set(widths)))


def _npy_mismatch(p: Path, widths: tuple[int, ...]) -> str | None:
    import numpy as np

    fmt = np.lib.format
    try:
        with open(p, "rb") as f:
            version = fmt.read_magic(f)
            if version != (2, 0):
                return (f".npy format {version[0]}.{version[1]}{' (np.save)' if version == (1, 0) else ''}; "
                        "distlearn predict writes format 2.0")
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
    except (OSError, ValueError, EOFError, SyntaxError, TypeError):
        return "not a .npy file"
    if fortran:
        return "a Fortran-ordered array"
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biufU":
        return f"dtype {dtype}, not labels or scores"
    if len(shape) == 1 or (len(shape) == 2 and dtype.kind == "f" and shape[1] > 1 and shape[1] in widths):
        return None
    wide = "".join(f" or (n, {w})" for w in sorted(set(widths)) if w > 1)
    return f"shape {tuple(shape)}; distlearn predict writes shape (n,){wide} for this model"


def _text_mismatch(p: Path, widths: tuple[int, ...]) -> str | None:
    if not _is_text(p):
        return "not UTF-8 text"
    head = _head(p, _TEXT_HEAD) or b""
    if not head:
        return None  # the predictions of no rows (and nothing to lose)
    lines = head.split(b"\n")
    rest = lines.pop()  # after the last newline: empty when the file ends there
    if rest and len(head) < _TEXT_HEAD:
        return "the last line does not end with a newline"
    if not lines:
        return f"no complete line in the first {_TEXT_HEAD} bytes"
    counts: dict[int, int] = {}
    for i, line in enumerate(lines, 1):
        if not _PREDICTIONS_LINE.fullmatch(line):  # "keep me" is no prediction
            return f"line {i} is not comma-separated values without blanks"
        counts.setdefault(line.count(b",") + 1, i)
    if len(counts) > 1:
        return f"lines of {' and '.join(str(c) for c in sorted(counts))} values"
    n = next(iter(counts))
    if n not in widths:
        return f"{n} values a line; distlearn predict writes {_widths_text(widths)} for this model"
    numeric = [all(is_number(v) for v in line.split(b",")) for line in lines]
    if len(lines) > 1 and not numeric[0] and all(numeric[1:]):
        return "line 1 is a header (the lines below are numbers)"
    if n > 1 and not all(numeric):
        return f"line {numeric.index(False) + 1} holds a value that is not a number (scores are numbers)"
    if any(numeric) and not all(numeric):
        return (f"line {numeric.index(not numeric[0]) + 1} is {'not ' if numeric[0] else ''}a number, line 1 "
                f"is{'' if numeric[0] else ' not'} (labels are all numbers or all names)")
    return None


def _is_predictions(p: Path, suffix: str | None = None, widths: tuple[int, ...] = (1,)) -> bool:
    return predictions_mismatch(p, suffix, widths) is None


def _marked(p: Path, kind: str) -> bool:
    try:
        return json.loads((p / MARKER).read_text()).get("kind") == kind
    except (OSError, ValueError, AttributeError):
        return False


def _is_experiment(p: Path) -> bool:
    return p.is_dir() and (_marked(p, "experiment") or (p / "meta.json").is_file()
                           or any(p.glob("*/meta.json")) or any((p / "cells").glob("*/meta.json")))


def _is_corpus(p: Path) -> bool:
    return _marked(p, "corpus")


def _is_demo(p: Path) -> bool:
    return p.is_dir() and (_marked(p, "demo") or _is_store(p / "rcv1-like.zarr"))


#: kind -> (what it is, in words; a directory? (None: by suffix, .zarr is one); recogniser; how an
#: existing one is used: "replace" (only with ``overwrite``), "fill" (a directory written into:
#: an empty one is used, one of the kind only with ``overwrite``) or "resume" (a results
#: directory: an empty one or one of the kind is used, ``overwrite`` or not)).
KINDS: dict[str, tuple[str, bool | None, Callable[[Path], bool], str]] = {
    "store": ("distlearn store (a zarr group with distlearn's metadata)", True, _is_store, "replace"),
    "checkpoint": ("distlearn checkpoint", True, _is_checkpoint, "replace"),
    "model": ("distlearn model file (.npz with distlearn's meta)", False, _is_model, "replace"),
    "predictions": ("predictions file written by distlearn predict", None, _is_predictions, "replace"),
    "onnx": ("distlearn ONNX file (written by distlearn export)", False, _is_onnx, "replace"),
    "svmlight": ("svmlight file", False, _is_svmlight, "replace"),
    "corpus": (f"directory of generated files (with {MARKER})", True, _is_corpus, "fill"),
    "experiment": ("distlearn experiment directory (with meta.json)", True, _is_experiment, "resume"),
    "demo": ("distlearn demo directory", True, _is_demo, "resume"),
}


def _is_dir_kind(path: Path, kind: str) -> bool:
    is_dir = KINDS[kind][1]
    return path.suffix.lower() == ".zarr" if is_dir is None else is_dir


def is_kind(path: str | os.PathLike[str], kind: str, *, name: str | None = None,
            widths: tuple[int, ...] = (1,)) -> bool:
    """Whether ``path`` holds a previous distlearn output of ``kind`` (one of :data:`KINDS`),
    recognised by its own metadata (``name``: the name it had, for a file renamed aside;
    ``widths``: predictions only, the values a row may hold, see :func:`predictions_mismatch`)."""
    if is_url(os.fspath(path)):
        fs, p = filesystem(os.fspath(path))
        return url_keys(fs, p, kind) is not None
    if kind == "predictions":
        return _is_predictions(Path(path), None if name is None else Path(name).suffix, widths)
    return KINDS[kind][2](Path(path))


def _real(path: str | os.PathLike[str]) -> str:
    p = os.fspath(path)
    if "#" in p and not os.path.lexists(p):  # a view STORE#TARGET names its store
        p = p.split("#", 1)[0]
    return os.path.realpath(os.path.expanduser(p))


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _protected(path: Path, inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    real = _real(path)
    named = [(os.path.realpath(os.getcwd()), "the working directory"),
             (os.path.realpath(os.path.expanduser("~")), "the home directory"),
             (os.path.realpath(os.sep), "the filesystem root")]
    named.sort(key=lambda qw: qw[0] != real)  # the one it is, before one it holds
    for q, what in named:
        if _within(q, real):
            raise ValueError(f"{path}: refusing to write over {what}" + ("" if q == real else f" ({q}) or a directory that holds it"))
    for i in inputs:
        if i is None or os.fspath(i) == "" or not os.path.lexists(i):
            continue  # an input that does not exist has nothing to lose (its reader says it is missing)
        q = _real(i)
        if _within(q, real):
            raise ValueError(f"{path}: refusing to write over the input {i}" + ("" if q == real else ", which it holds"))
        if os.path.isdir(q) and _within(real, q):
            raise ValueError(f"{path}: refusing to write inside the input {i}")


def claim_dir(path: str | os.PathLike[str], kind: str) -> Path:
    """Create the directory output ``path`` (checked by :func:`check_output`) and mark it as a
    ``kind`` output of distlearn, so that a rerun (or ``--overwrite``) recognises it even when
    the first run was stopped before writing anything else."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    if not (p / MARKER).exists():
        tmp = p / f".{MARKER}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps({"kind": kind}))
        os.replace(tmp, p / MARKER)
    return p


def check_place(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str] | None] = (),
                into: bool = False) -> None:
    """The checks of :func:`check_output` that do not depend on what is there: not the working,
    home or root directory, not an input nor what holds one, and writable."""
    p = Path(os.path.expanduser(os.fspath(path)))
    _protected(p, inputs)
    check_writable(p, into=into and p.is_dir())


def _oserror(cls: type[OSError], code: int, path: Path, note: str = "") -> OSError:
    return cls(code, os.strerror(code) + (f" ({note})" if note else ""), str(path))


def check_writable(path: str | os.PathLike[str], *, into: bool = False) -> None:
    """Raise the ``OSError`` a write of ``path`` would hit, now: its nearest existing ancestor
    must be a directory in which a file can be created (``os.access`` and a real probe file).
    ``into``: ``path`` is an existing directory written into, so probe it instead."""
    p = Path(path)
    where = Path(os.path.abspath(path))
    where = where if into else where.parent
    while not os.path.lexists(where) and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise _oserror(NotADirectoryError, errno.ENOTDIR, p, f"{where} is not a directory")
    if not os.access(where, os.W_OK | os.X_OK):
        raise _oserror(PermissionError, errno.EACCES, p, f"{where} is not writable")
    try:
        fd, probe = tempfile.mkstemp(prefix=".distlearn-probe-", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise _oserror(type(e), e.errno or errno.EACCES, p, f"cannot create a file in {where}") from None


def check_output(path: str | os.PathLike[str], kind: str, *, overwrite: bool,
                 inputs: Iterable[str | os.PathLike[str] | None] = (), widths: tuple[int, ...] = (1,)) -> Path:
    """Refuse, before any work, an output the writer must not write (see the module notes).

    ``kind`` is one of :data:`KINDS`; ``inputs`` are the command's input paths; ``widths``
    (predictions only): the values a row of them may hold (:func:`predictions_mismatch`, whose
    reason a refusal names).  Returns the path.
    """
    what, _, recognise, mode = KINDS[kind]
    if is_url(os.fspath(path)):
        return _check_url_output(os.fspath(path), kind, overwrite=overwrite, inputs=inputs)  # type: ignore[return-value]
    p = Path(os.path.expanduser(os.fspath(path)))
    if os.fspath(path) == "":
        raise ValueError("an empty output path")
    _protected(p, inputs)
    exists = os.path.lexists(p)
    if exists:
        want_dir = _is_dir_kind(p, kind)
        if p.is_dir() and not want_dir:
            raise _oserror(IsADirectoryError, errno.EISDIR, p, f"a {what} goes there")
        if os.path.exists(p) and not p.is_dir() and want_dir:
            raise _oserror(NotADirectoryError, errno.ENOTDIR, p, f"a {what} goes there")
        real_dir = p.is_dir() and not os.path.islink(p)
        if real_dir and mode != "replace" and (not any(p.iterdir()) or (mode == "resume" and recognise(p))):
            check_writable(p, into=True)
            return p
        if mode == "resume":
            raise FileExistsError(f"{p} exists and is not a {what}; refusing to write into it "
                                  "(name a new or empty directory)")
        if not overwrite:
            raise FileExistsError(f"{p} already exists; pass --overwrite to replace it")
        why = predictions_mismatch(p, None, widths) if kind == "predictions" else None
        if why is not None:
            raise FileExistsError(f"{p} exists and does not look like predictions distlearn predict wrote ({why}); "
                                  "refusing to replace it")
        if kind != "predictions" and not recognise(p):
            raise FileExistsError(f"{p} exists and is not a {what}; refusing to replace it")
        _refuse_foreign(p, kind)
        if mode == "fill":
            check_writable(p, into=True)
            return p
    check_writable(p)
    return p


def _foreign(p: Path, kind: str) -> str | None:
    """The first file or link under the directory output ``p`` that distlearn never writes there
    (the rule :func:`url_keys` applies to a URL's keys), else ``None``: a user's file put inside a
    store, checkpoint or predictions array is never deleted with it."""
    if kind not in ("store", "checkpoint", "predictions") or not p.is_dir() or os.path.islink(p):
        return None  # the directories distlearn writes into (corpus, experiment, demo) hold what they hold
    pattern = _CHECKPOINT_KEY if kind == "checkpoint" else _ZARR_KEY
    for root, dirs, files in os.walk(p):
        for n in sorted(dirs) + sorted(files):
            full = os.path.join(root, n)
            rel = os.path.relpath(full, p).replace(os.sep, "/")
            if os.path.islink(full) or (n in files and not pattern.fullmatch(rel)):
                return rel
    return None


def _refuse_foreign(p: Path, kind: str) -> None:
    rel = _foreign(p, kind)
    if rel is not None:
        raise FileExistsError(f"{p} holds {rel!r}, which distlearn did not write; refusing to delete it "
                              "(move it out first, or use another path)")


def _discard(old: Path, kind: str, name: str) -> None:
    """Remove ``old`` (the previous output ``name``, renamed aside) if it is still of ``kind``;
    else keep it and say so."""
    if os.path.islink(old):  # a link is removed, never followed
        old.unlink()
        return
    if is_kind(old, kind, name=name) and _foreign(old, kind) is None:
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
        return
    warnings.warn(f"{old}: changed while being replaced and is no longer a {KINDS[kind][0]}; kept", stacklevel=3)


def remove(path: str | os.PathLike[str], kind: str) -> None:
    """Delete a previous output of ``kind`` at ``path`` (checked again now); refuse anything else."""
    if is_url(os.fspath(path)):
        _remove_url(os.fspath(path), kind)
        return
    p = Path(path)
    if not os.path.lexists(p):
        return
    if os.path.islink(p) or not is_kind(p, kind):
        raise FileExistsError(f"{p} exists and is not a {KINDS[kind][0]}; refusing to delete it")
    _refuse_foreign(p, kind)
    _protected(p, ())
    old = p.parent / f".{p.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(p, old)
    _discard(old, kind, p.name)


def replace(tmp: str | os.PathLike[str], target: str | os.PathLike[str], kind: str, *,
            widths: tuple[int, ...] = (1,), overwrite: bool = True) -> None:
    """Move the finished output ``tmp`` (written beside ``target``) to ``target``.

    A file replaces a previous file of ``kind`` in one ``os.replace``.  A directory: the old one
    is renamed aside, the new one renamed in, and the old one removed (only if it is still of
    ``kind``).  Anything else at ``target`` is refused (``FileExistsError``); ``tmp`` is left
    for the caller to clean up.  ``overwrite=False`` (nothing was there when the work started):
    whatever appeared at ``target`` since, another writer's output included, is refused, in one
    atomic step (a hard link or a rename that never replaces).  At a URL (both ``tmp`` and
    ``target``): see the module notes.  ``widths``: as in :func:`check_output`.
    """
    if is_url(os.fspath(target)):
        _replace_url(os.fspath(tmp), os.fspath(target), kind)
        return
    tmp, target = Path(tmp), Path(target)
    if not overwrite:
        _move_new(tmp, target)
        return
    if os.path.lexists(target) and not is_kind(target, kind, widths=widths):
        raise FileExistsError(f"{target} appeared or changed while writing and is not a {KINDS[kind][0]}; "
                              "not replaced")
    if not tmp.is_dir():
        if target.is_dir() and not os.path.islink(target):
            raise _oserror(IsADirectoryError, errno.EISDIR, target)
        os.replace(tmp, target)
        return
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    _refuse_foreign(target, kind)  # checked again: a file put inside since check_output is kept
    old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    _discard(old, kind, target.name)


#: The errors only a write hits: a full disk, a file-size limit (``RLIMIT_FSIZE``), a quota.
FULL_DISK = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


@contextmanager
def naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """Writing the output ``path``: a full disk (:data:`FULL_DISK`) names ``path`` (numpy's and
    zarr's writers raise it without a file name, or with their temporary's), so that the one line
    says which output could not be written."""
    try:
        yield
    except OSError as e:
        if e.errno in FULL_DISK and e.filename != os.fspath(path):
            raise type(e)(e.errno, os.strerror(e.errno), os.fspath(path)) from None
        raise


def _move_new(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target`` only if nothing is there, atomically: a second writer that
    checked the same free name before this one finished is refused, never silently replaced."""
    appeared = FileExistsError(f"{target} appeared while writing (another writer?); not replaced: "
                               "pass --overwrite to replace it")
    if tmp.is_dir():
        try:  # a directory is never renamed over a non-empty one (nor over a file)
            if os.path.lexists(target) and not (target.is_dir() and not os.path.islink(target)):
                raise appeared
            os.rename(tmp, target)
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise appeared from None
            raise
        return
    try:
        os.link(tmp, target)  # fails if anything is there, whatever it is
    except FileExistsError:
        raise appeared from None
    except OSError:  # a file system without hard links: checked, then renamed
        if os.path.lexists(target):
            raise appeared from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


# --------------------------------------------------------------------------- object storage

#: The kinds of output that may live at a URL.
URL_KINDS = ("store", "checkpoint")
#: The keys (relative to the output's prefix) distlearn writes: zarr metadata and chunk keys (any
#: group or array depth), and for a checkpoint its JSON records and everything of its cut prefixes
#: (``e0001-s00003/...``: parts, manifests, records, their temporaries).
_ZARR_KEY = re.compile(r"(?:[^/]+/)*(?:zarr\.json|c(?:/\d+)+)")
_CHECKPOINT_KEY = re.compile(r"(?:[^/]+/)*(?:zarr\.json|c(?:/\d+)+)|\.?latest\.json(?:\.tmp-[0-9a-f]+)?"
                             r"|e\d{4,}-s\d{5,}/.+")
_URL_ATTR = {"store": "distlearn", "checkpoint": CHECKPOINT_ATTR}


def url_keys(fs: Any, path: str, kind: str) -> list[str] | None:
    """Every object under the prefix ``path`` of ``fs`` when they are a distlearn output of ``kind``
    (root ``zarr.json`` with the kind's attribute, nothing but keys distlearn writes); else ``None``."""
    if kind not in URL_KINDS:
        return None
    try:
        meta = json.loads(fs.cat_file(f"{path}/zarr.json"))
        keys = sorted(fs.find(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    attrs = meta.get("attributes") if isinstance(meta, dict) else None
    if not isinstance(attrs, dict) or not isinstance(attrs.get(_URL_ATTR[kind]), dict):
        return None
    pattern = _ZARR_KEY if kind == "store" else _CHECKPOINT_KEY
    prefix = path + "/"
    if not all(k.startswith(prefix) and pattern.fullmatch(k[len(prefix):]) for k in keys):
        return None
    return keys


def _url_exists(fs: Any, path: str) -> bool:
    fs.invalidate_cache(path)
    return bool(fs.exists(path))


def _url_error(url: str, e: BaseException, doing: str) -> OSError:
    """One line for a failed request to object storage (the ``OSError`` the CLI prints)."""
    msg = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, PermissionError):
        return PermissionError(errno.EACCES, f"access denied ({msg}); check the credentials", url)
    if isinstance(e, FileNotFoundError):
        return FileNotFoundError(f"cannot {doing} {url}: no such bucket or location ({msg})")
    return OSError(f"cannot {doing} {url}: {type(e).__name__}: {msg}")


def _check_url_output(url: str, kind: str, *, overwrite: bool,
                      inputs: Iterable[str | os.PathLike[str] | None]) -> str:
    what = KINDS[kind][0]
    if kind not in URL_KINDS:
        raise UrlError(f"{url}: a {what} is written to a local path; only stores and checkpoints go to "
                       "object storage")
    fs, p = filesystem(url)
    url = url.rstrip("/")
    if is_root(url):
        raise ValueError(f"{url}: refusing to write over a whole bucket; name a prefix inside it "
                         f"(e.g. {url}/data.zarr)")
    for i in inputs:
        q = None if i is None else os.fspath(i)
        if not q or not is_url(q):
            continue
        q = q.split("#", 1)[0].rstrip("/")
        if q == url or q.startswith(url + "/"):
            raise ValueError(f"{url}: refusing to write over the input {i}" + ("" if q == url else ", which it holds"))
        if url.startswith(q + "/"):
            raise ValueError(f"{url}: refusing to write inside the input {i}")
    try:
        exists = _url_exists(fs, p)
    except Exception as e:  # noqa: BLE001 -- credentials, endpoint, network: one line naming the URL
        raise _url_error(url, e, "reach") from None
    if exists:
        if not overwrite:
            raise FileExistsError(f"{url} already exists; pass --overwrite to replace it")
        if url_keys(fs, p, kind) is None:
            raise FileExistsError(f"{url} exists and is not a {what}, or holds objects distlearn did not "
                                  "write; refusing to replace it")
    probe = f"{p.rpartition('/')[0]}/.distlearn-probe-{uuid.uuid4().hex[:12]}"
    try:
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except Exception as e:  # noqa: BLE001
        raise _url_error(url, e, "write") from None
    return url


def _rm_keys(fs: Any, keys: list[str], path: str) -> None:
    """Delete exactly ``keys`` (objects of the output at ``path``), its root ``zarr.json`` last: a
    half-removed output is still recognised (and refused by readers for its missing chunks)."""
    root = f"{path}/zarr.json"
    rest = [k for k in keys if k != root]
    if rest:
        fs.rm(rest)
    if root in keys:
        fs.rm_file(root)
    fs.invalidate_cache(path)


def _remove_url(url: str, kind: str) -> None:
    fs, p = filesystem(url)
    if not _url_exists(fs, p):
        return
    keys = url_keys(fs, p, kind)
    if keys is None:
        raise FileExistsError(f"{url} exists and is not a {KINDS[kind][0]}; refusing to delete it")
    _rm_keys(fs, keys, p)


def _replace_url(tmp: str, target: str, kind: str) -> None:
    fs, t = filesystem(target)
    _, s = filesystem(tmp)
    fs.invalidate_cache()
    new = sorted(fs.find(s))
    if f"{s}/zarr.json" not in new:
        raise FileNotFoundError(f"{tmp}: the new {KINDS[kind][0]} is not there; nothing replaced")
    if _url_exists(fs, t):
        old = url_keys(fs, t, kind)
        if old is None:
            raise FileExistsError(f"{target} appeared or changed while writing and is not a {KINDS[kind][0]}; "
                                  "not replaced")
        _rm_keys(fs, old, t)
    root = f"{s}/zarr.json"
    rest = [k for k in new if k != root]
    if rest:
        fs.copy(rest, [t + k[len(s):] for k in rest])
    fs.copy(root, f"{t}/zarr.json")
    fs.invalidate_cache(t)
    _rm_keys(fs, new, s)
