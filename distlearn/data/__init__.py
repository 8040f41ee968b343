"""Data layer: the zarr store, file readers and synthetic generators."""

from __future__ import annotations

from .store import (
    Block,
    Dataset,
    DatasetWriter,
    StoreError,
    create_dataset,
    open_dataset,
    write_dataset,
)

__all__ = [
    "Block",
    "Dataset",
    "DatasetWriter",
    "StoreError",
    "create_dataset",
    "open_dataset",
    "write_dataset",
]
