"""The Job controller drives any cluster through the public operations of :class:`JobHost`, as a controller of a
real cluster would: it creates pods, deletes them, ends the Job and records Events, and reaches into nothing else."""

from __future__ import annotations

from kubeflux.sim.clock import EventLoop
from kubeflux.sim.jobcontroller import JobController
from kubeflux.sim.jobs import SimJob, timing_of
from kubeflux.sim.pods import Lifecycle, TemplateTiming
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob


class RecordingHost:
    """A cluster stand-in that records what the controller asks of it."""

    def __init__(self) -> None:
        self.loop = EventLoop()
        self.calls: list[str] = []
        self.live: dict[str, SimJob] = {}

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str) -> None:
        self.calls.append(f"create {name}")
        job.created += 1
        job.active += 1
        self.live[f"default/{name}"] = job

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        self.calls.append(f"delete {key} ({reason})")

    def finish_job(self, job: SimJob) -> None:
        self.calls.append(f"finish {job.wjob.name}")
        job.finish = self.loop.now

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        self.calls.append(f"event {reason} {obj}")


def test_a_job_past_its_deadline_is_ended_through_the_hosts_public_operations() -> None:
    template = PodTemplate(name="work", requests={"cpu": 1000}, run_time=None)
    wjob = WorkloadJob(
        "1", 0.0, JobKind.JOB, "train", pods=[template], completions=3, parallelism=2, active_deadline_seconds=60
    )
    job = SimJob(wjob, 0, 0.0)
    job.timings.append(timing_of(template, wjob, Lifecycle(), {}, "kubeflux"))
    host = RecordingHost()
    controller = JobController(host)
    controller.start(job)
    assert host.calls == ["create train-0", "create train-1"]
    host.loop.step()  # the deadline
    assert host.calls[2:] == ["finish train", "event DeadlineExceeded default/train"]
    assert job.failed_reason == "DeadlineExceeded"
