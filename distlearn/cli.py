"""The ``distlearn`` command: thin -- parse, call the library, print (tables, or ``--json``).

Each subcommand NAME is a parser builder ``_parser_NAME(sub)`` beside the function that runs it,
``_cmd_NAME(args)``; :func:`build_parser` calls the builders.  The options several subcommands
share (``--json``, ``--progress``, ``--overwrite``, where the work runs and ``--tls-*``) are added
by the helpers below, defined once; each command gives its own help text.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._outputs import check_output, claim_dir
from ._validation import choose, did_you_mean
from ._version import __version__
from .experiments.named import OPTIONS, PAPERS, check_options, describe_experiments, experiment_dir
from .training import MODELS

_DESCRIPTION = """\
distlearn turns fast online learners into accurate batch classifiers and runs them on Dask.

Data lives in zarr stores (dense or CSR, in row blocks) that every worker can read in parallel.
Start with `distlearn demo`, or convert your own data:

  distlearn convert data.svm data.zarr          # svmlight/LIBSVM (1-based; --zero-based)
  distlearn convert train-images-idx3-ubyte.gz train.zarr   # MNIST/Fashion-MNIST IDX
  distlearn convert table.csv table.zarr --label-column label
  distlearn info data.zarr --json
  distlearn generate rcv1 corpus.zarr --n-samples 800000
  distlearn train corpus.zarr --model obpm --param n_estimators=100 --param tau=0.3 --progress
  distlearn train corpus.zarr --model obpm --scheduler tcp://10.0.0.1:8786 --checkpoint ck.zarr --resume
  distlearn export model.npz model.onnx         # score with onnxruntime, without distlearn

A store or --checkpoint can be an fsspec URL (s3://bucket/data.zarr, gs://...; pip install 'distlearn[s3]'),
with credentials from the environment (AWS_*, ~/.aws): every Dask worker opens the URL itself.
"""


_EPILOG = """\
A model, saved and used:
  distlearn train data.zarr --model perceptron --save m.npz      # an existing m.npz needs --overwrite
  distlearn predict m.npz new.svm --out labels.npy
  distlearn evaluate m.npz test.zarr

`distlearn COMMAND --help` shows a command's options, their defaults, and examples.
"""


class _Parser(argparse.ArgumentParser):
    """The parser of the command and of each subcommand: a usage error is one line (the full usage
    is in ``--help``), and a value of an option with choices is taken whatever its case, with the
    closest choices offered for a typo (``--model OBPM`` is ``obpm``; ``percepton``: did you mean
    'perceptron'?)."""

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        value = super()._get_value(action, arg_string)
        names = [c for c in action.choices or () if isinstance(c, str)]
        if isinstance(value, str) and names and value not in names:
            try:
                return choose(value, names, "")
            except ValueError:
                pass  # _check_value says so, with the closest names
        return value

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            names = [str(c) for c in action.choices]
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{did_you_mean(value, names)} "
                                                 f"(choose from {', '.join(names)})")

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Raw descriptions; a default is shown only where it says something (not None, not a flag's
    False/True, and not when the help text already names its default)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        """argparse's wrapping, without breaking names at their hyphens (obpm-table1, --n-docs)."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help = action.help or ""
        if ("default" in help or any(action.default is v for v in (None, False, argparse.SUPPRESS))
                or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))):
            return help
        return super()._get_help_string(action)


def _checked(convert: Any, ok: Any, bounds: str) -> Any:
    """An argparse type: ``convert`` the text (int or float), refused in one line unless ``ok``."""
    def parse(text: str) -> Any:
        try:
            v = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if convert is int else 'a number'}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {v}")
        return v
    return parse


_positive_int = _checked(int, lambda v: v >= 1, ">= 1")
_fraction = _checked(float, lambda v: 0.0 <= v <= 1.0, "in [0, 1]")
#: A seed: the counters hash it as a uint64 (rng.hash64); a larger one was an OverflowError traceback.
_seed = _checked(int, lambda v: 0 <= v < 2**64, "in [0, 2**64)")
#: OBPM's tau, checked before an experiment records its run (a bad one poisoned the directory).
_tau = _checked(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")


def _label_column(text: str) -> int | str | bool:
    """``--label-column``: an index, a name, or ``none`` (predict: a table without a label column; the API's
    ``label_column=False``).  A column named none is picked by its index."""
    if text.strip().lower() == "none":
        return False
    try:
        return int(text)
    except ValueError:
        return text


def _command(sub: Any, name: str, func: Any, **kw: Any) -> argparse.ArgumentParser:
    """Add subcommand NAME (its parser, with the house formatter) that runs FUNC."""
    p = sub.add_parser(name, formatter_class=_Formatter, **kw)
    p.set_defaults(func=func)
    return p


# The options several subcommands share, each defined here once (the help text is the command's).
_TLS_FLAGS = (("ca", "TLS: CA certificate (PEM)"), ("cert", "TLS: this client's certificate (PEM)"),
              ("key", "TLS: this client's private key (PEM)"),
              ("config", "TLS: a YAML/JSON file with dask's distributed.comm.tls keys"))


def _json_flag(p: argparse.ArgumentParser, help: str = "print the result as JSON") -> None:
    p.add_argument("--json", action="store_true", help=help)


def _progress_flag(p: argparse.ArgumentParser, help: str = "progress bar (default: when stderr is a terminal)") -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=help)


