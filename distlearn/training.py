"""Train and evaluate by name: what ``distlearn train`` does, as library calls.

:func:`make_estimator` builds an estimator from a model name (``"obpm"``, a
rule of the registry :data:`distlearn.learners.RULES`, an adaptive rule
``"arow"``/``"nag"`` or a kernel learner) and a parameter dict,
optionally data-parallel; :func:`evaluate` measures any fitted classifier (or
a saved :class:`~distlearn.model.LinearModel`) on arrays or a store, streamed
block by block; :func:`fit_summary` reports what a fit did, with the same
keys for every estimator.

>>> from distlearn.data.synthetic import make_obpm_artificial
>>> d = make_obpm_artificial(500, 500, n_features=20, random_state=0)
>>> est = make_estimator("alma", {"C": 1.0}, seed=0).fit(d.X_train, d.y_train)
>>> r = evaluate(est, d.X_test, d.y_test)
>>> r["n"], r["error"] < 0.1
(500, True)
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._outputs import PREDICTIONS_ATTR, check_output, naming, replace
from ._urls import absolute
from ._validation import choose, did_you_mean
from .data.store import open_dataset
from .learners import RULES
from .learners.adaptive import ADAPTIVE_RULES

# the estimators (scikit-learn) are imported where they are used: the distlearn command's start
# and the commands that never fit (info, convert, generate) do not pay for them
from .data._labels import LABEL_NAMES
from .stream import is_store

__all__ = ["MODELS", "evaluate", "fit_summary", "make_estimator", "predict", "prediction_widths", "write_values"]

#: Model name -> one line: ``"obpm"``, every rule of the registry, the adaptive rules
#: (:data:`distlearn.learners.adaptive.ADAPTIVE_RULES`), the kernel learners and ``"kernel-obpm"``.
MODELS: dict[str, str] = {"obpm": "Online Bayes Point Machine over any rule (--param base=NAME); by default 20 "
                           "learners per tau, tau chosen from the data (tau=auto), 10 epochs, average",
                          **{name: spec.summary for name, spec in RULES.items()},
                          "arow": ADAPTIVE_RULES["arow"].summary + " (--param r=1)",
                          "nag": ADAPTIVE_RULES["nag"].summary + " (--param loss=logistic|hinge eta=1)",
                          "kernel-perceptron": "kernel (aggressive) perceptron on a budget: --param kernel=rbf "
                                               "gamma=scale|auto|G beta=0.1 budget=variable|N "
                                               "removal=auto|merge|margin|oldest|random",
                          "kernel-mira": "kernel MIRA on a budget, the budget paper's learner (same --param as "
                                         "kernel-perceptron; beta=auto: 1 for more than two classes under a "
                                         "merging budget, else 0.01)",
                          "kernel-pa": "kernel passive-aggressive PA/PA-I/PA-II, single-prototype multiclass "
                                       "(--param variant=PA C=1 kernel=rbf budget=...)",
                          "kernel-obpm": "kernel Online Bayes Point Machine: 20 kernel learners on one shared pool "
                                         "(--param base=kernel-mira tau=0.3), 10 epochs, average"}


def _check_names(est: Any, params: dict[str, Any]) -> None:
    valid = est.get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"parameter {unknown[0]!r} is not a parameter of {type(est).__name__}"
                         f"{did_you_mean(unknown[0], valid)}; it has: {', '.join(sorted(valid))}")


def make_estimator(model: str, params: dict[str, Any] | None = None, *, shards: int | None = None,
                   mixing: str = "uniform", seed: int | None = None, epochs: int | None = None) -> Any:
    """An unfitted estimator for ``model`` with ``params`` set.

    ``shards``: train data-parallel (:class:`~distlearn.ParameterMixing` over the
    rule, any model but ``"obpm"``, which is parallel over its learners, the
    kernel learners and the adaptive ``"arow"``/``"nag"``);
    ``params`` then holds the rule's parameters and the shared ``epochs``,
    ``fit_intercept``, ``dtype``, ``conversion``.  ``seed`` and ``epochs`` set
    ``random_state`` and ``epochs``.  ``model`` is a name of :data:`MODELS`, case ignored.
    """
    model = choose(model, sorted(MODELS), "model")  # case ignored: "OBPM" is "obpm"
    params = dict(params or {})
    from .estimators import (
        ADAPTIVE_ESTIMATORS,
        ESTIMATORS,
        KERNEL_ESTIMATORS,
        OBPM,
        KernelOBPM,
        ParameterMixing,
    )

    classes = {"obpm": OBPM, "kernel-obpm": KernelOBPM, **KERNEL_ESTIMATORS, **ADAPTIVE_ESTIMATORS, **ESTIMATORS}
    est: Any = classes[model]()
    _check_names(est, params)
    if shards:
        if model == "obpm":
            raise ValueError("shards apply to single learners; OBPM parallelises over its learners "
                             "(--workers/--scheduler)")
        if model in KERNEL_ESTIMATORS or model == "kernel-obpm":
            raise ValueError("shards (parameter mixing) apply to linear learners; a kernel model trains in one "
                             "pass over its cache")
        if model in ADAPTIVE_ESTIMATORS:
            raise ValueError(f"shards (parameter mixing) do not apply to {model}: mixing its per-feature statistics "
                             "is not defined; train it without shards")
        shared = {k: params.pop(k) for k in ("epochs", "fit_intercept", "dtype", "conversion") if k in params}
        est = ParameterMixing(base=model, base_params=params or None, n_shards=shards, mixing=mixing)
        params = shared
    if seed is not None:
        params["random_state"] = seed
    if epochs:
        params["epochs"] = epochs
    return est.set_params(**params)


def _width(est: Any) -> int | None:
    """The number of features a fitted model reads."""
    for name in ("n_features_in_",):
        if getattr(est, name, None) is not None:
            return int(getattr(est, name))
    if getattr(est, "coef_", None) is not None:
        return int(np.asarray(est.coef_).shape[-1])
    if getattr(est, "support_vectors_", None) is not None:
        return int(est.support_vectors_.shape[1])
    return None


def _fit_width(X: Any, d: int | None, where: str) -> Any:
    """``X`` with the model's column count: narrower sparse input is widened, wider input refused."""
    if d is None or X.shape[1] == d:
        return X
    if X.shape[1] > d:
        if sp.issparse(X) and (X.nnz == 0 or int(X.indices.max()) < d):
            return X[:, :d]
        raise ValueError(f"{where}: {X.shape[1]} features, but the model was trained on {d}")
    if sp.issparse(X):
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    raise ValueError(f"{where}: {X.shape[1]} features, but the model was trained on {d}")


