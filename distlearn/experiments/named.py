"""The paper reproductions as named, resumable jobs: ``distlearn experiment NAME --out DIR``.

Every reproduction module listed in :data:`PAPERS` describes its protocol as
*cells* -- one Monte Carlo run, one trial, one fold, one (pair, split) -- each a
seeded, pure task whose JSON result does not depend on where it ran.  This
runner submits the cells that ``DIR`` does not hold yet to the executor (this
process, a LocalCluster or a cluster), writes each one as it finishes
(``DIR/cells/NAME/``), then aggregates all of them and writes

* ``DIR/NAME.json``: every raw number, the aggregates and the paper's numbers;
* ``DIR/NAME.md``: the table, the paper's numbers beside ours, and the verdicts;
* ``DIR/NAME.png``: the figure (when matplotlib is installed).

A rerun with the same options resumes: finished cells are read, not rerun.

A reproduction module provides ``TITLE``, ``VERSION``,
``plan(quick, repeats, data) -> (key, [(cell name, function, args)])``,
``report(key, cells) -> doc``, ``render(doc) -> str`` (the text of the table)
and ``plot(doc, path)``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .._outputs import check_output, claim_dir
from ._cells import Cells, pyplot, write_json, write_markdown

__all__ = ["PAPERS", "run_experiment", "describe_papers"]

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
                    "budget, with DistillCache and at 10 fixed cache sizes against a tuned SVC, 11 permutations; "
                    "digits (bundled), LETTER and Fashion-MNIST when given"),
    "letter-conversions": ("letter_conversions", "",
                           "Dekel & Singer (2005) Table 1, LETTER rows: one pass of the Gaussian-kernel multiclass "
                           "PA on one of k parts (k = 5, 10), tested on the rest; last, average, suffix, tree, "
                           "interval, vote, vote-suffix"),
}


def describe_papers() -> dict[str, str]:
    """name -> one line: the paper, the table or figure, what runs."""
    return {name: what for name, (_, _, what) in PAPERS.items()}


def _module(name: str) -> tuple[ModuleType, str]:
    mod, part, _ = PAPERS[name]
    return importlib.import_module(f"{__package__}.{mod}"), part


def run_experiment(name: str, out: str | Path, *, quick: bool = False, repeats: int | None = None,
                   scheduler: Any = None, n_workers: int | None = None, data: dict[str, Any] | None = None,
                   overwrite: bool = False, figures: bool = True,
                   log: Callable[[str], None] = lambda msg: None,
                   progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the named reproduction into ``out``; return its JSON document.

    ``quick`` is the small version (under a minute in one process); ``repeats``
    overrides the protocol's number of Monte Carlo runs, trials or splits;
    ``data`` names data files (``letter``, ``fashion``) where the protocol needs them.
    """
    if name not in PAPERS:
        raise ValueError(f"unknown experiment {name!r}; distlearn experiment --list names them")
    if repeats is not None and repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    from ..distributed import executor_for

    out = Path(out)
    check_output(out, "experiment", overwrite=overwrite, inputs=list((data or {}).values()))
    mod, part = _module(name)
    t0 = time.perf_counter()
    key, todo = mod.plan(part, quick=quick, repeats=repeats, data=dict(data or {}))
    claim_dir(out, "experiment")
    key = {"experiment": name, "version": mod.VERSION, **key}
    book = Cells(out / "cells" / name, key, overwrite=overwrite)
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
