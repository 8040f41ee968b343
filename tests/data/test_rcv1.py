"""RCV1-v2 readers (LYRL2004 token and vector files, topic qrels, hierarchy), the corpus generator,
and binary views of a multi-label store."""

from __future__ import annotations

import gzip
import json
import math
import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.data._errors import InputFormatError
from distlearn.data._rcv1 import (
    Vocabulary,
    _parse_documents,
    convert_rcv1,
    read_qrels,
    read_token_documents,
    write_rcv1_corpus,
)
from distlearn.data.store import DatasetWriter, StoreError
from distlearn.distributed.executor import OnDask

# Written from the LYRL2004 description: ".I docid", ".W", tokens over lines, a blank line.
TOKENS_A = b""".I 2286
.W
bank rate cut bank
rate

.I 2287
.W
oil price oil oil

"""
TOKENS_B = b""".I 2290
.W
vote bank
"""
# Sorted by docid then topic, as distributed; hierarchy-expanded (C15 -> CCAT).
QRELS = b"""C15 2286 1
CCAT 2286 1
ECAT 2286 1
E11 2287 1
ECAT 2287 1
OTHR 2290 1
"""
HIER = b"""parent: Root     child: CCAT   child-description: CORPORATE/INDUSTRIAL
parent: CCAT     child: C15    child-description: PERFORMANCE
parent: Root     child: ECAT   child-description: ECONOMICS
parent: ECAT     child: E11    child-description: ECONOMIC PERFORMANCE
"""


def _w(path, data, gz=False):
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "a": _w(tmp_path / "lyrl2004_tokens_train.dat", TOKENS_A),
        "b": _w(tmp_path / "lyrl2004_tokens_test_pt0.dat.gz", TOKENS_B, gz=True),
        "qrels": _w(tmp_path / "rcv1-v2.topics.qrels.gz", QRELS, gz=True),
        "hier": _w(tmp_path / "rcv1.topics.hier.orig", HIER),
    }


def test_token_documents_parse_with_lines(files):
    docs = list(read_token_documents(files["a"]))
    assert docs == [(2286, 1, [b"bank", b"rate", b"cut", b"bank", b"rate"]), (2287, 6, [b"oil", b"price", b"oil", b"oil"])]
    assert list(read_token_documents(files["b"])) == [(2290, 1, [b"vote", b"bank"])]


def test_qrels_as_indicator(files):
    t = read_qrels(files["qrels"])
    assert t.docids.tolist() == [2286, 2287, 2290]
    assert t.names == ("C15", "CCAT", "E11", "ECAT", "OTHR")
    ind = sp.csr_matrix((np.ones(len(t.indices)), t.indices, t.indptr)).toarray()
    np.testing.assert_array_equal(ind, [[1, 1, 0, 1, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]])
    # 2286: CCAT and ECAT -> multi; 2287: ECAT; 2290: outside the four trees -> OTHER
    assert t.top_level().tolist() == [-1, 1, 4]


def test_top_level_through_the_hierarchy_file(files, tmp_path):
    from distlearn.data._rcv1 import read_hierarchy

    q = _w(tmp_path / "q", b"C15 1 1\nX9 2 1\nE11 3 1\nZZ 4 1\n")
    # with the file: X9 is under CCAT, E11 under ECAT, ZZ nowhere
    h = read_hierarchy(_w(tmp_path / "h", HIER + b"parent: C15 child: X9 child-description: made up\n"))
    assert read_qrels(q).top_level(h).tolist() == [0, 0, 1, 4]
    # without it, by first letter: X9 and ZZ are OTHER
    assert read_qrels(q).top_level().tolist() == [0, 4, 1, 4]


def test_convert_log_counts_exactly(files, tmp_path):
    ds = convert_rcv1([files["a"], files["b"]], tmp_path / "r.zarr", qrels=files["qrels"], dtype="float64")
    terms = ds.side_array("vocabulary/terms").tolist()
    assert terms == ["bank", "cut", "oil", "price", "rate", "vote"]
    assert ds.side_array("vocabulary/df").tolist() == [2, 1, 1, 1, 1, 1]
    X, y = ds.to_scipy()
    expect = np.zeros((3, 6))
    expect[0, [0, 1, 4]] = [math.log2(3), 1.0, math.log2(3)]
    expect[1, [2, 3]] = [2.0, 1.0]
    expect[2, [0, 5]] = [1.0, 1.0]
    np.testing.assert_array_equal(X.toarray(), expect)
    assert y.tolist() == [-1, 1, 4]
    assert ds.side_array("docid").tolist() == [2286, 2287, 2290]
    names, ind = ds.topics()
    assert names == ["C15", "CCAT", "E11", "ECAT", "OTHR"] and ind.toarray()[1].tolist() == [0, 0, 1, 1, 0]
    assert ds.meta["label_names"]["1"] == "ECAT" and ds.meta["params"]["weighting"] == "log"