def _read_names(read: dict[str, Any]) -> str:
    return ", ".join(f"{k} (--{k.replace('_', '-')})" for k in sorted(read))


def _pieces(X: Any, y: Any = None, *, format: str | None = None, read: dict[str, Any] | None = None,
            labels: bool = True) -> Any:
    """``(X, y, where)`` pieces of arrays, a store (or view), or any file the readers know; ``read``: the
    data file's reader options (``zero_based``, ``label_column``, as :func:`distlearn.data.open_reader` takes
    them; refused for a store or arrays, which have no such choice).  ``labels=False`` (predict) also takes
    ``label_column=False``, a table without a label column, whose pieces' ``y`` is None."""
    from .data.readers import _reader_options, detect_format, is_data_file, needs_labels

    read = {k: v for k, v in (read or {}).items() if v is not None}
    if labels:
        needs_labels(read, "training and evaluating need the labels")
    if is_store(X) and not is_data_file(X):
        if y is not None:
            raise ValueError("y must be None when X is a distlearn store (the store holds the labels)")
        if read:
            raise ValueError(f"{_read_names(read)} read a data file; {X} is a store (it holds its features and labels)")
        ds = open_dataset(X)
        return ((b.X, b.y, f"{ds.path}, block {i}") for i, b in enumerate(ds.iter_blocks()))
    if isinstance(X, (str, os.PathLike)):  # a data file
        from .data.readers import open_reader

        path = os.fspath(X)
        fmt = format or detect_format(path)
        return ((Xb, yb, path) for Xb, yb in open_reader(path, format=fmt, **_reader_options(fmt, read, path)))
    if read:
        raise ValueError(f"{_read_names(read)} read a data file; the input is arrays")
    return iter([(X, y, "the input")])


