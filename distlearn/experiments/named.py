"""The paper reproductions as named, resumable jobs: ``distlearn experiment NAME --out DIR``.

Every reproduction module listed in :data:`PAPERS` describes its protocol as
*cells* -- one Monte Carlo run, one trial, one fold, one (pair, split) -- each a
seeded, pure task whose JSON result does not depend on where it ran.  This
runner submits the cells that ``DIR`` does not hold yet to the executor (this
process, a LocalCluster or a cluster), writes each one as it finishes
(``DIR/NAME/cells/``), then aggregates all of them and writes

* ``DIR/NAME/NAME.json``: every raw number, the aggregates and the paper's numbers;
* ``DIR/NAME/NAME.md``: the table, the paper's numbers beside ours, and the verdicts;
* ``DIR/NAME/NAME.png``: the figure.

Everything an experiment writes is under ``DIR/NAME/`` (its ``meta.json``, cells and reports), so
several experiments share one ``DIR``; other options than the first run's are refused before any
work.

A rerun with the same options resumes: finished cells are read, not rerun.

A reproduction module provides ``TITLE``, ``VERSION``,
``plan(part, quick, repeats, data, params) -> (key, [(cell name, function, args)])``,
``report(part, key, cells) -> doc``, ``render(part, doc) -> str`` (the text of the table)
and ``plot(part, doc, path)``.

:data:`OPTIONS` says, for each of the nine experiments (the seven here and the corpus protocols
``rcv1-cutoff`` and ``celegans-obpm``), which options it uses and what they change;
:func:`check_options` refuses any other (one line, before any work).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .._outputs import check_output, claim_dir
from ._cells import Cells, pyplot, refuse_other_run, write_json, write_markdown

__all__ = ["PAPERS", "CORPUS", "OPTIONS", "COMMON", "run_experiment", "describe_papers", "describe_experiments",
           "check_options", "experiment_dir"]

#: name -> (module in distlearn.experiments, part of it, one line); obpm-table1 and obpm-figure1
#: share one module.  The modules are imported when an experiment runs.
PAPERS: dict[str, tuple[str, str, str]] = {
    "obpm-table1": ("obpm_artificial", "table",
                    "Harrington et al. (2003) Table 1: perceptron, ALMA and OBPM test error on the margin-0.05 "
                    "artificial problem at label noise 0/1/10 %, 30 Monte Carlo runs, one epoch"),
    "obpm-figure1": ("obpm_artificial", "figure",
                     "Harrington et al. (2003) Figure 1: OBPM test error and training margin against tau for "
                     "N = 25 and 100, noise-free, 30 runs, with ALMA's margin for reference"),
    "obpm-drift": ("obpm_drift", "",
                   "Harrington et al. (2003) Fig. 2: cumulative online errors of LMS, ALMA, the perceptron and "
                   "OBPM (tau 0.4, N 100) on a drifting Fashion-MNIST concept (positive class 1 -> 2 -> 3), "
                   "10 trials of T = 1000"),
    "obpm-batch": ("obpm_batch", "",
                   "Harrington et al. (2003) Table 2 style on LETTER (26 classes and its most confused pairs) and "
                   "Fashion-MNIST (T-shirt/Shirt, 10 classes): OBPM, the perceptron and ALMA after 1/2/3 epochs "
                   "against a tuned LinearSVC"),
    "cutoff-curves": ("cutoff_curves", "",
                      "Dekel (2008) Figs. 2-3 on Fashion-MNIST pairs: perceptron test error and margin-perceptron "
                      "hinge loss of the last, average and cutoff hypotheses against the training-set size, "
                      "10 splits"),
    "budget-fig4": ("budget_cache_sizes", "",
                    "Crammer, Kandola & Singer (2003) Fig. 4: multiclass kernel MIRA (beta 0.01, one pass) without "
                    "budget, with DistillCache and at 10 fixed cache sizes, and with merging (BSGD, RBF) at budgets "
                    "50-1000, against a tuned SVC, 11 permutations; "
                    "digits (bundled), LETTER and Fashion-MNIST when given"),
    "letter-conversions": ("letter_conversions", "",
                           "Dekel & Singer (2005) Table 1, LETTER rows: one pass of the Gaussian-kernel multiclass "
                           "PA on one of k parts (k = 5, 10), tested on the rest; last, average, suffix, tree, "
                           "interval, vote, vote-suffix"),
}


#: The corpus protocols (``distlearn experiment``'s own pipelines: files to figures, with their data
#: conversion): name -> one line.
CORPUS: dict[str, str] = {
    "rcv1-cutoff": "Dekel (2008) sec. 4, Figs. 2-3: cutoff averaging vs last/average on the ten RCV1 "
                   "problems (perceptron 0-1 error, margin perceptron hinge loss), 80/20 splits, 12 sizes",
    "celegans-obpm": "Harrington et al. (2003) Table 2: OBPM vs ALMA, the perceptron and LinearSVC on "
                     "splice sites (WD features), after 1/2/3/20 epochs, 3 permutations",
}

#: The options every experiment takes (``distlearn experiment``'s argument names).
COMMON = ("out", "quick", "repeats", "seed", "scheduler", "workers", "overwrite", "figures", "json", "list")

_LETTER = "LETTER, one svmlight file (default: $DISTLEARN_LETTER, else `distlearn data fetch letter`'s copy)"
_FASHION = ("the Fashion-MNIST IDX files (default: $DISTLEARN_FASHION_MNIST, else `distlearn data fetch "
            "fashion-mnist`'s copy)")

#: name -> {option: what it changes} beyond :data:`COMMON`; any other option is refused.
OPTIONS: dict[str, dict[str, str]] = {
    "obpm-table1": {"tau": "the taus 'OBPM (selected)' chooses from (default 0.05 .. 0.5)",
                    "n_estimators": "the N values 'OBPM (selected)' chooses from (default 100 200)"},
    "obpm-figure1": {"tau": "the taus on the x axis (default 0.01 .. 1)",
                     "n_estimators": "one curve per N (default 25 100)"},
    "obpm-drift": {"fashion_dir": _FASHION, "tau": "OBPM's tau, one value (default 0.4, the paper's)",
                   "n_estimators": "OBPM's N, one value (default 100, the paper's)"},
    "obpm-batch": {"letter": _LETTER, "fashion_dir": _FASHION,
                   "tau": "the taus tuned on the validation split (default 0.1 0.2 0.3 0.4)",
                   "n_estimators": "OBPM's N, one value (default 100)",
                   "epochs": "the epoch counts scored (default 1 2 3; --quick 1 3)"},
    "cutoff-curves": {"fashion_dir": _FASHION},
    "budget-fig4": {"letter": "adds LETTER (not with --quick)",
                    "fashion_dir": "adds Fashion-MNIST (not with --quick)"},
    "letter-conversions": {"letter": _LETTER},
    "rcv1-cutoff": {"store": "an RCV1 store", "tokens": "the LYRL2004 token files", "n_docs": "the generated corpus",
                    "qrels": "with --tokens", "hierarchy": "with --tokens", "problems": "a subset of the ten",
                    "splits": "80/20 splits (= --repeats)", "sizes": "training-set sizes"},
    "celegans-obpm": {"train": "sequences", "test": "sequences", "train_store": "a store",
                      "test_store": "a store", "n_train": "the generated corpus", "degree": "WD features",
                      "permutations": "seeds per run (= --repeats)", "epochs": "epoch counts scored",
                      "tau": "OBPM's taus", "n_estimators": "OBPM's N values"},
}
#: Options that take one value for an experiment (the parser takes several).
SINGLE: dict[str, tuple[str, ...]] = {"obpm-drift": ("tau", "n_estimators"), "obpm-batch": ("n_estimators",)}


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def check_options(name: str, given: dict[str, Any]) -> None:
    """Refuse, in one line, an option (argument name -> value, only the ones given) that ``name``
    does not use, or several values where it takes one."""
    if name not in OPTIONS:
        raise ValueError(f"unknown experiment {name!r}; distlearn experiment --list names them")
    unused = [o for o in given if o not in OPTIONS[name] and o not in COMMON]
    if unused:
        uses = ", ".join(_flag(o) for o in OPTIONS[name]) or "none of its own"
        raise ValueError(f"{name} does not use {', '.join(_flag(o) for o in unused)} (its options: {uses}; and "
                         "--quick, --repeats, --seed, where it runs)")
    for o in SINGLE.get(name, ()):
        v = given.get(o)
        if isinstance(v, (list, tuple)) and len(v) != 1:
            raise ValueError(f"{name} takes one value of {_flag(o)}, got {len(v)}")


def experiment_dir(out: str | Path, name: str) -> Path:
    """Where experiment ``name`` keeps its cells, meta.json and reports: ``OUT/NAME``."""
    return Path(out) / name


def describe_papers() -> dict[str, str]:
    """name -> one line: the paper, the table or figure, what runs."""
    return {name: what for name, (_, _, what) in PAPERS.items()}


def describe_experiments() -> dict[str, str]:
    """All nine experiments, name -> one line."""
    return {**describe_papers(), **CORPUS}


def _module(name: str) -> tuple[ModuleType, str]:
    mod, part, _ = PAPERS[name]
    return importlib.import_module(f"{__package__}.{mod}"), part


def run_experiment(name: str, out: str | Path, *, quick: bool = False, repeats: int | None = None,
                   seed: int = 0, params: dict[str, Any] | None = None,
                   scheduler: Any = None, n_workers: int | None = None, data: dict[str, Any] | None = None,
                   overwrite: bool = False, figures: bool = True,
                   log: Callable[[str], None] = lambda msg: None,
                   progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the named reproduction into ``out/name``; return its JSON document.

    ``quick`` is the small version (under a minute in one process); ``repeats``
    overrides the protocol's number of Monte Carlo runs, trials or splits; ``seed`` is the seed
    of every random choice; ``params`` are the experiment's own options (:data:`OPTIONS`:
    ``tau``, ``n_estimators``, ``epochs``), refused where it has none;
    ``data`` names data files (``letter``, ``fashion``) where the protocol needs them.
    """
    if name not in PAPERS:
        raise ValueError(f"unknown experiment {name!r}; distlearn experiment --list names them")
    if repeats is not None and repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    given = {k: v for k, v in (params or {}).items() if v is not None}
    names = {"letter": "letter", "fashion": "fashion_dir"}
    check_options(name, {**given, **{names.get(k, k): v for k, v in (data or {}).items() if v is not None}})
    from ..distributed import executor_for

    root = Path(out)
    out = experiment_dir(root, name)
    inputs = list((data or {}).values())
    check_output(root, "experiment", overwrite=overwrite, inputs=inputs)
    check_output(out, "experiment", overwrite=overwrite, inputs=inputs)
    mod, part = _module(name)
    t0 = time.perf_counter()
    key, todo = mod.plan(part, quick=quick, repeats=repeats, data=dict(data or {}), params={**given, "seed": seed})
    key = {"experiment": name, "version": mod.VERSION, **key}
    refuse_other_run(out, key, overwrite=overwrite)  # before anything is written
    claim_dir(root, "experiment")
    claim_dir(out, "experiment")
    book = Cells(out, key, overwrite=overwrite)
    cells = {n: c for n, _, _ in todo if (c := book.get(n)) is not None}
    pending = [t for t in todo if t[0] not in cells]
    log(f"{name}: {len(todo)} cells, {len(cells)} already done, {len(pending)} to run")
    if pending:
        with executor_for(scheduler, n_workers=n_workers) as ex:
            client = getattr(ex, "client", None)
            if client is not None:
                log(f"Dask cluster: {client.scheduler.address}, dashboard {client.dashboard_link}")
            done = [0]

            def told(cell: str, res: dict[str, Any]) -> None:
                done[0] += 1
                if progress is not None:
                    progress(done[0], len(pending), cell)

            cells.update(book.run(ex, pending, told))
    doc = mod.report(part, key, {n: cells[n] for n, _, _ in todo})
    doc.update({"experiment": name, "title": mod.TITLE[part] if isinstance(mod.TITLE, dict) else mod.TITLE,
                "config": {**key, **doc.get("config", {})}, "cells_run": len(pending),
                "cells_resumed": len(todo) - len(pending), "seconds": time.perf_counter() - t0})
    text = mod.render(part, doc)
    files = [out / f"{name}.json", out / f"{name}.md"]
    if figures and (plt := pyplot()) is not None:
        png = out / f"{name}.png"
        mod.plot(part, doc, png)
        plt.close("all")
        files.append(png)
    doc["files"] = [str(f) for f in files]
    write_json(out / f"{name}.json", doc)
    write_markdown(out, name, doc["title"], PAPERS[name][2], text, quick=quick, figure=len(files) > 2,
                   n_run=len(pending), n_resumed=len(todo) - len(pending), seconds=doc["seconds"])
    doc["text"] = text
    return doc
