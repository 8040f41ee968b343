"""Models out: a distlearn model as an ONNX file that scores without distlearn.

:func:`export_onnx` writes a fitted estimator, a loaded model or a model file (``train --save``)
as an ONNX graph that onnxruntime (or any ONNX-ML runtime) runs with the labels and scores of
``distlearn predict``, to float32 precision:

- **linear models** (every linear rule, AROW and NAG, OBPM and PermutationBPM Bayes points,
  ParameterMixing, and the conversions whose batch hypothesis is one weight vector: last, average,
  suffix, interval, tree, cutoff): the ONNX-ML ``LinearClassifier``. Binary models are written as
  two rows ``(w, -w)`` labelled ``(classes[1], classes[0])``, so that a zero score predicts
  ``classes[1]`` as distlearn does (``sgn(0) = +1``; the one-row form predicts ``classes[0]`` at
  zero and writes ``1 - s`` as the first score), and a ``Neg`` puts the scores in class order;
- **kernel models** (the budget kernel learners and the kernel Bayes points, ``linear``, ``poly``
  and ``rbf`` kernels: ``SVMClassifier``'s ``LINEAR``, ``POLY``, ``RBF`` with ``kernel_params =
  [gamma, coef0, degree]``): the support patterns and their coefficients. A binary model is one
  ``SVMClassifier`` (coefficients negated: its vote goes to ``classes[0]`` when the sum is > 0,
  so a zero score predicts ``classes[1]``; a ``Neg`` puts the scores in class order). A
  multiclass model (one-vs-rest or native, one score row per class) is one binary
  ``SVMClassifier`` per class giving that class's score, the scores concatenated, and the label
  ``classes[argmax]`` (the first on ties, as ``numpy.argmax``): ``SVMClassifier``'s own
  multiclass form is one-vs-one and cannot express these scores. It evaluates the kernel
  ``n_classes`` times per support pattern.

The graph has one input ``X``, float32 ``[N, d]``: dense rows of the ``d`` features the model was
trained on, as they are given to ``distlearn predict`` (distlearn applies no scaling and adds no
bias feature at predict time: the intercept is in the operator; sparse data is densified to ``d``
columns; features that ``distlearn convert`` made -- hashed columns, DNA feature maps, RCV1 term
weights -- are made the same way first). Two outputs: ``label`` ``[N]`` (int64 for integer, boolean or integral float
classes, else strings) and ``scores`` float32 ``[N, n_classes]`` (binary: ``[-s, s]``, with ``s``
distlearn's decision score; column j belongs to ``classes[j]``). The file's metadata
(``metadata_props``) names the estimator, the input and the classes.

- **the vote conversions** (a weighted majority of many hypotheses, which no ONNX-ML classifier
  expresses): standard operators in float64 -- the input cast to double, the scores of every
  distinct hypothesis (linear: ``MatMul`` + ``Add``; kernel: the kernel matrix of ``X`` and the
  patterns, as :func:`~distlearn.learners.kernel.kernel_matrix` computes it, times each cache
  state's coefficients, one state per run between the cache's events), each one's vote (binary:
  score >= 0; multiclass: ``ArgMax``, first on ties), the votes weighted into distlearn's shares
  (binary ``2 share - 1``), the label from the shares as ``predict`` takes it.

Refused, one line each, naming why: the sample conversion (a seeded per-instance draw, keyed by
the mantissa of a random projection of ``x``: a random choice, not a function an ONNX graph
reproduces), weights that are not finite or do not fit float32 (ONNX-ML attributes are
float32), and a graph over ONNX's 2 GiB protobuf limit.

``onnx`` is an optional dependency (``pip install distlearn[onnx]``): without it, one line says so.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._outputs import check_output, replace
from ._urls import is_url
from ._version import __version__
from .conversions.ensemble import SampledHypothesis, VotedHypothesis
from .conversions.kernel import VotedKernelHypothesis
from .model import load_model

__all__ = ["export_onnx", "to_onnx", "OPSET", "ML_OPSET", "IR_VERSION"]

#: The opsets the graph imports: the default domain (``Neg``, ``Slice``, ``Concat``, ``ArgMax``,
#: ``Gather``; the votes' ``Cast``, ``MatMul``, ``Einsum``, ``Exp``, ``Pow``, ...) and ``ai.onnx.ml``
#: (``LinearClassifier``, ``SVMClassifier``: version 1 of both).
OPSET = 17
ML_OPSET = 3
#: The IR version that goes with opset 17 (onnxruntime >= 1.13 and other runtimes of 2022 on read it).
IR_VERSION = 8
#: ONNX's limit for one protobuf file; the graph's attributes must stay well under it.
MAX_BYTES = 1 << 31
_F32_MAX = float(np.finfo(np.float32).max)
_SVM_KERNELS = {"linear": "LINEAR", "poly": "POLY", "rbf": "RBF"}


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ValueError("export to ONNX needs the onnx package: pip install distlearn[onnx]") from None
    return onnx


def _what(model: Any) -> str:
    return type(model).__name__ if not isinstance(model, (str, os.PathLike)) else os.fspath(model)


def _parts(model: Any, where: str) -> tuple[str, dict[str, Any]]:
    """The kind (``linear``, ``kernel``, ``vote`` or ``kernel-vote``) and arrays of a fitted
    estimator or loaded model."""
    if "classes_" not in model.__dict__:
        raise ValueError(f"{where}: {type(model).__name__} is not fitted (no classes_)")
    hyp = model.__dict__.get("hypothesis_")
    if isinstance(hyp, SampledHypothesis):
        raise ValueError(f"{where}: a sample conversion draws one of its {len(hyp.H):,} hypotheses per instance "
                         "from a seeded random projection of x, a random choice that no ONNX graph reproduces; "
                         "export a model trained with conversion='vote' or 'average' (or last, suffix, interval, "
                         "tree, cutoff)")
    if isinstance(hyp, VotedKernelHypothesis):
        _finite(where, support_patterns=hyp.S, coefficients=hyp.coef)
        return "kernel-vote", {"hyp": hyp}
    if isinstance(hyp, VotedHypothesis):
        _finite(where, hypotheses=hyp.H, weights=hyp.w)
        return "vote", {"H": np.asarray(hyp.H, np.float64), "w": np.asarray(hyp.w, np.float64)}
    if "support_vectors_" in model.__dict__:
        kernel = model.__dict__.get("kernel_", model.__dict__.get("_kernel_obj"))
        if kernel is None:
            raise ValueError(f"{where}: {type(model).__name__} has support vectors but no kernel")
        if kernel.name not in _SVM_KERNELS:
            raise ValueError(f"{where}: kernel {kernel.name!r} has no ONNX-ML SVMClassifier kernel_type "
                             f"(it has {', '.join(sorted(_SVM_KERNELS))})")
        sv = model.support_vectors_  # CSR after a fit on sparse rows: the graph's constant is dense
        return "kernel", {"S": np.asarray(sv.toarray() if sp.issparse(sv) else sv, np.float64),
                          "A": np.asarray(model.dual_coef_, np.float64), "kernel": kernel}
    if "coef_" not in model.__dict__:
        raise ValueError(f"{where}: {type(model).__name__} has neither coef_ nor support_vectors_ (not fitted?)")
    coef = np.asarray(model.coef_, np.float64)
    return "linear", {"W": coef.reshape(coef.shape[0], -1),
                      "b": np.asarray(model.intercept_, np.float64).reshape(-1)}


def _labels(classes: np.ndarray) -> tuple[str, list[Any]]:
    """``("ints", [...])`` for integer, boolean or integral float classes, else ``("strings", [...])``."""
    c = np.asarray(classes)
    if c.dtype.kind in "iub" or (c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c))
                                 and np.all(np.abs(c) < 2.0**63)):
        return "ints", [int(v) for v in c]
    return "strings", [str(v) for v in c.tolist()]


def _finite(where: str, **arrays: np.ndarray) -> None:
    for name, a in arrays.items():
        if a.size and not np.all(np.isfinite(a)):
            raise ValueError(f"{where}: the model's {name} are not all finite; nothing to export")


def _float32(where: str, **arrays: np.ndarray) -> None:
    _finite(where, **arrays)
    for name, a in arrays.items():
        if a.size and float(np.max(np.abs(a))) > _F32_MAX:
            raise ValueError(f"{where}: the model's {name} exceed float32's range ({_F32_MAX:.3g}), the type of "
                             "ONNX-ML attributes")


def to_onnx(model: Any) -> Any:
    """The ``onnx.ModelProto`` of a fitted estimator, a loaded model or a model file (checked by
    ``onnx.checker.check_model``); see the module notes for the graph and what is refused."""
    return _build(model)[0]


def _label_of(helper: Any, numpy_helper: Any, scores: str, labels: list[Any], label_kind: str) -> list[Any]:
    """Nodes: ``label = classes[argmax(scores, axis=1)]`` (the first on ties, as ``numpy.argmax``)."""
    cls = numpy_helper.from_array(np.array(labels, dtype=np.int64 if label_kind == "ints" else object), "classes")
    return [helper.make_node("ArgMax", [scores], ["best"], axis=1, keepdims=0, select_last_index=0, name="best"),
            helper.make_node("Constant", [], ["classes"], value=cls, name="classes"),
            helper.make_node("Gather", ["classes", "best"], ["label"], axis=0, name="label")]


def _const(helper: Any, numpy_helper: Any, name: str, value: Any) -> Any:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name), name=name)


def _linear_graph(oh: Any, where: str, W: np.ndarray, b: np.ndarray, labels: list[Any], label_kind: str
                  ) -> tuple[list[Any], int]:
    """``LinearClassifier`` (binary: rows ``(w, -w)`` for ``(classes[1], classes[0])``, then ``Neg``)."""
    helper, _ = oh
    C = len(labels)
    _float32(where, coefficients=W, intercepts=b)
    d = W.shape[1]
    if W.shape[0] != (1 if C == 2 else C) or b.shape != (W.shape[0],):
        raise ValueError(f"{where}: {W.shape[0]} weight rows and {b.shape[0]} intercepts for {C} classes")
    if W.shape[0] * d * 4 > MAX_BYTES // 2:
        raise ValueError(f"{where}: {W.shape[0]} x {d:,} coefficients exceed ONNX's 2 GiB file limit")
    order = labels
    if C == 2:
        W, b, order = np.vstack([W, -W]), np.concatenate([b, -b]), [labels[1], labels[0]]
    nodes = [helper.make_node("LinearClassifier", ["X"], ["label", "raw" if C == 2 else "scores"],
                              domain="ai.onnx.ml", name="linear", coefficients=W.ravel().tolist(),
                              intercepts=b.tolist(), multi_class=0, post_transform="NONE",
                              **{f"classlabels_{label_kind}": order})]
    if C == 2:
        nodes.append(helper.make_node("Neg", ["raw"], ["scores"], name="class_order"))
    return nodes, d


def _kernel_graph(oh: Any, where: str, S: np.ndarray, A: np.ndarray, kernel: Any, labels: list[Any],
                  label_kind: str) -> tuple[list[Any], int]:
    """Binary: one ``SVMClassifier`` (coefficients negated), then ``Neg``; multiclass: one binary
    ``SVMClassifier`` per class for its score, ``Concat``, ``ArgMax``."""
    helper, numpy_helper = oh
    C = len(labels)
    _float32(where, support_vectors=S, coefficients=A)
    P, d = S.shape
    if A.shape != (1 if C == 2 else C, P):
        raise ValueError(f"{where}: dual coefficients of shape {A.shape} for {P} support patterns and {C} classes")
    if A.shape[0] * P * (d + 1) * 4 > MAX_BYTES // 2:
        raise ValueError(f"{where}: {A.shape[0]} x {P:,} support patterns of {d:,} features exceed ONNX's "
                         "2 GiB file limit")
    gamma, degree, coef0 = (float(v) for v in kernel.params)
    svm = {"kernel_type": _SVM_KERNELS[kernel.name], "kernel_params": [gamma, coef0, degree],
           "support_vectors": S.ravel().tolist(), "vectors_per_class": [P, 0], "rho": [0.0],
           "post_transform": "NONE", "domain": "ai.onnx.ml"}
    if C == 2:  # the vote goes to classlabels[0] when sum > 0: sum = -s
        return [helper.make_node("SVMClassifier", ["X"], ["label", "raw"], name="kernel",
                                 coefficients=(-A[0]).tolist(), **svm, **{f"classlabels_{label_kind}": labels}),
                helper.make_node("Neg", ["raw"], ["scores"], name="class_order")], d
    nodes = [_const(helper, numpy_helper, "col1", np.array([1], np.int64)),
             _const(helper, numpy_helper, "col2", np.array([2], np.int64))]
    for k in range(C):  # binary SVMClassifier k: scores [-f_k, f_k]
        nodes += [helper.make_node("SVMClassifier", ["X"], [f"label{k}", f"pair{k}"], name=f"kernel{k}",
                                   coefficients=A[k].tolist(), **svm, classlabels_ints=[0, 1]),
                  helper.make_node("Slice", [f"pair{k}", "col1", "col2", "col1"], [f"score{k}"], name=f"score{k}")]
    nodes.append(helper.make_node("Concat", [f"score{k}" for k in range(C)], ["scores"], axis=1, name="scores"))
    return nodes + _label_of(helper, numpy_helper, "scores", labels, label_kind), d


def _linear_front(oh: Any, where: str, H: np.ndarray) -> list[Any]:
    """Nodes: ``each`` [N, M * K] float64, the scores of every hypothesis ``H[m]`` (bias last)."""
    helper, numpy_helper = oh
    M, K, d1 = H.shape
    if M * K * d1 * 8 > MAX_BYTES // 2:
        raise ValueError(f"{where}: {M:,} hypotheses of {K} x {d1:,} exceed ONNX's 2 GiB file limit")
    return [_const(helper, numpy_helper, "W", np.ascontiguousarray(H[:, :, :-1].reshape(M * K, d1 - 1).T,
                                                                   np.float64)),
            _const(helper, numpy_helper, "b", H[:, :, -1].reshape(-1).astype(np.float64)),
            helper.make_node("MatMul", ["Xd", "W"], ["XW"], name="XW"),
            helper.make_node("Add", ["XW", "b"], ["each"], name="each")]


def _kernel_states(hyp: VotedKernelHypothesis) -> tuple[np.ndarray, np.ndarray]:
    """The distinct hypotheses of a kernel vote, ``h_a .. h_b``, as in
    :func:`distlearn.learners._budget.kernel_vote_counts`: ``Z`` [P, J] (pattern p's multiplicity
    in run j: the running sum of its events) and ``n`` [J] (the rounds each run lasts)."""
    P, E = hyp.S.shape[0], len(hyp.ev_t)
    count = np.zeros(P)
    states, runs = [], []
    e = t = 0
    while t <= hyp.b:
        while e < E and hyp.ev_t[e] <= t:
            count[hyp.ev_p[e]] += hyp.ev_s[e]
            e += 1
        nxt = min(int(hyp.ev_t[e]) if e < E else hyp.b + 1, hyp.b + 1)
        n = nxt - max(t, hyp.a)
        if n > 0:
            states.append(count.copy())
            runs.append(n)
        t = nxt
    return np.array(states).T.reshape(P, len(runs)), np.asarray(runs, np.float64)


def _kernel_front(oh: Any, where: str, hyp: VotedKernelHypothesis) -> tuple[list[Any], int, np.ndarray]:
    """Nodes: ``each`` [N, J * K] float64, the scores of every distinct hypothesis of a kernel vote
    (the kernel matrix of ``X`` and the patterns, as :func:`~distlearn.learners.kernel.kernel_matrix`,
    times each run's coefficients); returns the nodes, J and the runs' lengths."""
    helper, numpy_helper = oh
    S, coef = np.asarray(hyp.S, np.float64), np.asarray(hyp.coef, np.float64)
    Z, runs = _kernel_states(hyp)
    P, K, J = S.shape[0], coef.shape[1], len(runs)
    if P * J * K * 8 + S.nbytes > MAX_BYTES // 2:
        raise ValueError(f"{where}: a kernel vote of {J:,} distinct hypotheses over {P:,} patterns "
                         f"({P * J * K * 8:,} bytes of coefficients) exceeds ONNX's 2 GiB file limit")
    gamma, degree, coef0 = (float(v) for v in hyp.kernel.params)
    c = lambda name, v: _const(helper, numpy_helper, name, v)  # noqa: E731
    nodes = [c("ST", np.ascontiguousarray(S.T)), helper.make_node("MatMul", ["Xd", "ST"], ["G"], name="G")]
    name = hyp.kernel.name
    if name == "rbf":  # exp(-gamma max(0, |x|^2 + |s|^2 - 2 x.s))
        nodes += [c("m2", np.float64(-2.0)), c("sqS", np.einsum("ij,ij->i", S, S)), c("zero_d", np.float64(0.0)),
                  c("neg_gamma", np.float64(-gamma)), c("axis_1", np.array([1], np.int64)),
                  helper.make_node("Mul", ["Xd", "Xd"], ["X2"], name="X2"),
                  helper.make_node("ReduceSum", ["X2", "axis_1"], ["xsq"], keepdims=1, name="xsq"),
                  helper.make_node("Mul", ["G", "m2"], ["G2"], name="G2"),
                  helper.make_node("Add", ["G2", "xsq"], ["G3"], name="G3"),
                  helper.make_node("Add", ["G3", "sqS"], ["G4"], name="G4"),
                  helper.make_node("Max", ["G4", "zero_d"], ["dist"], name="dist"),
                  helper.make_node("Mul", ["dist", "neg_gamma"], ["G5"], name="G5"),
                  helper.make_node("Exp", ["G5"], ["kx"], name="kx")]
    elif name == "poly":  # (gamma x.s + coef0)^degree
        nodes += [c("gamma", np.float64(gamma)), c("coef0", np.float64(coef0)), c("degree", np.float64(degree)),
                  helper.make_node("Mul", ["G", "gamma"], ["G2"], name="G2"),
                  helper.make_node("Add", ["G2", "coef0"], ["G3"], name="G3"),
                  helper.make_node("Pow", ["G3", "degree"], ["kx"], name="kx")]
    else:
        nodes.append(helper.make_node("Identity", ["G"], ["kx"], name="kx"))
    Wk = np.ascontiguousarray((Z[:, :, None] * coef[:, None, :]).reshape(P, J * K))
    nodes += [c("Wk", Wk), helper.make_node("MatMul", ["kx", "Wk"], ["each"], name="each")]
    return nodes, J, runs


def _vote_graph(oh: Any, where: str, front: list[Any], M: int, K: int, w: np.ndarray, d: int, labels: list[Any],
                label_kind: str) -> tuple[list[Any], int]:
    """A vote in float64 standard operators: ``X`` cast to double, ``front`` (nodes computing
    ``each`` [N, M * K], the scores of M hypotheses), every hypothesis's vote (binary: score >= 0;
    multiclass: ``ArgMax``, first on ties), the votes weighted by ``w`` into distlearn's shares."""
    from onnx import TensorProto

    helper, numpy_helper = oh
    double, single = TensorProto.DOUBLE, TensorProto.FLOAT
    C = len(labels)
    if K != (1 if C == 2 else C) or w.shape != (M,):
        raise ValueError(f"{where}: a vote of {M} hypotheses with {K} rows and {w.shape} weights for {C} classes")
    total = float(w.sum())
    c = lambda name, v: _const(helper, numpy_helper, name, v)  # noqa: E731
    nodes = [helper.make_node("Cast", ["X"], ["Xd"], to=double, name="Xd"), *front, c("w", w.astype(np.float64))]
    if K == 1:  # share of classes[1]: 2 * sum(w[s >= 0]) / total - 1
        nodes += [c("zero", np.float64(0.0)), c("two", np.float64(2.0)), c("total", np.float64(total)),
                  c("one", np.float64(1.0)), c("axis1", np.array([1], np.int64)),
                  helper.make_node("GreaterOrEqual", ["each", "zero"], ["up"], name="up"),
                  helper.make_node("Cast", ["up"], ["upd"], to=double, name="upd"),
                  helper.make_node("MatMul", ["upd", "w"], ["votes"], name="votes"),
                  helper.make_node("Mul", ["votes", "two"], ["twice"], name="twice"),  # (2 votes) / total: an even
                  helper.make_node("Div", ["twice", "total"], ["share"], name="share"),  # split is exactly 0
                  helper.make_node("Sub", ["share", "one"], ["dec"], name="dec"),
                  helper.make_node("Unsqueeze", ["dec", "axis1"], ["pos"], name="pos"),
                  helper.make_node("Neg", ["pos"], ["neg"], name="neg"),
                  helper.make_node("Concat", ["neg", "pos"], ["shares"], axis=1, name="shares")]
    else:  # share of class k: sum(w[argmax_k' s = k]) / total
        nodes += [c("shape", np.array([-1, M, K], np.int64)), c("ks", np.arange(K, dtype=np.int64)),
                  c("total", np.float64(total)),
                  helper.make_node("Reshape", ["each", "shape"], ["per"], name="per"),  # [N, M, K]
                  helper.make_node("ArgMax", ["per"], ["win"], axis=2, keepdims=1, select_last_index=0, name="win"),
                  helper.make_node("Equal", ["win", "ks"], ["hit"], name="hit"),  # [N, M, K]
                  helper.make_node("Cast", ["hit"], ["hitd"], to=double, name="hitd"),
                  helper.make_node("Einsum", ["hitd", "w"], ["votes"], equation="nmk,m->nk", name="votes"),
                  helper.make_node("Div", ["votes", "total"], ["shares"], name="shares")]
    nodes.append(helper.make_node("Cast", ["shares"], ["scores"], to=single, name="scores"))
    nodes += _label_of(helper, numpy_helper, "shares", labels, label_kind)
    return nodes, d


