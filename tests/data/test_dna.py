"""DNA sequence readers and feature maps (FASTA, label<TAB>sequence; one-hot, weighted degree, spectrum)."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn.data import open_dataset
from distlearn.data._dna import DnaFeatures, convert_sequences, read_sequences
from distlearn.data._errors import InputFormatError

FASTA = b""">s1 acceptor +1
ACGTAC
GT
>s2 decoy -1
acgtNNgt
>s3 -1
TTTTTTTT
"""
TSV = b"+1\tACGTACGT\n\n-1\tacgtNNgt\n-1\tTTTTTTTT\n"


def _write(path, data, gz=False):
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_fasta_and_tsv_give_the_same_records(tmp_path, gz):
    fa = list(read_sequences(_write(tmp_path / "a.fa", FASTA, gz)))
    tsv = list(read_sequences(_write(tmp_path / "a.tsv", TSV, gz)))
    assert [r[0] for r in fa] == ["s1", "s2", "s3"] and [r[1] for r in fa] == [1, 4, 6]
    assert [r[2:] for r in fa] == [r[2:] for r in tsv] == [(1.0, b"ACGTACGT"), (-1.0, b"acgtNNgt"),
                                                           (-1.0, b"TTTTTTTT")]
    assert [r[1] for r in tsv] == [1, 3, 4]


def test_labels_file_for_fasta(tmp_path):
    fa = _write(tmp_path / "a.fa", b">x\nACGT\n>y\nTTTT\n")
    recs = list(read_sequences(fa, labels=_write(tmp_path / "l.txt", b"1\n0\n")))
    assert [(r[0], r[2]) for r in recs] == [("x", 1.0), ("y", 0.0)]
    with pytest.raises(InputFormatError, match="fewer labels than records"):
        list(read_sequences(fa, labels=_write(tmp_path / "l1.txt", b"1\n")))
    with pytest.raises(InputFormatError, match="more labels than records"):
        list(read_sequences(fa, labels=_write(tmp_path / "l3.txt", b"1\n0\n1\n")))


def test_onehot_spreads_ambiguity_codes():
    f = DnaFeatures("onehot", length=3)
    X = f.transform(f.codes([b"ANr"], [("f", "r", 1)])).toarray()
    np.testing.assert_array_equal(X, [[1, 0, 0, 0, 0.25, 0.25, 0.25, 0.25, 0.5, 0, 0.5, 0]])
    assert f.n_features == 12


def _wd_kernel(a: bytes, b: bytes, d: int) -> float:
    """Rätsch & Sonnenburg's weighted-degree kernel, by its definition; k-mers with a non-ACGT letter never match."""
    total = 0.0
    for k in range(1, d + 1):
        beta = 2.0 * (d - k + 1) / (d * (d + 1))
        for i in range(len(a) - k + 1):
            u, v = a[i:i + k].upper(), b[i:i + k].upper()
            if u == v and all(ch in b"ACGT" for ch in u):
                total += beta
    return total


@settings(max_examples=60, deadline=None)
@given(seqs=st.lists(st.text("ACGTN", min_size=9, max_size=9), min_size=2, max_size=5),
       d=st.integers(1, 6))
def test_wd_map_inner_products_are_the_wd_kernel(seqs, d):
    f = DnaFeatures("wd", length=9, degree=d)
    raw = [s.encode() for s in seqs]
    X = f.transform(f.codes(raw, [("f", "r", 1)] * len(raw)))
    assert X.shape[1] == f.n_features and X.has_sorted_indices
    G = (X @ X.T).toarray()
    for i, j in itertools.product(range(len(raw)), repeat=2):
        assert G[i, j] == pytest.approx(_wd_kernel(raw[i], raw[j], d), rel=1e-12, abs=1e-12)


def test_wd_columns_follow_the_documented_formula():
    f = DnaFeatures("wd", length=4, degree=2)
    X = f.transform(f.codes([b"CATG"], [("f", "r", 1)]))
    # k=1: i*4 + code; k=2: offset 4*4 = 16, then i*16 + code (C=1, A=0, T=3, G=2)
    want = [0 * 4 + 1, 1 * 4 + 0, 2 * 4 + 3, 3 * 4 + 2, 16 + 0 * 16 + 4, 16 + 1 * 16 + 3, 16 + 2 * 16 + 14]
    assert X.indices.tolist() == want and f.n_features == 16 + 16 * 3


def test_spectrum_counts_kmers_of_any_length():
    f = DnaFeatures("spectrum", k=2)
    X = f.transform(f.codes([b"AAAC", b"ANAA", b"G"], [("f", "r", 1)] * 3)).toarray()
    assert X[0, 0] == 2 and X[0, 1] == 1 and X.sum(axis=1).tolist() == [3, 1, 0]


