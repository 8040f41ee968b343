#!/usr/bin/env python3
"""Benchmark: svmlight text -> memory / distlearn zarr store.

    .venv/bin/python benchmarks/bench_convert.py                       # 800,000 rows, 3 repeats
    .venv/bin/python benchmarks/bench_convert.py --n-samples 50000 --repeat 1   # smoke test, seconds

An RCV1-like svmlight file (``write_svmlight(path, iter_rcv1_like(n, random_state=0))``)
is generated once into ``--data-dir`` and reused while its sidecar JSON records
the same parameters.  Every measured run is a fresh child process of this
script, so its peak RSS (``getrusage(RUSAGE_SELF).ru_maxrss``) belongs to that
method alone; imports happen before the clock starts.  Runs are interleaved
(method 1, 2, ... then the next repeat) so that drift of a noisy machine hits
every method alike.  The methods:

``sklearn``        ``load_svmlight_file(path, dtype=float32)``: the whole file into a CSR (peer baseline)
``sklearn+store``  the same, then ``create_dataset(out, X, y)`` (load everything, then store)
``convert``        ``convert(path, out)``: serial streaming, constant memory
``convert-dask``   ``convert(path, out, client=client)``, LocalCluster of ``--workers``
                   single-threaded worker processes; cluster start-up is timed separately
``stream-parse``   (diagnostic) iterate ``SvmlightReader(path)`` without storing: the
                   streaming parser's share of ``convert``

Before timing, ``convert`` and ``convert-dask`` stores are checked once to
equal scikit-learn's matrix exactly (indptr, indices, data, labels).
Throughput is MiB/s (2**20 bytes) of svmlight text.  The parent process
imports nothing heavy, so the children's ``ru_maxrss`` (which on Linux
inherits the spawning process's high-water mark across exec) is their own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

METHODS = ("sklearn", "sklearn+store", "convert", "convert-dask", "stream-parse", "convert-before")
DEFAULT_METHODS = METHODS[:5]  # convert-before: `convert` with --before DIR (an older source tree) first on the path
GENERATOR_VERSION = 1  # bump when the generated file's recipe changes
RESULT_TAG = "@@RESULT@@ "
MiB = float(1 << 20)


# ---------------------------------------------------------------------------- small helpers


def _maxrss_kib() -> int:
    """Peak RSS of this process in KiB (Linux reports ru_maxrss in KiB)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r // 1024) if sys.platform == "darwin" else int(r)


