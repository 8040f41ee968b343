"""What every experiment shares: a results directory of cells written as they finish, and resume.

``OUT`` here is one experiment's own directory (``distlearn experiment NAME --out DIR`` uses
``DIR/NAME``).  ``OUT/meta.json`` holds the run's key (store tokens, seed, protocol parameters); a rerun with
another key is refused unless ``overwrite``.  ``OUT/cells/NAME.json`` is one finished task,
written atomically, its sha256 then recorded in ``meta.json`` (``cell_sha256``); a rerun reads the
cells that exist and runs only the others.  A cell file that is not what was written (truncated,
edited: not JSON, not an object, or another digest) is refused in one line naming it (a cell
written but not yet recorded, the run killed in between, is whole: it is read like one an older
version wrote, without a digest to check).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._outputs import check_place


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or None (with a note on stderr) when not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figures (pip install matplotlib)", file=sys.stderr)
        return None
    return plt


#: Every figure is at least this size (inches) and saved at :data:`DPI` (768 x 480 pixels or more),
#: laid out by matplotlib's constrained layout, so titles, labels and legends stay inside it.
MIN_FIGSIZE = (6.4, 4.0)
DPI = 120


def figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = MIN_FIGSIZE, **kw: Any) -> Any:
    """``plt.subplots`` with the house layout: at least :data:`MIN_FIGSIZE`, constrained layout,
    the axes always a 2-D array (``squeeze=False``).  Returns ``(fig, axes)``."""
    plt = pyplot()
    w, h = size
    return plt.subplots(nrows, ncols, figsize=(max(w, MIN_FIGSIZE[0]), max(h, MIN_FIGSIZE[1])),
                        layout="constrained", squeeze=False, **kw)


def save_figure(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` at :data:`DPI` and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def render_text(fn: Callable[..., None], *args: Any) -> str:
    """What a module's ``print_*`` function prints, as a string."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fn(*args)
    return buf.getvalue().strip("\n")


_LOADED: dict[Any, Any] = {}


def loaded(key: Any, load: Callable[[], Any]) -> Any:
    """``load()``, read once per process and kept while the same ``key`` is asked for: the cells of
    one experiment on one worker share the data set they read (one at a time, to bound memory)."""
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load()
    return _LOADED[key]


def write_markdown(out: Path, name: str, title: str, summary: str, text: str, *, quick: bool, figure: bool,
                   n_run: int, n_resumed: int, seconds: float) -> Path:
    """``OUT/NAME.md`` of an experiment: its title and protocol line, the table, the figure and how
    many cells ran (written under a temporary name and renamed)."""
    md = (f"# {title}\n\n{summary}.\n\n"
          + ("**Quick run** (a small version of the protocol: a smoke test, not the result).\n\n" if quick else "")
          + f"```text\n{text}\n```\n\n"
          + (f"![{name}]({name}.png)\n\n" if figure else "")
          + f"{n_run + n_resumed} cells ({n_run} run now, {n_resumed} resumed), {seconds:.1f} s. "
          f"Raw numbers: `{name}.json`.\n")
    path = Path(out) / f"{name}.md"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(md)
    os.replace(tmp, path)
    return path


def ours_vs_paper(ax: Any, labels: Sequence[str], ours: Sequence[float], ours_err: Sequence[float],
                  paper: Sequence[float], paper_err: Sequence[float], *, title: str, xlabel: str,
                  ylabel: str = "test error (%)", rotation: float = 0) -> None:
    """Side-by-side bars with error bars: our numbers and the paper's, per label."""
    import numpy as np

    xs = np.arange(len(labels))
    ax.bar(xs - 0.2, ours, 0.4, yerr=ours_err, capsize=3, label="distlearn")
    ax.bar(xs + 0.2, paper, 0.4, yerr=paper_err, capsize=3, label="paper")
    ax.set_xticks(xs, labels, rotation=rotation)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file renamed into place)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def refuse_other_run(out: str | os.PathLike[str], key: dict[str, Any], *, overwrite: bool,
                     extendable: Sequence[str] = ()) -> dict[str, Any] | None:
    """Refuse (``ValueError``, one line) to resume ``out`` when its ``meta.json`` holds a run with
    other values of ``key``'s entries (``extendable`` ones may differ); called before any work,
    with the part of the key known then, and again by :class:`Cells`.  Returns the old meta."""
    meta = Path(out) / "meta.json"
    if overwrite or not meta.exists():
        return None
    try:
        old = json.loads(meta.read_text())
    except ValueError:
        old = None
    if not isinstance(old, dict):
        raise ValueError(f"{meta} is not the meta.json of a distlearn experiment; pass another --out")
    diff = sorted(k for k in key if old.get(k) != key[k] and k not in extendable)
    if diff:
        raise ValueError(f"{out} holds another run's cells (different {', '.join(diff)}); "
                         "pass another --out, or --overwrite to start again")
    return old


