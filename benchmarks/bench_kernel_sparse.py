#!/usr/bin/env python3
"""Benchmark: kernel learners on sparse text, the sparse cache against SVC and the dense cache, same data, same run.

    .venv/bin/python benchmarks/bench_kernel_sparse.py                         # 5,000 train + 1,000 test rows
    .venv/bin/python benchmarks/bench_kernel_sparse.py --n-train 2000 --rows kmira,kmira-dense,svc-10 --repeat 3
    .venv/bin/python benchmarks/bench_kernel_sparse.py --json out.json
    mkdir /tmp/before && git archive REV distlearn | tar -x -C /tmp/before
    .venv/bin/python benchmarks/bench_kernel_sparse.py --n-train 1500 --n-test 500 --rows kmira,svc-10 --before /tmp/before
    .venv/bin/python benchmarks/bench_kernel_sparse.py --n-train 1500 --n-test 500 --rows kmira,svc-10 --hash-columns 1048576
    .venv/bin/python benchmarks/bench_kernel_sparse.py --n-train 20000 --n-test 2000 --train-prefix 5000 \
        --rows kmira-tols,svc-1,svc-10 --repeat 1 --tols 0,0.05,0.1,0.2,0.4

Data: the RCV1-like generator (``distlearn.data.synthetic.iter_rcv1_like``, random_state=0: 47,236 features,
about 75 nonzeros a row, +-1 labels with 5 % noise), CSR float64, the first ``--n-train`` rows train and the next
``--n-test`` test; generated once into ``--data-dir``.

Every measurement is one fresh child process (``--child ROW``) that loads the data, compiles on 100 rows
(untimed) and times one fit in CPU seconds of the process (one thread everywhere: the engine, libsvm, OpenBLAS
pinned), then scores the test rows.  The rows alternate (A B C A B C ...) so load from other jobs falls on all
alike; medians and the ratios to SVC are printed; nothing is asserted.

``--before DIR`` runs every KernelMIRA / KernelOBPM row a second time as ``ROW@before``, with the package from
``DIR`` (a tree holding ``distlearn/``, e.g. ``git archive``'s) first on the path, alternating with the others.

Rows:

  kmira        KernelMIRA(budget="variable") with every other parameter at its default, on the CSR rows: the
               cache is a sparse store (its patterns' nonzeros only), kernel rows cost each pattern's nonzeros
  kmira-dense  the same fit with the sparse cache turned off (``MIRROR_SPARSITY = 10**9``): every pattern a dense
               row of 47,236 values, as before the sparse cache (727 s at 5,000 rows, measured 2026-11-26; run it
               at a few thousand rows).  The two online fits are the same bits (checked when both ran: ``identical``
               in the JSON compares their online mistakes, updates, removals, widths and final cache sizes).  Their
               models can still differ: ``conversion="auto"`` keeps the history of every pattern ever cached only
               under a memory cap, which dense text patterns (377 KB each) pass after about a thousand updates, so
               the dense cache falls back to the last hypothesis where the sparse one keeps the distilled average
               (``conversion`` in the rows)
  kmira-tols   the fit with ``compress=0``, then its expansion compressed at each of ``--tols`` as
               ``compress="auto"`` does (in parts above 6,144 patterns, the 99 % agreement guard), each scored on
               the test rows (``COMPRESS_AUTO_SPARSE`` was chosen from these)
  kobpm        KernelOBPM() with its defaults (20 kernel-perceptron members, tau 0.3, 10 passes, the average) on the
               CSR rows: the pool is a sparse store (each pattern's nonzeros, once, for every member)
  kobpm-pool   the same fit with the pool's patterns kept as dense rows beside their sparse mirror (as before
               the sparse store, 2026-11-27): kernel rows the same bits, memory d values a pooled pattern.
               ``identical`` in the JSON compares the two fits' online errors, member sizes and Bayes points;
               ``peak_rss_mib`` is each child's peak resident memory
  svc-1, svc-10  sklearn SVC(C=1 / 10, gamma="scale") on the same CSR matrix
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROWS = ("kmira", "kmira-dense", "kmira-tols", "kobpm", "kobpm-pool", "svc-1", "svc-10")


def _data(path: Path, n: int) -> None:
    import numpy as np
    import scipy.sparse as sp

    from distlearn.data.synthetic import iter_rcv1_like

    parts, ys = [], []
    for blk in iter_rcv1_like(n, random_state=0):
        parts.append(blk[0])
        ys.append(blk[1])
    X = sp.vstack(parts).tocsr().astype(np.float64)
    np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr, shape=np.asarray(X.shape), y=np.concatenate(ys))


def _tolerances(est, Xte, yte, tols: list[float]) -> list[dict]:
    """The fitted (``compress=0``) expansion compressed at each tolerance as ``compress="auto"`` compresses it (in
    parts above ``COMPRESS_AUTO_MAX`` patterns, the agreement guard), each scored on the test rows."""
    import numpy as np

    from distlearn.conversions.kernel import compress_expansion, compress_in_parts
    from distlearn.estimators.kernel import COMPRESS_AUTO_AGREE, COMPRESS_AUTO_MAX
    from distlearn.learners.kernel import kernel_decision

    S, A, k = est.support_vectors_, est.dual_coef_.T, est._kernel_obj
    out = []
    for tol in tols:
        t = time.process_time()
        if tol <= 0:
            keep, coef, res = np.arange(S.shape[0]), A, 0.0
        else:
            c = (compress_in_parts(k, S, A, tol, agree=COMPRESS_AUTO_AGREE) if S.shape[0] > COMPRESS_AUTO_MAX else
                 compress_expansion(k, S, A, tol, norm="data", agree=COMPRESS_AUTO_AGREE))
            keep, coef, res = c.keep, c.coef, c.residual
        cpu = time.process_time() - t
        F = kernel_decision(k, S[keep], coef, Xte)
        F = F[:, 0] if F.shape[1] == 1 else F
        pred = est.classes_[(F > 0).astype(int)] if F.ndim == 1 else est.classes_[np.argmax(F, axis=1)]
        out.append({"tol": tol, "patterns": int(len(keep)), "test_error_pct": float(np.mean(pred != yte) * 100),
                    "residual": float(res), "compress_cpu_s": cpu})
    return out


def child(row: str, path: Path, n_train: int, prefix: int | None = None, tols: list[float] | None = None,
          hash_columns: int | None = None) -> dict:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np
    import scipy.sparse as sp

    z = np.load(path)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    y = z["y"]
    if hash_columns:  # every column to a random one of hash_columns (collisions summed), as feature hashing does
        to = np.random.RandomState(0).randint(0, hash_columns, X.shape[1])
        X = sp.csr_matrix((X.data, to[X.indices], X.indptr), shape=(X.shape[0], hash_columns))
        X.sum_duplicates()
    Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    if prefix:
        Xtr, ytr = Xtr[:prefix], ytr[:prefix]
    if row.startswith("svc"):
        from sklearn.svm import SVC

        est = SVC(C=float(row.split("-")[1]), gamma="scale")
    elif row.startswith("kobpm"):
        import distlearn.ensembles.kernel as EK
        from distlearn import KernelOBPM

        if row == "kobpm-pool":  # the mirror on a dense pool: the store never turned on
            mirror = EK.KernelEnsembleState.mirror
            EK.KernelEnsembleState.mirror = lambda self, store=False: mirror(self)
        KernelOBPM(random_state=0).fit(Xtr[:100], ytr[:100])  # compile, untimed
        est = KernelOBPM(random_state=0)
    else:
        import distlearn.learners.kernel as LK
        from distlearn import KernelMIRA

        if row == "kmira-dense":
            LK.MIRROR_SPARSITY = 10**9
        KernelMIRA(budget="variable", random_state=0).fit(Xtr[:100], ytr[:100])  # compile, untimed
        est = KernelMIRA(budget="variable", random_state=0, **({"compress": 0.0} if row == "kmira-tols" else {}))
    t, w = time.process_time(), time.perf_counter()
    est.fit(Xtr, ytr)
    cpu, wall = time.process_time() - t, time.perf_counter() - w
    err = float(np.mean(est.predict(Xte) != yte) * 100)
    sv = est.support_vectors_
    import resource

    res = {"row": row, "fit_cpu_s": cpu, "fit_wall_s": wall, "test_error_pct": err, "patterns": int(sv.shape[0]),
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if row.startswith("kobpm"):
        res["online"] = [int(est.online_errors_), [int(v) for v in est.member_n_support_], int(est.pool_size_)]
        res["bayes_point"] = [float(np.abs(est.dual_coef_).sum()), float(abs(sv).sum())]
    elif not row.startswith("svc"):
        res["conversion"] = est.conversion_info_.get("conversion")
        res["online"] = [int(est.online_errors_), int(est.n_updates_), int(est.n_removed_), float(est.gamma_),
                         int(est.cache_size_[-1])]
    if row == "kmira-tols":
        res["tolerances"] = _tolerances(est, Xte, yte, tols or [0.0])
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-train", type=int, default=5000)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--rows", default="kmira,svc-1,svc-10", help=f"comma-separated, of {', '.join(ROWS)}")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data-dir", default="/tmp/distlearn-bench-kernel-sparse")
    p.add_argument("--train-prefix", type=int, help="train on the first N of the --n-train rows (the test rows stay "
                   "the file's last --n-test: one test set for several training sizes)")
    p.add_argument("--tols", default="0,0.05,0.1,0.2,0.4", help="kmira-tols: the compression tolerances")
    p.add_argument("--json")
    p.add_argument("--before", help="a tree holding an older distlearn/: its rows run too, as ROW@before")
    p.add_argument("--hash-columns", type=int, help="hash the columns into this many (hashed text: 1048576)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    data = Path(a.data_dir) / f"rcv1like-{a.n_train + a.n_test}.npz"
    tols = [float(t) for t in a.tols.split(",")]
    if a.child:
        print(json.dumps(child(a.child, data, a.n_train, a.train_prefix, tols, a.hash_columns)))
        return
    rows = a.rows.split(",")
    for r in rows:
        if r not in ROWS:
            raise SystemExit(f"--rows: unknown row {r!r}; one of {', '.join(ROWS)}")
    if a.before:
        if not (Path(a.before) / "distlearn" / "__init__.py").is_file():
            raise SystemExit(f"--before {a.before}: no distlearn/__init__.py there")
        rows = [x for r in rows for x in ([r, f"{r}@before"] if not r.startswith("svc") else [r])]
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        _data(data, a.n_train + a.n_test)
    results: dict[str, list[dict]] = {r: [] for r in rows}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for k in range(a.repeat):
        for r in rows:
            name, _, tree = r.partition("@")
            cenv = {**env, "PYTHONPATH": str(Path(a.before).resolve())} if tree else env
            cmd = [sys.executable, __file__, "--child", name, "--n-train", str(a.n_train), "--n-test", str(a.n_test),
                   "--data-dir", a.data_dir, "--tols", a.tols] + (["--train-prefix", str(a.train_prefix)]
                                                                  if a.train_prefix else []) \
                + (["--hash-columns", str(a.hash_columns)] if a.hash_columns else [])
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=cenv).stdout)
            results[r].append(res)
            print(f"# {k} {r}: fit {res['fit_cpu_s']:.2f} CPU s ({res['fit_wall_s']:.2f} wall), "
                  f"error {res['test_error_pct']:.2f} %, {res['patterns']} patterns, "
                  f"peak {res['peak_rss_mib']:.0f} MiB"
                  + (f", conversion {res['conversion']}" if "conversion" in res else ""), flush=True)
            for c in res.get("tolerances", []):
                print(f"#   compressed at {c['tol']:g}: error {c['test_error_pct']:.2f} %, {c['patterns']} patterns, "
                      f"residual {c['residual']:.3f}, {c['compress_cpu_s']:.1f} CPU s", flush=True)
    summary = {}
    svc = [r for r in rows if r.startswith("svc")]
    ref = statistics.median(x["fit_cpu_s"] for x in results[svc[-1]]) if svc else None
    print(f"\n{a.n_train:,} train / {a.n_test:,} test rows, medians of {a.repeat}:")
    for r in rows:
        cpu = statistics.median(x["fit_cpu_s"] for x in results[r])
        rss = statistics.median(x["peak_rss_mib"] for x in results[r])
        summary[r] = {"fit_cpu_s": cpu, "test_error_pct": results[r][0]["test_error_pct"],
                      "patterns": results[r][0]["patterns"], "peak_rss_mib": rss, "runs": results[r]}
        ratio = f", {cpu / ref:.2f}x {svc[-1]}" if ref else ""
        print(f"  {r:19s} fit {cpu:8.2f} CPU s{ratio}   error {summary[r]['test_error_pct']:.2f} %   "
              f"{summary[r]['patterns']} patterns   peak {rss:.0f} MiB")
    if "kmira" in rows and "kmira-dense" in rows:
        same = all(x["online"] == z["online"] for x, z in zip(results["kmira"], results["kmira-dense"]))
        summary["identical"] = bool(same)
        print(f"  the sparse and dense caches' online fits are the same (mistakes, updates, removals, width, final "
              f"cache): {same}; conversions {results['kmira'][0]['conversion']} / "
              f"{results['kmira-dense'][0]['conversion']}")
    if "kobpm" in rows and "kobpm-pool" in rows:
        same = all(x["online"] == z["online"] and x["bayes_point"] == z["bayes_point"]
                   for x, z in zip(results["kobpm"], results["kobpm-pool"]))
        summary["identical_kobpm"] = bool(same)
        print(f"  the sparse store and the dense pool give the same fit (online errors, member sizes, pool, Bayes "
              f"point): {same}")
    if a.json:
        Path(a.json).write_text(json.dumps({"n_train": a.n_train, "n_test": a.n_test, "rows": summary}, indent=1))


if __name__ == "__main__":
    main()
