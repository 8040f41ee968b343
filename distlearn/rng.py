"""Counter-based randomness keyed by ``(seed, stream, index)``.

Every random choice in distlearn is a pure function of a seed, a *stream* id
(what the numbers are for) and a counter (which example, learner, epoch or
block).  Nothing depends on how the work was split into chunks, tasks or
workers, nor on a retry: the same key always gives the same numbers
(DESIGN.md, decision 2).

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
    if isinstance(random_state, (int, np.integer)) and random_state >= 0:
        return int(random_state)
    raise ValueError(
        f"random_state must be a non-negative int, None or a numpy Generator; got {random_state!r}"
    )