@pytest.mark.parametrize("weighting", ["tf", "binary", "tfidf"])
def test_weightings_and_unit_rows(files, tmp_path, weighting):
    ds = convert_rcv1([files["a"], files["b"]], tmp_path / "r.zarr", qrels=files["qrels"], dtype="float64",
                      weighting=weighting, normalize=True)
    X = ds.to_scipy()[0].toarray()
    c = np.zeros((3, 6))
    c[0, [0, 1, 4]] = [2, 1, 2]
    c[1, [2, 3]] = [3, 1]
    c[2, [0, 5]] = [1, 1]
    df = np.array([2, 1, 1, 1, 1, 1])
    with np.errstate(divide="ignore"):
        v = {"tf": c, "binary": (c > 0) * 1.0,
             "tfidf": np.where(c > 0, (1 + np.log(np.where(c > 0, c, 1))) * np.log(3 / df), 0.0)}[weighting]
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(X, v / np.where(norms > 0, norms, 1), rtol=1e-12)
    row_norms = np.linalg.norm(X, axis=1)
    assert np.allclose(row_norms[norms.ravel() > 0], 1.0)


def test_min_df_and_given_vocabulary(files, tmp_path):
    ds = convert_rcv1([files["a"], files["b"]], tmp_path / "m.zarr", qrels=files["qrels"], min_df=2)
    assert ds.side_array("vocabulary/terms").tolist() == ["bank"] and ds.to_scipy()[0].toarray().ravel().tolist() == [
        pytest.approx(math.log2(3)), 0, 1]
    ds = convert_rcv1(files["b"], tmp_path / "v.zarr", qrels=files["qrels"], vocabulary=["bank", "oil"])
    assert ds.n_features == 2 and ds.to_scipy()[0].toarray().tolist() == [[1.0, 0.0]]  # 'vote' dropped


def test_vector_files(files, tmp_path):
    vec = _w(tmp_path / "lyrl2004_vectors_train.dat", b"2286  3:0.5 7:0.25\n2287 1:1.0\n\n2290 2:0.75\n")
    ds = convert_rcv1(vec, tmp_path / "v.zarr", qrels=files["qrels"], dtype="float64")
    X, y = ds.to_scipy()
    assert X.shape == (3, 7) and X[0, 2] == 0.5 and X[0, 6] == 0.25 and X[1, 0] == 1.0 and X[2, 1] == 0.75
    assert y.tolist() == [-1, 1, 4] and ds.side_array("docid").tolist() == [2286, 2287, 2290]
    with pytest.raises(InputFormatError, match=r"v2.dat:3: document 999 has no topics"):
        convert_rcv1(_w(tmp_path / "v2.dat", b"2286 1:1\n\n999 1:1\n"), tmp_path / "v2.zarr", qrels=files["qrels"])


@pytest.mark.parametrize("data, line, msg", [
    (b".I 2286\n.W\na b\n\n.I 5\n.W\nc\n", 5, "document 5 has no topics"),
    (b".I 2286\n.W\na b\n\n.I 2286\n.W\nc\n", 5, r"document 2286 appears twice \(first at .*t.dat:1\)"),
    (b".I 2286\nx\na b\n", 2, "expected '.W'"),
    (b"junk\n.I 2286\n.W\na\n", 1, "neither an RCV1-v2 token file"),
    (b".I abc\n.W\na\n", 1, "docid 'abc' is not a positive integer"),
    (b".I 2286\n.W\na\n.W\nb\n", 4, "field .W in the middle"),
])
def test_bad_token_files_name_file_line_docid_and_leave_nothing(files, tmp_path, data, line, msg):
    f = _w(tmp_path / "t.dat", data)
    out = tmp_path / "bad.zarr"
    with pytest.raises(InputFormatError, match=msg) as e:
        convert_rcv1(f, out, qrels=files["qrels"], part_bytes=8)
    assert e.value.line == line and e.value.path == f
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if "bad.zarr" in p]