def _overwrite_flag(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--overwrite", action="store_true", help=help)


def _scheduler_flag(p: Any, help: str) -> None:
    p.add_argument("--scheduler", metavar="ADDRESS", help=help)


def _workers_flag(p: Any, help: str, flag: str = "--workers", metavar: str | None = "N") -> None:
    p.add_argument(flag, type=_positive_int, metavar=metavar, help=help)


def _cluster_options(p: argparse.ArgumentParser, *, scheduler: str, workers: str, workers_flag: str = "--workers",
                     scheduler_first: bool = False, in_process: str | None = None, tls: bool = False) -> None:
    """Where the work runs, one of ``--scheduler ADDRESS | --workers N`` (``--jobs N`` for convert)
    ``[| --in-process]``, then the ``--tls-*`` files; :func:`_where` and :func:`_security` read them."""
    where = p.add_mutually_exclusive_group()
    if scheduler_first:
        _scheduler_flag(where, scheduler)
    _workers_flag(where, workers, workers_flag)
    if not scheduler_first:
        _scheduler_flag(where, scheduler)
    if in_process:
        where.add_argument("--in-process", action="store_true", help=in_process)
    for name, text in _TLS_FLAGS if tls else ():
        p.add_argument(f"--tls-{name}", metavar="FILE", help=text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="distlearn", description=_DESCRIPTION, formatter_class=_Formatter, epilog=_EPILOG)
    p.add_argument("--version", action="version", version=f"distlearn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_parser_convert, _parser_info, _parser_generate, _parser_train, _parser_predict,
                _parser_evaluate, _parser_export, _parser_experiment, _parser_data, _parser_demo, _parser_warmup):
        add(sub)
    return p


def _progress(flag: bool | None) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _where(scheduler: str | None, workers: int | None) -> str | None:
    """``--scheduler``/``--workers N`` as ``scheduler=``: the address or file, ``"local:N"``, or None
    (this process).  The executor (:func:`distlearn.distributed.executor_for`) does the rest."""
    return scheduler or (f"local:{workers}" if workers else None)


def _security(a: argparse.Namespace) -> Any:
    """The ``--tls-*`` flags as a ``distributed.Security`` (None without them)."""
    if not any(getattr(a, f"tls_{name}", None) for name, _ in _TLS_FLAGS):
        return None
    from .distributed import make_security

    return make_security(tls_ca=a.tls_ca, tls_cert=a.tls_cert, tls_key=a.tls_key, config=a.tls_config)


def _parser_convert(sub: Any) -> None:
    c = _command(
        sub, "convert", _cmd_convert,
        help="convert svmlight / IDX / CSV / Parquet / DNA / RCV1-v2 files into a zarr store",
        description=(
            "Convert a data file into a distlearn zarr store, chunk by chunk in constant memory.\n"
            "The store appears only when complete; bad input stops with FILE:LINE and the token,\n"
            "leaving nothing behind. Large uncompressed svmlight files, RCV1-v2 token files and\n"
            "Parquet row groups parse in parallel with --jobs N (a LocalCluster) or --scheduler ADDRESS.\n\n"
            "CSV and Parquet: the column named label, target, class or y is the label unless\n"
            "--label-column says otherwise. Labels are numbers or class names (iris's setosa,\n"
            "versicolor, virginica): a store of names lists them in `info`, is viewed by name\n"
            "(iris.zarr#setosa-vs-virginica) and trains models whose classes are the names. Labels\n"
            "that are not classes (non-integer numbers, or more than half the rows distinct) are refused.\n\n"
            "RCV1-v2 (the LYRL2004 files): give the token (or vector) files, then the store, and\n"
            "--qrels. The store keeps every topic and a top-level label (CCAT/ECAT/GCAT/MCAT/OTHER,\n"
            "MULTI for multi-category documents); train on a binary problem as a view of it:\n"
            "STORE#CCAT-vs-GCAT (two top-level labels) or STORE#C15 (one topic against the rest)."
        ),
        epilog=(
            "examples:\n"
            "  distlearn convert letter.svm letter.zarr\n"
            "  distlearn convert rcv1.svm rcv1.zarr --jobs 2 --block-rows 20000\n"
            "  distlearn convert train-images-idx3-ubyte.gz train.zarr   # labels file found by name\n"
            "  distlearn convert iris.csv iris.zarr --label-column species --dtype float64   # names as labels\n"
            "  distlearn convert events/ events.zarr --jobs 2   # Parquet parts (Dask's to_parquet), row groups as tasks\n"
            "  distlearn convert lyrl2004_tokens_*.dat.gz rcv1.zarr --qrels rcv1-v2.topics.qrels.gz --jobs 2\n"
            "  distlearn convert clicks.svm clicks.zarr --hash-bits 22   # open-ended indices into 2^22 columns\n"
            "  distlearn info rcv1.zarr#CCAT-vs-GCAT"
        ),
    )
    c.add_argument("input", nargs="+", help="input file(s) (gzip/bz2/xz detected from content); several only for rcv1")
    c.add_argument("output", help="store to create, e.g. data.zarr or s3://bucket/data.zarr")
    c.add_argument("--format", choices=["svmlight", "idx", "csv", "dna", "rcv1", "parquet"],
                   help="input format (default: detected; dna: FASTA or label<TAB>sequence lines; "
                   "rcv1: LYRL2004 token or vector files)")
    c.add_argument("--block-rows", type=_positive_int, metavar="N", help="rows per stored block (default: ~16 MiB dense, 16384 CSR)")
    c.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="value type")
    c.add_argument("--n-features", type=_positive_int, metavar="D", help="column count; rows with more features are errors")
    lay = c.add_mutually_exclusive_group()
    lay.add_argument("--dense", dest="layout", action="store_const", const="dense", help="store X dense (default for IDX, CSV)")
    lay.add_argument("--sparse", dest="layout", action="store_const", const="csr", help="store X as CSR (default for svmlight)")
    c.add_argument("--zero-based", action="store_true", help="svmlight: feature indices count from 0")
    c.add_argument("--labels", metavar="FILE", help="IDX: the labels file (default: inferred from the images file "
                   "name); DNA FASTA: one label per record (default: the header's last token)")
    c.add_argument("--features", choices=["wd", "onehot", "spectrum"],
                   help="DNA: weighted-degree k-mers (default), positional one-hot, or k-mer counts")
    c.add_argument("--degree", type=_positive_int, metavar="D", help="DNA wd: longest k-mer (default 8)")
    c.add_argument("--k", type=_positive_int, metavar="K", help="DNA spectrum: k-mer length (default 3)")
    c.add_argument("--iupac", choices=["spread", "error"],
                   help="DNA: ambiguity codes (N, R, Y, ...) spread over their bases (default) or refused")
    c.add_argument("--label-column", type=_label_column, metavar="NAME|INDEX",
                   help="CSV, Parquet: the label column, numbers or class names (default: the column named "
                        "label, target, class or y, any case, else 0)")
    c.add_argument("--delimiter", help="CSV: field separator (default: ',')")
    c.add_argument("--header", choices=["auto", "yes", "no"], help="CSV: first line is a header (default: auto)")
    c.add_argument("--qrels", metavar="FILE", help="RCV1-v2: the topic file rcv1-v2.topics.qrels[.gz] (implies --format rcv1)")
    c.add_argument("--hierarchy", metavar="FILE", help="RCV1-v2: rcv1.topics.hier.orig, to map topics to top-level "
                   "categories (default: by the code's first letter C/E/G/M)")
    c.add_argument("--weighting", choices=["log", "tf", "binary", "tfidf"],
                   help="RCV1-v2 tokens: value of a count c: log2(1+c) (default), c, 1, or (1+ln c) ln(N/df)")
    c.add_argument("--normalize", action="store_true", default=None, help="RCV1-v2 tokens: unit-norm rows")
    c.add_argument("--min-df", type=_positive_int, metavar="N", help="RCV1-v2 tokens: keep terms in at least N documents")
    c.add_argument("--hash-bits", type=_positive_int, metavar="B",
                   help="svmlight indices / RCV1-v2 tokens: hash them into 2^B columns (MurmurHash3, as "
                        "Vowpal Wabbit's -b and scikit-learn's HashingVectorizer), no vocabulary")
    _overwrite_flag(c, "replace OUTPUT if it exists (only once the new store is whole)")
    _cluster_options(c, workers_flag="--jobs", workers="parse with a LocalCluster of N worker processes",
                     scheduler="parse on an existing Dask scheduler (address or scheduler file)")
    _json_flag(c, "print the store's info as JSON")
    _progress_flag(c)


def _cmd_convert(a: argparse.Namespace) -> int:
    from .data.readers import convert, input_bytes
    from .distributed import executor_for

    opts: dict[str, Any] = {}
    if a.zero_based:
        opts["zero_based"] = True
    for name in ("labels", "label_column", "delimiter", "features", "degree", "k", "iupac", "qrels", "hierarchy",
                 "weighting", "normalize", "min_df", "hash_bits"):
        if getattr(a, name) is not None:
            opts[name] = getattr(a, name)
    if a.label_column is False:
        raise ValueError("--label-column none: a store holds labels; name the table's label column (or leave "
                         "--label-column out: the column named label, target, class or y, else 0)")
    if a.header is not None:
        opts["header"] = {"auto": "auto", "yes": True, "no": False}[a.header]
    check_output(a.output, "store", overwrite=a.overwrite,  # before any work (and any cluster)
                 inputs=[*a.input, a.labels, a.qrels, a.hierarchy])
    # the format as convert decides it (--qrels: RCV1-v2); --hash-bits is convert's own to refuse
    _refuse_reader_flags(a.format or ("rcv1" if a.qrels is not None else None), a.input[:1],
                         {k: v for k, v in opts.items() if k != "hash_bits"})
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
    where = _where(a.scheduler, a.jobs)
    with executor_for(where) as ex:
        ds = convert(a.input, a.output, executor=None if where is None else ex, **kwargs)
    seconds = time.perf_counter() - t0
    info = ds.info()
    info["convert_seconds"] = round(seconds, 3)
    info["input_bytes"] = input_bytes(a.input)
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
    names = info.get("label_names") or {}
    if info.get("view"):
        v = info["view"]
        rows.append(("view", f"{v['target']}: +1 = {v['positive']}, -1 = {v['negative']} (of {v['of']:,} rows)"))
    if info.get("classes") is not None:
        pairs = [f"{names.get(str(c), c)} ({n})" for c, n in zip(info["classes"], info["class_counts"])]
        shown = ", ".join(pairs[:12]) + (f", ... {len(pairs) - 12} more" if len(pairs) > 12 else "")
        rows.append(("classes", f"{info['n_classes']}: {shown}"))
    else:
        rows.append(("labels", f"continuous ({info['label_kind']})"))
    if info.get("topics"):
        rows.append(("topics", f"{len(info['topics'])}: " + ", ".join(info["topics"][:12])
                     + (" ..." if len(info["topics"]) > 12 else "") + "  (open STORE#TOPIC or STORE#A-vs-B)"))
    rows.append(("on disk", f"{info['bytes_stored'] / 2**20:.2f} MiB"))
    src = info.get("source") or "-"
    fmt = (info.get("params") or {}).get("format") or (info.get("params") or {}).get("generator")
    rows.append(("source", f"{src}" + (f"  ({fmt})" if fmt else "")))
    return _table(rows)


