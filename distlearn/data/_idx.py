"""Streaming reader for the IDX format of MNIST and Fashion-MNIST.

Format (http://yann.lecun.com/exdb/mnist/): a 4-byte magic number -- two zero
bytes, a type code, the number of dimensions -- then one big-endian uint32
per dimension, then the values in row-major order, big-endian.  Images are
``idx3`` files of shape ``(n, rows, cols)``; labels are ``idx1`` files of
shape ``(n,)``.  Files may be gzip/bz2/xz compressed (detected by content).

The images are flattened to ``n x (rows * cols)`` features and kept raw
(0..255 for MNIST), only cast to ``dtype``; the labels become float64.
"""

from __future__ import annotations

import lzma
import os
import re
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._config import DENSE_BLOCK_VALUES
from ._errors import InputFormatError
from ._io import open_binary, sniff_compression

__all__ = ["IdxReader", "IdxHeader", "read_idx_header", "infer_labels_path"]

#: Type code -> (name, big-endian numpy dtype).
_TYPES: dict[int, tuple[str, str]] = {
    0x08: ("ubyte", ">u1"),
    0x09: ("byte", ">i1"),
    0x0B: ("short", ">i2"),
    0x0C: ("int", ">i4"),
    0x0D: ("float", ">f4"),
    0x0E: ("double", ">f8"),
}

# Errors a compressed stream raises when it is cut short or corrupt:
# gzip.BadGzipFile and bz2's errors are OSError, a bad deflate block is zlib.error.
_STREAM_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)

_IMAGES_NAME = re.compile(r"images([-.])idx3")


