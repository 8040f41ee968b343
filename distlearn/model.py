"""Trained models on disk, without pickle.

A model file is an ``.npz`` archive of plain arrays plus one JSON document
(``meta``: the estimator's class and parameters, the training store, the
distlearn version, training counters).  A linear model holds ``coef``,
``intercept`` and ``classes``; a kernel model (``meta["kind"] == "kernel"``:
the kernel learners and their Bayes points) holds ``support_vectors``,
``dual_coef`` and ``classes``, with the kernel and its parameters in ``meta``; fitted on sparse rows
(``meta["kind"] == "sparse-kernel"``), the support patterns are CSR: ``sv_indptr``, ``sv_indices`` and
``sv_data`` in place of ``support_vectors``, read back as a CSR matrix after every part is checked.
:func:`load_model` reads it with ``allow_pickle=False``, so a model file can
never run code, and checks the zip directory and every array's .npy header
against the metadata (the declared ``shapes``, ``n_features``, the classes)
before it inflates a byte, so a damaged, inconsistent or inflated file is one
line naming the file and the member, never a traceback or a memory bomb.  The file is written under a temporary name and renamed, so
a failed save leaves no file that looks valid.
"""

from __future__ import annotations

import json
import os
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._outputs import check_output, naming, replace
from ._urls import UrlError, is_url
from ._validation import physical_memory
from ._version import __version__
from .conversions.ensemble import SampledHypothesis, VotedHypothesis
from .conversions.kernel import VotedKernelHypothesis
from .data._io import refuse_special
from .data.store import open_dataset
from .learners.kernel import KERNELS, kernel_decision, make_kernel
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