def _table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns: a name, its value."""
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def _parser_info(sub: Any) -> None:
    i = _command(
        sub, "info", _cmd_info,
        help="describe a store: shape, nnz, density, classes, blocks",
        description="Print what a store holds. Exit status 2 if it is not a complete, valid store.",
        epilog="examples:\n  distlearn info data.zarr\n  distlearn info data.zarr --json --validate\n"
               "  distlearn info 'rcv1.zarr#CCAT-vs-GCAT'",
    )
    i.add_argument("store", help="a distlearn zarr store (a path or a URL such as s3://bucket/data.zarr)")
    _json_flag(i, "machine-readable output")
    i.add_argument("--target", metavar="A-vs-B|TOPIC", help="describe a binary view of the store (same as STORE#TARGET)")
    i.add_argument("--validate", action="store_true", help="read every block and check indices, pointers and values")


def _cmd_info(a: argparse.Namespace) -> int:
    from .data import open_dataset

    ds = open_dataset(a.store, validate="full" if a.validate else True, target=a.target)
    info = ds.info()
    if a.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_info(info))
        if a.validate:
            print("validated: every block read and checked")
    return 0


def _parser_generate(sub: Any) -> None:
    g = _command(
        sub, "generate", _cmd_generate,
        help="write a synthetic data set (the papers' generators, an RCV1-like corpus)",
        description=(
            "Generate a data set straight into a zarr store (or an svmlight file when OUTPUT ends in\n"
            ".svm/.svmlight/.libsvm/.txt), in constant memory, reproducible from --seed whatever\n"
            "the block size.\n\n"
            "  rcv1  sparse text-like corpus: Zipf tokens, lognormal lengths (~75 distinct), log2(1+tf),\n"
            "        unit rows, labels from a sparse noisy linear teacher\n"
            "  obpm  the OBPM paper's artificial data (sec. 4.1): margin >= 0.05 under u in {-1,0,1}^100;\n"
            "        writes OUTPUT (train, noisy labels) and OUTPUT with -test before the suffix\n"
            "  rcv1-files    an RCV1-v2-shaped corpus in the LYRL2004 file formats, into directory\n"
            "        OUTPUT: token files, topic qrels (real top-level shares, ~20% multi-category,\n"
            "        3% OTHER), hierarchy; --n-samples documents (default 804,414), --n-features terms\n"
            "  splice-files  C. elegans-sized acceptor splice sites (label<TAB>sequence, 141 bases,\n"
            "        planted signal) into directory OUTPUT: train.tsv (--n-samples, default 100,000)\n"
            "        and test.tsv (a tenth)"
        ),
        epilog=("examples:\n  distlearn generate rcv1 rcv1.zarr --n-samples 5000\n"
                "  distlearn generate obpm art.zarr --label-noise 0.1   # art.zarr and art-test.zarr\n"
                "  distlearn generate rcv1 rcv1.svm --n-samples 5000    # svmlight text, for convert\n"
                "  distlearn generate rcv1-files corpus --n-samples 2000"),
    )
    g.add_argument("kind", choices=["rcv1", "obpm", "rcv1-files", "splice-files"], help="which generator")
    g.add_argument("output", help="store (*.zarr), svmlight file (*.svm), or a directory (*-files)")
    g.add_argument("--n-samples", type=_positive_int, metavar="N", help="rows (rcv1: 100000; obpm: 1000)")
    g.add_argument("--n-features", type=_positive_int, metavar="D", help="columns (rcv1: 47236; obpm: 100)")
    g.add_argument("--label-noise", type=_fraction, metavar="E", help="label flip probability (rcv1: 0.05; obpm: 0)")
    g.add_argument("--seed", type=_seed, default=0, help="random seed")
    g.add_argument("--block-rows", type=_positive_int, metavar="N", help="rows per stored block")
    _overwrite_flag(g, "replace OUTPUT if it exists")
    _json_flag(g)
    _progress_flag(g, "progress bar")


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
            if "n_features" in out:
                print(f"wrote {out['path']}: {out['n_samples']} x {out['n_features']}, nnz {out['nnz']:,}")
            else:
                print(f"wrote {out['path']}: {out['bytes'] / 2**20:.1f} MiB")
        print(f"in {result['seconds']:.2f} s")
    return 0


def _param(text: str) -> tuple[str, Any]:
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise ValueError(f"--param {text!r}: expected NAME=VALUE")
    try:
        return name.strip(), json.loads(value)
    except ValueError:
        return name.strip(), value


def _zero_based_flag(p: Any) -> None:
    """``--zero-based`` for commands that read a data file whole or block by block (svmlight only)."""
    p.add_argument("--zero-based", action="store_true",
                   help="an svmlight data file's feature indices count from 0 (scikit-learn's dump_svmlight_file "
                        "writes them so by default); LIBSVM's files count from 1, the default")


def _flag(option: str) -> str:
    """The flag of a reader option (``zero_based`` -> ``--zero-based``): every one is its name so spelled."""
    return "--" + option.replace("_", "-")


def _refuse_reader_flags(fmt: str | None, inputs: Sequence[Any], opts: dict[str, Any]) -> None:
    """Refuse, naming the flags, reader options given for an input they do not apply to (its format, or a
    store).  The API refuses the same naming its parameters (``readers._reader_options``)."""
    from .data.readers import READER_OPTIONS, detect_format, is_data_file

    given = sorted(k for k, v in opts.items() if v is not None)
    if not given:
        return
    for path in inputs:
        if not is_data_file(path):
            if os.path.isdir(str(path).partition("#")[0]):  # a store; else the reading says what it is
                flags = ", ".join(_flag(k) for k in given)
                raise ValueError(f"{flags} read{'s' if len(given) == 1 else ''} a data file; {path} is a store "
                                 "(it holds its features and labels)")
            continue
        f = fmt or detect_format(path)
        bad = [k for k in given if k not in READER_OPTIONS[f]]
        if bad:
            raise ValueError(f"{path}: {', '.join(_flag(k) for k in bad)} do{'es' if len(bad) == 1 else ''} not apply "
                             f"to {f} input")


def _read_options(a: argparse.Namespace, *inputs: Any) -> dict[str, Any]:
    """The data-file reader options a command's flags give (None where a flag is absent), checked against
    the ``inputs`` they read (:func:`_refuse_reader_flags`); ``--label-column none`` is predict's only."""
    opts = {"zero_based": True if getattr(a, "zero_based", False) else None,
            "label_column": getattr(a, "label_column", None)}
    if opts["label_column"] is False and a.command != "predict":
        raise ValueError(f"--label-column none (a table without a label column) is for predict; {a.command} needs "
                         "the labels: name the label column, or leave --label-column out (the column named label, "
                         "target, class or y, else 0)")
    _refuse_reader_flags(getattr(a, "format", None), inputs, opts)
    return opts


def _parser_predict(sub: Any) -> None:
    pr = _command(
        sub, "predict", _cmd_predict,
        help="labels or scores of a saved model (train --save) for a store or a data file",
        description="Predict with a model file, block by block, for a store (or a view STORE#A-vs-B) or any\n"
                    "file distlearn convert reads (svmlight, IDX, CSV, Parquet). Writes .npy, .csv, .txt or a zarr array (.zarr), block by block.",
        epilog="examples:\n  distlearn predict m.npz test.zarr --out labels.npy\n"
               "  distlearn predict m.npz big.zarr --workers 2 --out labels.zarr\n"
            "  distlearn predict m.npz new.svm --decision --out scores.csv",
    )
    pr.add_argument("model", help="a model file written by distlearn train --save")
    pr.add_argument("input", help="a store, a view, or a data file")
    pr.add_argument("--out", metavar="FILE", help="write .npy, .csv, .txt or .zarr (default: print a summary)")
    _overwrite_flag(pr, "replace --out FILE only if it looks like earlier predictions of this model's width: a "
                        ".zarr array distlearn marked; a .npy in format 2.0 (np.save writes 1.0) of shape (n,) or "
                        "(n, C) scores for C > 2 classes; a .csv/.txt of 1 (or C) values a line, no header, every "
                        "line alike. A headerless text file of one number or name a line (or C numbers) cannot be "
                        "told from predictions and is replaced")
    pr.add_argument("--decision", action="store_true", help="decision scores instead of labels")
    pr.add_argument("--proba", action="store_true", help="class probabilities (refused: these models score, "
                    "they do not estimate probabilities)")
    pr.add_argument("--format", choices=["svmlight", "idx", "csv", "parquet"],
                    help="input format when not a store (DNA sequences: convert them first with the training "
                         "store's --features, so the feature map is the model's)")
    _zero_based_flag(pr)
    pr.add_argument("--label-column", type=_label_column, metavar="NAME|INDEX|none",
                    help="a CSV or Parquet input: its label column, left out of the features (default: the column "
                         "named label, target, class or y, else 0), or none: a table of features alone, every "
                         "column a feature (also taken without the flag when the table has exactly the model's "
                         "number of columns and none is named as a label)")
    _json_flag(pr)
    _cluster_options(pr, workers="predict the blocks of a store on a LocalCluster of N workers",
                     scheduler="predict the blocks of a store on this Dask scheduler (workers open the model "
                               "file and the store by path)")


