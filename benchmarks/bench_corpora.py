#!/usr/bin/env python3
"""Benchmark: the large corpora at full size (issue 16's scale proof).

    .venv/bin/python benchmarks/bench_corpora.py --data-dir /tmp/corpora                    # everything
    .venv/bin/python benchmarks/bench_corpora.py --parts convert --sizes 200000 804414
    .venv/bin/python benchmarks/bench_corpora.py --parts cutoff --splits 1                   # one split per problem
    .venv/bin/python benchmarks/bench_corpora.py --parts celegans --epochs 20
    .venv/bin/python benchmarks/bench_corpora.py --parts tokens --token-docs 100000 --repeats 3
    .venv/bin/python benchmarks/bench_corpora.py --parts tokens --methods serial,jobs1,jobs2 --before /tmp/before
    .venv/bin/python benchmarks/bench_corpora.py --parts grid --grid-train 10000 --before /tmp/before --repeats 1

Parts (each measurement is a fresh child process, so its peak RSS is its own; on a LocalCluster
the workers report their own ``ru_maxrss`` through ``client.run`` at the end):

``convert``   RCV1-v2-sized token corpora (``write_rcv1_corpus``, uncompressed LYRL2004 files) of
              each ``--sizes`` into a store, in one process and on a LocalCluster of 2 workers:
              wall time, MiB/s of token text, peak RSS of the driver and of each worker.
``cutoff``    the rcv1-cutoff experiment over those stores, in one process and on 2 workers
              (the same tasks, so the same numbers): wall time, cells, peak RSS per process.
``tokens``    issue 30: ``--token-docs`` generated LYRL2004 documents (``write_rcv1_corpus``) into a
              store, serial and with ``--jobs 2`` (a LocalCluster of 2 workers, started before the
              clock), against the peer scikit-learn ``CountVectorizer(analyzer=str.split)``
              counting the same document texts already in memory (read and decoded before the
              clock).  ``--repeats`` rounds, each a fresh child per method, the order rotated per
              round; medians of wall and CPU time (the child's own, ``time.process_time``: the
              driver's for ``--jobs 2``, and the busier worker's), peak RSS of the driver and of each
              worker.  On a shared machine the CPU times are the steadier numbers: the serial CPU
              over the larger of the driver's and the busier worker's CPU is the speed-up 2 free
              cores would give (printed as "CPU critical path").
              A fourth method, the pure-Python passes (``_rcv1._COMPILED = False``), is the before.
              ``jobs1-workers`` / ``jobs2-driver``: --jobs 1 with the worker writing the store's chunks,
              --jobs 2 with the driver writing them (``_rcv1._WORKERS_WRITE_FROM``; by default the
              workers write from 2 workers); ``jobs1-before`` / ``jobs2-before``: the ``--before`` tree.
``grid``      issue 30: celegans-obpm's whole grid on ``--grid-train`` WD-3 splice sequences on 2 workers,
              this code against ``--before`` (a source tree) alternating, ``--repeats`` rounds.
``celegans``  a C. elegans-sized splice corpus (100,000 x 141, WD degree 3) and OBPM N=100,
              tau=0.05 for ``--epochs`` epochs, learner-parallel on a 2-worker LocalCluster:
              wall time, peak RSS per worker, and the in-process wall time for comparison.

Never asserts; prints a table and writes ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

TAG = "@@RESULT@@ "
CHILD = r'''
import json, resource, sys, time
spec = json.loads(sys.argv[1])
import distlearn  # imports before the clock
import contextlib

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def read_docs(paths):
    """The documents' texts (after '.W'), decoded: what CountVectorizer counts in memory."""
    docs = []
    for p in paths:
        with open(p, "rb") as f:
            text = f.read().decode("utf-8")
        docs += [b.split("\n", 2)[2] for b in text.split("\n\n") if b.strip()]
    return docs

docs = read_docs(spec["tokens"]) if spec["kind"] == "tokens-peer" else None
from sklearn.feature_extraction.text import CountVectorizer