def evaluate(est: Any, X: Any, y: Any = None, *, read: dict[str, Any] | None = None) -> dict[str, Any]:
    """Test error of a fitted classifier (or a loaded model file) on arrays, or on a store or data file
    streamed block by block (``y`` None; ``read``: the data file's reader options, e.g. ``{"zero_based": True}``).

    Returns ``n`` rows, ``errors`` and ``error`` (their fraction), ``accuracy``, the ``labels``
    (the model's classes, then any test label it does not know), the ``confusion`` matrix
    (rows: true label, columns: predicted, in ``labels`` order) and ``per_class`` precision,
    recall, F1 and support.
    """
    classes = [c.item() if hasattr(c, "item") else c for c in np.asarray(est.classes_)]
    labels = list(classes)
    index = {c: i for i, c in enumerate(labels)}
    conf = np.zeros((len(labels), len(labels)), dtype=np.int64)
    d = _width(est)
    for Xb, yb, where in _pieces(X, y, read=read):
        if not Xb.shape[0]:
            continue
        pred = np.asarray(est.predict(_fit_width(Xb, d, where)))
        for t, p_ in zip(np.asarray(yb).tolist(), pred.tolist()):
            if isinstance(t, float) and t.is_integer() and classes and isinstance(classes[0], int):
                t = int(t)
            if t not in index:
                index[t] = len(labels)
                labels.append(t)
                conf = np.pad(conf, ((0, 1), (0, 1)))
            conf[index[t], index[p_]] += 1
    unknown = _check_labels(classes, labels, conf, X)
    n = int(conf.sum())
    right = int(np.trace(conf))
    per_class = {}
    for i, c in enumerate(labels):
        tp, pred_c, true_c = int(conf[i, i]), int(conf[:, i].sum()), int(conf[i, :].sum())
        prec = tp / pred_c if pred_c else None
        rec = tp / true_c if true_c else None
        f1 = 2 * prec * rec / (prec + rec) if prec and rec else (0.0 if prec is not None and rec is not None else None)
        per_class[str(c)] = {"precision": prec, "recall": rec, "f1": f1, "support": true_c}
    return {"n": n, "errors": n - right, "error": (n - right) / n if n else None,
            "accuracy": right / n if n else None, "labels": labels, "confusion": conf.tolist(),
            "per_class": per_class, "unknown_labels": unknown}


def _label_list(values: Iterable[Any], limit: int = 8) -> str:
    shown = [str(v) for v in list(values)[:limit]]
    return ", ".join(shown) + (", ..." if len(list(values)) > limit else "")


def _check_labels(classes: list[Any], labels: list[Any], conf: np.ndarray, X: Any) -> list[Any]:
    """The test labels the model does not know (counted as errors, named in one line on stderr);
    a test set that shares no label with the model's classes is an error (its error rate would
    say nothing but that the model belongs to another problem)."""
    unknown = labels[len(classes):]
    if not unknown:
        return []
    where = os.fspath(X) if isinstance(X, (str, os.PathLike)) else "the test labels"
    if not conf[: len(classes)].sum():
        raise ValueError(f"{where}: no test label ({_label_list(unknown)}) is a class of the model "
                         f"({_label_list(classes)}); the model was trained for another problem")
    rows = int(conf[len(classes):].sum())
    print(f"distlearn evaluate: note: {rows} test rows have labels the model does not know "
          f"({_label_list(unknown)}), counted as errors", file=sys.stderr)
    return unknown


