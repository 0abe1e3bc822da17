import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from kubeflux.apiobjects.podfailure import PodFailurePolicy, PodFailureRule
from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL, Node
from kubeflux.sim.workloads import (
    JobKind,
    Workload,
    WorkloadError,
    WorkloadFormat,
    WorkloadJob,
    detect_format,
    load_workload,
)
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import _mapped, map_to_cluster, pod_sizes
from kubeflux.sim.workloads.model import PodTemplate, WrapperRef
from tests.shared import SHARED

REPO = Path(__file__).resolve().parents[2]
TRACES = SHARED / "traces"
EXAMPLES = REPO / "examples" / "workloads"


def trace(job_id: str, processors: int, run_time: float = 100.0, exit_code: int = 0) -> WorkloadJob:
    return WorkloadJob(
        id=job_id,
        submit_time=0.0,
        kind=JobKind.TRACE,
        name=f"job-{job_id}",
        requested_processors=processors,
        requested_time=300.0,
        run_time=run_time,
        exit_code=exit_code,
    )


@pytest.mark.parametrize(
    ("processors", "cores", "sizes"),
    [(10, 4, [4, 4, 2]), (3, 4, [3]), (8, 4, [4, 4]), (1, 64, [1]), (0, 4, [])],
    ids=["remainder-last", "smaller-than-node", "exact-multiple", "one", "none"],
)
def test_pod_sizes(processors: int, cores: int, sizes: list[int]) -> None:
    assert pod_sizes(processors, cores) == sizes


def test_a_multi_node_job_becomes_one_gang_of_pods() -> None:
    workload = Workload("w", [trace("1", 10, exit_code=1), trace("2", 3)])
    mapped = map_to_cluster(workload, uniform_cluster(4, 4))
    big, small = mapped.jobs
    assert [p.requests for p in big.pods] == [{CPU: 4000}, {CPU: 4000}, {CPU: 2000}]
    assert [p.name for p in big.pods] == ["job-1-0", "job-1-1", "job-1-2"]
    assert big.min_member == 3
    assert all(p.labels == {POD_GROUP_LABEL: "job-1"} for p in big.pods)
    assert all(p.run_time == 100.0 and p.exit_code == 1 for p in big.pods)
    assert big.requested_time == 300.0
    assert [p.name for p in small.pods] == ["job-2"] and small.min_member == 0 and small.pods[0].labels == {}
    assert workload.jobs[0].pods == []  # the input is not modified


def test_jobs_larger_than_the_cluster_are_rejected_with_the_reason() -> None:
    nodes = uniform_cluster(4, 16)
    nodes[3].unschedulable = True  # cordoned cores do not count
    mapped = map_to_cluster(Workload("w", [trace("1", 64), trace("2", 48)]), nodes)
    assert mapped.jobs[0].rejected == "asks 64 processors, the cluster has 48 schedulable cores"
    assert mapped.jobs[0].pods == []
    assert not mapped.jobs[1].rejected and len(mapped.jobs[1].pods) == 3


def test_heterogeneous_nodes_use_the_largest_node_and_check_every_pod_fits() -> None:
    nodes = [Node("big", allocatable={CPU: 8000}), Node("small", allocatable={CPU: 2500})]
    mapped = map_to_cluster(Workload("w", [trace("1", 10), trace("2", 8)]), nodes)
    assert mapped.jobs[0].rejected == ""  # pods of 8 and 2 cores: each fits somewhere
    assert [p.requests[CPU] for p in mapped.jobs[0].pods] == [8000, 2000]
    assert [p.requests[CPU] for p in mapped.jobs[1].pods] == [8000]


def test_already_rejected_and_kubernetes_jobs_are_left_alone() -> None:
    rejected = trace("1", 4)
    rejected.rejected = "unknown run time (SWF field 4 is -1)"
    pod_job = WorkloadJob(id="default/p", submit_time=0.0, kind=JobKind.POD, name="p")
    mapped = map_to_cluster(Workload("w", [rejected, pod_job]), uniform_cluster(1, 4))
    assert mapped.jobs[0].rejected == "unknown run time (SWF field 4 is -1)" and mapped.jobs[0].pods == []
    assert mapped.jobs[1] is pod_job