def main(client):
    kind = spec["kind"]
    t = time.perf_counter()
    out = {}
    wc0 = client.run(time.process_time) if client is not None else {}
    c0 = time.process_time()
    if kind == "tokens-peer":
        X = CountVectorizer(analyzer=str.split).fit_transform(docs)
        out["n_samples"], out["n_features"], out["nnz"] = X.shape[0], X.shape[1], X.nnz
    elif kind in ("convert", "convert-python"):
        from distlearn.data import _rcv1
        from distlearn.data._rcv1 import convert_rcv1
        _rcv1._COMPILED = kind == "convert"  # False: the pure-Python passes (the code before issue 30)
        if spec.get("workers_write_from") is not None:  # which path --jobs N takes (issue 30, Round 4)
            _rcv1._WORKERS_WRITE_FROM = spec["workers_write_from"]
        ds = convert_rcv1(spec["tokens"], spec["store"], qrels=spec["qrels"], overwrite=True, executor=ex)
        out["n_samples"], out["n_features"], out["nnz"] = ds.n_samples, ds.n_features, ds.nnz
    elif kind == "cutoff":
        from distlearn.experiments import rcv1_cutoff
        res = rcv1_cutoff.run(spec["store"], spec["out"], splits=spec["splits"], overwrite=True, figures=False,
                              scheduler=client)
        out["cells"] = res["cells_run"]
        out["cell_seconds"] = sorted(c["seconds"] for p in res["problems"].values() for c in p["per_split"])
        out["largest_problem"] = max(max(p["n_train"]) for p in res["problems"].values())
    elif kind == "grid":
        from distlearn.experiments import celegans_obpm
        res = celegans_obpm.run(spec["train"], spec["test"], spec["out"], epochs=tuple(spec["epochs"]),
                                permutations=spec["permutations"], overwrite=True, figures=False,
                                scheduler=client)
        import glob
        cells = [json.load(open(f)) for f in glob.glob(spec["out"] + "/cells/*.json")]
        out["cells"] = len(cells)
        out["task_fit_seconds"] = sum(c["fit_seconds"] for c in cells)
        out["svm"] = {k: res["svm"][k] for k in ("C", "test_error")}
        out["test_errors"] = {r: v["test_error"]["per_permutation"] for r, v in res["runs"].items()}
    elif kind == "celegans":
        from distlearn import OBPM
        est = OBPM(n_estimators=100, tau=0.05, epochs=spec["epochs"], random_state=0, scheduler=client).fit(spec["train"])
        out["train_error_pct"] = None
        from distlearn.data import open_dataset
        X, y = open_dataset(spec["test"]).to_scipy()
        out["test_error_pct"] = 100 * float((est.predict(X) != y).mean())
    out["seconds"] = time.perf_counter() - t
    out["cpu_seconds"] = time.process_time() - c0
    if client is not None:  # each worker's CPU over the job (the driver's is cpu_seconds)
        out["worker_cpu_seconds"] = [v - wc0[k] for k, v in client.run(time.process_time).items()]
    out["driver_rss_mib"] = rss_mib()
    if client is not None:
        out["worker_rss_mib"] = sorted(v / 1024 for v in client.run(
            lambda: __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss).values())
    print("@@RESULT@@ " + json.dumps(out), flush=True)

if spec["workers"]:
    from distlearn.distributed import executor_for
    with executor_for(f"local:{spec['workers']}") as ex:
        client = ex.client
        main(client)
else:
    ex = None
    main(None)
