"""Counter-based randomness keyed by ``(seed, stream, index)``.

Every random choice in distlearn is a pure function of a seed, a *stream* id
(what the numbers are for) and a counter (which example, learner, epoch or
block).  Nothing depends on how the work was split into chunks, tasks or
workers, nor on a retry: the same key always gives the same numbers.

Two tools are offered:

* :func:`hash64` / :func:`uniform` -- a SplitMix64-style hash evaluated
  element-wise over integer counters (numpy, vectorised).  This is what
  per-example draws (OBPM's Bernoulli masks, shuffles) use.
* :func:`block_generator` -- a :class:`numpy.random.Generator` on a Philox
  bit generator keyed by ``(seed, stream, block)``; used where a whole block
  of variates of a rich distribution is needed (the synthetic generators).
  Callers define the block on a fixed grid (e.g. rows ``4096*b ...``) that
  never depends on a user's chunking.
"""

from __future__ import annotations

import zlib

import numpy as np

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


def stream_id(name: str) -> int:
    """A stable 32-bit id for a named random stream (``"obpm-mask"`` ...)."""
    return zlib.crc32(name.encode("utf-8"))


def _mix(z: np.ndarray) -> np.ndarray:
    # SplitMix64 finaliser (Steele, Lea & Flood 2014); wrapping uint64 arithmetic.
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _C1
        z = (z ^ (z >> np.uint64(27))) * _C2
        return z ^ (z >> np.uint64(31))


def hash64(seed: int, *counters: int | np.ndarray) -> np.ndarray:
    """Hash ``(seed, c1, c2, ...)`` to uniformly distributed 64-bit integers.

    Counters broadcast against each other; each is folded in with one
    SplitMix64 round, so ``hash64(s, a, b)`` and ``hash64(s, b, a)`` differ.
    """
    with np.errstate(over="ignore"):
        h = _mix(np.asarray(seed, dtype=np.uint64) * _GOLDEN + _GOLDEN)
        for c in counters:
            c = np.asarray(c).astype(np.uint64)
            h = _mix(h ^ ((c + _GOLDEN) * _C1))
    return h


def uniform(seed: int, *counters: int | np.ndarray) -> np.ndarray:
    """Uniform floats in ``[0, 1)`` (53 random bits) keyed by ``(seed, counters...)``."""
    return (hash64(seed, *counters) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def block_generator(seed: int, stream: int | str, block: int) -> np.random.Generator:
    """A Philox generator for block ``block`` of stream ``stream`` under ``seed``."""
    if isinstance(stream, str):
        stream = stream_id(stream)
    key = int(hash64(seed, stream, block)) & 0xFFFFFFFFFFFFFFFF
    return np.random.Generator(np.random.Philox(key=key))


def normalize_seed(random_state: int | None | np.random.Generator) -> int:
    """Turn a user's ``random_state`` into the integer seed the counters use."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy) & 0x7FFFFFFFFFFFFFFF
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, (int, np.integer)) and 0 <= random_state < 2**64:
        return int(random_state)  # hashed as a uint64 (hash64): a larger seed is refused, never wrapped
    raise ValueError(
        f"random_state must be a non-negative int below 2**64, None or a numpy Generator; got {random_state!r}"
    )


# --------------------------------------------------------------------------- OBPM draws

#: Stream of OBPM's Bernoulli draws b_{j,t}.
OBPM_MASK_STREAM = stream_id("obpm-mask")


def mask_threshold(tau: float) -> int:
    """The 32-bit threshold of a Bernoulli(``tau``) draw: ``b = 1`` iff a learner's 32
    random bits are below it.  ``P(b = 1) = round(tau * 2**32) / 2**32`` exactly
    (``tau = 1`` gives ``2**32``: always)."""
    tau = float(tau)
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau!r}")
    return int(round(tau * 2.0**32))


def epoch_key(seed: int, epoch: int, stream: int = OBPM_MASK_STREAM) -> int:
    """``hash64(seed, stream, epoch)``: the key the kernels fold each example index into."""
    return int(hash64(seed, stream, epoch))


def obpm_mask(seed: int, epoch: int, t: int | np.ndarray, n_learners: int, tau: float,
              first: int = 0) -> np.ndarray:
    """OBPM's draws ``b_{j,t}`` as booleans of shape ``(len(t), n_learners)``.

    ``b_{j,t}`` is a pure function of ``(seed, j, t, epoch)``: the example's key
    is ``k_t = hash64(seed, stream, epoch, t)``; learners ``2g`` and ``2g + 1``
    take the low and high 32 bits of ``SplitMix64(k_t + (g + 1) * golden)`` --
    the ``g``-th output of a SplitMix64 generator seeded with ``k_t``, evaluated
    directly.  Columns are learners ``first .. first + n_learners - 1``.  This is
    the reference the compiled kernel is tested against.
    """
    thr = mask_threshold(tau)
    t = np.atleast_1d(np.asarray(t)).astype(np.uint64)
    with np.errstate(over="ignore"):
        kt = _mix(np.uint64(epoch_key(seed, epoch)) ^ ((t + _GOLDEN) * _C1))
        j = np.arange(first, first + n_learners, dtype=np.uint64)
        g = j >> np.uint64(1)
        word = _mix(kt[:, None] + (g[None, :] + np.uint64(1)) * _GOLDEN)
    bits = np.where((j & np.uint64(1)) == 1, word >> np.uint64(32), word & np.uint64(0xFFFFFFFF))
    if thr >= 2**32:
        return np.ones(bits.shape, dtype=bool)
    return bits < np.uint64(thr)
