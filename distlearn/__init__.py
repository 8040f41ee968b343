"""distlearn: fast online learners turned into accurate batch classifiers, run on Dask.

The layers, bottom up (ARCHITECTURE.md in the source tree draws them):
:mod:`distlearn.data` (zarr stores, readers, generators), :mod:`distlearn.stream`
(the block stream), :mod:`distlearn.learners` (compiled rules and the rule
registry), :mod:`distlearn.conversions`, :mod:`distlearn.ensembles`,
:mod:`distlearn.distributed` (the executor and the parallel plans) and
:mod:`distlearn.estimators` (the scikit-learn classes, re-exported here).
"""

from __future__ import annotations

from ._version import __version__  # noqa: E402

from .data import Dataset, create_dataset, open_dataset  # noqa: E402
from .estimators import (  # noqa: E402
    ALMA,
    LMS,
    MIRA,
    OBPM,
    ROMMA,
    GeneralizedPerceptron,
    KernelMIRA,
    KernelPA,
    KernelPerceptron,
    MarginPerceptron,
    ParameterMixing,
    PassiveAggressive,
    Perceptron,
    PermutationBPM,
)

__all__ = [
    "ALMA",
    "LMS",
    "MIRA",
    "OBPM",
    "ROMMA",
    "Dataset",
    "GeneralizedPerceptron",
    "KernelMIRA",
    "KernelPA",
    "KernelPerceptron",
    "MarginPerceptron",
    "ParameterMixing",
    "PassiveAggressive",
    "Perceptron",
    "PermutationBPM",
    "__version__",
    "create_dataset",
    "open_dataset",
]