def save_model(est: Any, path: str | os.PathLike[str], *, extra: dict[str, Any] | None = None,
               members: bool = False, overwrite: bool = True) -> Path:
    """Save a fitted distlearn estimator: a linear hypothesis (``coef_``/``intercept_``), a
    kernel expansion (``support_vectors_``/``dual_coef_`` and its kernel), a linear or kernel
    vote / sample conversion, or a Bayes point.

    ``members=True`` also stores a linear Bayes point's members (``members_`` and
    ``weights_`` of OBPM and PermutationBPM), read back as the model's ``members_`` and
    ``weights_`` (member ``j``'s hypothesis is ``members_[j]``, shape (n_outputs, n_features + 1),
    the intercept last).

    An existing ``path`` is replaced only if it is a distlearn model file and ``overwrite``
    (anything else is refused before writing, :func:`distlearn._outputs.check_output`).
    """
    voted_kernel = isinstance(est.__dict__.get("hypothesis_"), VotedKernelHypothesis)
    kernel = "support_vectors_" in est.__dict__ and ("hypothesis_" not in est.__dict__ or voted_kernel)
    ensemble = est.__dict__.get("hypothesis_")
    if not isinstance(ensemble, (VotedHypothesis, SampledHypothesis)):
        ensemble = None
    if not kernel and ensemble is None and not hasattr(est, "coef_"):
        raise ValueError(f"{type(est).__name__} has neither coef_, support_vectors_ nor a linear vote/sample "
                         "hypothesis (not fitted?)")
    p = Path(path)
    if p.suffix != ".npz":
        raise ValueError(f"model files end in .npz, got {p.name!r}")
    check_output(p, "model", overwrite=overwrite)
    params = {k: v for k, v in est.get_params(deep=False).items() if k != "scheduler"}
    sparse_sv = kernel and sp.issparse(est.support_vectors_)
    kind = ("sparse-kernel" if sparse_sv else "kernel") if kernel else \
        ("vote" if isinstance(ensemble, VotedHypothesis) else "sample") if ensemble is not None else "linear"
    meta = {"format": FORMAT, "kind": kind, "estimator": type(est).__name__,
            "params": _jsonable(params), "extra": _jsonable(extra or {})}
    classes = np.asarray(est.classes_)
    if classes.dtype.kind not in "iufb":
        classes = classes.astype(str)
    if kernel:
        k = est._kernel_obj
        meta.update(n_features=int(est.support_vectors_.shape[1]), kernel=k.name,
                    kernel_params={"gamma": float(k.params[0]), "degree": float(k.params[1]),
                                   "coef0": float(k.params[2])})
        sv = est.support_vectors_
        if sparse_sv:  # CSR after a fit on sparse rows: the file holds the nonzeros (a text model in MB, not GB)
            sv = sp.csr_matrix(sv, dtype=np.float64)
            sv.sum_duplicates()
            sv.sort_indices()
            arrays = {"sv_data": np.asarray(sv.data, np.float64), "sv_indices": np.asarray(sv.indices, np.int64),
                      "sv_indptr": np.asarray(sv.indptr, np.int64)}
        else:
            arrays = {"support_vectors": np.asarray(sv, dtype=np.float64)}
        arrays["dual_coef"] = np.asarray(est.dual_coef_, dtype=np.float64)
        if voted_kernel:  # the vote's events: pattern ev_p enters (ev_s = +1) or leaves (-1) at ev_t
            h = est.hypothesis_
            meta["vote_span"] = [int(h.a), int(h.b)]
            arrays.update(vote_t=np.asarray(h.ev_t, np.int64), vote_p=np.asarray(h.ev_p, np.int64),
                          vote_s=np.asarray(h.ev_s, np.float64), vote_lab=np.asarray(h.lab, np.int64))
    elif ensemble is not None:  # H[i]: hypothesis i as (n_outputs, n_features + 1), w[i] its votes / weight
        meta["n_features"] = int(ensemble.H.shape[2] - 1)
        if isinstance(ensemble, SampledHypothesis):
            meta["seed"] = int(ensemble.seed)
        arrays = {"H": np.asarray(ensemble.H, dtype=np.float64), "w": np.asarray(ensemble.w, dtype=np.float64)}
    else:
        meta["n_features"] = int(est.coef_.shape[1])
        arrays = {"coef": np.asarray(est.coef_), "intercept": np.asarray(est.intercept_)}
    if members:
        if "members_" not in est.__dict__:
            if "keep_members" in est.get_params(deep=False):
                raise ValueError(f"members=True: this {type(est).__name__} kept no members_ (keep_members="
                                 f"{est.keep_members!r}); fit it with keep_members=True")
            raise ValueError(f"members=True: {type(est).__name__} has no members_ (not a Bayes point)")
        arrays["members"] = np.asarray(est.members_, dtype=np.float64)
        arrays["member_weights"] = np.asarray(est.weights_, dtype=np.float64)
    for name, v in arrays.items():  # load_model refuses them: a model that cannot be read back is never written
        if v.dtype.kind in "iufb" and not np.all(np.isfinite(v)):
            raise ValueError(f"{type(est).__name__}: its {name} holds non-finite values (NaN or inf): the fit "
                             f"diverged; not saved to {p}")
    meta["distlearn_version"] = __version__
    # every member's shape, so that load_model checks each .npy header against it before inflating
    meta["shapes"] = {name: list(np.shape(v)) for name, v in {**arrays, "classes": classes}.items()}
    tmp = p.with_name(f".{p.stem}.tmp-{uuid.uuid4().hex[:8]}.npz")
    try:
        with naming(p):
            np.savez(tmp, **arrays, classes=classes, meta=np.array(json.dumps(meta)))
        replace(tmp, p, "model", overwrite=overwrite)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


class LinearModel:
    """A saved linear model: ``decision_function``, ``predict`` and ``score`` on arrays or stores."""

    def __init__(self, coef: np.ndarray, intercept: np.ndarray, classes: np.ndarray, meta: dict[str, Any]) -> None:
        self.coef_ = coef
        self.intercept_ = intercept
        self.classes_ = classes
        self.meta = meta

    def _scores(self, X: Any) -> np.ndarray:
        return np.asarray(X @ self.coef_.T + self.intercept_[None, :])

    def decision_function(self, X: Any) -> np.ndarray:
        s = self._scores(X)
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


class EnsembleModel(LinearModel):
    """A saved vote or sample conversion: the hypotheses and their weights (the seed of the sampling)."""

    def __init__(self, hypothesis: Any, classes: np.ndarray, meta: dict[str, Any]) -> None:
        self.hypothesis_ = hypothesis
        self.classes_ = classes
        self.meta = meta
        self.n_features_in_ = int(hypothesis.H.shape[2] - 1)

    def decision_function(self, X: Any) -> np.ndarray:
        return self.hypothesis_.decision_function(X)