class IdxHeader:
    """The parsed header of one IDX file.

    Attributes
    ----------
    path : str
    type_name : str
        ``"ubyte"``, ``"byte"``, ``"short"``, ``"int"``, ``"float"`` or ``"double"``.
    dtype : numpy.dtype
        Big-endian dtype of the stored values.
    shape : tuple of int
    offset : int
        Bytes of header before the values.
    compression : str or None
    """

    def __init__(self, path: str, type_name: str, dtype: np.dtype, shape: tuple[int, ...], compression: str | None):
        self.path = path
        self.type_name = type_name
        self.dtype = dtype
        self.shape = shape
        self.offset = 4 + 4 * len(shape)
        self.compression = compression

    @property
    def n_items(self) -> int:
        """Length of the first dimension (samples)."""
        return self.shape[0]

    @property
    def item_values(self) -> int:
        """Values per item (product of the other dimensions)."""
        return int(np.prod(self.shape[1:], dtype=np.int64))

    @property
    def data_bytes(self) -> int:
        """Size of the value section the header promises."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def read_idx_header(path: str, *, expect_ndim: int, role: str) -> IdxHeader:
    """Read and check the header of an IDX file.

    For an uncompressed file the size is checked against the header here, so
    truncation and trailing bytes are found before any value is read.

    Parameters
    ----------
    path : str
        The file.
    expect_ndim : int
        3 for images, 1 for labels.
    role : str
        ``"images"`` or ``"labels"``, used in messages.

    Raises
    ------
    InputFormatError
        Missing or empty file, bad magic number, unknown type code, wrong
        number of dimensions, or (uncompressed) a size that disagrees with
        the header.
    """
    if not os.path.isfile(path):
        raise InputFormatError(path, f"{role} file not found")
    size = os.path.getsize(path)
    if size == 0:
        raise InputFormatError(path, f"the {role} file is empty")
    compression = sniff_compression(path)
    try:
        with open_binary(path) as f:
            magic = f.read(4)
            ndim = magic[3] if len(magic) == 4 else 0
            dims_raw = f.read(4 * ndim)
    except _STREAM_ERRORS as e:
        raise InputFormatError(
            path, f"cannot read the IDX header of the {role} file ({compression} stream: {e})"
        ) from e
    if len(magic) < 4:
        raise InputFormatError(path, f"truncated IDX header: {len(magic)} bytes, expected a 4-byte magic number")
    if magic[:2] != b"\x00\x00":
        raise InputFormatError(
            path,
            f"not an IDX file: magic number starts with bytes {magic[:2].hex(' ')}, expected 00 00",
            token=magic.hex(),
        )
    code = magic[2]
    if code not in _TYPES:
        known = ", ".join(f"0x{c:02X} ({n})" for c, (n, _) in _TYPES.items())
        raise InputFormatError(
            path, f"unknown IDX type code 0x{code:02X} in the magic number; expected one of {known}", token=magic.hex()
        )
    if ndim != expect_ndim:
        what = "images (n, rows, cols)" if role == "images" else "labels (n,)"
        raise InputFormatError(
            path,
            f"IDX {role} file has {ndim} dimension(s) (magic {magic.hex()}), "
            f"expected {expect_ndim} for {what}",
            token=magic.hex(),
        )
    if len(dims_raw) < 4 * ndim:
        raise InputFormatError(path, f"truncated IDX header: the {ndim} dimension sizes are cut short")
    shape = tuple(int(v) for v in np.frombuffer(dims_raw, dtype=">u4"))
    name, dt = _TYPES[code]
    header = IdxHeader(path, name, np.dtype(dt), shape, compression)
    if compression is None:
        expected = header.offset + header.data_bytes
        if size < expected:
            rows = (size - header.offset) // max(1, header.item_values * header.dtype.itemsize)
            raise InputFormatError(
                path,
                f"truncated {role} file: the header promises {shape[0]} items of shape {shape[1:]} "
                f"({expected} bytes), the file has {size} bytes ({rows} complete items)",
            )
        if size > expected:
            raise InputFormatError(
                path,
                f"{size - expected} bytes of trailing data after the {shape[0]} items the header promises "
                f"({expected} bytes expected)",
            )
    return header


def infer_labels_path(images: str) -> str | None:
    """The labels file that MNIST naming pairs with ``images``, or None.

    ``train-images-idx3-ubyte.gz`` -> ``train-labels-idx1-ubyte.gz`` (also
    ``images.idx3`` -> ``labels.idx1``); only the file name is rewritten.
    """
    head, name = os.path.split(images)
    new, n = _IMAGES_NAME.subn(r"labels\1idx1", name)
    return os.path.join(head, new) if n else None


def _read_exact(f: Any, n: int) -> bytes:
    # A decompressing reader may return short reads; loop until n bytes or EOF.
    parts = []
    while n > 0:
        b = f.read(n)
        if not b:
            break
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


class IdxReader:
    """Stream an IDX images file and its labels file as dense ``(X_chunk, y_chunk)`` pieces.

    Parameters
    ----------
    images : str or Path
        The ``idx3`` images file (raw, or gzip/bz2/xz compressed).
    labels : str or Path, default=None
        The ``idx1`` labels file.  Left out, it is inferred from the images
        file name by replacing ``images-idx3`` with ``labels-idx1`` (MNIST /
        Fashion-MNIST naming); if there is no such file, an error asks for it.
    dtype : {"float32", "float64"}, default="float32"
        Type of the feature values (kept raw, not scaled).
    chunk_rows : int, default=None
        Images per chunk; by default about 16 MiB of ``dtype`` values.

    Raises
    ------
    InputFormatError
        A missing or malformed file (checked up front: magic number, type
        code, dimensions, sizes of uncompressed files, equal counts); while
        iterating, a compressed stream that ends early or non-finite values
        in a float IDX file.

    Examples
    --------
    >>> reader = IdxReader("t10k-images-idx3-ubyte.gz")  # doctest: +SKIP
    >>> reader.n_samples, reader.n_features  # doctest: +SKIP
    (10000, 784)
    """

    format = "idx"
    default_layout = "dense"

    def __init__(
        self,
        images: str | os.PathLike[str],
        labels: str | os.PathLike[str] | None = None,
        *,
        dtype: Any = "float32",
        chunk_rows: int | None = None,
    ) -> None:
        self.path = os.fspath(images)
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64'; got {self.dtype.name!r}")
        self._images = read_idx_header(self.path, expect_ndim=3, role="images")
        if labels is None:
            guess = infer_labels_path(self.path)
            if guess is None or not os.path.isfile(guess):
                tried = f" (looked for {guess})" if guess else ""
                raise InputFormatError(
                    self.path,
                    f"the IDX images file needs its labels file{tried}; pass labels=... (--labels)",
                )
            labels = guess
        self.labels_path = os.fspath(labels)
        self._labels = read_idx_header(self.labels_path, expect_ndim=1, role="labels")
        if self._images.n_items != self._labels.n_items:
            raise InputFormatError(
                self.path,
                f"{self._images.n_items} images but {self._labels.n_items} labels in {self.labels_path}",
            )
        if self._images.n_items == 0:
            raise InputFormatError(self.path, "the images file holds no images (n = 0)")
        if self._images.item_values == 0:
            raise InputFormatError(self.path, f"images of shape {self._images.shape[1:]} have no pixels")
        self.n_samples: int | None = self._images.n_items
        self.n_features: int | None = self._images.item_values
        if chunk_rows is None:
            chunk_rows = max(1, DENSE_BLOCK_VALUES // self.n_features)
        if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive int; got {chunk_rows!r}")
        self.chunk_rows = int(chunk_rows)
        self.size_bytes = os.path.getsize(self.path) + os.path.getsize(self.labels_path)
        self.bytes_read = 0
        self.compression = self._images.compression
        self.params: dict[str, Any] = {
            "labels": self.labels_path,
            "idx_type": self._images.type_name,
            "image_shape": list(self._images.shape[1:]),
            "label_type": self._labels.type_name,
        }

    def __repr__(self) -> str:
        return f"IdxReader({self.path!r}, {self.labels_path!r}: {self.n_samples} x {self.n_features})"

    def _read_rows(self, f: Any, h: IdxHeader, start: int, k: int, role: str) -> np.ndarray:
        """Read ``k`` items starting at item ``start``, as a ``(k, item_values)`` big-endian array."""
        nbytes = k * h.item_values * h.dtype.itemsize
        try:
            buf = _read_exact(f, nbytes)
        except _STREAM_ERRORS as e:
            raise InputFormatError(
                h.path, f"{role} stream is truncated or corrupt after {start} complete items ({e})"
            ) from e
        if len(buf) < nbytes:
            got = start + len(buf) // (h.item_values * h.dtype.itemsize)
            raise InputFormatError(
                h.path, f"{role} file ends early: read {got} complete items of the {h.n_items} the header promises"
            )
        arr = np.frombuffer(buf, dtype=h.dtype).reshape(k, h.item_values)
        if h.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            r, c = np.argwhere(~np.isfinite(arr))[0]
            v = arr[r, c]
            raise InputFormatError(
                h.path, f"{role} item {start + int(r)}, value {int(c)}: {v} is not finite", token=str(v)
            )
        return arr

    def _check_end(self, f: Any, h: IdxHeader, role: str) -> None:
        # Raw files were size-checked up front; a decompressed stream can only
        # be checked for trailing bytes (or a corrupt tail) by reading past the end.
        try:
            extra = f.read(1)
        except _STREAM_ERRORS as e:
            raise InputFormatError(h.path, f"{role} stream is corrupt after its {h.n_items} items ({e})") from e
        if extra:
            raise InputFormatError(
                h.path, f"trailing data after the {h.n_items} items the header promises", token=extra.hex()
            )

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        img_h, lab_h = self._images, self._labels
        n = img_h.n_items
        self.bytes_read = 0
        with open_binary(img_h.path) as fi, open_binary(lab_h.path) as fl:
            # The headers were checked in __init__; skip them.
            for f, h, role in ((fi, img_h, "images"), (fl, lab_h, "labels")):
                try:
                    _read_exact(f, h.offset)
                except _STREAM_ERRORS as e:
                    raise InputFormatError(h.path, f"{role} stream is corrupt ({e})") from e
            for start in range(0, n, self.chunk_rows):
                k = min(self.chunk_rows, n - start)
                raw = self._read_rows(fi, img_h, start, k, "images")
                with np.errstate(over="ignore"):  # overflow is reported below, with its position
                    X = raw.astype(self.dtype)
                if raw.dtype.kind == "f" and not np.all(np.isfinite(X)):
                    # finite doubles beyond float32's range would become inf silently
                    r, c = np.argwhere(~np.isfinite(X))[0]
                    raise InputFormatError(
                        img_h.path,
                        f"images item {start + int(r)}, value {int(c)}: {raw[r, c]} overflows {self.dtype.name}",
                        token=str(raw[r, c]),
                    )
                y = self._read_rows(fl, lab_h, start, k, "labels").reshape(k).astype(np.float64)
                self.bytes_read = fi.raw_tell() + fl.raw_tell()
                yield X, y
            self._check_end(fi, img_h, "images")
            self._check_end(fl, lab_h, "labels")
            self.bytes_read = self.size_bytes