def _features_only(X: Any, d: int | None, format: str | None, read: dict[str, Any] | None) -> bool:
    """Whether predict reads the table (CSV, Parquet) ``X`` as features alone, every column a feature
    (``label_column=False``): ``--label-column none`` says so (the readers refuse it for anything but a
    table); without a label column named or given, a table of exactly the model's ``d`` columns, none
    named as a label, is one (the readers' default label, column 0, would leave ``d - 1`` features, which
    the model cannot take).  The table is opened once to tell, its header and first row read."""
    from .data.readers import _reader_options, detect_format, is_data_file, open_reader

    read = {k: v for k, v in (read or {}).items() if v is not None}
    label = read.get("label_column")
    if label is False:
        return True
    if d is None or label is not None or not is_data_file(X):
        return False
    path = os.fspath(X)
    fmt = format or detect_format(path)
    if fmt not in ("csv", "parquet"):
        return False
    reader = open_reader(path, format=fmt, **_reader_options(fmt, read, path))
    by_default = reader.label_index == 0 and (reader.columns is None or
                                             str(reader.columns[0]).strip().lower() not in LABEL_NAMES)
    return bool(by_default and reader.n_features == d - 1)


def predict(est: Any, X: Any, *, decision: bool = False, out: str | os.PathLike[str] | None = None,
            format: str | None = None, overwrite: bool = True, scheduler: Any = None, n_workers: int | None = None,
            security: Any = None, read: dict[str, Any] | None = None) -> dict[str, Any]:
    """Labels (or ``decision`` scores) of a fitted classifier, a loaded model or a model file (its
    path) for arrays, a store (or view), or any readable data file, block by block.

    ``read``: a data file's reader options (``zero_based``, ``label_column``).  A table (CSV, Parquet)
    without a label column is read with ``label_column=False`` (every column a feature); a table of
    exactly the model's number of columns, none named ``label``/``target``/``class``/``y`` and no
    ``label_column`` given, is read so by itself.
    ``out``: stream them to ``.npy``, ``.csv``/``.txt`` (one row per line; scores of a multiclass
    model as comma-separated columns) or a ``.zarr`` array (:func:`write_values`).  Returns
    ``{"n", "out", "values"}`` (``values`` only without ``out``); ``overwrite`` as in
    :func:`write_values`.

    ``scheduler`` (as everywhere: :func:`distlearn.distributed.executor_for`, with ``n_workers``
    and ``security``): predict the blocks of a store as tasks, each reading the model file by path
    (:func:`distlearn.model.predict_block`), written in order; the result adds ``"blocks"`` and
    ``"ran_on"``.  ``est`` must then be the model file and ``X`` a store.
    """
    from .model import load_model

    model_path = absolute(est) if isinstance(est, (str, os.PathLike)) else None
    if model_path is not None:
        est = load_model(model_path)
    if scheduler is not None:
        if any(v is not None for v in (read or {}).values()):
            raise ValueError(f"{_read_names({k: v for k, v in read.items() if v is not None})} read a data file; "
                             "predicting on a cluster reads a store")
        return _predict_on(scheduler, est, model_path, X, decision=decision, out=out, overwrite=overwrite,
                           n_workers=n_workers, security=security)
    d = _width(est)
    if _features_only(X, d, format, read):
        read = {**(read or {}), "label_column": False}

    def blocks() -> Iterator[np.ndarray]:
        for Xb, _, where in _pieces(X, None, format=format, read=read, labels=False):
            if Xb.shape[0]:
                Xb = _fit_width(Xb, d, where)
                yield np.asarray(est.decision_function(Xb) if decision else est.predict(Xb))

    if out is None:
        parts = list(blocks())
        values = np.concatenate(parts) if parts else np.zeros(0)
        return {"n": int(values.shape[0]), "out": None, "values": values}
    inputs = (X,) if isinstance(X, (str, os.PathLike)) else ()
    return {"n": write_values(blocks(), out, overwrite=overwrite, inputs=inputs, widths=prediction_widths(est)),
            "out": os.fspath(out)}