class KernelModel(LinearModel):
    """A saved kernel model: scores ``dual_coef @ k(support_vectors, x)``."""

    def __init__(self, support_vectors: np.ndarray, dual_coef: np.ndarray, classes: np.ndarray,
                 meta: dict[str, Any]) -> None:
        self.support_vectors_ = support_vectors
        self.dual_coef_ = dual_coef
        self.classes_ = classes
        self.meta = meta
        self.kernel_ = make_kernel(meta["kernel"], **meta["kernel_params"])

    def _scores(self, X: Any) -> np.ndarray:
        if "hypothesis_" in self.__dict__:  # a kernel vote: the vote shares
            s = self.hypothesis_.decision_function(X)
            return s[:, None] if s.ndim == 1 else s
        return kernel_decision(self.kernel_, self.support_vectors_, self.dual_coef_.T, X)


#: The most bytes the JSON ``meta`` member may declare (a model's parameters and counters are far smaller).
META_BYTES = 16 << 20

#: Each kind's members and their shapes, by dimension name: ``C`` the classes, ``K`` the output
#: rows (1 for two classes, else ``C``), ``d`` the features (``d1 = d + 1``: the intercept column),
#: the others free unless the metadata's ``shapes`` declares them.  Alternatives are listed.
_LAYOUT: dict[str, tuple[tuple[str, tuple[tuple[str, ...], ...], bool], ...]] = {
    "linear": (("coef", (("K", "d"),), True), ("intercept", (("K",),), True)),
    "vote": (("H", (("M", "K", "d1"),), True), ("w", (("M",),), True)),
    "sample": (("H", (("M", "K", "d1"),), True), ("w", (("M",),), True)),
    "kernel": (("support_vectors", (("P", "d"),), True), ("dual_coef", (("K", "P"),), True),
               ("vote_t", (("E",),), False), ("vote_p", (("E",),), False), ("vote_s", (("E",),), False),
               ("vote_lab", (("P",),), False)),
    # the support patterns as CSR (a fit on sparse rows): row pointers (P + 1), columns and values (Z nonzeros)
    "sparse-kernel": (("sv_indptr", (("P1",),), True), ("sv_indices", (("Z",),), True), ("sv_data", (("Z",),), True),
                      ("dual_coef", (("K", "P"),), True)),
}
_MEMBERS = (("members", (("N", "K", "d1"),), False), ("member_weights", (("N",), ("K", "N")), False))


class _Refused(ValueError):
    """A model file whose members disagree with each other or with its metadata."""


def _damaged(p: Path, exc: BaseException) -> ValueError:
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ValueError(f"{p}: not a readable distlearn model file (truncated or damaged: {why})")


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype, int]:
    """A member's declared shape, dtype and data bytes, from its .npy header only; the member's
    uncompressed size in the zip directory must be exactly header + data."""
    fmt = np.lib.format
    with zf.open(info) as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:
            raise ValueError(f".npy format {version} is not one distlearn writes")
        start = f.tell()
    if dtype.hasobject:
        raise _Refused(f"member {info.filename} holds Python objects ({dtype}); model files hold plain arrays only")
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= int(s)
    if info.file_size != start + nbytes:
        raise _Refused(f"member {info.filename} declares {info.file_size:,} bytes but its header says shape "
                       f"{tuple(shape)} {dtype} ({start + nbytes:,} bytes)")
    return tuple(int(s) for s in shape), dtype, nbytes


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    with zf.open(info) as f:
        a = np.lib.format.read_array(f, allow_pickle=False)
        if f.read(1):  # reached the member's end: the zip checks its CRC-32 there
            raise ValueError(f"member {info.filename} holds more than its header says")
    return a


