"""``distlearn data fetch``: the public data sets the experiments read, downloaded and checked.

Each file is fetched from its publisher's address (or from ``$DISTLEARN_DATA_URL`` / ``--url``
BASE, as ``BASE/FILE``), streamed into a temporary file beside its final name while its SHA-256
is computed, and renamed into place only when its size and SHA-256 are the ones pinned here.
Anything else (an HTTP error, no answer within the deadline, a wrong checksum, Ctrl-C) leaves no
file behind and is one line naming the address.  A file already present with the pinned
checksum is not fetched again, so a rerun finishes what an interrupted one left.

Where: ``DIR/letter/`` and ``DIR/fashion-mnist/`` under the cache directory :func:`cache_dir`
(``$DISTLEARN_DATA``, else ``$XDG_CACHE_HOME/distlearn/data``, else ``~/.cache/distlearn/data``),
where :mod:`distlearn.data.public` looks after ``$DISTLEARN_LETTER`` / ``$DISTLEARN_FASHION_MNIST``.

LETTER
    UCI's ``letter-recognition.data`` (20,000 lines ``T,2,8,3,...``: the letter, then 16
    integer features 0..15), turned into ``letter.svm``, the svmlight file the experiments read
    (labels A..Z = 1..26, 1-based indices, zero features left out, UCI's order); its SHA-256 is
    pinned as well.
Fashion-MNIST
    The four gzipped IDX files of Zalando's repository, github.com/zalandoresearch/fashion-mnist.
"""

from __future__ import annotations

import hashlib
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._urls import sha256_file as _sha256
from ._errors import InputFormatError

__all__ = ["DATA_ENV", "URL_ENV", "DATASETS", "Remote", "DataSet", "cache_dir", "fetch", "letter_to_svmlight"]

DATA_ENV = "DISTLEARN_DATA"
URL_ENV = "DISTLEARN_DATA_URL"
#: Seconds any one network wait (connect, each read) may take before the fetch gives up.
TIMEOUT = 30.0
#: Seconds one whole file may take.
DEADLINE = 1800.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Remote:
    """One published file: its name in the cache, its address, its size and SHA-256."""

    name: str
    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class DataSet:
    """A data set: the files fetched into ``DIR/subdir`` and, where the experiments read another
    format, the file derived from them (name, SHA-256) by :func:`derive`."""

    subdir: str
    what: str
    files: tuple[Remote, ...]
    derived: tuple[str, str] | None = None


_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/letter-recognition"
_ZALANDO = "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion"

