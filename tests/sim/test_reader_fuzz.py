"""A fuzz test over every reader of user files: SWF, Batsim JSON, Kubernetes manifests, cluster files and
``serve``'s configuration. Whatever the input, a reader returns or raises its own error naming the file; it never
ends in a traceback, never keeps a time that is not finite or beyond the stated limit, and never allocates beyond
a bound (the peak traced by :mod:`tracemalloc` for one small file stays under :data:`PEAK_BYTES`).

Examples are bounded (small files, a fixed number of examples, derandomized) and no deadline applies: the test
does not depend on the machine's speed."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.kube.config import ConfigError, load_config, parse_config
from kubeflux.sim.workloads import WorkloadError, load_workload
from kubeflux.sim.workloads.batsim import read_batsim
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.limits import MAX_SECONDS, pod_count
from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.model import Workload
from kubeflux.sim.workloads.platform import header_platform
from kubeflux.sim.workloads.swf import read_swf

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    database=None,
)
PEAK_BYTES = 64 * 2**20
"""The most one reader may allocate at once for one of these files (each well under 10 KB)."""

HOSTILE_NUMBERS = st.sampled_from(
    ["1e400", "-1e400", "nan", "inf", "-inf", "1e23", "1e999999999", "9" * 500, "-1", "0", "1", "3.5", "1e-400", "x"]
)
NUMBER_TEXT = st.one_of(
    HOSTILE_NUMBERS,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
HOSTILE_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    HOSTILE_NUMBERS,
    st.sampled_from(["1e999999999", "9" * 400 + "h", "-5s", "1m30s", "500Gi", "1E18", "0.5", "", "Never", "Indexed"]),
    st.text(max_size=20),
)
JSONISH: st.SearchStrategy[Any] = st.recursive(
    HOSTILE_VALUES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@contextmanager
def bounded_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"peak {peak:,} bytes"


def check_workload(workload: Workload) -> None:
    """What every workload a reader returns must satisfy, however hostile its file."""
    for job in workload.jobs:
        assert math.isfinite(job.submit_time) and 0 <= job.submit_time <= MAX_SECONDS, job
        for time in (job.run_time, *(pod.run_time for pod in job.pods)):
            assert time is None or (math.isfinite(time) and time <= MAX_SECONDS), job
        assert job.completions <= 2**31 - 1
    assert pod_count(workload, 4, 16) >= 0
    platform = header_platform(workload, "f")
    assert platform is None or platform.nodes > 0
    assert workload.skipped <= len(workload.problems)


def read_or_refuse(read: Callable[[Path], Any], path: Path, error: type[Exception] = WorkloadError) -> Any:
    with bounded_memory():
        try:
            return read(path)
        except error as exc:
            assert str(exc)
            return None


@FUZZ
@given(
    header=st.lists(
        st.sampled_from(["MaxNodes", "MaxProcs", "Version", "Note"]).flatmap(
            lambda key: NUMBER_TEXT.map(lambda value: f"; {key}: {value}")
        ),
        max_size=3,
    ),
    lines=st.lists(st.lists(NUMBER_TEXT, min_size=16, max_size=19), max_size=8),
)
def test_swf(tmp_path_factory: Any, header: list[str], lines: list[list[str]]) -> None:
    path = tmp_path_factory.mktemp("swf") / "f.swf"
    path.write_text("\n".join(header + [" ".join(fields) for fields in lines]) + "\n")
    workload = read_or_refuse(read_swf, path)
    assert workload is not None
    check_workload(workload)
    assert len(workload.jobs) + workload.skipped == len(lines)


PROFILE = st.fixed_dictionaries(
    {"type": st.sampled_from(["delay", "parallel_homogeneous", "parallel_homogeneous_total", "parallel", "smpi", 3])},
    optional={"delay": HOSTILE_VALUES, "cpu": JSONISH, "ret": HOSTILE_VALUES},
)
BATSIM_JOB = st.fixed_dictionaries(
    {},
    optional={
        "id": HOSTILE_VALUES,
        "subtime": HOSTILE_VALUES,
        "res": HOSTILE_VALUES,
        "walltime": HOSTILE_VALUES,
        "profile": st.sampled_from(["p0", "p1", "missing"]),
    },
)


@FUZZ
@given(
    nb_res=HOSTILE_VALUES,
    jobs=st.lists(st.one_of(BATSIM_JOB, JSONISH), max_size=6),
    profiles=st.dictionaries(st.sampled_from(["p0", "p1"]), st.one_of(PROFILE, JSONISH), max_size=2),
)
def test_batsim(tmp_path_factory: Any, nb_res: Any, jobs: list[Any], profiles: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("batsim") / "f.json"
    text = json.dumps({"nb_res": nb_res, "jobs": jobs, "profiles": profiles})  # NaN and Infinity, as Python writes
    path.write_text(text)
    workload = read_or_refuse(read_batsim, path)
    if workload is not None:
        check_workload(workload)


def metadata(extra: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {"name": st.sampled_from(["a", "b", "g"])},
        optional={
            "namespace": st.sampled_from(["default", "x"]),
            "labels": st.dictionaries(
                st.sampled_from(["scheduling.x-k8s.io/pod-group", "app"]), st.sampled_from(["g", "a"]), max_size=2
            ),
            "annotations": st.dictionaries(
                st.sampled_from(
                    [
                        "pod-complete.stage.kwok.x-k8s.io/delay",
                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay",
                        "sim.kubeflux.io/submit-time",
                        "sim.kubeflux.io/exit-code",
                    ]
                ),
                extra,
                max_size=3,
            ),
        },
    )


CONTAINERS = st.lists(
    st.fixed_dictionaries(
        {"name": st.just("c"), "image": st.just("busybox")},
        optional={
            "resources": st.fixed_dictionaries(
                {
                    "requests": st.dictionaries(
                        st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), HOSTILE_VALUES, max_size=2
                    )
                }
            )
        },
    ),
    min_size=0,
    max_size=2,
)
POD_SPEC = st.fixed_dictionaries(
    {"containers": CONTAINERS}, optional={"restartPolicy": HOSTILE_VALUES, "priority": HOSTILE_VALUES}
)
MANIFEST = st.one_of(
    st.fixed_dictionaries(
        {"apiVersion": st.just("v1"), "kind": st.just("Pod"), "metadata": metadata(HOSTILE_VALUES), "spec": POD_SPEC}
    ),
    st.fixed_dictionaries(
        {
            "apiVersion": st.just("batch/v1"),
            "kind": st.just("Job"),
            "metadata": metadata(HOSTILE_VALUES),
            "spec": st.fixed_dictionaries(
                {"template": st.fixed_dictionaries({"metadata": metadata(HOSTILE_VALUES), "spec": POD_SPEC})},
                optional={
                    "completions": HOSTILE_VALUES,
                    "parallelism": HOSTILE_VALUES,
                    "backoffLimit": HOSTILE_VALUES,
                    "activeDeadlineSeconds": HOSTILE_VALUES,
                    "completionMode": HOSTILE_VALUES,
                },
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["scheduling.x-k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2"]),
            "kind": st.just("PodGroup"),
            "metadata": metadata(HOSTILE_VALUES),
            "spec": st.dictionaries(
                st.sampled_from(["minMember", "scheduleTimeoutSeconds", "schedulingPolicy"]), JSONISH, max_size=2
            ),
        }
    ),
    JSONISH,
)


def dump(documents: list[Any]) -> str:
    return yaml.safe_dump_all(documents, allow_unicode=True)


@FUZZ
@given(documents=st.lists(MANIFEST, max_size=5))
def test_manifests(tmp_path_factory: Any, documents: list[Any]) -> None:
    path = tmp_path_factory.mktemp("yaml") / "f.yaml"
    path.write_text(dump(documents))
    workload = read_or_refuse(read_manifests, path)
    if workload is not None:
        check_workload(workload)


@FUZZ
@given(raw=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_any_bytes_as_a_workload(tmp_path_factory: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("raw") / "f"
    path.write_bytes(raw)
    workload = read_or_refuse(load_workload, path)
    if workload is not None:
        check_workload(workload)


NODE = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Node"), "metadata": metadata(HOSTILE_VALUES)},
    optional={
        "status": st.fixed_dictionaries(
            {},
            optional={
                "allocatable": st.dictionaries(
                    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), HOSTILE_VALUES, max_size=3
                ),
                "capacity": st.dictionaries(st.sampled_from(["cpu", "memory"]), HOSTILE_VALUES, max_size=2),
                "conditions": JSONISH,
            },
        ),
        "spec": st.dictionaries(st.sampled_from(["unschedulable", "taints"]), JSONISH, max_size=2),
    },
)


@FUZZ
@given(documents=st.lists(st.one_of(NODE, JSONISH), max_size=4))
def test_cluster_files(tmp_path_factory: Any, documents: list[Any]) -> None:
    path = tmp_path_factory.mktemp("cluster") / "nodes.yaml"
    path.write_text(dump(documents))
    nodes = read_or_refuse(read_cluster, path)
    assert (
        nodes is None
        or len(nodes) <= len(documents)
        or any(isinstance(d, dict) and d.get("kind") == "List" for d in documents)
    )


SERVE_KEYS = st.sampled_from(
    ["schedulers", "nodes", "watch", "binding", "leaderElection", "operations", "namespaces", "name", "queueDepth"]
)
SCHEDULER = st.dictionaries(
    st.sampled_from(
        [
            "name",
            "matchPolicy",
            "queuePolicy",
            "queueDepth",
            "sharing",
            "cappedFraction",
            "groupBackoffSeconds",
            "maxBackoffSeconds",
            "x",
        ]
    ),
    HOSTILE_VALUES,
    max_size=4,
)


@FUZZ
@given(
    data=st.one_of(
        st.dictionaries(SERVE_KEYS, st.one_of(JSONISH, st.lists(SCHEDULER, max_size=2)), max_size=4), JSONISH
    )
)
def test_serve_config(data: Any) -> None:
    with bounded_memory():
        try:
            parse_config(data, "serve.yaml")
        except ConfigError as exc:
            assert str(exc).startswith("serve.yaml")


@FUZZ
@given(raw=st.binary(max_size=300))
def test_serve_config_file(tmp_path_factory: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("serve") / "serve.yaml"
    path.write_bytes(raw)
    read_or_refuse(load_config, path, ConfigError)
