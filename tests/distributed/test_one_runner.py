"""One runner: the executor's ordered map, ``scheduler=`` as plain data, and estimators holding a
Client that still clone, pickle and run inside GridSearchCV -- on a real Dask cluster."""

from __future__ import annotations

import pickle
import socket


import numpy as np
import pytest

from distlearn._tasks import run_ordered
from distlearn._validation import SchedulerAddress, plain_scheduler
from distlearn.data.synthetic import make_obpm_artificial
from distlearn.distributed import executor_for, get_client
from distlearn.distributed.executor import InProcess, OnDask


# Builtins as the tasks: the workers cannot import this test module.
JOBS = [([("i", i)],) for i in range(23)]  # dict(*job, **shared)
SHARED = {"offset": 5, "table": {"k": 7}}  # a dict is scattered once to every worker on Dask
WANT = [{"i": i, **SHARED} for i in range(23)]


def test_map_ordered_is_the_same_in_process_on_threads_and_on_dask(client):
    assert list(run_ordered(None, dict, JOBS, **SHARED)) == WANT
    assert list(InProcess(1).map_ordered(dict, JOBS, **SHARED)) == WANT
    pool = InProcess(3)
    try:
        assert list(pool.map_ordered(dict, JOBS, **SHARED)) == WANT
    finally:
        pool.close()
    ex = OnDask(client)
    assert list(ex.map_ordered(dict, JOBS, **SHARED)) == WANT
    assert list(run_ordered(ex, dict, JOBS, **SHARED)) == WANT


def test_map_ordered_raises_the_task_error_in_order_and_stops(client):
    jobs = [(str(i),) for i in range(4)] + [("four",)] + [(str(i),) for i in range(5, 30)]
    for ex in (InProcess(1), OnDask(client)):
        got = []
        with pytest.raises(ValueError, match="four"):
            for r in ex.map_ordered(int, jobs, base=10):
                got.append(r)
        assert got == [0, 1, 2, 3]


def test_run_ordered_refuses_a_raw_client(client):
    with pytest.raises(TypeError, match="executor_for"):
        run_ordered(client, dict, JOBS, offset=0)


def test_a_client_is_reduced_to_its_address(client):
    address = client.scheduler.address
    assert plain_scheduler(client) == address and plain_scheduler("local") == "local"
    assert plain_scheduler(None) is None
    ref = SchedulerAddress("tls://10.0.0.1:8786", None)
    assert pickle.loads(pickle.dumps(ref)) == ref and str(ref) == "tls://10.0.0.1:8786"
    with executor_for(client) as ex:
        assert ex.scheduler == address and ex.kind == "dask"
    with executor_for(None) as ex:
        assert ex.scheduler == "in-process"


def test_obpm_with_a_client_pickles_clones_and_fits_in_gridsearch(client):
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    from distlearn import OBPM

    address = client.scheduler.address
    est = OBPM(n_estimators=6, epochs=1, tau=0.3, random_state=0, scheduler=client)
    back = pickle.loads(pickle.dumps(est))  # was: cannot pickle '_asyncio.Task'
    assert back.scheduler == address and est.scheduler is client
    assert clone(est).scheduler == address and est.get_params()["scheduler"] == address

    d = make_obpm_artificial(300, 100, n_features=10, random_state=1)
    search = GridSearchCV(est, {"tau": [0.2, 0.5]}, cv=2).fit(d.X_train, d.y_train)
    assert set(search.cv_results_["param_tau"]) == {0.2, 0.5}
    assert search.best_estimator_.scheduler == address
    # the same fit in this process: the same weights, bit for bit
    best = search.best_params_["tau"]
    here = OBPM(n_estimators=6, epochs=1, tau=best, random_state=0).fit(d.X_train, d.y_train)
    np.testing.assert_array_equal(search.best_estimator_.coef_, here.coef_)
    fitted = pickle.loads(pickle.dumps(search.best_estimator_))
    np.testing.assert_array_equal(fitted.predict(d.X_test), here.predict(d.X_test))


def test_none_is_this_process_and_local_n_is_checked():
    with pytest.raises(ValueError, match="None means this process"):
        with get_client(None):
            pass
    for bad in ("local:0", "local:x"):
        with pytest.raises(ValueError, match="positive number of workers"):
            with executor_for(bad):
                pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_paths_through_the_executor_keep_the_one_line_deadline(tmp_path, monkeypatch, capsys):
    """convert and predict now reach a cluster only through executor_for: a scheduler that is not
    there is one line naming its address, within the connect deadline."""
    from distlearn.cli import main
    from distlearn.training import predict

    monkeypatch.setenv("DISTLEARN_CONNECT_TIMEOUT", "1")
    dead = f"tcp://127.0.0.1:{_free_port()}"
    p = tmp_path / "a.svm"
    p.write_bytes(b"1 1:1\n-1 2:1\n")
    assert main(["convert", str(p), str(tmp_path / "a.zarr"), "--scheduler", dead]) == 2
    err = capsys.readouterr().err.strip()
    assert dead in err and "\n" not in err and err.startswith("distlearn convert: error:")
    assert not (tmp_path / "a.zarr").exists()

    from distlearn import Perceptron
    from distlearn.data.readers import convert
    from distlearn.model import save_model

    store = convert(p, tmp_path / "s.zarr").path
    model = tmp_path / "m.npz"
    save_model(Perceptron(random_state=0).fit(np.eye(2), [1, -1]), model)
    with pytest.raises(ValueError, match="reads the blocks of a store; an array is not one"):
        predict(str(model), np.eye(2), scheduler=dead)
    with pytest.raises(ConnectionError) as e:
        predict(str(model), str(store), scheduler=dead)
    assert dead in str(e.value) and "\n" not in str(e.value)
