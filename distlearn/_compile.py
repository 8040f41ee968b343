"""Numba compilation seen from this process: announced, timed and kept apart from work.

numba compiles a kernel the first time it meets a new signature, then keeps it in its on-disk
cache (``NUMBA_FLAGS["cache"]``, :mod:`distlearn._config`).  A first run therefore pays a few
seconds of compilation that later runs do not.  :func:`watch` listens to numba's compile events
(``numba.core.event``, kind ``"numba:compile"``) while a piece of work runs: the first
compilation in the process can be announced once (the ``distlearn`` command prints
``distlearn train: compiling kernels (first run only) ...`` when stderr is a terminal, as it shows
progress bars), and the watch records the wall
time and the names of the kernels compiled, so that ``distlearn train`` reports the fit time
without them.  ``distlearn warmup`` compiles the common kernels ahead (:mod:`distlearn.warmup`).

Only compilations in this process are seen: Dask worker processes compile (or load from the
same cache) on their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompileLog", "watch"]

_LOCK = threading.Lock()
_ANNOUNCED = [False]  # one announcement per process, whoever watches


@dataclass
class CompileLog:
    """What was compiled while a :func:`watch` was open: wall seconds of the outermost
    compilations (a kernel's own helpers and numba's overloads are inside them) and the
    qualified names of the functions compiled, in order."""

    seconds: float = 0.0
    kernels: list[str] = field(default_factory=list)


class _Listener:
    """A ``numba.core.event.Listener`` (built lazily: numba is imported on first use)."""

    def __init__(self, log: CompileLog, announce: Callable[[str], None] | None):
        self.log = log
        self.announce = announce
        self.depth = 0
        self.t0 = 0.0

    def on_start(self, event: Any) -> None:
        # numba compiles under its global lock: one compilation (and its nested ones) at a time
        if self.depth == 0:
            self.t0 = time.perf_counter()
            fn = getattr(event.data.get("dispatcher"), "py_func", None)
            name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
            self.log.kernels.append(name)
            if self.announce is not None:
                with _LOCK:
                    first, _ANNOUNCED[0] = not _ANNOUNCED[0], True
                if first:
                    self.announce(name)
        self.depth += 1

    def on_end(self, event: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.log.seconds += time.perf_counter() - self.t0


@contextmanager
def watch(announce: Callable[[str], None] | None = None) -> Iterator[CompileLog]:
    """Record numba compilations in this process while the block runs.

    ``announce(name)`` is called at the first compilation of the process (``name`` is the
    kernel's qualified name), not again, whichever watch sees it.

    >>> from numba import njit
    >>> @njit
    ... def twice(x):
    ...     return 2 * x
    >>> with watch() as log:
    ...     _ = twice(1)
    >>> log.kernels, log.seconds > 0
    (['distlearn._compile.twice'], True)
    >>> with watch() as log:
    ...     _ = twice(2)        # compiled already
    >>> log.kernels
    []
    """
    from numba.core import event

    class Listener(_Listener, event.Listener):
        pass

    log = CompileLog()
    listener = Listener(log, announce)
    event.register("numba:compile", listener)
    try:
        yield log
    finally:
        event.unregister("numba:compile", listener)