#: The data sets ``distlearn data fetch`` knows, with their pinned checksums.
DATASETS: dict[str, DataSet] = {
    "letter": DataSet(
        "letter", "UCI Letter Recognition (20,000 examples, 26 classes, 16 features)",
        (Remote("letter-recognition.data", f"{_UCI}/letter-recognition.data", 712_565,
                "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2"),),
        derived=("letter.svm", "99041d4db4cdbec382e9dd38885e4d3294d27e99bea307daf095315a4406d482")),
    "fashion-mnist": DataSet(
        "fashion-mnist", "Zalando's Fashion-MNIST (60,000 + 10,000 images, 10 classes)",
        (Remote("train-images-idx3-ubyte.gz", f"{_ZALANDO}/train-images-idx3-ubyte.gz", 26_421_880,
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
         Remote("train-labels-idx1-ubyte.gz", f"{_ZALANDO}/train-labels-idx1-ubyte.gz", 29_515,
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
         Remote("t10k-images-idx3-ubyte.gz", f"{_ZALANDO}/t10k-images-idx3-ubyte.gz", 4_422_102,
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
         Remote("t10k-labels-idx1-ubyte.gz", f"{_ZALANDO}/t10k-labels-idx1-ubyte.gz", 5_148,
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"))),
}


def cache_dir() -> Path:
    """``$DISTLEARN_DATA``, else ``$XDG_CACHE_HOME/distlearn/data``, else ``~/.cache/distlearn/data``."""
    if os.environ.get(DATA_ENV):
        return Path(os.path.expanduser(os.environ[DATA_ENV]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "distlearn" / "data"


def _temp(path: Path) -> Path:
    return path.with_name(f".{path.name}.part-{uuid.uuid4().hex[:12]}")


def _download(url: str, dst: Path, remote: Remote, *, timeout: float, deadline: float) -> int:
    """Stream ``url`` into ``dst`` (a temporary name of ours), checking size and SHA-256; returns
    the byte count.  Raises ``ConnectionError`` / ``ValueError`` with one line naming ``url``."""
    end = time.monotonic() + deadline
    h = hashlib.sha256()
    n = 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r, open(dst, "xb") as f:
            while True:
                if time.monotonic() > end:
                    raise ConnectionError(f"GET {url}: not complete within the deadline of {deadline:g} s "
                                          f"({n:,} of {remote.size:,} bytes)")
                chunk = r.read1(_CHUNK)  # what has arrived (read() would wait for all of it)
                if not chunk:
                    break
                n += len(chunk)
                if n > remote.size:
                    raise ValueError(f"GET {url}: more than the published {remote.size:,} bytes; nothing kept")
                h.update(chunk)
                f.write(chunk)
    except urllib.error.HTTPError as e:
        raise ConnectionError(f"GET {url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError):
            raise ConnectionError(f"GET {url}: no answer within {timeout:g} s") from None
        raise ConnectionError(f"GET {url}: {reason}") from None
    except TimeoutError:
        raise ConnectionError(f"GET {url}: no answer within {timeout:g} s ({n:,} bytes read)") from None
    if n != remote.size or h.hexdigest() != remote.sha256:
        raise ValueError(f"GET {url}: {n:,} bytes with SHA-256 {h.hexdigest()}, not the published {remote.size:,} "
                         f"bytes with SHA-256 {remote.sha256}; nothing kept")
    return n


def letter_to_svmlight(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """UCI's ``letter-recognition.data`` as svmlight: label A..Z = 1..26, then ``j:v`` for every
    nonzero feature (1-based), one line per example in UCI's order; returns the line count."""
    lines = []
    with open(src, encoding="ascii", errors="replace") as f:
        for i, line in enumerate(f, 1):
            parts = line.strip().split(",")
            if len(parts) != 17 or len(parts[0]) != 1 or not "A" <= parts[0] <= "Z":
                raise InputFormatError(src, "expected a letter A..Z and 16 integers", line=i, token=line.strip()[:40])
            try:
                values = [int(v) for v in parts[1:]]
            except ValueError:
                raise InputFormatError(src, "a feature is not an integer", line=i, token=line.strip()[:40]) from None
            feats = " ".join(f"{j}:{v}" for j, v in enumerate(values, 1) if v)
            lines.append(f"{ord(parts[0]) - ord('A') + 1}{' ' + feats if feats else ''}\n")
    Path(dst).write_text("".join(lines), encoding="ascii")
    return len(lines)


def _place(tmp: Path, final: Path) -> None:
    os.replace(tmp, final)


def _drop(tmp: Path) -> None:
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass


def fetch(name: str, directory: str | os.PathLike[str] | None = None, *, base_url: str | None = None,
          timeout: float = TIMEOUT, deadline: float = DEADLINE,
          log: Callable[[str], None] = lambda msg: None) -> dict:
    """Fetch data set ``name`` (a key of :data:`DATASETS`) into ``directory/SUBDIR`` (default:
    :func:`cache_dir`); see the module notes.  ``base_url``: fetch ``BASE/FILE`` instead of the
    publishers' addresses (default ``$DISTLEARN_DATA_URL``).  Returns what was done per file and
    ``path``, the file or directory the experiments read."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; one of {', '.join(DATASETS)}")
    if not timeout > 0 or not deadline > 0:
        raise ValueError(f"timeout and deadline must be > 0 seconds, got {timeout!r} and {deadline!r}")
    ds = DATASETS[name]
    root = Path(os.path.expanduser(os.fspath(directory))) if directory is not None else cache_dir()
    base = base_url if base_url is not None else os.environ.get(URL_ENV) or None
    where = root / ds.subdir
    made = [d for d in (where, *where.parents) if not d.exists()]  # ours to remove again, if left empty
    where.mkdir(parents=True, exist_ok=True)
    try:
        return _fetch_into(name, ds, where, base, timeout=timeout, deadline=deadline, log=log)
    except BaseException:
        for d in made:  # deepest first; rmdir removes only an empty directory, never what another wrote
            try:
                d.rmdir()
            except OSError:
                break
        raise


def _fetch_into(name: str, ds: Any, where: Path, base: str | None, *, timeout: float, deadline: float,
                log: Callable[[str], None]) -> dict:
    files: dict[str, dict] = {}
    for remote in ds.files:
        final = where / remote.name
        url = f"{base.rstrip('/')}/{remote.name}" if base else remote.url
        if final.exists():
            got = _sha256(final)
            if got != remote.sha256:
                raise FileExistsError(f"{final} exists but its SHA-256 {got} is not the published {remote.sha256}: "
                                      "not ours to replace; remove it or fetch into another --dir")
            files[remote.name] = {"status": "present", "bytes": final.stat().st_size}
            log(f"{final}: present, SHA-256 verified")
            continue
        log(f"GET {url} ...")
        tmp = _temp(final)
        t0 = time.perf_counter()
        try:
            n = _download(url, tmp, remote, timeout=timeout, deadline=deadline)
            _place(tmp, final)
        finally:
            _drop(tmp)
        files[remote.name] = {"status": "downloaded", "bytes": n, "url": url,
                              "seconds": round(time.perf_counter() - t0, 3)}
        log(f"{final}: {n:,} bytes, SHA-256 verified")
    path = where
    if ds.derived is not None:
        out_name, sha = ds.derived
        final = where / out_name
        if not (final.exists() and _sha256(final) == sha):
            if final.exists():
                raise FileExistsError(f"{final} exists but is not the file derived from {ds.files[0].name}: "
                                      "not ours to replace; remove it or fetch into another --dir")
            tmp = _temp(final)
            try:
                letter_to_svmlight(where / ds.files[0].name, tmp)
                if (got := _sha256(tmp)) != sha:
                    raise ValueError(f"{final}: the converted file's SHA-256 {got} is not the pinned {sha}; nothing kept")
                _place(tmp, final)
            finally:
                _drop(tmp)
            files[out_name] = {"status": "derived", "bytes": final.stat().st_size}
            log(f"{final}: written from {ds.files[0].name}")
        else:
            files[out_name] = {"status": "present", "bytes": final.stat().st_size}
        path = final
    return {"dataset": name, "what": ds.what, "dir": str(where), "path": str(path), "files": files}
