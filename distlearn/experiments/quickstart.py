"""The quickstart job (``distlearn demo``): embedded data through the whole data layer on Dask.

1. Generate two data sets from the project's own generators (no download): an
   RCV1-like sparse text corpus and the OBPM paper's artificial data (train
   with 10% label noise, clean test).
2. Write them as svmlight text, the format users bring.
3. Convert each file into a zarr store *in parallel* on a Dask cluster (a
   LocalCluster on 127.0.0.1 unless a scheduler is given): line-aligned byte
   ranges are parsed as tasks and written in order.
4. Check every store against scikit-learn's ``load_svmlight_file`` (exact
   equality), read it back block by block, and report a table.
5. Train OBPM learner-parallel on the same cluster over the RCV1-like store
   (one learner group per worker) and check the weights against an
   in-process run, bit for bit.
6. Train the perceptron, ALMA and OBPM on the artificial data (one run of the
   OBPM paper's Table 1) and report their test errors.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data import open_dataset, synthetic
from ..data._svmlight import write_svmlight
from ..data.readers import convert
from ..distributed import executor_for
from ..estimators import ALMA, OBPM, Perceptron


def _check_against_sklearn(path: Path, ds: Any) -> bool:
    from sklearn.datasets import load_svmlight_file

    Xs, ys = load_svmlight_file(str(path), dtype=ds.dtype, n_features=ds.n_features)
    X, y = ds.to_scipy()
    return (
        np.array_equal(X.indptr, Xs.indptr)
        and np.array_equal(X.indices, Xs.indices)
        and np.array_equal(X.data, Xs.data)
        and np.array_equal(y, ys)
    )


def run(
    *,
    out: str | os.PathLike[str] = "demo-output",
    n_workers: int | None = None,
    n_samples: int = 50_000,
    scheduler: Any = "local",
    seed: int = 0,
) -> dict[str, Any]:
    """Run the job; returns a JSON-ready dict with one row per data set and ``ok``.

    ``scheduler`` as everywhere (:func:`distlearn.distributed.executor_for`; ``"local"``: a
    LocalCluster of ``n_workers``).  The demo shows Dask: ``None`` (this process) is refused.
    """
    if scheduler is None or scheduler == "in-process":
        raise ValueError("the demo runs on a Dask cluster: scheduler='local', an address or a scheduler file")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()

    files: list[tuple[str, Path, float]] = []
    t0 = time.perf_counter()
    p = out / "rcv1-like.svm"
    write_svmlight(p, synthetic.iter_rcv1_like(n_samples, random_state=seed), overwrite=True)
    files.append(("rcv1-like", p, time.perf_counter() - t0))
    t0 = time.perf_counter()
    art = synthetic.make_obpm_artificial(1000, 1000, label_noise=0.1, random_state=seed)
    for name, X, y in (("obpm-train", art.X_train, art.y_train), ("obpm-test", art.X_test, art.y_test)):
        p = out / f"{name}.svm"
        write_svmlight(p, [(X, y)], overwrite=True)
        files.append((name, p, (time.perf_counter() - t0) / 2))

    rows = []
    with executor_for(scheduler, n_workers=n_workers) as ex:
        n_w = ex.n_workers
        for name, path, gen_s in files:
            size = path.stat().st_size
            part = max(256 << 10, min(64 << 20, size // (4 * n_w) + 1))
            t0 = time.perf_counter()
            ds = convert(path, out / f"{name}.zarr", executor=ex, part_bytes=part, overwrite=True,
                         dtype="float32" if name == "rcv1-like" else "float64")
            secs = time.perf_counter() - t0
            ds = open_dataset(ds.path, validate="full")
            same = _check_against_sklearn(path, ds)
            n_read = sum(b.X.shape[0] for b in ds.iter_blocks())
            rows.append({
                "dataset": name,
                "n_samples": ds.n_samples,
                "n_features": ds.n_features,
                "nnz": ds.nnz,
                "classes": ds.info()["classes"],
                "n_blocks": ds.n_blocks,
                "text_mib": size / 2**20,
                "generate_s": gen_s,
                "convert_s": secs,
                "mib_per_s": size / 2**20 / secs,
                "rows_per_s": ds.n_samples / secs,
                "matches_sklearn": bool(same and n_read == ds.n_samples),
                "store": str(ds.path),
            })
        cluster = {"workers": n_w, "scheduler": str(ex.scheduler)}
        distributed = _obpm_on_cluster(out / "rcv1-like.zarr", ex.scheduler, seed)
    training = _train_obpm(out, seed)
    return {
        "rows": rows,
        "cluster": cluster,
        "training": training,
        "distributed": distributed,
        "seconds": time.perf_counter() - t_all,
        "ok": all(r["matches_sklearn"] for r in rows) and distributed["bit_identical"],
    }


def _obpm_on_cluster(store: Path, scheduler: Any, seed: int) -> dict[str, Any]:
    """Learner-parallel OBPM (N=100, tau=0.3, 2 epochs) on the cluster, one learner group per
    worker, each a chain of one-block tasks; then the same in this process: same bits?"""
    import numpy as np

    kw = dict(n_estimators=100, tau=0.3, epochs=2, conversion="last", random_state=seed, checkpoint_every=1)
    t0 = time.perf_counter()
    est = OBPM(scheduler=scheduler, **kw).fit(store)
    dask_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = OBPM(scheduler="in-process", **kw).fit(store)
    local_s = time.perf_counter() - t0
    return {"store": str(store), "groups": len(est.job_["groups"]), "dask_s": dask_s, "in_process_s": local_s,
            "epoch_online_errors": [int(v) for v in est.epoch_online_errors_], "n_rows": int(est.t_),
            "bit_identical": bool(np.array_equal(est.members_, ref.members_))}


def _train_obpm(out: Path, seed: int) -> list[dict[str, Any]]:
    """OBPM paper, Table 1 (noise 0.1), one run: learners trained on the obpm-train
    store (one epoch, streamed block by block), scored on obpm-test."""
    train, test = out / "obpm-train.zarr", out / "obpm-test.zarr"
    learners = [
        ("Perceptron", "paper 12.96 +- 1.0", Perceptron(epochs=1, fit_intercept=False, random_state=seed)),
        ("ALMA (alpha=0.2, B=1.25, C=0.71)", "paper 0.76 +- 0.13",
         ALMA(alpha=0.2, B=1.25, C=0.71, epochs=1, fit_intercept=False, random_state=seed)),
        ("OBPM (tau=0.15, N=100)", "paper 0.96 +- 0.13",
         OBPM(n_estimators=100, tau=0.15, epochs=1, conversion="last", fit_intercept=False, random_state=seed)),
    ]
    rows = []
    for name, paper, est in learners:
        t0 = time.perf_counter()
        est.fit(train)
        secs = time.perf_counter() - t0
        ds = open_dataset(test)
        X, y = ds.to_numpy()
        rows.append({"learner": name, "test_error_pct": 100.0 * (1.0 - est.score(X, y)), "paper": paper,
                     "online_errors": int(est.online_errors_), "fit_s": secs})
    return rows


def _format_distributed(d: dict[str, Any] | None) -> list[str]:
    if not d:
        return []
    errs = ", ".join(f"{100.0 * e / max(1, d['n_rows']):.2f} %" for e in d["epoch_online_errors"])
    return [
        f"OBPM (N=100, tau=0.3, 2 epochs) on rcv1-like, learner-parallel on the cluster ({d['groups']} learner groups):",
        f"  progressive error per epoch {errs}; {d['dask_s']:.2f} s on Dask, {d['in_process_s']:.2f} s in process; "
        f"weights bit-identical: {'yes' if d['bit_identical'] else 'NO'}",
        "",
    ]


def format_table(result: dict[str, Any]) -> str:
    """The human-readable result table."""
    head = ("data set", "rows", "features", "nnz", "classes", "blocks", "text MiB", "convert s", "MiB/s", "rows/s", "= sklearn")
    lines = []
    for r in result["rows"]:
        cls = r["classes"]
        lines.append((
            r["dataset"], f"{r['n_samples']:,}", f"{r['n_features']:,}", f"{r['nnz']:,}",
            "-" if cls is None else ",".join(map(str, cls)) if len(cls) <= 4 else f"{len(cls)}",
            str(r["n_blocks"]), f"{r['text_mib']:.1f}", f"{r['convert_s']:.2f}", f"{r['mib_per_s']:.1f}",
            f"{r['rows_per_s']:,.0f}", "yes" if r["matches_sklearn"] else "NO",
        ))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    c = result["cluster"]
    out = [
        f"distlearn demo: svmlight -> zarr on a Dask cluster ({c['workers']} workers at {c['scheduler']})",
        "",
        fmt.format(*head),
        fmt.format(*("-" * w for w in widths)),
        *(fmt.format(*l) for l in lines),
        "",
        f"stores: {', '.join(r['store'] for r in result['rows'])}",
        "",
        *_format_distributed(result.get("distributed")),
        "training on obpm-train (10% label noise, 1 epoch), test error on obpm-test (one run of the paper's Table 1):",
        *(f"  {t['learner']:<33} {t['test_error_pct']:6.2f} %   ({t['paper']}, mean of 30 runs)  "
          f"online errors {t['online_errors']:4d}  fit {t['fit_s']:.2f} s" for t in result.get("training", [])),
        "",
        f"total {result['seconds']:.1f} s; inspect with `distlearn info STORE`. "
        + ("All stores equal scikit-learn's parse." if result["ok"] else "MISMATCH against scikit-learn!"),
    ]
    return "\n".join(out)
