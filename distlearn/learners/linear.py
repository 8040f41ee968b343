"""The linear online rules: their parameters, their state, and the chunk driver.

This is the wrapper half of the kernel/wrapper pair: it validates and coerces,
allocates, and calls :mod:`distlearn.learners._kernels`, which runs every round
of a chunk in compiled code.

>>> import numpy as np
>>> rule = make_rule("perceptron")
>>> state = init_state(n_features=2, n_outputs=1)
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
>>> y = np.array([1, 0, 1])                 # class indices; column 0 scores class 1
>>> log = learn_chunk(rule, state, X, y)
>>> log.mistake.tolist(), log.updated.tolist()
([0, 1, 0], [1, 1, 1])
>>> coef, intercept = state_coef(state)     # y.w.x <= 0 updates, even at margin 0
>>> coef.tolist()
[[2.0, 0.0]]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from .._validation import check_allocation
from . import _adaptive as A
from . import _kernels as K

__all__ = [
    "NonFiniteError",
    "RunningSum",
    "GroupSums",
    "running_sum",
    "running_value",
    "RULES",
    "Rule",
    "RuleSpec",
    "max_row_norm",
    "raise_bad_round",
    "raise_non_finite",
    "cast_values",
    "LinearState",
    "RoundLog",
    "make_rule",
    "init_state",
    "learn_chunk",
    "step_sums",
    "check_sample_weight",
    "state_coef",
    "copy_state",
    "row_sqnorms",
]


class Rule(NamedTuple):
    """A rule as the kernels see it: a code and a float64 parameter vector whose slots are
    named in :mod:`distlearn.learners._kernels` (``K.P_ETA``, ``K.P_C``, ...; :meth:`param`)."""

    name: str
    code: int
    params: np.ndarray
    native: bool  #: couples the per-class columns (multiclass PA, MIRA)

    def param(self, slot: str) -> float:
        """The parameter in the slot named ``slot`` (``rule.param("P_ETA")``), as the kernels read it."""
        return float(self.params[getattr(K, slot)])


class LinearState(NamedTuple):
    """Learner state: plain arrays, so it pickles through Dask as is.

    The true weights of output column ``k`` are ``scale[k] * W[:, k]``; row
    ``n_features`` of ``W`` is the bias weight (``fit_intercept``), multiplied
    by the constant feature value ``bias``.
    """

    W: np.ndarray          #: (n_features + 1, n_outputs), feature-major
    scale: np.ndarray      #: (n_outputs,) float64
    sqnorm: np.ndarray     #: (n_outputs,) float64, ||w_k||^2 where maintained
    n_updates: np.ndarray  #: (n_outputs,) int64
    n_rounds: np.ndarray   #: (1,) int64, examples seen (= index of the current hypothesis)
    age: np.ndarray        #: (1,) int64, rounds the current hypothesis has been used so far


class RunningSum(NamedTuple):
    """A weighted sum of hypotheses kept by the kernels at O(K) per round.

    ``sum = P + q * W`` column by column, in true weight units (see
    :func:`running_sum`).  Round ``t`` (hypothesis ``i = t - 1``) is added when
    ``i >= start`` and the hypothesis has been used for at least ``cut``
    rounds before (or ``i == 0``): ``cut = 0`` sums every hypothesis, ``cut = k``
    gives the numerator of cutoff averaging with cutoff ``k``.
    """

    P: np.ndarray      #: (n_features + 1, n_outputs) float64
    q: np.ndarray      #: (2, n_outputs) float64: q, and the scale at the last rebase
    cfg: np.ndarray    #: int64 [start, cut, base (set per call), hypotheses added so far]

    @property
    def count(self) -> int:
        """Hypotheses added so far."""
        return int(self.cfg[3])


def running_sum(state: LinearState, *, start: int = 0, cut: int = 0) -> RunningSum:
    """An empty :class:`RunningSum` for ``state``'s shape."""
    d1, k = state.W.shape
    return RunningSum(np.zeros((d1, k), np.float64), np.vstack([np.zeros(k), state.scale]),
                      np.array([int(start), int(cut), 0, 0], np.int64))


