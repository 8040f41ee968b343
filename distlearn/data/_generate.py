"""``distlearn generate``: the synthetic generators written to a store or an svmlight file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._outputs import check_output, claim_dir
from .._urls import is_url, split
from . import synthetic
from ._svmlight import write_svmlight

_TEXT = (".svm", ".svmlight", ".libsvm", ".txt")


def _is_text(path: str | os.PathLike[str]) -> bool:
    return str(path).lower().endswith(_TEXT)


def _test_path(path: str | os.PathLike[str]) -> Path | str:
    if is_url(os.fspath(path)):  # s3://b/x.zarr -> s3://b/x-test.zarr (a Path would fold the "//")
        head, name = split(os.fspath(path))
        stem, dot, suffix = name.rpartition(".")
        return f"{head}/{stem}-test.{suffix}" if dot and stem else f"{head}/{name}-test"
    p = Path(path)
    return p.with_name(f"{p.stem}-test{p.suffix}")


def run(
    kind: str,
    output: str | os.PathLike[str],
    *,
    n_samples: int | None = None,
    n_features: int | None = None,
    label_noise: float | None = None,
    seed: int = 0,
    block_rows: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Generate ``kind`` ("rcv1" or "obpm") into ``output``; returns what was written.

    Every output is checked before anything is generated (:func:`distlearn._outputs.check_output`):
    ``overwrite`` replaces only a previous store / svmlight file / generated directory.
    """
    if kind in ("rcv1", "obpm"):
        paths = [output] + ([_test_path(output)] if kind == "obpm" else [])
        for p in paths:
            check_output(p, "svmlight" if _is_text(output) else "store", overwrite=overwrite)
    elif kind in ("rcv1-files", "splice-files"):
        check_output(output, "corpus", overwrite=overwrite)
    outputs: list[dict[str, Any]] = []
    if kind == "rcv1":
        kw: dict[str, Any] = {"random_state": seed}
        if n_features is not None:
            kw["n_features"] = n_features
        if label_noise is not None:
            kw["label_noise"] = label_noise
        n = n_samples or 100_000
        if _is_text(output):
            info = write_svmlight(output, synthetic.iter_rcv1_like(n, **kw), overwrite=overwrite)
            outputs.append({"path": str(output), **info})
        else:
            ds = synthetic.make_rcv1_like(output, n, block_rows=block_rows, overwrite=overwrite, progress=progress, **kw)
            outputs.append(_ds_row(ds))
    elif kind == "obpm":
        kw = {"random_state": seed, "n_train": n_samples or 1000, "n_test": n_samples or 1000}
        if n_features is not None:
            kw["n_features"] = n_features
        if label_noise is not None:
            kw["label_noise"] = label_noise
        test = _test_path(output)
        if _is_text(output):
            data = synthetic.make_obpm_artificial(**kw)
            for path, X, y in ((output, data.X_train, data.y_train), (test, data.X_test, data.y_test)):
                info = write_svmlight(path, [(X, y)], overwrite=overwrite)
                outputs.append({"path": str(path), **info})
        else:
            for ds in synthetic.write_obpm_artificial(output, test, block_rows=block_rows, overwrite=overwrite, **kw):
                outputs.append(_ds_row(ds))
    elif kind in ("rcv1-files", "splice-files"):
        if label_noise is not None and kind == "splice-files":
            raise ValueError("--label-noise does not apply to splice-files")
        claim_dir(output, "corpus")
        if kind == "rcv1-files":
            from ._rcv1 import write_rcv1_corpus

            kw = {"random_state": seed}
            if n_features is not None:
                kw["n_terms"] = n_features
            if label_noise is not None:
                kw["label_noise"] = label_noise
            info = write_rcv1_corpus(output, n_samples or 804_414, **kw)
            for f in info["tokens"] + [info["qrels"], info["hierarchy"]]:
                outputs.append({"path": f, "bytes": os.path.getsize(f)})
            return {"kind": kind, "seed": seed, "outputs": outputs, "n_docs": info["n_docs"],
                    "label_share": info["label_share"]}
        from ._dna import write_splice_corpus

        Path(output).mkdir(parents=True, exist_ok=True)
        n = n_samples or 100_000
        for name, m, s in (("train.tsv", n, seed), ("test.tsv", max(1, n // 10), seed + 1)):
            f = os.path.join(output, name)
            write_splice_corpus(f, m, random_state=s)
            outputs.append({"path": f, "bytes": os.path.getsize(f), "n_samples": m})
    else:
        raise ValueError(f"unknown generator {kind!r}; choose 'rcv1', 'obpm', 'rcv1-files' or 'splice-files'")
    return {"kind": kind, "seed": seed, "outputs": outputs}


def _ds_row(ds: Any) -> dict[str, Any]:
    return {"path": str(ds.path), "n_samples": ds.n_samples, "n_features": ds.n_features, "nnz": ds.nnz}
