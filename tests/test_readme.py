"""The README's `distlearn` command blocks, run as written with the installed `distlearn` command.

The first block runs on data the package generates, line by line, in one empty directory. For the
second ("your own files"), small files of each format are written under the README's names first;
its cluster address is this suite's real scheduler; the SLURM line needs a batch system and the
demo line is run below against the README's sample output, so those two are skipped, by name.

The README's sample outputs (the quickstart table, a `$ distlearn ...` transcript) are compared
with a real run line by line: every line shown appears, in order, with the same words and columns
(numbers may differ). The other command blocks (paper-scale runs, real clusters) are too long for
the suite: each `distlearn` line there is parsed by the command's own parser (options, choices).
"""

from __future__ import annotations

import gzip
import os
import shlex
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BIN = Path(sys.executable).parent
SKIPPED = {"slurm:": "needs a SLURM batch system", "distlearn demo": "test_demo_prints_what_the_readme_shows"}


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    (d / "events").mkdir()
    for i in range(3):  # a directory of parts, as Dask's to_parquet writes one
        pq.write_table(pa.table({"x": rs.normal(size=20), "n": rs.integers(0, 9, 20), "label": rs.integers(0, 2, 20)}),
                       d / "events" / f"part.{i}.parquet")
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
    assert ran.count("convert") == 7 and "experiment" in ran
    assert (tmp_path / "results" / "letter-conversions" / "letter-conversions.md").is_file()


def _code_blocks() -> list[tuple[str, list[str]]]:
    """Every fenced block of the README: (language, lines)."""
    return [(lang, body.splitlines()) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(),
                                                                  flags=re.S | re.M)]


def _shape(line: str) -> str:
    """A line's words and columns without its numbers: each number (1,234 / -1,1 / 0.25) is '#',
    a rule of dashes one '-', runs of spaces one space."""
    line = re.sub(r"[-+]?\d[\d,]*(\.\d+)?", "#", line)
    return " ".join(re.sub(r"-{2,}", "-", line).split())


def _in_order(shown: list[str], printed: str) -> None:
    """Every non-blank line of ``shown`` has the shape of a line of ``printed``, in the same order."""
    got = [_shape(ln) for ln in printed.splitlines() if ln.strip()]
    at = 0
    for ln in (x for x in shown if x.strip()):
        want = _shape(ln)
        assert want in got[at:], f"README line not printed (in this order):\n  {ln}\nprinted:\n{printed}"
        at = got.index(want, at) + 1


def test_shape_ignores_numbers_only():
    assert _shape("rcv1-like   50,000   -1,1  1.87   yes") == _shape("rcv1-like 2,000 -1,1 0.05 yes")
    assert _shape("total 12.0 s; All stores equal") != _shape("total 12.0 s; MISMATCH")
    assert _shape("----  ---") == _shape("--------  ------") == "- -"
    with pytest.raises(AssertionError, match="not printed"):
        _in_order(["b 1", "a 2"], "a 1\nb 2\n")  # both lines are there, in the other order


def _demo_sample() -> list[str]:
    found = [lines for lang, lines in _code_blocks() if not lang and lines and lines[0].startswith("distlearn demo:")]
    assert len(found) == 1
    return found[0]


def test_the_demo_sample_shows_every_part_of_the_table():
    text = "\n".join(_demo_sample())
    for part in ("= sklearn", "stores: demo-output/rcv1-like.zarr", "progressive error per epoch",
                 "training on obpm-train", "total ", "All stores equal scikit-learn's parse."):
        assert part in text, part


@pytest.mark.cluster
def test_demo_prints_what_the_readme_shows(tmp_path, dask_scheduler):
    """`distlearn demo` (smaller, on this suite's scheduler) prints every line of the README's sample."""
    r = _run(f"distlearn demo --n-samples 2000 --scheduler {dask_scheduler['address']}", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    _in_order(_demo_sample(), r.stdout)
    assert (tmp_path / "demo-output" / "rcv1-like.zarr").is_dir()


def _transcripts() -> list[tuple[str, list[str]]]:
    """The README's `$ distlearn ...` transcripts: (command, the lines it prints)."""
    out = []
    for lang, lines in _code_blocks():
        if not lang and lines and lines[0].startswith("$ distlearn "):
            out.append((lines[0][2:], lines[1:]))
    return out


def test_transcripts_print_what_the_readme_shows(tmp_path):
    ts = _transcripts()
    # a new one needs its data made here
    assert [c for c, _ in ts] == ["distlearn convert a.csv a.zarr --label-column 0", "distlearn train iris.csv",
                                  "distlearn convert data.svm data.zarr"]
    # the label column the first shows: a continuous feature f1 (0.1257 in row 1) asked for as the label
    (tmp_path / "a.csv").write_text("f1,f2,label\n0.1257,3,1\n0.5,2,-1\n0.25,1,1\n")
    # the second: iris.csv, whose class names are in its last column, species
    (tmp_path / "iris.csv").write_text("sepal_length,sepal_width,petal_length,petal_width,species\n"
                                       "5.1,3.5,1.4,0.2,setosa\n7.0,3.2,4.7,1.4,versicolor\n")
    # the bad input the second shows: an index 0 on line 5001 of a 1-based file
    (tmp_path / "data.svm").write_text("".join(f"{1 if i % 2 else -1} 1:{i % 7} 3:1\n" for i in range(5000))
                                       + "1 0:1\n")
    for cmd, shown in ts:
        r = _run(cmd, tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        _in_order(shown, r.stdout + r.stderr)
    assert not (tmp_path / "data.zarr").exists() and not (tmp_path / "a.zarr").exists()


def _command_lines() -> list[str]:
    """Every `distlearn ...` line of every ```bash block (continuation lines joined, comments cut)."""
    out = []
    for lang, lines in _code_blocks():
        if lang != "bash":
            continue
        text = "\n".join(ln.split("  #")[0].rstrip() if not ln.lstrip().startswith("#") else "" for ln in lines)
        out += [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip().startswith("distlearn ")]
    return out


def test_every_readme_command_line_parses():
    """The lines too long or too cluster-bound to run here name real options and choices."""
    from distlearn.cli import build_parser

    lines = _command_lines()
    assert len(lines) >= len(blocks()[0]) + len(blocks()[1]) + 8
    for line in lines:
        argv = shlex.split(line)[1:]
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:
            raise AssertionError(f"README line does not parse: {line}") from e
        assert args.command == argv[0]
