#!/usr/bin/env python3
"""Benchmark: the first `distlearn train` after installing, numba's cache empty.

    .venv/bin/python benchmarks/bench_coldstart.py                      # this checkout, 2 repeats
    .venv/bin/python benchmarks/bench_coldstart.py --venv               # also from a fresh `pip install .`
    .venv/bin/python benchmarks/bench_coldstart.py --source /other/checkout --json before.json

A user's first hour starts with `distlearn generate rcv1 rcv1.svm --n-samples 5000`,
`distlearn convert rcv1.svm rcv1.zarr`, then `distlearn train rcv1.zarr --model perceptron` and
`--model obpm`.  The first train of each compiles the kernels it needs (numba, cached on disk
afterwards).  This times, each in a fresh process (`python -m distlearn ...`, as a user runs it):

  cold perceptron   the first `train --model perceptron`, numba's cache empty (goal: <= 10 s wall)
  cold obpm         then the first `train --model obpm` (goal: <= 15 s wall)
  warm perceptron   the same two again, everything cached
  warm obpm
  after warmup      a fresh cache, `distlearn warmup`, then both trains (they compile nothing)

Each row: wall seconds, the process's CPU seconds (user + sys, from getrusage of the child: the
number to read on a loaded machine, where wall time measures the neighbours), and what the train
itself reported (`--json`: fit_seconds, compile_seconds).  A cold cache is an empty temporary
``NUMBA_CACHE_DIR``; with ``--venv`` the package is also installed non-editable (`pip install
--no-deps .` into a new virtual environment that reuses this environment's dependencies through a
.pth file) and run with numba's default cache placement (``__pycache__`` in its site-packages,
empty after the install; the build itself in pip's isolated environment), which also shows that the cache written by the first run is found by
the next.  ``--repeat`` repeats every scenario with a new empty cache; medians are printed.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _run(py: str, args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One `python -m distlearn ARGS` in a fresh process: wall, CPU, and its JSON when it prints one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([py, "-m", "distlearn", *args], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"distlearn {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out: dict[str, Any] = {"wall": round(wall, 2), "cpu": round(cpu, 2)}
    if "--json" in args:
        doc = json.loads(p.stdout)
        for k in ("fit_seconds", "compile_seconds", "compiled", "seconds"):
            if k in doc:
                out[k] = doc[k]
    return out


def _env(cache: Path | None, pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH", "DISTLEARN_NUMBA_CACHE")}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def _fresh_venv(where: Path, source: Path) -> str:
    """A new venv with `pip install --no-deps .` of ``source`` (non-editable); its dependencies
    come from this interpreter's site-packages through a .pth file (no download)."""
    venv.EnvBuilder(with_pip=False, clear=True).create(where)
    py = str(where / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_bench_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    build = Path(tempfile.mkdtemp(prefix="coldstart-src-"))
    try:  # build from a copy: the checkout's own build/ and egg-info are left alone
        shutil.copytree(source, build / "src", ignore=shutil.ignore_patterns(
            ".venv", ".git", "__pycache__", "*.nbi", "*.nbc", "build", "*.egg-info", "bench-output"))
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps",
                        "--disable-pip-version-check", str(build / "src")], check=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return py


def _scenario(py: str, store: Path, work: Path, cache: Path | None, pythonpath: str | None,
              warmup: bool) -> dict[str, Any]:
    env = _env(cache, pythonpath)
    rows: dict[str, Any] = {}
    if warmup:
        rows["warmup"] = _run(py, ["warmup", "--json"], env, work)
    for phase in ("cold", "warm") if not warmup else ("after warmup",):
        for model in ("perceptron", "obpm"):
            rows[f"{phase} {model}"] = _run(py, ["train", str(store), "--model", model, "--json"], env, work)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=ROOT, help="the checkout to time (default: this one)")
    ap.add_argument("--n-samples", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=2, help="each scenario this many times, a new empty cache each")
    ap.add_argument("--venv", action="store_true", help="also from a fresh non-editable install (pip install .)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the warmup scenario (a checkout before "
                    "`distlearn warmup` existed)")
    ap.add_argument("--json", type=Path, help="write every run here")
    a = ap.parse_args(argv)
    source = a.source.resolve()
    work = Path(tempfile.mkdtemp(prefix="coldstart-"))
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        py = sys.executable
        env = _env(work / "gen-cache", str(source))
        svm, store = work / "rcv1.svm", work / "rcv1.zarr"
        _run(py, ["generate", "rcv1", str(svm), "--n-samples", str(a.n_samples)], env, work)
        _run(py, ["convert", str(svm), str(store)], env, work)
        setups = [("checkout", py, str(source))]
        if a.venv:
            setups.append(("pip install .", _fresh_venv(work / "venv", source), None))
        for r in range(a.repeat):
            for label, vpy, pythonpath in setups:
                for warm in (False,) if a.no_warmup else (False, True):
                    if pythonpath is None:  # the venv: numba's default cache, emptied for each scenario
                        site = subprocess.run([vpy, "-c", "import distlearn, os; print(os.path.dirname("
                                               "distlearn.__file__))"], capture_output=True, text=True,
                                              check=True, cwd=work).stdout.strip()
                        for f in Path(site).rglob("*.nb[ic]"):
                            f.unlink()
                        cache = None
                    else:
                        cache = work / f"cache-{label}-{r}-{warm}"
                    rows = _scenario(vpy, store, work, cache, pythonpath, warm)
                    for name, row in rows.items():
                        results.setdefault(f"{label}: {name}", []).append(row)
                        extra = "".join(f" {k} {row[k]}" for k in ("fit_seconds", "compile_seconds") if k in row)
                        print(f"# run {r + 1} {label}: {name}: wall {row['wall']} s, cpu {row['cpu']} s{extra}",
                              flush=True)
        print(f"\n{a.n_samples:,}-row RCV1-like store; {source}; medians of {a.repeat} run(s), load "
              f"{os.getloadavg()[0]:.1f} at the end")
        print(f"{'scenario':<40} {'wall s':>7} {'cpu s':>7} {'fit s':>7} {'compile s':>9}")
        for name, runs in results.items():
            med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu")}
            fit = [r["fit_seconds"] for r in runs if "fit_seconds" in r]
            comp = [r["compile_seconds"] for r in runs if "compile_seconds" in r]
            print(f"{name:<40} {med['wall']:>7.2f} {med['cpu']:>7.2f} "
                  f"{statistics.median(fit) if fit else float('nan'):>7.2f} "
                  f"{statistics.median(comp) if comp else float('nan'):>9.2f}")
        if a.json:
            a.json.write_text(json.dumps({"source": str(source), "n_samples": a.n_samples, "runs": results}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
