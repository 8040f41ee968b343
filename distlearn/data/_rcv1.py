"""RCV1-v2 as distributed (Lewis, Yang, Rose & Li 2004, the LYRL2004 files): tokens, vectors, topics.

Files
-----
Token files ``lyrl2004_tokens_{train,test_pt0,test_pt1,test_pt2,test_pt3}.dat[.gz]``
    One block per document: a line ``.I <docid>``, a line ``.W``, the document's stemmed
    tokens separated by white space over one or more lines, and a blank line.
Vector files ``lyrl2004_vectors_{train,test_pt0..3}.dat[.gz]``
    One line per document, ``<docid> <term id>:<value> ...``, term ids counting from 1
    (LYRL2004's ltc weights, unit-norm rows).  Read as svmlight with the docid in the
    label's place.
Topic qrels ``rcv1-v2.topics.qrels[.gz]``
    One line per (topic, document) pair: ``<TOPIC> <docid> 1``.  The distributed qrels are
    hierarchy-expanded: a document filed under C151 also carries C15 and CCAT.
Topic hierarchy ``rcv1.topics.hier.orig`` (optional)
    ``parent: <P>  child: <C>  child-description: <text>`` per line.

Every file may be gzip, bz2 or xz compressed (detected from its content).

Top-level labels and OTHER
--------------------------
RCV1-v2's topic tree has four top-level categories, CCAT, ECAT, GCAT and MCAT.  Each topic is
mapped to the top-level category above it -- through the hierarchy file when one is given,
otherwise by RCV1's naming rule (the codes under CCAT, ECAT, GCAT, MCAT start with C, E, G, M).
A topic under none of them counts as OTHER.  A document's top-level set is the set of
categories of its topics, OTHER left out when a real category is present:

* exactly one of CCAT/ECAT/GCAT/MCAT -> that category (codes 0, 1, 2, 3);
* none of them (all its topics are outside the four trees) -> ``OTHER`` (code 4);
* two or more -> multi-category, code -1 (``MULTI``), left out of the pairwise problems.

This is distlearn's reading of the fifth class "OTHER" of Dekel et al.'s experiments, which
the RCV1-v2 distribution does not define.  In the published qrels every document carries one
of the four categories, so OTHER is empty there and the four "X vs OTHER" problems have no
negative documents; ``write_rcv1_corpus`` plants OTHER documents so those problems can run.

Features of token files
-----------------------
The vocabulary is every distinct token of the files read (a first pass, run in parallel and
merged), sorted, optionally those in at least ``min_df`` documents.  A token seen ``c`` times
in a document gives the value

* ``"log"`` (default): ``log2(1 + c)``, as in Dekel, Shalev-Shwartz & Singer's experiments;
* ``"tf"``: ``c``;  ``"binary"``: ``1``;
* ``"tfidf"``: ``(1 + ln c) ln(N / df)`` (LYRL2004's ltc weight before normalising; ``N``
  documents in the vocabulary pass, ``df`` of them contain the token);

and ``normalize=True`` scales every row to unit Euclidean norm.
"""

from __future__ import annotations

import itertools
import os
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._config import NUMBA_FLAGS, PARALLEL_PART_BYTES, TEXT_CHUNK_BYTES
from ._errors import InputFormatError
from ._hashing import HASH, check_hash_bits, hash_columns, hash_token, token_column
from .._tasks import OrderedMap, run_ordered
from ._io import STREAM_ERRORS, iter_line_chunks, open_binary, sniff_compression, strip_bom
from ._svmlight import _blank as _space  # bytes.split()'s white space
from ._svmlight import line_aligned_ranges

__all__ = [
    "LABEL_NAMES",
    "TOP_LEVEL",
    "WEIGHTINGS",
    "Topics",
    "Vocabulary",
    "convert_rcv1",
    "read_hierarchy",
    "read_qrels",
    "read_token_documents",
    "write_rcv1_corpus",
]

TOP_LEVEL = ("CCAT", "ECAT", "GCAT", "MCAT")
OTHER, MULTI = 4, -1
#: The store's derived single-label column: code -> name.
LABEL_NAMES = {MULTI: "MULTI", 0: "CCAT", 1: "ECAT", 2: "GCAT", 3: "MCAT", OTHER: "OTHER"}
WEIGHTINGS = ("log", "tf", "binary", "tfidf")
_PIECE_BYTES = 4 << 20

_HEADER = re.compile(rb"^\.I[ \t]+(\S*)[^\n]*\n", re.MULTILINE)
_FIELD = re.compile(rb"(?:^|\s)(\.[IW])(?:\s|$)")


# =========================================================================== topics


@dataclass(frozen=True)
class Topics:
    """The qrels as an indicator matrix: row ``i`` lists the topics of document ``docids[i]``."""

    docids: np.ndarray  # sorted, unique, int64
    names: tuple[str, ...]  # sorted topic codes
    indptr: np.ndarray  # int64, len(docids) + 1
    indices: np.ndarray  # int32 topic columns, sorted within rows
    where: tuple[str, np.ndarray]  # the qrels file and the first line of each document

    def rows_of(self, docids: np.ndarray) -> np.ndarray:
        """Positions of ``docids`` in :attr:`docids`; -1 where a docid has no topics."""
        pos = np.searchsorted(self.docids, docids)
        pos = np.minimum(pos, max(len(self.docids) - 1, 0))
        ok = len(self.docids) > 0
        found = (self.docids[pos] == docids) if ok else np.zeros(len(docids), bool)
        return np.where(found, pos, -1)

    def top_level(self, hierarchy: dict[str, str] | None = None) -> np.ndarray:
        """Each document's top-level code (0-3 CCAT/ECAT/GCAT/MCAT, 4 OTHER, -1 multi); see the module notes."""
        root = np.array([_root_of(t, hierarchy) for t in self.names], dtype=np.int64)
        n = len(self.docids)
        bits = np.zeros(n, dtype=np.int64)
        rows = np.repeat(np.arange(n), np.diff(self.indptr))
        r = root[self.indices]
        real = r < OTHER
        np.bitwise_or.at(bits, rows[real], 1 << r[real])
        count = np.zeros(n, dtype=np.int64)
        for k in range(4):
            count += (bits >> k) & 1
        code = np.full(n, OTHER, dtype=np.int64)
        single = count == 1
        code[single] = np.log2(bits[single]).astype(np.int64)
        code[count > 1] = MULTI
        return code


def _root_of(topic: str, hierarchy: dict[str, str] | None) -> int:
    if hierarchy is not None:
        seen = set()
        t: str | None = topic
        while t is not None and t not in TOP_LEVEL and t not in seen:
            seen.add(t)
            t = hierarchy.get(t)
        return TOP_LEVEL.index(t) if t in TOP_LEVEL else OTHER
    if topic in TOP_LEVEL:
        return TOP_LEVEL.index(topic)
    return {"C": 0, "E": 1, "G": 2, "M": 3}.get(topic[:1], OTHER)


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    with open_binary(path) as f:
        n = 0
        while True:
            try:
                raw = f.readline()
            except STREAM_ERRORS as e:
                raise InputFormatError(path, f"compressed stream is truncated or corrupt after line {n} ({e})") from e
            if not raw:
                return
            n += 1
            yield n, raw


def _docid(tok: bytes, path: str, line: int) -> int:
    try:
        d = int(tok)
    except ValueError:
        d = -1
    if d <= 0 or d >= 1 << 63:
        text = tok.decode("utf-8", "replace")
        raise InputFormatError(path, f"docid {text!r} is not a positive integer" + (" below 2**63" if d > 0 else ""),
                               line=line, token=text)
    return d


def read_qrels(path: str | os.PathLike[str]) -> Topics:
    """Read a topic qrels file (``TOPIC docid 1`` lines; blank lines skipped, repeated pairs counted once)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    got = _compiled_qrels(path) if _COMPILED else None
    names, t, d, lines = got if got is not None else _python_qrels(path)
    order = sorted(names, key=lambda b: b)
    remap = np.empty(len(names), dtype=np.int64)
    for new, name in enumerate(order):
        remap[names[name]] = new
    t = remap[t]
    key = d * len(order) + t
    key, first = np.unique(key, return_index=True)
    docs = key // len(order)
    docids, start = np.unique(docs, return_index=True)
    indptr = np.append(start, len(key)).astype(np.int64)
    indices = (key - docs * len(order)).astype(np.int32)
    first_line = np.minimum.reduceat(lines[first], start) if len(start) else np.zeros(0, np.int64)
    return Topics(docids, tuple(b.decode("utf-8", "replace") for b in order), indptr, indices, (path, first_line))


def _python_qrels(path: str) -> tuple[dict[bytes, int], np.ndarray, np.ndarray, np.ndarray]:
    """Topics (in order of first appearance), each line's topic, docid and line number."""
    names: dict[bytes, int] = {}
    t_col, d_col, l_col = array("q"), array("q"), array("q")  # 8 bytes a value, not a Python int
    for n, raw in _lines(path):
        toks = raw.split()
        if not toks:
            continue
        if len(toks) != 3:
            raise InputFormatError(path, f"expected 'TOPIC DOCID 1', got {len(toks)} fields", line=n,
                                   token=raw.strip().decode("utf-8", "replace"))
        topic, docid, rel = toks
        if rel != b"1":
            raise InputFormatError(path, f"third field must be 1, got {rel.decode('utf-8', 'replace')!r}",
                                   line=n, token=rel.decode("utf-8", "replace"))
        d = _docid(docid, path, n)
        t_col.append(names.setdefault(topic, len(names)))
        d_col.append(d)
        l_col.append(n)
    if not d_col:
        raise InputFormatError(path, "no topic assignments")
    return (names, np.frombuffer(t_col, dtype=np.int64), np.frombuffer(d_col, dtype=np.int64),
            np.frombuffer(l_col, dtype=np.int64))


