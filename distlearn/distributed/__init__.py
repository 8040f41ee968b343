"""The Dask layer: one executor, graph merges, checkpoints and the three parallel plans.

- :mod:`.executor`: :func:`executor_for` -- what ``scheduler=`` means, everywhere;
- :mod:`.cluster`: LocalCluster / scheduler clients, TLS;
- :mod:`.graph`: reduction trees (:func:`tree_reduce`) and their in-process twin (:func:`fold`);
- :mod:`.learner_parallel`: OBPM's learner groups as task chains (:class:`distlearn.OBPM` with ``scheduler=``);
- :mod:`.mixing`: data-parallel iterative parameter mixing (:class:`distlearn.ParameterMixing`);
- :mod:`.runs`: run-parallel grids, repeats and folds (:func:`run_grid`), and ensemble members;
- :mod:`.checkpoint`: resumable jobs.
"""

from __future__ import annotations

from .cluster import describe, get_client, make_security
from .executor import executor_for
from .graph import fold, tree_reduce
from .run_table import RunTable
from .runs import RunError, run_grid

__all__ = ["get_client", "make_security", "describe", "executor_for", "tree_reduce", "fold", "run_grid",
           "RunTable", "RunError"]
