"""Pure-Python oracle of the kernel learners on a budget (tests only).

A transcription of Crammer, Kandola & Singer (2003), Fig. 1 (the aggressive
perceptron with a variable cache), Fig. 2 (DistillCache) and Fig. 3 (the
fixed-size cache), generalised to kernel MIRA and kernel PA and to multiclass
rules, one example at a time with plain Python floats.  No incremental state:
every score is recomputed from the cache whenever it is needed, so this is the
slow, obviously-correct half of the engine/oracle pair.

Conventions (as documented in :mod:`distlearn.learners.kernel`):

* the cache is a list of patterns in insertion order; ``f_k(x) = sum_p a_p[k] k(x_p, x)``;
* binary labels: class 1 is +1, class 0 is -1; multiclass native: one score
  per class, the rival ``r*`` is the first other class of largest score;
  one-vs-rest: column ``k`` is +1 for class ``k``;
* removal margin ``mu_p``: ``g_k = f_k(x_p) - a_p[k] k(x_p, x_p)``; binary ``s_p g_0``;
  native ``g_c - max_{r != c} g_r``; one-vs-rest ``min_{k: a_p[k] != 0} s_{p,k} g_k``;
* "variable": after the insertion, remove the largest ``mu >= beta`` (ties, within
  a relative 1e-9, go to the earliest inserted) until none is left; a fixed size ``n``: before inserting
  into a full cache remove the largest ``mu`` ("margin"), the oldest, or the
  one at ``floor(u n)`` in insertion order with ``u = uniform(seed,
  stream_id("budget-removal"), t)`` ("random");
* "merge" (BSGD, Wang, Crammer & Vucetic 2012; RBF only): *after* the insertion, if the cache
  holds more than ``n``, the pattern ``m`` of smallest ``||a||^2`` (the earliest on ties) and its
  partner ``n`` of the same class (any class if ``m`` is its class's only one) of least
  degradation (the earliest on ties) are replaced by ``z = x_n + h (x_m - x_n)`` with
  ``a_z = a_m k(x_m, z) + a_n k(x_n, z)``, ``h`` by golden section (:func:`naive_merge_step`);
  ``z``'s id is ``("z", t)``;
* an update on a row already cached with its class (the earliest such pattern; every budget but the
  Projectron's) removes that pattern and inserts the row with the summed coefficients: the same
  hypothesis, one pattern (a later epoch never duplicates a cached row);
* the budget's running sums (``"sums"`` per round): every pattern carries ``s``, the sum of its
  coefficients over the hypotheses it was in, added eagerly after every round (``h_{t+1}`` is the
  cache after round ``t``); an inserted row starts at 0, a cached row updated again takes its old
  pattern's ``s``, a merged ``z`` gets ``s_m k(x_m, z) + s_n k(x_n, z)`` (the merge's projection), a
  removed pattern's ``s`` is dropped.  Divided by ``t + 1`` they are the engine's
  ``BudgetState.budget_average`` after ``t`` rounds.
"""

from __future__ import annotations

import math
from typing import Any

from tests.naive import mira_qp

from distlearn.rng import stream_id, uniform

__all__ = ["naive_budget_run", "naive_merge_step", "KERNEL_RTOL", "engine_round_matches"]

#: The engine computes kernel rows as blocked products from squared norms
#: (``||x||^2 + ||y||^2 - 2 x.y``), the oracle sums squared differences: kernel values agree to this
#: relative tolerance, not bit for bit.  Scores agree to it relative to their mass
#: ``sum_p max_k |a_p[k]| |k(x_p, x)|``; a decision whose tested quantity lies within that of its
#: threshold is a *near tie*, where the two may rightly part.
KERNEL_RTOL = 1e-6

