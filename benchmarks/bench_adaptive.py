#!/usr/bin/env python3
"""Benchmark: one pass of the adaptive learners (AROW, NAG) against Vowpal Wabbit.

    .venv/bin/python benchmarks/bench_adaptive.py                          # 800,000 rows
    .venv/bin/python benchmarks/bench_adaptive.py --n-samples 50000 --repeat 1   # smoke test

Data: the RCV1-like corpus of ``benchmarks/bench_learners.py`` (its ``load_rcv1``:
``make_rcv1_like(n, random_state=0, dtype="float32")``, 47,236 features, ~75 nnz
per unit-norm row, 5 % label noise; the last 10 % of the rows are the test set),
float64 for distlearn.

Protocol (one pass, stored order, every learner with a bias):

1. **Tuning on a validation split, never on the test rows.**  The training rows
   are cut into the first 90 % (fit) and the last 10 % (validation).  Each
   learner x conversion is fitted for every value of its grid (``--grid-r``
   for AROW's r, ``--grid-eta`` for NAG's eta) and the value with the lowest
   validation error is kept.
2. **Test.**  With the chosen values (and with the defaults), every learner is
   fitted on all training rows, timed (median of ``--repeat`` runs, numba
   compilation excluded by a warm-up fit) and scored on the test rows.
3. **Vowpal Wabbit** (``python -m vowpalwabbit``, the ``bench`` extra), one pass
   from its cache (VW text and cache written once, untimed, with
   ``bench_learners.write_vw``), its defaults (``--binary -b 18``: adaptive,
   normalized, invariant SGD, squared loss, learning rate 0.5, a constant
   feature) and the same with ``--loss_function hinge`` and ``logistic``;
   start-up (the same command on a 1-example cache) subtracted from the time.
   ``--vw-tune`` also picks VW's ``-l`` on the same validation split (VW
   tuned as ours are).

Learners: ``AROW(r)``, ``NormalizedGradient(loss="hinge"|"logistic", eta)``, each
with ``conversion="last"`` and ``"average"``; and the best classic rules of the
earlier benchmarks for reference (``PassiveAggressive`` PA-I, averaged).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_learners import _machine, _vw_call, _vw_cmd, load_rcv1, write_vw

CONVERSIONS = ("last", "average")


def learners() -> dict[str, tuple[Any, str | None, list[float] | None]]:
    """name -> (factory(param, conversion), tuned parameter, grid)."""
    import distlearn

    return {
        "AROW": (lambda v, c: distlearn.AROW(**({} if v is None else {"r": v}), epochs=1, shuffle=False,
                                             conversion=c), "r", None),
        "NAG-hinge": (lambda v, c: distlearn.NormalizedGradient(loss="hinge", **({} if v is None else {"eta": v}),
                                                                 epochs=1, shuffle=False, conversion=c), "eta", None),
        "NAG-logistic": (lambda v, c: distlearn.NormalizedGradient(loss="logistic",
                                                                    **({} if v is None else {"eta": v}), epochs=1,
                                                                    shuffle=False, conversion=c), "eta", None),
        "PA-I": (lambda v, c: distlearn.PassiveAggressive(variant="PA-I", **({} if v is None else {"C": v}),
                                                          epochs=1, shuffle=False, conversion=c), "C", None),
    }


def _err(est: Any, X: Any, y: np.ndarray) -> float:
    return float(np.mean(est.predict(X) != y))


def _fit(make: Any, X: Any, y: np.ndarray) -> tuple[Any, float]:
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est = make().fit(X, y)
        return est, time.perf_counter() - t0


# ---------------------------------------------------------------------------- Vowpal Wabbit


def vw_runs(data: Any, args: argparse.Namespace, n_fit: int) -> list[dict[str, Any]]:
    import importlib.util

    if importlib.util.find_spec("vowpalwabbit") is None:
        return [{"method": "vw", "error": "vowpalwabbit not installed (pip install -e '.[bench]')"}]
    d = Path(args.data_dir) / f"vw-adaptive-{args.n_samples}"
    d.mkdir(parents=True, exist_ok=True)
    X, y = data.X_train["float32"], data.y_train
    parts = {"train": (X, y), "fit": (X[:n_fit], y[:n_fit]), "one": (X[:1], y[:1])}
    t0 = time.perf_counter()
    for name, (Xp, yp) in parts.items():
        if not (d / f"{name}.cache").exists():
            write_vw(d / f"{name}.vw", Xp, yp)
            _vw_call(_vw_cmd("-d", str(d / f"{name}.vw"), "--cache_file", str(d / f"{name}.cache"), "-k",
                             "--passes", "1", "-f", str(d / "model"), "-b", "18"))
            (d / f"{name}.vw").unlink()
    for name, (Xp, yp) in (("val", (X[n_fit:], y[n_fit:])), ("test", (data.X_test["float32"], data.y_test))):
        if not (d / f"{name}.vw").exists():
            write_vw(d / f"{name}.vw", Xp, yp)
    print(f"# VW files ready in {time.perf_counter() - t0:.1f} s", flush=True)

    def run(cache: str, flags: list[str], evalset: str, truth: np.ndarray) -> tuple[float, float]:
        wall = _vw_call(_vw_cmd("--cache_file", str(d / f"{cache}.cache"), "--passes", "1", "-f",
                                str(d / "model"), *flags))
        _vw_call(_vw_cmd("-t", "-i", str(d / "model"), "-d", str(d / f"{evalset}.vw"), "-p", str(d / "preds.txt")))
        p = np.loadtxt(d / "preds.txt", usecols=0, ndmin=1)
        return float(np.mean(np.where(p >= 0, 1, -1) != truth)), wall

    out = []
    configs = {"vw default": [], "vw hinge": ["--loss_function", "hinge"], "vw logistic": ["--loss_function", "logistic"]}
    y_val = np.where(y[n_fit:] == 1, 1, -1)
    y_test = np.where(data.y_test == 1, 1, -1)
    for name, loss in configs.items():
        for lr in ([None] + (args.grid_vw_l if args.vw_tune else [])):
            flags = ["--binary", "-b", "18", *loss, *([] if lr is None else ["-l", str(lr)])]
            rec: dict[str, Any] = {"method": name, "flags": " ".join(flags), "l": lr}
            try:
                if lr is not None or args.vw_tune:
                    rec["val_error"], _ = run("fit", flags, "val", y_val)
                walls, startups = [], []
                for _ in range(args.repeat):
                    startups.append(_vw_call(_vw_cmd("--cache_file", str(d / "one.cache"), "--passes", "1", "-f",
                                                     str(d / "model1"), *flags)))
                    err, wall = run("train", flags, "test", y_test)
                    walls.append(wall)
                rec["test_error"] = err
                rec["time_s"] = max(statistics.median(walls) - statistics.median(startups), 1e-9)
                rec["raw_s"] = statistics.median(walls)
            except Exception as exc:  # noqa: BLE001 - reported, not fatal
                rec["error"] = str(exc)[:200]
            out.append(rec)
            print(f"{name:14s} {rec.get('flags', ''):45s} val {rec.get('val_error', float('nan')):.4f} "
                  f"test {rec.get('test_error', float('nan')):.4f}  {rec.get('time_s', float('nan')):.2f} s",
                  flush=True)
    return out


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=800_000, help="rows of the corpus, test 10%% (default 800,000)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per learner (median; default 3)")
    p.add_argument("--data-dir", default="bench-output", help="corpus store and VW files (default bench-output)")
    p.add_argument("--grid-r", type=float, nargs="+", default=[0.1, 0.3, 1.0, 3.0, 10.0, 30.0])
    p.add_argument("--grid-eta", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.5, 1.0, 2.0])
    p.add_argument("--grid-C", type=float, nargs="+", default=[0.01, 0.03, 0.1, 0.3, 1.0])
    p.add_argument("--grid-vw-l", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--vw-tune", action="store_true", help="also choose VW's -l on the validation split")
    p.add_argument("--methods", default="AROW,NAG-hinge,NAG-logistic,PA-I,vw")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    m = _machine()
    print(f"# machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['mem_gib']} GiB")
    data = load_rcv1(args)
    X, y = data.X_train["float64"], data.y_train
    Xt, yt = data.X_test["float64"], data.y_test
    n_fit = int(round(0.9 * len(y)))
    print(f"# {len(y):,} train rows ({n_fit:,} fit + {len(y) - n_fit:,} validation), {len(yt):,} test rows, "
          f"{X.shape[1]:,} features", flush=True)
    grids = {"r": args.grid_r, "eta": args.grid_eta, "C": args.grid_C}
    results: list[dict[str, Any]] = []
    for name, (make, param, _) in learners().items():
        if name not in methods:
            continue
        make(None, "last").fit(X[:2000], y[:2000])  # numba compilation, not timed
        for conv in CONVERSIONS:
            val = {}
            for v in grids[param]:
                est, _ = _fit(lambda v=v, make=make, conv=conv: make(v, conv), X[:n_fit], y[:n_fit])
                val[v] = _err(est, X[n_fit:], y[n_fit:])
            best = min(val, key=lambda v: (val[v], v))
            for label, v in (("default", None), ("tuned", best)):
                walls, est = [], None
                for _ in range(args.repeat):
                    est, wall = _fit(lambda v=v, make=make, conv=conv: make(v, conv), X, y)
                    walls.append(wall)
                rec = {"method": name, "conversion": conv, "setting": label, param: v if v is not None else
                       getattr(est, param), "val_errors": {str(k): e for k, e in val.items()},
                       "test_error": _err(est, Xt, yt), "time_s": statistics.median(walls), "runs_s": walls,
                       "online_error": est.online_errors_ / max(1, est.t_)}
                results.append(rec)
                print(f"{name:14s} {conv:8s} {label:8s} {param}={rec[param]:<6g} test {rec['test_error']:.4f}  "
                      f"online {rec['online_error']:.4f}  {rec['time_s']:.2f} s   (val: "
                      + " ".join(f"{k:g}:{e:.4f}" for k, e in val.items()) + ")", flush=True)
    if "vw" in methods:
        results += vw_runs(data, args, n_fit)
    ours = [r for r in results if "conversion" in r and r["setting"] == "tuned" and r["method"] != "PA-I"]
    vws = [r for r in results if r["method"].startswith("vw") and "test_error" in r]
    if ours and vws:
        best = min(ours, key=lambda r: r["test_error"])
        worst_vw = min(vws, key=lambda r: r["test_error"])
        ok = best["test_error"] < worst_vw["test_error"]
        print(f"{'PASS' if ok else 'FALL SHORT'}: best distlearn adaptive {best['method']}/{best['conversion']} "
              f"{best['test_error']:.4f} vs best VW ({worst_vw['flags']}) {worst_vw['test_error']:.4f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "facts": data.facts, "results": results}, indent=2,
                                              default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