def _build(model: Any) -> tuple[Any, dict[str, Any]]:
    """The checked ``ModelProto`` and what it holds (operator, features, classes, ...)."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    oh = (helper, numpy_helper)
    where = _what(model)
    if isinstance(model, (str, os.PathLike)):
        if not os.path.lexists(model):
            raise FileNotFoundError(f"{where}: no such model file (distlearn train --save MODEL.npz writes one)")
        model = load_model(model)
    kind, arr = _parts(model, where)
    classes = np.asarray(model.classes_)
    C = len(classes)
    if C < 2:
        raise ValueError(f"{where}: a model with {C} class cannot be exported (two or more)")
    label_kind, labels = _labels(classes)
    info: dict[str, Any] = {}
    if kind == "kernel" and arr["S"].shape[0] == 0:  # no support pattern: every score is 0
        K, d = (1 if C == 2 else C), arr["S"].shape[1]
        nodes, d = _linear_graph(oh, where, np.zeros((K, d)), np.zeros(K), labels, label_kind)
        operator = "LinearClassifier (a kernel model without support patterns: all scores 0)"
    elif kind == "linear":
        nodes, d = _linear_graph(oh, where, arr["W"], arr["b"], labels, label_kind)
        operator = "LinearClassifier"
    elif kind == "vote":
        H, w = arr["H"], arr["w"]
        nodes, d = _vote_graph(oh, where, _linear_front(oh, where, H), H.shape[0], H.shape[1], w, H.shape[2] - 1,
                               labels, label_kind)
        operator = f"vote of {len(w)} hypotheses (MatMul, {'>= 0' if C == 2 else 'ArgMax'}, weighted shares)"
        info = {"n_hypotheses": len(w)}
    elif kind == "kernel-vote":
        hyp = arr["hyp"]
        front, J, runs = _kernel_front(oh, where, hyp)
        nodes, d = _vote_graph(oh, where, front, J, hyp.coef.shape[1], runs, hyp.S.shape[1], labels, label_kind)
        operator = (f"kernel vote of {J} distinct hypotheses over {hyp.S.shape[0]} patterns ({hyp.kernel.name} "
                    f"kernel matrix, MatMul, {'>= 0' if C == 2 else 'ArgMax'}, weighted shares)")
        gamma, degree, coef0 = (float(v) for v in hyp.kernel.params)
        info = {"n_hypotheses": J, "n_support": hyp.S.shape[0], "kernel": hyp.kernel.name,
                "kernel_params": {"gamma": gamma, "coef0": coef0, "degree": degree}}
    else:
        kernel = arr["kernel"]
        nodes, d = _kernel_graph(oh, where, arr["S"], arr["A"], kernel, labels, label_kind)
        operator = "SVMClassifier" if C == 2 else f"SVMClassifier x {C} (one per class)"
        gamma, degree, coef0 = (float(v) for v in kernel.params)
        info = {"n_support": arr["S"].shape[0], "kernel": kernel.name,
                "kernel_params": {"gamma": gamma, "coef0": coef0, "degree": degree}}
    label_type = TensorProto.INT64 if label_kind == "ints" else TensorProto.STRING
    graph = helper.make_graph(
        nodes, "distlearn",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", d])],
        [helper.make_tensor_value_info("label", label_type, ["N"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", C])])
    est = model.meta.get("estimator", type(model).__name__) if isinstance(getattr(model, "meta", None), dict) \
        else type(model).__name__
    doc = (f"{est} ({operator}): input X float32 [N, {d}], dense rows of the {d} features it was trained on "
           "(no scaling; sparse data densified); outputs label [N] and scores [N, "
           f"{C}] (column j is class j of {labels[:20]}{' ...' if C > 20 else ''}).")
    proto = helper.make_model(graph, producer_name="distlearn", producer_version=__version__, doc_string=doc,
                              opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", ML_OPSET)],
                              ir_version=IR_VERSION)
    helper.set_model_props(proto, {"distlearn.estimator": est, "distlearn.operator": operator,
                                   "distlearn.input": f"X float32 [N, {d}]", "distlearn.classes": repr(labels)})
    onnx.checker.check_model(proto, full_check=True)
    return proto, {"operator": operator, "n_features": d, "classes": labels, "labels": label_kind[:-1],
                   "estimator": est, **info}


def export_onnx(model: Any, out: str | os.PathLike[str], *, overwrite: bool = False) -> dict[str, Any]:
    """Write ``model`` (a fitted distlearn estimator, a loaded model or a model file) to ``out``
    (``.onnx``) and return what was written: ``path``, ``operator``, ``n_features``, ``classes``,
    ``labels`` (``"int"`` or ``"string"``), ``estimator``, ``bytes``.

    An existing ``out`` is replaced only with ``overwrite`` and only if distlearn wrote it
    (:func:`distlearn._outputs.check_output`); the file is checked with ``onnx.checker`` before
    it is put in place.  ``onnxruntime.InferenceSession(out).run(None, {"X": X.astype("float32")})``
    gives ``[labels, scores]``.
    """
    raw = os.path.expanduser(os.fspath(out))
    inputs = [model] if isinstance(model, (str, os.PathLike)) else []
    if is_url(raw):  # before Path(), which would read s3://b/m.onnx as the local s3:/b/m.onnx
        check_output(raw, "onnx", overwrite=overwrite, inputs=inputs)  # one line: exports stay local
    p = Path(raw)
    if p.suffix.lower() != ".onnx":
        raise ValueError(f"ONNX files end in .onnx, got {os.fspath(out)!r}")
    check_output(p, "onnx", overwrite=overwrite, inputs=inputs)
    proto, info = _build(model)
    data = proto.SerializeToString()
    tmp = p.with_name(f".{p.stem}.tmp-{uuid.uuid4().hex[:8]}.onnx")
    try:
        tmp.write_bytes(data)
        replace(tmp, p, "onnx", overwrite=overwrite)
    finally:
        if tmp.exists():
            tmp.unlink()
    return {"path": str(p), **info, "bytes": len(data)}
