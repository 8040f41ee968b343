"""Feature hashing (convert --hash-bits): MurmurHash3 as scikit-learn computes it, svmlight indices and
RCV1-v2 tokens into 2^B columns, collisions added, in process and on Dask alike."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.utils import murmurhash3_32

from distlearn.cli import main
from distlearn.data import open_dataset
from distlearn.data._hashing import hash_columns, hash_index, hash_token
from distlearn.data.readers import convert
from distlearn.distributed.executor import OnDask

from .test_rcv1 import QRELS, TOKENS_A, TOKENS_B, _w


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20), st.integers(1, 31))
def test_index_hash_is_murmurhash3_of_the_8_bytes(keys, bits):
    got = hash_index(np.array(keys, dtype=np.int64), bits)
    want = [abs(int(murmurhash3_32(k.to_bytes(8, "little", signed=True), seed=0))) % (1 << bits) for k in keys]
    assert got.tolist() == want
    assert all(0 <= c < 1 << bits for c in got.tolist())


def test_collisions_add_up_and_rows_stay_sorted():
    X = sp.csr_matrix(np.array([[1.0, 2.0, 3.0, 0.0, 5.0], [0.0, 0.0, 0.0, 4.0, 0.0]]))
    before = X.toarray()
    H = hash_columns(X, 1)  # five indices into two columns: collisions certain
    np.testing.assert_array_equal(X.toarray(), before)  # the input is left as it was
    assert H.shape == (2, 2) and H.has_sorted_indices
    cols = hash_index(np.arange(5), 1)
    want = np.zeros((2, 2))
    for r, c in zip(*X.nonzero()):
        want[r, cols[c]] += X[r, c]
    np.testing.assert_array_equal(H.toarray(), want)


def test_svmlight_hashed_store_in_process_and_on_dask(tmp_path, client):
    rows = ["1 3:0.5 1000000000000:2", "-1 7:1 3:0.25", "1 9999999999:4 2:1"]
    f = tmp_path / "big.svm"
    f.write_text("\n".join(rows) + "\n")
    a = convert(f, tmp_path / "a.zarr", hash_bits=10, dtype="float64")
    b = convert(f, tmp_path / "b.zarr", hash_bits=10, dtype="float64", executor=OnDask(client), part_bytes=24)
    assert a.n_features == 1024 and a.meta["params"]["hash_bits"] == 10 and "murmurhash3" in a.meta["params"]["hash"]
    Xa, Xb = a.read_block(0).X, b.read_block(0).X
    assert (Xa != Xb).nnz == 0
    want = np.zeros((3, 1024))
    for r, line in enumerate(rows):
        for tok in line.split()[1:]:
            i, v = tok.split(":")
            want[r, hash_index(np.array([int(i)]), 10)[0]] += float(v)
    np.testing.assert_array_equal(Xa.toarray(), want)


def test_rcv1_tokens_hash_as_sklearn_hashingvectorizer(tmp_path):
    files = [_w(tmp_path / "lyrl2004_tokens_train.dat", TOKENS_A), _w(tmp_path / "lyrl2004_tokens_test.dat", TOKENS_B)]
    qrels = _w(tmp_path / "q.qrels", QRELS)
    assert main(["convert", *files, str(tmp_path / "h.zarr"), "--qrels", qrels, "--hash-bits", "18",
                 "--weighting", "tf", "--dtype", "float64"]) == 0
    ds = open_dataset(tmp_path / "h.zarr")
    assert ds.n_features == 2**18 and ds.meta["params"]["hash_bits"] == 18 and ds.side_array("vocabulary/terms") is None
    docs = ["bank rate cut bank rate", "oil price oil oil", "vote bank"]
    hv = HashingVectorizer(n_features=2**18, alternate_sign=False, norm=None, tokenizer=str.split, lowercase=False,
                           token_pattern=None)
    np.testing.assert_array_equal(ds.read_block(0).X.toarray(), hv.transform(docs).toarray())
    assert hash_token(b"bank", 18) == hv.transform(["bank"]).indices[0]


def test_hash_bits_errors_are_one_line(tmp_path, capsys):
    f = tmp_path / "x.svm"
    f.write_text("1 1:1\n")
    for args, msg in ((["--hash-bits", "40"], "must be an integer in 1..31"),
                      (["--hash-bits", "8", "--dense"], "--n-features and --dense do not apply"),
                      (["--hash-bits", "8", "--n-features", "4"], "--n-features and --dense do not apply")):
        assert main(["convert", str(f), str(tmp_path / "o.zarr"), *args]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err
    c = tmp_path / "x.csv"
    c.write_text("a,b\n1,2\n")
    assert main(["convert", str(c), str(tmp_path / "c.zarr"), "--hash-bits", "8", "--label-column", "a"]) == 2
    assert "not csv columns" in capsys.readouterr().err
    assert not (tmp_path / "o.zarr").exists() and not (tmp_path / "c.zarr").exists()
    with pytest.raises(ValueError, match="replaces the vocabulary"):
        convert([_w(tmp_path / "t.dat", TOKENS_A)], tmp_path / "t.zarr", qrels=_w(tmp_path / "q", QRELS),
                hash_bits=8, weighting="tfidf")
