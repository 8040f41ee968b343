"""Declarative parameter tables and input coercion for the public API.

Each estimator lists its parameters once, as ``{name: constraint}``; ``fit``
checks them all before any work, and a failure names the parameter, the value
it got and the range it accepts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import os
from typing import Any

import numpy as np

__all__ = ["did_you_mean", "choose", "Real", "Integral", "Options", "Boolean", "RandomState", "NJobs",
           "effective_n_jobs", "Scheduler", "SchedulerAddress", "plain_scheduler", "OptionalPath", "check_params",
           "in_memory"]


def did_you_mean(value: Any, names: Any) -> str:
    """``"; did you mean 'x'?"`` for the names closest to ``value`` (case ignored), or ``""``."""
    names = [str(n) for n in names]
    lower = {n.lower(): n for n in names}
    v = str(value).lower()
    starts = [n for n in lower if v and n.startswith(v)]  # "svm" -> "svmlight"
    close = (starts + [c for c in difflib.get_close_matches(v, list(lower), n=3, cutoff=0.6) if c not in starts])[:3]
    return f"; did you mean {' or '.join(repr(lower[c]) for c in close)}?" if close else ""


def choose(value: str, names: Any, what: str) -> str:
    """The one of ``names`` that ``value`` names, case ignored (``"OBPM"`` is ``"obpm"``); anything
    else is a ``ValueError`` with the closest names and every choice."""
    names = list(names)
    if value in names:
        return value
    same = [n for n in names if isinstance(value, str) and n.lower() == value.lower()]
    if len(same) == 1:
        return same[0]
    raise ValueError(f"unknown {what} {value!r}{did_you_mean(value, names)} (choose from {', '.join(names)})")


class Real:
    """A real number in an interval; ``closed`` is "both", "left", "right" or "neither"."""

    def __init__(self, lo: float = -math.inf, hi: float = math.inf, closed: str = "both",
                 none_ok: bool = False, also: tuple[str, ...] = ()) -> None:
        self.lo, self.hi, self.closed, self.none_ok, self.also = lo, hi, closed, none_ok, also

    def describe(self) -> str:
        left = "[" if self.closed in ("both", "left") and math.isfinite(self.lo) else "("
        right = "]" if self.closed in ("both", "right") and math.isfinite(self.hi) else ")"
        text = f"a real number in {left}{self.lo:g}, {self.hi:g}{right}"
        extra = [repr(a) for a in self.also] + (["None"] if self.none_ok else [])
        return text + "".join(f" or {e}" for e in extra)

    def check(self, name: str, value: Any) -> None:
        if value is None and self.none_ok:
            return
        if isinstance(value, str) and value in self.also:
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        v = float(value)
        lo_ok = v >= self.lo if self.closed in ("both", "left") else v > self.lo
        hi_ok = v <= self.hi if self.closed in ("both", "right") else v < self.hi
        if not (lo_ok and hi_ok) or (math.isinf(v) and math.isfinite(self.hi if v > 0 else self.lo)):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")


class Integral:
    """An integer in ``[lo, hi]`` (``None``: unbounded), or one of the strings ``also``."""

    def __init__(self, lo: int | None = None, hi: int | None = None, also: tuple[str, ...] = ()) -> None:
        self.lo, self.hi, self.also = lo, hi, also

    def describe(self) -> str:
        lo = "-inf" if self.lo is None else str(self.lo)
        hi = "inf" if self.hi is None else str(self.hi)
        return f"an integer in [{lo}, {hi}]" + "".join(f" or {a!r}" for a in self.also)

    def check(self, name: str, value: Any) -> None:
        if isinstance(value, str) and value in self.also:
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}")


class Options:
    def __init__(self, *options: Any) -> None:
        self.options = options

    def check(self, name: str, value: Any) -> None:
        if not any(value == o and type(value) is type(o) for o in self.options):
            allowed = ", ".join(repr(o) for o in self.options)
            hint = did_you_mean(value, [o for o in self.options if isinstance(o, str)]) if isinstance(value, str) else ""
            raise ValueError(f"{name} must be one of {allowed}; got {value!r}{hint}")


class Boolean:
    def check(self, name: str, value: Any) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {value!r}")


class RandomState:
    def check(self, name: str, value: Any) -> None:
        if value is None or isinstance(value, (np.random.RandomState, np.random.Generator)):
            return
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value < 2**64:
            return  # the counters hash the seed as a uint64: a larger one is refused, never wrapped
        raise ValueError(f"{name} must be None, a non-negative int below 2**64, or a numpy RandomState/Generator; "
                         f"got {value!r}")


class NJobs:
    """``n_jobs`` as scikit-learn and joblib read it: ``None`` (1), a positive count, or a negative
    one counted back from the cores (-1 all, -2 all but one, ...); 0 is refused."""

    def check(self, name: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value != 0:
            return
        raise ValueError(f"{name} must be None (1), a positive integer, or a negative one counted from the cores "
                         f"(-1: all {cpu_count()} cores, -2: all but one); got {value!r}")


def cpu_count() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def effective_n_jobs(n_jobs: Any) -> int:
    """The number of threads ``n_jobs`` means (joblib's convention): ``None`` -> 1, ``k > 0`` -> k,
    ``k < 0`` -> ``cpu_count() + 1 + k`` (-1: every core), at least 1.  The one place it is read.

    >>> effective_n_jobs(None), effective_n_jobs(3), effective_n_jobs(-1) == cpu_count()
    (1, 3, True)
    """
    NJobs().check("n_jobs", n_jobs)
    if n_jobs is None:
        return 1
    n = int(n_jobs)
    return n if n > 0 else max(1, cpu_count() + 1 + n)


@dataclasses.dataclass(frozen=True)
class SchedulerAddress:
    """A Dask scheduler named by its address, with the TLS ``security`` that reaches it.

    What a ``distributed.Client`` given as ``scheduler=`` becomes when an estimator is
    copied, cloned or pickled (:func:`plain_scheduler`): plain data, unlike the live client.
    """

    address: str
    security: Any = None

    def __str__(self) -> str:
        return self.address


def _is_client(value: Any) -> bool:
    return hasattr(value, "submit") and hasattr(value, "scheduler")


def plain_scheduler(value: Any) -> Any:
    """``scheduler=`` as plain data: a ``distributed.Client`` becomes its scheduler's address
    (a :class:`SchedulerAddress` with the client's security when it speaks TLS); anything else
    is returned as it is.  The one place where a live client is reduced."""
    if not _is_client(value):
        return value
    address = getattr(getattr(value, "scheduler", None), "address", None)
    if not address:
        raise ValueError("scheduler= is a distributed.Client that is not connected to a scheduler; pass a "
                         "connected client or the scheduler's address")
    address = str(address)
    if address.startswith("tls://"):
        return SchedulerAddress(address, getattr(value, "security", None))
    return address


class Scheduler:
    """Where work runs: ``None``/``"in-process"``, ``"local"``, an address or scheduler file, a
    jobqueue spec (``"slurm:FILE"``), a :class:`SchedulerAddress`, or a Client (kept as its address
    when the estimator is copied: :func:`plain_scheduler`).

    The meaning is documented once, in :func:`distlearn.distributed.executor.executor_for`.
    """

    def check(self, name: str, value: Any) -> None:
        if value is None or _is_client(value) or isinstance(value, SchedulerAddress):
            return
        if isinstance(value, (str, os.PathLike)) and str(value) not in ("", "sync", "threads"):
            return
        raise ValueError(f"{name} must be None or 'in-process' (this process), 'local' (a LocalCluster), a "
                         f"scheduler address ('tcp://host:8786') or scheduler file, or a distributed.Client; "
                         f"got {value!r}")


class OptionalPath:
    def check(self, name: str, value: Any) -> None:
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{name} must be None or a path, got {value!r}")


def in_memory(value: Any) -> Any:
    """A Dask collection (array, DataFrame, Series) computed into its in-memory counterpart (numpy,
    pandas: a DataFrame keeps its column names, which become ``feature_names_in_``); anything else as
    it is.  The one place where the estimators take Dask collections in.

    The partitions are concatenated in order, so the rows are the collection's rows: fitting from a
    Dask DataFrame is fitting from its computed frame.  Data larger than memory belongs in a store
    (``distlearn convert``), which is streamed block by block.
    """
    if type(value).__module__.startswith("dask") and hasattr(value, "__dask_graph__") and hasattr(value, "compute"):
        return value.compute()
    return value


def check_params(obj: Any, table: dict[str, Any]) -> None:
    """Check every ``obj.<name>`` against its constraint in ``table``."""
    for name, constraint in table.items():
        constraint.check(name, getattr(obj, name))


class Budget:
    """A kernel learner's cache: ``None`` (no removal), ``"variable"`` (DistillCache), ``"projectron"``
    (projection onto the cache's span) or a size >= 1."""

    def check(self, name: str, value: Any) -> None:
        if value is None or (isinstance(value, str) and value in ("variable", "projectron")):
            return
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and 1 <= value < 2**63:
            return  # an int64 in the budget engine's record: a larger one was an OverflowError traceback
        raise ValueError(f"{name} must be None (no removal), 'variable' (DistillCache), 'projectron' or an "
                         f"integer cache size >= 1 (below 2**63); got {value!r}")


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not tell)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """The memory this machine can still give (``MemAvailable`` of /proc/meminfo), else its physical
    memory (None where the OS tells neither)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return physical_memory()


def check_allocation(what: str, shape: tuple[int, ...], itemsize: int, hint: str | None = None) -> None:
    """Refuse, before allocating, an array larger than the memory this machine has free, naming its size.

    A feature index of 10**12 in a data file makes a weight matrix of terabytes; the
    message says so instead of numpy's allocation traceback.  The bound is the memory available
    now, not the physical memory: weights of 3 * 10**9 features (24 GB) on a 23.5 GiB machine
    passed a bound of the physical memory and were killed by the kernel's OOM killer (exit 137).
    ``hint``: what to do instead (default: check n_features).
    """
    n = 1
    for s in shape:
        n *= int(s)
    need = n * int(itemsize)
    have = available_memory()
    if have is not None and need > have:
        dims = " x ".join(f"{int(s):,}" for s in shape)
        hint = hint or "is n_features right (the largest feature index of the data)?"
        raise ValueError(f"{what} ({dims}, {itemsize} bytes each) would need {_size(need)}, more than the "
                         f"{_size(have)} of memory this machine has available; {hint}")


def _size(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024 or unit == "PiB":
            return f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} PiB"