def test_no_cluster_rejects_every_trace_job() -> None:
    mapped = map_to_cluster(Workload("w", [trace("1", 1)]), [])
    assert mapped.jobs[0].rejected == "asks 1 processors, the cluster has 0 schedulable cores"


def test_hpc2n_on_its_own_machine_size() -> None:
    workload = load_workload(TRACES / "HPC2N-2002-2.2.first3170.swf")
    mapped = map_to_cluster(workload, uniform_cluster(120, 2))  # Seth: 120 dual-processor nodes
    runnable = [job for job in mapped.jobs if not job.rejected]
    assert len(runnable) == 3170 - 25
    assert all(sum(p.requests[CPU] for p in job.pods) == 1000 * job.requested_processors for job in runnable)


# --- load_workload: format detection ---------------------------------------------------------------------------


def test_formats_are_detected_from_content() -> None:
    assert detect_format(TRACES / "HPC2N-2002-2.2.first3170.swf") is WorkloadFormat.SWF
    assert detect_format(TRACES / "LCG-2005-1.swf.gz") is WorkloadFormat.SWF
    assert detect_format(TRACES / "KTH-SP2-1996-2.1-cln.first1000.batsim.json") is WorkloadFormat.BATSIM
    assert detect_format(EXAMPLES / "mixed-jobs.yaml") is WorkloadFormat.KUBERNETES
    assert len(load_workload(EXAMPLES / "small.swf").jobs) == 10
    assert len(load_workload(TRACES / "KTH-SP2-1996-2.1-cln.first1000.batsim.json").jobs) == 1000
    assert load_workload(EXAMPLES / "mixed-jobs.yaml").jobs[0].kind is JobKind.JOB


def test_headerless_swf_misleading_names_and_gzip(tmp_path: Path) -> None:
    swf = tmp_path / "jobs.txt"
    swf.write_text("1 0 -1 50 2 -1 -1 2 100 -1 1 1 1 -1 1 1 -1 -1\n")
    assert load_workload(swf).jobs[0].run_time == 50
    packed = tmp_path / "workload.data"
    with gzip.open(packed, "wt") as stream:
        stream.write("1 0 -1 50 2 -1 -1 2 100 -1 1 1 1 -1 1 1 -1 -1\n")
    assert detect_format(packed) is WorkloadFormat.SWF
    batsim = tmp_path / "w.yaml"  # JSON in a .yaml file is still Batsim
    batsim.write_text(json.dumps({"jobs": [], "nb_res": 2, "profiles": {}}))
    assert detect_format(batsim) is WorkloadFormat.BATSIM


def test_unknown_format_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list: eggs, milk\n")
    with pytest.raises(WorkloadError, match=r"notes\.txt: unknown workload format: expected SWF"):
        load_workload(notes)
    with pytest.raises(WorkloadError, match=r"missing\.swf: no such file"):
        load_workload(tmp_path / "missing.swf")


def test_a_mapped_job_copies_every_field_but_its_pods_gang_and_verdict() -> None:
    """``_mapped`` is a faster ``dataclasses.replace`` (it copies the fields by position): every field set apart from
    its default, so one it dropped or shifted fails here."""
    job = WorkloadJob(
        id="7",
        submit_time=1.5,
        kind=JobKind.POD,
        name="n",
        namespace="ns",
        pods=[],
        min_member=3,
        schedule_timeout_seconds=9.0,
        completions=4,
        parallelism=2,
        indexed=True,
        backoff_limit=1,
        requested_processors=8,
        requested_time=60.0,
        run_time=50.0,
        rejected="no",
        source="f.swf:3",
        exit_code=2,
        active_deadline_seconds=70.0,
        pod_failure_policy=PodFailurePolicy((PodFailureRule("Ignore", conditions=(("DisruptionTarget", "True"),)),)),
        queue_name="q",
        app_wrapper=WrapperRef("ns/aw", 0, 1),
        user="u",
        profile="p",
    )
    defaults = WorkloadJob(id="", submit_time=0.0, kind=JobKind.TRACE, name="")
    assert all(getattr(job, f.name) != getattr(defaults, f.name) for f in dataclasses.fields(job) if f.name != "pods")
    pods = [PodTemplate("p", {CPU: 1000}, 1.0)]
    assert _mapped(job, pods, 1, "") == dataclasses.replace(job, pods=pods, min_member=1, rejected="")
