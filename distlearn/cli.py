"""The ``distlearn`` command: thin -- parse, call the library, print (tables, or ``--json``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from . import __version__

_DESCRIPTION = """\
distlearn turns fast online learners into accurate batch classifiers and runs them on Dask.

Data lives in zarr stores (dense or CSR, in row blocks) that every worker can read in parallel.
Start with `distlearn demo`, or convert your own data:

  distlearn convert data.svm data.zarr          # svmlight/LIBSVM (1-based; --zero-based)
  distlearn convert train-images-idx3-ubyte.gz train.zarr   # MNIST/Fashion-MNIST IDX
  distlearn convert table.csv table.zarr --label-column label
  distlearn info data.zarr --json
  distlearn generate rcv1 corpus.zarr --n-samples 800000
"""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {v}")
    return v


def _label_column(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="distlearn", description=_DESCRIPTION, formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=f"distlearn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    # -- convert
    c = sub.add_parser(
        "convert",
        help="convert svmlight / IDX / CSV into a zarr store",
        formatter_class=_Formatter,
        description=(
            "Convert a data file into a distlearn zarr store, chunk by chunk in constant memory.\n"
            "The store appears only when complete; bad input stops with FILE:LINE and the token,\n"
            "leaving nothing behind. Large uncompressed svmlight files parse in parallel with\n"
            "--jobs N (a LocalCluster) or --scheduler ADDRESS."
        ),
        epilog=(
            "examples:\n"
            "  distlearn convert letter.svm letter.zarr\n"
            "  distlearn convert rcv1.svm rcv1.zarr --jobs 2 --block-rows 20000\n"
            "  distlearn convert train-images-idx3-ubyte.gz train.zarr   # labels file found by name\n"
            "  distlearn convert iris.csv iris.zarr --label-column species --dtype float64"
        ),
    )
    c.add_argument("input", help="input file (gzip/bz2/xz detected from content)")
    c.add_argument("output", help="store to create, e.g. data.zarr")
    c.add_argument("--format", choices=["svmlight", "idx", "csv"], help="input format (default: detected)")
    c.add_argument("--block-rows", type=_positive_int, metavar="N", help="rows per stored block (default: ~16 MiB dense, 16384 CSR)")
    c.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="value type")
    c.add_argument("--n-features", type=_positive_int, metavar="D", help="column count; rows with more features are errors")
    lay = c.add_mutually_exclusive_group()
    lay.add_argument("--dense", dest="layout", action="store_const", const="dense", help="store X dense (default for IDX, CSV)")
    lay.add_argument("--sparse", dest="layout", action="store_const", const="csr", help="store X as CSR (default for svmlight)")
    c.add_argument("--zero-based", action="store_true", help="svmlight: feature indices count from 0")
    c.add_argument("--labels", metavar="FILE", help="IDX: the labels file (default: inferred from the images file name)")
    c.add_argument("--label-column", type=_label_column, metavar="NAME|INDEX", help="CSV: label column (default: 0)")
    c.add_argument("--delimiter", help="CSV: field separator (default: ',')")
    c.add_argument("--header", choices=["auto", "yes", "no"], help="CSV: first line is a header (default: auto)")
    c.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists (only once the new store is whole)")
    par = c.add_mutually_exclusive_group()
    par.add_argument("--jobs", type=_positive_int, metavar="N", help="parse with a LocalCluster of N worker processes")
    par.add_argument("--scheduler", metavar="ADDRESS", help="parse on an existing Dask scheduler (address or scheduler file)")
    c.add_argument("--json", action="store_true", help="print the store's info as JSON")
    c.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar (default: when stderr is a terminal)")
    c.set_defaults(func=_cmd_convert)

    # -- info
    i = sub.add_parser(
        "info",
        help="describe a store: shape, nnz, density, classes, blocks",
        formatter_class=_Formatter,
        description="Print what a store holds. Exit status 2 if it is not a complete, valid store.",
    )
    i.add_argument("store", help="a distlearn zarr store")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--validate", action="store_true", help="read every block and check indices, pointers and values")
    i.set_defaults(func=_cmd_info)

    # -- generate
    g = sub.add_parser(
        "generate",
        help="write a synthetic data set (the papers' generators, an RCV1-like corpus)",
        formatter_class=_Formatter,
        description=(
            "Generate a data set straight into a zarr store (or an svmlight file when OUTPUT ends in\n"
            ".svm/.svmlight/.libsvm/.txt), in constant memory, reproducible from --seed whatever\n"
            "the block size.\n\n"
            "  rcv1  sparse text-like corpus: Zipf tokens, lognormal lengths (~75 distinct), log2(1+tf),\n"
            "        unit rows, labels from a sparse noisy linear teacher\n"
            "  obpm  the OBPM paper's artificial data (sec. 4.1): margin >= 0.05 under u in {-1,0,1}^100;\n"
            "        writes OUTPUT (train, noisy labels) and OUTPUT with -test before the suffix"
        ),
    )
    g.add_argument("kind", choices=["rcv1", "obpm"], help="which generator")
    g.add_argument("output", help="store (*.zarr) or svmlight file (*.svm)")
    g.add_argument("--n-samples", type=_positive_int, metavar="N", help="rows (rcv1: 100000; obpm: 1000)")
    g.add_argument("--n-features", type=_positive_int, metavar="D", help="columns (rcv1: 47236; obpm: 100)")
    g.add_argument("--label-noise", type=_fraction, metavar="E", help="label flip probability (rcv1: 0.05; obpm: 0)")
    g.add_argument("--seed", type=int, default=0, help="random seed")
    g.add_argument("--block-rows", type=_positive_int, metavar="N", help="rows per stored block")
    g.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar")
    g.set_defaults(func=_cmd_generate)

    # -- demo
    d = sub.add_parser(
        "demo",
        help="the quickstart job: generate, convert in parallel on a LocalCluster, report",
        formatter_class=_Formatter,
        description=(
            "Run the main job on embedded data: generate an RCV1-like corpus and the OBPM artificial data,\n"
            "write them as svmlight text, convert them to zarr stores in parallel on a LocalCluster\n"
            "(127.0.0.1), check them against scikit-learn's loader, and print a table."
        ),
    )
    d.add_argument("--out", default="demo-output", help="working directory for the demo's files")
    d.add_argument("--workers", type=_positive_int, help="LocalCluster worker processes (default: cores)")
    d.add_argument("--n-samples", type=_positive_int, default=50_000, help="rows of the RCV1-like corpus")
    d.add_argument("--scheduler", metavar="ADDRESS", help="use this Dask scheduler instead of a LocalCluster")
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.set_defaults(func=_cmd_demo)
    return p


def _progress(flag: bool | None) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _cmd_convert(a: argparse.Namespace) -> int:
    from .data.readers import convert
    from .distributed import get_client

    opts: dict[str, Any] = {}
    if a.zero_based:
        opts["zero_based"] = True
    for name in ("labels", "label_column", "delimiter"):
        if getattr(a, name) is not None:
            opts[name] = getattr(a, name)
    if a.header is not None:
        opts["header"] = {"auto": "auto", "yes": True, "no": False}[a.header]
    t0 = time.perf_counter()
    kwargs = dict(
        format=a.format,
        layout=a.layout,
        dtype=a.dtype,
        block_rows=a.block_rows,
        n_features=a.n_features,
        overwrite=a.overwrite,
        progress=_progress(a.progress),
        **opts,
    )
    if a.jobs or a.scheduler:
        with get_client(a.scheduler, n_workers=a.jobs) as client:
            ds = convert(a.input, a.output, client=client, **kwargs)
    else:
        ds = convert(a.input, a.output, **kwargs)
    seconds = time.perf_counter() - t0
    info = ds.info()
    info["convert_seconds"] = round(seconds, 3)
    info["input_bytes"] = os.path.getsize(a.input)
    if a.json:
        print(json.dumps(info, indent=2))
    else:
        mb = info["input_bytes"] / 2**20
        print(f"wrote {a.output}: {ds.n_samples} x {ds.n_features} in {seconds:.2f} s "
              f"({mb / max(seconds, 1e-9):.1f} MiB/s, {ds.n_samples / max(seconds, 1e-9):,.0f} rows/s)")
        print(format_info(info))
    return 0


def format_info(info: dict[str, Any]) -> str:
    """The human table of ``distlearn info``."""
    rows = [
        ("store", info["path"]),
        ("shape", f"{info['n_samples']} x {info['n_features']}  ({info['layout']}, {info['dtype']})"),
        ("nnz", f"{info['nnz']:,}  (density {100 * info['density']:.3g}%)"),
        ("blocks", f"{info['n_blocks']} of up to {info['block_rows']} rows"),
    ]
    if info.get("classes") is not None:
        pairs = [f"{c} ({n})" for c, n in zip(info["classes"], info["class_counts"])]
        shown = ", ".join(pairs[:12]) + (f", ... {len(pairs) - 12} more" if len(pairs) > 12 else "")
        rows.append(("classes", f"{info['n_classes']}: {shown}"))
    else:
        rows.append(("labels", f"continuous ({info['label_kind']})"))
    rows.append(("on disk", f"{info['bytes_stored'] / 2**20:.2f} MiB"))
    src = info.get("source") or "-"
    fmt = (info.get("params") or {}).get("format") or (info.get("params") or {}).get("generator")
    rows.append(("source", f"{src}" + (f"  ({fmt})" if fmt else "")))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def _cmd_info(a: argparse.Namespace) -> int:
    from .data import open_dataset

    ds = open_dataset(a.store, validate="full" if a.validate else True)
    info = ds.info()
    if a.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_info(info))
        if a.validate:
            print("validated: every block read and checked")
    return 0


def _cmd_generate(a: argparse.Namespace) -> int:
    from .data import _generate as generate

    t0 = time.perf_counter()
    result = generate.run(
        a.kind,
        a.output,
        n_samples=a.n_samples,
        n_features=a.n_features,
        label_noise=a.label_noise,
        seed=a.seed,
        block_rows=a.block_rows,
        overwrite=a.overwrite,
        progress=_progress(a.progress),
    )
    result["seconds"] = round(time.perf_counter() - t0, 3)
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        for out in result["outputs"]:
            print(f"wrote {out['path']}: {out['n_samples']} x {out['n_features']}, nnz {out['nnz']:,}")
        print(f"in {result['seconds']:.2f} s")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    from .experiments import quickstart

    result = quickstart.run(out=a.out, n_workers=a.workers, n_samples=a.n_samples, scheduler=a.scheduler)
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(quickstart.format_table(result))
    return 0 if result["ok"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``distlearn`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .data import StoreError
    from .data._errors import InputFormatError

    try:
        return int(args.func(args))
    except (InputFormatError, StoreError, FileExistsError, FileNotFoundError, ValueError) as e:
        print(f"distlearn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"distlearn {args.command}: interrupted; nothing was left half-written", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