def _predict_on(scheduler: Any, model: Any, model_path: str | None, X: Any, *, decision: bool, out: Any,
                overwrite: bool, n_workers: int | None, security: Any) -> dict[str, Any]:
    """:func:`predict` of a store's blocks as executor tasks (one per block, results in order)."""
    from .distributed import executor_for
    from .model import predict_block

    from .data.readers import is_data_file

    if not isinstance(X, (str, os.PathLike)) or not is_store(X) or is_data_file(X):
        raise ValueError(f"predicting on a cluster (scheduler=, --workers/--scheduler) reads the blocks of a store; "
                         f"{X if isinstance(X, (str, os.PathLike)) else 'an array'} is not one "
                         "(distlearn convert makes one)")
    if model_path is None:
        raise ValueError("predicting on a cluster reads the model from its file: pass the path of a model "
                         "saved by distlearn.model.save_model (distlearn train --save)")
    ds = open_dataset(X)
    want = getattr(model, "meta", {}).get("n_features")
    if want is not None and ds.n_features > want:
        raise ValueError(f"{X}: {ds.n_features} features, the model knows {want}")
    # workers open the files by path, from their own working directory
    path, _, view = os.fspath(X).partition("#")
    store = absolute(path) + (f"#{view}" if view else "")  # a URL as it is
    jobs = [(model_path, store, b, decision) for b in range(ds.n_blocks)]
    with executor_for(scheduler, n_workers=n_workers, security=security) as ex:
        res: dict[str, Any] = {"blocks": ds.n_blocks, "ran_on": ex.describe()}
        blocks = ex.map_ordered(predict_block, jobs)
        if out is not None:
            n = write_values(blocks, out, overwrite=overwrite, inputs=[model_path, os.fspath(X)],
                             widths=prediction_widths(model))
            return {"n": n, "out": os.fspath(out), **res}
        parts = list(blocks)
    values = np.concatenate(parts) if parts else np.zeros(0)
    return {"n": int(len(values)), "out": None, "values": values, **res}


def prediction_widths(est: Any) -> tuple[int, ...]:
    """The numbers of values a row of :func:`predict`'s output holds for the fitted ``est``: 1 (labels,
    or the scores of two classes) or, for ``C > 2`` classes, ``C`` (the scores)."""
    c = len(getattr(est, "classes_", ()))
    return (1,) if c <= 2 else (1, c)


def write_values(blocks: Iterable[np.ndarray], out: str | os.PathLike[str], *, overwrite: bool = True,
                 inputs: Iterable[str | os.PathLike[str]] = (), widths: tuple[int, ...] = (1,)) -> int:
    """Stream row blocks of predictions to ``out`` and return the number of rows.

    ``.npy`` (format 2.0, always: numbers go to a raw temporary file block by block, then behind
    the header; labels that are strings are gathered first), ``.csv``/``.txt`` (``%.17g`` for
    floats), or a zarr v3 array ``.zarr`` (appended block by block, one chunk per block).  The file
    appears under its name only when complete: a failure leaves nothing that looks valid.  ``out``
    is checked before the first block is read (:func:`distlearn._outputs.check_output`): an existing
    one is replaced only with ``overwrite`` and only if it looks like earlier predictions with
    ``widths`` values a row (:func:`prediction_widths`; the rules and their limit:
    :func:`distlearn._outputs.predictions_mismatch`); a directory, an input, the working or home
    directory are never replaced.
    """
    out = os.fspath(out).rstrip(os.sep) or os.sep
    suffix = os.path.splitext(out)[1].lower()
    if suffix not in (".npy", ".csv", ".txt", ".zarr"):
        raise ValueError(f"--out {out}: write .npy, .csv, .txt or .zarr")
    check_output(out, "predictions", overwrite=overwrite, inputs=inputs, widths=widths)
    tmp = f"{out}.partial-{uuid.uuid4().hex[:8]}"
    n = 0
    try:
        with naming(out):  # a full disk names the output, not its temporary
            if suffix == ".zarr":
                import zarr

                arr = None
                for v in blocks:
                    if arr is None:
                        arr = zarr.create_array(tmp, shape=(0, *v.shape[1:]), chunks=(max(1, len(v)), *v.shape[1:]),
                                                dtype=str if v.dtype.kind in "UO" else v.dtype)
                    arr.append(v)
                    n += len(v)
                if arr is None:
                    arr = zarr.create_array(tmp, shape=(0,), chunks=(1,), dtype="float64")
                arr.attrs[PREDICTIONS_ATTR] = {"n": n}
            elif suffix == ".npy":
                first = None
                with open(tmp, "wb") as f:
                    strings: list[np.ndarray] = []
                    for v in blocks:
                        first = v if first is None else first
                        if v.dtype.kind in "UO" or strings:
                            strings.append(v)
                        else:
                            f.write(np.ascontiguousarray(v.astype(first.dtype, copy=False)).tobytes())
                        n += len(v)
                if strings or first is None:
                    values = np.concatenate(strings) if strings else np.zeros(0)
                    with open(tmp, "wb") as f:  # format 2.0 as the numbers below (what --overwrite recognises)
                        np.lib.format.write_array(f, values.astype(str) if values.dtype.kind == "O" else values,
                                                  version=(2, 0), allow_pickle=False)
                else:
                    raw = tmp + ".raw"
                    os.replace(tmp, raw)
                    with open(tmp, "wb") as f, open(raw, "rb") as r:
                        np.lib.format.write_array_header_2_0(
                            f, {"descr": np.lib.format.dtype_to_descr(first.dtype), "fortran_order": False,
                                "shape": (n, *first.shape[1:])})
                        shutil.copyfileobj(r, f, 1 << 22)
                    os.unlink(raw)
            else:
                with open(tmp, "w") as f:
                    for v in blocks:
                        np.savetxt(f, v.reshape(len(v), -1), fmt="%.17g" if v.dtype.kind == "f" else "%s",
                                   delimiter=",")
                        n += len(v)
        replace(tmp, out, "predictions", widths=widths, overwrite=overwrite)
    finally:
        for t in (tmp, tmp + ".raw", tmp + ".npy"):
            if os.path.isdir(t):
                shutil.rmtree(t)
            elif os.path.exists(t):
                os.unlink(t)
    return n


