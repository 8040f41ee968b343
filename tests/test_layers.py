"""The package's layers: imports go down only, and no two layers import each other.

Walks every module of ``distlearn/`` with ``ast`` (module-level imports and the
ones inside functions alike) and checks each ``distlearn`` import against the
layer table of ARCHITECTURE.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "distlearn"

#: Layer of every top-level module or package, bottom up.  A module may import its own
#: package's modules and any lower layer's, never a sibling of its own layer (no exceptions).
LAYERS: dict[str, int] = {
    "_urls": -1,  # where a store lives (local path or fsspec URL): below the output policy that uses it
    "_version": 0, "_config": 0, "rng": 0, "_validation": 0, "_outputs": 0, "_tasks": 0, "_compile": 0,
    "data": 1,
    "stream": 2,
    "learners": 3,
    "conversions": 4, "ensembles": 4,
    "distributed": 5,
    "estimators": 6,
    "model": 7,
    "training": 8, "experiments": 8, "export": 8, "warmup": 8,
    "cli": 9,
    "__main__": 10, "__init__": 10,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _top(module: str) -> str:
    """``distlearn.x.y`` -> ``x`` (the package itself -> ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every distlearn import in the file."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "distlearn"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "distlearn":
                continue
            if node.module is None or target == "distlearn":  # "from . import x": x is a module or a name
                for a in node.names:
                    cand = f"{target}.{a.name}"
                    sub = PKG.parent / Path(*cand.split("."))
                    out.append((node.lineno, cand if sub.with_suffix(".py").exists() or sub.is_dir() else target))
            else:
                out.append((node.lineno, target))
    return out


def _graph() -> dict[str, list[tuple[str, int, str]]]:
    """Layer -> [(file, line, imported module)] for every import that leaves the file's own top module."""
    edges: dict[str, list[tuple[str, int, str]]] = {}
    for path in sorted(PKG.rglob("*.py")):
        src = _top(_module_name(path))
        for line, target in _imports(path):
            dst = _top(target)
            if dst != src:
                edges.setdefault(src, []).append((f"{path.relative_to(PKG.parent)}", line, dst))
    return edges


def test_every_top_level_module_has_a_layer():
    names = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    assert names - set(LAYERS) == set(), "add new modules to LAYERS (and to ARCHITECTURE.md)"


def test_imports_go_down_the_layers_only():
    bad = [f"{f}:{line}: {src} (layer {LAYERS[src]}) imports {dst} (layer {LAYERS[dst]})"
           for src, lst in _graph().items() for f, line, dst in lst
           if LAYERS[dst] >= LAYERS[src] and src not in ("__init__", "__main__")]
    assert bad == [], "upward or sideways imports:\n" + "\n".join(bad)


def test_no_cycle_between_top_level_modules():
    edges = {src: {dst for _, _, dst in lst} for src, lst in _graph().items()}
    seen: dict[str, int] = {}

    def visit(n: str, stack: list[str]) -> None:
        seen[n] = 1
        for m in edges.get(n, ()):
            if seen.get(m) == 1:
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(m):] + [m]) if m in stack else m)
            if m not in seen:
                visit(m, stack + [m])
        seen[n] = 2

    for n in list(edges):
        if n not in seen:
            visit(n, [n])
    assert all(v == 2 for v in seen.values())


def test_tasks_never_import_an_estimator():
    """What runs on a Dask worker (the distributed layer and below) never imports the estimators."""
    hits = [f"{f}:{line}" for src, lst in _graph().items() if LAYERS[src] <= LAYERS["distributed"]
            for f, line, dst in lst if dst == "estimators"]
    assert hits == []


def test_the_walker_sees_function_level_and_relative_imports(tmp_path):
    # The checker itself: a relative import inside a function is found and resolved.
    f = PKG / "learners" / "linear.py"
    found = {t for _, t in _imports(f)}
    assert "distlearn.learners._kernels" in found
    graph = _graph()
    assert ("distributed", "stream") in {(s, d) for s, lst in graph.items() for _, _, d in lst if s == "distributed"}


#: What builds a Dask client or starts a cluster: called only inside ``distributed/``.
CLIENT_MAKERS = {"Client", "LocalCluster", "get_client", "start_jobqueue_cluster", "make_jobqueue_cluster"}


def _client_uses(path: Path) -> list[str]:
    """``file:line: what`` for every client built, cluster started or task submitted to a client in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(PKG.parent) if path.is_relative_to(PKG.parent) else path.name
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in (
                "distributed", "dask"):
            hits += [f"{rel}:{node.lineno}: from {node.module} import {a.name}" for a in node.names
                     if a.name in CLIENT_MAKERS]
        if isinstance(node, ast.ImportFrom) and any(a.name in CLIENT_MAKERS for a in node.names) and (
                node.level or (node.module or "").startswith("distlearn")):
            hits.append(f"{rel}:{node.lineno}: imports " + ", ".join(a.name for a in node.names))
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in CLIENT_MAKERS:
            hits.append(f"{rel}:{node.lineno}: {name}(")
        elif isinstance(f, ast.Attribute) and f.attr in ("submit", "map", "scatter", "compute", "gather") \
                and "client" in ast.unparse(f.value).lower():
            hits.append(f"{rel}:{node.lineno}: {ast.unparse(f)}(")
    return hits


def test_no_client_outside_distributed():
    """Only ``distributed/`` builds a client, starts a cluster or submits to a client: everything
    else passes ``scheduler=`` (plain data) to ``executor_for`` and runs through the Executor."""
    outside = [p for p in sorted(PKG.rglob("*.py")) if "distributed" not in p.relative_to(PKG).parts[:1]]
    hits = [h for p in outside for h in _client_uses(p)]
    assert hits == [], "clients outside distributed/:\n" + "\n".join(hits)


def test_the_client_check_can_fail(tmp_path):
    # The checker itself: each way of reaching a client is found (so the test above can fail).
    f = tmp_path / "probe.py"
    f.write_text("from distributed import Client\nfrom .distributed.cluster import get_client\n"
                 "def g(client, fn):\n    c = Client('tcp://x:1')\n    with get_client('local') as cl:\n"
                 "        return client.submit(fn), self.client.scatter(1), cl.map(fn, [1])\n")
    found = [h.split(": ", 1)[1] for h in _client_uses(f)]
    assert sorted(found) == sorted(["from distributed import Client", "imports get_client", "Client(",
                                    "get_client(", "client.submit(", "self.client.scatter("]), found
    inside = _client_uses(PKG / "distributed" / "executor.py")
    assert any("self.client.submit(" in h for h in inside)  # the executor itself is where they live