def running_value(acc: RunningSum, state: LinearState) -> np.ndarray:
    """The sum so far, shape (n_outputs, n_features + 1), true units (bias last)."""
    return (acc.P + acc.q[0][None, :] * state.W.astype(np.float64)).T.copy()


class GroupSums:
    """Cutoff averaging's survival-time group sums, kept by the kernels (binary rounds: one
    output column, a binary rule).

    Slot ``g`` holds the sum ``G_s`` of the hypotheses used for exactly ``s = surv[g]`` rounds,
    as ``P[:, g] + q[g] * W[:, 0]`` in true units: a hypothesis is added when the update that
    ends it fires (``q[g] += scale``, O(1)), and an update adds ``-q[g] * delta`` to ``P`` on the
    row's nonzeros only (O(nnz x groups)), so the sums stay fixed while ``W`` moves.  Every
    fold (``P += q * W``: a scale drift of 16x, a scale folded into ``W``, a zeroed column)
    happens at a round the data decide, never at a read, a chunk boundary or a memory cap, so
    the sums are the same bit for bit however the rounds are chunked.  Slots are added in order
    of first appearance; when all are taken the kernel stops before the round and the driver
    (:func:`learn_chunk`) doubles the capacity (an exact copy) and resumes.
    """

    def __init__(self, n_rows_w: int, cap: int = 8) -> None:
        self.P = np.zeros((n_rows_w, cap), np.float64)
        self.q = np.zeros(cap + 1, np.float64)
        self.q[cap] = 1.0  # the scale at the last rebase (set by begin)
        self.cfg = np.zeros(K._G_HEAD + cap, np.int64)
        self.cfg[K._G_CAP] = cap

    @property
    def n_used(self) -> int:
        return int(self.cfg[K._G_USED])

    @property
    def surv(self) -> np.ndarray:
        """Survival time of each slot in use."""
        return self.cfg[K._G_HEAD:K._G_HEAD + self.n_used]

    def grow(self) -> None:
        """Double the capacity (the sums copied exactly)."""
        cap = self.P.shape[1]
        P = np.zeros((self.P.shape[0], 2 * cap), np.float64)
        P[:, :cap] = self.P
        q = np.zeros(2 * cap + 1, np.float64)
        q[:cap] = self.q[:cap]
        q[2 * cap] = self.q[cap]
        cfg = np.zeros(len(self.cfg) + cap, np.int64)
        cfg[:len(self.cfg)] = self.cfg
        cfg[K._G_CAP] = 2 * cap
        cfg[K._G_GROW] = 0
        self.P, self.q, self.cfg = P, q, cfg

    def values(self, state: LinearState, slots: list[int]) -> list[np.ndarray]:
        """The sums of these slots, each of shape (1, n_features + 1), true units (their columns of
        ``P`` read once, transposed, so that each sum is one contiguous pass)."""
        Pt = np.ascontiguousarray(self.P[:, slots].T)
        w = state.W[:, 0].astype(np.float64)
        return [(Pt[i] + self.q[g] * w)[None, :] for i, g in enumerate(slots)]

    @property
    def nbytes(self) -> int:
        return self.P.nbytes + self.q.nbytes + self.cfg.nbytes


class RoundLog(NamedTuple):
    """Per-round events of one chunk, in processing order."""

    mistake: np.ndarray  #: uint8: h_{t-1} misclassified example t (sgn(0) = +1)
    hinge: np.ndarray    #: float64: hinge loss of h_{t-1} on example t
    updated: np.ndarray  #: uint8: the rule updated on example t


def _pos(name: str, value: Any, *, strict: bool = True) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or (v <= 0 if strict else v < 0):
        bound = "> 0" if strict else ">= 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def _schedule(name: str, value: Any) -> float:
    if value not in ("constant", "inv_sqrt"):
        raise ValueError(f"{name} must be 'constant' or 'inv_sqrt', got {value!r}")
    return 1.0 if value == "inv_sqrt" else 0.0


#: What a builder returns: the kernel's rule code and its parameters by slot (``{K.P_ETA: eta}``).
Built = tuple[int, dict[int, float]]


def _perceptron(eta: float = 1.0) -> Built:
    return K.PERCEPTRON, {K.P_ETA: _pos("eta", eta)}


