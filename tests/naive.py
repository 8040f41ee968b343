"""Pure-Python oracles of the linear online rules (tests only).

Each rule is written from its paper's definition, one example at a time, with
plain Python floats (float64) and no numba -- the slow, obviously-correct half
of the kernel/oracle pair the kernel tests in ``tests/learners`` compare
against, exactly in float64.

Conventions (ARCHITECTURE.md, "Conventions the papers leave open"):

* The weights of output column ``k`` are one list ``w[k]`` of ``n_features + 1``
  floats; the last entry is the bias weight.  With ``fit_intercept`` an example
  gets an extra constant feature of value ``bias`` (the OBPM paper's footnote),
  so the bias enters margins, ``||x||^2`` and updates like any other feature.
* A margin is a sequential float64 sum over the example's nonzeros in
  increasing column order, the bias feature last: ``m = ((0 + w_j1 x_j1) + ...)
  + b * bias``.
* With one output column ``y == 1`` is the positive label and anything else the
  negative one.  With K columns column k scores class k: one-vs-rest rules see
  ``+1`` if ``y == k`` else ``-1``; native rules (multiclass PA, MIRA) keep one
  prototype per class.
* Per round, *before* the update: binary mistake ``sgn(m) != y`` with
  ``sgn(0) = +1`` and hinge ``max(0, 1 - y m)``; with K >= 2 columns the mistake
  is ``argmax_r m_r != y`` (ties to the first index) and the hinge is
  ``max(0, 1 - (m_y - max_{r != y} m_r))``.  ``updated`` says whether the rule
  changed any column.

Updates are written as ``u = step * y`` followed by ``w_j += x_j * u`` over the
example's features: the order of operations a faithful float64 implementation
follows, so the additive rules can be compared bit for bit.

References
----------
Rosenblatt's perceptron; Harrington et al., "Online Bayes Point Machines"
(PAKDD 2003), Algorithm 1 (generalised perceptron) and section 2 (ALMA);
Gentile, "A new approximate maximal margin classification algorithm" (JMLR
2001); Dekel, "From online to batch learning with cutoff-averaging" (NIPS
2008), Fig. 1 (finite-horizon margin-based perceptron); Li & Long, "The
relaxed online maximum margin algorithm" (Machine Learning 2002); Crammer et
al., "Online passive-aggressive algorithms" (JMLR 2006); Crammer & Singer,
"Ultraconservative online algorithms for multiclass problems" (JMLR 2003);
Widrow & Hoff's LMS.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple, Sequence

__all__ = ["NaiveRun", "naive_run", "mira_qp", "sparse_row"]


class NaiveRun(NamedTuple):
    """Final weights and the per-round log of one oracle run."""

    coef: list[list[float]]   #: (n_outputs, n_features) true weights
    intercept: list[float]    #: (n_outputs,) bias *weight* b (the intercept is b * bias)
    mistake: list[int]
    hinge: list[float]
    updated: list[int]
    n_updates: list[int]      #: updates made by each column


Example = list[tuple[int, float]]  # (column, value) pairs, increasing column, bias feature last


def sparse_row(row: Sequence[Any], fit_intercept: bool = False, bias: float = 1.0) -> Example:
    """The example's nonzeros as Python floats, plus the constant bias feature."""
    x = [(j, float(v)) for j, v in enumerate(row) if float(v) != 0.0]
    if fit_intercept:
        x.append((len(row), float(bias)))
    return x


def _dot(w: list[float], x: Example) -> float:
    s = 0.0
    for j, v in x:
        s += w[j] * v
    return s


def _sq(x: Example) -> float:
    s = 0.0
    for _, v in x:
        s += v * v
    return s


def _norm(w: list[float]) -> float:
    return math.sqrt(sum(wj * wj for wj in w))


def _add(w: list[float], x: Example, u: float) -> None:
    """w <- w + u x."""
    for j, v in x:
        w[j] += v * u


def _project_unit_ball(w: list[float]) -> None:
    """w <- w / max(1, ||w||)."""
    nrm = _norm(w)
    if nrm > 1.0:
        for j in range(len(w)):
            w[j] = w[j] / nrm


# ---------------------------------------------------------------------------
# Binary rules: one weight vector w, label y in {-1, +1}, margin m = w.x.
# ``k`` is 1 + the number of updates this vector has made so far.
# Each returns whether it updated.


def _perceptron(w, x, y, m, k, *, eta=1.0):
    if y * m <= 0.0:
        _add(w, x, y * eta)
        return True
    return False


def _generalized(w, x, y, m, k, *, rho=0.0, eta=1.0, rho_schedule="constant", eta_schedule="constant"):
    # Harrington et al., Algorithm 1: update when y (w.x) / ||w|| <= rho_k.
    nrm = _norm(w)
    gamma = y * m / nrm if nrm > 0.0 else 0.0
    rho_k = rho / math.sqrt(k) if rho_schedule == "inv_sqrt" else rho
    if gamma <= rho_k:
        eta_k = eta / math.sqrt(k) if eta_schedule == "inv_sqrt" else eta
        _add(w, x, y * eta_k)
        return True
    return False


