"""Compilation that users do not wait for: `distlearn warmup` fills numba's cache, a later process
finds every kernel there, and what still compiles is announced and reported apart from the fit.

Timing goals (the first train within 10 s, compilation included) live in
benchmarks/bench_coldstart.py; nothing here asserts a wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from distlearn import _compile
from distlearn.cli import main
from distlearn.data import _generate as generate
from distlearn.warmup import JOBS, warmup

ROOT = Path(__file__).resolve().parents[1]


def _distlearn(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DISTLEARN_NUMBA_CACHE"}
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "distlearn", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=900)


def test_warmup_fills_the_cache_and_the_next_process_compiles_nothing(tmp_path):
    cache = tmp_path / "numba-cache"
    p = _distlearn(["warmup", "--job", "linear-sparse", "--json"], cache, tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    (job,) = doc["jobs"]
    assert job["job"] == "linear-sparse"
    assert "distlearn.learners._kernels._learn_csr" in job["compiled"], job
    assert job["compile_seconds"] > 0
    assert doc["cache_dir"] and Path(doc["cache_dir"]).is_relative_to(cache)
    index = list(cache.rglob("_kernels._learn_csr-*.nbi"))
    assert index and list(cache.rglob("_kernels._learn_csr-*.nbc")), sorted(map(str, cache.rglob("*")))

    # a store as `distlearn generate rcv1` writes it, of another size: the same kernel signatures
    store = tmp_path / "rcv1.zarr"
    generate.run("rcv1", store, n_samples=300, n_features=800, seed=3)
    p = _distlearn(["train", str(store), "--model", "pa", "--json"], cache, tmp_path)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["compiled"] == [] and res["compile_seconds"] == 0.0
    assert res["online_errors"] > 0 and res["n_samples"] == 300

    # and warmup again finds everything in the cache
    p = _distlearn(["warmup", "--job", "linear-sparse", "--json"], cache, tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["jobs"][0]["compiled"] == []


def test_watch_times_compilations_and_announces_once_per_process(monkeypatch):
    monkeypatch.setattr(_compile, "_ANNOUNCED", [False])
    said: list[str] = []

    @njit(cache=False)
    def add(a, b):
        return a + b

    with _compile.watch(announce=said.append) as log:
        assert add(1, 2) == 3
        assert add(1.5, 2.0) == 3.5  # a second signature: a second compilation
        assert add(2, 2) == 4  # compiled already
    assert log.kernels == [f"{__name__}.{add.py_func.__qualname__}"] * 2
    assert log.seconds > 0
    assert said == log.kernels[:1]  # announced at the first compilation only
    with _compile.watch(announce=said.append) as log2:
        add(np.float32(1), np.float32(2))
    assert len(log2.kernels) == 1 and said == log.kernels[:1]  # once per process, whoever watches
    with _compile.watch() as log3:
        add(3, 4)
    assert log3.kernels == [] and log3.seconds == 0.0


def test_train_announces_compilation_and_reports_it_apart_from_the_fit(tmp_path, monkeypatch, capsys):
    """The command's plumbing, with a real compilation inside the fit (a fresh kernel)."""
    from distlearn.estimators import Perceptron

    monkeypatch.setattr(_compile, "_ANNOUNCED", [False])
    store = tmp_path / "s.zarr"
    generate.run("rcv1", store, n_samples=200, n_features=300, seed=1)
    Perceptron(epochs=1).fit(str(store))  # whatever the real kernels need is compiled or loaded now

    @njit(cache=False)
    def fresh(x):
        s = 0.0
        for v in x:
            s += v * v
        return s

    real_fit = Perceptron.fit
    dtypes = iter([np.float64, np.float32, np.float32])  # two new signatures, then a compiled one

    def fit(self, X, y=None):
        fresh(np.ones(3, next(dtypes)))
        return real_fit(self, X, y)

    monkeypatch.setattr(Perceptron, "fit", fit)
    # stderr not a terminal (a script, a log): nothing announced, the output reports the compilation
    assert main(["train", str(store), "--model", "perceptron"]) == 0
    out, err = capsys.readouterr()
    fit_line = next(ln for ln in out.splitlines() if ln.startswith("fit"))
    assert "compiling kernels took" in fit_line and "first run only" in fit_line and err == ""

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # on a terminal it is announced, like progress bars
    assert main(["train", str(store), "--model", "perceptron", "--json"]) == 0
    out, err = capsys.readouterr()
    res = json.loads(out)
    assert res["compiled"] == [f"{__name__}.{fresh.py_func.__qualname__}"]
    assert res["compile_seconds"] > 0 and res["fit_seconds"] >= 0
    assert err.count("compiling kernels (first run only") == 1 and err.startswith("distlearn train: ")

    assert main(["train", str(store), "--model", "perceptron"]) == 0  # compiled now: the plain fit line
    out, err = capsys.readouterr()
    fit_line = next(ln for ln in out.splitlines() if ln.startswith("fit"))
    assert "compiling" not in fit_line and "compiling" not in err