def _generalized(rho: float = 0.0, eta: float = 1.0, rho_schedule: str = "constant",
                 eta_schedule: str = "constant") -> Built:
    return K.GENERALIZED, {K.P_RHO: _pos("rho", rho, strict=False), K.P_ETA: _pos("eta", eta),
                           K.P_RHO_SCHEDULE: _schedule("rho_schedule", rho_schedule),
                           K.P_ETA_SCHEDULE: _schedule("eta_schedule", eta_schedule)}


def _margin(horizon: float, radius: float) -> Built:
    m = _pos("horizon", horizon)
    R = _pos("radius", radius)
    return K.MARGIN, {K.P_MARGIN_ETA: 1.0 / (math.sqrt(m) * R)}


def _alma(alpha: float = 0.9, B: float | None = None, C: float = math.sqrt(2.0)) -> Built:
    a = float(alpha)
    if not (0.0 < a <= 1.0):
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    b = 1.0 / a if B is None else _pos("B", B)
    return K.ALMA, {K.P_ALMA_MARGIN: (1.0 - a) * b, K.P_ALMA_C: _pos("C", C)}


def _romma(aggressive: bool = False) -> Built:
    return (K.AGGRESSIVE_ROMMA if aggressive else K.ROMMA), {}


_PA_CODES = {"PA": (K.PA, K.MC_PA), "PA-I": (K.PA1, K.MC_PA1), "PA-II": (K.PA2, K.MC_PA2)}


def _pa(variant: str = "PA-I", C: float = 1.0, native: bool = False) -> Built:
    if variant not in _PA_CODES:
        raise ValueError(f"variant must be one of {sorted(_PA_CODES)}, got {variant!r}")
    return _PA_CODES[variant][1 if native else 0], {K.P_C: _pos("C", C)}


def _mira(beta: float = 0.01, native: bool = False) -> Built:
    b = float(beta)
    if not math.isfinite(b) or b < 0:
        raise ValueError(f"beta must be finite and >= 0, got {beta!r}")
    return (K.MC_MIRA if native else K.MIRA), {K.P_BETA: b}


def _lms(eta: float = 0.01) -> Built:
    return K.LMS, {K.P_LMS_ETA: _pos("eta", eta)}


def rule_vector(params: dict[int, float]) -> np.ndarray:
    """The kernels' parameter vector (``K.N_PARAMS`` float64 slots, unused ones 0) from a builder's
    ``{slot: value}``."""
    arr = np.zeros(K.N_PARAMS, dtype=np.float64)
    for slot, value in params.items():
        arr[slot] = value
    return arr


class RuleSpec(NamedTuple):
    """One entry of the rule registry."""

    name: str                                       #: the rule's name (``make_rule(name, ...)``, ``base=name``)
    make: Callable[..., Built]                      #: parameters -> (kernel code, {slot: value})
    estimator: str                                  #: its scikit-learn class, ``distlearn.<estimator>``
    summary: str                                    #: one line for help texts
    native: bool = False                            #: has a native (single-prototype) multiclass form
    weighted: bool = False                          #: takes sample weights (its step ``u`` is scaled)


#: THE rule registry: every linear rule, once.  The kernels dispatch on the
#: codes that ``make`` returns; the estimators, OBPM's ``base=``,
#: ParameterMixing, the ``distlearn train`` command and the tests' naive
#: oracles all read their rules from here.  Adding a rule means: its step in
#: :mod:`distlearn.learners._kernels`, an entry here, its estimator class (a
#: parameter list and a docstring) and its oracle in the tests.
RULES: dict[str, RuleSpec] = {r.name: r for r in (
    RuleSpec("perceptron", _perceptron, "Perceptron", "Rosenblatt's perceptron: w += eta y x when y w.x <= 0",
             weighted=True),
    RuleSpec("generalized", _generalized, "GeneralizedPerceptron",
             "generalised perceptron (OBPM paper, Alg. 1): margin rho_k, step eta_k", weighted=True),
    RuleSpec("margin", _margin, "MarginPerceptron",
             "finite-horizon margin perceptron (Dekel & Singer 2005), projected on the unit ball", weighted=True),
    RuleSpec("alma", _alma, "ALMA", "Gentile's approximate large margin algorithm ALMA_2"),
    RuleSpec("romma", _romma, "ROMMA", "relaxed online maximum margin algorithm (Li & Long 2002)"),
    RuleSpec("pa", _pa, "PassiveAggressive", "passive-aggressive PA / PA-I / PA-II (Crammer et al. 2006)",
             native=True),
    RuleSpec("mira", _mira, "MIRA", "MIRA, ultraconservative multiclass (Crammer & Singer 2003)", native=True),
    RuleSpec("lms", _lms, "LMS", "least mean squares (Widrow-Hoff) as a classifier", weighted=True),
)}