def _cmd_predict(a: argparse.Namespace) -> int:
    from .training import predict

    if a.proba:
        raise ValueError("--proba: these models give scores (--decision), not calibrated probabilities")
    if a.out:
        widths = (1,)
        if a.overwrite and os.path.lexists(a.out):  # what is there must look like this model's predictions
            from ._urls import absolute
            from .model import load_model
            from .training import prediction_widths

            widths = prediction_widths(load_model(absolute(a.model)))
        check_output(a.out, "predictions", overwrite=a.overwrite, inputs=[a.model, a.input], widths=widths)
    read = _read_options(a, a.input)
    given = [_flag(k) for k, v in read.items() if v is not None]
    if given and _where(a.scheduler, a.workers) is not None:
        raise ValueError(f"{', '.join(given)} read{'s' if len(given) == 1 else ''} a data file; predicting on a "
                         "cluster (--workers/--scheduler) reads a store")
    res = predict(a.model, a.input, decision=a.decision, out=a.out, format=a.format, overwrite=a.overwrite,
                  scheduler=_where(a.scheduler, a.workers), read=read)
    values = res.pop("values", None)
    if res.get("ran_on") and not a.json:
        print(f"ran on {res['ran_on']}", file=sys.stderr)
    if a.json:
        if values is not None:
            res["values"] = values.tolist()
        print(json.dumps(res, indent=1, default=str))
    elif a.out:
        print(f"wrote {res['n']:,} {'scores' if a.decision else 'labels'} to {a.out}")
    else:
        # a label as --out writes it (1.0 is "1"); a score to 6 significant digits (--out keeps all 17)
        def num(v: Any) -> str:
            return (f"{v:.6g}" if a.decision else f"{v:.17g}") if isinstance(v, float) else str(v)

        shown = ", ".join("[" + ", ".join(map(num, v)) + "]" if isinstance(v, list) else num(v)
                          for v in values[:10].tolist())
        print(f"{res['n']:,} {'scores' if a.decision else 'labels'}: {shown}{', ...' if res['n'] > 10 else ''} "
              "(--out FILE writes them all)")
    return 0


def _parser_evaluate(sub: Any) -> None:
    ev = _command(
        sub, "evaluate", _cmd_evaluate,
        help="error, accuracy, per-class precision/recall and the confusion matrix of a saved model on a store",
        description="Score a model file on a labelled store (or a view), streamed block by block.",
        epilog="example:\n  distlearn evaluate m.npz test.zarr --json",
    )
    ev.add_argument("model", help="a model file written by distlearn train --save")
    ev.add_argument("store", help="a labelled store, a view STORE#A-vs-B, or a labelled data file")
    _zero_based_flag(ev)
    ev.add_argument("--label-column", type=_label_column, metavar="NAME|INDEX",
                    help="a CSV or Parquet file: its label column (default: the column named label, target, class "
                         "or y, else 0)")
    _json_flag(ev, "machine-readable output")


def _cmd_evaluate(a: argparse.Namespace) -> int:
    from .model import load_model
    from .training import evaluate

    res = evaluate(load_model(a.model), a.store, read=_read_options(a, a.store))
    if a.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    print(f"{a.store}: {res['n']:,} rows, error {100 * res['error']:.2f} %, accuracy {100 * res['accuracy']:.2f} %")
    labels = [str(c) for c in res["labels"]]
    w = max(7, *(len(c) for c in labels))
    print(f"{'label':>{w}}  precision  recall      f1  support")
    for c in labels:
        pc = res["per_class"][c]
        f = lambda v: "     -" if v is None else f"{v:6.4f}"  # noqa: E731
        print(f"{c:>{w}}     {f(pc['precision'])}  {f(pc['recall'])}  {f(pc['f1'])}  {pc['support']:7,}")
    print("confusion (rows: true, columns: predicted):")
    print(" " * w + "".join(f"{c:>{w + 1}}" for c in labels))
    for c, row in zip(labels, res["confusion"]):
        print(f"{c:>{w}}" + "".join(f"{v:>{w + 1},}" for v in row))
    return 0


EXPERIMENTS = describe_experiments()


def _named_outputs(name: str, out: Path, res: dict[str, Any], table: str, *, quick: bool) -> None:
    """OUT/NAME.json, .md and .png for the corpus protocols, as for every named experiment."""
    import shutil

    from .experiments._cells import write_json, write_markdown

    write_json(out / f"{name}.json", res)
    figs = [Path(f) for f in res.get("figures", [])]
    if figs:
        shutil.copyfile(figs[0], out / f"{name}.png")
    write_markdown(out, name, name, EXPERIMENTS[name], table, quick=quick, figure=bool(figs),
                   n_run=res["cells_run"], n_resumed=res["cells_resumed"], seconds=res["seconds"])


def _parser_export(sub: Any) -> None:
    ex = _command(
        sub, "export", _cmd_export,
        help="write a saved model as ONNX, to score without distlearn (onnxruntime or any ONNX-ML runtime)",
        description="Write a model file (train --save) as ONNX: linear models as the ONNX-ML LinearClassifier,\n"
                    "kernel models (linear, poly, rbf kernels) as SVMClassifier. Input X: float32 [N, n_features],\n"
                    "dense rows as given to predict; outputs label [N] and scores [N, n_classes] (binary: [-s, s]).\n"
                    "Vote conversions are standard operators in float64; the sample conversion (a seeded\n"
                    "per-instance draw) is refused.\n"
                    "Needs the onnx package: pip install distlearn[onnx].",
        epilog="examples:\n  distlearn export m.npz m.onnx\n  distlearn export m.npz m.onnx --overwrite --json\n"
               "  python -c \"import onnxruntime as rt; print(rt.InferenceSession('m.onnx').get_inputs()[0].shape)\"",
    )
    ex.add_argument("model", help="a model file written by distlearn train --save")
    ex.add_argument("out", help="the ONNX file to write (.onnx)")
    _overwrite_flag(ex, "replace OUT if it is an ONNX file written by distlearn export (nothing else is replaced)")
    _json_flag(ex)


def _cmd_export(a: argparse.Namespace) -> int:
    from .export import export_onnx

    res = export_onnx(a.model, a.out, overwrite=a.overwrite)
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        c = res["classes"]
        print(f"wrote {res['path']}: {res['estimator']} as {res['operator']}, input X float32 "
              f"[N, {res['n_features']}], {len(c)} classes ({res['labels']} labels "
              f"{', '.join(map(str, c[:10]))}{', ...' if len(c) > 10 else ''}), {res['bytes']:,} bytes")
    return 0


