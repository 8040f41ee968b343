"""distlearn: fast online learners turned into accurate batch classifiers, run on Dask.

The data layer (zarr stores, readers, generators) lives in :mod:`distlearn.data`;
the compiled update rules in :mod:`distlearn.learners`; the scikit-learn
estimators built on them in :mod:`distlearn.estimators` and here.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .data import Dataset, create_dataset, open_dataset  # noqa: E402
from .estimators import (  # noqa: E402
    ALMA,
    LMS,
    MIRA,
    ROMMA,
    GeneralizedPerceptron,
    MarginPerceptron,
    PassiveAggressive,
    Perceptron,
)
from .ensembles import OBPM, PermutationBPM  # noqa: E402
from .distributed.mixing import ParameterMixing  # noqa: E402

__all__ = [
    "ALMA",
    "LMS",
    "MIRA",
    "OBPM",
    "ROMMA",
    "Dataset",
    "GeneralizedPerceptron",
    "MarginPerceptron",
    "ParameterMixing",
    "PassiveAggressive",
    "Perceptron",
    "PermutationBPM",
    "__version__",
    "create_dataset",
    "open_dataset",
]