def _expected(kind: str, meta: dict[str, Any], heads: dict[str, tuple[tuple[int, ...], np.dtype, int]]
              ) -> None:
    """Every member's header against the metadata (kind, n_features, the declared ``shapes``) and
    against the other members (classes vs output rows, support vs coefficients)."""
    C = heads["classes"][0]
    if len(C) != 1 or C[0] < 2:
        raise _Refused(f"classes has shape {C}: a model knows two or more classes")
    dims: dict[str, int | None] = {"C": C[0], "K": 1 if C[0] == 2 else C[0], "d": None, "d1": None}
    d = meta.get("n_features")
    if d is not None:
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise _Refused(f"meta n_features is {d!r}, not a feature count")
        dims.update(d=d, d1=d + 1)
    layout = (*_LAYOUT[kind], *_MEMBERS)
    known = {name for name, _, _ in layout} | {"classes", "meta"}
    extra = sorted(set(heads) - known)
    if extra:
        raise _Refused(f"member {extra[0]}.npy is not part of a {kind} model")
    declared = meta.get("shapes")
    if declared is not None and (not isinstance(declared, dict) or set(declared) != set(heads) - {"meta"}):
        raise _Refused(f"the members {sorted(set(heads) - {'meta'})} are not the ones its metadata declares "
                       f"({sorted(declared) if isinstance(declared, dict) else declared!r})")
    for name, options, required in layout:
        if name not in heads:
            if required:
                raise _Refused(f"member {name}.npy is missing (a {kind} model has "
                               f"{', '.join(n + '.npy' for n, _, r in _LAYOUT[kind] if r)} and classes.npy)")
            continue
        shape = heads[name][0]
        for names in options:
            if len(names) == len(shape) and all(dims.get(n) in (None, s) for n, s in zip(names, shape)):
                for n, s in zip(names, shape):
                    if n == "d":
                        dims["d1"] = s + 1
                    elif n == "d1":
                        dims["d"] = s - 1
                    dims[n] = s
                break
        else:
            want = " or ".join("(" + ", ".join(f"{n}={dims[n]}" if dims.get(n) is not None else n for n in names) + ")"
                               for names in options)
            raise _Refused(f"inconsistent {kind} model: member {name}.npy has shape {shape}, expected {want} "
                           f"for {dims['C']} classes" + (f" and {d} features" if d is not None else ""))
    for name, (shape, dtype, _) in heads.items():
        if declared is not None and name != "meta" and list(shape) != declared[name]:
            raise _Refused(f"inconsistent {kind} model: member {name}.npy has shape {shape}, its metadata "
                           f"declares {tuple(declared[name])}")
        if name != "meta" and dtype.kind not in ("iufbU" if name == "classes" else "iufb"):
            raise _Refused(f"member {name}.npy has dtype {dtype}, not {'labels' if name == 'classes' else 'numbers'}")


