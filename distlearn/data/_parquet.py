"""Parquet tables (one file, or a directory of parts as Dask and Spark write them) as dense pieces.

Every column but the label is a feature and must be numeric (integers, floats, booleans); the
label is numbers or class names (a string column, whose values come back as a str array);
the label column is picked as for CSV (:func:`distlearn.data._labels.label_index`: a column
named ``label``, ``target``, ``class`` or ``y`` unless ``label_column`` says otherwise;
``label_column=False``: none, every column is a feature and ``y`` is None).
The parts of a directory are its files not starting with ``_`` or ``.`` (``_metadata``,
``_SUCCESS``), in natural order (``part.2`` before ``part.10``, as Dask reads them); they
must share one schema.  A piece is one row group: :func:`read_row_group` reads it, in this
process or as an executor task (``ParquetReader.iter_pieces(executor)``), so memory per task
is one row group's columns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._tasks import OrderedMap, run_ordered
from ._errors import InputFormatError
from ._labels import NO_LABEL, PICK_LABEL, describe_column, label_index

__all__ = ["MAGIC", "ParquetReader", "is_parquet_dir", "parquet_parts", "read_row_group"]

#: The first (and last) four bytes of every Parquet file.
MAGIC = b"PAR1"


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def parquet_parts(path: str | os.PathLike[str]) -> list[str]:
    """The Parquet files of ``path``: itself, or a directory's data files in natural order."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return [path]
    names = sorted((n for n in os.listdir(path) if not n.startswith(("_", "."))), key=_natural)
    subdirs = [n for n in names if os.path.isdir(os.path.join(path, n))]
    if subdirs:
        raise InputFormatError(path, f"holds directories ({subdirs[0]!r}, ...): partitioned datasets are not read; "
                                     "give a directory of Parquet files")
    if not names:
        raise InputFormatError(path, "an empty directory: no Parquet parts")
    for n in names:
        with open(os.path.join(path, n), "rb") as f:
            if f.read(4) != MAGIC:
                raise InputFormatError(os.path.join(path, n), "not a Parquet file (no PAR1 magic) in a directory "
                                                              "of Parquet parts")
    return [os.path.join(path, n) for n in names]


def is_parquet_dir(path: str | os.PathLike[str]) -> bool:
    """Whether directory ``path`` holds Parquet parts (a ``.parquet``/``.pq`` name, or a file with the magic)."""
    for entry in os.scandir(path):
        if entry.name.startswith(("_", ".")) or not entry.is_file():
            continue
        if entry.name.lower().endswith((".parquet", ".pq")):
            return True
        with open(entry.path, "rb") as f:
            if f.read(4) == MAGIC:
                return True
    return False


def _kind(t: Any) -> str | None:
    """Why an arrow type is not a numeric feature (None: it is)."""
    import pyarrow as pa

    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return None
    return str(t)


