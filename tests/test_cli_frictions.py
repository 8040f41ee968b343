"""The small frictions of a first hour with the command (issue 28): a model that is not there yet,
arguments in the wrong order, a name in the wrong case or mistyped, an existing --save file, and
help that teaches.  Each failure runs in a fresh process: exit 2, one stderr line, no traceback."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distlearn._validation import choose, did_you_mean
from distlearn.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("frictions")
    assert main(["generate", "obpm", str(d / "art.zarr"), "--n-samples", "200", "--no-progress"]) == 0
    (d / "d.svm").write_text("1 1:1 3:2\n-1 2:5\n1 1:1\n")
    assert main(["train", str(d / "art.zarr"), "--model", "perceptron", "--save", str(d / "m.npz")]) == 0
    return d


def _fail_in_fresh_processes(cases: list[list[str]], cwd: Path) -> list[str]:
    """Run every argv at once, each in its own ``python -m distlearn``; each must fail as one line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-m", "distlearn", *argv], cwd=cwd, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for argv in cases]
    errs = []
    for argv, p in zip(cases, procs):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 2, (argv, out, err)
        assert err.count("\n") == 1 and "Traceback" not in err and err.startswith(f"distlearn {argv[0]}: error: "), (argv, err)
        errs.append(err)
    return errs


# argv, then what its one line must say
CASES = [
    (["predict", "nomodel.npz", "art.zarr"], ["nomodel.npz: no such model file", "--save nomodel.npz"]),
    (["evaluate", "nomodel.npz", "art-test.zarr"], ["nomodel.npz: no such model file", "distlearn train STORE"]),
    (["predict", "art.zarr", "m.npz"], ["looks swapped", "usage: distlearn predict MODEL.npz INPUT"]),
    (["predict", "d.svm", "m.npz", "--out", "p.npy"], ["looks swapped", "d.svm is not a model file but m.npz is"]),
    (["predict", "art.zarr#1-vs--1", "m.npz"], ["looks swapped"]),
    (["evaluate", "art-test.zarr", "m.npz"], ["looks swapped", "usage: distlearn evaluate MODEL.npz STORE"]),
    (["evaluate", "art.zarr", "art-test.zarr"], ["art.zarr is a store, not a model file", "--save MODEL.npz"]),
    (["train", "m.npz"], ["m.npz is a model file, not data: looks swapped", "usage: distlearn train STORE"]),
    (["train", "art.zarr", "--test", "m.npz"], ["--test m.npz is a model file"]),
    (["convert", "art.zarr", "d.svm"], ["art.zarr is a store and d.svm a data file: looks swapped",
                                        "usage: distlearn convert INPUT... OUTPUT.zarr"]),
    (["convert", "m.npz", "x.zarr"], ["m.npz is a model file", "not data to convert"]),
    (["train", "art.zarr", "--model", "percepton"], ["invalid choice: 'percepton'; did you mean 'perceptron'",
                                                     "(see distlearn train --help)"]),
    (["train", "art.zarr", "--model", "perceptron", "--param", "conversion=averag"],
     ["got 'averag'; did you mean 'average'?"]),
    (["train", "art.zarr", "--model", "perceptron", "--param", "epoch=2"], ["'epoch'", "did you mean 'epochs'"]),
    (["experiment", "obpm-tabel1", "--out", "x"], ["did you mean 'obpm-table1'"]),
    (["convert", "d.svm", "y.zarr", "--format", "svm"], ["did you mean 'svmlight'"]),
    (["train", "art.zarr", "--model", "perceptron", "--save", "m.npz"],
     ["m.npz already exists; pass --overwrite to replace it"]),
    (["train"], ["the following arguments are required: store"]),
    (["info", "m.npz"], ["m.npz is a model file, not a store", "distlearn evaluate m.npz STORE"]),
]


#: The ones also run in fresh processes (the rest in this one, where a traceback would fail the test too).
FRESH = {0, 2, 9, 11, 17}


def test_each_friction_is_one_line_that_says_what_to_do(files, capsys, monkeypatch):
    model = (files / "m.npz").read_bytes()
    svm = (files / "d.svm").read_text()
    fresh = dict(zip(sorted(FRESH), _fail_in_fresh_processes([CASES[i][0] for i in sorted(FRESH)], files)))
    monkeypatch.chdir(files)
    for i, (argv, says) in enumerate(CASES):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage errors
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"distlearn {argv[0]}: error: "), (argv, err)
        assert i not in fresh or fresh[i] == err
        for text in says:
            assert text in err, (argv, text, err)
    # nothing was written or replaced by any of them
    assert (files / "m.npz").read_bytes() == model and (files / "d.svm").read_text() == svm
    assert not any((files / n).exists() for n in ("x.zarr", "y.zarr", "p.npy", "x"))


