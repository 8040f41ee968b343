"""Streaming reader for numeric CSV (or other delimited text) files.

One example per line: numbers separated by ``delimiter``, one column of which
is the label (or none: ``label_column=False``, every column a feature, ``y``
None).  An optional header line names the columns.  Blank lines are
skipped and ``#`` starts a comment (a whole line, or the rest of a line).
The file may be gzip/bz2/xz compressed (detected by content).

The happy path hands a line-aligned byte chunk to :func:`numpy.loadtxt`
(compiled in numpy >= 2), so no Python code runs per value.  When it rejects
a chunk, or the values it returns are not all finite, the chunk is scanned
again line by line in Python.  That scan is the authority: it raises a
precise ``FILE:LINE: ...`` error naming the token, or -- where loadtxt is
merely stricter, e.g. a line holding only spaces -- returns the parsed chunk.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._config import TEXT_CHUNK_BYTES
from .._outputs import is_number
from ._errors import InputFormatError
from ._io import STREAM_ERRORS as _STREAM_ERRORS
from ._io import iter_line_chunks, open_binary
from ._labels import LABEL_NAMES, NO_LABEL, PICK_LABEL, describe_column, label_index

__all__ = ["CsvReader", "parse_csv_bytes"]



def _content(line: str) -> str:
    """The line without its comment and surrounding whitespace ('' for a line to skip)."""
    return line.split("#", 1)[0].strip()


def _split(content: str, delimiter: str | None) -> list[str]:
    """A line's fields; a line holding a double quote is split as CSV (``"a, b"`` is one field)."""
    if delimiter is None or '"' not in content:
        return content.split(delimiter)
    return next(csv.reader([content], delimiter=delimiter))


#: What a label column of class names accepts, and why a mixture is refused.
ALL_OR_NONE = "labels are all numbers or all names"


def _fits(v: float, dtype: np.dtype) -> bool:
    with np.errstate(over="ignore"):
        return bool(np.isfinite(dtype.type(v)))


def _scan(
    lines: list[str],
    *,
    path: str,
    first_line: int,
    delimiter: str | None,
    n_fields: int,
    label_column: int | None,
    dtype: np.dtype,
    names: bool = False,
    hint: str = "",
) -> tuple[np.ndarray, list[str] | None]:
    """Parse ``lines`` one by one into a ``(rows, n_fields)`` float64 array, or raise precisely.

    ``names``: the label column holds class names, returned as a list (their column in the
    array is 0); ``hint`` ends the message of a feature value that is not a number.
    ``label_column`` None: no label column, every bad value's message ends with :data:`NO_LABEL`.
    """
    narrow = dtype != np.float64
    note = NO_LABEL if label_column is None else ""
    rows: list[list[float]] = []
    labels: list[str] | None = [] if names else None
    for k, line in enumerate(lines):
        content = _content(line)
        if not content:
            continue
        lineno = first_line + k
        fields = _split(content, delimiter)
        if len(fields) != n_fields:
            raise InputFormatError(
                path,
                f"wrong number of fields: expected {n_fields}, found {len(fields)}",
                line=lineno,
                token=content if len(content) <= 80 else content[:77] + "...",
            )
        row = []
        for j, tok in enumerate(fields):
            t = tok.strip()
            what = "label" if j == label_column else "value"
            if not t:
                raise InputFormatError(path, f"empty field in column {j + 1}{note or f' ({what})'}", line=lineno,
                                       token="")
            if names and j == label_column:
                if is_number(t):
                    raise InputFormatError(path, f"label {t!r} in column {j + 1} is a number, but the first "
                                                 f"row's label is a name ({ALL_OR_NONE})", line=lineno, token=t)
                assert labels is not None
                labels.append(t)
                row.append(0.0)
                continue
            try:
                v = float(t)
            except ValueError:
                if j == label_column:
                    msg = (f"label {t!r} in column {j + 1} is a name, but the first row's label is a number "
                           f"({ALL_OR_NONE})")
                else:
                    msg = f"value {t!r} in column {j + 1} is not a number{hint}{note}"
                    if hint and label_column is not None:  # the way out: this column, as --label-column counts
                        msg += f", e.g. --label-column {j} if column {j + 1} holds the class names"
                raise InputFormatError(path, msg, line=lineno, token=t) from None
            if not math.isfinite(v):
                raise InputFormatError(path, f"{what} {t!r} in column {j + 1} is not finite{note}", line=lineno,
                                       token=t)
            if narrow and j != label_column and not _fits(v, dtype):
                # finite text beyond float32's range would be stored as inf
                raise InputFormatError(
                    path,
                    f"value {t!r} in column {j + 1} overflows {dtype.name}; use dtype='float64'",
                    line=lineno,
                    token=t,
                )
            row.append(v)
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), n_fields), labels


