"""Which column is the label, and whether what it holds are classes.

Tables (CSV with a header, Parquet) name their columns: one named ``label``, ``target``,
``class`` or ``y`` (any case) is the label unless the caller says otherwise
(:func:`label_index`; of several, ``label`` before ``target`` before ``class`` before ``y``), or
say there is none (``label_column=False``: every column a feature, ``y`` None).  Whatever the
column, :class:`ClassLabels` watches the labels as they stream by and refuses, in one line that
says how to pick another column, labels that are not classes: non-integer values, or more
distinct values than half the rows (and more than :data:`MIN_REFUSED_CLASSES`) -- a feature or
an identifier taken for the label.  Class names (``setosa``; a str array) are checked by the same count.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ._errors import InputFormatError

__all__ = ["LABEL_NAMES", "MIN_REFUSED_CLASSES", "NO_LABEL", "PICK_LABEL", "ClassLabels", "label_index"]

#: Header names taken as the label column (compared case-insensitively), in this order of preference.
LABEL_NAMES = ("label", "target", "class", "y")

#: The ``distinct values > rows / 2`` rule refuses only more classes than this: a small
#: hand-made file with one example per class is not mistaken for a continuous column.
MIN_REFUSED_CLASSES = 10

#: The way out every refusal shows.
PICK_LABEL = "pick the label with --label-column NAME|INDEX (label_column=)"

#: How a table read without a label column (``label_column=False``) ends a bad value's message: the
#: value is a feature's, whatever its column.
NO_LABEL = " (--label-column none, label_column=False: every column is a feature)"


def label_index(path: str | os.PathLike[str], columns: Sequence[str] | None, n_columns: int,
                label_column: int | str | None, *, line: int | None = None) -> int:
    """The label's column as a non-negative index.

    ``label_column``: a name (needs ``columns``), an index (negative counts from the end), or
    ``None``: the column named one of :data:`LABEL_NAMES` if the header has one, else column 0.
    Of several such names the first in :data:`LABEL_NAMES` order wins (``label,x,y``: ``label``).
    ``line``: the header's line number, for the messages.
    """
    if label_column is None:
        if columns is None:
            return 0
        lowered = [c.strip().lower() for c in columns]
        for name in LABEL_NAMES:  # "label,x,y": the label is 'label', y a coordinate
            if name in lowered:
                _refuse_twice(path, lowered, name, line)
                return lowered.index(name)
        return 0
    if isinstance(label_column, str):
        if columns is None:
            raise InputFormatError(path, f"label column {label_column!r} is given by name, but the file has no "
                                         "header; give a column index", line=line, token=label_column)
        if label_column not in columns:
            shown = ", ".join(repr(c) for c in columns[:20]) + (", ..." if len(columns) > 20 else "")
            raise InputFormatError(path, f"label column {label_column!r} is not in the header (columns: {shown})",
                                   line=line, token=label_column)
        _refuse_twice(path, list(columns), label_column, line)
        return list(columns).index(label_column)
    lc = int(label_column)
    if not -n_columns <= lc < n_columns:
        raise InputFormatError(path, f"label column index {lc} is out of range for {n_columns} columns",
                               token=str(lc))
    return lc % n_columns


def _refuse_twice(path: str | os.PathLike[str], names: list[str], name: str, line: int | None) -> None:
    """A label named by a header that has it twice (``label,label,x``) is ambiguous: refused, never
    the first one taken silently (the other then trained as a feature)."""
    at = [i for i, c in enumerate(names) if c == name]
    if len(at) > 1:
        raise InputFormatError(path, f"the header has {len(at)} columns named {name!r} (columns "
                                     f"{', '.join(map(str, at))}); pick the label with --label-column INDEX",
                               line=line, token=name)


def describe_column(index: int, columns: Sequence[str] | None) -> str:
    """``label column 0 ('f1')`` (0-based, as --label-column counts), or ``label column 0``."""
    return f"label column {index}" + (f" ({columns[index]!r})" if columns is not None else "")


class ClassLabels:
    """Streamed labels checked to be classes; :meth:`add` each piece, :meth:`finish` at the end.

    ``what`` names the labels in the messages (``label column 0 ('f1')``); ``hint`` is the way
    out (:data:`PICK_LABEL` for tables, where another column may be the label).  Distinct values
    are counted up to ``rows / 2``-ish, never more than ``max_tracked`` of them held at once.
    """

    def __init__(self, path: str | os.PathLike[str], what: str, hint: str = PICK_LABEL,
                 max_tracked: int = 1 << 20) -> None:
        self.path = os.fspath(path)
        self.what = what
        self.hint = hint
        self.rows = 0
        self._values: set[float | str] = set()
        self._max_tracked = int(max_tracked)
        self._overflow = False  # more distinct values than we keep: certainly too many

    def add(self, y: np.ndarray) -> None:
        """Count a piece of labels: numbers (which must be integers) or class names (a str array)."""
        y = np.asarray(y)
        if y.dtype.kind not in "US":  # class names need no integer check
            y = np.asarray(y, dtype=np.float64)
            frac = np.flatnonzero(y != np.round(y))
            if frac.size:
                k = int(frac[0])
                raise InputFormatError(
                    self.path, f"{self.what} holds non-integer values (e.g. {float(y[k])!r} in row "
                               f"{self.rows + k + 1}), not class labels; {self.hint}")
        self.rows += len(y)
        if not self._overflow:
            self._values.update(np.unique(y).tolist())
            if len(self._values) > self._max_tracked:
                self._overflow = True
                self._values.clear()

    def finish(self) -> int:
        """The number of classes; raises when they are too many for the rows."""
        n = len(self._values)
        if self._overflow or (n > MIN_REFUSED_CLASSES and n > self.rows / 2):
            count = f"more than {self._max_tracked:,}" if self._overflow else f"{n:,}"
            raise InputFormatError(
                self.path, f"{self.what} has {count} distinct values in {self.rows:,} rows, not class labels; "
                           f"{self.hint}")
        return n