def _proc_status_kib(field: str) -> int | None:
    """``VmHWM`` / ``VmRSS`` from /proc/self/status (KiB), or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _mem_facts() -> dict[str, int | None]:
    return {"ru_maxrss_kib": _maxrss_kib(), "vmhwm_kib": _proc_status_kib("VmHWM")}


def _du(path: str | os.PathLike[str]) -> int:
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _rm(path: str | os.PathLike[str]) -> None:
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists() or p.is_symlink():
        p.unlink()
    # a failed writer leaves nothing but be thorough about partial stores
    for q in p.parent.glob(f".{p.name}.partial-*"):
        shutil.rmtree(q, ignore_errors=True)


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("distlearn", "numpy", "scipy", "scikit-learn", "zarr", "numcodecs", "dask", "distributed"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def _machine() -> dict[str, object]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "mem_gib": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": _versions(),
    }


# ---------------------------------------------------------------------------- children


def _child_generate(args: argparse.Namespace) -> dict[str, object]:
    from distlearn.data._svmlight import write_svmlight
    from distlearn.data.synthetic import iter_rcv1_like

    t0 = time.perf_counter()
    info = write_svmlight(args.input, iter_rcv1_like(args.n_samples, random_state=0))
    return {**info, "seconds": time.perf_counter() - t0}


def _same(a, b) -> bool:
    import numpy as np

    return a.shape == b.shape and bool(np.array_equal(a, b))


def _compare(X0, y0, ds) -> list[str]:
    X, y = ds.to_scipy()
    bad = []
    if X.shape != X0.shape:
        bad.append(f"shape {X.shape} != {X0.shape}")
    for name in ("indptr", "indices", "data"):
        if not _same(getattr(X, name), getattr(X0, name)):
            bad.append(name)
    if X.dtype != X0.dtype:
        bad.append(f"dtype {X.dtype} != {X0.dtype}")
    if not _same(y, y0):
        bad.append("labels")
    return bad


def _child_verify(args: argparse.Namespace) -> dict[str, object]:
    import numpy as np
    from sklearn.datasets import load_svmlight_file

    from distlearn.data.readers import convert
    from distlearn.distributed import executor_for

    X0, y0 = load_svmlight_file(args.input, dtype=np.float32)
    out: dict[str, object] = {"rows": int(X0.shape[0]), "n_features": int(X0.shape[1]), "nnz": int(X0.nnz)}
    _rm(args.output)
    ds = convert(args.input, args.output)
    out["convert"] = _compare(X0, y0, ds)
    _rm(args.output)
    with executor_for(f"local:{args.workers}") as ex:
        ds = convert(args.input, args.output, executor=ex, part_bytes=args.part_bytes)
        out["convert-dask"] = _compare(X0, y0, ds)
    _rm(args.output)
    return out


def _child_run(args: argparse.Namespace) -> dict[str, object]:
    """One timed run of one method; imports first, then the clock."""
    import numpy as np
    from sklearn.datasets import load_svmlight_file

    from distlearn.data import create_dataset
    from distlearn.data._svmlight import SvmlightReader
    from distlearn.data.readers import convert

    method = args.child
    res: dict[str, object] = {"method": method, "before": _mem_facts()}
    phases: dict[str, float] = {}
    _rm(args.output)
    c0 = time.process_time()
    if method == "sklearn":
        t0 = time.perf_counter()
        X, y = load_svmlight_file(args.input, dtype=np.float32)
        wall = time.perf_counter() - t0
        rows = X.shape[0]
        res["csr_bytes"] = int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes)
    elif method == "sklearn+store":
        t0 = time.perf_counter()
        X, y = load_svmlight_file(args.input, dtype=np.float32)
        t1 = time.perf_counter()
        ds = create_dataset(args.output, X, y)
        t2 = time.perf_counter()
        wall = t2 - t0
        phases = {"load": t1 - t0, "store": t2 - t1}
        rows = ds.n_samples
    elif method in ("convert", "convert-before"):
        t0 = time.perf_counter()
        ds = convert(args.input, args.output)
        wall = time.perf_counter() - t0
        rows = ds.n_samples
    elif method == "stream-parse":
        t0 = time.perf_counter()
        rows = 0
        for X, _ in SvmlightReader(args.input):
            rows += X.shape[0]
        wall = time.perf_counter() - t0
    elif method == "convert-dask":
        from distlearn.distributed import executor_for

        t0 = time.perf_counter()
        with executor_for(f"local:{args.workers}") as ex:
            client = ex.client
            client.wait_for_workers(args.workers)
            # what a first task would pay anyway: the parser's imports on every worker
            client.run(lambda: __import__("distlearn.data._svmlight") and None)
            t1 = time.perf_counter()
            ds = convert(args.input, args.output, executor=ex, part_bytes=args.part_bytes)
            t2 = time.perf_counter()
            workers = client.run(_mem_facts)
            t3 = time.perf_counter()
        t4 = time.perf_counter()
        wall = t2 - t1
        rows = ds.n_samples
        phases = {"cluster_start": t1 - t0, "cluster_close": t4 - t3}
        res["workers"] = {str(k): v for k, v in workers.items()}
    else:
        raise SystemExit(f"unknown method {method!r}")
    if args.output and os.path.exists(args.output):
        res["store_bytes"] = _du(args.output)
    _rm(args.output)
    res.update({"wall": wall, "cpu": time.process_time() - c0, "rows": int(rows), "phases": phases,
                "after": _mem_facts()})
    return res


def _child_main(args: argparse.Namespace) -> None:
    if args.child == "generate":
        out = _child_generate(args)
    elif args.child == "verify":
        out = _child_verify(args)
    else:
        out = _child_run(args)
    sys.stdout.write(RESULT_TAG + json.dumps(out) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------- parent


def _spawn(child: str, args: argparse.Namespace, *, input: str, output: str = "") -> dict[str, object]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child", child,
        "--input", input,
        "--output", output,
        "--n-samples", str(args.n_samples),
        "--workers", str(args.workers),
        "--part-bytes", str(args.part_bytes),
    ]  # fmt: skip
    env = dict(os.environ)
    if child == "convert-before":
        if not args.before:
            raise SystemExit("convert-before needs --before DIR (git archive REV distlearn | tar -x -C DIR)")
        env["PYTHONPATH"] = os.pathsep.join([args.before, env.get("PYTHONPATH", "")])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
    raise RuntimeError(f"child {child!r} failed (exit {proc.returncode})")


def _ensure_data(args: argparse.Namespace) -> tuple[str, dict[str, object]]:
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"rcv1like-{args.n_samples}.svm"
    side = path.with_suffix(".json")
    want = {
        "generator": "distlearn.data.synthetic.iter_rcv1_like",
        "n_samples": args.n_samples,
        "random_state": 0,
        "writer": "distlearn.data._svmlight.write_svmlight",
        "recipe_version": GENERATOR_VERSION,
        "distlearn_version": _versions()["distlearn"],
    }
    if path.exists() and side.exists():
        try:
            have = json.loads(side.read_text())
        except ValueError:
            have = {}
        if have.get("params") == want and have.get("bytes") == path.stat().st_size:
            print(f"# reusing {path} ({have['bytes'] / MiB:.1f} MiB, generated in {have['seconds']:.1f} s)")
            return str(path), have
    print(f"# generating {path} ({args.n_samples:,} rows) ...", flush=True)
    _rm(path)
    info = _spawn("generate", args, input=str(path))
    rec = {"params": want, **info}
    side.write_text(json.dumps(rec, indent=2) + "\n")
    print(f"# generated {info['bytes'] / MiB:.1f} MiB in {info['seconds']:.1f} s", flush=True)
    return str(path), rec


def _summarise(runs: list[dict[str, object]], size: int) -> dict[str, object]:
    walls = [r["wall"] for r in runs]
    med = statistics.median(walls)
    rows = runs[0]["rows"]
    out: dict[str, object] = {
        "runs": runs,
        "median_s": med,
        "min_s": min(walls),
        "cpu_median_s": statistics.median(r["cpu"] for r in runs),
        "mib_per_s": size / MiB / med,
        "rows_per_s": rows / med,
        "peak_rss_mib": statistics.median(r["after"]["ru_maxrss_kib"] for r in runs) / 1024,
        "peak_vmhwm_mib": statistics.median((r["after"]["vmhwm_kib"] or 0) for r in runs) / 1024,
        "start_rss_mib": statistics.median(r["before"]["ru_maxrss_kib"] for r in runs) / 1024,
    }
    if runs[0].get("workers"):
        out["worker_peak_rss_mib"] = statistics.median(
            max(w["ru_maxrss_kib"] for w in r["workers"].values()) for r in runs
        ) / 1024
        out["worker_peak_vmhwm_mib"] = statistics.median(
            max((w["vmhwm_kib"] or 0) for w in r["workers"].values()) for r in runs
        ) / 1024
    for key in sorted({k for r in runs for k in r["phases"]}):
        out[f"{key}_median_s"] = statistics.median(r["phases"][key] for r in runs if key in r["phases"])
    if runs[0].get("store_bytes"):
        out["store_mib"] = runs[0]["store_bytes"] / MiB
    if runs[0].get("csr_bytes"):
        out["csr_mib"] = runs[0]["csr_bytes"] / MiB
    return out


def _table(summary: dict[str, dict[str, object]]) -> str:
    base = summary.get("sklearn", {}).get("median_s")
    head = ("method", "median s", "min s", "CPU s", "MiB/s", "rows/s", "peak RSS MiB", "worker RSS MiB",
            "time vs sklearn", "CPU vs sklearn")
    cbase = summary.get("sklearn", {}).get("cpu_median_s")
    rows = [head]
    for m, s in summary.items():
        ratio = f"{s['median_s'] / base:.2f}x" if base else "-"
        wrss = f"{s['worker_peak_rss_mib']:.0f}" if "worker_peak_rss_mib" in s else "-"
        rows.append(
            (
                m,
                f"{s['median_s']:.2f}",
                f"{s['min_s']:.2f}",
                f"{s['cpu_median_s']:.2f}",
                f"{s['mib_per_s']:.1f}",
                f"{s['rows_per_s']:,.0f}",
                f"{s['peak_rss_mib']:.0f}",
                wrss,
                ratio,
                f"{s['cpu_median_s'] / cbase:.2f}x" if cbase else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for k, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("| " + " | ".join(cells) + " |")
        if k == 0:
            lines.append("|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n-samples", type=int, default=800_000, help="rows of the generated file (default 800,000)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per method (default 3)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes for convert-dask (default 2)")
    p.add_argument("--data-dir", default="bench-output", help="where the svmlight file and temporary stores go")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument(
        "--methods",
        default=",".join(DEFAULT_METHODS),
        help=f"comma-separated subset of {','.join(METHODS)} (default: all)",
    )
    p.add_argument("--part-bytes", type=int, default=None, help="byte range per parallel task (default: the library's)")
    p.add_argument("--no-verify", action="store_true", help="skip the exactness check")
    p.add_argument("--before", default=None, help="an older source tree for the convert-before method")
    # internal: child-process mode
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--input", default=None, help=argparse.SUPPRESS)
    p.add_argument("--output", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.part_bytes is None:
        # without importing distlearn (and numpy) into the parent
        args.part_bytes = 64 << 20
        try:
            cfg = Path(metadata.distribution("distlearn").locate_file("distlearn/_config.py"))
            for line in cfg.read_text().splitlines():
                if line.startswith("PARALLEL_PART_BYTES"):
                    args.part_bytes = int(eval(line.split("=", 1)[1], {}))  # noqa: S307 - our own constant
        except Exception:
            pass

    if args.child:
        _child_main(args)
        return 0

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        p.error(f"unknown method(s) {unknown}; choose from {METHODS}")
    if args.repeat < 1 or args.n_samples < 1 or args.workers < 1:
        p.error("--repeat, --n-samples and --workers must be positive")

    machine = _machine()
    print(
        f"# machine: {machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable), "
        f"{machine['mem_gib']} GiB, {machine['platform']}"
    )
    print("# python " + machine["python"] + "; " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))
    path, data = _ensure_data(args)
    size = os.path.getsize(path)
    out = str(Path(args.data_dir) / "bench-out.zarr")

    verify = None
    if not args.no_verify:
        t0 = time.perf_counter()
        verify = _spawn("verify", args, input=path, output=out)
        ok = {m: not verify[m] for m in ("convert", "convert-dask")}
        verify["pass"] = all(ok.values())
        for m, good in ok.items():
            detail = "" if good else f" (differs in {', '.join(verify[m])})"
            print(f"# exactness vs load_svmlight_file, {m}: {'PASS' if good else 'FAIL'}{detail}")
        print(f"#   ({verify['rows']:,} rows, {verify['n_features']:,} features, {verify['nnz']:,} nnz; "
              f"check took {time.perf_counter() - t0:.1f} s)")  # fmt: skip

    print(
        f"# input {path}: {size / MiB:.1f} MiB of svmlight text, {data['n_samples']:,} rows, "
        f"{data['nnz']:,} nnz ({data['nnz'] / data['n_samples']:.1f}/row); "
        f"{args.repeat} run(s) per method, each in a fresh process; part_bytes={args.part_bytes / MiB:g} MiB",
        flush=True,
    )
    runs: dict[str, list[dict[str, object]]] = {m: [] for m in methods}
    for rep in range(args.repeat):
        for m in methods[rep % len(methods):] + methods[:rep % len(methods)]:  # the order rotated per round
            r = _spawn(m, args, input=path, output=out)
            runs[m].append(r)
            extra = "".join(f", {k} {v:.2f} s" for k, v in r["phases"].items())
            print(f"#   run {rep + 1}/{args.repeat} {m}: {r['wall']:.2f} s, CPU {r['cpu']:.2f} s{extra}", flush=True)
    summary = {m: _summarise(rs, size) for m, rs in runs.items()}

    print()
    print(_table(summary))
    print()
    print("MiB/s = 2**20 bytes of svmlight text per second of the median run; peak RSS = median over runs of")
    print("ru_maxrss of the process doing the work (for convert-dask, the driver; 'worker RSS' = the larger")
    print("worker's ru_maxrss).")
    start = ", ".join(f"{m} {s['start_rss_mib']:.0f}" for m, s in summary.items())
    print(f"RSS after imports, before work: {start} MiB.")
    sizes = []
    if "sklearn" in summary and "csr_mib" in summary["sklearn"]:
        csr = summary["sklearn"]["csr_mib"]
        sizes.append(f"in-memory CSR from sklearn (data + indices + indptr + y) {csr:.0f} MiB")
    sizes += [f"store written by {m} {s['store_mib']:.0f} MiB" for m, s in summary.items() if "store_mib" in s][:1]
    if sizes:
        print("Sizes: " + "; ".join(sizes) + ".")
    if "sklearn+store" in summary:
        s = summary["sklearn+store"]
        print(
            f"sklearn+store phases (median): load {s['load_median_s']:.2f} s, "
            f"create_dataset {s['store_median_s']:.2f} s."
        )
    if "convert-dask" in summary:
        s = summary["convert-dask"]
        print(
            f"convert-dask: cluster start-up {s['cluster_start_median_s']:.2f} s (median, not in the time above; "
            f"incl. importing the parser on the workers), close {s['cluster_close_median_s']:.2f} s; "
            f"{args.workers} worker(s) x 1 thread, part_bytes {args.part_bytes / MiB:g} MiB."
        )

    if args.json:
        rec = {
            "machine": machine,
            "args": {k: v for k, v in vars(args).items() if k not in ("child", "input", "output")},
            "data": {"path": path, "bytes": size, **data},
            "verify": verify,
            "results": summary,
        }
        Path(args.json).write_text(json.dumps(rec, indent=2) + "\n")
        print(f"# wrote {args.json}")
    _rm(out)
    return 0 if (verify is None or verify["pass"]) else 1


if __name__ == "__main__":
    sys.exit(main())