def _parser_experiment(sub: Any) -> None:
    x = _command(
        sub, "experiment", _cmd_experiment,
        help="reproduce a paper's table or figure as seeded Dask tasks: " + ", ".join(EXPERIMENTS),
        description=(
            "Run a paper's protocol end to end, from the files to the figure, every cell a seeded task.\n"
            "Everything experiment NAME writes is in OUT/NAME/, so experiments share an --out: its cells\n"
            "(written as they finish; rerunning the same command resumes, other options are refused before\n"
            "any work), NAME.md (the table, the paper's numbers beside ours), NAME.json (every raw number)\n"
            "and NAME.png (the figure). --quick is a small version (about a minute on one core): a smoke\n"
            "test, not the result. An option an experiment does not use is refused.\n\n"
            + "\n".join(f"  {n:<19}{textwrap.fill(d, 78, subsequent_indent=' ' * 21)}"
                         + (f"\n{'':21}options: " + ", ".join("--" + o.replace("_", "-") for o in OPTIONS[n])
                            if OPTIONS[n] else "")
                         for n, d in EXPERIMENTS.items())
            + "\n\nEvery experiment takes --quick, --repeats, --seed and where it runs (--workers/--scheduler).\n"
            "Data: obpm-table1/-figure1 and budget-fig4 (digits) need none; obpm-drift, cutoff-curves and\n"
            "obpm-batch read Fashion-MNIST, letter-conversions and obpm-batch read LETTER: fetch them once with\n"
            "`distlearn data fetch fashion-mnist letter` (or give --fashion-dir / --letter); rcv1-cutoff and\n"
            "celegans-obpm read the corpora's files or generate stand-ins."
        ),
        epilog=(
            "examples:\n"
            "  distlearn experiment --list\n"
            "  distlearn experiment obpm-table1 --out results --quick\n"
            "  distlearn experiment obpm-table1 --out results --seed 7 --tau 0.1 0.3 --n-estimators 100\n"
            "  distlearn experiment obpm-figure1 --out results --workers 2\n"
            "  distlearn experiment cutoff-curves --out results --fashion-dir ~/data/fashion-mnist\n"
            "  distlearn experiment letter-conversions --out results --letter letter.svm --scheduler tcp://10.0.0.1:8786\n"
            "  distlearn experiment rcv1-cutoff --out rcv1-run --n-docs 200000 --workers 2\n"
            "  distlearn experiment rcv1-cutoff --out rcv1-run --tokens lyrl2004_tokens_*.dat.gz \\\n"
            "      --qrels rcv1-v2.topics.qrels.gz --scheduler tcp://10.0.0.1:8786\n"
            "  distlearn experiment rcv1-cutoff --out quick --n-docs 20000 --splits 2 --problems CCAT-vs-GCAT\n"
            "  distlearn experiment celegans-obpm --out splice-run --workers 2\n"
            "  distlearn experiment celegans-obpm --out s --train train.fa --test test.fa --degree 8"
        ),
    )
    x.add_argument("name", nargs="?", choices=list(EXPERIMENTS), help="which experiment (--list describes them)")
    x.add_argument("--list", action="store_true", help="describe the experiments and exit")
    x.add_argument("--out", metavar="DIR", help="results directory; experiment NAME writes into DIR/NAME/")
    x.add_argument("--quick", action="store_true", help="a small version of the protocol (about a minute)")
    x.add_argument("--repeats", type=_positive_int, metavar="R",
                   help="Monte Carlo runs / trials / splits / folds / permutations (default: the paper's)")
    x.add_argument("--seed", type=_seed, help="seed of every random choice: data, splits, orders, draws (default 0)")
    opt = x.add_argument_group("options of some experiments (each refused by the others; --list says which)")
    opt.add_argument("--tau", type=_tau, nargs="+", metavar="TAU",
                     help="OBPM's tau: the values chosen from (obpm-table1 'selected', obpm-batch), plotted "
                          "(obpm-figure1) or run (obpm-drift: one; celegans-obpm, default 0.05 0.2)")
    opt.add_argument("--n-estimators", type=_positive_int, nargs="+", metavar="N",
                     help="OBPM's N, in the same roles as --tau (obpm-batch, obpm-drift: one value; "
                          "celegans-obpm default 100 200)")
    opt.add_argument("--epochs", type=_positive_int, nargs="+", metavar="E",
                     help="epoch counts scored (obpm-batch default 1 2 3; celegans-obpm default 1 2 3 20)")
    opt.add_argument("--letter", metavar="FILE", help="LETTER as one svmlight file (default: $DISTLEARN_LETTER, "
                     "else the copy of `distlearn data fetch letter`)")
    opt.add_argument("--fashion-dir", metavar="DIR", help="the Fashion-MNIST IDX files (default: "
                     "$DISTLEARN_FASHION_MNIST, else the copy of `distlearn data fetch fashion-mnist`)")
    rcv = x.add_argument_group("rcv1-cutoff")
    src = rcv.add_mutually_exclusive_group()
    src.add_argument("--store", metavar="STORE", help="an RCV1 store made by distlearn convert --qrels")
    src.add_argument("--tokens", nargs="+", metavar="FILE", help="LYRL2004 token (or vector) files")
    src.add_argument("--n-docs", type=_positive_int, metavar="N",
                     help="documents of the generated corpus when no data is given (default 804,414; --quick 4,000)")
    rcv.add_argument("--qrels", metavar="FILE", help="with --tokens: rcv1-v2.topics.qrels[.gz]")
    rcv.add_argument("--hierarchy", metavar="FILE", help="with --tokens: rcv1.topics.hier.orig")
    rcv.add_argument("--problems", nargs="+", metavar="A-vs-B",
                     help="a subset of the ten problems (default: all; --quick CCAT-vs-GCAT)")
    rcv.add_argument("--splits", type=_positive_int, help="random 80/20 splits per problem (default 10; --quick 2)")
    rcv.add_argument("--sizes", type=_positive_int, help="log-spaced training-set sizes (default 12; --quick 5)")
    cel = x.add_argument_group("celegans-obpm")
    cel.add_argument("--train", metavar="FILE", help="training sequences (FASTA or label<TAB>sequence)")
    cel.add_argument("--test", metavar="FILE", help="test sequences")
    cel.add_argument("--train-store", metavar="STORE", help="training store (instead of --train)")
    cel.add_argument("--test-store", metavar="STORE", help="test store of the same feature map")
    cel.add_argument("--n-train", type=_positive_int, metavar="N",
                     help="generated training sequences when no data is given (test: N/10; default 100,000; "
                          "--quick 2,000)")
    cel.add_argument("--degree", type=_positive_int, help="weighted-degree order of the features (default 3; --quick 2)")
    cel.add_argument("--permutations", type=_positive_int, help="seeds per run (default 3; --quick 1)")
    _cluster_options(x, workers="run on a LocalCluster of N workers",
                     scheduler="run on this Dask scheduler (address or scheduler file), or slurm:/pbs:JOBQUEUE.yaml[:N]")
    _overwrite_flag(x, "discard OUT's finished cells and start again")
    x.add_argument("--no-figures", dest="figures", action="store_false", help="skip the figures (NAME.png; fig2.png / fig3.png of rcv1-cutoff)")
    _json_flag(x, "print the results as JSON")


def _experiment_options(a: argparse.Namespace) -> dict[str, Any]:
    """The experiment-specific options given (argument name -> value), checked against what the
    experiment uses (:func:`distlearn.experiments.named.check_options`)."""
    own = {o for opts in OPTIONS.values() for o in opts}
    given = {o: getattr(a, o) for o in sorted(own) if getattr(a, o, None) is not None}
    check_options(a.name, given)
    for same, name in (("splits", "rcv1-cutoff"), ("permutations", "celegans-obpm")):
        if a.name == name and given.get(same) is not None and a.repeats is not None and given[same] != a.repeats:
            raise ValueError(f"--repeats is --{same} for {name}: give one of them")
    return given


def _cmd_experiment(a: argparse.Namespace) -> int:
    if a.list:
        for name, what in EXPERIMENTS.items():
            print(f"{name:<19} {what}")
        return 0
    if a.name is None or a.out is None:
        raise ValueError("give an experiment name and --out DIR (distlearn experiment --list names them)")
    a.given = _experiment_options(a)
    inputs = [a.store, *(a.tokens or ()), a.qrels, a.hierarchy, a.letter, a.fashion_dir, a.train, a.test,
              a.train_store, a.test_store]
    check_output(a.out, "experiment", overwrite=a.overwrite, inputs=inputs)
    if a.name not in PAPERS:  # the corpus pipelines write their data there first
        check_output(experiment_dir(a.out, a.name), "experiment", overwrite=a.overwrite, inputs=inputs)
        claim_dir(a.out, "experiment")
        claim_dir(experiment_dir(a.out, a.name), "experiment")

    def log(msg: str) -> None:
        if not a.json:
            print(msg, file=sys.stderr)

    run = _experiment_paper if a.name in PAPERS else _experiment_corpus
    return run(a, _where(a.scheduler, a.workers), log)


def _experiment_paper(a: argparse.Namespace, scheduler: str | None, log: Any) -> int:
    """A named experiment of the papers (:func:`distlearn.experiments.named.run_experiment`)."""
    from .experiments.named import run_experiment

    def cell_done(done: int, total: int, cell: str) -> None:
        log(f"  [{done}/{total}] {cell}")

    params = {k: v for k, v in a.given.items() if k not in ("letter", "fashion_dir")}
    if a.name in ("obpm-drift", "obpm-batch") and "n_estimators" in params:
        params["n_estimators"] = params["n_estimators"][0]
    if a.name == "obpm-drift" and "tau" in params:
        params["tau"] = params["tau"][0]
    doc = run_experiment(a.name, a.out, quick=a.quick, repeats=a.repeats, seed=a.seed or 0, params=params,
                         scheduler=scheduler, n_workers=a.workers, data={"letter": a.letter, "fashion": a.fashion_dir},
                         overwrite=a.overwrite, figures=a.figures, log=log, progress=cell_done)
    if a.json:
        print(json.dumps({k: v for k, v in doc.items() if k != "text"}, indent=1))
    else:
        print(doc["text"])
        print(f"{doc['cells_run']} cells run, {doc['cells_resumed']} resumed, {doc['seconds']:.1f} s; "
              + ", ".join(doc["files"]))
    return 0


def _experiment_corpus(a: argparse.Namespace, scheduler: str | None, log: Any) -> int:
    """A corpus protocol, files to figures (rcv1-cutoff, celegans-obpm: their ``pipeline``)."""
    from .experiments import celegans_obpm, rcv1_cutoff

    def told(done: int, total: int, name: str, cell: dict[str, Any]) -> None:
        err = cell.get("test_error", cell.get("error"))
        log(f"  [{done}/{total}] {name}: error {100 * err:.2f} %, {cell['fit_seconds']:.1f} s")

    def progress(done: int, total: int, cell: dict[str, Any]) -> None:
        log(f"  [{done}/{total}] {cell['problem']} split {cell['split']}: {cell['n_train']:,} train, "
            f"{cell['n_test']:,} test, {cell['seconds']:.1f} s")

    out = experiment_dir(a.out, a.name)
    common = dict(seed=a.seed or 0, scheduler=scheduler, n_workers=a.workers, log=log, overwrite=a.overwrite,
                  figures=a.figures, quick=a.quick, repeats=a.repeats)
    given = a.given
    if a.name == "celegans-obpm":  # only the options given: the rest are the protocol's (or --quick's)
        own = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()
               if k in ("epochs", "permutations")}
        own.update({new: tuple(given[old]) for old, new in (("tau", "taus"), ("n_estimators", "sizes"))
                    if old in given})
        res = celegans_obpm.pipeline(out, train=a.train, test=a.test, train_store=a.train_store,
                                     test_store=a.test_store, n_train=a.n_train, degree=a.degree,
                                     progress=told, **own, **common)
        table = celegans_obpm.format_table(res)
    else:
        own = {new: given[old] for old, new in (("problems", "problems"), ("splits", "splits"), ("sizes", "n_sizes"))
               if old in given}
        res = rcv1_cutoff.pipeline(out, store=a.store, tokens=a.tokens, qrels=a.qrels, hierarchy=a.hierarchy,
                                   n_docs=a.n_docs, progress=progress, **own, **common)
        table = rcv1_cutoff.format_table(res)
    _named_outputs(a.name, out, res, table, quick=a.quick)
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(table)
        print(f"{res['cells_run']} cells run, {res['cells_resumed']} resumed, {res['seconds']:.1f} s; "
              f"results in {out / 'results.json'}" + "".join(f"; {f}" for f in res.get("figures", [])))
    return 0