GS_ITERS = 30
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def naive_merge_step(am: list[float], an: list[float], xm: list[float], xn: list[float],
                     gamma: float) -> tuple[float, list[float], list[float], float]:
    """BSGD's merge of ``(x_m, a_m)`` and ``(x_n, a_n)`` under ``exp(-gamma ||.||^2)``: ``(h, z, a_z,
    degradation)``.  ``h`` maximises ``||a_z||^2`` by ``GS_ITERS`` golden-section steps on [0, 1]
    (the final bracket's midpoint); the degradation is ``||a_m phi_m + a_n phi_n - a_z phi_z||^2``
    summed over the columns."""
    d2 = 0.0
    for u, v in zip(xm, xn):
        d2 += (u - v) * (u - v)
    gd2 = gamma * d2

    def coef(h: float) -> list[float]:
        km, kn = math.exp(-gd2 * (1.0 - h) * (1.0 - h)), math.exp(-gd2 * h * h)
        return [a * km + b * kn for a, b in zip(am, an)]

    def gain(h: float) -> float:
        s = 0.0
        for v in coef(h):
            s += v * v
        return s

    lo, hi = 0.0, 1.0
    c, d = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    fc, fd = gain(c), gain(d)
    for _ in range(GS_ITERS):
        if fc >= fd:
            hi, d, fd = d, c, fc
            c = hi - GOLDEN * (hi - lo)
            fc = gain(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + GOLDEN * (hi - lo)
            fd = gain(d)
    h = 0.5 * (lo + hi)
    az = coef(h)
    kmn = math.exp(-gd2)
    full = 0.0
    for a, b in zip(am, an):
        full += a * a + b * b + 2.0 * a * b * kmn
    z = [v + h * (u - v) for u, v in zip(xm, xn)]
    return h, z, az, full - gain(h)

#: Removal margins this close (relative) to the largest are tied; the earliest inserted wins.
TIE_RTOL = 1e-9


def _kernel(name: str, gamma: float, degree: float, coef0: float):
    def k(a: list[float], b: list[float]) -> float:
        if name == "rbf":
            s = 0.0
            for u, v in zip(a, b):
                s += (u - v) * (u - v)
            return math.exp(-gamma * s)
        s = 0.0
        for u, v in zip(a, b):
            s += u * v
        return (gamma * s + coef0) ** degree if name == "poly" else s

    return k


def naive_budget_run(rule: str, X: Any, y: Any, *, n_classes: int, native: bool, kernel: str = "rbf",
                     gamma: float = 1.0, degree: float = 3, coef0: float = 0.0, beta: float | None = None,
                     C: float = 1.0, variant: str = "PA", budget: Any = None, removal: str = "margin",
                     seed: int = 0, eta: float = 1.0, proj_eta: float = 0.1) -> list[dict[str, Any]]:
    """Run the rows of X in order; one dict per round (see the module docstring)."""
    kfun = _kernel(kernel, float(gamma), float(degree), float(coef0))
    rows = [[float(v) for v in r] for r in X]
    ys = [int(v) for v in y]
    K = 1 if n_classes == 2 else n_classes
    mode = "binary" if K == 1 else ("native" if native else "ovr")
    if beta is None:
        beta = {"perceptron": 0.0, "mira": 0.01, "pa": 1.0}[rule]
    cache: list[dict[str, Any]] = []  # {"id", "x", "c", "a", "s"}
    ties: list[bool] = [False]  # the round's decisions met a near tie (KERNEL_RTOL)

    def mass(x: list[float], without: dict | None = None) -> float:
        return sum(max(abs(a) for a in p["a"]) * abs(kfun(p["x"], x)) for p in cache if p is not without)

    def dmass(x: list[float], j: int, r: int | None = None) -> float:
        """The mass of score ``j`` (of ``f_j - f_r`` with ``r``): ``sum_p |a_p[j] - a_p[r]| |k(x_p, x)|``,
        the scale of its rounding -- 0 when the coefficients agree, so a structural tie is exact on both sides."""
        return sum(abs(p["a"][j] - (p["a"][r] if r is not None else 0.0)) * abs(kfun(p["x"], x)) for p in cache)

    def mark_near_tie(value: float, threshold: float, scale: float) -> None:
        if scale > 0.0 and abs(value - threshold) <= KERNEL_RTOL * scale:  # scale 0: exact on both sides
            ties[0] = True

    def scores(x: list[float], without: dict | None = None) -> list[float]:
        f = [0.0] * K
        for p in cache:
            if p is without:
                continue
            kv = kfun(p["x"], x)
            for j in range(K):
                f[j] += p["a"][j] * kv
        return f

    def label(c: int, j: int) -> float:
        return (1.0 if c == 1 else -1.0) if mode == "binary" else (1.0 if c == j else -1.0)

    def mu(p: dict[str, Any], floor: float | None = None) -> float:
        g = scores(p["x"], without=p)
        v = _mu(p, g)
        if floor is not None:
            mark_near_tie(v, floor, mass(p["x"], without=p))
        return v

    def _mu(p: dict[str, Any], g: list[float]) -> float:
        c = p["c"]
        if mode == "binary":
            return label(c, 0) * g[0]
        if mode == "native":
            return g[c] - max(g[r] for r in range(K) if r != c)
        return min(label(c, j) * g[j] for j in range(K) if p["a"][j] != 0.0)

    def binary_u(s: float, m: float, kxx: float) -> float:
        z = s * m
        if rule == "perceptron":
            return s * eta if z <= beta else 0.0
        if rule == "mira":
            if z <= beta and kxx > 0.0:
                tau = min(1.0, (beta - z) / kxx)
                return s * tau if tau > 0.0 else 0.0
            return 0.0
        loss = 1.0 - z
        if not (z <= 1.0 and loss > 0.0):
            return 0.0
        if variant == "PA-II":
            return s * (loss / (kxx + 0.5 / C))
        if kxx == 0.0:
            return 0.0
        return s * (min(C, loss / kxx) if variant == "PA-I" else loss / kxx)

    out = []
    for t, (x, c) in enumerate(zip(rows, ys)):
        ties[0] = False
        f = scores(x)
        kxx = kfun(x, x)
        if mode == "binary":
            mistake = (f[0] >= 0.0) != (c == 1)
            mark_near_tie(f[0], 0.0, dmass(x, 0))
        else:
            top = max(range(K), key=lambda j: (f[j], -j))
            mistake = top != c
            for r in range(K):
                if r != top:
                    mark_near_tie(f[top] - f[r], 0.0, dmass(x, top, r))
        update_at = 1.0 if rule == "pa" else beta
        if mode == "native":
            rv = max((r for r in range(K) if r != c), key=lambda r: (f[r], -r))
            mark_near_tie(f[c] - f[rv], update_at, dmass(x, c, rv))
            for r in range(K):  # the rival itself: another column within rounding of f[rv]
                if r not in (c, rv):
                    mark_near_tie(f[rv] - f[r], 0.0, dmass(x, rv, r))
        else:
            for j in range(K):
                mark_near_tie(label(c, j) * f[j], update_at, dmass(x, j))
        u = [0.0] * K
        if mode == "native":
            rival = None
            for r in range(K):
                if r != c and (rival is None or f[r] > f[rival]):
                    rival = r
            if rule == "perceptron":
                if f[c] - f[rival] <= beta:
                    u[c], u[rival] = eta, -eta
            elif rule == "mira":
                if f[c] - beta <= f[rival] and kxx > 0.0:
                    u = list(mira_qp(f, c, kxx, beta))
            else:
                h = 1.0 - (f[c] - f[rival])
                if h > 0.0:
                    if variant == "PA-II":
                        step = h / (2.0 * kxx + 0.5 / C)
                    elif kxx > 0.0:
                        step = h / (2.0 * kxx)
                        if variant == "PA-I":
                            step = min(step, C)
                    else:
                        step = 0.0
                    u[c], u[rival] = step, -step
        else:
            for j in range(K):
                u[j] = binary_u(label(c, j), f[j], kxx)
        fired = any(v != 0.0 for v in u)
        removed: list[int] = []
        projected = False
        if fired and budget == "projectron":
            # the Projectron: d = K^-1 k_t by a direct solve on the cache's Gram matrix, recomputed
            if cache:
                import numpy as np

                G = np.array([[kfun(p["x"], q["x"]) for q in cache] for p in cache])
                kt = np.array([kfun(p["x"], x) for p in cache])
                d = np.linalg.solve(G, kt)
                delta2 = kxx - float(kt @ d)
            else:
                d, delta2 = [], kxx
            if delta2 <= proj_eta * proj_eta:
                projected = True
                for p, dj in zip(cache, d):
                    p["a"] = [a + uj * float(dj) for a, uj in zip(p["a"], u)]
        fixed = isinstance(budget, int) and not isinstance(budget, bool)
        if fired and not projected:
            carried = [0.0] * K
            twin = None if budget == "projectron" else next((p for p in cache if p["c"] == c and p["x"] == x), None)
            if twin is not None:  # x is cached: it leaves and returns with the summed coefficients
                u = [a + b for a, b in zip(twin["a"], u)]
                carried = list(twin["s"])
                cache.remove(twin)
                removed.append(twin["id"])
            if fixed and removal != "merge" and len(cache) >= budget:
                if removal == "margin":
                    mus = [mu(p) for p in cache]
                    best = max(mus)
                    cut = best - TIE_RTOL * max(1.0, abs(best))
                    for p, m in zip(cache, mus):
                        if m != best:
                            mark_near_tie(m, cut, mass(p["x"], without=p))
                    victim = cache[min(i for i, m in enumerate(mus) if m >= cut)]  # earliest of the (near-)largest
                elif removal == "oldest":
                    victim = cache[0]
                else:
                    pos = min(len(cache) - 1, int(math.floor(float(uniform(seed, stream_id("budget-removal"), t))
                                                             * len(cache))))
                    victim = cache[pos]
                cache.remove(victim)
                removed.append(victim["id"])
            cache.append({"id": t, "x": x, "c": c, "a": u, "s": carried})
            if fixed and removal == "merge" and len(cache) > budget:
                if kernel != "rbf":
                    raise ValueError("merge needs the rbf kernel")
                pm = min(cache, key=lambda p: sum(a * a for a in p["a"]))  # min: the earliest of the smallest
                others = [p for p in cache if p is not pm and p["c"] == pm["c"]] or [p for p in cache if p is not pm]
                best = None
                for p in others:
                    res = naive_merge_step(pm["a"], p["a"], pm["x"], p["x"], float(gamma))
                    if best is None or res[3] < best[1][3]:
                        best = (p, res)
                pn, (_, z, az, _) = best
                cache.remove(pm)
                cache.remove(pn)
                removed += [pm["id"], pn["id"]]
                km, kn = kfun(pm["x"], z), kfun(pn["x"], z)
                sz = [sm * km + sn * kn for sm, sn in zip(pm["s"], pn["s"])]
                cache.append({"id": ("z", t), "x": z, "c": pm["c"], "a": az, "s": sz})
            if budget == "variable":
                while True:
                    cand = [(mu(p, floor=beta), i) for i, p in enumerate(cache)]
                    cand = [(m, i) for m, i in cand if m >= beta]
                    if not cand:
                        break
                    best = max(m for m, _ in cand)
                    cut = best - TIE_RTOL * max(1.0, abs(best))
                    for m, i in cand:
                        if m != best:
                            mark_near_tie(m, cut, mass(cache[i]["x"], without=cache[i]))
                    i = min(i for m, i in cand if m >= cut)
                    removed.append(cache[i]["id"])
                    del cache[i]
        for p in cache:  # h_{t+1} is the cache now: every pattern's running sum takes its coefficients
            p["s"] = [sv + av for sv, av in zip(p["s"], p["a"])]
        out.append({"sums": [list(p["s"]) for p in cache], "score": f, "near_tie": ties[0], "mistake": bool(mistake), "fired": fired, "removed": removed, "projected": projected,
                    "cache": [p["id"] for p in cache], "coef": [list(p["a"]) for p in cache],
                    "patterns": [list(p["x"]) for p in cache],
                    "mu": [mu(p) for p in cache]})
    return out


def engine_round_matches(log: Any, want: dict[str, Any], born: list[int], where: str) -> bool:
    """Assert that the engine's round (``log``: one round's :class:`BudgetLog`, ``born`` its live
    patterns' birth rounds in insertion order) took the oracle's decisions ``want``: the same mistake,
    update, removals and cache.  Identical decisions are required unless the oracle's round met a
    near tie (a tested quantity within :data:`KERNEL_RTOL` of its threshold, relative to the scores'
    mass): then nothing is asserted and False says the runs may part here (compare no further)."""
    if want["near_tie"]:
        return False
    assert bool(log.mistake[0]) == want["mistake"], where
    assert bool(log.updated[0]) == want["fired"], where
    assert int(log.removed[0]) == len(want["removed"]), where
    assert born == [i[1] if isinstance(i, tuple) else i for i in want["cache"]], where
    return True
