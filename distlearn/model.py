"""Trained linear models on disk, without pickle.

A model file is an ``.npz`` archive of plain arrays (``coef``, ``intercept``,
``classes``) plus one JSON document (``meta``: the estimator's class and
parameters, the training store, the distlearn version, training counters).
:func:`load_model` reads it with ``allow_pickle=False``, so a model file can
never run code.  The file is written under a temporary name and renamed, so
a failed save leaves no file that looks valid.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ._version import __version__
from .data.store import open_dataset
from .stream import is_store

FORMAT = 1


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    return repr(v)


def save_model(est: Any, path: str | os.PathLike[str], *, extra: dict[str, Any] | None = None) -> Path:
    """Save a fitted linear distlearn estimator (anything with ``coef_``/``intercept_``/``classes_``)."""
    if not hasattr(est, "coef_"):
        raise ValueError(f"{type(est).__name__} has no coef_ (not fitted, or not a linear hypothesis: "
                         "vote/sample conversions cannot be saved as a linear model)")
    p = Path(path)
    if p.suffix != ".npz":
        raise ValueError(f"model files end in .npz, got {p.name!r}")
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "scheduler"}
    meta = {"format": FORMAT, "estimator": type(est).__name__, "params": _jsonable(params),
            "n_features": int(est.coef_.shape[1]), "extra": _jsonable(extra or {})}
    meta["distlearn_version"] = __version__
    classes = np.asarray(est.classes_)
    if classes.dtype.kind not in "iufb":
        classes = classes.astype(str)
    tmp = p.with_name(f".{p.stem}.tmp-{uuid.uuid4().hex[:8]}.npz")
    try:
        np.savez(tmp, coef=np.asarray(est.coef_), intercept=np.asarray(est.intercept_), classes=classes,
                 meta=np.array(json.dumps(meta)))
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


class LinearModel:
    """A saved model: ``decision_function``, ``predict`` and ``score`` on arrays or stores."""

    def __init__(self, coef: np.ndarray, intercept: np.ndarray, classes: np.ndarray, meta: dict[str, Any]) -> None:
        self.coef_ = coef
        self.intercept_ = intercept
        self.classes_ = classes
        self.meta = meta

    def decision_function(self, X: Any) -> np.ndarray:
        s = X @ self.coef_.T + self.intercept_[None, :]
        s = np.asarray(s)
        return s[:, 0] if s.shape[1] == 1 else s

    def predict(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s >= 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]

    def score(self, X: Any, y: Any = None) -> float:
        """Accuracy on arrays, or on a store (streamed block by block; ``y`` None)."""
        if is_store(X):
            right = total = 0
            for b in open_dataset(X).iter_blocks():
                right += int(np.sum(self.predict(b.X) == np.asarray(b.y)))
                total += len(b.y)
            return right / max(1, total)
        return float(np.mean(self.predict(X) == np.asarray(y)))


def load_model(path: str | os.PathLike[str]) -> LinearModel:
    """Read a model saved by :func:`save_model` (no pickle: plain arrays and JSON only)."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            missing = {"coef", "intercept", "classes", "meta"} - set(z.files)
            if missing:
                raise ValueError(f"{p}: not a distlearn model (missing {sorted(missing)})")
            meta = json.loads(str(z["meta"]))
            coef, intercept, classes = z["coef"], z["intercept"], z["classes"]
    except (OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{p}: not a readable model file ({exc})") from exc
    if meta.get("format") != FORMAT:
        raise ValueError(f"{p}: model format {meta.get('format')!r}, this distlearn reads {FORMAT}")
    if coef.ndim != 2 or intercept.shape != (coef.shape[0],):
        raise ValueError(f"{p}: inconsistent shapes coef {coef.shape}, intercept {intercept.shape}")
    return LinearModel(coef, intercept, classes, meta)
