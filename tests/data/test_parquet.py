"""Parquet input: the store's rows equal pyarrow's reading of the same file or parts, in process
and as executor tasks; the label column rule; the one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distlearn.data import open_dataset
from distlearn.data._errors import InputFormatError
from distlearn.data._parquet import ParquetReader
from distlearn.data.readers import convert, detect_format, read_arrays

ROOT = Path(__file__).resolve().parents[2]


def table(n: int = 500, seed: int = 0, label: str = "Target") -> pa.Table:
    """Mixed numeric columns (float64, float32, int32, bool) and an integer label named ``label``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    return pa.table({
        "f1": x[:, 0],
        "f2": x[:, 1].astype(np.float32),
        label: rng.integers(0, 3, n).astype(np.int64),
        "count": rng.integers(-20, 20, n).astype(np.int32),
        "flag": rng.random(n) < 0.3,
    })


def expected(t: pa.Table, label: str = "Target") -> tuple[np.ndarray, np.ndarray]:
    """The table as the store must hold it: every other column, in order, as float64; the label."""
    feats = [c for c in t.column_names if c != label]
    X = np.column_stack([np.asarray(t.column(c).to_numpy(), dtype=np.float64) for c in feats])
    return X, np.asarray(t.column(label).to_numpy(), dtype=np.float64)


