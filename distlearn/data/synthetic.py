"""Synthetic data: the OBPM paper's generators and an RCV1-like sparse corpus.

Three generators live here:

* :func:`make_obpm_artificial` -- the margin-separated toy problem of
  Harrington et al. (2003), section 4.1 (after Gentile's ALMA experiment);
* :func:`iter_rcv1_like` / :func:`make_rcv1_like` -- a Zipfian bag-of-words
  corpus shaped like RCV1-v2 (804,414 documents, 47,236 features, about 75
  distinct terms per document, log-TF values, unit rows), labelled by a
  sparse noisy linear teacher, streamed straight into a zarr store;
* :func:`make_drifting_stream` -- the drifting-concept stream of section 4.2.

Reproducibility.  Every random number is drawn on a fixed internal grid of
*generation blocks* of :data:`GENERATION_ROWS` rows: block ``b`` of a stream
uses ``block_generator(seed, stream, b)`` (:mod:`distlearn.rng`), and
per-example draws (label noise, the drift's ``r_t``) are counter-based
``uniform(seed, stream, t)``.  Targets, teachers and calibration samples have
streams of their own.  So the output depends only on the seed and the
generator's parameters: never on a store's ``block_rows``, and the first
``k`` rows never depend on how many rows were asked for (a partial last block
is generated whole and cut).

References
----------
* E. Harrington, R. Herbrich, J. Kivinen, J. Platt and R. C. Williamson,
  "Online Bayes Point Machines", PAKDD 2003, LNAI 2637, pp. 241-252.
* D. D. Lewis, Y. Yang, T. G. Rose and F. Li, "RCV1: A New Benchmark
  Collection for Text Categorization Research", JMLR 5 (2004) 361-397.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import betainc, ndtri

from ..rng import block_generator, normalize_seed, stream_id, uniform
from .store import Dataset, DatasetWriter

__all__ = [
    "GENERATION_ROWS",
    "ArtificialData",
    "DriftStream",
    "iter_rcv1_like",
    "make_drifting_stream",
    "make_obpm_artificial",
    "make_rcv1_like",
    "write_obpm_artificial",
]

#: Rows per internal generation block.  Part of the generators' definition:
#: changing it changes every generated data set.
GENERATION_ROWS = 4096

#: RCV1-v2 (Lewis et al. 2004): documents and features of the LYRL2004 vectors.
RCV1_N_SAMPLES = 804_414
RCV1_N_FEATURES = 47_236

# Candidate values drawn at once by the rejection sampler (memory bound only;
# the candidate sequence is one Philox stream, whatever the batch sizes).
_CANDIDATE_VALUES = 1 << 22

# Below this acceptance probability the rejection sampler is refused: it
# would draw more than ~10^6 candidates per kept instance.
_MIN_ACCEPTANCE = 1e-6

# Documents in the sample that calibrates the RCV1-like teacher's threshold
# (drawn from its own stream, so the threshold does not depend on n_samples).
_CALIBRATION_ROWS = 4 * GENERATION_ROWS


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}")
    return int(value)


def _check_real(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number; got {value!r}") from None
    ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        raise ValueError(f"{name} must be in {lb}{lo}, {hi}{rb}; got {value!r}")
    return v


def _n_blocks(n: int) -> int:
    return -(-n // GENERATION_ROWS)


# =========================================================================== OBPM section 4.1


class ArtificialData(NamedTuple):
    """The artificial problem of Harrington et al. (2003), section 4.1.

    Attributes
    ----------
    X_train : ndarray of shape (n_train, n_features), float64
        Training instances, unit norm.
    y_train : ndarray of shape (n_train,), int64
        Training labels in {-1, +1}, after label noise.
    X_test : ndarray of shape (n_test, n_features), float64
        Test instances, unit norm.
    y_test : ndarray of shape (n_test,), int64
        Test labels in {-1, +1}, noise free.
    target : ndarray of shape (n_features,), int64
        The target ``u`` in {-1, 0, +1}^d.
    y_train_clean : ndarray of shape (n_train,), int64
        Training labels before noise, ``sign(u . x)``.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    target: np.ndarray
    y_train_clean: np.ndarray


