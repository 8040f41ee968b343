#!/usr/bin/env python3
"""The two quickstart commands, on a machine that has only Python 3.11+ and pip.

    python3 run.py demo [distlearn demo options]   # set up .venv, run the main job
    python3 run.py test [pytest options]           # set up .venv, run the test suite

Both create (or reuse) a virtual environment in ``.venv`` next to this file and
install the project into it in editable mode with its ``dev`` extras; the
install is redone only when ``pyproject.toml`` changes.  After installing, setup
runs ``distlearn warmup``, which compiles the common numba kernels into their
cache (about half a minute, once), so no training run waits for compilation.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")


def _say(msg: str) -> None:
    print(f"[run.py] {msg}", file=sys.stderr, flush=True)


def setup() -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"distlearn needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PY.exists():
        _say(f"creating virtual environment {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".distlearn-install"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    _say("installing distlearn and its dependencies into .venv (first run takes a few minutes)")
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-q", "-e", f"{ROOT}[dev]"], check=True)
    _say("compiling the common kernels into numba's cache (distlearn warmup; once)")
    subprocess.run([str(PY), "-m", "distlearn", "warmup"], check=True, cwd=ROOT)
    stamp.write_text(want)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "setup"):
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    setup()
    if cmd == "setup":
        return 0
    if cmd == "demo":
        return subprocess.call([str(PY), "-m", "distlearn", "demo", *rest], cwd=ROOT)
    # one test process per core (pytest-xdist), unless the caller chose (-n / -p no:xdist)
    chose = any(a.startswith(("-n", "--numprocesses")) or a in ("no:xdist", "--collect-only") for a in rest)
    par = [] if chose else ["-n", "auto"]
    return subprocess.call([str(PY), "-m", "pytest", *par, *rest], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