def test_names_are_taken_whatever_their_case(files, capsys):
    for name in ("PERCEPTRON", "Perceptron"):
        assert main(["train", str(files / "art.zarr"), "--model", name, "--json",
                     "--param", "conversion=Average"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert res["model"] == "Perceptron" and res["n_samples"] == 200
    from distlearn import OBPM
    from distlearn.conversions import Average, make_conversion
    from distlearn.training import make_estimator

    assert isinstance(make_estimator("OBPM"), OBPM) and isinstance(make_conversion("AVERAGE"), Average)
    args = build_parser().parse_args(["convert", "a.svm", "a.zarr", "--format", "SVMlight", "--dtype", "Float64"])
    assert (args.format, args.dtype) == ("svmlight", "float64")


def test_choose_and_did_you_mean():
    assert choose("Obpm", ["obpm", "perceptron"], "model") == "obpm"
    with pytest.raises(ValueError, match=r"unknown model 'percepton'; did you mean 'perceptron'\? \(choose from"):
        choose("percepton", ["obpm", "perceptron"], "model")
    assert did_you_mean("xyz", ["obpm", "perceptron"]) == ""
    assert did_you_mean("svm", ["svmlight", "idx", "csv"]).startswith("; did you mean 'svmlight'")
    assert did_you_mean("pa-ii", ["PA", "PA-I", "PA-II"]) == "; did you mean 'PA-II' or 'PA-I'?"


def test_save_refuses_an_existing_file_unless_overwrite(files, capsys):
    out = files / "again.npz"
    args = ["train", str(files / "art.zarr"), "--model", "perceptron", "--save", str(out)]
    assert main(args) == 0 and main(args) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    before = out.stat().st_mtime_ns
    assert main([*args, "--overwrite", "--seed", "3"]) == 0 and out.stat().st_mtime_ns != before
    (files / "notes.npz").write_text("mine")  # --overwrite replaces a model file, nothing else
    assert main([*args[:-1], str(files / "notes.npz"), "--overwrite"]) == 2
    assert "is not a distlearn model file" in capsys.readouterr().err
    assert (files / "notes.npz").read_text() == "mine"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_help_teaches(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    for name, sp in _subparsers().items():
        assert name in top
        text = sp.format_help()
        examples = [ln for ln in (sp.epilog or "").splitlines() if ln.strip().startswith(f"distlearn {name}")]
        assert examples and "example" in sp.epilog, f"{name}: no example line"
        for line in examples:  # the examples parse
            build_parser().parse_args(line.split("#")[0].replace("\\", "").split()[1:])
        for a in sp._actions:  # a default that says something is shown
            if any(a.default is v for v in (None, False, True, argparse.SUPPRESS)) or not a.option_strings:
                continue
            help_line = sp._get_formatter()._expand_help(a) if a.help else ""
            assert "default" in help_line, f"{name} {a.option_strings}: default {a.default!r} not shown"
        assert "--help" in text
    assert "distlearn COMMAND --help" in top and "distlearn predict m.npz" in top


def test_a_zero_based_svmlight_file_reads_wherever_the_error_says_to_pass_zero_based(tmp_path, capsys):
    """scikit-learn's ``dump_svmlight_file`` writes 0-based indices by default; the reader's refusal says
    "pass --zero-based", so every command that reads a data file takes that flag: train (and its --test),
    predict and evaluate, with the same model and numbers as the converted store."""
    import numpy as np
    from sklearn.datasets import dump_svmlight_file, load_iris

    X, y = load_iris(return_X_y=True)
    svm, zarr = tmp_path / "iris.svm", tmp_path / "iris.zarr"
    dump_svmlight_file(X, y, str(svm))  # zero_based=True is scikit-learn's default
    assert main(["train", str(svm), "--model", "perceptron"]) == 2
    err = capsys.readouterr().err
    assert "feature index 0 in a 1-based file" in err and "--zero-based" in err
    assert main(["train", str(svm), "--zero-based", "--model", "perceptron", "--test", str(svm),
                 "--save", str(tmp_path / "m.npz"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert main(["convert", str(svm), str(zarr), "--zero-based"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "m.npz"), str(svm), "--zero-based", "--json"]) == 0
    ev_file = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(tmp_path / "m.npz"), str(zarr), "--json"]) == 0
    ev_store = json.loads(capsys.readouterr().out)
    assert ev_file["n"] == ev_store["n"] == 150
    assert ev_file["errors"] == ev_store["errors"] and ev_file["confusion"] == ev_store["confusion"]
    assert abs(res["test_error"] - ev_file["error"]) < 1e-12
    out = tmp_path / "p.npy"
    assert main(["predict", str(tmp_path / "m.npz"), str(svm), "--zero-based", "--out", str(out)]) == 0
    capsys.readouterr()
    assert np.mean(np.load(out) != y) == ev_file["error"]


@pytest.mark.parametrize("argv, want", [
    (["evaluate", "{m}", "{zarr}", "--zero-based"], "error: --zero-based reads a data file; "),
    (["train", "{zarr}", "--zero-based", "--model", "perceptron"], "--zero-based reads an svmlight data file"),
    (["predict", "{m}", "{zarr}", "--zero-based", "--workers", "1"], "error: --zero-based reads a data file; "),
    (["predict", "{m}", "{svm}", "--zero-based", "--workers", "1"], "predicting on a cluster (--workers/--scheduler) "
                                                                    "reads a store"),
    (["evaluate", "{m}", "{csv}", "--zero-based"], "t.csv: --zero-based does not apply to csv input"),
    (["predict", "{m}", "{csv}", "--zero-based"], "t.csv: --zero-based does not apply to csv input"),
])
def test_zero_based_where_it_cannot_apply_is_one_line(tmp_path, capsys, argv, want):
    from sklearn.datasets import dump_svmlight_file, load_iris

    X, y = load_iris(return_X_y=True)
    dump_svmlight_file(X, y, str(tmp_path / "iris.svm"))
    zarr, m = tmp_path / "iris.zarr", tmp_path / "m.npz"
    assert main(["convert", str(tmp_path / "iris.svm"), str(zarr), "--zero-based"]) == 0
    assert main(["train", str(zarr), "--model", "perceptron", "--save", str(m)]) == 0
    (tmp_path / "t.csv").write_text("label,a,b,c,d\n0,1,2,3,4\n")
    capsys.readouterr()
    argv = [w.format(m=m, zarr=zarr, csv=tmp_path / "t.csv", svm=tmp_path / "iris.svm") for w in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err, err
    assert "zero_based" not in err.replace(str(tmp_path), ""), err  # the command names its flags, not the API's parameters


def test_predict_on_a_table_of_the_features_alone(tmp_path, capsys):
    """A CSV of the model's features with no label column: was refused (column 0 taken as the label by default,
    "3 features, the model has 4"); now read as features alone, by itself (exactly the model's number of
    columns, none named as a label) or with --label-column none -- and a named label column still reads."""
    import numpy as np
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    head = "sepal_length,sepal_width,petal_length,petal_width"
    np.savetxt(tmp_path / "iris.csv", np.column_stack([X, y]), delimiter=",", header=head + ",label", comments="")
    np.savetxt(tmp_path / "new.csv", X, delimiter=",", header=head, comments="")
    np.savetxt(tmp_path / "new_labelled.csv", np.column_stack([np.zeros(len(X)), X]), delimiter=",",
               header="label," + head, comments="")
    m = tmp_path / "m.npz"
    assert main(["train", str(tmp_path / "iris.csv"), "--model", "perceptron", "--save", str(m)]) == 0
    capsys.readouterr()
    out = tmp_path / "p.npy"
    assert main(["predict", str(m), str(tmp_path / "new_labelled.csv"), "--out", str(out)]) == 0
    assert main(["predict", str(m), str(tmp_path / "iris.csv"), "--out", str(tmp_path / "q.npy")]) == 0
    assert np.array_equal(np.load(out), np.load(tmp_path / "q.npy"))
    for extra, name in (([], "f.npy"), (["--label-column", "none"], "n.npy")):
        assert main(["predict", str(m), str(tmp_path / "new.csv"), "--out", str(tmp_path / name), *extra]) == 0
        assert np.array_equal(np.load(tmp_path / name), np.load(out)), extra


@pytest.mark.parametrize("extra, flag", [(["--workers", "2"], "--scheduler/--workers"),
                                         (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler/--workers"),
                                         (["--checkpoint", "ck.zarr"], "--checkpoint")])
def test_cluster_flags_on_a_data_file_are_one_line_not_ignored(tmp_path, capsys, extra, flag):
    """A data file is read into memory and fitted in this process (OBPM on arrays never uses a scheduler), so
    --workers, --scheduler and --checkpoint there were silently ignored; now they are refused in one line that
    says to convert the file first, before any cluster starts or any file is written."""
    (tmp_path / "d.svm").write_text("".join(f"{1 if i % 2 else -1} 1:{i % 7} 2:{i % 5}\n" for i in range(60)))
    argv = ["train", str(tmp_path / "d.svm"), "--model", "obpm", *extra]
    argv = [a.replace("ck.zarr", str(tmp_path / "ck.zarr")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: for a store's job" in err and "convert it first" in err, err
    assert not (tmp_path / "ck.zarr").exists()
