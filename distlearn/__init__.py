"""distlearn: fast online learners turned into accurate batch classifiers, run on Dask.

The data layer (zarr stores, readers, generators) lives in :mod:`distlearn.data`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .data import Dataset, create_dataset, open_dataset  # noqa: E402

__all__ = ["Dataset", "__version__", "create_dataset", "open_dataset"]
