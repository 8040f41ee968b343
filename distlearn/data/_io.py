"""Open a possibly compressed input file by its content, not its name."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from typing import IO, Any

_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}


def sniff_compression(path: str | os.PathLike[str]) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"`` or ``None`` from the first bytes of ``path``."""
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
        opener: Any = {"gzip": gzip.GzipFile, "bz2": bz2.BZ2File, "xz": lzma.LZMAFile}.get(self.compression or "")
        self._f: IO[bytes] = opener(fileobj=self._raw) if opener else self._raw

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    def readline(self) -> bytes:
        return self._f.readline()

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


def open_binary(path: str | os.PathLike[str]) -> _Input:
    """Open ``path`` for binary reading, decompressing gzip/bz2/xz transparently."""
    return _Input(path)