#: Why a rule takes no sample weights: its step is the solution of a normalised problem (a margin
#: reached exactly, a projection), which a scaled step would no longer solve.
UNWEIGHTED_WHY = {
    "alma": "its step C / sqrt(k) counts updates and is projected onto the unit ball by design",
    "romma": "its update is the exact projection onto two half-spaces (w <- c w + d x)",
    "pa": "its step is the exact solution of a margin constraint (a scaled step no longer solves it)",
    "mira": "its step is the exact solution of a margin constraint (a scaled step no longer solves it)",
}


def check_sample_weight(rule_name: str, sample_weight: Any, n_rows: int, owner: str = "") -> np.ndarray | None:
    """``sample_weight`` checked for a rule: None (all 1), or float64 of shape ``(n_rows,)``, finite and
    >= 0.  A rule that does not scale its step (:attr:`RuleSpec.weighted`) is refused in one line
    naming the rule and the rules that take weights; ``owner`` names the estimator in it."""
    if sample_weight is None:
        return None
    spec = RULES.get(rule_name)
    if spec is None or not spec.weighted:
        who = owner or (spec.estimator if spec else repr(rule_name))
        why = UNWEIGHTED_WHY.get(rule_name, "it has no weighted form")
        takers = ", ".join(r.estimator for r in RULES.values() if r.weighted)
        raise ValueError(f"sample_weight: {who} takes no sample weights ({why}); the rules that scale their "
                         f"step by a weight: {takers}")
    sw = np.asarray(sample_weight, dtype=np.float64)
    if sw.ndim == 0:
        sw = np.full(n_rows, float(sw))
    if sw.shape != (n_rows,):
        raise ValueError(f"sample_weight has shape {sw.shape}; expected ({n_rows},), one weight per row of X")
    if not np.isfinite(sw).all() or (sw < 0).any():
        bad = int(np.flatnonzero(~np.isfinite(sw) | (sw < 0))[0])
        raise ValueError(f"sample_weight must be finite and >= 0; row {bad} has {sw[bad]!r}")
    return sw


def make_rule(name: str, **params: Any) -> Rule:
    """Build a :class:`Rule` from its name and parameters (validated here).

    ``perceptron(eta=1)``, ``generalized(rho=0, eta=1, rho_schedule, eta_schedule)``,
    ``margin(horizon, radius)``, ``alma(alpha=0.9, B=1/alpha, C=sqrt(2))``,
    ``romma(aggressive=False)``, ``pa(variant="PA-I", C=1, native=False)``,
    ``mira(beta=0.01, native=False)``, ``lms(eta=0.01)``.
    """
    try:
        make = RULES[name].make
    except KeyError:
        raise ValueError(f"unknown rule {name!r}; choose one of {sorted(RULES)}") from None
    code, p = make(**params)
    return Rule(name, int(code), rule_vector(p), code >= K.FIRST_NATIVE)


def init_state(n_features: int, n_outputs: int, *, dtype: Any = np.float64) -> LinearState:
    """Zero weights for ``n_outputs`` columns (1 for a binary problem)."""
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    check_allocation("the weights", (int(n_features) + 1, int(n_outputs)), dt.itemsize)
    return LinearState(
        W=np.zeros((int(n_features) + 1, int(n_outputs)), dtype=dt),
        scale=np.ones(int(n_outputs), dtype=np.float64),
        sqnorm=np.zeros(int(n_outputs), dtype=np.float64),
        n_updates=np.zeros(int(n_outputs), dtype=np.int64),
        n_rounds=np.zeros(1, dtype=np.int64),
        age=np.zeros(1, dtype=np.int64),
    )


