"""Open a possibly compressed input file by its content, not its name."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import stat
import zlib
from collections.abc import Iterator
from typing import IO, Any

from ._errors import InputFormatError

_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}


def refuse_special(path: str | os.PathLike[str]) -> None:
    """Refuse, before it is opened, an input that is no file: a FIFO blocks ``open`` until a writer
    comes (``convert fifo.svm`` waited forever without a word), a device never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the caller's open says so
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
        raise InputFormatError(path, f"is {what}, not a regular file; distlearn reads files (save the data "
                                     "to one first)")


def sniff_compression(path: str | os.PathLike[str]) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"`` or ``None`` from the first bytes of ``path``."""
    refuse_special(path)
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, name in _MAGIC.items():
        if head.startswith(magic):
            return name
    return None


class _Input:
    """A binary reader that also tells how many *file* bytes it consumed (for progress bars)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.compression = sniff_compression(path)
        self._raw = open(path, "rb")
        # GzipFile takes the open file as fileobj=; BZ2File and LZMAFile take it as their first argument
        opener: Any = {"gzip": lambda f: gzip.GzipFile(fileobj=f, mode="rb"), "bz2": bz2.BZ2File,
                       "xz": lzma.LZMAFile}.get(self.compression or "")
        self._f: IO[bytes] = opener(self._raw) if opener else self._raw
        self._pending: bytes | None = None  # the first bytes, a byte-order mark removed

    def _prime(self) -> bytes:
        if self._pending is None:
            head = self._f.read(len(BOM))
            self._pending = b"" if head == BOM else head
        return self._pending

    def read(self, n: int = -1) -> bytes:
        pending = self._prime()
        if not pending:
            return self._f.read(n)
        if n is None or n < 0:
            self._pending = b""
            return pending + self._f.read()
        take, self._pending = pending[:n], pending[n:]
        return take + self._f.read(n - len(take)) if len(take) < n else take

    def readline(self) -> bytes:
        pending = self._prime()
        if not pending:
            return self._f.readline()
        i = pending.find(b"\n")
        if i >= 0:
            self._pending = pending[i + 1:]
            return pending[: i + 1]
        self._pending = b""
        return pending + self._f.readline()

    def raw_tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        if self._f is not self._raw:
            self._f.close()
        self._raw.close()

    def __enter__(self) -> _Input:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


BOM = b"\xef\xbb\xbf"


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark (text files from some editors start with one)."""
    return data[3:] if data.startswith(BOM) else data


def open_binary(path: str | os.PathLike[str]) -> _Input:
    """Open ``path`` for binary reading, decompressing gzip/bz2/xz transparently."""
    return _Input(path)


#: What a compressed stream raises when it is cut short or corrupt.
STREAM_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


def iter_line_chunks(f: _Input, chunk_bytes: int, *, path: str, first_line: int = 1, boundary: bytes = b"\n"
                     ) -> Iterator[tuple[bytes, int]]:
    """Whole-line chunks of about ``chunk_bytes`` from ``f``, each with its first line's number.

    With ``boundary`` (e.g. ``b"\n.I"``) a chunk ends only at a newline that begins ``boundary``.

    A line longer than ``chunk_bytes`` is kept whole (reading goes on until its end).
    A truncated or corrupt compressed stream raises :class:`InputFormatError`
    naming ``path`` and the last complete line.
    """
    rest = b""
    while True:
        try:
            data = f.read(chunk_bytes)
        except STREAM_ERRORS as e:
            raise InputFormatError(
                path, f"compressed stream is truncated or corrupt after line {first_line - 1} ({e})"
            ) from e
        if data:
            buf = rest + data
            cut = buf.rfind(boundary) + 1
            if cut == 0:
                rest = buf
                continue
            chunk, rest = buf[:cut], buf[cut:]
        else:
            chunk, rest = rest, b""
        if chunk:
            yield chunk, first_line
            first_line += chunk.count(b"\n")
        if not data:
            return