def _compiled_qrels(path: str) -> tuple[dict[bytes, int], np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_python_qrels` in compiled code; None when a line (or the stream) needs the Python
    reader, for its error or for a docid that is not plain digits."""
    table, n = _empty_table(256), 0
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    try:
        with open_binary(path) as f:
            for chunk, first in iter_line_chunks(f, TEXT_CHUNK_BYTES, path=path):
                buf = np.frombuffer(chunk, dtype=np.uint8)
                status, ts, te, docids, lines = _scan_qrels(buf, first)
                if status:
                    return None
                status, n, *table = _intern_tokens(buf, ts, te, 0, *table, n)
                topic = _count_columns(buf, ts, te, *table[:4], 0)[2]  # one token a line: its term
                parts.append((topic, docids, lines))
    except InputFormatError:
        return None
    if not parts or not sum(len(p[1]) for p in parts):
        return None
    offs, text = table[2][:n + 1].tolist(), table[3].tobytes()
    names = {text[a:b]: i for i, (a, b) in enumerate(zip(offs[:-1], offs[1:]))}
    return names, *(np.concatenate([p[k] for p in parts]) for k in range(3))  # type: ignore[return-value]


def read_hierarchy(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read ``rcv1.topics.hier.orig``: ``parent: P child: C child-description: ...`` -> ``{C: P}``."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    out: dict[str, str] = {}
    for n, raw in _lines(path):
        s = raw.decode("utf-8", "replace")
        if not s.strip():
            continue
        m = re.match(r"\s*parent:\s*(\S+)\s+child:\s*(\S+)", s)
        if m is None:
            raise InputFormatError(path, "expected 'parent: P child: C child-description: ...'", line=n,
                                   token=s.strip()[:40])
        out[m.group(2)] = m.group(1)
    return out


# =========================================================================== token files


@dataclass
class _Docs:
    """Documents of one piece of a token file: docids, header lines, tokens flattened + lengths."""

    docids: list[int]
    lines: list[int]
    tokens: list[bytes]
    lengths: list[int]
    n_lines: int


def _parse_documents(buf: bytes, path: str, first_line: int) -> _Docs:
    """Parse whole document blocks; ``first_line`` numbers ``buf``'s first line."""
    docids: list[int] = []
    lines: list[int] = []
    tokens: list[bytes] = []
    lengths: list[int] = []
    heads = list(_HEADER.finditer(buf))
    lead = buf[: heads[0].start()] if heads else buf
    if lead.strip():
        k = next(i for i, ln in enumerate(lead.split(b"\n")) if ln.strip())
        raise InputFormatError(path, "expected a document header '.I <docid>'", line=first_line + k,
                               token=lead.split(b"\n")[k].strip()[:40].decode("utf-8", "replace"))
    line = first_line + buf.count(b"\n", 0, heads[0].start()) if heads else first_line
    prev = heads[0].start() if heads else 0
    for i, m in enumerate(heads):
        line += buf.count(b"\n", prev, m.start())
        prev = m.start()
        docid = _docid(m.group(1), path, line)
        end = heads[i + 1].start() if i + 1 < len(heads) else len(buf)
        body = buf[m.end():end]
        w_end = body.find(b"\n")
        w_line = body if w_end < 0 else body[:w_end]
        if w_line.strip() != b".W":
            raise InputFormatError(path, f"document {docid}: expected '.W' after '.I {docid}'", line=line + 1,
                                   token=w_line.strip()[:40].decode("utf-8", "replace"))
        text = body[w_end + 1:] if w_end >= 0 else b""
        toks = text.split()
        if b".W" in text or b".I" in text:  # a field line inside the text? (checked per token only then)
            hit = _FIELD.search(text)
            if hit:
                t = hit.group(1).decode()
                at = line + 2 + text.count(b"\n", 0, hit.start() + 1)
                raise InputFormatError(path, f"document {docid}: field {t} in the middle of the text",
                                       line=at, token=t)
        docids.append(docid)
        lines.append(line)
        tokens.extend(toks)
        lengths.append(len(toks))
    return _Docs(docids, lines, tokens, lengths, buf.count(b"\n"))


def _document_chunks(path: str, chunk_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Whole-document pieces of about ``chunk_bytes`` (cut before a ``.I`` line), with their first line."""
    with open_binary(path) as f:
        yield from iter_line_chunks(f, chunk_bytes, path=path, boundary=b"\n.I")


def read_token_documents(path: str | os.PathLike[str], *, chunk_bytes: int = TEXT_CHUNK_BYTES
                         ) -> Iterator[tuple[int, int, list[bytes]]]:
    """``(docid, line, tokens)`` of every document of a token file, in file order, in constant memory."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    for piece, first in _document_chunks(path, chunk_bytes):
        docs = _parse_documents(piece, path, first)
        at = 0
        for d, ln, k in zip(docs.docids, docs.lines, docs.lengths):
            yield d, ln, docs.tokens[at:at + k]
            at += k


def _token_parts(path: str, part_bytes: int) -> list[tuple[int, int]]:
    """Parallel units of one token file: byte ranges when uncompressed, the whole file otherwise."""
    if sniff_compression(path) is not None:
        return [(0, -1)]
    return line_aligned_ranges(path, part_bytes, boundary=b"\n.I")


class _Range:
    """Bytes ``start:stop`` of a file, read in pieces (what :func:`iter_line_chunks` needs)."""

    def __init__(self, f: Any, start: int, stop: int) -> None:
        f.seek(start)
        self.f, self.left, self.at_start = f, stop - start, start == 0

    def read(self, n: int) -> bytes:
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        if self.at_start and data:
            self.at_start = False
            data = strip_bom(data)
        return data


def _read_part(path: str, start: int, stop: int) -> Iterator[tuple[bytes, int]]:
    """Whole-document pieces of one part with part-local line numbers (pieces of ``_PIECE_BYTES``
    bound the parser's Python objects)."""
    if stop < 0:
        yield from _document_chunks(path, _PIECE_BYTES)
        return
    with open(path, "rb") as f:
        yield from iter_line_chunks(_Range(f, start, stop), _PIECE_BYTES, path=path, boundary=b"\n.I")  # type: ignore[arg-type]


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and their counts (a sort and a diff: faster than hashing here)."""
    k = np.sort(keys)
    if not len(k):
        return k, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    return k[starts], np.diff(np.append(starts, len(k)))


class Vocabulary:
    """Document frequencies of tokens, mergeable across parts: build per part, :meth:`merge`, :meth:`freeze`."""

    def __init__(self, df: dict[bytes, int] | None = None, n_docs: int = 0) -> None:
        self.df: dict[bytes, int] = dict(df or {})
        self.n_docs = int(n_docs)

    def add(self, docs: _Docs) -> None:
        local = {t: i for i, t in enumerate(dict.fromkeys(docs.tokens))}
        ids = np.fromiter(map(local.__getitem__, docs.tokens), dtype=np.int64, count=len(docs.tokens))
        v = max(len(local), 1)
        rows = np.repeat(np.arange(len(docs.lengths), dtype=np.int64), docs.lengths)
        first = _distinct(rows * v + ids)[0] % v
        counts = np.bincount(first, minlength=len(local))
        df = self.df
        for t, c in zip(local, counts.tolist()):
            df[t] = df.get(t, 0) + c
        self.n_docs += len(docs.docids)

    def merge(self, other: Vocabulary) -> Vocabulary:
        """The vocabulary of both parts' documents (order-independent)."""
        out = Vocabulary(self.df, self.n_docs + other.n_docs)
        for t, c in other.df.items():
            out.df[t] = out.df.get(t, 0) + c
        return out

    def freeze(self, min_df: int = 1) -> tuple[list[bytes], np.ndarray]:
        """Sorted terms with ``df >= min_df`` and their document frequencies."""
        terms = sorted(t for t, c in self.df.items() if c >= min_df)
        return terms, np.array([self.df[t] for t in terms], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.df)


def _vocabulary_task(path: str, start: int, stop: int) -> dict[str, Any]:
    vocab, n_lines = Vocabulary(), 0
    try:
        for piece, first in _read_part(path, start, stop):
            vocab.add(_parse_documents(piece, path, first))
            n_lines += piece.count(b"\n")
    except InputFormatError as e:
        return {"error": (e.line, e.reason, e.token)}
    return {"df": vocab.df, "n_docs": vocab.n_docs, "n_lines": n_lines}


def _weights(counts: np.ndarray, cols: np.ndarray, weighting: str, idf: np.ndarray | None) -> np.ndarray:
    if weighting == "log":
        return np.log2(1.0 + counts)
    if weighting == "tf":
        return counts.astype(np.float64)
    if weighting == "binary":
        return np.ones(len(counts))
    assert idf is not None
    return (1.0 + np.log(counts)) * idf[cols]


def _append_rows(out: dict[str, list[Any]], docids: np.ndarray, lines: np.ndarray, r: np.ndarray, cols: np.ndarray,
                 counts: np.ndarray, weighting: str, idf: np.ndarray | None, normalize: bool, v: int,
                 dtype: str | None = None) -> None:
    """Add a piece's rows to ``out``: nonzero ``k`` is ``counts[k]`` of column ``cols[k]`` in row ``r[k]``
    (rows in order, columns sorted within a row), weighted and maybe normalised; the values in the
    store's ``dtype`` when none of them becomes 0 there (else float64, for the writer to refuse), so a
    task ships what the writer stores (half the bytes in float32)."""
    n = len(docids)
    vals = _weights(counts, cols, weighting, idf)
    if normalize:
        norms = np.sqrt(np.bincount(r, weights=vals * vals, minlength=n))
        vals = vals / np.where(norms > 0, norms, 1.0)[r]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    out["docids"].append(docids)
    out["lines"].append(lines)
    out["indptr"].append(indptr)
    out["indices"].append(cols.astype(np.int32 if v < 2**31 else np.int64))
    if dtype is not None:
        cast = vals.astype(dtype)
        if not np.any((cast == 0) & (vals != 0)):
            vals = cast
    out["data"].append(vals)


def _rows_task(path: str, start: int, stop: int, index: dict[bytes, int] | int, weighting: str,
               idf: np.ndarray | None, normalize: bool, dtype: str | None = None) -> dict[str, Any]:
    """One part's documents as float64 CSR rows over the frozen vocabulary (unknown tokens dropped),
    or, when ``index`` is an int, over the ``2**index`` columns the tokens hash to."""
    out: dict[str, list[Any]] = {"docids": [], "lines": [], "indptr": [], "indices": [], "data": []}
    n_lines = 0
    if isinstance(index, int):
        bits = index
        seen: dict[bytes, int] = {}

        def get(tok: bytes, _missing: int) -> int:
            col = seen.get(tok)
            if col is None:
                col = seen[tok] = hash_token(tok, bits)
            return col

        v = 1 << bits
    else:
        v = max(len(index), 1)
        get = index.get
    try:
        for piece, first in _read_part(path, start, stop):
            docs = _parse_documents(piece, path, first)
            n = len(docs.docids)
            ids = np.fromiter(map(get, docs.tokens, itertools.repeat(-1)), dtype=np.int64, count=len(docs.tokens))
            rows = np.repeat(np.arange(n, dtype=np.int64), docs.lengths)
            keep = ids >= 0
            keys, counts = _distinct(rows[keep] * v + ids[keep])
            r = keys // v
            _append_rows(out, np.asarray(docs.docids, dtype=np.int64), np.asarray(docs.lines, dtype=np.int64),
                         r, keys - r * v, counts, weighting, idf, normalize, v, dtype)  # lines part-local already
            n_lines += piece.count(b"\n")
    except InputFormatError as e:
        return {"error": (e.line, e.reason, e.token)}
    return {k: v for k, v in out.items()} | {"n_lines": n_lines}


# =========================================================================== compiled token pass
#
# The two passes over token files run in numba over a piece's raw bytes (:func:`_scan` finds the
# documents, :func:`_intern_tokens` / :func:`_count_columns` split the texts on ASCII white space,
# as ``bytes.split()``), with a hash table of their own (open addressing keyed by a 64-bit FNV-1a
# hash of the token's bytes, the bytes compared on every hash match, so colliding tokens stay
# apart).  A piece the scan finds anything unusual in (a bad header, a missing ``.W``, a field
# token in a text, a docid that is not plain digits) is parsed again by :func:`_parse_documents`,
# which raises the error the pure-Python path raises, or returns the documents it accepts (their
# tokens then go through the same compiled counting).  The result -- vocabulary, its order,
# every value -- is the pure-Python path's (tests/data/test_rcv1.py compares the two).

_COMPILED = True  # False: the pure-Python passes (Vocabulary.add, dict look-ups), kept as the reference


@njit(**NUMBA_FLAGS)
def _scan(buf: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Documents of a piece: ``(status, docids, header line offsets, text starts, text stops)``;
    ``status`` 1 when the piece needs :func:`_parse_documents` (an error or an unusual docid)."""
    n = buf.shape[0]
    heads = np.empty(n // 4 + 1, dtype=np.int64)  # a header takes at least 4 bytes ('.I 1\n')
    hline = np.empty(n // 4 + 1, dtype=np.int64)
    ends = np.empty(n // 4 + 1, dtype=np.int64)
    docids = np.empty(n // 4 + 1, dtype=np.int64)
    nh = 0
    line = 0
    p = 0
    status = 0
    while p < n:
        # p is a line start; does `^\.I[ \t]+(\S*)[^\n]*\n` match here?
        q = p
        while q < n and buf[q] != 10:
            q += 1
        if q < n and q - p >= 3 and buf[p] == 46 and buf[p + 1] == 73 and (buf[p + 2] == 32 or buf[p + 2] == 9):
            a = p + 2
            while a < q and (buf[a] == 32 or buf[a] == 9):
                a += 1
            b = a
            d = np.int64(0)
            while b < q and not _space(buf[b]):
                c = buf[b]
                if c < 48 or c > 57 or b - a >= 18:
                    status = 1
                else:
                    d = d * 10 + (c - 48)
                b += 1
            if d <= 0:
                status = 1
            heads[nh] = p
            hline[nh] = line
            ends[nh] = q + 1
            docids[nh] = d
            nh += 1
        elif nh == 0:
            for k in range(p, q):
                if not _space(buf[k]):
                    status = 1  # text before the first header
        line += 1
        p = q + 1
    starts = np.empty(nh, dtype=np.int64)
    stops = np.empty(nh, dtype=np.int64)
    for i in range(nh):
        body_end = heads[i + 1] if i + 1 < nh else n
        a = ends[i]
        q = a
        while q < body_end and buf[q] != 10:
            q += 1
        # the '.W' line, stripped
        s, e = a, q
        while s < e and _space(buf[s]):
            s += 1
        while e > s and _space(buf[e - 1]):
            e -= 1
        if e - s != 2 or buf[s] != 46 or buf[s + 1] != 87:
            status = 1
        starts[i] = min(q + 1, body_end)
        stops[i] = body_end
    return status, docids[:nh].copy(), hline[:nh].copy(), starts, stops


@njit(inline="always", **NUMBA_FLAGS)
def _token(buf: np.ndarray, p: int, stop: int, status: int) -> tuple[int, int, int]:
    """``(start, stop, status)`` of the next token at or after ``p`` (white-space separated; empty at
    the end), ``status`` set to 1 if it is a field (``.I`` or ``.W``)."""
    while p < stop and _space(buf[p]):
        p += 1
    s = p
    while p < stop and not _space(buf[p]):
        p += 1
    return s, p, 1 if _field(buf, s, p) else status


@njit(inline="always", **NUMBA_FLAGS)
def _fnv(buf: np.ndarray, s: int, e: int) -> np.uint64:
    h = np.uint64(0xCBF29CE484222325)
    for k in range(s, e):
        h = np.uint64((h ^ np.uint64(buf[k])) * np.uint64(0x100000001B3))
    return h


@njit(inline="always", **NUMBA_FLAGS)
def _field(buf: np.ndarray, s: int, e: int) -> bool:
    """Is the token ``.I`` or ``.W``?"""
    return e - s == 2 and buf[s] == 46 and (buf[s + 1] == 73 or buf[s + 1] == 87)


@njit(inline="always", **NUMBA_FLAGS)
def _probe(slots: np.ndarray, hashes: np.ndarray, offs: np.ndarray, arena: np.ndarray,
           buf: np.ndarray, s: int, e: int, h: np.uint64) -> tuple[int, int]:
    """``(slot, term)`` of the token ``buf[s:e]``; term -1 (and its free slot) when absent."""
    mask = slots.shape[0] - 1
    i = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
    while True:
        t = slots[i]
        if t < 0:
            return i, -1
        if hashes[t] == h and offs[t + 1] - offs[t] == e - s:
            o = offs[t]
            same = True
            for k in range(e - s):
                if arena[o + k] != buf[s + k]:
                    same = False
                    break
            if same:
                return i, t
        i = (i + 1) & mask


@njit(**NUMBA_FLAGS)
def _grown(slots: np.ndarray, hashes: np.ndarray, offs: np.ndarray, arena: np.ndarray, df: np.ndarray,
           last: np.ndarray, n: int, extra: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The table with room for one more term of ``extra`` bytes."""
    if offs[n] + extra > arena.shape[0]:
        a = np.empty(max(2 * arena.shape[0], offs[n] + extra), dtype=np.uint8)
        a[:offs[n]] = arena[:offs[n]]
        arena = a
    if n + 2 > hashes.shape[0]:
        m = 2 * hashes.shape[0]
        h2 = np.empty(m, dtype=np.uint64)
        h2[:n] = hashes[:n]
        o2 = np.empty(m + 1, dtype=np.int64)
        o2[:n + 1] = offs[:n + 1]
        d2 = np.zeros(m, dtype=np.int64)
        d2[:n] = df[:n]
        l2 = np.full(m, -1, dtype=np.int64)
        l2[:n] = last[:n]
        hashes, offs, df, last = h2, o2, d2, l2
    if 2 * (n + 1) > slots.shape[0]:
        slots = np.full(2 * slots.shape[0], -1, dtype=np.int64)
        mask = slots.shape[0] - 1
        for t in range(n):
            h = hashes[t]
            i = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
            while slots[i] >= 0:
                i = (i + 1) & mask
            slots[i] = t
    return slots, hashes, offs, arena, df, last


@njit(inline="always", **NUMBA_FLAGS)
def _intern(buf: np.ndarray, s: int, e: int, slots: np.ndarray, hashes: np.ndarray, offs: np.ndarray,
            arena: np.ndarray, df: np.ndarray, last: np.ndarray, n: int
            ) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(term, n, table...)`` of the bytes ``buf[s:e]``, added as term ``n`` when absent (the table
    grown as needed)."""
    h = _fnv(buf, s, e)
    i, t = _probe(slots, hashes, offs, arena, buf, s, e, h)
    if t < 0:
        if 2 * (n + 1) > slots.shape[0] or n + 2 > hashes.shape[0] or offs[n] + e - s > arena.shape[0]:
            slots, hashes, offs, arena, df, last = _grown(slots, hashes, offs, arena, df, last, n, e - s)
            i, t = _probe(slots, hashes, offs, arena, buf, s, e, h)
        t = n
        n += 1
        slots[i] = t
        hashes[t] = h
        o = offs[t]
        arena[o:o + e - s] = buf[s:e]
        offs[t + 1] = o + e - s
    return t, n, slots, hashes, offs, arena, df, last


@njit(**NUMBA_FLAGS)
def _intern_tokens(buf: np.ndarray, starts: np.ndarray, stops: np.ndarray, doc0: int, slots: np.ndarray,
                   hashes: np.ndarray, offs: np.ndarray, arena: np.ndarray, df: np.ndarray, last: np.ndarray,
                   n: int) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Add the documents' tokens to the table (``df`` counts each term once per document, numbered
    from ``doc0``); ``(status, n, table...)``, status 1 on a field token in a text."""
    status = 0
    for d in range(starts.shape[0]):
        doc = doc0 + d
        p, stop = starts[d], stops[d]
        while True:
            s, p, status = _token(buf, p, stop, status)
            if s == p:
                break
            t, n, slots, hashes, offs, arena, df, last = _intern(buf, s, p, slots, hashes, offs, arena, df, last, n)
            if last[t] != doc:
                last[t] = doc
                df[t] += 1
    return status, n, slots, hashes, offs, arena, df, last


@njit(**NUMBA_FLAGS)
def _count_columns(buf: np.ndarray, starts: np.ndarray, stops: np.ndarray, slots: np.ndarray, hashes: np.ndarray,
                   offs: np.ndarray, arena: np.ndarray, bits: int
                   ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Each document's distinct columns (sorted) and counts: a term's position in the table, or with
    ``bits`` > 0 the column its bytes hash to (:func:`~._hashing.token_column`); tokens outside the
    table are dropped.  ``(status, indptr, columns, counts)``, status 1 on a field token in a text."""
    m = starts.shape[0]
    bound = 0
    for d in range(m):
        bound += (stops[d] - starts[d] + 1) // 2
    cols = np.empty(bound, dtype=np.int64)
    counts = np.empty(bound, dtype=np.int64)
    indptr = np.zeros(m + 1, dtype=np.int64)
    mask = np.int64((1 << bits) - 1) if bits > 0 else np.int64(0)
    status = 0
    w = 0
    for d in range(m):
        p, stop = starts[d], stops[d]
        a = w
        while True:
            s, p, status = _token(buf, p, stop, status)
            if s == p:
                break
            if bits > 0:
                c = token_column(buf, s, p, mask)
            else:
                c = _probe(slots, hashes, offs, arena, buf, s, p, _fnv(buf, s, p))[1]
                if c < 0:
                    continue
            cols[w] = c
            w += 1
        if w - a > 1:
            cols[a:w].sort()
        r = a  # run-length in place: write position r never passes the read position
        k = a
        while k < w:
            c = cols[k]
            j = k + 1
            while j < w and cols[j] == c:
                j += 1
            cols[r] = c
            counts[r] = j - k
            r += 1
            k = j
        w = r
        indptr[d + 1] = w
    return status, indptr, cols[:w].copy(), counts[:w].copy()


def _empty_table(terms: int = 1024, nbytes: int = 1 << 16) -> list[np.ndarray]:
    """A table with room for ``terms`` terms: slots, hashes, offsets, bytes, df, last document."""
    return [np.full(1 << max(4, int(2 * terms - 1).bit_length()), -1, dtype=np.int64), np.zeros(terms, dtype=np.uint64),
            np.zeros(terms + 1, dtype=np.int64), np.empty(nbytes, dtype=np.uint8), np.zeros(terms, dtype=np.int64),
            np.full(terms, -1, dtype=np.int64)]


@njit(**NUMBA_FLAGS)
def _place_terms(buf: np.ndarray, offs: np.ndarray, slots: np.ndarray, hashes: np.ndarray) -> None:
    mask = slots.shape[0] - 1
    for t in range(hashes.shape[0]):
        h = _fnv(buf, offs[t], offs[t + 1])
        hashes[t] = h
        i = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
        while slots[i] >= 0:
            i = (i + 1) & mask
        slots[i] = t


def _term_table(terms: list[bytes]) -> tuple[np.ndarray, ...]:
    """Distinct terms as a table (slots, hashes, offsets, bytes) whose term ``i`` is ``terms[i]``
    (a term with white space in it is kept and, as in a dict, never meets a token)."""
    buf = np.frombuffer(b"".join(terms) or b" ", dtype=np.uint8)
    offs = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, terms), dtype=np.int64, count=len(terms)), out=offs[1:])
    slots = np.full(1 << max(4, (2 * len(terms)).bit_length()), -1, dtype=np.int64)
    hashes = np.zeros(len(terms), dtype=np.uint64)
    _place_terms(buf, offs, slots, hashes)
    return slots, hashes, offs, buf


def _documents(piece: bytes, path: str, first: int, force: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(bytes, docids, lines, text starts, text stops)`` of a piece's documents; through
    :func:`_parse_documents` (its errors, its documents' tokens rejoined) when the scan flags it
    or ``force``."""
    buf = np.frombuffer(piece, dtype=np.uint8)
    if not force:
        status, docids, hline, starts, stops = _scan(buf)
        if status == 0:
            return buf, docids, hline + first, starts, stops
    docs = _parse_documents(piece, path, first)
    texts = [b" ".join(docs.tokens[a - k:a]) for a, k in zip(itertools.accumulate(docs.lengths), docs.lengths)]
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.zeros(len(texts), dtype=np.int64)
    np.cumsum(lens[:-1] + 1, out=starts[1:])
    return (np.frombuffer(b"\n".join(texts), dtype=np.uint8), np.asarray(docs.docids, dtype=np.int64),
            np.asarray(docs.lines, dtype=np.int64), starts, starts + lens)


@njit(**NUMBA_FLAGS)
def _scan_qrels(buf: np.ndarray, line0: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lines ``TOPIC docid 1`` of a chunk: ``(status, topic starts, topic stops, docids, line numbers)``;
    status 1 at the first line that is not that with a plain positive docid (blank lines skipped)."""
    n = buf.shape[0]
    cap = n // 6 + 1  # 'A 1 1\n'
    ts = np.empty(cap, dtype=np.int64)
    te = np.empty(cap, dtype=np.int64)
    docids = np.empty(cap, dtype=np.int64)
    lines = np.empty(cap, dtype=np.int64)
    k = 0
    line = line0
    p = 0
    while p < n:
        q = p
        while q < n and buf[q] != 10:
            q += 1
        s0, e0, status = _token(buf, p, q, 0)
        if s0 < e0:
            s1, e1, status = _token(buf, e0, q, 0)
            s2, e2, status = _token(buf, e1, q, 0)
            if _token(buf, e2, q, 0)[0] < q or e2 - s2 != 1 or buf[s2] != 49 or e1 - s1 > 18:
                return 1, ts, te, docids, lines
            d = np.int64(0)
            for j in range(s1, e1):
                if buf[j] < 48 or buf[j] > 57:
                    return 1, ts, te, docids, lines
                d = d * 10 + (buf[j] - 48)
            if d <= 0:
                return 1, ts, te, docids, lines
            ts[k], te[k], docids[k], lines[k] = s0, e0, d, line
            k += 1
        line += 1
        p = q + 1
    return 0, ts[:k].copy(), te[:k].copy(), docids[:k].copy(), lines[:k].copy()


def _compiled_vocabulary_task(path: str, start: int, stop: int) -> dict[str, Any]:
    table, n, n_docs, n_lines = _empty_table(), 0, 0, 0
    try:
        for piece, first in _read_part(path, start, stop):
            buf, docids, _, starts, stops = _documents(piece, path, first)
            status, n2, *t2 = _intern_tokens(buf, starts, stops, n_docs, *table, n)
            if status:  # a field token in a text: the parser's error
                buf, docids, _, starts, stops = _documents(piece, path, first, force=True)
                status, n2, *t2 = _intern_tokens(buf, starts, stops, n_docs, *table, n)
            table, n = t2, n2
            n_docs += len(docids)
            n_lines += piece.count(b"\n")
    except InputFormatError as e:
        return {"error": (e.line, e.reason, e.token)}
    offs = table[2][:n + 1]  # the part's terms as arrays (bytes, offsets, df): merged in compiled code
    return {"terms": (table[3][:offs[-1]].copy(), offs.copy(), table[4][:n].copy()), "n_docs": n_docs,
            "n_lines": n_lines}


@njit(**NUMBA_FLAGS)
def _add_terms(text: np.ndarray, toffs: np.ndarray, tdf: np.ndarray, ids: np.ndarray, slots: np.ndarray,
               hashes: np.ndarray, offs: np.ndarray, arena: np.ndarray, df: np.ndarray, last: np.ndarray, n: int
               ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Add a part's distinct terms (``text[toffs[k]:toffs[k + 1]]``, document frequency ``tdf[k]``) to
    the table, ``ids[k]`` set to each one's place in it: ``(n, table...)``."""
    for k in range(tdf.shape[0]):
        t, n, slots, hashes, offs, arena, df, last = _intern(text, toffs[k], toffs[k + 1], slots, hashes, offs, arena,
                                                             df, last, n)
        df[t] += tdf[k]
        ids[k] = t
    return n, slots, hashes, offs, arena, df, last


class _TermCounts:
    """:class:`Vocabulary` over the compiled table: the parts' ``(bytes, offsets, df)`` arrays merged
    without a Python object per term until :meth:`freeze` (the same terms, order and counts)."""

    def __init__(self) -> None:
        self.table, self.n, self.n_docs = _empty_table(1 << 15, 1 << 18), 0, 0

    def add(self, terms: tuple[np.ndarray, np.ndarray, np.ndarray], n_docs: int) -> np.ndarray:
        """Add a part's terms; their places in the table (for :meth:`stored_values`)."""
        ids = np.empty(len(terms[2]), dtype=np.int64)
        self.n, *self.table = _add_terms(*terms, ids, *self.table, self.n)
        self.n_docs += int(n_docs)
        return ids

    def stored_values(self, ids: np.ndarray, tdf: np.ndarray, min_df: int = 1) -> int:
        """The stored values of a part whose terms are at ``ids`` with document frequencies ``tdf``:
        its (document, term) pairs of the terms :meth:`freeze` keeps."""
        return int(tdf[self.table[4][ids] >= min_df].sum())

    def freeze(self, min_df: int = 1) -> tuple[list[bytes], np.ndarray]:
        offs, df = self.table[2][:self.n + 1], self.table[4][:self.n]
        keep = np.flatnonzero(df >= min_df)
        text = self.table[3][:offs[-1]].tobytes()
        terms = [text[a:b] for a, b in zip(offs[keep].tolist(), offs[keep + 1].tolist())]
        order = sorted(range(len(terms)), key=terms.__getitem__)
        return [terms[i] for i in order], df[keep][np.asarray(order, dtype=np.int64)]


def _compiled_rows_task(path: str, start: int, stop: int, index: tuple[np.ndarray, ...] | int, weighting: str,
                        idf: np.ndarray | None, normalize: bool, dtype: str | None = None) -> dict[str, Any]:
    """:func:`_rows_task` in compiled code; ``index`` a :func:`_term_table` or hash bits."""
    out: dict[str, list[Any]] = {"docids": [], "lines": [], "indptr": [], "indices": [], "data": []}
    if isinstance(index, int):
        bits, table, v = index, tuple(_empty_table(1, 1)[:4]), 1 << index
    else:
        bits, table, v = 0, index, max(len(index[1]), 1)
    n_lines = 0
    try:
        for piece, first in _read_part(path, start, stop):
            buf, docids, lines, starts, stops = _documents(piece, path, first)
            status, indptr, cols, counts = _count_columns(buf, starts, stops, *table, bits)
            if status:
                buf, docids, lines, starts, stops = _documents(piece, path, first, force=True)
                status, indptr, cols, counts = _count_columns(buf, starts, stops, *table, bits)
            r = np.repeat(np.arange(len(docids), dtype=np.int64), np.diff(indptr))
            _append_rows(out, docids, lines, r, cols, counts, weighting, idf, normalize, v, dtype)
            n_lines += piece.count(b"\n")
    except InputFormatError as e:
        return {"error": (e.line, e.reason, e.token)}
    return {k: v for k, v in out.items()} | {"n_lines": n_lines}


def _direct_rows_task(path: str, start: int, stop: int, first_value: int, n_values: int,
                      index: tuple[np.ndarray, ...], weighting: str, idf: np.ndarray | None, normalize: bool,
                      dtype: str, target: dict[str, Any]) -> dict[str, Any]:
    """:func:`_compiled_rows_task` that writes the part's whole chunks of the store itself
    (:func:`~.store.write_part_chunks`, its stored values starting at ``first_value``) and ships back
    only the rows' pointers, docids and lines and the edge values of the chunks it shares."""
    from .store import write_part_chunks

    res = _compiled_rows_task(path, start, stop, index, weighting, idf, normalize, dtype)
    if "error" in res:
        return res
    data = np.concatenate(res["data"]) if res["data"] else np.zeros(0, dtype)
    indices = np.concatenate(res["indices"]) if res["indices"] else np.zeros(0, np.int32)
    if len(data) != n_values:
        return {"error": (None, f"the file changed during the conversion ({len(data)} stored values in bytes "
                                f"{start}:{stop}, {n_values} in the vocabulary pass)", None)}
    if data.dtype != np.dtype(dtype):  # a value that becomes 0 in the store's dtype
        return {"underflow": True}
    at, ptrs = 0, []
    for ip in res["indptr"]:
        ptrs.append(ip[1:] + at)
        at += int(ip[-1])
    edges = write_part_chunks(target, first_value, data, indices)
    if edges is None:
        return {"error": (None, "the conversion was aborted", None)}
    return {"docids": np.concatenate(res["docids"]), "lines": np.concatenate(res["lines"]),
            "indptr": np.concatenate([np.zeros(1, np.int64)] + ptrs), "head": edges[0], "tail": edges[1], "crcs": edges[2],
            "max_index": int(indices.max()) if len(indices) else -1, "n_lines": res["n_lines"]}


# =========================================================================== the conversion


def _raise(path: str, part_line: int, err: tuple[Any, str, Any]) -> None:
    line, reason, token = err
    raise InputFormatError(path, reason, line=None if line is None else part_line + line - 1, token=token)


def convert_rcv1(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: str | os.PathLike[str],
    *,
    qrels: str | os.PathLike[str],
    hierarchy: str | os.PathLike[str] | None = None,
    weighting: str = "log",
    normalize: bool = False,
    min_df: int = 1,
    vocabulary: Sequence[str] | None = None,
    hash_bits: int | None = None,
    dtype: str = "float32",
    block_rows: int | None = None,
    overwrite: bool = False,
    executor: OrderedMap | None = None,
    part_bytes: int = PARALLEL_PART_BYTES,
    progress: Any = None,
) -> Any:
    """Read RCV1-v2 token (or vector) files and their topic qrels into one distlearn store.

    Parameters
    ----------
    inputs : path or list of paths
        ``lyrl2004_tokens_*.dat[.gz]`` or ``lyrl2004_vectors_*.dat[.gz]`` files (not mixed); the
        rows follow the files' order.
    qrels : path
        ``rcv1-v2.topics.qrels[.gz]``.  Every document must have topics there.
    hierarchy : path, default=None
        ``rcv1.topics.hier.orig``, to map topics to top-level categories (else by first letter).
    weighting, normalize, min_df :
        Token files only: the value of a token count (``"log"``, ``"tf"``, ``"binary"``, ``"tfidf"``),
        unit-norm rows, the least document frequency of a vocabulary term.
    vocabulary : list of str, default=None
        Token files only: use this vocabulary (e.g. the training files') instead of building one;
        tokens outside it are dropped and ``tfidf`` is refused (it needs the training ``df``).
    hash_bits : int, default=None
        Hash tokens (or the vector files' term ids) into ``2**hash_bits`` columns instead of
        building a vocabulary (:mod:`distlearn.data._hashing`): no first pass, bounded width,
        no ``vocabulary`` group; ``tfidf``, ``min_df`` and ``vocabulary`` do not apply.
    executor : executor, default=None
        An executor of :func:`distlearn.distributed.executor_for` (``map_ordered``): run the
        vocabulary pass and the parsing as tasks: byte ranges of uncompressed files,
        whole compressed files.  Results are written in file order, so the store is the same.
        Who writes it: with at least two workers on this machine (in-process threads, or Dask
        workers on the loopback interface) and a local ``store``, each parsing task writes the
        whole chunks of ``X/data`` and ``X/indices`` inside its part and this process only the
        chunks parts share, ``y``, ``X/indptr``, the side arrays and the metadata (the vocabulary
        pass, needed for the layout, runs first; not with ``hash_bits`` or ``vocabulary``); in
        every other case (``executor=None``, one worker, remote workers, a URL) this process
        writes everything from the parts the tasks ship back.

    The store holds ``X`` (documents x terms), ``y`` = the top-level code of each document
    (0 CCAT, 1 ECAT, 2 GCAT, 3 MCAT, 4 OTHER, -1 multi-category; ``meta["label_names"]``),
    ``docid``, ``targets`` (the topic indicator matrix, CSR, names in its attributes) and, for
    token files, ``vocabulary`` (terms and document frequencies).  Open a binary problem as a
    view: ``open_dataset("rcv1.zarr", target="CCAT-vs-GCAT")`` or ``target="C15"``.
    """
    from .store import DatasetWriter

    paths = [os.fspath(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    if not paths:
        raise ValueError("no input files")
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p}: no such file")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}; got {weighting!r}")
    if not isinstance(min_df, (int, np.integer)) or min_df < 1:
        raise ValueError(f"min_df must be a positive int; got {min_df!r}")
    kinds = {_kind(p) for p in paths}
    if len(kinds) > 1:
        raise ValueError("mixing token files and vector files in one store is not supported")
    kind = kinds.pop()
    for f in (qrels, hierarchy):
        if f is not None and not os.path.exists(os.fspath(f)):
            raise FileNotFoundError(f"{os.fspath(f)}: no such file")
    read: list[tuple[Topics, np.ndarray]] = []

    def labels() -> tuple[Topics, np.ndarray]:
        """The qrels and every document's top-level code, read once: while the vocabulary pass's
        first tasks run on an executor (before any of its errors is raised), else now."""
        if not read:
            t = read_qrels(qrels)
            read.append((t, t.top_level(read_hierarchy(hierarchy) if hierarchy is not None else None)))
        return read[0]

    params: dict[str, Any] = {"format": "rcv1", "files": [os.path.basename(p) for p in paths],
                              "qrels": os.path.basename(os.fspath(qrels)),
                              "hierarchy": None if hierarchy is None else os.path.basename(os.fspath(hierarchy)),
                              "other_rule": "no topic under CCAT/ECAT/GCAT/MCAT", "kind": kind}
    terms: list[bytes] | None = None
    df = None
    layout: list[tuple[int, int]] | None = None  # per part: documents and stored values (workers write)
    if hash_bits is not None:
        hash_bits = check_hash_bits(hash_bits)
        if weighting == "tfidf" or vocabulary is not None or min_df != 1:
            raise ValueError("hash_bits (--hash-bits) replaces the vocabulary: weighting='tfidf', min_df and "
                             "vocabulary do not apply")
        params.update({"hash_bits": hash_bits, "hash": HASH})
        if kind == "tokens":
            params.update({"weighting": weighting, "normalize": bool(normalize), "min_df": 1,
                           "n_terms": 1 << hash_bits, "vocabulary_docs": 0})
    elif kind == "tokens":
        if vocabulary is not None:
            if weighting == "tfidf":
                raise ValueError("weighting='tfidf' builds its own vocabulary (it needs the documents' df)")
            terms = [t.encode("utf-8") for t in vocabulary]
            if len(set(terms)) != len(terms):
                raise ValueError("the vocabulary has repeated terms")
            n_vocab_docs = 0
        else:
            vocab: Vocabulary | _TermCounts = _TermCounts() if _COMPILED else Vocabulary()
            jobs = [(p, a, b) for p in paths for a, b in _token_parts(p, part_bytes)]
            part_terms: list[tuple[np.ndarray, np.ndarray, int]] = []  # per job: term places, df, documents
            at, last = 1, None
            task = _compiled_vocabulary_task if _COMPILED else _vocabulary_task
            for (p, _, _), res in zip(jobs, run_ordered(executor, task, jobs)):
                labels()
                at, last = (1, p) if p != last else (at, last)
                if "error" in res:
                    _raise(p, at, res["error"])
                if isinstance(vocab, _TermCounts):
                    part_terms.append((vocab.add(res["terms"], res["n_docs"]), res["terms"][2], res["n_docs"]))
                else:
                    vocab = vocab.merge(Vocabulary(res["df"], res["n_docs"]))
                at += res["n_lines"]
            terms, df = vocab.freeze(min_df)
            n_vocab_docs = vocab.n_docs
            if isinstance(vocab, _TermCounts) and _workers_write(executor, store):
                layout = [(int(n), vocab.stored_values(ids, tdf, min_df)) for ids, tdf, n in part_terms]
            if not terms:
                raise InputFormatError(paths[0], f"no token is in at least min_df={min_df} documents")
        params.update({"weighting": weighting, "normalize": bool(normalize), "min_df": int(min_df),
                       "n_terms": len(terms), "vocabulary_docs": n_vocab_docs})
    topics, top = labels()
    n_features = (1 << hash_bits) if hash_bits is not None else len(terms) if terms is not None else None
    idf = np.log(params["vocabulary_docs"] / df) if weighting == "tfidf" and df is not None else None
    seen = np.zeros(len(topics.docids), dtype=np.int64)  # 0, or 1 + the document's index in all rows
    where: list[tuple[str, np.ndarray]] = []  # per file: its rows' lines (for errors)
    docid_parts: list[np.ndarray] = []
    row_parts: list[np.ndarray] = []
    writer = DatasetWriter(store, layout="csr", n_features=n_features, dtype=dtype, block_rows=block_rows,
                           source=", ".join(os.path.basename(p) for p in paths), params=params, overwrite=overwrite)
    try:
        writer.label_names = {str(k): v for k, v in LABEL_NAMES.items()}
        target, vocab_left = None, terms is not None
        if layout is not None and sum(n for n, _ in layout) and sum(z for _, z in layout):
            target = writer.begin_parts(sum(n for n, _ in layout), sum(z for _, z in layout))
        for p, docids, lines, X, done in _rows(paths, kind, executor, terms, idf, weighting, normalize, part_bytes,
                                               hash_bits, dtype, layout=layout if target else None, target=target):
            rows = topics.rows_of(docids)
            bad = np.flatnonzero(rows < 0)
            if bad.size:
                i = int(bad[0])
                raise InputFormatError(p, f"document {int(docids[i])} has no topics in {os.fspath(qrels)}",
                                       line=int(lines[i]), token=str(int(docids[i])))
            dup = np.flatnonzero(seen[rows] > 0)
            if dup.size == 0:
                u, c = np.unique(rows, return_counts=True)
                dup = np.flatnonzero(np.isin(rows, u[c > 1]))[1:2]
            if dup.size:
                i = int(dup[0])
                raise InputFormatError(p, f"document {int(docids[i])} appears twice ({_first_seen(where, seen[rows[i]], p, lines, rows, i)})",
                                       line=int(lines[i]), token=str(int(docids[i])))
            seen[rows] = writer.n_rows + np.arange(1, len(rows) + 1)
            where.append((p, lines))
            docid_parts.append(docids)
            row_parts.append(rows)
            if vocab_left:  # while the first tasks run
                _vocabulary_group(writer, terms, df, params["vocabulary_docs"])
                vocab_left = False
            if target is not None:
                writer.append_part(X["indptr"], top[rows], X["head"], X["tail"], X["max_index"], X["crcs"])
            else:
                writer.append(X, top[rows])
            if progress is not None:
                progress(done)
        rows = np.concatenate(row_parts)
        writer.add_array("docid", np.concatenate(docid_parts), chunks=writer.block_rows)
        counts = np.diff(topics.indptr)[rows]
        t_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=t_indptr[1:])
        take = np.repeat(topics.indptr[rows], counts) + (np.arange(t_indptr[-1]) - np.repeat(t_indptr[:-1], counts))
        writer.add_group("targets", {"indptr": t_indptr, "indices": topics.indices[take]},
                         {"names": list(topics.names), "kind": "topic indicator (CSR)"})
        if vocab_left:
            _vocabulary_group(writer, terms, df, params["vocabulary_docs"])
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def _vocabulary_group(writer: Any, terms: list[bytes] | None, df: np.ndarray | None, n_docs: int) -> None:
    assert terms is not None
    arrays: dict[str, np.ndarray] = {"terms": np.array([t.decode("utf-8", "backslashreplace") for t in terms])}
    if df is not None:
        arrays["df"] = df
    writer.add_group("vocabulary", arrays, {"n_docs": n_docs})


def _first_seen(where: list[tuple[str, np.ndarray]], index: int, p: str, lines: np.ndarray,
                rows: np.ndarray, i: int) -> str:
    if index > 0:
        k = int(index) - 1
        for f, ls in where:
            if k < len(ls):
                return f"first at {f}:{int(ls[k])}"
            k -= len(ls)
    j = int(np.flatnonzero(rows == rows[i])[0])
    return f"first at {p}:{int(lines[j])}"


def _kind(path: str) -> str:
    """``"tokens"`` or ``"vectors"`` from a file's first non-blank line."""
    with open_binary(path) as f:
        try:
            head = f.read(4096)
        except STREAM_ERRORS as e:
            raise InputFormatError(path, f"compressed stream is corrupt ({e})") from e
    first = next((ln for ln in head.split(b"\n") if ln.strip()), b"")
    if first.startswith(b".I"):
        return "tokens"
    toks = first.split()
    if len(toks) >= 1 and toks[0].isdigit() and all(b":" in t for t in toks[1:]):
        return "vectors"
    raise InputFormatError(path, "neither an RCV1-v2 token file ('.I docid') nor a vector file ('docid id:value ...')",
                           line=1, token=first[:40].decode("utf-8", "replace"))


#: The fewest workers (``executor.n_workers``) whose rows tasks write the store's chunks.  With one
#: worker this process writing them is faster: it compresses on a core of its own while the worker
#: parses (benchmarks/README.md, bench_corpora.py tokens, Round 4).
_WORKERS_WRITE_FROM = 2


def _workers_write(executor: OrderedMap | None, store: Any) -> bool:
    """Do the rows tasks write the store's chunks themselves?  When they run on an executor of at
    least :data:`_WORKERS_WRITE_FROM` workers that see this machine's files (``executor.local_files``:
    in-process threads, or Dask workers on this machine) and the store is a local path; otherwise
    this process writes."""
    from .._urls import is_url

    return (executor is not None and bool(getattr(executor, "local_files", False))
            and int(getattr(executor, "n_workers", 1)) >= _WORKERS_WRITE_FROM and not is_url(os.fspath(store)))


def _rows(paths: list[str], kind: str, executor: OrderedMap | None, terms: list[bytes] | None, idf: np.ndarray | None,
          weighting: str, normalize: bool, part_bytes: int, hash_bits: int | None = None,
          dtype: str | None = None, layout: list[tuple[int, int]] | None = None, target: dict[str, Any] | None = None
          ) -> Iterator[tuple[str, np.ndarray, np.ndarray, Any, int]]:
    """``(file, docids, lines, X, bytes read so far over all files)`` pieces in file order.  With a
    ``target`` (:meth:`~.store.DatasetWriter.begin_parts`) and the ``layout`` of the vocabulary pass
    (per part: documents, stored values), the tasks write the store's whole chunks and ``X`` is a
    part's dict of ``indptr``, ``head``, ``tail``, ``max_index``, ``crcs`` (:func:`_direct_rows_task`)."""
    sizes = [os.path.getsize(p) for p in paths]
    if kind == "vectors":
        from ._svmlight import parse_svmlight_bytes

        for k, path in enumerate(paths):
            with open_binary(path) as f:
                for chunk, first in iter_line_chunks(f, TEXT_CHUNK_BYTES, path=path):
                    X, y = parse_svmlight_bytes(chunk, path=path, first_line=first, zero_based=False,
                                                n_features=None, dtype=np.dtype(np.float64))
                    if len(y) == 0:
                        continue
                    lines = np.asarray(_nonblank_lines(chunk, first))
                    bad = np.flatnonzero((y != np.rint(y)) | (y <= 0))
                    if bad.size:
                        raise InputFormatError(path, f"docid {y[bad[0]]!r} is not a positive integer",
                                               line=int(lines[bad[0]]))
                    if hash_bits is not None:
                        X = hash_columns(X, hash_bits, 1)  # the term ids as written (1-based)
                    yield path, y.astype(np.int64), lines, X, sum(sizes[:k]) + f.raw_tell()
        return
    index: dict[bytes, int] | tuple[np.ndarray, ...] | int
    if hash_bits is not None:
        index, width = hash_bits, 1 << hash_bits
    else:
        assert terms is not None
        index = _term_table(terms) if _COMPILED else {t: i for i, t in enumerate(terms)}
        width = len(terms)
    task: Any = _compiled_rows_task if _COMPILED else _rows_task
    jobs: list[tuple[Any, ...]] = [(p, a, b) for p in paths for a, b in _token_parts(p, part_bytes)]
    extra: dict[str, Any] = {}
    if target is not None:
        assert layout is not None and len(layout) == len(jobs)
        firsts = itertools.accumulate([0] + [z for _, z in layout])
        jobs = [(*job, z0, z) for job, z0, (_, z) in zip(jobs, firsts, layout)]
        task, extra = _direct_rows_task, {"target": target}
    before = dict(zip(paths, itertools.accumulate([0] + sizes)))
    at, last = 1, None
    for (path, start, stop, *_), res in zip(jobs, run_ordered(executor, task, jobs, index=index, weighting=weighting,
                                                          idf=idf, normalize=normalize, dtype=dtype, **extra)):
        at, last = (1, path) if path != last else (at, last)
        if "error" in res:
            _raise(path, at, res["error"])
        done = before[path] + (os.path.getsize(path) if stop < 0 else stop)
        if target is not None:
            if "underflow" in res:
                raise ValueError(f"{path}: non-zero values of the documents in bytes {start}:{stop} become 0 in {dtype}; "
                                 "store them with --dtype float64 (dtype='float64')")
            yield path, res["docids"], res["lines"] + at - 1, res, done
            at += res["n_lines"]
            continue
        for docids, lines, indptr, indices, data in zip(res["docids"], res["lines"], res["indptr"],
                                                        res["indices"], res["data"]):
            X = sp.csr_matrix((data, indices, indptr), shape=(len(docids), width))
            X.has_sorted_indices = True
            yield path, docids, lines + at - 1, X, done
        at += res["n_lines"]


def _nonblank_lines(chunk: bytes, first: int) -> list[int]:
    return [first + k for k, ln in enumerate(chunk.split(b"\n")) if ln.split(b"#", 1)[0].strip()]


# =========================================================================== generator


#: RCV1-v2's share of documents under each top-level category (Lewis et al. 2004, Table 3 counts
#: over 804,414 documents: CCAT 381,327; ECAT 119,920; GCAT 239,267; MCAT 204,820).
RCV1_TOP_SHARE = {"CCAT": 381_327 / 804_414, "ECAT": 119_920 / 804_414, "GCAT": 239_267 / 804_414,
                  "MCAT": 204_820 / 804_414}


#: Subtopics the generator files documents under (RCV1-v2 codes; a 4-character numeric code's
#: parent is its 3-character prefix, every other code's parent is the top-level category).
_SUBTOPICS = (
    ("C11", "C12", "C13", "C14", "C15", "C151", "C152", "C16", "C17", "C171", "C18", "C181", "C21", "C22",
     "C23", "C24", "C31", "C311", "C33", "C41", "C42"),
    ("E11", "E12", "E121", "E13", "E131", "E14", "E21", "E211", "E31", "E41", "E51", "E512", "E61", "E71"),
    ("GCRIM", "GDEF", "GDIP", "GDIS", "GENT", "GENV", "GFAS", "GHEA", "GJOB", "GPOL", "GPRO", "GREL", "GSCI",
     "GSPO", "GTOUR", "GVIO", "GVOTE", "GWEA", "GWELF"),
    ("M11", "M12", "M13", "M131", "M132", "M14", "M141", "M142", "M143"),
)
#: The generator's topic for OTHER documents: under none of the four categories.
OTHER_TOPIC = "OTHR"
_TRAIN_SHARE = 23_149 / 804_414  # LYRL2004's training split


def _parent(code: str, top: str) -> str:
    return code[:3] if len(code) == 4 and code[1:].isdigit() else top


def _word(i: int) -> bytes:
    """A distinct lower-case 'stem' for term id ``i`` (base 26, at least two letters)."""
    i += 26
    out = bytearray()
    while i:
        i, r = divmod(i, 26)
        out.append(97 + r)
    return bytes(out[::-1])




#: Generation blocks (4,096 documents each) per corpus task: ~18 MB of token text.
_CORPUS_TASK_BLOCKS = 8


def _corpus_block(m: dict[str, Any], stream: str, b: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block ``b`` of ``stream`` of the corpus model ``m``: token counts, terms and teacher scores."""
    from ..rng import block_generator

    n_terms = m["n_terms"]
    gb = block_generator(m["random_state"], stream, b)
    L = np.clip(np.rint(np.exp(m["mu"] + 0.8 * gb.standard_normal(n))), 1, m["l_max"]).astype(np.int64)
    rank = np.minimum(np.searchsorted(m["cdf"], gb.random(int(L.sum())), side="right"), n_terms - 1)
    terms = m["perm"][rank]
    keys, counts = np.unique(np.repeat(np.arange(n, dtype=np.int64), L) * n_terms + terms, return_counts=True)
    r = keys // n_terms
    vals = np.log2(1.0 + counts)
    vals /= np.sqrt(np.bincount(r, weights=vals * vals, minlength=n))[r]
    X = sp.csr_matrix((vals, keys - r * n_terms, np.append(0, np.cumsum(np.bincount(r, minlength=n)))),
                      shape=(n, n_terms))
    scores = np.hstack([X @ m["W"], np.zeros((n, 1))])
    return L, terms, scores


def _corpus_part(b0: int, b1: int, *, model: dict[str, Any]) -> tuple[list[bytes], bytes, np.ndarray]:
    """Blocks ``b0`` to ``b1`` of the corpus (a task of :func:`write_rcv1_corpus`): the bytes each
    token file gets, the qrels lines and the label counts (codes 0..4, multi)."""
    from ..rng import block_generator
    from .synthetic import GENERATION_ROWS

    m = model
    bounds, target, n_docs = m["bounds"], m["target"], m["n_docs"]
    texts: list[list[bytes]] = [[] for _ in range(len(bounds) - 1)]
    q: list[bytes] = []
    top_counts = np.zeros(6, dtype=np.int64)
    qrel_lines: dict[tuple[int, ...], tuple[bytes, int]] = {}  # (category, subtopic[, 2nd]) -> lines, docids
    for b in range(b0, b1):
        lo = b * GENERATION_ROWS
        n = min(GENERATION_ROWS, n_docs - lo)
        L, terms, scores = _corpus_block(m, "rcv1-corpus/documents", b, GENERATION_ROWS)
        gl = block_generator(m["random_state"], "rcv1-corpus/labels", b)
        logits = scores + m["bias"]
        primary = np.argmax(logits, axis=1)
        noisy = gl.random(GENERATION_ROWS) < m["label_noise"]
        primary = np.where(noisy, np.searchsorted(np.cumsum(target), gl.random(GENERATION_ROWS) * 0.999999), primary)
        others = logits[:, :4].copy()
        others[np.arange(GENERATION_ROWS)[primary < 4], primary[primary < 4]] = -np.inf
        second = np.argmax(others, axis=1)  # the best category other than the primary
        multi = (primary < 4) & (gl.random(GENERATION_ROWS) < m["multi_fraction"] / (1.0 - m["other_fraction"]))
        subs = gl.random((GENERATION_ROWS, 2))
        primary, second, multi, subs = primary[:n], second[:n], multi[:n], subs[:n]
        docids = m["first_docid"] + lo + np.arange(n)
        text, starts = _token_text(m["words_buf"], m["words_off"], m["words_len"], terms, L[:n], docids)
        which = np.searchsorted(bounds, lo + np.arange(n), side="right") - 1
        for k in np.unique(which):
            at = np.flatnonzero(which == k)
            texts[k].append(text[starts[at[0]]:starts[at[-1] + 1]].tobytes())
        top_counts += np.bincount(np.where(multi, 5, primary), minlength=6)
        sub = np.zeros((n, 2), dtype=np.int64)  # each category's subtopic (its index in _SUBTOPICS)
        for j, cat in enumerate((primary, second)):
            for cc in range(4):
                sel = cat == cc
                sub[sel, j] = np.searchsorted(m["sub_cdf"][cc], subs[sel, j] * 0.999999)
        for d, p1, s1, p2, s2, mu_i in zip(docids.tolist(), primary.tolist(), sub[:, 0].tolist(), second.tolist(),
                                           sub[:, 1].tolist(), multi.tolist()):
            key = (p1, s1, p2, s2) if mu_i else (p1, s1)
            got = qrel_lines.get(key)
            if got is None:
                line = _qrel_template(key)
                got = qrel_lines[key] = (line, line.count(b"%d"))
            q.append(got[0] % ((d,) * got[1]))
    return [b"".join(t) for t in texts], b"".join(q), top_counts

def _qrel_template(key: tuple[int, ...]) -> bytes:
    """The qrels lines of a document with categories and subtopic indices ``key`` (``(c, s)`` or
    ``(c, s, c2, s2)``), sorted by topic, with ``%d`` for the docid."""
    codes: set[str] = set()
    for c, s in zip(key[0::2], key[1::2]):
        if c == OTHER:
            codes.add(OTHER_TOPIC)
            continue
        top, sub = TOP_LEVEL[c], _SUBTOPICS[c][s]
        codes.update((top, sub, _parent(sub, top)))
    return b"".join(b"%s %%d 1\n" % c.encode() for c in sorted(codes))


def _token_text(buf: bytes, off: np.ndarray, length: np.ndarray, terms: np.ndarray, L: np.ndarray,
                docids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The LYRL2004 token-file text of documents with ``L[i]`` tokens each (``terms``, in order):
    ``.I docid``, ``.W``, the stems 12 to a line, a blank line; as bytes (uint8) with every
    document's start offset (and the end).  One vectorised gather, no loop over documents."""
    n, ends = len(L), np.cumsum(L)
    T = int(ends[-1]) if n else 0
    heads = [b".I %d\n.W\n" % d for d in docids.tolist()]
    hbuf = b"".join(heads)
    hlen = np.array([len(h) for h in heads], dtype=np.int64)
    src = np.frombuffer(hbuf + buf + b" \n\n", dtype=np.uint8)
    w0, s0 = len(hbuf), len(hbuf) + len(buf)
    firsts = ends - L
    doc = np.repeat(np.arange(n), L)
    j = np.arange(T) - firsts[doc]  # the token's place in its document
    last = j == L[doc] - 1
    seg_start = np.empty(n + 2 * T, dtype=np.int64)
    seg_len = np.empty(n + 2 * T, dtype=np.int64)
    h_at = 2 * firsts + np.arange(n)  # document d: its head, then (stem, separator) per token
    w_at = 2 * np.arange(T) + doc + 1
    seg_start[h_at], seg_len[h_at] = np.cumsum(hlen) - hlen, hlen
    t = terms[:T]
    seg_start[w_at], seg_len[w_at] = w0 + off[t], length[t]
    seg_start[w_at + 1] = s0 + np.where(last | ((j + 1) % 12 == 0), 1, 0)  # " ", "\n", or "\n\n" at the end
    seg_len[w_at + 1] = np.where(last, 2, 1)
    seg_end = np.cumsum(seg_len)
    text = src[np.arange(int(seg_end[-1]) if n else 0) - np.repeat(seg_end - seg_len - seg_start, seg_len)]
    return text, np.append(seg_end[h_at] - hlen, seg_end[-1] if n else 0)

def write_rcv1_corpus(directory: str | os.PathLike[str], n_docs: int = 804_414, *, n_terms: int = 47_236,
                      mean_distinct: float = 75.0, other_fraction: float = 0.03, multi_fraction: float = 0.2,
                      label_noise: float = 0.05, compress: bool = False, random_state: int = 0,
                      first_docid: int = 2286, executor: OrderedMap | None = None) -> dict[str, Any]:
    """Write an RCV1-v2-shaped corpus in the LYRL2004 file formats: token files, topic qrels, hierarchy.

    Documents draw their tokens from a Zipf vocabulary of ``n_terms`` stems (the model of
    :func:`distlearn.data.synthetic.iter_rcv1_like`, about ``mean_distinct`` distinct terms each).
    Four sparse linear teachers, one per top-level category, score a document's ``log2(1 + c)``
    vector; its category is the best score after a bias calibrated so that the shares follow
    RCV1-v2's (CCAT 47 %, GCAT 30 %, MCAT 25 %, ECAT 15 % of documents, scaled to one label per
    document), with ``other_fraction`` of the documents OTHER (topic ``OTHR``, outside the four
    trees).  A ``multi_fraction`` of the others also get their second-best category, and a
    ``label_noise`` share of the categories is replaced by a random one.  Each category adds the
    category code, one subtopic and the subtopic's parent to the qrels (hierarchy-expanded, as
    distributed).  Files: ``lyrl2004_tokens_train.dat`` (LYRL2004's 2.9 % training share) and
    ``lyrl2004_tokens_test_pt0..3.dat`` (``.gz`` with ``compress=True``), ``rcv1-v2.topics.qrels``
    sorted by docid then topic, ``rcv1.topics.hier.orig``.  Seeded in blocks of 4,096 documents.
    ``executor``: where runs of blocks are generated (:func:`distlearn._tasks.run_ordered`; None: here,
    in turn); this process writes them in order, so the files are the same bytes on any executor.
    """
    import gzip as _gzip

    from ..rng import block_generator
    from .synthetic import GENERATION_ROWS, _corpus_model

    n_docs = int(n_docs)
    if n_docs < 1:
        raise ValueError(f"n_docs must be positive; got {n_docs!r}")
    if not 0.0 <= other_fraction < 1.0 or not 0.0 <= multi_fraction < 1.0 or not 0.0 <= label_noise < 1.0:
        raise ValueError("other_fraction, multi_fraction and label_noise must be in [0, 1)")
    out_dir = os.fspath(directory)
    os.makedirs(out_dir, exist_ok=True)
    ext = ".gz" if compress else ""
    names = ["lyrl2004_tokens_train.dat"] + [f"lyrl2004_tokens_test_pt{k}.dat" for k in range(4)]
    n_train = max(1, int(round(n_docs * _TRAIN_SHARE)))
    rest = n_docs - n_train
    bounds = np.array([0, n_train] + [n_train + (rest * k) // 4 for k in range(1, 5)])

    def opener(path: str) -> Any:
        return _gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")

    cdf, mu, l_max = _corpus_model(n_terms, 1.1, float(mean_distinct), 0.8)
    perm = block_generator(random_state, "rcv1-corpus/vocabulary", 0).permutation(n_terms)
    g = block_generator(random_state, "rcv1-corpus/teachers", 0)
    k = max(1, n_terms // 10)
    W = np.zeros((n_terms, 4))
    for c in range(4):
        W[g.choice(n_terms, size=k, replace=False), c] = g.standard_normal(k)
    share = np.array([RCV1_TOP_SHARE[t] for t in TOP_LEVEL])
    target = np.append(share / share.sum() * (1.0 - other_fraction), other_fraction)
    words = [_word(i) for i in range(n_terms)]

    model: dict[str, Any] = {
        "random_state": random_state, "n_terms": n_terms, "cdf": cdf, "mu": mu, "l_max": l_max, "perm": perm, "W": W,
        "target": target, "label_noise": label_noise, "multi_fraction": multi_fraction,
        "other_fraction": other_fraction, "bounds": bounds, "first_docid": first_docid, "n_docs": n_docs,
        "words_buf": b"".join(words), "words_len": np.array([len(w) for w in words], dtype=np.int64)}
    model["words_off"] = np.cumsum(model["words_len"]) - model["words_len"]
    model["sub_cdf"] = [np.cumsum(w / w.sum()) for w in (1.0 / np.arange(1, len(t) + 1) for t in _SUBTOPICS)]

    # Biases so that the argmax shares follow `target` on a calibration sample of its own stream.
    cal = np.vstack([_corpus_block(model, "rcv1-corpus/calibration", b, GENERATION_ROWS)[2] for b in range(4)])
    bias = np.zeros(5)
    for _ in range(300):
        got = np.bincount(np.argmax(cal + bias, axis=1), minlength=5) / len(cal)
        bias += 0.1 * (np.log(target + 1e-12) - np.log(got + 1e-3))
        bias -= bias[4]
    model["bias"] = bias

    n_blocks = -(-n_docs // GENERATION_ROWS)
    jobs = [(b, min(b + _CORPUS_TASK_BLOCKS, n_blocks)) for b in range(0, n_blocks, _CORPUS_TASK_BLOCKS)]
    top_counts = np.zeros(6, dtype=np.int64)  # codes 0..4 and multi
    files = [opener(os.path.join(out_dir, nm + ext)) for nm in names]
    qrels_path = os.path.join(out_dir, "rcv1-v2.topics.qrels" + ext)
    try:
        with opener(qrels_path) as qf:
            for texts, qrels, counts in run_ordered(executor, _corpus_part, jobs, model=model):
                for f, text in zip(files, texts):
                    if text:
                        f.write(text)
                qf.write(qrels)
                top_counts += counts
    finally:
        for f in files:
            f.close()
    hier_path = os.path.join(out_dir, "rcv1.topics.hier.orig")
    with open(hier_path, "w") as hf:
        for top, subs_c in zip(TOP_LEVEL, _SUBTOPICS):
            hf.write(f"parent: Root     child: {top}   child-description: {top}\n")
            for sub in subs_c:
                hf.write(f"parent: {_parent(sub, top)}   child: {sub}   child-description: {sub}\n")
        hf.write(f"parent: Root     child: {OTHER_TOPIC}   child-description: OTHER\n")
    label_share = {name: int(top_counts[c]) / n_docs for c, name in LABEL_NAMES.items() if c != MULTI}
    label_share["MULTI"] = int(top_counts[5]) / n_docs
    return {"tokens": [os.path.join(out_dir, nm + ext) for nm in names], "qrels": qrels_path,
            "hierarchy": hier_path, "n_docs": n_docs, "n_train": n_train, "n_terms": n_terms,
            "label_share": label_share}