@pytest.mark.parametrize("data,message", [
    (b">a +1\nACGT\n>b -1\nACG\n", "record 'b' has length 3, the others 4"),
    (b">a +1\nACGT\n>b -1\nACZT\n", "record 'b': letter 'Z' at position 3 is not a DNA/IUPAC code"),
    (b">a\nACGT\n", "record 'a': no label"),
    (b">a x\nACGT\n", "label 'x' is not a number"),
    (b"+1 ACGT\n", "expected 'label<TAB>sequence'"),
])
def test_bad_records_are_named_and_leave_no_store(tmp_path, data, message):
    src = _write(tmp_path / "bad.txt", data)
    with pytest.raises(InputFormatError, match=message) as info:
        convert_sequences(src, tmp_path / "s.zarr", features="onehot")
    assert str(info.value).startswith(str(src))
    assert not (tmp_path / "s.zarr").exists()


def test_iupac_error_rule(tmp_path):
    f = DnaFeatures("onehot", length=4, iupac="error")
    with pytest.raises(InputFormatError, match="letter 'N' at position 2 is not A, C, G or T"):
        f.codes([b"ANGT"], [("f.fa", "r", 3)])


@pytest.mark.parametrize("features", ["onehot", "wd", "spectrum"])
def test_convert_writes_the_map_and_its_description(tmp_path, features):
    src = _write(tmp_path / "a.tsv.gz", TSV * 5, gz=True)
    ds = convert_sequences(src, tmp_path / "s.zarr", features=features, degree=3, k=2, chunk_records=4,
                           block_rows=6, dtype="float64")
    ds = open_dataset(tmp_path / "s.zarr")
    f = DnaFeatures(features, length=8, degree=3, k=2)
    recs = list(read_sequences(src))
    want = f.transform(f.codes([r[3] for r in recs], [("f", "r", 1)] * len(recs))).toarray()
    X, y = ds.to_scipy()
    np.testing.assert_array_equal(X.toarray(), want)
    assert y.tolist() == [1.0, -1.0, -1.0] * 5 and ds.n_features == f.n_features
    assert ds.info()["params"]["features"]["map"] == features


@pytest.mark.parametrize("fmt,name", [("tsv", "s.tsv"), ("fasta", "s.fa.gz")])
def test_splice_corpus_generator_plants_a_learnable_signal(tmp_path, fmt, name):
    from distlearn import Perceptron
    from distlearn.data._dna import write_splice_corpus

    path = write_splice_corpus(tmp_path / name, 3000, length=61, positive_fraction=0.3, fmt=fmt, random_state=5,
                               chunk=1000)
    recs = list(read_sequences(path))
    assert len(recs) == 3000 and all(r[3][29:31] == b"AG" and len(r[3]) == 61 for r in recs)
    assert 0.25 < np.mean([r[2] == 1 for r in recs]) < 0.35
    again = write_splice_corpus(tmp_path / ("again-" + name), 3000, length=61, positive_fraction=0.3, fmt=fmt,
                                random_state=5, chunk=1000)
    assert [r[2:] for r in read_sequences(again)] == [r[2:] for r in recs]
    ds = convert_sequences(path, tmp_path / "s.zarr", features="wd", degree=3)
    X, y = open_dataset(tmp_path / "s.zarr").to_scipy()
    clf = Perceptron(epochs=3, random_state=0).fit(X[:2400], y[:2400])
    assert clf.score(X[2400:], y[2400:]) > 0.9, ds


def test_distlearn_convert_dna(tmp_path, capsys):
    from distlearn.cli import main

    fa = _write(tmp_path / "sites.fa.gz", FASTA, gz=True)
    assert main(["convert", str(fa), str(tmp_path / "wd.zarr"), "--degree", "2", "--json"]) == 0
    info = __import__("json").loads(capsys.readouterr().out)
    assert info["n_samples"] == 3 and info["params"]["features"]["degree"] == 2
    tsv = _write(tmp_path / "sites.txt", TSV)
    assert main(["convert", str(tsv), str(tmp_path / "sp.zarr"), "--format", "dna", "--features", "spectrum",
                 "--k", "2"]) == 0
    assert open_dataset(tmp_path / "sp.zarr").n_features == 16
    bad = _write(tmp_path / "bad.fa", b">a +1\nACGT\n>b -1\nACG\n")
    assert main(["convert", str(bad), str(tmp_path / "bad.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.fa:3: record 'b' has length 3" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "bad.zarr").exists()