def copy_state(state: LinearState) -> LinearState:
    return type(state)(*(a.copy() for a in state))  # LinearState, or an adaptive rule's AdaptiveState


def state_coef(state: LinearState) -> tuple[np.ndarray, np.ndarray]:
    """``(coef, intercept)`` of the true weights: shapes (n_outputs, n_features), (n_outputs,)."""
    W = state.W
    full = (W.astype(np.float64) * state.scale[None, :]).T
    return np.ascontiguousarray(full[:, :-1]), full[:, -1].copy()


def learn_chunk(
    rule: Rule,
    state: LinearState,
    X: Any,
    y: np.ndarray,
    *,
    order: np.ndarray | None = None,
    fit_intercept: bool = False,
    bias: float = 1.0,
    log: RoundLog | None = None,
    offset: int = 0,
    acc: RunningSum | None = None,
    splits: Any = (),
    on_piece: Any = None,
    sample_weight: np.ndarray | None = None,
    reps: np.ndarray | None = None,
) -> RoundLog:
    """Run the rule over every row of one chunk, updating ``state`` in place.

    Parameters
    ----------
    rule : Rule
        From :func:`make_rule`.
    state : LinearState
        From :func:`init_state`; its dtype decides the arithmetic of the stored weights
        (a margin's products and sum are in that dtype, its scale, the steps and the norms
        in float64).
    X : ndarray of shape (n_rows, n_features) or scipy.sparse CSR matrix
        Values of the weights' dtype are used without a copy.
    y : array of int
        Class indices.  With one output column the column scores class 1
        (``y == 1`` is the positive label, anything else negative); with K
        columns, column k scores class k.
    order : array of int, optional
        Rows to visit, in this order (a permutation for shuffled epochs).
    fit_intercept, bias : bool, float
        Whether the bias row of ``W`` is used, and the constant feature value.
    log, offset : RoundLog, int, optional
        Write the per-round events into ``log`` from position ``offset``
        instead of allocating a new log.
    acc : RunningSum, optional
        Also maintain this running sum of hypotheses (the conversions' averages).
    splits, on_piece : sequence of int, callable, optional
        Run the rounds in pieces cut at these positions (0 < split < n) and call
        ``on_piece(lo, hi, age0)`` after each (``age0``: the hypothesis' age before
        the piece); it returns the running sum for the next piece.  The input is
        checked and converted once for all pieces.
    sample_weight : array of float of shape (n_rows,), optional
        Row ``r``'s step is scaled by ``sample_weight[r]`` (scikit-learn's ``SGDClassifier``
        semantics: ``w += weight * eta * y * x``); a weight of 0 is a round without update (it is
        still scored: mistake and hinge are logged), a weight of 1 the unweighted round, bit for
        bit.  Only for the rules with :attr:`RuleSpec.weighted` (:func:`check_sample_weight`).
    reps : array of int of shape (len(order),), optional
        With ``acc`` (a :class:`RunningSum`): round ``i``'s hypothesis is added to the sum
        ``reps[i]`` times (one addition each, in order) instead of by the sum's start and cut.
        Cutoff averaging's event replay runs only the updating rounds of a pass, each standing
        for every counted round of the hypothesis it ends (``CutoffTracker``).  Not for the
        adaptive rules nor group sums.

    Returns
    -------
    RoundLog
    """
    n_rows = X.shape[0]
    if order is None:
        order = np.arange(n_rows, dtype=np.int64)
    else:
        order = np.ascontiguousarray(order, dtype=np.int64)
    n = order.shape[0]
    if log is None:
        log = RoundLog(np.zeros(n, np.uint8), np.zeros(n, np.float64), np.zeros(n, np.uint8))
        offset = 0
    y = np.ascontiguousarray(y, dtype=np.int64)
    # The kernels trust their input; check what would make them read or write
    # out of bounds.
    if y.shape != (n_rows,):
        raise ValueError(f"y has shape {y.shape}; expected ({n_rows},), one class index per row of X")
    n_out = state.W.shape[1]
    if n_out > 1 and n and (y.min() < 0 or y.max() >= n_out):
        raise ValueError(f"class indices must be in [0, {n_out - 1}] for {n_out} output columns")
    if rule.native and n_out < 3:
        raise ValueError(f"native multiclass rule {rule.name!r} needs at least 3 output columns, got {n_out}")
    if n and (order.min() < 0 or order.max() >= n_rows):
        raise ValueError(f"order has row indices outside [0, {n_rows - 1}]")
    if X.shape[1] != state.W.shape[0] - 1:
        raise ValueError(f"X has {X.shape[1]} features; the state has {state.W.shape[0] - 1}")
    if offset < 0 or any(len(a) < offset + n for a in log):
        raise ValueError(f"log arrays of length {len(log.mistake)} cannot hold {n} rounds from offset {offset}")
    dt = state.W.dtype
    step = _NO_STEP
    sw = check_sample_weight(rule.name, sample_weight, n_rows)
    if sw is not None:  # the per-round scales, aligned with the log
        step = np.ones(len(log.mistake), np.float64)
        step[offset:offset + n] = sw[order]
    counts = None
    if reps is not None:
        counts = np.zeros(len(log.mistake), np.int64)
        counts[offset:offset + n] = reps
    # The adaptive rules (learners/_adaptive.py) also read and write their per-feature statistics.
    adaptive = rule.code >= A.FIRST_ADAPTIVE
    if reps is not None and (adaptive or acc is None or isinstance(acc, GroupSums)):
        raise ValueError("per-round counts need a running sum and a rule without per-feature statistics")
    if adaptive != isinstance(state, A.AdaptiveState):
        raise ValueError(f"rule {rule.name!r} needs {'an AdaptiveState' if adaptive else 'a LinearState'}, "
                         f"got {type(state).__name__}")
    extra = (state.A, state.S, state.T) if adaptive else ()
    if sp.issparse(X):
        indptr, indices, data = _csr_arrays(X, dt)
        csr = A.learn_csr if adaptive else K.learn_csr
        more = () if adaptive else (counts,)

        def kernel(o: np.ndarray, *args: Any) -> int:
            return csr(indptr, indices, data, y, o, *args, *more)
    else:
        Xd = np.asarray(X)
        if Xd.dtype != dt or not Xd.flags.c_contiguous:
            Xd = cast_values(Xd, dt)

        dense = A.learn_dense if adaptive else K.learn_dense
        more = () if adaptive else (counts,)

        def kernel(o: np.ndarray, *args: Any) -> int:
            return dense(Xd, y, o, *args, *more)
    groups = isinstance(acc, GroupSums)
    if groups and (adaptive or rule.native or state.W.shape[1] != 1 or acc.P.shape[0] != state.W.shape[0]):
        raise ValueError("survival-time group sums need a binary rule with one output column")
    cuts = [0, *sorted({int(c) for c in splits if 0 < int(c) < n}), n]
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        age0 = int(state.age[0])
        start = lo
        while True:
            if acc is None:
                accP, accq, cfg = _NO_P, _NO_Q, np.zeros(4, np.int64)
            else:
                if not groups and acc.P.shape != state.W.shape:
                    raise ValueError(f"running sum of shape {acc.P.shape} does not fit weights {state.W.shape}")
                accP, accq, cfg = acc.P.reshape(-1), acc.q.reshape(-1), acc.cfg
                cfg[2] = state.n_rounds[0]
            arrays = (state.W, state.scale, state.sqnorm, state.n_updates, state.age, accP, accq, cfg)
            st = A.AdaptiveArrays(*arrays, *extra) if adaptive else K.LinearArrays(*arrays, step)
            bad = kernel(order[start:hi] if (start, hi) != (0, n) else order, rule.code, rule.params,
                         bool(fit_intercept), float(bias), st, log, int(offset) + start)
            if bad >= 0 and groups and acc.cfg[K._G_GROW]:
                state.n_rounds[0] += bad  # every slot taken: add slots, resume at that round
                start += bad
                acc.grow()
                continue
            if bad >= 0:
                state.n_rounds[0] += bad
                raise_bad_round(X, int(order[start + bad]), int(start + bad), dt)
            state.n_rounds[0] += hi - start
            break
        if on_piece is not None:
            acc = on_piece(lo, hi, age0)
    return log