def _parser_data(sub: Any) -> None:
    from .data.fetch import DATA_ENV, DATASETS, DEADLINE, TIMEOUT, URL_ENV, cache_dir

    d = _command(
        sub, "data", _cmd_data,
        help="download the public data sets the experiments read (LETTER, Fashion-MNIST)",
        description=(
            "distlearn data fetch NAME... downloads a public data set from its publisher, checks every file's\n"
            "SHA-256 against the one pinned in distlearn, and keeps it in a cache where the experiments find\n"
            f"it without options ({cache_dir()};\n${DATA_ENV} moves it). A file is renamed into place only "
            "when complete and verified;\na rerun fetches only what is missing.\n\n"
            + "".join(f"  {n:<15}{ds.what}\n{'':17}{ds.files[0].url.rsplit('/', 1)[0]}/\n{'':17}"
                      + ", ".join(f.name for f in ds.files) + "\n" for n, ds in DATASETS.items())
        ),
        epilog=(
            "examples:\n"
            "  distlearn data fetch letter fashion-mnist\n"
            "  distlearn data fetch fashion-mnist --dir /data/public     # then DISTLEARN_DATA=/data/public\n"
            "  distlearn data fetch letter --url http://mirror.example/datasets   # BASE/letter-recognition.data"
        ),
    )
    d.add_argument("action", choices=["fetch"], help="what to do (fetch: download and verify)")
    d.add_argument("names", nargs="+", choices=list(DATASETS), metavar="NAME",
                   help=f"data set(s): {', '.join(DATASETS)}")
    d.add_argument("--dir", metavar="DIR", help=f"cache directory (default: ${DATA_ENV}, else {cache_dir()})")
    d.add_argument("--url", metavar="BASE", help=f"fetch BASE/FILE instead of the publishers' addresses "
                   f"(default: ${URL_ENV} when set)")
    d.add_argument("--timeout", type=float, default=TIMEOUT, metavar="S",
                   help="seconds any one network wait may take")
    d.add_argument("--deadline", type=float, default=DEADLINE, metavar="S", help="seconds one file may take")
    _json_flag(d, "print what was fetched as JSON")


def _cmd_data(a: argparse.Namespace) -> int:
    from .data.fetch import fetch

    # progress lines on a terminal only (as the progress bars): in a script, a failure is one line
    log = (lambda msg: None) if a.json or not sys.stderr.isatty() else (lambda msg: print(msg, file=sys.stderr))
    done = [fetch(n, a.dir, base_url=a.url, timeout=a.timeout, deadline=a.deadline, log=log) for n in a.names]
    if a.json:
        print(json.dumps(done, indent=1))
    else:
        for r in done:
            counts = [st for st in ("downloaded", "derived", "present")
                      if any(f["status"] == st for f in r["files"].values())]
            print(f"{r['dataset']}: {r['path']} ({', '.join(counts)})")
    return 0


def _parser_train(sub: Any) -> None:
    t = _command(
        sub, "train", _cmd_train,
        help="train a model on a store (in process, on a LocalCluster, or on a Dask cluster)",
        description=(
            "Train a classifier on a zarr store and report its online (progressive) error, time and,\n"
            "with --test, its test error. OBPM and kernel-obpm run their learners as Dask task chains\n"
            "over the store's blocks (learner-parallel) with --scheduler/--workers; the model is\n"
            "bit-identical to an in-process run. Long jobs: --checkpoint DIR saves the state every --checkpoint-every blocks,\n"
            "and --resume continues from the last complete checkpoint after a crash or Ctrl-C.\n\n"
            "models:\n" + "".join(f"  {name:<12} {text}\n" for name, text in sorted(MODELS.items()))
            + "(estimator parameters with --param NAME=VALUE, e.g. --param tau=0.3 --param base=alma)"
        ),
        epilog=(
            "examples:\n"
            "  distlearn train train.zarr --test test.zarr --model obpm --param n_estimators=100 --param tau=0.3\n"
            "  distlearn train big.zarr --model obpm --workers 2 --progress --save model.npz\n"
            "  distlearn train big.zarr --model obpm --scheduler cluster/scheduler.json --checkpoint ck.zarr --resume\n"
            "  distlearn train big.zarr --model obpm --scheduler tls://10.0.0.1:8786 \\\n"
            "      --tls-ca ca.pem --tls-cert me.pem --tls-key me.key\n"
            "  distlearn train letter.zarr --model pa --param variant=PA-II --param multiclass=native --json\n"
            "  distlearn train iris.csv --label-column species --save m.npz   # class names as labels\n"
            "  distlearn train rcv1.zarr --target CCAT-vs-GCAT --model nag --param loss=hinge --save nag.npz"
        ),
    )
    t.add_argument("store", help="training store (distlearn convert/generate makes one), or a data file read whole "
                   "into memory (svmlight, CSV, IDX, Parquet)")
    t.add_argument("--test", metavar="STORE", help="report the error on this store (or data file)")
    t.add_argument("--label-column", type=_label_column, metavar="NAME|INDEX",
                   help="a CSV or Parquet file as the training data (and --test): its label column, numbers or "
                        "class names (default: the column named label, target, class or y, else 0)")
    _zero_based_flag(t)
    t.add_argument("--target", metavar="A-vs-B|TOPIC", help="train on a binary view of the store(s): two labels "
                   "(CCAT-vs-GCAT, 3-vs-5) or one topic/label against the rest (same as STORE#TARGET)")
    t.add_argument("--model", default="obpm", choices=sorted(MODELS), help="the learner")
    t.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="estimator parameter (repeatable); VALUE is parsed as JSON when it can be")
    t.add_argument("--epochs", type=_positive_int, help="passes over the data (default: the model's)")
    t.add_argument("--seed", type=_seed, default=0, help="random seed of every draw and shuffle")
    _cluster_options(t, scheduler_first=True, tls=True, in_process="no Dask: train in this process",
                     scheduler="a Dask scheduler address or scheduler file, or slurm:JOBQUEUE.yaml[:N] / "
                               "pbs:JOBQUEUE.yaml[:N] to start N batch jobs of workers (cluster/README.md)",
                     workers="start a LocalCluster of N worker processes")
    t.add_argument("--shards", type=_positive_int, metavar="S",
                   help="data-parallel: train S shards of the store per epoch and mix their weights "
                        "(iterative parameter mixing; any model but obpm, the kernel and the adaptive ones)")
    t.add_argument("--mixing", choices=["uniform", "updates"],
                   help="--shards: weight shards by rows (uniform, the default) or by their updates (McDonald et al.)")
    t.add_argument("--checkpoint", metavar="DIR", help="save the training state here (zarr) every --checkpoint-every blocks")
    t.add_argument("--checkpoint-every", type=_positive_int, default=8, metavar="B", help="blocks per task and checkpoint")
    t.add_argument("--resume", action="store_true", help="continue from the last complete checkpoint in --checkpoint")
    t.add_argument("--save", metavar="MODEL.npz", help="write the model (arrays + JSON, no pickle); an existing "
                   "file is refused unless --overwrite")
    _overwrite_flag(t, "--save: replace MODEL.npz if it is a distlearn model file (nothing else is replaced)")
    t.add_argument("--save-members", action="store_true",
                   help="with --save and --model obpm: also store every member's weights (model.members_)")
    _json_flag(t)
    _progress_flag(t, "progress bar, per-epoch error and the dashboard link (default: when stderr is a terminal)")


