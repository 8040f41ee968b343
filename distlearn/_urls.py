"""Where a store lives: a local path, or an fsspec URL (``s3://bucket/x.zarr``, ``gs://...``).

A name is a URL when it starts with ``SCHEME://`` (RFC 3986 letters, two or more); anything else
is a local path, exactly as before (``C:``, ``C://x``, ``s3:``, ``data/s3:/x.zarr`` are local).  A URL's scheme must be
one fsspec knows (:func:`fsspec.available_protocols`) and its backend must import; otherwise
:func:`check_url` raises :class:`UrlError`, one line naming the URL and the package to install.
Nothing here ever turns a URL into a local directory.

Credentials are never passed around: each process (the client, every Dask worker) builds its
filesystem from the URL alone, and the backend reads its usual environment and config files
(``AWS_*`` variables and ``~/.aws`` for s3fs, ``GOOGLE_APPLICATION_CREDENTIALS`` for gcsfs,
``FSSPEC_<PROTOCOL>_<OPTION>`` variables for any fsspec option, e.g. ``FSSPEC_S3_ENDPOINT_URL``).
Only the URL string goes on a task graph.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from typing import Any

#: A scheme of two or more characters (RFC 3986 letters): a single letter is a Windows drive (``C://x``).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


class UrlError(ValueError):
    """A URL distlearn cannot use: unknown scheme, backend not installed, or not a place for this output."""


def scheme(path: Any) -> str | None:
    """The scheme of a URL (``"s3"``), or ``None`` for a local path."""
    if not isinstance(path, str):
        return None
    m = _SCHEME.match(path)
    return m.group(1).lower() if m else None


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (``SCHEME://...``) rather than a local path."""
    return scheme(path) is not None


def check_url(url: str) -> str:
    """``url``'s protocol, once it is known that fsspec can open it; else :class:`UrlError` (one line)."""
    import fsspec
    from fsspec.registry import known_implementations

    proto = scheme(url)
    if proto is None:
        raise UrlError(f"{url}: not a URL")
    if proto in ("file", "local"):
        raise UrlError(f"{url}: give a local path without {proto}:// (e.g. {url.split('://', 1)[1] or '/'})")
    if proto not in fsspec.available_protocols():
        raise UrlError(f"{url}: unknown URL scheme {proto}://; stores can be local paths or fsspec URLs "
                       "(s3://, gs://, az://, ...)")
    try:
        fsspec.get_filesystem_class(proto)
    except ImportError:
        spec = known_implementations.get(proto, {})
        pkg = str(spec.get("class", proto)).split(".", 1)[0]
        extra = " (or distlearn[s3])" if pkg == "s3fs" else ""
        raise UrlError(f"{url}: the {proto}:// backend is not installed; pip install {pkg}{extra}") from None
    return proto


def filesystem(url: str) -> tuple[Any, str]:
    """``(fs, path)`` of a URL (checked): an fsspec filesystem built from the URL alone (credentials
    from the environment and config files) and the path inside it, without a trailing slash."""
    import fsspec.core

    check_url(url)
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/")


def zarr_store(url: str, *, read_only: bool) -> Any:
    """zarr's :class:`~zarr.storage.FsspecStore` for a URL (checked)."""
    from zarr.storage import FsspecStore

    check_url(url)
    return FsspecStore.from_url(url.rstrip("/"), read_only=read_only)


def absolute(path: str | os.PathLike[str], *, resolve: bool = False) -> str:
    """A URL as it is; a local path made absolute (``resolve``: symlinks resolved too), as a string:
    what a Dask worker is told to open."""
    p = os.fspath(path)
    if is_url(p):
        return p
    return os.path.realpath(p) if resolve else os.path.abspath(p)


def split(url: str) -> tuple[str, str]:
    """``(parent URL, last name)``: ``s3://b/d/x.zarr`` -> ``("s3://b/d", "x.zarr")``."""
    head, _, name = url.rstrip("/").rpartition("/")
    return head, name


def join(url: str, *names: str) -> str:
    """``url/name/...``."""
    return "/".join([url.rstrip("/"), *names])


def is_root(url: str) -> bool:
    """Whether a URL names a bucket (or the root of its filesystem) rather than a prefix inside one."""
    rest = url.split("://", 1)[1].strip("/")
    return "/" not in rest