def _csr_arrays(X: Any, dt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, data)`` of a sparse X as the kernels read it: CSR, canonical, the
    values in the weights' dtype ``dt``."""
    X = X.tocsr() if X.format != "csr" else X
    if not X.has_canonical_format:
        # Margins are summed in column order (what makes results independent
        # of how the matrix was built, and equal to the dense path), and a
        # duplicated entry means the sum of its values, as in scipy.
        X = X.copy()
        X.sum_duplicates()
    data = X.data if X.data.dtype == dt else cast_values(X.data, dt)
    indptr = X.indptr
    indices = X.indices
    if indptr.dtype != indices.dtype:
        indptr = indptr.astype(np.int64)
        indices = indices.astype(np.int64)
    return indptr, indices, data


#: Rows of a dense chunk compacted to CSR at a time by :func:`step_sums`.
_STEP_SUM_BLOCK = 1024


def step_sums(rule: Rule, state: LinearState, X: Any, y: np.ndarray, rows: np.ndarray, reps: np.ndarray,
              acc: RunningSum, *, n_updates: int, fit_intercept: bool = False, bias: float = 1.0,
              sample_weight: np.ndarray | None = None) -> None:
    """Add to ``acc`` what :func:`learn_chunk` with ``order=rows, reps=reps`` would, for a binary
    rule whose step does not read the margin and whose scale stays 1 (``K.MARGIN_FREE_STEP_RULES``),
    without running the rule: ``rows`` are the chunk's updating rows, in order, ``n_updates``
    the learner's updates before the first of them, ``state`` gives the weights' dtype only.
    The same bits as the learner's running sum (:func:`~distlearn.learners._kernels.step_sums_csr`).
    A dense X is compacted to CSR :data:`_STEP_SUM_BLOCK` rows at a time."""
    if rule.code not in K.MARGIN_FREE_STEP_RULES or state.W.shape[1] != 1 or acc.P.shape != state.W.shape:
        raise ValueError("step sums need the perceptron or the generalized perceptron with one output column, "
                         "and a running sum of the weights' shape")
    dt = state.W.dtype
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    reps = np.ascontiguousarray(reps, dtype=np.int64)
    wts = _NO_STEP
    if sample_weight is not None:
        wts = np.ascontiguousarray(sample_weight[rows], dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.int64)
    P, q, cfg = acc.P.reshape(-1), acc.q.reshape(-1), acc.cfg
    if sp.issparse(X):
        indptr, indices, data = _csr_arrays(X, dt)
        K.step_sums_csr(indptr, indices, data, y, rows, reps, wts, rule.code, rule.params, float(n_updates),
                        bool(fit_intercept), float(bias), P, q, cfg)
        return
    Xd = np.asarray(X)
    for a in range(0, len(rows), _STEP_SUM_BLOCK):
        b = min(len(rows), a + _STEP_SUM_BLOCK)
        block = sp.csr_matrix(cast_values(Xd[rows[a:b]], dt))  # the nonzeros in column order, as compacted
        indptr, indices, data = _csr_arrays(block, dt)
        K.step_sums_csr(indptr, indices, data, y[rows[a:b]], np.arange(b - a, dtype=np.int64), reps[a:b],
                        wts[a:b] if len(wts) else wts, rule.code, rule.params, float(n_updates + a),
                        bool(fit_intercept), float(bias), P, q, cfg)