def test_duplicate_across_files_names_both(files, tmp_path):
    f2 = _w(tmp_path / "again.dat", b".I 2287\n.W\nz\n")
    with pytest.raises(InputFormatError, match=r"again.dat:1: document 2287 appears twice \(first at .*train.dat:6\)"):
        convert_rcv1([files["a"], f2], tmp_path / "d.zarr", qrels=files["qrels"])


@pytest.mark.parametrize("data, msg", [(b"CCAT 2286\n", "expected 'TOPIC DOCID 1'"),
                                       (b"CCAT 2286 0\n", "third field must be 1"),
                                       (b"CCAT x 1\n", "docid 'x' is not a positive integer")])
def test_bad_qrels(tmp_path, data, msg):
    q = _w(tmp_path / "q", b"ECAT 1 1\n" + data)
    with pytest.raises(InputFormatError, match=f"q:2: {msg}"):
        read_qrels(q)


def test_byte_range_parts_and_dask_give_the_same_store(client, tmp_path):
    info = write_rcv1_corpus(tmp_path / "c", 3000, n_terms=2000, mean_distinct=30)
    one = convert_rcv1(info["tokens"], tmp_path / "one.zarr", qrels=info["qrels"], part_bytes=1 << 40)
    parts = convert_rcv1(info["tokens"], tmp_path / "parts.zarr", qrels=info["qrels"], part_bytes=20_000)
    dask = convert_rcv1(info["tokens"], tmp_path / "dask.zarr", qrels=info["qrels"], part_bytes=50_000,
                        executor=OnDask(client))
    X1, y1 = one.to_scipy()
    for ds in (parts, dask):
        X, y = ds.to_scipy()
        assert (X != X1).nnz == 0 and np.array_equal(y, y1)
        assert np.array_equal(ds.side_array("docid"), one.side_array("docid"))
        assert ds.side_array("vocabulary/terms").tolist() == one.side_array("vocabulary/terms").tolist()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from([b"a", b"b", b"c", b"d"]), max_size=6), min_size=1, max_size=8),
       st.integers(0, 8))
def test_vocabulary_merge_is_partition_free(docs, cut):
    def parsed(ds, first):
        text = b"".join(b".I %d\n.W\n%s\n\n" % (first + i, b" ".join(d)) for i, d in enumerate(ds))
        return _parse_documents(text, "f", 1)

    whole = Vocabulary()
    whole.add(parsed(docs, 1))
    left, right = Vocabulary(), Vocabulary()
    if docs[:cut]:
        left.add(parsed(docs[:cut], 1))
    if docs[cut:]:
        right.add(parsed(docs[cut:], 100))
    merged = right.merge(left)
    assert merged.df == whole.df and merged.n_docs == whole.n_docs == len(docs)
    assert whole.df == {t: sum(t in d for d in docs) for t in {t for d in docs for t in d}}


def test_views_select_rows_and_labels(tmp_path):
    info = write_rcv1_corpus(tmp_path / "c", 4000, n_terms=3000, mean_distinct=30)
    ds = convert_rcv1(info["tokens"], tmp_path / "r.zarr", qrels=info["qrels"], block_rows=700)
    X, y = ds.to_scipy()
    v = open_dataset(f"{ds.path}#CCAT-vs-GCAT")
    rows = np.flatnonzero((y == 0) | (y == 2))
    Xv, yv = v.to_scipy()
    assert v.n_samples == len(rows) and (Xv != X[rows]).nnz == 0
    np.testing.assert_array_equal(yv, np.where(y[rows] == 0, 1, -1))
    assert v.nnz == X[rows].nnz and v.classes.tolist() == [-1, 1]
    np.testing.assert_array_equal(v.side_array("docid"), ds.side_array("docid")[rows])
    assert (v.topics()[1] != ds.topics()[1][rows]).nnz == 0
    assert v.side_array("vocabulary/terms").tolist() == ds.side_array("vocabulary/terms").tolist()
    blocks = [b.X.shape[0] for b in v.iter_blocks()]
    assert sum(blocks) == v.n_samples and min(blocks) > 0
    # a topic against the rest, every row
    names, ind = ds.topics()
    t = open_dataset(ds.path, target="C15")
    np.testing.assert_array_equal(t.to_scipy()[1], np.where(ind[:, names.index("C15")].toarray().ravel() > 0, 1, -1))
    from distlearn.stream import store_token

    assert len({store_token(ds), store_token(v), store_token(t)}) == 3
    with pytest.raises(StoreError, match="'XYZ' is not a label"):
        open_dataset(f"{ds.path}#CCAT-vs-XYZ")