def parts_dir(tmp_path: Path, t: pa.Table, n_parts: int) -> Path:
    d = tmp_path / "parts"
    d.mkdir()
    step = -(-t.num_rows // n_parts)
    for i in range(n_parts):  # Dask's names: part.0 ... part.11 (natural order, not part.10 after part.1)
        pq.write_table(t.slice(i * step, step), d / f"part.{i}.parquet", row_group_size=40)
    (d / "_SUCCESS").write_bytes(b"")  # a writer's marker: not a part
    return d


def test_one_file_equals_pyarrow(tmp_path):
    t = table()
    f = tmp_path / "t.parquet"
    pq.write_table(t, f, row_group_size=64)  # 8 row groups: 8 pieces
    r = ParquetReader(f)
    assert (r.n_samples, r.n_features, r.columns[r.label_index], len(r.pieces)) == (500, 4, "Target", 8)
    ds = convert(f, tmp_path / "t.zarr", dtype="float64")
    X, y = ds.to_numpy()
    Xe, ye = expected(pq.read_table(f))
    np.testing.assert_array_equal(X, Xe)
    np.testing.assert_array_equal(y, ye)
    params = ds.meta["params"]
    assert ds.layout == "dense" and params["format"] == "parquet" and params["label_name"] == "Target"
    X32, _ = convert(f, tmp_path / "t32.zarr").to_numpy()  # float32 by default
    np.testing.assert_array_equal(X32, Xe.astype(np.float32))


def test_directory_of_parts_in_natural_order(tmp_path):
    t = table(n=600)
    d = parts_dir(tmp_path, t, 12)
    assert detect_format(d) == "parquet"
    X, y = convert(d, tmp_path / "d.zarr", dtype="float64").to_numpy()
    # the parts in natural order are the table; pyarrow's own directory read sorts by name (part.10 after part.1)
    order = [d / f"part.{i}.parquet" for i in range(12)]
    Xe, ye = expected(pa.concat_tables([pq.read_table(p) for p in order]))
    np.testing.assert_array_equal(X, Xe)
    np.testing.assert_array_equal(y, ye)
    np.testing.assert_array_equal(y, t.column("Target").to_numpy())
    few = tmp_path / "few"
    few.mkdir()
    for i in range(3):
        pq.write_table(t.slice(200 * i, 200), few / f"part.{i}.parquet")
    X3, y3 = convert(few, tmp_path / "f.zarr", dtype="float64").to_numpy()
    Xe, ye = expected(pq.read_table(few))  # fewer than ten parts: pyarrow's order is the same
    np.testing.assert_array_equal(X3, Xe)
    np.testing.assert_array_equal(y3, ye)


@pytest.mark.cluster
def test_parts_as_tasks_with_jobs_2(tmp_path):
    t = table(n=400)
    d = parts_dir(tmp_path, t, 5)
    r = subprocess.run([sys.executable, "-m", "distlearn", "convert", str(d), str(tmp_path / "j.zarr"), "--jobs", "2",
                        "--dtype", "float64", "--json", "--no-progress"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["n_samples"] == 400 and info["input_bytes"] == sum(p.stat().st_size for p in d.glob("part.*"))
    X, y = open_dataset(tmp_path / "j.zarr").to_numpy()
    Xe, ye = expected(t)
    np.testing.assert_array_equal(X, Xe)
    np.testing.assert_array_equal(y, ye)


@pytest.mark.cluster
def test_row_groups_as_tasks_on_a_cluster(tmp_path, client):
    from distlearn.distributed import executor_for

    t = table(n=700, seed=3)
    f = tmp_path / "big.parquet"
    pq.write_table(t, f, row_group_size=100)
    d = parts_dir(tmp_path, t, 4)
    with executor_for(client) as ex:
        for src in (f, d):
            ds = convert(src, tmp_path / f"{src.name}.zarr", dtype="float64", executor=ex, block_rows=128)
            X, y = ds.to_numpy()
            Xe, ye = expected(t)
            np.testing.assert_array_equal(X, Xe)
            np.testing.assert_array_equal(y, ye)
            assert ds.n_blocks == 6


def test_format_by_magic_bytes_not_name(tmp_path):
    t = table(n=50)
    f = tmp_path / "export.bin"
    pq.write_table(t, f)
    assert detect_format(f) == "parquet"
    X, y = convert(f, tmp_path / "m.zarr", dtype="float64").to_numpy()
    np.testing.assert_array_equal(X, expected(t)[0])


def test_label_column_rule_and_override(tmp_path):
    t = table(n=200, label="CLASS")
    f = tmp_path / "c.parquet"
    pq.write_table(t, f)
    assert ParquetReader(f).columns[ParquetReader(f).label_index] == "CLASS"  # any case
    r = ParquetReader(f, label_column="count")
    assert r.label_index == 3 and r.n_features == 4
    assert ParquetReader(f, label_column=-1).label_index == 4
    X, y = read_arrays(f, label_column="count", dtype="float64")
    np.testing.assert_array_equal(y, t.column("count").to_numpy())
    np.testing.assert_array_equal(X, expected(t, "count")[0])
    both = pa.table({"x": [1.0, 2.0], "label": [0, 1], "y": [1, 0]})
    pq.write_table(both, tmp_path / "two.parquet")
    assert ParquetReader(tmp_path / "two.parquet").label_index == 1  # 'label' before 'y' (a coordinate)
    with pytest.raises(InputFormatError, match=r"label column 'nope' is not in the header"):
        ParquetReader(f, label_column="nope")


def test_no_label_name_takes_column_0_and_refuses_a_continuous_one(tmp_path):
    t = table(n=300).drop(["Target"])
    f = tmp_path / "nolabel.parquet"
    pq.write_table(t, f)
    with pytest.raises(InputFormatError) as ei:
        convert(f, tmp_path / "x.zarr")
    msg = str(ei.value)
    assert msg.startswith(f"{f}: label column 0 ('f1') holds non-integer values (e.g. ")
    assert msg.endswith("in row 1), not class labels; pick the label with --label-column NAME|INDEX (label_column=)")
    assert not (tmp_path / "x.zarr").exists()
    # an integer identifier column is not continuous, but has a value per row
    ids = pa.table({"id": np.arange(300), "v": np.ones(300)})
    pq.write_table(ids, tmp_path / "ids.parquet", row_group_size=50)
    with pytest.raises(InputFormatError, match=r"ids.parquet: label column 0 \('id'\) has 300 distinct values in "
                                               r"300 rows, not class labels; pick the label with --label-column"):
        convert(tmp_path / "ids.parquet", tmp_path / "i.zarr")
    assert not (tmp_path / "i.zarr").exists()


def test_non_numeric_and_missing_values_are_refused_naming_the_column(tmp_path):
    f = tmp_path / "s.parquet"
    pq.write_table(pa.table({"label": [0, 1], "name": ["a", "b"], "v": [1.0, 2.0]}), f)
    with pytest.raises(InputFormatError, match=r"s.parquet: column 'name' is string, not numeric; features must be "
                                               r"numeric"):
        ParquetReader(f)
    pq.write_table(pa.table({"label": [0, 1], "name": ["a", "b"], "v": [1.0, 2.0]}), f)
    with pytest.raises(InputFormatError, match=r"drop or encode it first; pick the label with --label-column "
                                               r"NAME\|INDEX \(label_column=\) if 'name' holds the class names$"):
        ParquetReader(f)
    pq.write_table(pa.table({"label": [[1], [2]], "v": [1.0, 2.0]}), f)
    with pytest.raises(InputFormatError, match=r"the label column 'label' is list<\w+: int64>: labels are numbers "
                                               r"or class names \(strings\)$"):
        ParquetReader(f)
    pq.write_table(pa.table({"label": [0, 1, 1], "v": [1.0, None, 2.0]}), f, row_group_size=1)
    with pytest.raises(InputFormatError, match=r"s.parquet: column 'v' has a missing value in row 2$"):
        list(ParquetReader(f))
    pq.write_table(pa.table({"label": [0, 1, 1], "v": [1.0, 2.0, np.inf]}), f)
    with pytest.raises(InputFormatError, match=r"column 'v' holds inf in row 3: values must be finite"):
        list(ParquetReader(f))


def test_parts_must_share_a_schema(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    pq.write_table(pa.table({"label": [0, 1], "v": [1.0, 2.0]}), d / "part.0.parquet")
    pq.write_table(pa.table({"label": [0, 1], "w": [1.0, 2.0]}), d / "part.1.parquet")
    with pytest.raises(InputFormatError, match=r"part.1.parquet: its columns differ from part.0.parquet's"):
        ParquetReader(d)
    (d / "part.1.parquet").write_text("1 1:2\n")
    with pytest.raises(InputFormatError, match=r"not a Parquet file \(no PAR1 magic\)"):
        ParquetReader(d)


def test_a_directory_is_data_only_when_it_holds_parquet_parts(tmp_path):
    from distlearn.data.readers import is_data_file

    t = table(n=50)
    d = parts_dir(tmp_path, t, 2)
    ds = convert(d, tmp_path / "s.zarr")
    assert is_data_file(d) and is_data_file(d / "part.0.parquet") and not is_data_file(ds.path)
    (Path(ds.path) / "zarr.json").unlink()  # a damaged store stays a store: its own errors name it
    assert not is_data_file(ds.path) and not is_data_file(f"{ds.path}#0-vs-1")
    X, y = read_arrays(d, dtype="float64")
    np.testing.assert_array_equal(X, expected(t)[0])
    np.testing.assert_array_equal(y, expected(t)[1])