def parse_csv_bytes(
    chunk: bytes,
    *,
    path: str = "<bytes>",
    first_line: int = 1,
    delimiter: str | None = ",",
    n_fields: int,
    label_column: int | None = 0,
    dtype: Any = "float32",
    labels_are_names: bool = False,
    hint: str = "",
) -> tuple[np.ndarray, np.ndarray | None]:
    """Parse whole delimited lines held in memory into ``(X, y)``.

    ``first_line`` is the file's 1-based number of the chunk's first line;
    blank and comment lines are skipped.  ``X`` has ``n_fields - 1`` columns
    of ``dtype`` (every column but ``label_column``, which must be
    non-negative), ``y`` is float64; all values are finite.  ``label_column`` None: no label
    column, ``X`` has all ``n_fields`` columns and ``y`` is None.  ``labels_are_names``:
    the label column holds class names (none of them a number: :data:`ALL_OR_NONE`),
    ``y`` is a str array of them (a quoted field ``"a, b"`` is one name).
    ``hint`` ends the message of a feature value that is not a number.

    Raises
    ------
    InputFormatError
        A non-numeric, empty or non-finite field, a value beyond ``dtype``'s
        range, or a wrong number of fields, naming ``path``, the line and the token.
    """
    dtype = np.dtype(dtype)
    features = np.arange(n_fields) if label_column is None else np.delete(np.arange(n_fields), label_column)
    # Undecodable bytes become U+FFFD, which no number contains: they are
    # reported as a bad token on their line instead of a decoding error.
    # Split on "\n" only (not str.splitlines' form feeds etc.), so that both
    # parsers and the line count of the reader agree on what a line is.
    lines = chunk.decode("utf-8", "replace").split("\n")
    if labels_are_names:
        return _parse_names(lines, path=path, first_line=first_line, delimiter=delimiter, n_fields=n_fields,
                            label_column=label_column, dtype=dtype, features=features, hint=hint)
    try:
        with warnings.catch_warnings():
            # a chunk of only blank/comment lines is fine; loadtxt warns about it
            warnings.simplefilter("ignore", UserWarning)
            arr: np.ndarray | None = np.loadtxt(
                lines, delimiter=delimiter, comments="#", dtype=np.float64, ndmin=2
            )
    except ValueError:
        arr = None
    X = None
    if arr is not None and arr.size == 0:
        arr = np.empty((0, n_fields), dtype=np.float64)
    if arr is not None and arr.shape[1] == n_fields and np.all(np.isfinite(arr)):
        with np.errstate(over="ignore"):
            X = arr[:, features].astype(dtype, order="C", copy=False)
        if dtype != np.float64 and not np.all(np.isfinite(X)):
            X = None
    if X is None or arr is None:
        arr, _ = _scan(
            lines,
            path=path,
            first_line=first_line,
            delimiter=delimiter,
            n_fields=n_fields,
            label_column=label_column,
            dtype=dtype,
            hint=hint,
        )
        X = arr[:, features].astype(dtype, order="C", copy=False)
    return X, None if label_column is None else np.ascontiguousarray(arr[:, label_column])