class UrlPath:
    """The part of :class:`pathlib.Path` that checkpoints use, over an fsspec URL: ``/``, ``name``,
    ``exists``, ``is_dir``/``is_file``, ``read_text``/``write_text``, ``iterdir``, ``glob``,
    ``rglob("*")`` (the objects below), ``relative_to``, ``stat().st_size``, ``open("rb")``,
    ``with_name``, ``mkdir`` (nothing to do: prefixes exist when an object is under them).

    ``str()`` is the URL, so messages and task arguments carry the URL string only."""

    def __init__(self, url: str, _fs: Any = None) -> None:
        self.url = url.rstrip("/")
        if _fs is None:
            self.fs, self.key = filesystem(self.url)
        else:
            self.fs, self.key = _fs, fs_key(_fs, self.url)

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"UrlPath({self.url!r})"

    def __fspath__(self) -> str:  # os.fspath(UrlPath) is its URL, told apart again by is_url
        return self.url

    def __truediv__(self, name: str) -> UrlPath:
        return UrlPath(join(self.url, str(name)), self.fs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UrlPath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __lt__(self, other: UrlPath) -> bool:
        return self.url < other.url

    @property
    def name(self) -> str:
        return split(self.url)[1]

    @property
    def parent(self) -> UrlPath:
        return UrlPath(split(self.url)[0], self.fs)

    def with_name(self, name: str) -> UrlPath:
        return UrlPath(join(split(self.url)[0], name), self.fs)

    def _refresh(self) -> None:
        self.fs.invalidate_cache(self.key)

    def exists(self) -> bool:
        self._refresh()
        return bool(self.fs.exists(self.key))

    def is_file(self) -> bool:
        self._refresh()
        return bool(self.fs.isfile(self.key))

    def is_dir(self) -> bool:
        self._refresh()
        return bool(self.fs.isdir(self.key))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        return None

    def read_text(self) -> str:
        return self.fs.cat_file(self.key).decode("utf-8")

    def write_text(self, text: str) -> None:
        self.fs.pipe_file(self.key, text.encode("utf-8"))
        self.fs.invalidate_cache(self.key)

    def open(self, mode: str = "rb") -> Any:
        return self.fs.open(self.key, mode)

    def stat(self) -> Any:
        import types

        return types.SimpleNamespace(st_size=int(self.fs.info(self.key).get("size") or 0))

    def iterdir(self) -> list[UrlPath]:
        self._refresh()
        try:
            names = self.fs.ls(self.key, detail=False)
        except FileNotFoundError:
            return []
        return [self / n.rstrip("/").rsplit("/", 1)[-1] for n in sorted(names)]

    def glob(self, pattern: str) -> list[UrlPath]:
        return [p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern)]

    def rglob(self, pattern: str) -> list[UrlPath]:
        """Every object below (``pattern`` matched against its name)."""
        self._refresh()
        keys = sorted(self.fs.find(self.key))
        return [UrlPath(join(self.url, k[len(self.key) + 1:]), self.fs) for k in keys
                if fnmatch.fnmatchcase(k.rsplit("/", 1)[-1], pattern)]

    def relative_to(self, other: UrlPath) -> Any:
        import pathlib

        return pathlib.PurePosixPath(self.url[len(other.url) + 1:])

    def keys(self) -> list[str]:
        """The filesystem keys of every object below."""
        self._refresh()
        return sorted(self.fs.find(self.key))


def fs_key(fs: Any, url: str) -> str:
    """The key of ``url`` in ``fs`` (the filesystem's own path, without a trailing slash)."""
    return fs._strip_protocol(url).rstrip("/")


def at(path: str | os.PathLike[str]) -> Any:
    """A ``Path`` for a local path, a :class:`UrlPath` for a URL (checked)."""
    from pathlib import Path

    if isinstance(path, UrlPath):
        return path
    p = os.fspath(path)
    return UrlPath(p) if is_url(p) else Path(p)


def rmtree(d: Any, *, ignore_errors: bool = False) -> None:
    """Remove a directory (or every object below a URL prefix) this process's job wrote."""
    if isinstance(d, UrlPath):
        try:
            keys = d.keys()
            if keys:
                d.fs.rm(keys)
        except OSError:
            if not ignore_errors:
                raise
        d._refresh()
    else:
        import shutil

        shutil.rmtree(d, ignore_errors=ignore_errors)


def move(src: Any, dst: Any, *, last: str | None = None) -> None:
    """``os.replace`` for a directory; at a URL (no rename there) a copy of every object, the one
    named ``last`` (relative to ``src``) copied last, then ``src`` removed."""
    if not isinstance(src, UrlPath):
        os.replace(src, dst)
        return
    keys = src.keys()
    tail = f"{src.key}/{last}" if last else None
    first = [k for k in keys if k != tail]
    if first:
        src.fs.copy(first, [dst.key + k[len(src.key):] for k in first])
    if tail in keys:
        src.fs.copy(tail, f"{dst.key}/{last}")
    dst._refresh()
    rmtree(src)


def sha256_file(path: Any) -> str:
    """SHA-256 of a file's bytes, read 1 MiB at a time: a local path or a :class:`UrlPath`
    (what checkpoint manifests and downloaded data sets are checked with)."""
    h = hashlib.sha256()
    with (path.open("rb") if hasattr(path, "open") else open(path, "rb")) as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()