def _load_arrays(p: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata and arrays of a model file, every member checked from the zip directory and its
    .npy header before a byte of it is inflated."""
    refuse_special(p)  # a FIFO would block the open
    try:
        zf = zipfile.ZipFile(p)
    except FileNotFoundError:
        raise
    except IsADirectoryError as exc:
        raise ValueError(f"{p}: is a directory, not a model file") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as exc:
        raise _damaged(p, exc) from None
    try:
        with zf:
            infos = {}
            for info in zf.infolist():
                if not info.filename.endswith(".npy") or info.filename[:-4] in infos or "/" in info.filename:
                    raise _Refused(f"member {info.filename!r} is not one .npy array of a model file "
                                   "(a repeated or foreign name)")
                infos[info.filename[:-4]] = info
            if "meta" not in infos:
                raise _Refused("not a distlearn model (no meta)")
            heads = {"meta": _header(zf, infos["meta"])}
            mshape, mtype, mbytes = heads["meta"]
            if mshape != () or mtype.kind != "U" or mbytes > META_BYTES:
                raise _Refused(f"member meta.npy is {mtype} {mshape} of {mbytes:,} bytes, not a JSON text "
                               f"of at most {META_BYTES:,} bytes")
            try:
                meta = json.loads(str(_read(zf, infos["meta"])))
            except (json.JSONDecodeError, RecursionError) as exc:
                raise _Refused(f"member meta.npy is not JSON ({str(exc).splitlines()[0][:200]})") from None
            if not isinstance(meta, dict):
                raise _Refused("member meta.npy is not a JSON object")
            if meta.get("format") != FORMAT:
                raise _Refused(f"model format {meta.get('format')!r}, this distlearn reads {FORMAT}")
            kind = meta.get("kind", "linear")
            if kind not in _LAYOUT:
                raise _Refused(f"unknown model kind {kind!r}")
            if "classes" not in infos:
                raise _Refused("not a distlearn model (missing ['classes'])")
            for name, info in infos.items():
                if name != "meta":
                    heads[name] = _header(zf, info)
            _expected(kind, meta, heads)
            total = sum(h[2] for h in heads.values())
            have = physical_memory()
            if have is not None and total > have // 2:
                raise _Refused(f"its arrays declare {total:,} bytes, more than half this machine's memory "
                               f"({have:,} bytes)")
            arrays = {name: _read(zf, info) for name, info in infos.items() if name != "meta"}
    except _Refused as exc:
        raise ValueError(f"{p}: {exc}") from None
    # RuntimeError: zipfile's answer to an encrypted member (a crafted file)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, NotImplementedError,
            RuntimeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _damaged(p, exc) from None
    return meta, arrays


def load_model(path: str | os.PathLike[str]) -> LinearModel:
    """Read a model saved by :func:`save_model` (no pickle: plain arrays and JSON only): a
    :class:`LinearModel`, :class:`EnsembleModel` or :class:`KernelModel`.

    Nothing is inflated before the whole file is checked from its zip directory and the arrays'
    .npy headers: every member's size must be exactly what its header declares, every shape must
    fit the metadata (``kind``, ``n_features``, the classes: one output row for two classes, else
    one per class; the declared ``shapes`` of files written since they are recorded), and the
    total must fit in memory.  A truncated or damaged file, or one that disagrees with itself, is
    one ``ValueError`` line naming the file and the member.
    """
    if is_url(os.fspath(path)):
        raise UrlError(f"{os.fspath(path)}: model files are read from a local path (stores can be URLs); "
                       "copy it here first")
    p = Path(path)
    meta, arrays = _load_arrays(p)
    for name, v in arrays.items():  # a model never holds NaN or inf: scores of NaN would all be one class
        if v.dtype.kind in "iufb" and not np.all(np.isfinite(v)):
            raise ValueError(f"{p}: member {name}.npy holds non-finite values (NaN or inf): a damaged model")
    c = arrays["classes"]
    if len(np.unique(c)) != len(c):
        raise ValueError(f"{p}: member classes.npy repeats a class ({c.tolist()[:10]}): a damaged model")
    kind = meta.get("kind", "linear")
    names = {"linear": ("coef", "intercept"), "kernel": ("support_vectors", "dual_coef"),
             "sparse-kernel": ("sv_data", "dual_coef"), "vote": ("H", "w"), "sample": ("H", "w")}[kind]
    a, b, classes = arrays[names[0]], arrays[names[1]], arrays["classes"]
    more = {n: arrays[n] for n in ("vote_t", "vote_p", "vote_s", "vote_lab", "members", "member_weights",
                                   "sv_indices", "sv_indptr") if n in arrays}
    model = _build(p, kind, a, b, classes, meta, more)
    if "members" in more:
        M, W = more["members"], more["member_weights"] if "member_weights" in more else None
        if M.ndim != 3 or W is None or W.shape not in ((M.shape[0],), (M.shape[1], M.shape[0])):
            raise ValueError(f"{p}: inconsistent members (members {M.shape}, weights "
                             f"{None if W is None else W.shape})")
        model.members_, model.weights_ = M, W
    return model


def _build(p: Path, kind: str, a: np.ndarray, b: np.ndarray, classes: np.ndarray, meta: dict[str, Any],
           more: dict[str, np.ndarray]) -> LinearModel:
    if kind == "linear":
        if a.ndim != 2 or b.shape != (a.shape[0],):
            raise ValueError(f"{p}: inconsistent shapes coef {a.shape}, intercept {b.shape}")
        return LinearModel(a, b, classes, meta)
    if kind in ("vote", "sample"):
        if a.ndim != 3 or b.shape != (a.shape[0],) or not np.all(b >= 0) or not b.sum() > 0:
            raise ValueError(f"{p}: inconsistent {kind} model (hypotheses {a.shape}, weights {b.shape})")
        if kind == "vote":
            return EnsembleModel(VotedHypothesis(a, b), classes, meta)
        return EnsembleModel(SampledHypothesis(a, b, int(meta.get("seed", 0))), classes, meta)
    if kind == "sparse-kernel":
        a = _csr_support(p, a, more["sv_indices"], more["sv_indptr"], b, meta)
    if a.ndim != 2 or b.ndim != 2 or b.shape[1] != a.shape[0] or meta.get("kernel") not in KERNELS:
        raise ValueError(f"{p}: inconsistent kernel model (support {a.shape}, dual_coef {b.shape}, "
                         f"kernel {meta.get('kernel')!r})")
    try:
        model = KernelModel(a, b, classes, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{p}: bad kernel parameters in the model file ({exc})") from None
    if "vote_span" in meta:
        ev = [more.get(n) for n in ("vote_t", "vote_p", "vote_s", "vote_lab")]
        span = meta["vote_span"]
        P = a.shape[0]
        if (any(e is None or e.ndim != 1 for e in ev) or not (len(ev[0]) == len(ev[1]) == len(ev[2]))
                or len(ev[3]) != P or (len(ev[1]) and not (0 <= ev[1].min() and ev[1].max() < P))
                or not (isinstance(span, list) and len(span) == 2 and 0 <= span[0] <= span[1])):
            raise ValueError(f"{p}: inconsistent kernel vote (events or span do not match {P} patterns)")
        model.hypothesis_ = VotedKernelHypothesis(model.kernel_, np.ascontiguousarray(a),
                                                  np.ascontiguousarray(b.T), ev[3], ev[0], ev[1], ev[2],
                                                  int(span[0]), int(span[1]))
    return model


def _csr_support(p: Path, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, coef: np.ndarray,
                 meta: dict[str, Any]) -> Any:
    """A sparse kernel model's support patterns, every part of the CSR structure checked before scipy or a
    kernel reads it: row pointers from 0, non-decreasing, ending at the nonzeros; columns integers in
    ``[0, n_features)``, strictly increasing within each row; one row per coefficient column."""
    d = meta.get("n_features")
    P = coef.shape[1] if coef.ndim == 2 else -1
    ok = (indptr.dtype.kind in "iu" and indices.dtype.kind in "iu" and indptr.ndim == indices.ndim == data.ndim == 1
          and isinstance(d, int) and len(indptr) == P + 1 and len(indices) == len(data))
    if ok and len(indptr):
        ip = indptr.astype(np.int64)
        ok = ip[0] == 0 and ip[-1] == len(data) and bool(np.all(np.diff(ip) >= 0))
        if ok and len(indices):
            ix = indices.astype(np.int64)
            ok = int(ix.min()) >= 0 and int(ix.max()) < d
            if ok:  # ascending within each row: a step down happens only where a row starts
                down = np.flatnonzero(np.diff(ix) <= 0) + 1
                ok = bool(np.all(np.isin(down, ip[1:-1])))
    if not ok:
        raise ValueError(f"{p}: inconsistent sparse kernel model (sv_indptr {indptr.shape} {indptr.dtype}, "
                         f"sv_indices {indices.shape} {indices.dtype}, sv_data {data.shape}, dual_coef {coef.shape}, "
                         f"n_features {d!r}): row pointers, columns or sizes out of range")
    return sp.csr_matrix((data.astype(np.float64), indices.astype(np.int64), indptr.astype(np.int64)), shape=(P, d))


_OPEN: dict[tuple[str, float], LinearModel] = {}


def predict_block(model_path: str, store: str, block: int, decision: bool = False) -> np.ndarray:
    """Labels (or scores) of one block of a store with a model file: the task of a prediction on a
    Dask cluster (the model is read once per worker process and file version)."""
    key = (os.path.abspath(model_path), os.path.getmtime(model_path))
    if key not in _OPEN:
        _OPEN.clear()
        _OPEN[key] = load_model(model_path)
    m = _OPEN[key]
    X = open_dataset(store).read_block(block).X
    return np.asarray(m.decision_function(X) if decision else m.predict(X))