_NO_P = np.zeros(0, np.float64)
_NO_Q = np.zeros(0, np.float64)
_NO_STEP = np.zeros(0, np.float64)


class NonFiniteError(ValueError):
    """A round's margin was not finite: a NaN or infinity in the row, or weights
    that overflowed.  ``row`` is the row of X, ``round`` its position in the chunk;
    the state holds the rounds before it (the caller decides whether to keep them)."""

    def __init__(self, message: str, row: int, round: int) -> None:
        super().__init__(message)
        self.row = row
        self.round = round


def raise_non_finite(X: Any, r: int, t: int) -> None:
    """Raise :class:`NonFiniteError` if row ``r`` of X holds a NaN or infinity."""
    if sp.issparse(X):
        row = X[r]
        cols = np.asarray(row.indices)[~np.isfinite(row.data)]
    else:
        cols = np.flatnonzero(~np.isfinite(np.asarray(X[r])))
    if len(cols):
        raise NonFiniteError(
            f"Input X contains NaN or infinity: row {r} (round {t} of this chunk), "
            f"column{'s' if len(cols) > 1 else ''} {np.sort(cols)[:5].tolist()}", r, t)


def cast_values(a: np.ndarray, dtype: Any) -> np.ndarray:
    """``a`` in ``dtype`` (C order), refusing a narrowing cast that rounds nonzero values to zero
    (features too small for float32: the learner would see zeros).  Values that overflow to
    infinity are left to the kernels, which stop at their row (:func:`raise_bad_round`)."""
    dt = np.dtype(dtype)
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype=dt)
    if dt.itemsize < a.dtype.itemsize and a.dtype.kind == "f":
        lost = int(np.count_nonzero(a)) - int(np.count_nonzero(out))
        if lost > 0:
            src = np.asarray(a)
            small = float(np.abs(src[(out == 0) & (src != 0)]).max())
            raise ValueError(f"{lost} nonzero value{'s' if lost > 1 else ''} of X (up to {small:.3g} in magnitude) "
                             f"round to 0 in {dt}: features too small for {dt}: scale them (e.g. to unit norm), "
                             "or use dtype='float64'")
    return out


