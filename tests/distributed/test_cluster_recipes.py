"""The real-cluster recipes in cluster/: SLURM/PBS (dask-jobqueue), Kubernetes (the Dask operator), the image.

No batch system and no Kubernetes here: the SLURM/PBS clusters are built from
cluster/jobqueue.yaml (their scheduler listens on 127.0.0.1) and their job
scripts are read, never submitted; the Kubernetes manifests are validated
against the CustomResourceDefinitions shipped inside the installed
dask-kubernetes package; the Dockerfile is read as text.
"""

from __future__ import annotations

import copy
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import distlearn
from distlearn.distributed.cluster import (
    MissingExtraError,
    get_client,
    is_jobqueue_scheduler,
    jobqueue_workers,
    load_jobqueue_config,
    make_jobqueue_cluster,
    parse_jobqueue_scheduler,
)
from distlearn.distributed.executor import executor_for

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
JOBQUEUE_YAML = CLUSTER / "jobqueue.yaml"
K8S = CLUSTER / "kubernetes"
IMAGE = f"registry.example.org/distlearn:{distlearn.__version__}"
#: Every test cluster's scheduler stays on loopback, with a free dashboard port.
LOOPBACK = {"scheduler_options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}}


def _section(kind: str) -> dict[str, Any]:
    return yaml.safe_load(JOBQUEUE_YAML.read_text())["jobqueue"][kind]


def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg, f"expected a one-line message, got:\n{msg}"
    return msg


# --------------------------------------------------------------------------- SLURM / PBS


def test_scheduler_strings():
    assert parse_jobqueue_scheduler("slurm:cluster/jobqueue.yaml") == ("slurm", "cluster/jobqueue.yaml", None)
    assert parse_jobqueue_scheduler("pbs:/shared/jq.yaml:8") == ("pbs", "/shared/jq.yaml", 8)
    assert is_jobqueue_scheduler("slurm:cluster/jobqueue.yaml")
    assert is_jobqueue_scheduler("pbs:x.yaml:2")
    for other in (None, "local", "in-process", "tcp://127.0.0.1:8786", "cluster/scheduler.json", "slurm"):
        assert not is_jobqueue_scheduler(other), other
    with pytest.raises(ValueError, match="no configuration file"):
        parse_jobqueue_scheduler("slurm:")
    with pytest.raises(ValueError, match=">= 1"):
        parse_jobqueue_scheduler("slurm:cluster/jobqueue.yaml:0")


def test_config_file_reads_as_cluster_keywords():
    pytest.importorskip("dask_jobqueue")
    for kind in ("slurm", "pbs"):
        conf = load_jobqueue_config(JOBQUEUE_YAML, kind)
        raw = _section(kind)
        assert conf["jobs"] == raw["jobs"] == 2
        for key in ("cores", "memory", "processes", "walltime", "job_extra_directives", "python",
                    "worker_extra_args", "local_directory"):
            assert key in raw, f"cluster/jobqueue.yaml {kind}: no {key}"
            assert conf[key] == raw[key]
    assert "interface" in JOBQUEUE_YAML.read_text()  # documented (commented out: sites differ)


def _build(scheduler: str) -> tuple[Any, int, Any]:
    cluster, jobs, wait = make_jobqueue_cluster(scheduler, **copy.deepcopy(LOOPBACK))
    try:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:"), cluster.scheduler_address
        assert not cluster.worker_spec, "no job may be submitted by building the cluster"
        return cluster, jobs, wait
    except BaseException:
        cluster.close()
        raise


def _worker_command(script: str, section: dict[str, Any], address: str) -> str:
    lines = [ln for ln in script.splitlines() if "dask_worker" in ln or "dask worker" in ln]
    assert len(lines) == 1, script
    cmd = lines[0]
    assert cmd.startswith(f"{section['python']} -m distributed.cli.dask_worker {address} "), cmd
    per_worker_threads = section["cores"] // section["processes"]
    assert f"--nthreads {per_worker_threads}" in cmd
    assert "--memory-limit 4.00GiB" in cmd  # memory / processes = 64 GiB / 16
    assert f"--nworkers {section['processes']}" in cmd
    assert f"--local-directory {section['local_directory']}" in cmd
    assert f"--death-timeout {section['death_timeout']}" in cmd
    for arg in section["worker_extra_args"]:
        assert f" {arg}" in cmd
    for line in section["job_script_prologue"]:
        assert line in script.splitlines()
    return cmd


def test_slurm_job_script_from_the_yaml():
    pytest.importorskip("dask_jobqueue")
    s = _section("slurm")
    assert (s["cores"], s["memory"], s["processes"], s["walltime"]) == (16, "64GiB", 16, "04:00:00")
    cluster, jobs, wait = _build(f"slurm:{JOBQUEUE_YAML}")
    try:
        assert type(cluster).__name__ == "SLURMCluster"
        assert (jobs, wait) == (2, None)
        assert jobqueue_workers(cluster, jobs) == 32
        script = cluster.job_script()
        header = [ln for ln in script.splitlines() if ln.startswith("#SBATCH")]
        assert "#SBATCH --cpus-per-task=16" in header
        assert "#SBATCH --mem=64G" in header
        assert "#SBATCH -t 04:00:00" in header
        assert [f"#SBATCH {d}" for d in s["job_extra_directives"]] == header[-len(s["job_extra_directives"]):]
        assert not any(ln.startswith("#SBATCH -p") for ln in header)  # queue: null -> the site default
        _worker_command(script, s, cluster.scheduler_address)
    finally:
        cluster.close()
    cluster, jobs, _ = _build(f"slurm:{JOBQUEUE_YAML}:5")  # N after the file overrides `jobs`
    try:
        assert jobs == 5 and jobqueue_workers(cluster, jobs) == 80
    finally:
        cluster.close()


def test_pbs_job_script_from_the_yaml():
    pytest.importorskip("dask_jobqueue")
    s = _section("pbs")
    cluster, jobs, _ = _build(f"pbs:{JOBQUEUE_YAML}")
    try:
        assert type(cluster).__name__ == "PBSCluster"
        assert jobs == 2
        script = cluster.job_script()
        header = [ln for ln in script.splitlines() if ln.startswith("#PBS")]
        assert "#PBS -l select=1:ncpus=16:mem=64GB" in header
        assert "#PBS -l walltime=04:00:00" in header
        for d in s["job_extra_directives"]:
            assert f"#PBS {d}" in header
        _worker_command(script, s, cluster.scheduler_address)
    finally:
        cluster.close()


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "jq.yaml"
    p.write_text(text)
    return p


def test_config_errors_are_one_line_and_name_the_file(tmp_path):
    pytest.importorskip("dask_jobqueue")
    missing = tmp_path / "nope.yaml"
    with pytest.raises(FileNotFoundError) as e:
        load_jobqueue_config(missing, "slurm")
    assert str(missing) in _one_line(e.value) and "no such file" in str(e.value)

    bad = _write(tmp_path, "jobqueue: [slurm\n")
    with pytest.raises(ValueError) as e:
        load_jobqueue_config(bad, "slurm")
    assert str(bad) in _one_line(e.value) and "not valid YAML" in str(e.value)

    no_pbs = _write(tmp_path, "jobqueue:\n  slurm: {cores: 4, memory: 8GiB}\n")
    with pytest.raises(ValueError) as e:
        load_jobqueue_config(no_pbs, "pbs")
    assert str(no_pbs) in _one_line(e.value) and "no 'jobqueue: pbs:' mapping" in str(e.value)

    typo = _write(tmp_path, "jobqueue:\n  slurm: {cores: 4, memory: 8GiB, wall-time: '01:00:00'}\n")
    with pytest.raises(ValueError) as e:
        load_jobqueue_config(typo, "slurm")
    assert str(typo) in _one_line(e.value) and "unknown key(s) ['wall_time']" in str(e.value)

    reserved = _write(tmp_path, "jobqueue:\n  slurm: {cores: 4, memory: 8GiB, n_workers: 3}\n")
    with pytest.raises(ValueError, match=r"\['n_workers'\] are set by distlearn \(use 'jobs'"):
        load_jobqueue_config(reserved, "slurm")

    no_memory = _write(tmp_path, "jobqueue:\n  slurm: {cores: 4}\n")
    with pytest.raises(ValueError) as e:
        load_jobqueue_config(no_memory, "slurm")
    assert "needs 'memory'" in _one_line(e.value)

    for bad_value, what in (("jobs: 0", "slurm.jobs=0"), ("cores: four", "slurm.cores='four'"),
                            ("worker_extra_args: --no-dashboard", "worker_extra_args must be a list")):
        p = _write(tmp_path, f"jobqueue:\n  slurm:\n    cores: 4\n    memory: 8GiB\n    {bad_value}\n")
        with pytest.raises(ValueError) as e:
            load_jobqueue_config(p, "slurm")
        assert what in _one_line(e.value)

    lots = _write(tmp_path, "jobqueue:\n  slurm: {cores: 4, memory: lots}\n")
    with pytest.raises(ValueError) as e:
        make_jobqueue_cluster(f"slurm:{lots}", **copy.deepcopy(LOOPBACK))
    assert str(lots) in _one_line(e.value) and "slurm.memory='lots'; expected a size" in str(e.value)


def test_missing_dask_jobqueue_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # `import dask_jobqueue` raises ImportError
    with pytest.raises(MissingExtraError) as e:
        load_jobqueue_config(JOBQUEUE_YAML, "slurm")
    assert "pip install 'distlearn[cluster]'" in _one_line(e.value)
    assert isinstance(e.value, ImportError) and isinstance(e.value, ValueError)  # the CLI prints ValueErrors
    with pytest.raises(MissingExtraError, match=re.escape("pip install 'distlearn[cluster]'")):
        with get_client(f"pbs:{JOBQUEUE_YAML}"):
            pass


def test_every_scheduler_api_takes_slurm_and_pbs_strings(tmp_path, capsys):
    """get_client, executor_for (estimators, run_grid) and `distlearn train --scheduler` reach the loader."""
    from distlearn.cli import main
    from distlearn.data.store import create_dataset
    import numpy as np

    missing = tmp_path / "missing.yaml"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        with get_client(f"slurm:{missing}"):
            pass
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        with executor_for(f"pbs:{missing}:3"):
            pass
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    store = tmp_path / "s.zarr"
    create_dataset(store, X, np.where(X[:, 0] > 0, 1, -1), block_rows=32)
    code = main(["train", str(store), "--model", "obpm", "--scheduler", f"slurm:{missing}"])
    err = capsys.readouterr().err
    assert code != 0
    assert str(missing) in err and "no such file" in err and "Traceback" not in err


# --------------------------------------------------------------------------- Kubernetes


def _crd_dir() -> Path:
    pytest.importorskip("jsonschema")
    dk = pytest.importorskip("dask_kubernetes", reason="dask-kubernetes (the CRDs) is not installed")
    d = Path(dk.__file__).parent / "operator" / "deployment" / "helm" / "dask-kubernetes-operator" / "crds"
    if not (d / "daskcluster.yaml").is_file():
        pytest.skip(f"dask-kubernetes {getattr(dk, '__version__', '?')} ships no rendered CRDs at {d}")
    return d


def _crd(name: str) -> dict[str, Any]:
    crd = yaml.safe_load((_crd_dir() / f"{name}.yaml").read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    return crd


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused (what kubectl's strict field validation does)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _validator(crd: dict[str, Any], strict: bool) -> Any:
    import jsonschema

    schema = copy.deepcopy(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    if strict:
        schema = _strict(schema)
        for key in ("apiVersion", "kind"):  # every object has them; the CRD leaves them implicit
            schema["properties"].setdefault(key, {"type": "string"})
        schema["properties"].setdefault("metadata", {"type": "object"})
    return jsonschema.Draft4Validator(schema)


def _docs(name: str) -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), f"{name}: one document per kind"
    return by_kind


@pytest.mark.parametrize("name, kind", [("daskcluster", "DaskCluster"), ("daskjob", "DaskJob")])
def test_manifest_is_valid_against_the_operator_crd(name, kind):
    import jsonschema

    crd = _crd(name)
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["names"]["kind"] == kind
    doc = _docs(f"{name}.yaml")[kind]
    assert doc["apiVersion"] == f"{crd['spec']['group']}/{version['name']}" == "kubernetes.dask.org/v1"
    assert doc["metadata"]["name"]
    _validator(crd, strict=False).validate(doc)
    _validator(crd, strict=True).validate(doc)
    # The validation bites: a wrong type and a misspelt field are refused.
    spec = doc["spec"] if kind == "DaskCluster" else doc["spec"]["cluster"]["spec"]
    spec["worker"]["replicas"] = "four"
    with pytest.raises(jsonschema.ValidationError, match="'four' is not of type 'integer'"):
        _validator(crd, strict=False).validate(doc)
    spec["worker"]["replica"] = spec["worker"].pop("replicas")
    spec["worker"]["replica"] = 4
    with pytest.raises(jsonschema.ValidationError, match="replica"):
        _validator(crd, strict=True).validate(doc)


def _pods(kind: str, doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = doc["spec"] if kind == "DaskCluster" else doc["spec"]["cluster"]["spec"]
    pods = {"scheduler": cluster["scheduler"]["spec"], "worker": cluster["worker"]["spec"]}
    if kind == "DaskJob":
        pods["job"] = doc["spec"]["job"]["spec"]
    return pods


@pytest.mark.parametrize("name, kind", [("daskcluster", "DaskCluster"), ("daskjob", "DaskJob")])
def test_manifest_image_commands_and_shared_volume(name, kind):
    from distributed.cli.dask_scheduler import main as dask_scheduler
    from distributed.cli.dask_worker import main as dask_worker

    docs = _docs(f"{name}.yaml")
    pvc = docs["PersistentVolumeClaim"]
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    readme = (CLUSTER / "README.md").read_text()
    assert IMAGE in readme
    mounts = set()
    for role, pod in _pods(kind, docs[kind]).items():
        (container,) = pod["containers"]
        assert container["image"] == IMAGE, (role, container["image"])
        args = container["args"]
        if role == "worker":
            assert args[:2] == ["dask", "worker"]
            dask_worker.make_context("dask worker", list(args[2:]))  # only flags dask worker knows
            assert args[args.index("--nthreads") + 1] == "1"
        elif role == "scheduler":
            assert args[:2] == ["dask", "scheduler"]
            dask_scheduler.make_context("dask scheduler", list(args[2:]))
        else:
            assert args[:2] == ["distlearn", "train"]
            assert " ".join(args) in readme, "the README shows the job's command line"
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                  if "persistentVolumeClaim" in v}
        (mount,) = [m for m in container["volumeMounts"] if claims.get(m["name"]) == pvc["metadata"]["name"]]
        mounts.add(mount["mountPath"])
    assert mounts == {"/data"}, f"{name}: the volume must be at the same path in every pod, got {mounts}"


def test_daskjob_runs_distlearn_train_on_its_cluster_with_stores_on_the_volume():
    from distlearn.cli import build_parser

    docs = _docs("daskjob.yaml")
    job = docs["DaskJob"]
    (container,) = job["spec"]["job"]["spec"]["containers"]
    a = build_parser().parse_args(container["args"][1:])
    assert a.scheduler == "$(DASK_SCHEDULER_ADDRESS)"  # set by the operator in the job pod
    assert a.model == "obpm"
    for path in (a.store, a.test, a.checkpoint, a.save):
        assert path.startswith("/data/"), path
    selector = job["spec"]["cluster"]["spec"]["scheduler"]["service"]["selector"]
    assert selector["dask.org/cluster-name"] == job["metadata"]["name"]  # a DaskJob's cluster takes its name
    assert docs["PersistentVolumeClaim"] == _docs("daskcluster.yaml")["PersistentVolumeClaim"]
    cl = _docs("daskcluster.yaml")["DaskCluster"]
    assert cl["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == cl["metadata"]["name"]
    readme = (CLUSTER / "README.md").read_text()
    assert f"kubectl exec deploy/{cl['metadata']['name']}-scheduler -- distlearn train" in readme


# --------------------------------------------------------------------------- the image


def _dockerfile() -> list[tuple[str, str]]:
    text = (CLUSTER / "Dockerfile").read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out = []
    for ln in joined.splitlines():
        if ln.strip():
            instr, _, rest = ln.strip().partition(" ")
            out.append((instr.upper(), rest.strip()))
    return out


def test_dockerfile_installs_this_package_at_its_version():
    instrs = _dockerfile()
    assert instrs[0] == ("FROM", "python:3.11-slim")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "distlearn"
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"] == "distlearn._version.__version__"
    labels = dict(re.findall(r'(\S+)="([^"]*)"', " ".join(r for i, r in instrs if i == "LABEL")))
    assert labels["org.opencontainers.image.version"] == distlearn.__version__
    copied = [shlex.split(r) for i, r in instrs if i == "COPY"]
    sources = {s for c in copied for s in c[:-1]}
    assert {"pyproject.toml", "README.md", "LICENSE", "distlearn"} <= sources
    for s in sources:
        assert (ROOT / s).exists(), f"COPY {s}: not in the repository (build from the repository root)"
    runs = " ".join(r for i, r in instrs if i == "RUN")
    assert 'pip install -c cluster/constraints.txt ".[cluster]"' in runs
    extra = pyproject["project"]["optional-dependencies"]["cluster"]
    assert {re.split(r"[<>=]", e)[0] for e in extra} == {"dask-jobqueue", "dask-kubernetes", "s3fs", "bokeh"}
    assert ("CMD", '["distlearn", "--help"]') in instrs
    assert not any(i == "ENTRYPOINT" for i, _ in instrs)  # the manifests' args are whole command lines
    build = f"docker build -f cluster/Dockerfile -t {IMAGE} ."
    assert build in (CLUSTER / "Dockerfile").read_text() and build in (CLUSTER / "README.md").read_text()


def test_manifests_use_the_image_of_this_version():
    images = set()
    for f in sorted(K8S.glob("*.yaml")):
        images |= set(re.findall(r"image:\s*\"?([^\s\"]+)", f.read_text()))
    assert images == {IMAGE}
    assert IMAGE.rsplit(":", 1)[1] == distlearn.__version__


# --------------------------------------------------------------------------- the image's pins and warm cache

CONSTRAINTS = CLUSTER / "constraints.txt"


def _pins() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for n, raw in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)", line)
        assert m, f"{CONSTRAINTS.name}:{n}: not an exact pin NAME==VERSION: {raw!r}"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"{CONSTRAINTS.name}:{n}: {name} pinned twice"
        pins[name] = m.group(2)
    return pins


def _requirements() -> dict[str, list[Any]]:
    """pyproject.toml's requirements by group: "core" and every extra."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    return {g: [Requirement(r) for r in reqs] for g, reqs in groups.items()}


def test_every_pin_satisfies_pyproject_and_the_image_is_pinned():
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = _pins()
    reqs = _requirements()
    assert len(pins) > 20  # the closure, not only the direct dependencies
    bad = [f"{name}=={pins[canonicalize_name(r.name)]} does not satisfy {group}: {r}"
           for group, lst in reqs.items() for r in lst for name in [canonicalize_name(r.name)]
           if name in pins and not r.specifier.contains(Version(pins[name]), prereleases=True)]
    assert bad == []
    # what the image installs is pinned: the core and the cluster extra (with the dashboard's bokeh)
    needed = {canonicalize_name(r.name) for g in ("core", "cluster") for r in reqs[g]}
    assert needed - set(pins) == set(), "cluster/constraints.txt: no pin for these"
    assert {"bokeh", "matplotlib", "numba", "llvmlite", "numpy"} <= set(pins)
    # a pin that broke a requirement would be seen: the check above is not vacuous
    numba = next(r for r in reqs["core"] if r.name == "numba")
    assert not numba.specifier.contains(Version("0.1"), prereleases=True)


def test_dockerfile_installs_with_the_pins_and_warms_the_numba_cache():
    instrs = _dockerfile()
    copies = [shlex.split(r) for i, r in instrs if i == "COPY"]
    assert ["cluster/constraints.txt", "./cluster/constraints.txt"] in copies
    runs = [r for i, r in instrs if i == "RUN"]
    install = next(r for r in runs if "pip install" in r)
    assert "-c cluster/constraints.txt" in install and "import distlearn, dask_jobqueue, dask_kubernetes, bokeh, " \
        "matplotlib" in install
    # the cache directory is set for the build and every later process, filled after the install, and writable
    # by any user (numba uses a cache directory only if it can write there)
    env = " ".join(r for i, r in instrs if i == "ENV")
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", env)
    assert cache and cache.group(1).startswith("/")
    warm = next(k for k, r in enumerate(runs) if "distlearn warmup" in r)
    assert warm > runs.index(install)
    assert 'chmod -R a+rwX "$NUMBA_CACHE_DIR"' in runs[warm]
    assert "DISTLEARN_NUMBA_CACHE" not in env  # caching stays on
    from distlearn.cli import build_parser

    assert build_parser().parse_args(["warmup"]).command == "warmup"  # the command the image runs exists


def test_a_batch_queue_that_never_starts_the_jobs_ends_after_the_queue_wait(monkeypatch):
    """Every wait has a deadline: jobs that never leave the queue end the start in one line after
    $DISTLEARN_QUEUE_WAIT seconds, and the jobs are cancelled (the cluster closed)."""
    from distributed import LocalCluster

    from distlearn.distributed import cluster as C

    real = LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0")

    class Queue:  # a dask-jobqueue cluster whose jobs stay pending
        scheduler_address = real.scheduler_address
        new_spec = {"group": ["-0", "-1"]}  # two worker processes per job
        scaled: list[int] = []
        closed = False

        def scale(self, jobs):
            self.scaled.append(jobs)

        def close(self):
            Queue.closed = True

        def __getattr__(self, name):  # the rest (status, scheduler_info, ...) is the real cluster's
            return getattr(real, name)

    monkeypatch.setattr(C, "make_jobqueue_cluster", lambda scheduler, security=None: (Queue(), 3, None))
    monkeypatch.setenv(C.QUEUE_WAIT_ENV, "0.5")
    try:
        with pytest.raises(ConnectionError) as e:
            C.start_jobqueue_cluster("slurm:jq.yaml:3", quiet=True)
    finally:
        real.close()
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"0 of 6 worker(s) joined {real.scheduler_address} within 0.5 s")
    assert "slurm jobs are cancelled" in msg and "DISTLEARN_QUEUE_WAIT" in msg
    assert Queue.scaled == [3] and Queue.closed
    monkeypatch.setenv(C.QUEUE_WAIT_ENV, "never")
    with pytest.raises(ValueError, match="DISTLEARN_QUEUE_WAIT"):
        C.queue_wait()
