"""distlearn: fast online learners turned into accurate batch classifiers, run on Dask.

The layers, bottom up (ARCHITECTURE.md in the source tree draws them):
:mod:`distlearn.data` (zarr stores, readers, generators), :mod:`distlearn.stream`
(the block stream), :mod:`distlearn.learners` (compiled rules and the rule
registry), :mod:`distlearn.conversions`, :mod:`distlearn.ensembles`,
:mod:`distlearn.distributed` (the executor and the parallel plans) and
:mod:`distlearn.estimators` (the scikit-learn classes, re-exported here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:  # the names below are imported on first use (import distlearn stays fast)
    from .data import Dataset, create_dataset, open_dataset
    from .export import export_onnx
    from .estimators import (
        ALMA,
        AROW,
        LMS,
        MIRA,
        OBPM,
        ROMMA,
        GeneralizedPerceptron,
        KernelMIRA,
        KernelOBPM,
        KernelPA,
        KernelPerceptron,
        KernelPermutationBPM,
        MarginPerceptron,
        NormalizedGradient,
        ParameterMixing,
        PassiveAggressive,
        Perceptron,
        PermutationBPM,
    )

__all__ = [
    "ALMA",
    "AROW",
    "LMS",
    "MIRA",
    "OBPM",
    "ROMMA",
    "Dataset",
    "GeneralizedPerceptron",
    "KernelMIRA",
    "KernelOBPM",
    "KernelPA",
    "KernelPerceptron",
    "KernelPermutationBPM",
    "MarginPerceptron",
    "NormalizedGradient",
    "ParameterMixing",
    "PassiveAggressive",
    "Perceptron",
    "PermutationBPM",
    "__version__",
    "create_dataset",
    "export_onnx",
    "open_dataset",
]

_FROM = {"Dataset": ".data", "create_dataset": ".data", "open_dataset": ".data", "export_onnx": ".export"}


def __getattr__(name: str) -> Any:
    """The estimators, the data entry points and ``export_onnx``, imported on first use (PEP 562): ``import distlearn``
    and the ``distlearn`` command's start do not pay for scikit-learn and numba until needed."""
    if name not in __all__ or name == "__version__":
        raise AttributeError(f"module 'distlearn' has no attribute {name!r}")
    value = getattr(importlib.import_module(_FROM.get(name, ".estimators"), __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
