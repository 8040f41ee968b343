"""The Dask layer: clusters, pure task functions, graph builders and tree merges."""

from __future__ import annotations

from .cluster import get_client

__all__ = ["get_client"]