def test_warmup_jobs_cover_the_readme_models(capsys):
    defaults = [n for n, j in JOBS.items() if j.default]
    assert {"linear-sparse", "obpm-sparse", "linear-dense", "obpm-dense"} <= set(defaults)
    with pytest.raises(ValueError, match="unknown warmup job.*'nope'.*linear-sparse"):
        warmup(["nope"])
    with pytest.raises(SystemExit):
        main(["warmup", "--help"])
    text = capsys.readouterr().out
    for name in JOBS:
        assert name in text
    assert "NUMBA_CACHE_DIR" in text and "read-only" in text
    assert main(["warmup", "--job", "linear-sparse", "--all"]) == 2
    assert "--job and --all exclude each other" in capsys.readouterr().err


_HELPER = '''
from numba import njit
from ._config import NUMBA_FLAGS


@njit(inline="always", **NUMBA_FLAGS)
def helper(x):
    return x + {value}
'''
_USER = '''
from numba import njit
from ._config import NUMBA_FLAGS
from ._t_helper import helper


@njit(**NUMBA_FLAGS)
def engine(x):
    return helper(x) * 2.0
'''


def test_a_changed_helper_retires_the_cached_engine_that_inlines_it(tmp_path):
    """numba stamps a cached function by its own file alone; an engine that inlines a helper from another file
    kept its machine code when only the helper changed, and computed with the old helper.  Every cached
    function of the package is stamped with all its sources (``_config.package_source_stamp``): a package with
    the package's ``_config.py`` and an engine and its inlined helper in two files, cached, then the helper
    alone changed -- the next process computes with the new helper; unchanged sources load from the cache."""
    import shutil

    pkg = tmp_path / "src" / "stamped"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "distlearn" / "_config.py", pkg / "_config.py")
    (pkg / "_t_user.py").write_text(_USER)
    env = {k: v for k, v in os.environ.items() if k != "DISTLEARN_NUMBA_CACHE"}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path / "src"))
    code = "import stamped._t_user as u; print(u.engine(1.0), sum(u.engine.stats.cache_hits.values()))"

    def run(value: int) -> list[str]:
        (pkg / "_t_helper.py").write_text(_HELPER.format(value=value))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()

    assert run(1) == ["4.0", "0"]  # compiled: (1 + 1) * 2
    assert run(1) == ["4.0", "1"]  # the same sources: loaded from the cache
    assert run(10) == ["22.0", "0"]  # the helper alone changed: compiled again, (1 + 10) * 2


def test_the_package_stamp_follows_content_not_file_times(tmp_path):
    """The stamp changes with any source's content, and not with a file's time alone."""
    from distlearn._config import package_source_stamp

    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    s0 = package_source_stamp(tmp_path)
    os.utime(tmp_path / "a.py", (1, 1))
    assert package_source_stamp(tmp_path) == s0
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    assert package_source_stamp(tmp_path) != s0
