"""What class names as labels cost: the same rows with names and with integer codes, run alternately.

Rows (each a ratio names / codes of medians over ``--repeat`` alternating runs, A B A B ...):

* ``read_arrays``: a CSV read whole (``train iris.csv``'s path), names vs numbers in the label column;
* ``convert``: the same CSV to a store (names: coded, recoded sorted at close);
* ``fit``: ``Perceptron`` epochs on the two stores (names decoded by ``Dataset.read_rows``, encoded
  back by the stream's ``encode_labels``), the models checked equal.

    /work/main/.venv/bin/python benchmarks/bench_class_names.py --n-samples 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _write(path: Path, X: np.ndarray, labels: list[str]) -> None:
    with open(path, "w") as f:
        f.write(",".join(f"x{j}" for j in range(X.shape[1])) + ",label\n")
        for row, lab in zip(X, labels):
            f.write(",".join(f"{v:.6g}" for v in row) + f",{lab}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-samples", type=int, default=200_000)
    ap.add_argument("--n-features", type=int, default=16)
    ap.add_argument("--n-classes", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()

    from distlearn import Perceptron
    from distlearn.data.readers import convert, read_arrays

    rng = np.random.default_rng(0)
    n, d, k = a.n_samples, a.n_features, a.n_classes
    centers = rng.normal(size=(k, d)) * 2
    codes = rng.integers(0, k, n)
    X = centers[codes] + rng.normal(size=(n, d))
    names = np.array([f"class-{c:02d}" for c in range(k)])
    tmp = Path(tempfile.mkdtemp(prefix="bench-names-"))
    files = {"names": tmp / "names.csv", "codes": tmp / "codes.csv"}
    _write(files["names"], X, names[codes].tolist())
    _write(files["codes"], X, [str(c) for c in codes])

    times: dict[str, dict[str, list[float]]] = {r: {"names": [], "codes": []} for r in ("read_arrays", "convert", "fit")}
    stores = {}
    for rep in range(a.repeat):
        for kind in ("names", "codes") if rep % 2 == 0 else ("codes", "names"):
            t = time.perf_counter()
            read_arrays(files[kind], label_column="label")
            times["read_arrays"][kind].append(time.perf_counter() - t)
            out = tmp / f"{kind}-{rep}.zarr"
            t = time.perf_counter()
            stores[kind] = convert(files[kind], out, label_column="label")
            times["convert"][kind].append(time.perf_counter() - t)
    Perceptron(epochs=1).fit(str(stores["codes"].path))  # compile outside the clock
    models = {}
    for rep in range(a.repeat):
        for kind in ("names", "codes") if rep % 2 == 0 else ("codes", "names"):
            t = time.perf_counter()
            models[kind] = Perceptron(epochs=a.epochs, random_state=0).fit(str(stores[kind].path))
            times["fit"][kind].append(time.perf_counter() - t)
    assert np.array_equal(models["names"].coef_, models["codes"].coef_), "models differ"
    assert models["names"].classes_.tolist() == names.tolist()

    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    print(f"{n:,} rows x {d} features, {k} classes; {a.repeat} alternating runs; load {' '.join(load)}")
    rows = {}
    for r, t in times.items():
        mn, mc = statistics.median(t["names"]), statistics.median(t["codes"])
        rows[r] = {"names_s": mn, "codes_s": mc, "ratio": mn / mc}
        print(f"{r:12s} names {mn:7.3f} s  codes {mc:7.3f} s  ratio {mn / mc:5.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "load": load, "args": vars(a)}, indent=2))


if __name__ == "__main__":
    main()