def test_view_fits_the_same_in_process_and_on_dask(client, tmp_path):
    from distlearn import OBPM

    info = write_rcv1_corpus(tmp_path / "c", 3000, n_terms=2000, mean_distinct=30)
    ds = convert_rcv1(info["tokens"], tmp_path / "r.zarr", qrels=info["qrels"], block_rows=500)
    path = f"{ds.path}#MCAT-vs-ECAT"
    here = OBPM(n_estimators=6, random_state=3).fit(path)
    there = OBPM(n_estimators=6, random_state=3, scheduler=client).fit(path)
    assert np.array_equal(here.coef_, there.coef_) and here.classes_.tolist() == [-1, 1]


def test_views_of_any_store_by_class_value(tmp_path):
    X = np.arange(24, dtype=float).reshape(12, 2)
    with DatasetWriter(tmp_path / "d.zarr", layout="dense", n_features=2, block_rows=5) as w:
        w.append(X, np.arange(12) % 3)
    v = open_dataset(tmp_path / "d.zarr", target="0-vs-2")
    Xv, yv = v.to_numpy()
    np.testing.assert_array_equal(Xv, X[np.arange(12) % 3 != 1])
    assert yv.tolist() == [1, -1] * 4


def test_generator_shares_and_reproducibility(tmp_path):
    a = write_rcv1_corpus(tmp_path / "a", 20_000, n_terms=5000)
    b = write_rcv1_corpus(tmp_path / "b", 20_000, n_terms=5000)
    for fa, fb in zip(a["tokens"] + [a["qrels"]], b["tokens"] + [b["qrels"]]):
        with open(fa, "rb") as x, open(fb, "rb") as z:
            assert x.read() == z.read()
    s = a["label_share"]
    assert 0.17 <= s["MULTI"] <= 0.23 and 0.02 <= s["OTHER"] <= 0.04
    # single-label shares keep RCV1-v2's order CCAT > GCAT > MCAT > ECAT
    assert s["CCAT"] > s["GCAT"] > s["MCAT"] > s["ECAT"] > 0.05
    ds = convert_rcv1(a["tokens"], tmp_path / "a.zarr", qrels=a["qrels"], hierarchy=a["hierarchy"])
    counts = dict(zip(ds.meta["classes"], ds.meta["class_counts"]))
    assert counts[-1] / 20_000 == pytest.approx(s["MULTI"]) and counts[4] / 20_000 == pytest.approx(s["OTHER"])


@pytest.mark.parametrize("where", ["here", "dask"])
def test_generator_writes_the_bytes_of_the_per_document_writer(tmp_path, request, monkeypatch, where):
    # The corpus text and qrels are built per block of documents by one vectorised gather, in tasks of
    # blocks on an executor (written here, in order); these SHA-256 prefixes are those of the
    # per-document writer it replaced, in one process (9,000 documents: three generation blocks, the
    # last one short, every file; here one task per block).
    import hashlib

    from distlearn.data import _rcv1

    monkeypatch.setattr(_rcv1, "_CORPUS_TASK_BLOCKS", 1)
    executor = OnDask(request.getfixturevalue("client")) if where == "dask" else None
    info = write_rcv1_corpus(tmp_path / "c", 9000, n_terms=2000, mean_distinct=20, random_state=3, executor=executor)
    got = {os.path.basename(f): hashlib.sha256(open(f, "rb").read()).hexdigest()[:16]
           for f in info["tokens"] + [info["qrels"]]}
    assert got == {"lyrl2004_tokens_train.dat": "13a0e39e65f9dc67", "lyrl2004_tokens_test_pt0.dat": "1b9f3e009fe90270",
                   "lyrl2004_tokens_test_pt1.dat": "ab93ff1e499fbf7c", "lyrl2004_tokens_test_pt2.dat": "c95c232b157ac23d",
                   "lyrl2004_tokens_test_pt3.dat": "dfe2acc9f238f355", "rcv1-v2.topics.qrels": "408b889cb4684fc6"}