def _train_setup(a: argparse.Namespace, params: dict[str, Any]) -> tuple[Any, Any]:
    """The flags checked before any work, the estimator made and told where to run; (estimator, dataset).

    Where a model can run is the estimator's to say: it takes ``scheduler=`` (OBPM, shards) or it
    trains in process, and it takes ``checkpoint=`` (OBPM) or it cannot resume."""
    from ._validation import SchedulerAddress
    from .data import open_dataset
    from .data.readers import is_data_file, read_arrays
    from .training import make_estimator

    if a.save_members and not (a.save and a.model == "obpm"):
        raise ValueError("--save-members needs --save MODEL.npz and --model obpm (the members of its Bayes point)")
    if a.mixing is not None and not a.shards:  # was silently ignored
        raise ValueError("--mixing weights the shards of --shards S; without --shards there is nothing to mix")
    a.mixing = a.mixing or "uniform"
    try:
        est = make_estimator(a.model, params, shards=a.shards, mixing=a.mixing, seed=a.seed, epochs=a.epochs)
    except ValueError as exc:
        raise ValueError(str(exc).replace("parameter '", "--param '", 1)) from None
    if a.save_members:  # the members' own hypotheses: an average kept per member, not pooled
        if est.get_params(deep=False).get("keep_members") is False:
            raise ValueError("--save-members stores every member's hypothesis; --param keep_members=false drops them")
        est.set_params(keep_members=True)
    if a.target:
        if is_data_file(a.store):
            raise ValueError(f"--target views a store; {a.store} is a data file: convert it first "
                             f"(distlearn convert {a.store} STORE.zarr)")
        a.store = f"{a.store}#{a.target}"
        a.test = a.test and f"{a.test}#{a.target}"
    takes = est.get_params(deep=False)
    if (a.checkpoint or a.resume) and "checkpoint" not in takes:
        raise ValueError(f"--checkpoint/--resume apply to --model obpm or kernel-obpm (a store job); {a.model} "
                         "trains in process")
    if a.resume and not a.checkpoint:
        raise ValueError("--resume needs --checkpoint DIR")
    if a.overwrite and not a.save:
        raise ValueError("--overwrite applies to --save MODEL.npz")
    inputs = [a.store, a.test]
    if a.save:  # outputs are checked before the fit, not after it
        if Path(a.save).suffix != ".npz":
            raise ValueError(f"--save: model files end in .npz, got {a.save!r}")
        check_output(a.save, "model", overwrite=a.overwrite, inputs=inputs)
    if a.checkpoint:  # an earlier checkpoint is resumed or restarted; nothing else is touched
        check_output(a.checkpoint, "checkpoint", overwrite=True, inputs=inputs)
    if "checkpoint" in takes:
        est.set_params(checkpoint=a.checkpoint, checkpoint_every=a.checkpoint_every, resume=a.resume,
                       progress=_progress(a.progress))
    if is_data_file(a.store):  # a data file is read whole into memory (if it fits) and trained on as arrays
        X, y = read_arrays(a.store, **{k: v for k, v in _read_options(a, a.store).items() if v is not None})
        a.fit_args = (X, y)
        ds: Any = argparse.Namespace(n_samples=X.shape[0], n_features=X.shape[1])
    elif a.label_column is not None:
        _read_options(a)  # --label-column none: for predict
        raise ValueError("--label-column picks the label of a CSV or Parquet file; a store holds its labels")
    elif a.zero_based:
        raise ValueError("--zero-based reads an svmlight data file; a store holds its feature indices already")
    else:
        ds, a.fit_args = open_dataset(a.store), (a.store,)
    where, sec = _where(a.scheduler, a.workers), _security(a)
    if is_data_file(a.store) and (where or sec or a.checkpoint):  # the estimators fit arrays in this process
        flag = "--checkpoint" if a.checkpoint and not (where or sec) else "--scheduler/--workers"
        raise ValueError(f"{flag}: for a store's job (Dask, checkpoints); {a.store} is a data file, read into memory "
                         f"and trained in this process: convert it first (distlearn convert {a.store} STORE.zarr), "
                         f"or drop {flag}")
    if "scheduler" not in takes and (where or sec):
        raise ValueError(f"--scheduler/--workers apply to --model obpm, kernel-obpm or --shards (so do --tls-*); "
                         f"{a.model} alone trains in process")
    if "scheduler" in takes and (a.in_process or where or sec):  # plain data: the estimator's executor connects
        est.set_params(scheduler="in-process" if a.in_process else
                       SchedulerAddress(where or "local", sec) if sec is not None else where)
    return est, ds


def _cmd_train(a: argparse.Namespace) -> int:
    from ._compile import watch
    from .model import save_model
    from .training import evaluate, fit_summary

    params = dict(_param(p) for p in a.param)
    est, ds = _train_setup(a, params)
    t0 = time.perf_counter()
    with watch() as compiled:  # numba's first-run compilation, reported apart from the fit
        est.fit(*a.fit_args)
    seconds = time.perf_counter() - t0 - compiled.seconds
    summary = fit_summary(est)
    result: dict[str, Any] = {
        "model": summary["model"], "store": str(a.store), "n_samples": ds.n_samples, "n_features": ds.n_features,
        "epochs": summary["epochs"], "fit_seconds": round(seconds, 3),
        "compile_seconds": round(compiled.seconds, 3), "compiled": compiled.kernels,
        "online_error": summary["online_error"],
        "online_errors": summary["online_errors"], "n_updates": summary["n_updates"],
        "params": {k: v for k, v in est.get_params(deep=False).items()
                   if k in params or k in ("random_state", "epochs")},
    }
    for k in ("epoch_online_errors", "tau", "tau_online_errors", "job", "n_support", "n_removed", "gamma", "beta"):
        if k in summary:
            result[k] = summary[k]
    if a.shards:
        result.update(shards=a.shards, mixing=a.mixing)
    if a.test:
        from .data.readers import is_data_file

        test_read = _read_options(a, a.test) if is_data_file(a.test.partition("#")[0]) else None  # the flags read data files
        result["test_error"] = evaluate(est, a.test, read=test_read)["error"]
        result["test_store"] = str(a.test)
    if a.save:
        save_model(est, a.save, extra={"train_store": str(a.store), "fit_seconds": seconds},
                   members=a.save_members, overwrite=a.overwrite)
        result["saved"] = str(a.save)
    print(json.dumps(result, indent=2, default=str) if a.json else _train_table(a, result, summary, seconds))
    return 0


def _train_table(a: argparse.Namespace, result: dict[str, Any], summary: dict[str, Any], seconds: float) -> str:
    """The human table of ``distlearn train``."""
    rows = [("model", f"{result['model']} on {a.store} ({result['n_samples']} x {result['n_features']})"),
            ("fit", f"{seconds:.2f} s, {result['epochs']} epoch(s)"
                    + (f"; compiling kernels took {result['compile_seconds']:.2f} s more (first run only, "
                       "see distlearn warmup)" if result["compiled"] else "")),
            ("online error", f"{result['online_error']:.4f} ({result['online_errors']} of {summary['online_rows']}, "
                             f"{summary['online_scope']})")]
    if len(result.get("epoch_online_errors", ())) > 1:
        rows.append(("per epoch", ", ".join(str(v) for v in result["epoch_online_errors"])))
    if "tau" in result:
        rows.append(("tau", f"{result['tau']:g} chosen from the data (online errors per tau: "
                            + ", ".join(f"{t} {e}" for t, e in result["tau_online_errors"].items()) + ")"))
    if "job" in result:
        job = result["job"]
        rows.append(("ran on", f"{job['runner']}; {len(job['groups'])} learner groups, "
                               f"{job['group_blocks']} group-block passes"
                               + (f", resumed from epoch {job['resumed_from'][0] + 1} segment "
                                  f"{job['resumed_from'][1] + 1}" if job["resumed_from"] else "")))
    if a.test:
        rows.append(("test error", f"{result['test_error']:.4f} on {a.test}"))
    if "n_support" in summary:
        rows.append(("support", f"{summary['n_support']} patterns ({summary['n_removed']} removed)"))
    if a.save:
        rows.append(("saved", str(a.save)))
    return _table(rows)


def _parser_demo(sub: Any) -> None:
    d = _command(
        sub, "demo", _cmd_demo,
        help="the quickstart job: generate, convert in parallel on a LocalCluster, report",
        description=(
            "Run the main job on embedded data: generate an RCV1-like corpus and the OBPM artificial data,\n"
            "write them as svmlight text, convert them to zarr stores in parallel on a LocalCluster\n"
            "(127.0.0.1), check them against scikit-learn's loader, and print a table."
        ),
        epilog="examples:\n  distlearn demo\n  distlearn demo --out demo2 --workers 2 --n-samples 5000\n"
               "  distlearn demo --scheduler tcp://10.0.0.1:8786 --json",
    )
    d.add_argument("--out", default="demo-output", help="working directory for the demo's files")
    _workers_flag(d, "LocalCluster worker processes (default: cores)", metavar=None)
    d.add_argument("--n-samples", type=_positive_int, default=50_000, help="rows of the RCV1-like corpus")
    _scheduler_flag(d, "use this Dask scheduler instead of a LocalCluster")
    _json_flag(d)