def _problem(X: Any, r: int, dt: np.dtype) -> str:
    """``"large"`` or ``"small"`` when row ``r`` of X, in the learners' dtype ``dt``, has values that
    overflow it or a squared norm out of range (summed as the kernels sum it); else ``""``."""
    row = X[r] if sp.issparse(X) else np.asarray(X)[r]
    vals = np.asarray(row.data if sp.issparse(row) else row).ravel()
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        v = vals.astype(dt)
        if not np.isfinite(v).all():
            return "large"
        sq = float(np.sum((v * v).astype(np.float64)))
    if not math.isfinite(sq):
        return "large"
    if sq < np.finfo(dt).tiny and np.count_nonzero(v):
        return "small"
    return ""


def raise_bad_round(X: Any, r: int, t: int, dtype: Any = np.float64, *, fallback: str = "") -> None:
    """A kernel stopped at row ``r`` (round ``t`` of the chunk): its margin or its step was not
    finite, or ``||x||^2`` was out of range.  Raise the one-line :class:`NonFiniteError` that
    names the cause: a NaN or infinity in the row; features too large or too small for the
    dtype (an overflow or underflow of ``||x||^2``, of the margins and of the steps: scale
    them); or else weights that overflowed (``fallback``, when given, says that instead)."""
    raise_non_finite(X, r, t)
    dt = np.dtype(dtype)
    problem = _problem(X, r, dt)
    if problem:
        raise NonFiniteError(
            f"row {r} (round {t} of this chunk): features too {problem} for {dt} (||x||^2 "
            f"{'overflowed' if problem == 'large' else 'underflowed'}): scale them (e.g. to unit norm)", r, t)
    raise NonFiniteError(fallback or (
        f"the weights overflowed: the margin of row {r} (round {t} of this chunk) or its step is not finite "
        "although the row is; use a smaller step size or scale the features (e.g. to unit norm)"), r, t)


def row_sqnorms(X: Any) -> np.ndarray:
    """``||x_i||^2`` of every row, summed exactly as the rules sum them (dense == CSR)."""
    out = np.zeros(X.shape[0], dtype=np.float64)
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_sorted_indices:
            X = X.sorted_indices()
        K.row_sqnorms_csr(X.indptr, X.data, out)
    else:
        K.row_sqnorms_dense(np.ascontiguousarray(X), out)
    return out


def max_row_norm(X: Any, fit_intercept: bool) -> float:
    """``max_i ||x_i||`` over the rows of an array or sparse matrix (the bias feature counted when
    ``fit_intercept``): the radius R of the margin perceptron, the ``1/R^2`` step of LMS."""
    extra = 1.0 if fit_intercept else 0.0
    sq = row_sqnorms(X)
    top = float(sq.max()) if len(sq) else 0.0
    if not math.isfinite(top):
        r = int(np.flatnonzero(~np.isfinite(sq))[0])
        raise_non_finite(X, r, r)
        raise ValueError(f"row {r} of X: features too large for float64 (||x||^2 overflows): "
                         "scale them (e.g. to unit norm)")
    return math.sqrt(top + extra)