def _is_text(t: Any) -> bool:
    """Whether an arrow type holds class names: strings, or a dictionary of them (pandas' category)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def read_row_group(path: str, row_group: int, first_row: int, *, columns: list[str], label: int | None,
                   dtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``(X, y)`` of row group ``row_group`` of ``path``: X in ``dtype`` (C order), y float64, or a
    str array when the label column holds strings (class names).

    ``columns``: every column, ``label`` the label's index among them (None: no label column, every
    column a feature, ``y`` None); ``first_row``: the
    group's first row in the whole table (1-based row numbers in the messages).
    Missing or non-finite values raise :class:`InputFormatError` naming the column and the row.
    """
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path).read_row_group(row_group, columns=columns)
    except OSError as e:
        raise InputFormatError(path, f"row group {row_group} cannot be read ({e})") from None
    n = table.num_rows
    X = np.empty((n, len(columns) - (label is not None)), dtype=dtype)
    y = None if label is None else np.empty(n, dtype=np.float64)
    j = 0
    for i, name in enumerate(columns):
        col = table.column(i)
        if col.null_count:
            k = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputFormatError(path, f"column {name!r} has a missing value in row {first_row + k + 1}")
        if i == label and _is_text(col.type):
            y = np.array(col.to_pylist(), dtype=str).reshape(n)
            continue
        v = np.asarray(col.to_numpy(), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            k = int(bad[0])
            raise InputFormatError(path, f"column {name!r} holds {float(v[k])!r} in row {first_row + k + 1}: "
                                         "values must be finite")
        if i == label:
            assert y is not None
            y[:] = v
        else:
            X[:, j] = v
            j += 1
    return X, y


def _refuse_text_feature(pieces: list[tuple[str, int, int]], i: int, name: str) -> None:
    """A column of strings read as a feature (``label_column=False``): its first value named as a CSV's
    would be (``value 'x0' in column 1 is not a number``), read from the one column of the first row
    group that has a value; a column of strings that read as numbers is left to the caller's message."""
    import pyarrow.parquet as pq

    from .._outputs import is_number

    for part, g, _ in pieces:
        try:
            values = pq.ParquetFile(part).read_row_group(g, columns=[name]).column(0).drop_null()
        except OSError as e:
            raise InputFormatError(part, f"row group {g} cannot be read ({e})") from None
        if len(values):
            v = str(values[0].as_py())
            if not is_number(v):
                raise InputFormatError(part, f"value {v!r} in column {i + 1} is not a number{NO_LABEL}")
            return


class ParquetReader:
    """Stream a Parquet file, or a directory of parts, as dense ``(X_chunk, y_chunk)`` pieces.

    Parameters
    ----------
    path : str or Path
        A Parquet file or a directory of Parquet files (one table cut into parts).
    label_column : int, str or False, default=None
        The label's column: a name, an index (negative counts from the end), or ``None``:
        the column named ``label``, ``target``, ``class`` or ``y`` (any case), else column 0.
        ``False``: no label column, every column is a feature and the pieces are ``(X_chunk, None)``.
    dtype : {"float32", "float64"}, default="float32"
        Type of the feature values.  Labels are float64, or a str array when the label column
        holds strings (class names; a dictionary of strings, pandas' category, too).

    Attributes
    ----------
    parts : list of str
    columns : list of str
    label_index : int or None
        None: no label column.
    n_features, n_samples : int
        Known up front from the files' footers.
    pieces : list of (part, row group, first row)

    Raises
    ------
    InputFormatError
        Up front: parts with different columns, a non-numeric column (naming it), a label
        column not in the table.  While iterating: a missing or non-finite value.
    """

    format = "parquet"
    default_layout = "dense"

    def __init__(self, path: str | os.PathLike[str], *, label_column: int | str | bool | None = None,
                 dtype: Any = "float32") -> None:
        import pyarrow.parquet as pq

        self.path = os.fspath(path)
        self.dtype = np.dtype(dtype)
        if self.dtype.name not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64'; got {self.dtype.name!r}")
        if not os.path.exists(self.path):
            raise InputFormatError(self.path, "file not found")
        self.parts = parquet_parts(self.path)
        schema = None
        self.pieces: list[tuple[str, int, int]] = []
        rows = 0
        for part in self.parts:
            try:
                meta = pq.ParquetFile(part).metadata
            except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
                raise InputFormatError(part, f"not a readable Parquet file ({e})") from None
            s = meta.schema.to_arrow_schema()
            if schema is None:
                schema = s
            elif s.names != schema.names or s.types != schema.types:
                raise InputFormatError(part, f"its columns differ from {os.path.basename(self.parts[0])}'s: "
                                             "the parts of one table share one schema")
            for g in range(meta.num_row_groups):
                self.pieces.append((part, g, rows))
                rows += meta.row_group(g).num_rows
        assert schema is not None
        self.columns: list[str] = list(schema.names)
        if label_column is not None and label_column is not False and (
                not isinstance(label_column, (str, int, np.integer)) or isinstance(label_column, bool)):
            raise ValueError(f"label_column must be an int, a column name, None or False; got {label_column!r}")
        if len(self.columns) < (1 if label_column is False else 2):
            raise InputFormatError(self.path, f"{len(self.columns)} column(s): need a label column and at least "
                                              "one feature")
        self.label_index: int | None = None if label_column is False else label_index(
            self.path, self.columns, len(self.columns), label_column)
        for i, (name, t) in enumerate(zip(self.columns, schema.types)):
            why = _kind(t)
            if i == self.label_index:
                if why is not None and not _is_text(t):
                    raise InputFormatError(self.path, f"the label column {name!r} is {why}: labels are numbers "
                                                      "or class names (strings)")
            elif why is not None:
                if self.label_index is None and _is_text(t):
                    _refuse_text_feature(self.pieces, i, name)
                hint = ("features must be numeric (integers, floats, booleans); drop or encode it first"
                        + (f"; {PICK_LABEL} if {name!r} holds the class names"
                           if _is_text(t) and self.label_index is not None else ""))
                raise InputFormatError(self.path, f"column {name!r} is {why}, not numeric; {hint}"
                                                  + (NO_LABEL if self.label_index is None else ""))
        #: Whether the labels are class names (``y`` a str array) rather than numbers.
        self.labels_are_names = self.label_index is not None and _is_text(schema.types[self.label_index])
        if rows == 0:
            raise InputFormatError(self.path, "no rows")
        self.n_samples: int | None = rows
        self.n_features: int | None = len(self.columns) - (self.label_index is not None)
        self.size_bytes = sum(os.path.getsize(p) for p in self.parts)
        self.bytes_read = 0
        #: How the messages name the label column (None: there is none).
        self.label_what = None if self.label_index is None else describe_column(self.label_index, self.columns)
        self.params: dict[str, Any] = {
            "label_column": False if self.label_index is None else self.label_index,
            "label_name": None if self.label_index is None else self.columns[self.label_index],
            "parts": len(self.parts)}

    def __repr__(self) -> str:
        label = "no label column" if self.label_index is None else f"label {self.columns[self.label_index]!r}"
        return f"ParquetReader({self.path!r}: {len(self.parts)} part(s), {self.n_features} features, {label})"

    def iter_pieces(self, executor: OrderedMap | None = None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """The row groups in table order, read here (``None``) or as tasks of ``executor``."""
        self.bytes_read = 0
        done = 0
        for X, y in run_ordered(executor, read_row_group, self.pieces, columns=self.columns,
                                label=self.label_index, dtype=self.dtype.name):
            done += len(X)
            self.bytes_read = int(self.size_bytes * done / max(1, self.n_samples or 1))
            if len(X):
                yield X, y

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        return self.iter_pieces(None)