'''


def child(spec: dict, code: str | None = None) -> dict:
    """Run one measurement in a fresh process; ``code``: a source tree put first on its path (the before)."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, env=env)
    for line in r.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG):])
    raise RuntimeError(f"child failed ({spec['kind']}):\n{r.stderr[-3000:]}")


TOKEN_METHODS = {"peer": ("CountVectorizer(str.split), in memory", "tokens-peer", 0, False),
                 "serial": ("convert, serial", "convert", 0, False), "jobs1": ("convert --jobs 1", "convert", 1, False),
                 "jobs2": ("convert --jobs 2", "convert", 2, False),
                 "python": ("convert, serial, before (pure Python)", "convert-python", 0, False),
                 "serial-before": ("convert, serial, --before tree", "convert", 0, True),
                 "jobs1-before": ("convert --jobs 1, --before tree", "convert", 1, True),
                 "jobs1-workers": ("convert --jobs 1, the worker writes", "convert", 1, False),
                 "jobs2-driver": ("convert --jobs 2, the driver writes", "convert", 2, False),
                 "jobs2-before": ("convert --jobs 2, --before tree", "convert", 2, True)}


def tokens_part(d: Path, n: int, repeats: int, names: list[str], before: str | None) -> list[dict]:
    """Issue 30: convert (serial, --jobs 1, --jobs 2) against CountVectorizer(analyzer=str.split), alternating."""
    import statistics

    from distlearn.data._rcv1 import write_rcv1_corpus

    corpus = d / f"rcv1-{n}"
    marker = corpus / "complete.json"
    if not marker.exists():
        marker.write_text(json.dumps(write_rcv1_corpus(corpus, n)))
    info = json.loads(marker.read_text())
    text_mib = sum(os.path.getsize(f) for f in info["tokens"]) / 2**20
    keyed = [(k, TOKEN_METHODS[k]) for k in names if before or not TOKEN_METHODS[k][3]]
    methods = [m for _, m in keyed]
    runs: dict[str, list[dict]] = {m[0]: [] for m in methods}
    for r in range(repeats):
        for key, (name, kind, w, old) in keyed[r % len(keyed):] + keyed[:r % len(keyed)]:
            res = child({"kind": kind, "tokens": info["tokens"], "qrels": info["qrels"], "workers": w,
                         "store": str(d / f"tokens-{n}-w{w}.zarr"),
                         "workers_write_from": {"jobs1-workers": 1, "jobs2-driver": 3}.get(key)},
                        before if old else None)
            runs[name].append(res)
            print(json.dumps({"method": name, **res}), flush=True)
    out = []
    for name, kind, w, _ in methods:
        rs = runs[name]
        row = {"part": "tokens", "method": name, "n_docs": n, "workers": w, "text_mib": text_mib, "runs": rs,
               "seconds": statistics.median(x["seconds"] for x in rs),
               "cpu_seconds": statistics.median(x["cpu_seconds"] for x in rs),
               "driver_rss_mib": max(x["driver_rss_mib"] for x in rs)}
        if w:
            row["worker_rss_mib"] = [max(x["worker_rss_mib"][k] for x in rs) for k in range(w)]
            row["worker_cpu_seconds"] = statistics.median(max(x["worker_cpu_seconds"]) for x in rs)
            row["worker_cpu_total"] = statistics.median(sum(x["worker_cpu_seconds"]) for x in rs)
        out.append(row)
    row = {r["method"]: r for r in out}
    serial = row.get(TOKEN_METHODS["serial"][0])
    say = [f"\n# tokens: {n:,} documents, {text_mib:.1f} MiB, medians of {repeats}"]
    for key, label in (("peer", "serial/peer"), ("jobs1", "--jobs 1/--jobs 2"), ("jobs2", "serial/--jobs 2"),
                       ("python", "pure Python/serial"), ("serial-before", "serial before/after"),
                       ("jobs1-before", "--jobs 1 before/after"), ("jobs2-before", "--jobs 2 before/after"),
                       ("before", "--jobs 1/--jobs 2, --before tree"), ("jobs1-workers", "--jobs 1 worker writes/driver writes"),
                       ("jobs2-driver", "--jobs 2 driver writes/workers write")):
        a, b = {"peer": (serial, row.get(TOKEN_METHODS["peer"][0])),
                "jobs1": (row.get(TOKEN_METHODS["jobs1"][0]), row.get(TOKEN_METHODS["jobs2"][0])),
                "jobs2": (serial, row.get(TOKEN_METHODS["jobs2"][0])),
                "python": (row.get(TOKEN_METHODS["python"][0]), serial),
                "serial-before": (row.get(TOKEN_METHODS["serial-before"][0]), serial),
                "jobs1-before": (row.get(TOKEN_METHODS["jobs1-before"][0]), row.get(TOKEN_METHODS["jobs1"][0])),
                "jobs2-before": (row.get(TOKEN_METHODS["jobs2-before"][0]), row.get(TOKEN_METHODS["jobs2"][0])),
                "before": (row.get(TOKEN_METHODS["jobs1-before"][0]), row.get(TOKEN_METHODS["jobs2-before"][0])),
                "jobs1-workers": (row.get(TOKEN_METHODS["jobs1-workers"][0]), row.get(TOKEN_METHODS["jobs1"][0])),
                "jobs2-driver": (row.get(TOKEN_METHODS["jobs2-driver"][0]), row.get(TOKEN_METHODS["jobs2"][0]))}[key]
        if a and b:
            say.append(f"{label} wall {a['seconds'] / b['seconds']:.2f}x")
    for r in out:  # all the CPU there is: driver + workers (on 2 free cores, wall >= this / 2)
        if r["workers"]:
            say.append(f"{r['method']}: driver {r['cpu_seconds']:.2f} s + workers "
                       f"{r['worker_cpu_total']:.2f} s CPU (busier {r['worker_cpu_seconds']:.2f} s)")
    if serial:
        say.append(f"serial CPU {serial['cpu_seconds']:.2f} s")
    print("; ".join(say))
    return out


def grid_part(d: Path, n: int, epochs: list[int], repeats: int, before: str | None) -> list[dict]:
    """celegans-obpm's whole grid (6 runs x ``epochs`` x 3 permutations + 5 SVM fits) on ``n`` WD-3 splice
    sequences on 2 workers, this code and ``--before`` alternating: wall time, the tasks' fit seconds and
    the share of the 2 workers' time they fill."""
    import statistics

    from distlearn.data._dna import convert_sequences, write_splice_corpus

    tr, te = d / f"grid-{n}-train.zarr", d / f"grid-{n}-test.zarr"
    if not (tr.exists() and te.exists()):
        write_splice_corpus(d / f"grid-{n}-train.tsv", n, random_state=0)
        write_splice_corpus(d / f"grid-{n}-test.tsv", max(1, n // 10), random_state=1)
        convert_sequences(d / f"grid-{n}-train.tsv", tr, features="wd", degree=3, overwrite=True)
        convert_sequences(d / f"grid-{n}-test.tsv", te, features="wd", degree=3, overwrite=True)
    codes = [("after", None)] + ([("before", before)] if before else [])
    runs: dict[str, list[dict]] = {k: [] for k, _ in codes}
    for r in range(repeats):
        for name, code in codes[r % len(codes):] + codes[:r % len(codes)]:
            res = child({"kind": "grid", "train": str(tr), "test": str(te), "epochs": epochs, "permutations": 3,
                         "out": str(d / f"grid-{n}-{name}"), "workers": 2}, code)
            runs[name].append(res)
            print(json.dumps({"grid": name, **{k: v for k, v in res.items() if k != "test_errors"}}), flush=True)
    out = []
    for name, _ in codes:
        rs = runs[name]
        out.append({"part": "grid", "method": name, "workers": 2, "n_train": n, "epochs": epochs, "runs": rs,
                    "seconds": statistics.median(x["seconds"] for x in rs),
                    "task_fit_seconds": statistics.median(x["task_fit_seconds"] for x in rs),
                    "driver_rss_mib": max(x["driver_rss_mib"] for x in rs),
                    "worker_rss_mib": [max(x["worker_rss_mib"][k] for x in rs) for k in range(2)]})
    if before:
        a, b = out
        same = all(x["test_errors"] == y["test_errors"] and x["svm"] == y["svm"] for x in runs["after"]
                   for y in runs["before"])
        print(f"\n# grid: {n:,} sequences, epochs {epochs}, medians of {repeats}: before/after wall "
              f"{b['seconds'] / a['seconds']:.2f}x ({b['seconds']:.1f} -> {a['seconds']:.1f} s); "
              f"test errors and SVM identical: {same}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default="bench-corpora")
    p.add_argument("--parts", nargs="+", default=["convert", "cutoff", "celegans"])
    p.add_argument("--sizes", type=int, nargs="+", default=[200_000, 804_414])
    p.add_argument("--splits", type=int, default=1, help="rcv1-cutoff splits per problem (the paper: 10)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--token-docs", type=int, default=100_000, help="documents of the 'tokens' part")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the 'tokens' part (medians)")
    p.add_argument("--methods", default="peer,serial,jobs1,jobs2,python",
                   help=f"'tokens' methods, comma-separated, of {','.join(TOKEN_METHODS)}")
    p.add_argument("--before", help="a source tree of the code before (git archive REV distlearn | tar -x -C DIR): "
                   "the '*-before' token methods and the grid part's before run import it")
    p.add_argument("--grid-train", type=int, default=10_000, help="training sequences of the 'grid' part")
    p.add_argument("--grid-epochs", type=int, nargs="+", default=[1, 2, 3, 5])
    p.add_argument("--json")
    a = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    d = Path(a.data_dir)
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    if "convert" in a.parts or "cutoff" in a.parts:
        from distlearn.data._rcv1 import write_rcv1_corpus

        for n in a.sizes:
            corpus = d / f"rcv1-{n}"
            marker = corpus / "complete.json"
            if not marker.exists():
                t = time.perf_counter()
                info = write_rcv1_corpus(corpus, n)
                info["seconds"] = time.perf_counter() - t
                marker.write_text(json.dumps(info))
            info = json.loads(marker.read_text())
            text_mib = sum(os.path.getsize(f) for f in info["tokens"]) / 2**20
            if "convert" in a.parts:
                for w in (0, 2):
                    r = child({"kind": "convert", "tokens": info["tokens"], "qrels": info["qrels"],
                               "store": str(d / f"rcv1-{n}-w{w}.zarr"), "workers": w})
                    r.update({"part": "convert", "n_docs": n, "workers": w, "text_mib": text_mib,
                              "mib_per_s": text_mib / r["seconds"]})
                    rows.append(r)
                    print(json.dumps(r), flush=True)
            if "cutoff" in a.parts:
                store = d / f"rcv1-{n}-w0.zarr"
                for w in (0, 2):
                    r = child({"kind": "cutoff", "store": str(store), "out": str(d / f"cutoff-{n}-w{w}"),
                               "splits": a.splits, "workers": w})
                    r.update({"part": "cutoff", "n_docs": n, "workers": w, "splits": a.splits})
                    rows.append(r)
                    print(json.dumps({k: v for k, v in r.items() if k != "cell_seconds"}), flush=True)
    if "tokens" in a.parts:
        rows += tokens_part(d, a.token_docs, a.repeats, a.methods.split(","), a.before)
    if "grid" in a.parts:
        rows += grid_part(d, a.grid_train, a.grid_epochs, a.repeats, a.before)
    if "celegans" in a.parts:
        from distlearn.data._dna import convert_sequences, write_splice_corpus

        tr, te = d / "splice-train.zarr", d / "splice-test.zarr"
        if not (tr.exists() and te.exists()):
            write_splice_corpus(d / "splice-train.tsv", 100_000, random_state=0)
            write_splice_corpus(d / "splice-test.tsv", 10_000, random_state=1)
            convert_sequences(d / "splice-train.tsv", tr, features="wd", degree=3, overwrite=True)
            convert_sequences(d / "splice-test.tsv", te, features="wd", degree=3, overwrite=True)
        for w in (2, 0):
            r = child({"kind": "celegans", "train": str(tr), "test": str(te), "epochs": a.epochs, "workers": w})
            r.update({"part": "celegans", "workers": w, "epochs": a.epochs})
            rows.append(r)
            print(json.dumps(r), flush=True)
    print()
    for r in rows:
        where = f"{r['workers']} workers" if r["workers"] else "in process"
        wrss = ", ".join(f"{v:.0f}" for v in r.get("worker_rss_mib", [])) or "-"
        if r["part"] == "grid":
            print(f"grid      {r['n_train']:>8,} {r['method']:<11} {r['seconds']:8.1f} s  fits "
                  f"{r['task_fit_seconds']:.1f} s  driver {r['driver_rss_mib']:.0f} MiB  workers {wrss} MiB")
            continue
        if r["part"] == "tokens":
            print(f"tokens    {r['n_docs']:>8,} {r['method']:<38} wall {r['seconds']:6.2f} s  CPU "
                  f"{r['cpu_seconds']:6.2f} s  driver {r['driver_rss_mib']:.0f} MiB  workers {wrss} MiB")
            continue
        extra = f"{r['mib_per_s']:.1f} MiB/s" if r["part"] == "convert" else (
            f"{r['cells']} cells" if r["part"] == "cutoff" else f"test error {r['test_error_pct']:.2f} %")
        size = r.get("n_docs", 100_000)
        print(f"{r['part']:<9} {size:>8,} {where:<11} {r['seconds']:8.1f} s  {extra:<18} "
              f"driver {r['driver_rss_mib']:.0f} MiB  workers {wrss} MiB")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