class Earlier:
    """An argument of a :meth:`Cells.run` task: the result of the task ``name`` submitted before it."""

    def __init__(self, name: str) -> None:
        self.name = name


class Cells:
    """The cells directory of one experiment run (see the module notes)."""

    def __init__(self, out: str | os.PathLike[str], key: dict[str, Any], *, overwrite: bool = False,
                 extendable: Sequence[str] = ()) -> None:
        self.out = Path(out)
        check_place(self.out, into=True)  # never the working, home or root directory; writable
        self.dir = self.out / "cells"
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.out / "meta.json"
        self.meta: dict[str, Any] = {}
        if meta.exists() and not overwrite:
            self.meta = refuse_other_run(self.out, key, overwrite=False, extendable=extendable) or {}
        elif overwrite and meta.exists():  # only cells of ours: a directory without meta.json has none
            for f in self.dir.glob("*.json"):
                f.unlink()
        self.meta.update(key)
        write_json(meta, self.meta)

    def remember(self, **values: Any) -> None:
        """Keep derived values (a measured radius ...) in ``meta.json`` for the next run."""
        self.meta.update(values)
        write_json(self.out / "meta.json", self.meta)

    def get(self, name: str) -> dict[str, Any] | None:
        """The finished cell ``name``, or None when it is still to run."""
        f = self.dir / f"{name}.json"
        if not f.exists():
            return None
        want = self.meta.get("cell_sha256", {}).get(name)  # None: killed before it was recorded, or older
        why = ""
        try:
            body = f.read_bytes()
            res = json.loads(body)
        except (OSError, ValueError) as e:
            res, why = None, f": {' '.join(str(e).split())}"
        if not isinstance(res, dict) or (want is not None and hashlib.sha256(body).hexdigest() != want):
            raise ValueError(f"{f}: not the cell this experiment wrote (changed or truncated since{why}); delete "
                             "it to run the cell again, or pass --overwrite to start over")
        return res

    def run(self, ex: Any, todo: Sequence[tuple[str, Callable[..., Any], tuple[Any, ...]]],
            progress: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, dict[str, Any]]:
        """Submit ``(name, fn, args)`` tasks on the executor, in this order (the executor starts them
        in it: put the longest first); write each result as it completes.  An argument
        ``Earlier(name)`` is the result of the task ``name`` submitted before it in ``todo``: the task
        runs once that one is done, without waiting for the rest."""
        handles: list[Any] = []
        by_name: dict[str, Any] = {}
        for name, fn, args in todo:
            args = tuple(by_name[a.name] if isinstance(a, Earlier) else a for a in args)
            handles.append(ex.submit(f"{self.out.name}-{name}", fn, *args))
            by_name[name] = handles[-1]
        got: dict[str, dict[str, Any]] = {}
        for i, h in ex.as_completed(handles):
            name = todo[i][0]
            res = ex.result(h)
            cell = self.dir / f"{name}.json"
            write_json(cell, res)
            self.meta.setdefault("cell_sha256", {})[name] = hashlib.sha256(cell.read_bytes()).hexdigest()
            write_json(self.out / "meta.json", self.meta)
            got[name] = res
            if progress is not None:
                progress(name, res)
        return got