def _margin(w, x, y, m, k, *, horizon, radius):
    # Dekel, Fig. 1: on a positive hinge loss, w' = w + y x / (sqrt(m) R), w = w' / max(1, ||w'||).
    if 1.0 - y * m > 0.0:
        _add(w, x, y / (math.sqrt(horizon) * radius))
        _project_unit_ball(w)
        return True
    return False


def _alma(w, x, y, m, k, *, alpha=0.9, B=None, C=math.sqrt(2.0)):
    # ALMA_2: update when y w.x <= (1 - alpha) B / sqrt(k), step C / sqrt(k), then project.
    if B is None:
        B = 1.0 / alpha
    if y * m <= (1.0 - alpha) * B / math.sqrt(k):
        _add(w, x, y * (C / math.sqrt(k)))
        _project_unit_ball(w)
        return True
    return False


def _romma(w, x, y, m, k, *, aggressive=False):
    # Li & Long: w_{t+1} is the smallest vector in {v: v.w_t >= ||w_t||^2} cap {v: y v.x_t >= 1}.
    fires = y * m < 1.0 if aggressive else y * m <= 0.0
    xx = _sq(x)
    if not fires or xx <= 0.0:
        return False
    ww = sum(wj * wj for wj in w)
    if all(wj == 0.0 for wj in w):
        _add(w, x, y / xx)
        return True
    den = xx * ww - m * m
    if den <= 1e-12 * xx * ww:
        # x parallel to w: project onto y w.x >= 1 instead.
        _add(w, x, y * (1.0 - y * m) / xx)
        return True
    c = (xx * ww - y * m) / den
    d = ww * (y - m) / den
    for j in range(len(w)):
        w[j] = c * w[j]
    _add(w, x, d)
    return True


def _pa(w, x, y, m, k, *, variant="PA-I", C=1.0, native=False):
    # Crammer et al. 2006, binary PA / PA-I / PA-II.
    loss = 1.0 - y * m
    if not (y * m <= 1.0 and loss > 0.0):
        return False
    xx = _sq(x)
    if variant == "PA-II":
        tau = loss / (xx + 1.0 / (2.0 * C))
    else:
        if xx == 0.0:
            return False
        tau = loss / xx
        if variant == "PA-I":
            tau = min(C, tau)
    _add(w, x, y * tau)
    return True


def _mira(w, x, y, m, k, *, beta=0.01, native=False):
    # Binary MIRA: the smallest change reaching margin beta, the step clipped to 1.
    xx = _sq(x)
    if y * m <= beta and xx > 0.0:
        tau = min(1.0, (beta - y * m) / xx)
        if tau > 0.0:
            _add(w, x, y * tau)
            return True
    return False


def _lms(w, x, y, m, k, *, eta=0.01):
    # Widrow-Hoff: a gradient step on (y - w.x)^2 / 2.
    u = eta * (y - m)
    if u != 0.0:
        _add(w, x, u)
        return True
    return False


_BINARY = {
    "perceptron": _perceptron,
    "generalized": _generalized,
    "margin": _margin,
    "alma": _alma,
    "romma": _romma,
    "pa": _pa,
    "mira": _mira,
    "lms": _lms,
}


# ---------------------------------------------------------------------------
# Native multiclass rules: one prototype per class, coupled by the update.


def _runner_up(m: list[float], y: int) -> int:
    """argmax_{r != y} m_r, ties to the first index."""
    s = -1
    for r in range(len(m)):
        if r != y and (s < 0 or m[r] > m[s]):
            s = r
    return s


def _mc_pa(W, x, y, m, *, variant="PA-I", C=1.0, native=True):
    """Crammer et al. 2006, section 7 (multiclass, one prototype per class); returns the steps."""
    s = _runner_up(m, y)
    loss = max(0.0, 1.0 - (m[y] - m[s]))
    taus = [0.0] * len(m)
    if loss <= 0.0:
        return taus
    xx = _sq(x)
    if variant == "PA-II":
        tau = loss / (2.0 * xx + 1.0 / (2.0 * C))
    else:
        if xx == 0.0:
            return taus
        tau = loss / (2.0 * xx)
        if variant == "PA-I":
            tau = min(C, tau)
    _add(W[y], x, tau)
    # w_s -= tau x, written as w_s += x * (-tau) (the same float64 result).
    _add(W[s], x, -tau)
    taus[y] = tau
    taus[s] = -tau
    return taus