def _sign(v: np.ndarray) -> np.ndarray:
    # sgn(0) = +1, as everywhere in distlearn (a zero score predicts the positive class).
    return np.where(v >= 0, 1, -1).astype(np.int64)


def _acceptance(n_features: int, margin: float) -> float:
    """P(|u.x|/||u|| >= margin) for x uniform on the sphere in R^d.

    The projection z of a uniform point of S^{d-1} on a fixed unit vector has
    (1 + z)/2 ~ Beta((d-1)/2, (d-1)/2), whatever ``u``.
    """
    if n_features == 1:
        return 1.0 if margin <= 1.0 else 0.0
    a = (n_features - 1) / 2.0
    return float(2.0 * betainc(a, a, (1.0 - margin) / 2.0))


def _obpm_target(seed: int, n_features: int) -> np.ndarray:
    rng = block_generator(seed, "obpm-artificial/target", 0)
    while True:  # an all-zero target separates nothing: draw again
        u = rng.integers(-1, 2, size=n_features).astype(np.int64)
        if np.any(u):
            return u


def _obpm_block(seed: int, split: str, block: int, u: np.ndarray, margin: float, p_acc: float) -> np.ndarray:
    """``GENERATION_ROWS`` unit instances with margin >= ``margin`` under ``u``."""
    d = u.size
    uf = u.astype(np.float64)
    unorm = float(np.sqrt(uf @ uf))
    rng = block_generator(seed, f"obpm-artificial/{split}", block)
    need = GENERATION_ROWS
    parts: list[np.ndarray] = []
    cap = max(16, _CANDIDATE_VALUES // d)
    while need:
        # Enough candidates to finish in one round most of the time; the batch
        # size is a function of the (deterministic) count still needed.
        m = min(cap, int(math.ceil(1.1 * need / p_acc)) + 16)
        Z = rng.standard_normal((m, d))
        # Normalised Gaussians are uniform on the sphere: ||x|| = 1 = beta.
        Z /= np.sqrt(np.einsum("ij,ij->i", Z, Z))[:, None]
        keep = np.abs(Z @ uf) / unorm >= margin
        got = Z[keep][:need]
        parts.append(got)
        need -= got.shape[0]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _obpm_instances(seed: int, split: str, n: int, u: np.ndarray, margin: float, p_acc: float) -> np.ndarray:
    if n == 0:
        return np.empty((0, u.size), dtype=np.float64)
    blocks = [_obpm_block(seed, split, b, u, margin, p_acc) for b in range(_n_blocks(n))]
    return np.concatenate(blocks)[:n]


def make_obpm_artificial(
    n_train: int = 1000,
    n_test: int = 1000,
    *,
    n_features: int = 100,
    margin: float = 0.05,
    label_noise: float = 0.0,
    random_state: int | None | np.random.Generator = 0,
) -> ArtificialData:
    """The margin-separated artificial problem of the OBPM paper (section 4.1).

    A target ``u`` is drawn uniformly from {-1, 0, +1}^d (again if all zero);
    instances are uniform on the unit sphere and kept only when their
    normalised margin ``|u . x| / ||u||`` is at least ``margin`` (rejection
    sampling); the label is ``sign(u . x)``.  Training labels are flipped
    independently with probability ``label_noise``; the test set is clean,
    as in the paper.

    Parameters
    ----------
    n_train : int, default=1000
        Training examples (the paper's T).
    n_test : int, default=1000
        Test examples, drawn from a stream of their own.
    n_features : int, default=100
        Dimension d.
    margin : float, default=0.05
        The margin m; ``0 <= margin < 1``.
    label_noise : float, default=0.0
        Probability e of flipping each training label (the paper uses 0,
        0.01 and 0.1).
    random_state : int, None or numpy Generator, default=0
        Seed of every stream.

    Returns
    -------
    ArtificialData
        ``(X_train, y_train, X_test, y_test, target, y_train_clean)``;
        instances float64 with unit norm, labels int64 in {-1, +1}.

    Notes
    -----
    The paper assumes normalised instances (``||x|| <= beta = 1``); here
    ``||x|| = 1`` exactly (up to rounding), so the sample's margin under
    ``u / ||u||`` is at least ``margin``.  The acceptance probability does not
    depend on ``u``: for d = 100 and m = 0.05 it is about 0.62.  Rows are
    generated in blocks of :data:`GENERATION_ROWS`, so the first k rows do not
    depend on ``n_train`` / ``n_test``.

    References
    ----------
    E. Harrington, R. Herbrich, J. Kivinen, J. Platt and R. C. Williamson,
    "Online Bayes Point Machines", PAKDD 2003, sec. 4.1.

    Examples
    --------
    >>> import numpy as np
    >>> from distlearn.data.synthetic import make_obpm_artificial
    >>> data = make_obpm_artificial(200, 100, random_state=1)
    >>> data.X_train.shape, data.X_test.shape
    ((200, 100), (100, 100))
    >>> u = data.target
    >>> bool(np.all(np.abs(data.X_train @ u) / np.linalg.norm(u) >= 0.05 - 1e-12))
    True
    """
    n_train = _check_int("n_train", n_train, 0)
    n_test = _check_int("n_test", n_test, 0)
    n_features = _check_int("n_features", n_features, 1)
    margin = _check_real("margin", margin, 0.0, 1.0, hi_open=True)
    label_noise = _check_real("label_noise", label_noise, 0.0, 1.0)
    seed = normalize_seed(random_state)
    p_acc = _acceptance(n_features, margin)
    if p_acc < _MIN_ACCEPTANCE:
        raise ValueError(
            f"margin={margin} is too large for n_features={n_features}: only a fraction "
            f"{p_acc:.3g} of the sphere has that margin, rejection sampling would not finish"
        )
    u = _obpm_target(seed, n_features)
    uf = u.astype(np.float64)
    X_train = _obpm_instances(seed, "train", n_train, u, margin, p_acc)
    X_test = _obpm_instances(seed, "test", n_test, u, margin, p_acc)
    y_clean = _sign(X_train @ uf)
    y_test = _sign(X_test @ uf)
    # Counter-based per-row coin: row t's flip is the same for every n_train.
    flip = uniform(seed, stream_id("obpm-artificial/label-noise"), np.arange(n_train)) < label_noise
    y_train = np.where(flip, -y_clean, y_clean)
    return ArtificialData(X_train, y_train, X_test, y_test, u, y_clean)


def write_obpm_artificial(
    train_path: str | os.PathLike[str],
    test_path: str | os.PathLike[str],
    *,
    block_rows: int | None = None,
    overwrite: bool = False,
    **kwargs: Any,
) -> tuple[Dataset, Dataset]:
    """Write :func:`make_obpm_artificial` to two dense float64 stores (train, test).

    ``kwargs`` go to :func:`make_obpm_artificial`; they are recorded in each
    store's ``params`` with the split's name.
    """
    # One seed for the data and the record (None or a Generator must not be drawn twice).
    seed = normalize_seed(kwargs.pop("random_state", 0))
    data = make_obpm_artificial(random_state=seed, **kwargs)
    params = dict(kwargs)
    out = []
    for split, path, X, y in (
        ("train", train_path, data.X_train, data.y_train),
        ("test", test_path, data.X_test, data.y_test),
    ):
        with DatasetWriter(
            path,
            layout="dense",
            n_features=X.shape[1],
            dtype="float64",
            block_rows=block_rows,
            source="distlearn.data.synthetic.make_obpm_artificial",
            params={"generator": "obpm_artificial", "split": split, "random_state": seed, **params},
            overwrite=overwrite,
        ) as w:
            w.append(X, y)
            out.append(w.close())
    return out[0], out[1]


# =========================================================================== RCV1-like corpus


def _expected_distinct(p: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """E[# distinct tokens | L tokens] = sum_k 1 - (1 - p_k)^L, for each L."""
    log_q = np.log1p(-np.minimum(p, 1.0 - 1e-16))
    out = np.empty(lengths.size)
    step = max(1, (1 << 21) // max(1, p.size))  # bounded temporaries
    for i in range(0, lengths.size, step):
        L = lengths[i : i + step, None]
        out[i : i + step] = -np.expm1(L * log_q[None, :]).sum(axis=1)
    return out


@functools.lru_cache(maxsize=8)
def _corpus_model(
    n_features: int, zipf_exponent: float, mean_distinct: float, length_sigma: float
) -> tuple[np.ndarray, float, int]:
    """Zipf CDF over ranks, lognormal log-median ``mu``, and the length cap.

    ``mu`` is chosen so that E_L[E[distinct | L]] = ``mean_distinct`` under
    L = max(1, rint(exp(mu + sigma Z))): E[distinct | L] is computed exactly
    on a log grid of L, interpolated, averaged over equal-probability normal
    quantiles, and the (monotone) result is inverted by bisection on mu.  All
    deterministic -- no trial runs.
    """
    ranks = np.arange(1, n_features + 1, dtype=np.float64)
    w = ranks ** (-zipf_exponent)
    p = w / w.sum()
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    cdf.flags.writeable = False

    # Up to the length where all but 1/1000 of a token's worth is seen: far
    # beyond any document of a sensible corpus; also the cap on lengths.
    l_max = float(min(1e9, max(1e3, 10.0 / p[-1])))
    grid = np.unique(np.rint(np.geomspace(1.0, l_max, 384)))
    d_grid = _expected_distinct(p, grid)
    if mean_distinct > d_grid[-1]:
        raise ValueError(
            f"mean_distinct={mean_distinct} is not reachable with n_features={n_features} "
            f"and zipf_exponent={zipf_exponent}"
        )
    log_grid = np.log(grid)
    q = ndtri((np.arange(4096) + 0.5) / 4096)

    def mean_distinct_at(mu: float) -> float:
        L = np.clip(np.rint(np.exp(mu + length_sigma * q)), 1.0, l_max)
        return float(np.interp(np.log(L), log_grid, d_grid).mean())

    lo, hi = -5.0, math.log(l_max)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mean_distinct_at(mid) < mean_distinct:
            lo = mid
        else:
            hi = mid
    return cdf, 0.5 * (lo + hi), int(l_max)


class _Corpus(NamedTuple):
    seed: int
    n_features: int
    cdf: np.ndarray
    perm: np.ndarray
    mu: float
    sigma: float
    l_max: int
    dtype: np.dtype


def _rcv1_block(c: _Corpus, stream: str, block: int, n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One generation block of documents as float64 CSR arrays (indptr, indices, values).

    Vectorised over the block: token ids for all documents at once, then one
    sort of ``row * d + feature`` keys collapses duplicates into counts and
    leaves indices sorted within rows.
    """
    d = c.n_features
    # Separate streams for lengths and tokens keep each a single sequence.
    z = block_generator(c.seed, f"{stream}/lengths", block).standard_normal(n_rows)
    L = np.clip(np.rint(np.exp(c.mu + c.sigma * z)), 1, c.l_max).astype(np.int64)
    u = block_generator(c.seed, f"{stream}/tokens", block).random(int(L.sum()))
    rank = np.searchsorted(c.cdf, u, side="right")
    np.minimum(rank, d - 1, out=rank)  # guards u at the CDF's last rounding step
    key = np.repeat(np.arange(n_rows, dtype=np.int64) * d, L)
    key += c.perm[rank]
    keys, counts = np.unique(key, return_counts=True)
    rows = keys // d
    cols = keys - rows * d
    vals = np.log2(1.0 + counts)
    # L >= 1, so every row has a value and a positive norm.
    norms = np.sqrt(np.bincount(rows, weights=vals * vals, minlength=n_rows))
    vals /= norms[rows]
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return indptr, cols, vals


def _row_scores(indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, w: np.ndarray) -> np.ndarray:
    n = indptr.size - 1
    rows = np.repeat(np.arange(n), np.diff(indptr))
    return np.bincount(rows, weights=w[cols] * vals, minlength=n)


def _rcv1_setup(
    n_features: int,
    mean_distinct: float,
    zipf_exponent: float,
    length_sigma: float,
    n_relevant: int | None,
    positive_fraction: float,
    random_state: int | None | np.random.Generator,
    dtype: Any,
) -> tuple[_Corpus, np.ndarray, float]:
    """Validate, build the vocabulary, the teacher and its calibrated threshold."""
    d = _check_int("n_features", n_features, 1)
    if isinstance(mean_distinct, (int, float)) and d < mean_distinct:  # was named as mean_distinct's fault
        raise ValueError(f"n_features={d} (--n-features) is fewer than the {mean_distinct:g} distinct words a "
                         "document holds on average (mean_distinct); give more features")
    mean_distinct = _check_real("mean_distinct", mean_distinct, 1.0, float(d))
    zipf_exponent = _check_real("zipf_exponent", zipf_exponent, 0.0, 10.0)
    length_sigma = _check_real("length_sigma", length_sigma, 0.0, 5.0)
    positive_fraction = _check_real("positive_fraction", positive_fraction, 0.0, 1.0, lo_open=True, hi_open=True)
    k = max(1, d // 10) if n_relevant is None else _check_int("n_relevant", n_relevant, 1)
    if k > d:
        raise ValueError(f"n_relevant={k} exceeds n_features={d}")
    dt = np.dtype(dtype)
    if dt.name not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64'; got {dt.name!r}")
    seed = normalize_seed(random_state)

    cdf, mu, l_max = _corpus_model(d, zipf_exponent, mean_distinct, length_sigma)
    # Which feature id carries which frequency rank: a fixed random permutation.
    perm = block_generator(seed, "rcv1-like/vocabulary", 0).permutation(d).astype(np.int64)
    corpus = _Corpus(seed, d, cdf, perm, mu, length_sigma, l_max, dt)

    # The teacher: k relevant features with N(0, 1) weights, from its own stream.
    rng = block_generator(seed, "rcv1-like/teacher", 0)
    w = np.zeros(d)
    w[rng.choice(d, size=k, replace=False)] = rng.standard_normal(k)

    # Threshold: the (1 - positive_fraction) quantile of the teacher's score on
    # a calibration sample from a dedicated stream (not the data blocks), so
    # it is the same whatever n_samples is.
    scores = [
        _row_scores(*_rcv1_block(corpus, "rcv1-like/calibration", b, GENERATION_ROWS), w)
        for b in range(_CALIBRATION_ROWS // GENERATION_ROWS)
    ]
    threshold = float(np.quantile(np.concatenate(scores), 1.0 - positive_fraction))
    return corpus, w, threshold


def _iter_rcv1(
    corpus: _Corpus, w: np.ndarray, threshold: float, n_samples: int, label_noise: float
) -> Iterator[tuple[sp.csr_matrix, np.ndarray]]:
    d = corpus.n_features
    noise_stream = stream_id("rcv1-like/label-noise")
    index_dtype = np.int64 if d >= 2**31 else np.int32
    for b in range(_n_blocks(n_samples)):
        first = b * GENERATION_ROWS
        n = min(GENERATION_ROWS, n_samples - first)
        # The whole generation block is drawn and then cut, so a partial last
        # block holds exactly the rows a longer corpus would have there.
        indptr, cols, vals = _rcv1_block(corpus, "rcv1-like", b, GENERATION_ROWS)
        nnz = int(indptr[n])
        indptr, cols, vals = indptr[: n + 1], cols[:nnz], vals[:nnz]
        score = _row_scores(indptr, cols, vals, w)
        y = np.where(score > threshold, 1, -1).astype(np.int64)
        flip = uniform(corpus.seed, noise_stream, np.arange(first, first + n)) < label_noise
        y[flip] = -y[flip]
        X = sp.csr_matrix(
            (vals.astype(corpus.dtype), cols.astype(index_dtype), indptr), shape=(n, d), copy=False
        )
        X.has_sorted_indices = True
        yield X, y


def iter_rcv1_like(
    n_samples: int,
    *,
    n_features: int = RCV1_N_FEATURES,
    mean_distinct: float = 75,
    zipf_exponent: float = 1.1,
    length_sigma: float = 0.8,
    n_relevant: int | None = None,
    label_noise: float = 0.05,
    positive_fraction: float = 0.47,
    random_state: int | None | np.random.Generator = 0,
    dtype: Any = "float32",
) -> Iterator[tuple[sp.csr_matrix, np.ndarray]]:
    """Generate an RCV1-like sparse corpus, one generation block at a time.

    Parameters
    ----------
    n_samples : int
        Documents in all.
    n_features : int, default=47236
        Vocabulary size d (RCV1-v2's).
    mean_distinct : float, default=75
        Expected number of distinct terms per document (RCV1-v2 has about 75).
    zipf_exponent : float, default=1.1
        Exponent s of the term distribution ``p_k ∝ 1 / (k + 1)^s`` over ranks.
    length_sigma : float, default=0.8
        Standard deviation of the log of a document's raw token count.
    n_relevant : int, default=None
        Features with a nonzero teacher weight; ``n_features // 10`` by default.
    label_noise : float, default=0.05
        Probability of flipping each label.
    positive_fraction : float, default=0.47
        Fraction of documents the noise-free teacher calls positive (CCAT's
        share of RCV1-v2 is about 0.47).
    random_state : int, None or numpy Generator, default=0
        Seed of every stream.
    dtype : {"float32", "float64"}, default="float32"
        Type of the values.

    Yields
    ------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        Canonical CSR (indices sorted and unique within rows), unit-norm rows;
        ``n_rows`` is :data:`GENERATION_ROWS` except for the last block.
    y : ndarray of shape (n_rows,), int64
        Labels in {-1, +1}.

    Notes
    -----
    Term ranks are Zipf distributed and mapped to feature ids by a random
    permutation; a document draws ``L = max(1, rint(exp(mu + sigma Z)))``
    tokens, where ``mu`` is calibrated so that the expected number of distinct
    terms, ``E_L[sum_k 1 - (1 - p_k)^L]``, equals ``mean_distinct``.
    Repeated tokens become counts, the value is ``log2(1 + count)``, and each
    row is scaled to unit L2 norm.  The label is ``+1`` when ``w . x`` exceeds
    a threshold set on a calibration sample of 16,384 documents from a
    separate stream, then flipped with probability ``label_noise``.

    Examples
    --------
    >>> from distlearn.data.synthetic import iter_rcv1_like
    >>> X, y = next(iter_rcv1_like(10, n_features=1000, mean_distinct=20))
    >>> X.shape, X.dtype.name, sorted(set(y.tolist())) == [-1, 1]
    ((10, 1000), 'float32', True)
    """
    n_samples = _check_int("n_samples", n_samples, 0)
    label_noise = _check_real("label_noise", label_noise, 0.0, 1.0)
    corpus, w, threshold = _rcv1_setup(
        n_features, mean_distinct, zipf_exponent, length_sigma, n_relevant, positive_fraction, random_state, dtype
    )
    return _iter_rcv1(corpus, w, threshold, n_samples, label_noise)


def make_rcv1_like(
    path: str | os.PathLike[str],
    n_samples: int = RCV1_N_SAMPLES,
    *,
    block_rows: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    n_features: int = RCV1_N_FEATURES,
    mean_distinct: float = 75,
    zipf_exponent: float = 1.1,
    length_sigma: float = 0.8,
    n_relevant: int | None = None,
    label_noise: float = 0.05,
    positive_fraction: float = 0.47,
    random_state: int | None | np.random.Generator = 0,
    dtype: Any = "float32",
) -> Dataset:
    """Write an RCV1-like corpus (see :func:`iter_rcv1_like`) to a CSR zarr store.

    Generation blocks are appended to a :class:`~distlearn.data.store.DatasetWriter`
    as they are made, so memory stays bounded whatever ``n_samples``; the
    store's contents do not depend on ``block_rows``.

    Parameters
    ----------
    path : str or Path
        The store to create.
    n_samples : int, default=804414
        Documents (RCV1-v2's count by default).
    block_rows : int, default=None
        Rows per store block (the writer's default when None).
    overwrite : bool, default=False
        Replace an existing store.
    progress : bool, default=False
        Show a tqdm progress bar.
    **params
        As in :func:`iter_rcv1_like`.

    Returns
    -------
    Dataset
        The store, opened for reading.

    Examples
    --------
    >>> import os, tempfile
    >>> from distlearn.data.synthetic import make_rcv1_like
    >>> ds = make_rcv1_like(os.path.join(tempfile.mkdtemp(), "r.zarr"), 100, n_features=500)
    >>> ds.shape, ds.layout
    ((100, 500), 'csr')
    """
    n_samples = _check_int("n_samples", n_samples, 1)
    label_noise = _check_real("label_noise", label_noise, 0.0, 1.0)
    corpus, w, threshold = _rcv1_setup(
        n_features, mean_distinct, zipf_exponent, length_sigma, n_relevant, positive_fraction, random_state, dtype
    )
    params = {
        "generator": "rcv1_like",
        "n_samples": n_samples,
        "n_features": corpus.n_features,
        "mean_distinct": float(mean_distinct),
        "zipf_exponent": float(zipf_exponent),
        "length_sigma": float(length_sigma),
        "n_relevant": int(np.count_nonzero(w)),
        "label_noise": label_noise,
        "positive_fraction": float(positive_fraction),
        "random_state": corpus.seed,
        "dtype": corpus.dtype.name,
        "threshold": threshold,
        "generation_rows": GENERATION_ROWS,
    }
    from tqdm.auto import tqdm

    with (
        DatasetWriter(
            path,
            layout="csr",
            n_features=corpus.n_features,
            dtype=corpus.dtype,
            block_rows=block_rows,
            source="distlearn.data.synthetic.make_rcv1_like",
            params=params,
            overwrite=overwrite,
        ) as writer,
        tqdm(total=n_samples, unit="rows", desc="rcv1-like", disable=not progress) as bar,
    ):
        for X, y in _iter_rcv1(corpus, w, threshold, n_samples, label_noise):
            writer.append(X, y)
            bar.update(X.shape[0])
        return writer.close()


# =========================================================================== OBPM section 4.2


class DriftStream(NamedTuple):
    """The drifting-concept stream of Harrington et al. (2003), section 4.2.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_pixels)
        ``x_t``, rows of the source set (its dtype, images flattened).
    y : ndarray of shape (n_samples,), int64
        ``+1`` when the source label of ``x_t`` is the positive label at t.
    positive_label : ndarray of shape (n_samples,)
        The label in force as the positive class at each t.
    source_index : ndarray of shape (n_samples,), int64
        Row of the source set that ``x_t`` is.
    r : ndarray of shape (n_samples,), float64
        The uniform draws ``r_t`` that chose the positive label.
    positive_labels : tuple
        ``(l1, l2, l3)``.
    """

    X: np.ndarray
    y: np.ndarray
    positive_label: np.ndarray
    source_index: np.ndarray
    r: np.ndarray
    positive_labels: tuple[Any, Any, Any]


def make_drifting_stream(
    X: Any,
    labels: Any,
    *,
    n_samples: int = 1000,
    positive_labels: tuple[Any, Any, Any] | None = None,
    random_state: int | None | np.random.Generator = 0,
) -> DriftStream:
    """A drifting binary concept over a 10-class image set (OBPM paper, section 4.2).

    The positive class is a single label that changes over time in two
    gradual phases; the other labels are negative.  At time t = 1..T
    (T = ``n_samples``) a uniform ``r_t`` in [0, 1) chooses the positive
    label by the paper's pseudo-code::

        z_t^+ = z_t^1
        if r_t > 1 - t / (T/2):   z_t^+ = z_t^2
        if r_t > 1 - t / (1.11 T): z_t^+ = z_t^3

    and ``x_t`` is a uniformly drawn row of ``X``, labelled ``+1`` if its label
    is the positive label at t, else ``-1``.

    Parameters
    ----------
    X : array-like of shape (n, ...)
        The image set (e.g. MNIST or Fashion-MNIST); trailing dimensions are
        flattened.
    labels : array-like of shape (n,)
        Its class labels.
    n_samples : int, default=1000
        T (the paper takes 1000 examples).
    positive_labels : tuple of 3 labels, default=None
        ``(l1, l2, l3)``, distinct and present in ``labels``; by default three
        distinct labels drawn from the seed.
    random_state : int, None or numpy Generator, default=0
        Seed of the row draws, the ``r_t`` and the default labels.

    Returns
    -------
    DriftStream
        ``(X, y, positive_label, source_index, r, positive_labels)``.

    Notes
    -----
    For t > T/2 the positive label is never l1.  The paper's prose says that
    "by 900 they are all label 3", which the formula does not give: with
    T = 1000 the probability of label 3 at t = 900 is ``900 / 1110 ≈ 0.81``
    and at t = T only ``1 / 1.11 ≈ 0.90``.  We follow the formula.  Rows and
    ``r_t`` are counter-based draws keyed by t, so a longer stream has the
    same rows -- though not the same labels, since the schedule scales with T.

    References
    ----------
    E. Harrington, R. Herbrich, J. Kivinen, J. Platt and R. C. Williamson,
    "Online Bayes Point Machines", PAKDD 2003, sec. 4.2.

    Examples
    --------
    >>> import numpy as np
    >>> from distlearn.data.synthetic import make_drifting_stream
    >>> X = np.arange(40.0).reshape(20, 2); labels = np.arange(20) % 10
    >>> s = make_drifting_stream(X, labels, n_samples=100, positive_labels=(1, 2, 3))
    >>> bool(np.all(s.positive_label[50:] != 1))
    True
    >>> bool(np.all(s.y == np.where(labels[s.source_index] == s.positive_label, 1, -1)))
    True
    """
    X = np.asarray(X)
    labels = np.asarray(labels).reshape(-1)
    if X.ndim < 2:
        raise ValueError(f"X must have one row per example (2-D or more); got shape {X.shape}")
    n = X.shape[0]
    if labels.shape[0] != n:
        raise ValueError(f"X has {n} rows but labels has {labels.shape[0]} entries")
    if n == 0:
        raise ValueError("X is empty")
    X = X.reshape(n, -1)
    T = _check_int("n_samples", n_samples, 1)
    seed = normalize_seed(random_state)
    classes = np.unique(labels)
    if positive_labels is None:
        if classes.size < 3:
            raise ValueError(f"the drift needs at least 3 distinct labels; got {classes.size}")
        chosen = block_generator(seed, "drift/positive-labels", 0).choice(classes, size=3, replace=False)
        pos = tuple(chosen.tolist())
    else:
        pos = tuple(positive_labels)
        if len(pos) != 3 or len(set(pos)) != 3:
            raise ValueError(f"positive_labels must be three distinct labels; got {positive_labels!r}")
        missing = [lab for lab in pos if not np.any(labels == lab)]
        if missing:
            raise ValueError(f"positive_labels {missing} do not occur in labels")

    t = np.arange(1, T + 1)
    # Counter-based draws keyed by t: reproducible and independent of each other.
    r = uniform(seed, stream_id("drift/r"), t)
    idx = np.minimum((uniform(seed, stream_id("drift/rows"), t) * n).astype(np.int64), n - 1)
    choice = np.zeros(T, dtype=np.int64)
    choice[r > 1.0 - t / (T / 2.0)] = 1
    choice[r > 1.0 - t / (1.11 * T)] = 2  # applied second, as in the pseudo-code
    positive_label = np.asarray(pos, dtype=labels.dtype)[choice]
    y = np.where(labels[idx] == positive_label, 1, -1).astype(np.int64)
    return DriftStream(X[idx], y, positive_label, idx, r, pos)