def _cmd_demo(a: argparse.Namespace) -> int:
    from .experiments import quickstart

    check_output(a.out, "demo", overwrite=False)
    claim_dir(a.out, "demo")
    result = quickstart.run(out=a.out, n_workers=a.workers, n_samples=a.n_samples,
                            scheduler=_where(a.scheduler, a.workers) or "local")
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(quickstart.format_table(result))
    return 0 if result["ok"] else 1


def _parser_warmup(sub: Any) -> None:
    from .warmup import JOBS

    w = _command(
        sub, "warmup", _cmd_warmup,
        help="compile the common kernels into numba's cache, so that no run waits for it",
        description=(
            "The learners are numba kernels, compiled on first use for the data they meet and cached on\n"
            "disk; without this, the first `distlearn train` of each kind of model and store pays the\n"
            "compilation (a few seconds, announced on a terminal and reported apart from the fit time).\n"
            "This command trains each job below once on a tiny generated store, which compiles those\n"
            "kernels and writes them to the cache; later runs, and Dask workers sharing the cache, load\n"
            "them. `python3 run.py setup` and cluster/Dockerfile run it after installing.\n\n"
            "The cache: $NUMBA_CACHE_DIR when set; else __pycache__ beside the package's sources when\n"
            "writable; else the user's cache directory (~/.cache/numba). Entries hold for the same\n"
            "source files, numba version and CPU; anything else compiles again (never a stale kernel).\n"
            "A read-only installation keeps its cache per user: run warmup as the user who trains, or\n"
            "set NUMBA_CACHE_DIR to a writable directory for both. DISTLEARN_NUMBA_CACHE=0 turns\n"
            "caching off.\n\n"
            "jobs (* = run by default):\n"
            + "".join(f"  {n:<18}{'*' if j.default else ' '} {j.covers}\n" for n, j in JOBS.items())
        ),
        epilog="examples:\n  distlearn warmup\n  distlearn warmup --all --json\n"
               "  NUMBA_CACHE_DIR=/shared/numba distlearn warmup --job obpm-sparse",
    )
    w.add_argument("--job", action="append", choices=sorted(JOBS), metavar="NAME",
                   help="compile this job only (repeatable; names above)")
    w.add_argument("--all", action="store_true", help="every job, not only the default ones")
    _json_flag(w)


def _cmd_warmup(a: argparse.Namespace) -> int:
    from .warmup import warmup

    if a.job and a.all:
        raise ValueError("--job and --all exclude each other")

    def told(name: str, row: dict[str, Any]) -> None:
        if not a.json:
            what = f"compiled {len(row['compiled'])} kernel(s) in {row['compile_seconds']:.2f} s" \
                if row["compiled"] else "found in the cache"
            print(f"{name:<18} {what} ({row['seconds']:.2f} s)", flush=True)

    res = warmup(a.job, every=a.all, log=told)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        where = res["cache_dir"] or "off (DISTLEARN_NUMBA_CACHE=0): nothing is kept"
        print(f"total {res['seconds']:.2f} s; numba cache: {where}")
    return 0


#: What each command takes, in order, for the one-line "looks swapped" message.
_USAGE = {"predict": "distlearn predict MODEL.npz INPUT [--out FILE]",
          "evaluate": "distlearn evaluate MODEL.npz STORE",
          "train": "distlearn train STORE [--test STORE] [--save MODEL.npz]",
          "convert": "distlearn convert INPUT... OUTPUT.zarr"}


def _kind(path: Any) -> str:
    """What is at a command's path argument: "model" (a distlearn model file), "store" (a distlearn
    store, or a view STORE#TARGET of one), "missing", "data" (any other file or directory) or ""
    (not a local path: a URL, or nothing given)."""
    from ._outputs import is_kind

    if not isinstance(path, str) or not path or "://" in path:
        return ""
    base = path.split("#", 1)[0] if "#" in path and not os.path.lexists(path) else path
    if not os.path.lexists(base):
        return "missing"
    return "model" if is_kind(base, "model") else "store" if is_kind(base, "store") else "data"


def _check_empty(a: argparse.Namespace, argv: Sequence[str]) -> None:
    """An empty string where a path, name or address goes is one line: ``--save ""`` was no save at
    all (exit 0, nothing written), ``--checkpoint ""`` no checkpoint, ``--target ""`` the whole store."""
    for i, tok in enumerate(argv):
        if tok == "":
            name = f"argument {argv[i - 1]}" if i and argv[i - 1].startswith("-") else f"argument {i}"
        elif tok.startswith("--") and tok.endswith("="):
            name = f"argument {tok[:-1]}"
        else:
            continue
        raise ValueError(f"{name}: an empty value (see distlearn {a.command} --help)")


def _check_roles(a: argparse.Namespace) -> None:
    """Arguments given in the wrong order, or a model that is not there yet, as one line naming the
    files (before any work: the readers would report a confusing symptom of it)."""
    cmd = a.command
    if cmd in ("predict", "evaluate"):
        data = a.input if cmd == "predict" else a.store
        model, other = _kind(a.model), _kind(data)
        if model == "missing":
            raise FileNotFoundError(f"{a.model}: no such model file; train one first with "
                                    f"`distlearn train STORE --save {a.model}`")
        if model in ("store", "data") and other == "model":
            raise ValueError(f"{a.model} is not a model file but {data} is: looks swapped; usage: {_USAGE[cmd]}")
        if model == "store":
            raise ValueError(f"{a.model} is a store, not a model file (`distlearn train {a.model} --save MODEL.npz` "
                             f"writes one); usage: {_USAGE[cmd]}")
    elif cmd == "train":
        for flag, path in (("", a.store), ("--test ", a.test)):
            if _kind(path) == "model":
                raise ValueError(f"{flag}{path} is a model file, not data: looks swapped; usage: {_USAGE[cmd]}")
    elif cmd == "info" and _kind(a.store) == "model":
        raise ValueError(f"{a.store} is a model file, not a store (`distlearn evaluate {a.store} STORE` scores it)")
    elif cmd == "convert":
        kinds = [_kind(p) for p in a.input]
        out = _kind(a.output)
        if "store" in kinds and out == "data":
            raise ValueError(f"{a.input[kinds.index('store')]} is a store and {a.output} a data file: looks swapped; "
                             f"usage: {_USAGE[cmd]}")
        if "model" in kinds:
            raise ValueError(f"{a.input[kinds.index('model')]} is a model file (distlearn predict MODEL INPUT "
                             f"uses it), not data to convert; usage: {_USAGE[cmd]}")


def _os_error(e: OSError, args: argparse.Namespace) -> str:
    """One line for an ``OSError``: ``cannot write PATH: REASON`` when PATH is (in) one of the
    command's outputs, ``cannot access PATH: REASON`` otherwise."""
    from ._outputs import FULL_DISK

    reason = e.strerror or str(e)
    given = [o for o in (getattr(args, k, None) for k in ("output", "save", "checkpoint", "out")) if isinstance(o, str)]
    if e.filename is None and e.errno in FULL_DISK and given:  # a writer's bare EFBIG/ENOSPC: its outputs
        return f"cannot write {' or '.join(given)}: {reason}"
    if e.filename is None:
        return reason
    path = os.fspath(e.filename)
    outputs = [os.path.abspath(o) for o in given]
    here = os.path.abspath(path)
    verb = "write" if any(here == o or here.startswith(o + os.sep) for o in outputs) else "access"
    return f"cannot {verb} {path}: {reason}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``distlearn`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .data import StoreError
    from .data._errors import InputFormatError

    from ._compile import watch

    def announce(kernel: str) -> None:  # on a terminal, like the progress bars; the output reports it too
        print(f"distlearn {args.command}: compiling kernels (first run only; `distlearn warmup` compiles them "
              "ahead) ...", file=sys.stderr, flush=True)

    try:
        _check_empty(args, sys.argv[1:] if argv is None else list(argv))
        _check_roles(args)
        with watch(announce=announce if args.command != "warmup" and sys.stderr.isatty() else None):
            return int(args.func(args))
    except BrokenPipeError:  # the reader went away (| head): not an error of ours (before ConnectionError, its base)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (InputFormatError, StoreError, FileExistsError, FileNotFoundError, ValueError, ConnectionError) as e:
        print(f"distlearn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        how = ""
        if args.command == "experiment":
            how = (f"; the finished cells are kept in {Path(args.out) / args.name / 'cells'}: rerun the same "
                   "command to resume")
        elif args.command == "train" and getattr(args, "checkpoint", None):
            how = f"; add --resume to the same command to continue from the last checkpoint in {args.checkpoint}"
        print(f"distlearn {args.command}: interrupted; nothing was left half-written{how}", file=sys.stderr)
        return 130
    except OSError as e:  # permission denied, a directory where a file goes, a full disk ...
        print(f"distlearn {args.command}: error: {_os_error(e, args)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
