"""File formats → chunk streams → zarr stores.

Readers (one per format) share a small protocol: after construction they
know ``path``, ``size_bytes``, ``n_features`` (``None`` if only the end of
the file tells), ``default_layout`` and ``params``; iterating yields
``(X_chunk, y_chunk)`` pieces in file order, in memory proportional to one
chunk.  Bad input raises :class:`InputFormatError` naming the file, line and
token.

:func:`convert` drives any reader into a :class:`~distlearn.data.store.DatasetWriter`;
for large uncompressed svmlight files it parses line-aligned byte ranges as
executor tasks (``executor=``, e.g. on Dask) and writes them in order, and Parquet
row groups likewise.  :func:`read_arrays` reads a whole file into memory (``train`` on a
data file) with the same label checks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._config import PARALLEL_PART_BYTES
from .._outputs import check_output
from ._errors import InputFormatError
from ._hashing import HASH, check_hash_bits, hash_columns
from .._tasks import OrderedMap, run_ordered
from .._urls import UrlError, is_url
from ._io import STREAM_ERRORS, open_binary, refuse_special
from ._labels import PICK_LABEL, ClassLabels
from ._parquet import MAGIC as PARQUET_MAGIC
from ._svmlight import (
    SvmlightReader,
    count_lines_before,
    line_aligned_ranges,
    parse_svmlight_range,
)
from .store import Dataset, DatasetWriter

__all__ = ["FORMATS", "InputFormatError", "SvmlightReader", "convert", "detect_format", "is_data_file", "open_reader",
           "read_arrays"]

FORMATS = ("svmlight", "idx", "csv", "dna", "rcv1", "parquet")

_SUFFIXES = {
    ".svm": "svmlight",
    ".svmlight": "svmlight",
    ".libsvm": "svmlight",
    ".csv": "csv",
    ".tsv": "csv",
    ".idx": "idx",
    ".fa": "dna",
    ".fasta": "dna",
    ".fna": "dna",
    ".parquet": "parquet",
    ".pq": "parquet",
}


_IUPAC = frozenset(b"ACGTNRYSWKMBDHVacgtnryswkmbdhv")


def _dna_lines(head: bytes) -> bool:
    """Whether the first line reads ``label<TAB>sequence`` (Sonnenburg's splice-site files)."""
    first = next((ln for ln in head.split(b"\n") if ln.strip()), b"").rstrip(b"\r")
    parts = first.split(b"\t")
    return len(parts) == 2 and len(parts[1]) >= 8 and set(parts[1]) <= _IUPAC


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a file's format from its name, then from its first bytes (a directory: of Parquet parts)."""
    if os.path.isdir(path):
        from ._parquet import parquet_parts

        parquet_parts(path)  # refuses a directory that is not one table's Parquet parts
        return "parquet"
    name = Path(path).name.lower()
    for z in (".gz", ".bz2", ".xz"):
        if name.endswith(z):
            name = name[: -len(z)]
    if "idx1" in name or "idx3" in name or "-ubyte" in name:
        return "idx"
    suffix = Path(name).suffix
    try:
        with open_binary(path) as f:
            head = f.read(4096)
    except STREAM_ERRORS:  # a corrupt compressed stream: its reader says so, naming the line
        head = b""
    if head[:4] == PARQUET_MAGIC:  # by content, whatever the name
        return "parquet"
    if suffix in _SUFFIXES and not (suffix in (".tsv", ".txt") and _dna_lines(head)):
        return _SUFFIXES[suffix]
    if head[:2] == b"\x00\x00" and len(head) >= 4 and head[2] in (8, 9, 11, 12, 13, 14):
        return "idx"
    if head[:1] == b">" or _dna_lines(head):
        return "dna"
    if head.lstrip()[:3] in (b".I ", b".I\t"):
        return "rcv1"
    first = next((ln for ln in head.split(b"\n") if ln.strip() and not ln.startswith(b"#")), b"")
    toks = first.split(b"#")[0].split()
    if len(toks) >= 2 and all(b":" in t for t in toks[1:]):
        return "svmlight"
    if b"," in first:
        return "csv"
    raise InputFormatError(path, "cannot tell the file's format; pass --format svmlight|idx|csv|dna|rcv1|parquet")


def _refuse_url(path: str | os.PathLike[str]) -> None:
    """A data file named by a URL is told apart from a local file (never looked up as one)."""
    if is_url(os.fspath(path)):
        raise UrlError(f"{os.fspath(path)}: data files are read from local paths (stores can be URLs); "
                       "copy it here first")


def open_reader(path: str | os.PathLike[str], *, format: str | None = None, **options: Any) -> Any:
    """The reader for ``path`` (format given or detected); options go to its constructor.

    svmlight: ``zero_based``, ``n_features``, ``dtype``, ``chunk_bytes``;
    idx: ``labels`` (images' companion file; inferred from the name when left out),
    ``dtype``, ``chunk_rows``; csv: ``label_column``, ``delimiter``, ``header``,
    ``dtype``, ``chunk_bytes``; parquet (a file or a directory of parts): ``label_column``, ``dtype``.
    ``label_column=False`` (csv, parquet; refused for the others): no label column, every column a
    feature, the pieces ``(X_chunk, None)``.
    """
    _refuse_url(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    refuse_special(path)
    fmt = format or detect_format(path)
    _refuse_no_label(fmt, options, path)
    if fmt == "svmlight":
        return SvmlightReader(path, **options)
    if fmt == "idx":
        from ._idx import IdxReader

        return IdxReader(path, **options)
    if fmt == "csv":
        from ._csv import CsvReader

        return CsvReader(path, **options)
    if fmt == "parquet":
        from ._parquet import ParquetReader

        return ParquetReader(path, **options)
    raise ValueError(f"format must be one of {FORMATS}; got {fmt!r}")


def is_data_file(path: Any) -> bool:
    """Whether ``path`` names a data file the readers take (a file, or a directory that is not a
    zarr store: Parquet parts) rather than a store or a view ``STORE#TARGET``."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    path = os.fspath(path)
    if os.path.isfile(path):
        return True
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "zarr.json")):
        return False
    from ._parquet import is_parquet_dir

    return is_parquet_dir(path)  # else a store's directory, damaged or not: the store's errors say what is wrong


def input_bytes(paths: list[str]) -> int:
    """The bytes of the input files (a directory of Parquet parts: the parts')."""
    from ._parquet import parquet_parts

    return sum(os.path.getsize(f) for p in paths for f in (parquet_parts(p) if os.path.isdir(p) else [p]))


def read_arrays(path: str | os.PathLike[str], *, format: str | None = None, dtype: str = "float32",
                budget: int | None = None, **options: Any) -> tuple[Any, Any]:
    """A whole data file in memory as ``(X, y)`` (CSR for sparse formats, else dense), its labels
    checked to be classes as :func:`convert` checks them.

    A file whose arrays would take more than ``budget`` bytes (default: a quarter of this
    machine's memory) is refused before it is read, in one line that says to convert it to a
    store (which streams it block by block).  Compressed text is counted at five times its size.
    """
    import numpy as np
    import scipy.sparse as sp

    from .store import _memory_budget

    path = os.fspath(path)
    fmt = format or detect_format(path)
    needs_labels(options, "training and evaluating need the labels")
    reader = open_reader(path, format=fmt, **_reader_options(fmt, {**options, "dtype": dtype}, path))
    if reader.default_layout == "dense" and reader.n_samples and reader.n_features:
        need = reader.n_samples * reader.n_features * np.dtype(dtype).itemsize
    else:  # text: the arrays take about what the text does; the pieces and their concatenation twice that
        need = 2 * reader.size_bytes * (5 if getattr(reader, "compression", None) else 1)
    budget = _memory_budget() if budget is None else budget
    if need > budget:
        raise InputFormatError(path, f"about {need / 2**20:,.0f} MiB in memory, more than {budget / 2**20:,.0f} MiB "
                                     f"(a quarter of this machine's memory); convert it to a store first, which "
                                     f"streams it: distlearn convert {path} {Path(path).stem}.zarr")
    labels = class_labels(reader)
    Xs, ys = [], []
    for X, y in reader:
        if labels is not None:
            labels.add(y)
        Xs.append(X)
        ys.append(y)
    if labels is not None:
        labels.finish()
    if not ys:
        raise InputFormatError(path, "no examples")
    if sp.issparse(Xs[0]):
        width = max(X.shape[1] for X in Xs)
        X = sp.vstack([sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width)) for X in Xs],
                      format="csr")
    else:
        X = np.concatenate(Xs)
    return X, np.concatenate(ys)


#: The reader options each format takes (the CLI's flags are their names with dashes: ``--zero-based``).
READER_OPTIONS: dict[str, frozenset[str]] = {
    "svmlight": frozenset({"zero_based", "n_features", "dtype", "chunk_bytes"}),
    "idx": frozenset({"labels", "dtype", "chunk_rows"}),
    "csv": frozenset({"label_column", "delimiter", "header", "dtype", "chunk_bytes"}),
    "dna": frozenset({"labels", "features", "degree", "k", "iupac"}),
    "rcv1": frozenset({"qrels", "hierarchy", "weighting", "normalize", "min_df", "vocabulary", "hash_bits"}),
    "parquet": frozenset({"label_column", "dtype"}),
}


#: The formats a table without a label column (``label_column=False``) can be read from.
NO_LABEL_FORMATS = ("csv", "parquet")


def _refuse_no_label(fmt: str, options: dict[str, Any], path: Any = None) -> None:
    if options.get("label_column") is False and fmt not in NO_LABEL_FORMATS:
        raise ValueError(f"label_column=False (--label-column none) reads a CSV or Parquet table without a label "
                         f"column; {'the input' if path is None else os.fspath(path)} is {fmt} input")


def needs_labels(options: dict[str, Any], why: str) -> None:
    """Refuse ``label_column=False`` (a table read without labels) where the labels are needed, saying ``why``."""
    if options.get("label_column") is False:
        raise ValueError(f"label_column=False (--label-column none: a table without a label column) is for predict; "
                         f"{why}")


def _reader_options(fmt: str, options: dict[str, Any], path: Any = None) -> dict[str, Any]:
    """``options`` that apply to ``fmt`` input (None values dropped); any other is refused in one line."""
    _refuse_no_label(fmt, options, path)
    allowed = READER_OPTIONS[fmt]
    bad = {k for k, v in options.items() if v is not None and k not in allowed}
    if bad:
        raise ValueError(f"option(s) {sorted(bad)} do not apply to {fmt} input (allowed: {sorted(allowed)})")
    return {k: v for k, v in options.items() if v is not None and k in allowed}


def convert(
    input: str | os.PathLike[str] | list[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    format: str | None = None,
    layout: str | None = None,
    dtype: str = "float32",
    block_rows: int | None = None,
    n_features: int | None = None,
    overwrite: bool = False,
    executor: OrderedMap | None = None,
    part_bytes: int = PARALLEL_PART_BYTES,
    progress: bool | Callable[[int, int], None] = False,
    **reader_options: Any,
) -> Dataset:
    """Convert a data file into a distlearn zarr store, in constant memory.

    Parameters
    ----------
    input : str or Path, or a list of them (RCV1-v2 only)
        svmlight/LIBSVM, MNIST IDX (images; labels inferred or ``labels=``), CSV, Parquet (a file or a
        directory of parts: :class:`~distlearn.data._parquet.ParquetReader`), DNA sequences
        (FASTA or ``label<TAB>sequence``; ``features="wd"|"onehot"|"spectrum"``, ``degree``, ``k``,
        ``iupac``: see :mod:`distlearn.data._dna`), or RCV1-v2 token or vector files with
        ``qrels=`` (``hierarchy``, ``weighting``, ``normalize``, ``min_df``, ``vocabulary``: see
        :mod:`distlearn.data._rcv1`), optionally compressed.
    output : str or Path
        The store to create.  An existing path is refused unless ``overwrite=True``;
        it is replaced only once the new store is complete.
    format : {"svmlight", "idx", "csv", "dna", "rcv1", "parquet"}, default=None
        Detected from the name and content when left out.
    layout : {"csr", "dense"}, default=None
        ``"csr"`` for svmlight, ``"dense"`` for IDX and CSV by default.  A dense store
        of an svmlight file without ``n_features`` costs a first pass to find the width.
    dtype : {"float32", "float64"}, default="float32"
    block_rows : int, default=None
        Rows per stored block (see :class:`~distlearn.data.store.DatasetWriter`).
    n_features : int, default=None
        Column count; rows with more features are errors.
    executor : executor, default=None
        Where to parse: an executor of :func:`distlearn.distributed.executor_for` (anything with
        ``map_ordered``: :class:`distlearn._tasks.OrderedMap`).  With one, an uncompressed svmlight
        file is parsed as tasks over line-aligned byte ranges of ``part_bytes``, RCV1-v2 files as
        tasks per range or file and Parquet as a task per row group; results are written in file
        order, so the store is the same.
        ``None``: this process.
    progress : bool or callable
        ``True`` shows a progress bar (bytes of input); a callable gets ``(done, total)``.
    hash_bits : int, default=None
        svmlight and RCV1-v2 input: hash feature indices (RCV1 tokens) into ``2**hash_bits``
        columns (MurmurHash3, as Vowpal Wabbit's ``-b`` and scikit-learn's ``HashingVectorizer``;
        :mod:`distlearn.data._hashing`), so open-ended index spaces fit a bounded width.
    **reader_options
        Format options (``zero_based``, ``labels``, ``label_column``, ``delimiter``, ``header``, ...).

    Returns
    -------
    Dataset
        The new store, opened.

    Raises
    ------
    InputFormatError
        Bad input, naming the file (line, token); for CSV, Parquet and svmlight also labels that
        are not classes (non-integer, or more than ``max(10, rows / 2)`` distinct values:
        :class:`~distlearn.data._labels.ClassLabels`), in one line showing ``--label-column``.
    """
    if "client" in reader_options:
        raise TypeError("convert(client=) is now executor=: with distlearn.distributed.executor_for(scheduler) as "
                        "ex: convert(..., executor=ex)")
    inputs = [str(p) for p in input] if isinstance(input, (list, tuple)) else [str(input)]
    for p in inputs:
        _refuse_url(p)
    if executor is not None:  # workers open the files by path, from their own working directory
        inputs = [os.path.abspath(p) for p in inputs]
    if not inputs:
        raise ValueError("no input files")
    for p in inputs:
        if Path(p).resolve() == Path(output).resolve():
            raise ValueError("input and output are the same path")
    input = inputs[0]
    fmt = format or ("rcv1" if reader_options.get("qrels") is not None else detect_format(input))
    if len(inputs) > 1 and fmt != "rcv1":
        raise ValueError(f"several input files are read only for RCV1-v2 (--format rcv1); {fmt} takes one")
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}; got {fmt!r}")
    hash_bits = reader_options.pop("hash_bits", None) if fmt != "rcv1" else None
    if hash_bits is not None:
        hash_bits = check_hash_bits(hash_bits)
        if fmt != "svmlight":
            raise ValueError(f"--hash-bits hashes svmlight feature indices and RCV1-v2 tokens, not {fmt} columns")
        if n_features is not None or layout == "dense":
            raise ValueError("--hash-bits sets the width (2**bits columns, sparse): --n-features and --dense "
                             "do not apply")
    if fmt == "svmlight":
        reader_options = {**reader_options, "n_features": n_features}
    needs_labels(reader_options, "a store holds labels")
    opts = _reader_options(fmt, reader_options, input)
    named = [opts[k] for k in ("labels", "qrels", "hierarchy") if isinstance(opts.get(k), (str, os.PathLike))]
    check_output(output, "store", overwrite=overwrite, inputs=inputs + named)  # before any work
    if fmt == "rcv1":
        from ._rcv1 import convert_rcv1

        if layout == "dense" or n_features is not None:
            raise ValueError("RCV1-v2 input is written as a sparse store over its vocabulary; "
                             "--dense and --n-features do not apply")
        if opts.get("qrels") is None:
            raise ValueError("RCV1-v2 input needs its topic file: qrels= (--qrels rcv1-v2.topics.qrels)")
        bar = _Progress(progress, sum(os.path.getsize(p) for p in inputs), Path(input).name)
        try:
            return convert_rcv1(inputs, output, dtype=dtype, block_rows=block_rows, overwrite=overwrite,
                                executor=executor, part_bytes=part_bytes, progress=bar.update_to if progress else None,
                                **opts)
        finally:
            bar.close()
    if fmt == "dna":
        from ._dna import convert_sequences

        if layout == "dense" or n_features is not None or executor is not None:
            raise ValueError("DNA input is written as a sparse feature map (--features onehot|wd|spectrum); "
                             "--dense, --n-features and parallel parsing do not apply")
        return convert_sequences(input, output, dtype=dtype, block_rows=block_rows, overwrite=overwrite, **opts)
    # Parsed in float64 and cast by the writer, which counts the values a float32 store would round
    # to zero (refused) or to infinity (non-finite: refused): the reader never hides them.
    reader = open_reader(input, format=fmt, dtype="float64", **opts)
    layout = layout or reader.default_layout
    width = n_features if n_features is not None else reader.n_features
    if n_features is not None and reader.n_features is not None and reader.n_features > n_features:
        raise InputFormatError(input, f"rows have {reader.n_features} features, more than n_features={n_features}")
    parallel = executor is not None and fmt == "svmlight" and getattr(reader, "compression", None) is None
    labels = class_labels(reader)
    if layout == "dense" and width is None:
        width = _svmlight_width(reader, executor if parallel else None, part_bytes)
    params = {"format": fmt, **reader.params}
    if hash_bits is not None:
        layout, width = "csr", 1 << hash_bits
        params.update(hash_bits=hash_bits, hash=HASH)
    bar = _Progress(progress, reader.size_bytes, Path(input).name)
    with DatasetWriter(
        output,
        layout=layout,
        n_features=width,
        dtype=dtype,
        block_rows=block_rows,
        source=os.path.abspath(input),
        params=params,
        overwrite=overwrite,
    ) as writer:
        try:
            if parallel:
                _parallel_svmlight(reader, writer, executor, part_bytes, bar, hash_bits, labels)
            else:
                pieces = reader.iter_pieces(executor) if fmt == "parquet" else reader
                for X, y in pieces:
                    if labels is not None:
                        labels.add(y)
                    writer.append(X if hash_bits is None else hash_columns(X, hash_bits, 1 - reader.zero_based), y)
                    bar.update_to(reader.bytes_read)
            if labels is not None:
                labels.finish()
            bar.update_to(reader.size_bytes)
            return writer.close()
        except InputFormatError:
            raise
        except ValueError as exc:  # the writer's refusals ("row R: ...") name the input file too
            raise InputFormatError(input, str(exc)) from None
        finally:
            bar.close()


def class_labels(reader: Any) -> ClassLabels | None:
    """The check that ``reader``'s labels are classes (:class:`ClassLabels`): for tables (CSV,
    Parquet: another column may be the label) and svmlight files; None for the other formats."""
    if reader.format in ("csv", "parquet"):
        return ClassLabels(reader.path, reader.label_what, PICK_LABEL)
    if reader.format == "svmlight":
        return ClassLabels(reader.path, "the labels (each line's first field)",
                           "distlearn trains classifiers, whose labels are class numbers")
    return None


def _svmlight_width(reader: SvmlightReader, executor: OrderedMap | None, part_bytes: int) -> int:
    """One pass to find an svmlight file's column count (needed up front for a dense store)."""
    width = 0
    if executor is not None:
        for part in _iter_parts(reader, executor, part_bytes):
            width = max(width, part["n_cols"])
    else:
        for X, _ in reader:
            width = max(width, X.shape[1])
    return max(width, 1)


def _iter_parts(reader: SvmlightReader, executor: OrderedMap | None, part_bytes: int):
    """Parsed byte ranges in file order, keeping a bounded number of tasks in flight."""
    jobs = [(reader.path, a, b) for a, b in line_aligned_ranges(reader.path, part_bytes)]
    kwargs = {"zero_based": reader.zero_based, "n_features": reader.n_features, "dtype": reader.dtype.name}
    for part in run_ordered(executor, parse_svmlight_range, jobs, **kwargs):
        if "error" in part:
            line, reason, token = part["error"]
            before = count_lines_before(reader.path, part["start"])
            raise InputFormatError(reader.path, reason, line=before + line, token=token)
        yield part


def _parallel_svmlight(reader: SvmlightReader, writer: DatasetWriter, executor: OrderedMap | None, part_bytes: int,
                       bar: Any, hash_bits: int | None = None, labels: ClassLabels | None = None) -> None:
    import scipy.sparse as sp

    n = 0
    done = 0
    for part in _iter_parts(reader, executor, part_bytes):
        rows = len(part["y"])
        if labels is not None:
            labels.add(part["y"])
        if rows:
            width = writer.n_features or part["n_cols"]
            if hash_bits is None:
                X = sp.csr_matrix((part["data"], part["indices"], part["indptr"]),
                                  shape=(rows, max(width, part["n_cols"])))
            else:
                X = hash_columns(sp.csr_matrix((part["data"], part["indices"], part["indptr"]),
                                               shape=(rows, part["n_cols"])), hash_bits, 1 - reader.zero_based)
            writer.append(X, part["y"])
            n += rows
        done += part["n_bytes"]
        bar.update_to(done)
    if n == 0:
        raise InputFormatError(reader.path, "no examples: the file holds only blank or comment lines")


class _Progress:
    """A tqdm bar over input bytes, a user callback, or nothing."""

    def __init__(self, progress: Any, total: int, desc: str) -> None:
        self._cb = progress if callable(progress) else None
        self._bar = None
        self.total = total
        self.n = 0
        if progress is True:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, leave=False)

    def update_to(self, done: int) -> None:
        done = int(min(done, self.total))
        if self._bar is not None and done > self.n:
            self._bar.update(done - self.n)
        if self._cb is not None:
            self._cb(done, self.total)
        self.n = max(self.n, done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
