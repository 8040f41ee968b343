#!/usr/bin/env python3
"""Benchmark (issue 29): one pass of the refit's sums (``distributed/runs.py: store_sums``) on a fresh
2-worker LocalCluster, alone: wall and CPU seconds and the workers' peak resident memory.

    DISTLEARN_FASHION_MNIST=DIR .venv/bin/python benchmarks/bench_refit_sums.py --patterns 3967

Data: the Fashion-MNIST training images as a zarr store (60,000 x 784, 12 blocks; made once in
``--work``), the patterns S a seeded sample of ``--patterns`` training rows, the RBF kernel at twice
the "scale" width, ten classes: what ``KernelPermutationBPM(refit=...)`` sums after its members'
fit (``benchmarks/bench_kernel_scale.py --refit``), without the members.  Each part's sums are
|S|^2 + 10 |S| float64 (126 MB at 3,967 patterns).  ``peak_before_mib`` is the workers' peak after
start-up (imports, one store read), ``peak_after_mib`` after the pass; ``G00`` and ``sha256`` identify
the sums' bits (the same for any worker count with the fixed parts and tree).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

from distlearn.data.public import FASHION_HELP, fashion_mnist_dir, load_fashion_mnist, no_fashion_message


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--fashion-dir", type=Path, default=None, help=FASHION_HELP)
    p.add_argument("--patterns", type=int, default=3967, help="|S|: training rows sampled as the patterns")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--work", type=Path, default=Path("bench-refit-sums"), help="directory for the store")
    args = p.parse_args(argv)

    from distlearn.data.readers import convert
    from distlearn.distributed.cluster import get_client
    from distlearn.distributed.runs import store_sums
    from distlearn.estimators.kernel_bayes_point import _refit_sums
    from distlearn.learners.kernel import make_kernel

    d = fashion_mnist_dir(args.fashion_dir)
    if d is None or not Path(d).is_dir():
        raise SystemExit(no_fashion_message("--fashion-dir"))
    store = args.work / "train.zarr"
    if not store.exists():
        args.work.mkdir(parents=True, exist_ok=True)
        convert(Path(d) / "train-images-idx3-ubyte.gz", store)
    Xtr = load_fashion_mnist(d)[0]
    S = Xtr[np.random.default_rng(0).choice(len(Xtr), args.patterns, replace=False)].astype(np.float64)
    kern = make_kernel("rbf", gamma=2 / (Xtr.shape[1] * float(np.var(Xtr))))
    fn = functools.partial(_refit_sums, kern, S, np.arange(10), 10)
    with get_client("local", n_workers=args.workers) as client:
        client.run(lambda: __import__("distlearn").KernelMIRA)  # import distlearn on the workers (untimed)
        before = sorted(client.run(_peak_mib).values())
        load0, cpu0, c, t = os.getloadavg(), client.run(time.process_time), time.process_time(), time.perf_counter()
        G, R = store_sums(fn, str(store), scheduler=client)
        wall, driver = time.perf_counter() - t, time.process_time() - c
        workers = sum(v - cpu0[w] for w, v in client.run(time.process_time).items())
        print(json.dumps({"patterns": args.patterns, "wall_s": wall, "cpu_s": driver + workers, "driver_cpu_s": driver,
                          "peak_before_mib": before, "peak_after_mib": sorted(client.run(_peak_mib).values()),
                          "G00": float(G[0, 0]), "sha256": hashlib.sha256(G.tobytes() + R.tobytes()).hexdigest()[:16],
                          "loadavg": [load0, os.getloadavg()]}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