def test_cli_convert_generate_info(tmp_path, capsys):
    assert main(["generate", "rcv1-files", str(tmp_path / "c"), "--n-samples", "1500", "--n-features", "1000"]) == 0
    toks = sorted(str(p) for p in (tmp_path / "c").glob("lyrl2004_tokens_*.dat"))
    assert main(["convert", *toks, str(tmp_path / "r.zarr"), "--qrels", str(tmp_path / "c" / "rcv1-v2.topics.qrels"),
                 "--weighting", "tfidf", "--normalize", "--json"]) == 0
    capsys.readouterr()
    assert main(["info", f"{tmp_path / 'r.zarr'}#CCAT-vs-OTHER"]) == 0
    out = capsys.readouterr().out
    assert "view     CCAT-vs-OTHER: +1 = CCAT, -1 = OTHER" in out
    assert main(["train", str(tmp_path / "r.zarr"), "--target", "CCAT-vs-GCAT", "--test", str(tmp_path / "r.zarr"),
                 "--model", "perceptron", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    view = open_dataset(tmp_path / "r.zarr", target="CCAT-vs-GCAT")
    assert res["store"].endswith("r.zarr#CCAT-vs-GCAT") and res["n_samples"] == view.n_samples > 0
    assert 0 <= res["test_error"] < 0.5
    bad = _w(tmp_path / "bad.dat", b".I 1\n.W\na\n")
    assert main(["convert", bad, str(tmp_path / "b.zarr"), "--qrels", str(tmp_path / "c" / "rcv1-v2.topics.qrels")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.dat:1: document 1 has no topics" in err and "Traceback" not in err
    assert not (tmp_path / "b.zarr").exists()


@pytest.mark.parametrize("part_bytes", [1 << 30, 100])
def test_line_numbers_across_pieces_and_parts(files, tmp_path, monkeypatch, part_bytes):
    from distlearn.data import _rcv1

    monkeypatch.setattr(_rcv1, "_PIECE_BYTES", 64)  # many pieces per part
    docs = b"".join(b".I %d\n.W\nbank rate\noil\n\n" % d for d in (2286, 2287, 2290) * 1)
    bad = docs.replace(b".I 2290", b".I 7")
    f = _w(tmp_path / "t.dat", docs + b".I 9\n.W\nx\n")
    with pytest.raises(InputFormatError, match="document 9 has no topics") as e:
        convert_rcv1(f, tmp_path / "x.zarr", qrels=files["qrels"], part_bytes=part_bytes)
    assert e.value.line == 16
    g = _w(tmp_path / "g.dat", bad + b".I 2291\n.W\n.W\n")
    with pytest.raises(InputFormatError) as e:
        convert_rcv1(g, tmp_path / "y.zarr", qrels=files["qrels"], part_bytes=part_bytes)
    assert e.value.line == 18 and "field .W" in str(e.value)  # the vocabulary pass sees it first
    ok = convert_rcv1(_w(tmp_path / "ok.dat", docs), tmp_path / "ok.zarr", qrels=files["qrels"], part_bytes=part_bytes)
    assert ok.side_array("docid").tolist() == [2286, 2287, 2290] and ok.nnz == 9


# ---------------------------------------------------------------- the compiled token pass (issue 30)

_ODD = [b"bank", b"rate", "\u00e9t\u00e9".encode(), "\u65e5\u672c".encode(), b"x" * 5000, b"\xff\xfe", b".Wx", b"W.",
        b"..", b"I", b".", b"0", b"\x00", b"\x1c", b"\xc2\x85", b"\xc2\xa0", b"a\x7fb", b"I.W", b".W.I"]
_SEPS = [b" ", b"\t", b"\x0b", b"\x0c", b"\r\n", b"  \n", b" \t "]


def _odd_corpus(tmp_path, n_docs=400, seed=0):
    """Token files with odd tokens and layouts (UTF-8, a 5,000-byte token, tabs, CRLF, a BOM, empty
    documents, '+12' and '0012' docids, a last document without a final newline) and their qrels.
    (No token starts with '.I': at the start of a line the part and piece cuts take it for a header.)"""
    rng = np.random.default_rng(seed)
    words = _ODD + [b"w%d" % i for i in range(300)]
    heads = [b".I %d\n", b".I\t%d \r\n", b".I  %d  trailing words\n"]
    files, qrels = [], []
    for f in range(3):
        out = [b"\xef\xbb\xbf"] if f == 1 else []
        for i in range(n_docs):
            d = 10_000 * (f + 1) + i
            k = 0 if i % 17 == 0 else int(rng.integers(1, 40))
            toks = [words[j] for j in rng.choice(len(words), size=k, p=None)]
            text = b"".join(t + _SEPS[int(rng.integers(len(_SEPS)))] for t in toks)
            docid = b"+%d" % d if i == 5 else b"00%d" % d if i == 6 else b"%d" % d
            w = b" .W \r\n" if i % 11 == 3 else b".W\n"
            out.append(heads[i % 3].replace(b"%d", docid) + w + text + b"\n")
            qrels.append(b"%s %d 1\n" % (TOP[i % 4], d))
        body = b"".join(out) + b".I %d\n.W" % (10_000 * (f + 1) + n_docs)  # empty, no final newline
        qrels.append(b"GCAT %d 1\n" % (10_000 * (f + 1) + n_docs))
        if f == 2:
            body = body.replace(b"\n", b"\r\n")
        files.append(_w(tmp_path / f"lyrl2004_tokens_{f}.dat", body, gz=f == 0))
    return files, _w(tmp_path / "qrels", b"".join(qrels))


TOP = [b"CCAT", b"ECAT", b"GCAT", b"MCAT"]


def _both_paths(monkeypatch, fn):
    from distlearn.data import _rcv1

    out = []
    for compiled in (True, False):
        monkeypatch.setattr(_rcv1, "_COMPILED", compiled)
        out.append(fn(compiled))
    return out


@pytest.mark.parametrize("kw", [{}, {"weighting": "tfidf", "normalize": True}, {"weighting": "tf", "min_df": 3},
                                {"weighting": "binary", "part_bytes": 3000},
                                {"vocabulary": ["bank", "\u00e9t\u00e9", "w1", "not there", "a b", ""]},
                                {"hash_bits": 4, "normalize": True}, {"hash_bits": 31, "part_bytes": 5000}])
def test_compiled_token_pass_writes_the_pure_python_store(tmp_path, monkeypatch, kw):
    files, qrels = _odd_corpus(tmp_path)
    fast, slow = _both_paths(monkeypatch, lambda c: convert_rcv1(files, tmp_path / f"{c}.zarr", qrels=qrels, **kw))
    (Xf, yf), (Xs, ys) = fast.to_scipy(), slow.to_scipy()
    assert Xf.shape == Xs.shape and Xf.nnz == Xs.nnz > 0
    for a in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(Xf, a), getattr(Xs, a)), a
    assert np.array_equal(yf, ys) and np.array_equal(fast.side_array("docid"), slow.side_array("docid"))
    assert fast.side_array("docid").tolist().count(10_005) == 1  # the '+10005' header
    assert fast.meta["params"] == slow.meta["params"]
    if "hash_bits" not in kw:
        terms = fast.side_array("vocabulary/terms").tolist()
        assert terms == slow.side_array("vocabulary/terms").tolist()
        if "vocabulary" not in kw:
            assert "x" * 5000 in terms and "\\xff\\xfe" in terms and "\u65e5\u672c" in terms
            assert np.array_equal(fast.side_array("vocabulary/df"), slow.side_array("vocabulary/df"))


@pytest.mark.parametrize("bad, line", [
    (b".I 1\n.W\na b\n\n.I 2\n.W\nc .W d\n", 7), (b".I 1\n.W\na\n.I x\n.W\n", 4), (b"junk\n.I 1\n.W\n", 1),
    (b".I 1\n.W\na\n.I 2\nb\n", 5), (b".I 1\n.W\na\n.I 0\n.W\n", 4), (b".I 1\n.W\n.I\n", 3),
    (b".I 1\n.W\na\n.I 99999999999999999999\n.W\n", 4), (b".I 1\n.W\na\n.I 9223372036854775808\n.W\n", 4)])
def test_compiled_token_pass_raises_the_same_errors(tmp_path, monkeypatch, bad, line):
    from distlearn.data import _rcv1

    monkeypatch.setattr(_rcv1, "_PIECE_BYTES", 8)  # the bad document in a piece of its own
    f = _w(tmp_path / "t.dat", bad)
    q = _w(tmp_path / "q", b"CCAT 1 1\nCCAT 2 1\n")

    def err(c):
        with pytest.raises(InputFormatError) as e:
            convert_rcv1(f, tmp_path / f"{c}.zarr", qrels=q)
        assert not (tmp_path / f"{c}.zarr").exists()
        return type(e.value), str(e.value)

    fast, slow = _both_paths(monkeypatch, err)
    assert fast == slow and f"t.dat:{line}:" in fast[1] and "\n" not in fast[1]


_PIECES = [b".I", b".W", b" ", b"\n", b"\t", b"\r", b"\x0b", b"1", b"2", b"+", b"0", b"a", b"\xc3\xa9", b".I 7\n.W\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_compiled_documents_and_tokens_match_the_parser(parts):
    """Any bytes: the compiled scan gives the parser's documents, lines and token counts, or its error."""
    from collections import Counter

    from distlearn.data._rcv1 import _count_columns, _documents, _term_table

    piece = b"".join(parts)
    try:
        docs = _parse_documents(piece, "f", 3)
    except InputFormatError as e:
        with pytest.raises(InputFormatError) as got:
            buf, _, _, starts, stops = _documents(piece, "f", 3)
            terms = _term_table([b"a"])
            if _count_columns(buf, starts, stops, *terms, 0)[0]:
                _documents(piece, "f", 3, force=True)
        assert str(got.value) == str(e)
        return
    buf, docids, lines, starts, stops = _documents(piece, "f", 3)
    assert docids.tolist() == docs.docids and lines.tolist() == docs.lines
    terms = sorted(set(docs.tokens))
    status, indptr, cols, counts = _count_columns(buf, starts, stops, *_term_table(terms), 0)
    at = 0
    for d, k in enumerate(docs.lengths):
        want = sorted(Counter(terms.index(t) for t in docs.tokens[at:at + k]).items())
        at += k
        assert list(zip(cols[indptr[d]:indptr[d + 1]].tolist(), counts[indptr[d]:indptr[d + 1]].tolist())) == want
    assert status == 0


@pytest.mark.parametrize("data", [
    b"C15 2286 1\r\n\r\nCCAT\t2286 1\n  \nCCAT 2286 1\nE11 0012 1\n\xc3\xa9T 7 1\x0b\nE11 2286 1",
    b"C15 +2286 1\nCCAT 2286 1\n", b"C15 2286 1\nCCAT 2286 2\n", b"C15 2286\n", b"\n \n", b"C15 0 1\n",
    b"C15 9223372036854775808 1\n"])
def test_compiled_qrels_reads_what_the_python_reader_reads(tmp_path, monkeypatch, data):
    q = _w(tmp_path / "q.gz", data, gz=True)

    def read(c):
        try:
            t = read_qrels(q)
        except InputFormatError as e:
            return str(e)
        return t.docids.tolist(), t.names, t.indptr.tolist(), t.indices.tolist(), t.where[1].tolist()

    fast, slow = _both_paths(monkeypatch, read)
    assert fast == slow
    if data.startswith(b"C15 2286 1\r\n"):
        assert fast == ([7, 12, 2286], ("C15", "CCAT", "E11", "\u00e9T"), [0, 1, 2, 5], [3, 2, 0, 1, 2], [7, 6, 1])


# ---------------------------------------------------------------- workers write the store's chunks (issue 30)


def _spy_direct(monkeypatch):
    """Count the rows tasks that wrote the store's chunks themselves, and cut the stored values
    into chunks of 500 (so that parts write whole chunks and share others)."""
    import functools

    from distlearn.data import _rcv1, store

    calls = []
    real = _rcv1._direct_rows_task

    def spy(*a, **k):
        calls.append(a[3:5])
        return real(*a, **k)

    monkeypatch.setattr(_rcv1, "_direct_rows_task", spy)
    monkeypatch.setattr(store, "DatasetWriter", functools.partial(store.DatasetWriter, nnz_chunk=500))
    return calls


@pytest.mark.parametrize("kw", [{}, {"weighting": "tfidf", "normalize": True, "min_df": 3, "block_rows": 100},
                                {"part_bytes": 1 << 30}])
def test_workers_write_the_serial_store_byte_for_byte(tmp_path, monkeypatch, kw):
    """The rows tasks of an executor on this machine write the whole chunks of X/data and X/indices
    (the driver only the shared ones, y, indptr, the metadata): the same files as the serial store."""
    from distlearn.distributed.executor import InProcess
    from tests.data.test_store import _store_files

    files, qrels = _odd_corpus(tmp_path)
    files.append(write_rcv1_corpus(tmp_path / "c", 1500, n_terms=800, mean_distinct=20)["tokens"][1])
    qrels = _w(tmp_path / "q2", open(qrels, "rb").read() + open(tmp_path / "c" / "rcv1-v2.topics.qrels", "rb").read())
    kw = {"part_bytes": 4000} | kw
    calls = _spy_direct(monkeypatch)
    serial = convert_rcv1(files, tmp_path / "serial.zarr", qrels=qrels, **kw)
    assert calls == []  # no executor: this process writes
    ex = InProcess(2)
    try:
        par = convert_rcv1(files, tmp_path / "par.zarr", qrels=qrels, executor=ex, **kw)
    finally:
        ex.close()
    assert len(calls) >= (4 if kw["part_bytes"] < 1 << 20 else 3)  # every part (the .gz file is one)
    assert sum(n for _, n in calls) == serial.nnz > 2000
    assert _store_files(tmp_path / "serial.zarr") == _store_files(tmp_path / "par.zarr")
    open_dataset(tmp_path / "par.zarr", validate="full")


def test_workers_on_dask_write_the_serial_store(client, tmp_path, monkeypatch):
    from tests.data.test_store import _store_files

    _spy_direct(monkeypatch)  # 500-value chunks (the tasks on Dask are not counted)
    info = write_rcv1_corpus(tmp_path / "c", 3000, n_terms=2000, mean_distinct=30)
    ex = OnDask(client)
    assert ex.local_files and ex.n_workers == 2  # two workers on 127.0.0.1: they write
    one = convert_rcv1(info["tokens"], tmp_path / "one.zarr", qrels=info["qrels"], part_bytes=50_000)
    dask = convert_rcv1(info["tokens"], tmp_path / "dask.zarr", qrels=info["qrels"], part_bytes=50_000, executor=ex)
    assert dask.nnz > 20 * 500 and _store_files(tmp_path / "one.zarr") == _store_files(tmp_path / "dask.zarr")


@pytest.mark.parametrize("late", [b"twice", b".I 4\n.W\nz\n", b".I 999999\n.W\n.W\n"])
def test_workers_write_and_a_late_error_leaves_nothing(files, tmp_path, monkeypatch, late):
    """A document error found after parts have written chunks: the same one-line error as the serial
    path, and nothing left of the store (its temporary directory removed)."""
    from distlearn.distributed.executor import InProcess

    calls = _spy_direct(monkeypatch)
    info = write_rcv1_corpus(tmp_path / "c", 1500, n_terms=800, mean_distinct=20)
    body = open(info["tokens"][1], "rb").read()
    if late == b"twice":
        late = b".I %s\n.W\nz\n" % body.split()[1]  # the file's first document again
    f = _w(tmp_path / "t.dat", body + late)
    q = _w(tmp_path / "q", open(info["qrels"], "rb").read() + b"CCAT 999999 1\n")
    msgs = []
    for ex in (None, InProcess(2)):
        with pytest.raises(InputFormatError) as e:
            convert_rcv1(f, tmp_path / "x.zarr", qrels=q, part_bytes=3000, executor=ex)
        msgs.append(str(e.value))
        assert not [p for p in os.listdir(tmp_path) if "x.zarr" in p]
    assert msgs[0] == msgs[1] and "t.dat:" in msgs[0] and "\n" not in msgs[0]
    assert len(calls) > 3 or b".W\n.W" in late  # parts wrote chunks before the error (not the vocabulary pass's)


def test_only_workers_on_this_machine_write():
    from distlearn.data._rcv1 import _workers_write
    from distlearn.distributed.executor import InProcess, _on_this_machine

    assert _on_this_machine({"tcp://127.0.0.1:4001": {}, "tcp://localhost:4002": {}})
    assert not _on_this_machine({"tcp://127.0.0.1:4001": {}, "tcp://10.0.0.7:4002": {}})
    assert not _on_this_machine({})
    ex = InProcess(2)
    assert _workers_write(ex, "/tmp/x.zarr") and not _workers_write(ex, "s3://bucket/x.zarr")
    assert not _workers_write(None, "/tmp/x.zarr") and not _workers_write(InProcess(1), "/tmp/x.zarr")
    ex.close()