def fit_summary(est: Any) -> dict[str, Any]:
    """What a fit did, the same keys for every distlearn estimator.

    ``online_error`` is the progressive error of the first epoch (the papers'
    online error): ``epoch_online_errors_[0]`` over the rows of one epoch where
    the estimator keeps per-epoch counts, else ``online_errors_ / t_``.
    """
    epochs = int(getattr(est, "n_iter_", 1) or 1)
    out: dict[str, Any] = {"model": type(est).__name__, "epochs": epochs,
                           "n_updates": int(getattr(est, "n_updates_", 0))}
    per_epoch = getattr(est, "epoch_online_errors_", None)
    t = int(getattr(est, "t_", 0))
    if per_epoch is not None:
        from .estimators import ParameterMixing

        rows = t // epochs if isinstance(est, ParameterMixing) else t  # OBPM's t_ counts the first epoch
        out["epoch_online_errors"] = [int(v) for v in per_epoch]
        out["online_errors"] = int(per_epoch[0])
        out["online_rows"] = rows
        out["online_scope"] = "first epoch"
    else:
        out["online_errors"] = int(getattr(est, "online_errors_", 0))
        out["online_rows"] = t
        out["online_scope"] = "all epochs"
    out["online_error"] = out["online_errors"] / max(1, out["online_rows"])
    if hasattr(est, "n_support_"):
        out["n_support"] = int(np.sum(est.n_support_))
        out["n_removed"] = int(getattr(est, "n_removed_", 0))
        for name in ("gamma", "beta"):  # the values a kernel learner ran ("auto" resolved)
            if isinstance(getattr(est, name + "_", None), (int, float, np.floating)):
                out[name] = float(getattr(est, name + "_"))
    if hasattr(est, "job_"):
        out["job"] = est.job_
    taus = getattr(est, "taus_", None)
    if taus is not None and len(taus) > 1:  # OBPM choosing tau: the value kept, every value's online errors
        out["tau"] = float(est.tau_)
        out["tau_online_errors"] = {f"{t:g}": int(e) for t, e in zip(taus, est.tau_online_errors_)}
    return out
