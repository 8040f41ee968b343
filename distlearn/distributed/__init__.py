"""The Dask layer: clusters, pure task functions, graph builders and tree merges.

- learner-parallel OBPM: :class:`distlearn.OBPM` with ``scheduler=`` (:mod:`.learner_parallel`)
- data-parallel iterative parameter mixing: :class:`ParameterMixing` (:mod:`.mixing`)
- run-parallel grids, repeats and folds: :func:`run_grid` (:mod:`.runs`)
- reduction trees: :func:`tree_reduce` (:mod:`.graph`)
- checkpoints: :mod:`.checkpoint`
"""

from __future__ import annotations

from .cluster import describe, get_client, make_security
from .graph import fold, tree_reduce
from .mixing import ParameterMixing
from .runs import RunError, RunTable, run_grid

__all__ = ["get_client", "make_security", "describe", "tree_reduce", "fold", "run_grid", "RunTable", "RunError", "ParameterMixing"]
