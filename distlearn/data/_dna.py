"""DNA sequences (splice sites and the like): readers and sparse feature maps, straight to a store.

Inputs
------
FASTA
    ``>name ... label`` header lines, each followed by one or more sequence
    lines.  The label is the header's *last* whitespace-separated token
    (``>seq17 acceptor +1``), or -- with ``labels=FILE`` -- the i-th line of a
    separate labels file, one label per record.  Labels are numbers (``+1``,
    ``-1``, ``0``, ``3``).
``label<TAB>sequence`` lines
    The format of Sonnenburg et al.'s splice-site files; blank lines are skipped.

Every file may be gzip, bz2 or xz compressed (detected from its content).

Alphabet
--------
``A C G T`` (either case).  The IUPAC ambiguity codes ``N R Y S W K M B D H V``
are accepted under the documented rule ``iupac="spread"`` (default): in the
positional one-hot map an ambiguous letter spreads one unit of weight evenly
over the bases it stands for (``N`` -> 0.25 on each of A, C, G, T; ``R`` -> 0.5 on
A and G); a k-mer containing an ambiguous letter is left out of the k-mer maps
(weighted degree, spectrum).  ``iupac="error"`` refuses them.  Any other
letter is an error naming the file, record, line and position.  The positional
maps need sequences of one length: a record of another length is an error
naming it.

Feature maps (all sparse)
-------------------------
``"onehot"``
    ``4 L`` columns: column ``4 i + b`` is base ``b`` (A, C, G, T) at position ``i``.
``"wd"``
    The weighted-degree map of Rätsch & Sonnenburg (2004): for every ``k <= degree``
    and every position ``i <= L - k`` the one-hot of the k-mer starting at ``i``,
    scaled by ``sqrt(beta_k)``, ``beta_k = 2 (degree - k + 1) / (degree (degree + 1))``,
    so the inner product of two maps is the WD kernel
    ``sum_k beta_k sum_i [u_{k,i}(x) = u_{k,i}(x')]``.  Column of k-mer code ``c``
    (base-4, first letter most significant) at position ``i``:
    ``offset_k + i 4^k + c`` with ``offset_k = sum_{j<k} 4^j (L - j + 1)``.
``"spectrum"``
    Counts of every k-mer (``4^k`` columns, code ``c``), any sequence length.

The dimension and the map's parameters go into the store's metadata
(``params["features"]``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._errors import InputFormatError
from ._io import STREAM_ERRORS, open_binary

__all__ = ["FEATURE_MAPS", "DnaFeatures", "read_sequences", "convert_sequences", "write_splice_corpus"]

FEATURE_MAPS = ("onehot", "wd", "spectrum")

#: Letter -> the bases it stands for (IUPAC).
IUPAC = {"A": "A", "C": "C", "G": "G", "T": "T", "N": "ACGT", "R": "AG", "Y": "CT", "S": "CG", "W": "AT",
         "K": "GT", "M": "AC", "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG"}
_CODE = np.full(256, 255, dtype=np.uint8)  # byte -> 0..3 for ACGT, 4.. for ambiguity codes, 255 unknown
_SPREAD = np.zeros((16, 4))                # code -> weights over A, C, G, T
for _i, (_letter, _bases) in enumerate(IUPAC.items()):
    for _b in (_letter, _letter.lower()):
        _CODE[ord(_b)] = _i
    for _base in _bases:
        _SPREAD[_i, "ACGT".index(_base)] = 1.0 / len(_bases)


def _label(token: str, path: str, line: int, name: str) -> float:
    try:
        v = float(token)
    except ValueError:
        raise InputFormatError(path, f"record {name!r}: label {token!r} is not a number", line=line,
                               token=token) from None
    if not np.isfinite(v):
        raise InputFormatError(path, f"record {name!r}: label {token!r} is not finite", line=line, token=token)
    return v


def read_sequences(path: str | os.PathLike[str], *, labels: str | os.PathLike[str] | None = None
                   ) -> Iterator[tuple[str, int, float, bytes]]:
    """``(name, line, label, sequence)`` per record of a FASTA or ``label<TAB>sequence`` file,
    streamed; ``line`` is the 1-based line where the record starts."""
    path = os.fspath(path)
    label_it = _label_lines(os.fspath(labels)) if labels is not None else None
    try:
        with open_binary(path) as f:
            first = f.read(1)  # '>' starts a FASTA file; anything else is label<TAB>sequence lines
            if first == b">":
                yield from _fasta(f, path, label_it)
            elif first:
                yield from _tsv(f, first, path)
            if label_it is not None and next(label_it, None) is not None:
                raise InputFormatError(os.fspath(labels), "more labels than records in " + path)
    except STREAM_ERRORS as exc:
        raise InputFormatError(path, f"the compressed stream is corrupt ({exc})") from None


def _label_lines(path: str) -> Iterator[tuple[int, str]]:
    with open_binary(path) as f:
        for n, raw in enumerate(iter(f.readline, b""), 1):
            s = raw.decode("utf-8", "replace").strip()
            if s:
                yield n, s


def _fasta(f: Any, path: str, label_it: Iterator[tuple[int, str]] | None):
    line_no = 1
    header = f.readline().decode("utf-8", "replace").strip()
    while True:
        start = line_no
        parts = []
        nxt = b""
        while True:
            raw = f.readline()
            if not raw:
                break
            line_no += 1
            if raw.startswith(b">"):
                nxt = raw
                break
            parts.append(raw.strip())
        tokens = header.split()
        name = tokens[0] if tokens else f"#{start}"
        if label_it is None:
            if len(tokens) < 2:
                raise InputFormatError(path, f"record {name!r}: no label at the end of the header (or pass a "
                                       "labels file)", line=start)
            label = _label(tokens[-1], path, start, name)
        else:
            got = next(label_it, None)
            if got is None:
                raise InputFormatError(path, f"record {name!r}: the labels file has fewer labels than records",
                                       line=start)
            label = _label(got[1], path, start, name)
        yield name, start, label, b"".join(parts)
        if not nxt:
            return
        header = nxt[1:].decode("utf-8", "replace").strip()


def _tsv(f: Any, first: bytes, path: str):
    line_no = 0
    carry = first
    for raw in iter(f.readline, b""):
        line_no += 1
        line = (carry + raw).strip()
        carry = b""
        if not line:
            continue
        lab, tab, seq = line.partition(b"\t")
        if not tab:
            raise InputFormatError(path, "expected 'label<TAB>sequence'", line=line_no,
                                   token=line[:40].decode("utf-8", "replace"))
        name = f"line {line_no}"
        yield name, line_no, _label(lab.decode("utf-8", "replace"), path, line_no, name), seq.strip()
    if carry.strip():
        raise InputFormatError(path, "expected 'label<TAB>sequence'", line=1)


class DnaFeatures:
    """A feature map of DNA sequences (module docstring): ``"onehot"``, ``"wd"`` (``degree``) or
    ``"spectrum"`` (``k``), for sequences of ``length`` (positional maps)."""

    def __init__(self, kind: str = "wd", *, length: int | None = None, degree: int = 8, k: int = 3,
                 iupac: str = "spread") -> None:
        if kind not in FEATURE_MAPS:
            raise ValueError(f"features must be one of {FEATURE_MAPS}, got {kind!r}")
        if iupac not in ("spread", "error"):
            raise ValueError(f"iupac must be 'spread' or 'error', got {iupac!r}")
        self.kind, self.length, self.degree, self.k, self.iupac = kind, length, int(degree), int(k), iupac
        if kind == "wd" and not 1 <= self.degree <= 15:
            raise ValueError(f"degree must be in 1..15, got {degree!r}")
        if kind == "spectrum" and not 1 <= self.k <= 15:
            raise ValueError(f"k must be in 1..15, got {k!r}")

    @property
    def n_features(self) -> int:
        if self.kind == "spectrum":
            return 4 ** self.k
        if self.length is None:
            raise ValueError("the positional maps need the sequence length")
        L = self.length
        if self.kind == "onehot":
            return 4 * L
        return int(sum(4 ** k * max(0, L - k + 1) for k in range(1, self.degree + 1)))

    def describe(self) -> dict[str, Any]:
        out = {"map": self.kind, "n_features": self.n_features, "iupac": self.iupac, "alphabet": "ACGT"}
        if self.kind != "spectrum":
            out["length"] = self.length
        if self.kind == "wd":
            d = self.degree
            out.update(degree=d, beta=[2.0 * (d - k + 1) / (d * (d + 1)) for k in range(1, d + 1)],
                       column="offset_k + i * 4**k + code, offset_k = sum_{j<k} 4**j * (L - j + 1)")
        if self.kind == "spectrum":
            out["k"] = self.k
        return out

    def codes(self, seqs: Sequence[bytes], where: Sequence[tuple[str, str, int]]) -> np.ndarray:
        """The letters as codes (``(n, L)`` uint8: 0..3 ACGT, 4.. ambiguity), checked."""
        L = self.length if self.kind != "spectrum" else None
        out = []
        for s, (path, name, line) in zip(seqs, where):
            if L is not None and len(s) != L:
                raise InputFormatError(path, f"record {name!r} has length {len(s)}, the others {L}: the "
                                       f"{self.kind} map needs sequences of one length", line=line)
            c = _CODE[np.frombuffer(s, dtype=np.uint8)]
            bad = np.flatnonzero((c == 255) | ((c > 3) if self.iupac == "error" else False))
            if bad.size:
                p = int(bad[0])
                raise InputFormatError(path, f"record {name!r}: letter {chr(s[p])!r} at position {p + 1} is not "
                                       + ("A, C, G or T" if self.iupac == "error" else "a DNA/IUPAC code"),
                                       line=line, token=chr(s[p]))
            out.append(c)
        if L is not None:
            return np.stack(out) if out else np.zeros((0, L), np.uint8)
        return out  # type: ignore[return-value]

    def transform(self, codes: Any, dtype: Any = np.float64) -> sp.csr_matrix:
        """The sparse rows of coded sequences (from :meth:`codes`)."""
        if self.kind == "spectrum":
            return self._spectrum(codes, dtype)
        n, L = codes.shape
        if self.kind == "onehot":
            X = _SPREAD[np.minimum(codes, 15)].reshape(n, 4 * L)
            return sp.csr_matrix(X.astype(dtype))
        cols, vals = [], []
        offset = 0
        kmer = np.zeros((n, L), dtype=np.int64)
        valid = np.ones((n, L), dtype=bool)
        base_ok = codes < 4
        d = self.degree
        for k in range(1, d + 1):
            m = L - k + 1
            if m <= 0:
                break
            # the k-mer at i extends the (k-1)-mer at i by the letter at i + k - 1
            kmer = kmer[:, :m] * 4 + np.where(base_ok[:, k - 1:k - 1 + m], codes[:, k - 1:k - 1 + m], 0)
            valid = valid[:, :m] & base_ok[:, k - 1:k - 1 + m]
            pos = np.arange(m, dtype=np.int64) * 4 ** k
            cols.append(np.where(valid, offset + pos[None, :] + kmer, -1))
            vals.append(np.full(m, np.sqrt(2.0 * (d - k + 1) / (d * (d + 1)))))
            offset += 4 ** k * m
        C = np.concatenate(cols, axis=1)
        V = np.broadcast_to(np.concatenate(vals)[None, :], C.shape)
        keep = C >= 0
        indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
        return sp.csr_matrix((V[keep].astype(dtype), C[keep], indptr), shape=(n, self.n_features))

    def _spectrum(self, codes: list[np.ndarray], dtype: Any) -> sp.csr_matrix:
        k = self.k
        rows, cols = [], []
        w = 4 ** np.arange(k - 1, -1, -1, dtype=np.int64)
        for r, c in enumerate(codes):
            m = len(c) - k + 1
            if m <= 0:
                continue
            win = np.lib.stride_tricks.sliding_window_view(c.astype(np.int64), k)
            ok = np.all(win < 4, axis=1)
            cols.append(win[ok] @ w)
            rows.append(np.full(int(ok.sum()), r))
        n = len(codes)
        if not cols:
            return sp.csr_matrix((n, self.n_features), dtype=dtype)
        X = sp.coo_matrix((np.ones(sum(len(c) for c in cols)), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n, self.n_features)).tocsr()
        X.sum_duplicates()
        return X.astype(dtype)


def convert_sequences(inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], store: str | os.PathLike[str],
                      *, features: str = "wd", degree: int = 8, k: int = 3, iupac: str = "spread",
                      labels: str | os.PathLike[str] | None = None, dtype: str = "float32",
                      chunk_records: int = 4096, block_rows: int | None = None, overwrite: bool = False) -> Any:
    """Read DNA sequence files and write their sparse feature map to a distlearn store.

    The sequence length of the positional maps is the first record's; the map's
    description (dimension, weights, column formula) goes to the store's
    ``params["features"]``.  A bad record stops the conversion and leaves no store.
    """
    from .store import DatasetWriter

    paths = [os.fspath(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    if labels is not None and len(paths) != 1:
        raise ValueError("a labels file goes with exactly one FASTA file")
    records = ((p, rec) for p in paths for rec in read_sequences(p, labels=labels))
    first = next(records, None)
    if first is None:
        raise InputFormatError(paths[0], "no sequences")
    fmap = DnaFeatures(features, length=len(first[1][3]), degree=degree, k=k, iupac=iupac)
    writer = DatasetWriter(store, layout="csr", n_features=fmap.n_features, dtype=dtype, block_rows=block_rows,
                           source=", ".join(os.path.basename(p) for p in paths),
                           params={"features": fmap.describe()}, overwrite=overwrite)
    try:
        batch: list[tuple[str, tuple[str, int, float, bytes]]] = [first]

        def flush() -> None:
            where = [(p, name, line) for p, (name, line, _, _) in batch]
            X = fmap.transform(fmap.codes([r[3] for _, r in batch], where), dtype=np.float64)
            writer.append(X, np.array([r[2] for _, r in batch]))
            batch.clear()

        for rec in records:
            batch.append(rec)
            if len(batch) >= chunk_records:
                flush()
        flush()
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def write_splice_corpus(path: str | os.PathLike[str], n: int, *, length: int = 141, positive_fraction: float = 0.05,
                        fmt: str = "tsv", random_state: int = 0, chunk: int = 65536) -> os.PathLike[str] | str:
    """Write ``n`` splice-site-like sequences with a planted acceptor signal (a stand-in with the
    size and shape of Sonnenburg et al.'s C. elegans acceptor data, which is not shipped).

    Every sequence has the canonical ``AG`` at positions ``c, c + 1`` (``c = length // 2 - 1``), as
    all acceptor candidates do.  Positives (label +1, a ``positive_fraction`` of the rows) carry
    a pyrimidine-rich tract in the 20 bases before it (C or T with probability 0.8 each) and a
    ``G`` after it with probability 0.6; negatives (label -1) are uniform elsewhere.  ``fmt``:
    ``"tsv"`` (``label<TAB>sequence``) or ``"fasta"`` (label at the end of the header); a name
    ending in ``.gz`` is gzip-compressed.  Seeded by ``random_state`` in chunks of ``chunk`` rows,
    so the file is the same whatever the machine.
    """
    import gzip as _gzip

    from .. import rng as _rng

    if fmt not in ("tsv", "fasta"):
        raise ValueError(f"fmt must be 'tsv' or 'fasta', got {fmt!r}")
    if length < 30:
        raise ValueError(f"length must be at least 30, got {length!r}")
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    c = length // 2 - 1
    gz = os.fspath(path).endswith(".gz")
    with (_gzip.open(path, "wb", compresslevel=6) if gz else open(path, "wb")) as out:
        for lo in range(0, n, chunk):
            m = min(chunk, n - lo)
            g = _rng.block_generator(random_state, "splice-corpus", lo // chunk)
            seq = letters[g.integers(0, 4, size=(m, length))]
            pos = g.random(m) < positive_fraction
            tract = np.where(g.random((m, 20)) < 0.8, letters[1 + 2 * g.integers(0, 2, size=(m, 20))],
                             letters[2 * g.integers(0, 2, size=(m, 20))])  # C/T vs A/G
            seq[pos, c - 20:c] = tract[pos]
            seq[:, c], seq[:, c + 1] = ord("A"), ord("G")
            after_g = pos & (g.random(m) < 0.6)
            seq[after_g, c + 2] = ord("G")
            lines = []
            for i in range(m):
                lab = "+1" if pos[i] else "-1"
                s = seq[i].tobytes().decode()
                lines.append(f"{lab}\t{s}\n" if fmt == "tsv" else f">site{lo + i} {lab}\n{s}\n")
            out.write("".join(lines).encode())
    return path