def mira_qp(m: Sequence[float], y: int, xx: float, beta: float = 0.0) -> list[float]:
    """Crammer & Singer's MIRA step, solved by brute force over active sets.

    Minimises ``1/2 sum_r ||w_r + tau_r x||^2 - beta tau_y`` -- up to a constant
    ``sum_r (tau_r m_r + tau_r^2 ||x||^2 / 2) - beta tau_y`` -- subject to
    ``tau_r <= [r == y]`` and ``sum_r tau_r = 0``.  With ``beta = 0`` this is the
    paper's QP; ``beta > 0`` asks the true class to win by a margin (it is the
    paper's QP with ``m_y`` replaced by ``m_y - beta``).  The objective is
    strictly convex, so its minimiser is the equality-constrained minimiser of
    some face (a set A of constraints held at their bound); every face is tried
    and the feasible candidate with the smallest objective wins.
    """
    K = len(m)
    cap = [1.0 if r == y else 0.0 for r in range(K)]
    g = [m[r] - (beta if r == y else 0.0) for r in range(K)]  # linear term of the objective
    best = None
    for n_active in range(K):
        for A in itertools.combinations(range(K), n_active):
            F = [r for r in range(K) if r not in A]
            c_A = sum(cap[r] for r in A)
            # Stationarity on F: g_r + tau_r ||x||^2 = mu; sum_F tau_r = -c_A fixes mu.
            mu = (sum(g[r] for r in F) - xx * c_A) / len(F)
            tau = list(cap)
            for r in F:
                tau[r] = (mu - g[r]) / xx
            if any(tau[r] > cap[r] + 1e-12 * (1.0 + abs(tau[r])) for r in F):
                continue
            q = sum(tau[r] * g[r] + 0.5 * xx * tau[r] * tau[r] for r in range(K))
            if best is None or q < best[0]:
                best = (q, tau)
    assert best is not None  # some face is always feasible
    return best[1]


def _mc_mira(W, x, y, m, *, beta=0.01, native=True):
    """Crammer & Singer 2003 MIRA: when the true class does not beat every other one by
    ``beta`` (``m_y - beta <= max_{r != y} m_r``), take the QP's step."""
    K = len(m)
    taus = [0.0] * K
    xx = _sq(x)
    if m[y] - beta <= max(m[r] for r in range(K) if r != y) and xx > 0.0:
        taus = mira_qp(m, y, xx, beta)
        for r in range(K):
            if taus[r] != 0.0:
                _add(W[r], x, taus[r])
    return taus


_NATIVE = {"pa": _mc_pa, "mira": _mc_mira}

#: The oracle of every rule of the registry (distlearn.learners.RULES), by name:
#: (binary step, native multiclass step or None).  tests/test_registry.py checks
#: that it covers the registry exactly.
ORACLES = {name: (step, _NATIVE.get(name)) for name, step in _BINARY.items()}


# ---------------------------------------------------------------------------


def naive_run(
    rule_name: str,
    params: dict[str, Any],
    X_rows: Sequence[Sequence[Any]],
    y: Sequence[int],
    n_outputs: int,
    fit_intercept: bool = False,
    bias: float = 1.0,
    coef0: Sequence[Sequence[float]] | None = None,
    intercept0: Sequence[float] | None = None,
) -> NaiveRun:
    """Run a rule over dense rows ``X_rows`` (in order) from ``coef0`` (zeros by default).

    ``rule_name`` and ``params`` are those of :func:`distlearn.learners.make_rule`;
    ``native=True`` selects the coupled multiclass rules of ``pa`` and ``mira``.
    """
    params = dict(params)
    native = bool(params.get("native", False))
    X_rows = [[float(v) for v in row] for row in X_rows]
    d = len(X_rows[0]) if X_rows else (len(coef0[0]) if coef0 is not None else 0)
    K = int(n_outputs)
    W = [[0.0] * (d + 1) for _ in range(K)]
    if coef0 is not None:
        for k in range(K):
            W[k][:d] = [float(v) for v in coef0[k]]
    if intercept0 is not None:
        for k in range(K):
            W[k][d] = float(intercept0[k])
    n_updates = [0] * K
    mistake: list[int] = []
    hinge: list[float] = []
    updated: list[int] = []
    for row, label in zip(X_rows, y):
        label = int(label)
        x = sparse_row(row, fit_intercept, bias)
        m = [_dot(W[k], x) for k in range(K)]
        if K == 1:
            yy = 1.0 if label == 1 else -1.0
            mistake.append(int((1.0 if m[0] >= 0.0 else -1.0) != yy))
            hinge.append(max(0.0, 1.0 - yy * m[0]))
        else:
            best = max(range(K), key=lambda r: (m[r], -r))
            mistake.append(int(best != label))
            hinge.append(max(0.0, 1.0 - (m[label] - m[_runner_up(m, label)])))
        upd = False
        if native:
            taus = _NATIVE[rule_name](W, x, label, m, **params)
            for k in range(K):
                if taus[k] != 0.0:
                    n_updates[k] += 1
                    upd = True
        else:
            step = _BINARY[rule_name]
            for k in range(K):
                yk = (1.0 if label == 1 else -1.0) if K == 1 else (1.0 if label == k else -1.0)
                if step(W[k], x, yk, m[k], n_updates[k] + 1, **params):
                    n_updates[k] += 1
                    upd = True
        updated.append(int(upd))
    return NaiveRun(
        coef=[W[k][:d] for k in range(K)],
        intercept=[W[k][d] for k in range(K)],
        mistake=mistake,
        hinge=hinge,
        updated=updated,
        n_updates=n_updates,
    )
