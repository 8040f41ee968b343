"""The README's `distlearn` command blocks, run as written with the installed `distlearn` command.

The first block runs on data the package generates, line by line, in one empty directory. For the
second ("your own files"), small files of each format are written under the README's names first;
its cluster address is this suite's real scheduler; the SLURM line needs a batch system and the
demo line has its own test (tests/test_cli.py), so those two are skipped, by name.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"
BIN = Path(sys.executable).parent
SKIPPED = {"slurm:": "needs a SLURM batch system", "distlearn demo": "tests/test_cli.py runs the demo"}


def blocks() -> list[list[str]]:
    """The two ```bash blocks of the section 'The `distlearn` command', as command lines."""
    text = README.read_text()
    section = text[text.index("## The `distlearn` command"):]
    section = section[: section.index("\n## ", 5)]
    found = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [[ln.split("  #")[0].strip() for ln in b.splitlines() if ln.strip() and not ln.startswith("#")]
            for b in found]


def _run(line: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_readme_has_both_blocks():
    b = blocks()
    assert len(b) == 2 and len(b[0]) >= 15 and all(ln.startswith("distlearn ") for blk in b for ln in blk)


def test_generated_data_block_runs_as_written(tmp_path):
    for line in blocks()[0]:
        r = _run(line, tmp_path)
        assert r.returncode == 0, f"{line}\n{r.stderr[-3000:]}"
    assert (tmp_path / "results" / "obpm-table1" / "obpm-table1.md").is_file() and (tmp_path / "labels.zarr").is_dir()
    assert np.load(tmp_path / "labels.npy").shape == (1000,)


def _own_files(d: Path) -> None:
    """Small files in each format, under the README's names."""
    from tests.data.test_idx import idx_bytes, write

    rs = np.random.default_rng(0)
    lab = rs.integers(1, 27, 600)
    X = np.clip(rs.integers(0, 16, (26, 16))[lab - 1] + rs.integers(-2, 3, (600, 16)), 0, 15)
    (d / "letter.svm").write_text("".join(f"{c} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(r) if v) + "\n"
                                          for c, r in zip(lab, X)))
    write(d / "train-images-idx3-ubyte.gz", idx_bytes(rs.integers(0, 256, (50, 28, 28)), "ubyte"), True)
    write(d / "train-labels-idx1-ubyte.gz", idx_bytes(rs.integers(0, 10, 50), "ubyte"), True)
    (d / "table.csv").write_text("a,b,label\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20)))
    seqs = ["".join(rs.choice(list("ACGT"), 30)) for _ in range(20)]
    (d / "sites.fa.gz").write_bytes(gzip.compress("".join(f">s{i} {1 if i % 2 else -1}\n{s}\n"
                                                          for i, s in enumerate(seqs)).encode()))
    r = _run("distlearn generate rcv1-files gen --n-samples 400", d)
    assert r.returncode == 0, r.stderr
    for f in (d / "gen").iterdir():
        if f.name.startswith("lyrl2004_tokens") or f.name == "rcv1-v2.topics.qrels":
            (d / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    shutil.rmtree(d / "gen")
    r = _run("distlearn generate rcv1 big.svm --n-samples 3000", d)
    assert r.returncode == 0, r.stderr


def test_own_files_block_runs_as_written(tmp_path, dask_scheduler):
    _own_files(tmp_path)
    ran = []
    for line in blocks()[1]:
        if any(k in line for k in SKIPPED):
            continue
        r = _run(line.replace("tcp://127.0.0.1:8786", dask_scheduler["address"]), tmp_path)
        assert r.returncode == 0, f"{line}\n{r.stderr[-3000:]}"
        ran.append(line.split()[1])
    assert ran.count("convert") == 6 and "experiment" in ran
    assert (tmp_path / "results" / "letter-conversions" / "letter-conversions.md").is_file()