def _parse_names(lines: list[str], *, path: str, first_line: int, delimiter: str | None, n_fields: int,
                 label_column: int, dtype: np.dtype, features: np.ndarray, hint: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`parse_csv_bytes` for a label column of class names: :func:`numpy.loadtxt` reads the
    features as numbers and the label column as text (quoted fields honoured), once the lines are
    seen to have ``n_fields`` fields (``usecols`` alone would not refuse a longer line); any doubt
    goes to :func:`_scan`, the authority, as for numbers."""
    X = y = None
    load = {"delimiter": delimiter, "comments": "#", "quotechar": '"'}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if delimiter is None:  # one pass as text, which refuses a ragged line itself
                text = np.loadtxt(lines, dtype=str, ndmin=2, **load)
                if text.size == 0:
                    text = np.empty((0, n_fields), dtype=str)
                if text.shape[1] == n_fields:
                    arr, y = text[:, features].astype(np.float64), text[:, label_column]
            elif all(not _content(ln) or len(_split(_content(ln), delimiter)) == n_fields
                     for ln in lines if ln.count(delimiter) != n_fields - 1):
                arr = np.loadtxt(lines, usecols=features, dtype=np.float64, ndmin=2, **load)
                y = np.loadtxt(lines, usecols=[label_column], dtype=str, ndmin=1, **load)
                if arr.size == 0:
                    arr, y = np.empty((0, len(features))), np.empty(0, dtype=str)
        if y is not None:
            y = np.char.strip(y)
            with np.errstate(over="ignore"):
                X = arr.astype(dtype, order="C", copy=False)
            if not (len(y) == len(X) and np.all(np.isfinite(arr)) and np.all(np.isfinite(X))
                    and all(u and not is_number(u) for u in np.unique(y).tolist())):
                X = None
    except ValueError:
        X = None
    if X is None or y is None:
        arr, names = _scan(lines, path=path, first_line=first_line, delimiter=delimiter, n_fields=n_fields,
                           label_column=label_column, dtype=dtype, names=True, hint=hint)
        X = arr[:, features].astype(dtype, order="C", copy=False)
        y = np.array(names, dtype=str) if names else np.empty(0, dtype=str)
    return X, np.ascontiguousarray(y)


class CsvReader:
    """Stream a numeric CSV file as dense ``(X_chunk, y_chunk)`` pieces.

    Parameters
    ----------
    path : str or Path
        The file (raw, or gzip/bz2/xz compressed).
    label_column : int, str or False, default=None
        The label's column: an index (negative counts from the end, ``-1`` is
        the last column) or a name from the header.  ``None``: the header's
        column named ``label``, ``target``, ``class`` or ``y`` (any case), else
        column 0 (:func:`distlearn.data._labels.label_index`).  ``False``: no label
        column, every column is a feature and the pieces are ``(X_chunk, None)``.
    delimiter : str or None, default=","
        One-character field separator; ``None`` splits on runs of whitespace.
    header : {"auto", True, False}, default="auto"
        Whether the first (non-blank, non-comment) line names the columns.
        ``"auto"``: it does if any of its non-empty fields is not a number over a number (or
        nothing) in the next line: a first row of iris's values and ``setosa`` is data.
    dtype : {"float32", "float64"}, default="float32"
        Type of the feature values.  Labels are float64, or a str array when the label column
        holds class names (decided by the first data row; a column mixing numbers and names is
        refused, naming the line: :data:`ALL_OR_NONE`).
    chunk_bytes : int, default=None
        Bytes of text parsed at once (16 MiB by default); memory stays
        proportional to it.

    Attributes
    ----------
    n_features : int
        Columns other than the label (every column with ``label_column=False``).
    n_samples : int or None
        None until a full pass has counted the rows.
    has_header : bool
    columns : list of str or None
        Column names from the header.
    label_index : int or None
        The label's column as a non-negative index (None: no label column).
    labels_are_names : bool
        Whether the labels are class names (``y`` a str array) rather than numbers.

    Raises
    ------
    InputFormatError
        Up front: a missing or empty file, a header without data, a label
        column that is not in the header or out of range, a first data line
        whose field count differs from the header.  While iterating: any bad
        line, as ``FILE:LINE: message`` with the token.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "d.csv")
    >>> _ = open(p, "w").write("x1,x2,y\\n0.5,1,1\\n2,3,-1\\n")
    >>> r = CsvReader(p, label_column="y")
    >>> [(X.tolist(), y.tolist()) for X, y in r]
    [([[0.5, 1.0], [2.0, 3.0]], [1.0, -1.0])]
    """

    format = "csv"
    default_layout = "dense"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label_column: int | str | bool | None = None,
        delimiter: str | None = ",",
        header: bool | str = "auto",
        dtype: Any = "float32",
        chunk_bytes: int | None = None,
    ) -> None:
        self.path = os.fspath(path)
        if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "#\n\r"):
            raise ValueError(f"delimiter must be one character other than '#' and newlines, or None; got {delimiter!r}")
        if header not in ("auto", True, False):
            raise ValueError(f"header must be 'auto', True or False; got {header!r}")
        if isinstance(label_column, str) and header is False:
            raise ValueError(f"label_column={label_column!r} is a column name, which needs a header (header=False)")
        if label_column is not None and label_column is not False and (
                not isinstance(label_column, (str, int, np.integer)) or isinstance(label_column, bool)):
            raise ValueError(f"label_column must be an int, a column name, None or False; got {label_column!r}")
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64'; got {self.dtype.name!r}")
        chunk_bytes = TEXT_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        if not isinstance(chunk_bytes, (int, np.integer)) or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be a positive int; got {chunk_bytes!r}")
        self.chunk_bytes = int(chunk_bytes)
        self.delimiter = delimiter

        if not os.path.isfile(self.path):
            raise InputFormatError(self.path, "file not found")
        self.size_bytes = os.path.getsize(self.path)
        if self.size_bytes == 0:
            raise InputFormatError(self.path, "the file is empty")
        first, second = self._peek()
        if first is None:
            raise InputFormatError(self.path, "no data: the file holds only blank or comment lines")
        line1, text1 = first
        fields1 = _split(_content(text1), delimiter)
        if header == "auto":
            # a header names columns that hold numbers below it: a first line whose only words sit
            # over words (a label column of class names, no header) is data
            below = [] if second is None else [t.strip() for t in _split(_content(second[1]), delimiter)]
            header = any(t.strip() and not is_number(t.strip()) and (j >= len(below) or is_number(below[j]))
                         for j, t in enumerate(fields1))
        self.has_header = bool(header)
        if self.has_header:
            self.columns: list[str] | None = self._header_names(_content(text1))
            if second is None:
                raise InputFormatError(self.path, "no data rows after the header", line=line1)
            data_line, data_text = second
            self._skip_lines = line1  # lines up to and including the header
        else:
            self.columns = None
            data_line, data_text = line1, text1
            self._skip_lines = line1 - 1
        self._n_fields = len(self.columns) if self.columns is not None else len(fields1)

        if isinstance(label_column, str) and self.columns is None:
            raise InputFormatError(
                self.path,
                f"label column {label_column!r} is given by name, but the first line is not a header "
                "(all its fields are numbers); pass header=True or a column index",
                line=line1,
                token=label_column,
            )
        self.label_index: int | None = None if label_column is False else label_index(
            self.path, self.columns, self._n_fields, label_column, line=line1 if self.has_header else None)
        if self._n_fields < (1 if self.label_index is None else 2):
            raise InputFormatError(
                self.path, f"{self._n_fields} column(s): need a label column and at least one feature", line=line1
            )
        # The first data row decides whether the labels are numbers or class names (ALL_OR_NONE).
        data_fields = _split(_content(data_text), delimiter)
        first_label = ("0" if self.label_index is None or len(data_fields) != self._n_fields
                       else data_fields[self.label_index].strip())
        self.labels_are_names = bool(first_label) and not is_number(first_label)
        self._hint = ""
        if label_column is None and self.label_index == 0 and (self.columns is None or
                                                               self.columns[0].strip().lower() not in LABEL_NAMES):
            # column 0 by default: a word among the features most likely is the label
            self._hint = (f"; {describe_column(0, self.columns)} was taken as the label by default "
                          f"(no column named {', '.join(LABEL_NAMES)}): {PICK_LABEL}")
        # The first data line is checked now, so a header/data mismatch fails before any work.
        _scan(
            [data_text],
            path=self.path,
            first_line=data_line,
            delimiter=delimiter,
            n_fields=self._n_fields,
            label_column=self.label_index,
            dtype=self.dtype,
            names=self.labels_are_names,
            hint=self._hint,
        )
        self.n_features: int | None = self._n_fields - (self.label_index is not None)
        self.n_samples: int | None = None
        self.bytes_read = 0
        self.params: dict[str, Any] = {
            "label_column": False if self.label_index is None else self.label_index,
            "label_name": None if self.columns is None or self.label_index is None else self.columns[self.label_index],
            "delimiter": delimiter,
            "header": self.has_header,
        }
        #: How the messages name the label column (``label column 0 ('f1')``; None: there is none).
        self.label_what = None if self.label_index is None else describe_column(self.label_index, self.columns)

    def __repr__(self) -> str:
        label = "no label column" if self.label_index is None else f"label column {self.label_index}"
        return f"CsvReader({self.path!r}: {self.n_features} features, {label})"

    def _header_names(self, content: str) -> list[str]:
        if self.delimiter is None:
            return content.split()
        # csv honours quoted names ("a,b" is one column) and strips the quotes.
        names = next(csv.reader([content], delimiter=self.delimiter, skipinitialspace=True))
        return [n.strip() for n in names]

    def _peek(self) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
        """The first two non-blank, non-comment lines as (1-based line number, text)."""
        found: list[tuple[int, str]] = []
        try:
            with open_binary(self.path) as f:
                lineno = 0
                while len(found) < 2:
                    raw = f.readline()
                    if not raw:
                        break
                    lineno += 1
                    text = raw.decode("utf-8", "replace").rstrip("\r\n")
                    if _content(text):
                        found.append((lineno, text))
        except _STREAM_ERRORS as e:
            raise InputFormatError(self.path, f"compressed stream is truncated or corrupt ({e})") from e
        found += [None] * (2 - len(found))  # type: ignore[list-item]
        return found[0], found[1]

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        self.bytes_read = 0
        n_rows = 0
        with open_binary(self.path) as f:
            try:
                # skip the lines before the data (comments, blanks, the header)
                try:
                    for _ in range(self._skip_lines):
                        f.readline()
                except _STREAM_ERRORS as e:
                    raise InputFormatError(self.path, f"compressed stream is truncated or corrupt ({e})") from e
                for chunk, first_line in iter_line_chunks(
                    f, self.chunk_bytes, path=self.path, first_line=self._skip_lines + 1
                ):
                    self.bytes_read = f.raw_tell()
                    X, y = parse_csv_bytes(
                        chunk,
                        path=self.path,
                        first_line=first_line,
                        delimiter=self.delimiter,
                        n_fields=self._n_fields,
                        label_column=self.label_index,
                        dtype=self.dtype,
                        labels_are_names=self.labels_are_names,
                        hint=self._hint,
                    )
                    if X.shape[0]:
                        n_rows += X.shape[0]
                        yield X, y
            finally:
                self.bytes_read = f.raw_tell()
        self.n_samples = n_rows
