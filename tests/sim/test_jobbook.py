"""The job book on its own: what it creates, emits and counts, with no cluster running the pods."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.interface import EventKind
from kubeflux.scheduler.objects import CPU, Node, Pod, PodGroup
from kubeflux.sim.clock import EventLoop, Priority
from kubeflux.sim.jobbook import JobBook
from kubeflux.sim.jobs import timing_of
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.resourceids import ResourceIds
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob


def make_book(loop: EventLoop | None = None) -> tuple[JobBook, list[tuple[EventKind, str]]]:
    emitted: list[tuple[EventKind, str]] = []

    def emit(kind: EventKind, obj: Pod | Node | PodGroup) -> None:
        emitted.append((kind, f"{type(obj).__name__} {obj.name}"))

    book = JobBook(
        EventLoop() if loop is None else loop,
        emit,
        ResourceIds(),
        Lifecycle(),
        primary_scheduler="test",
        workload_name="w",
        couple=True,
    )
    return book, emitted


def gang(name: str, size: int, min_member: int = 0) -> WorkloadJob:
    pods = [PodTemplate(name=f"{name}-{i}", requests={CPU: 1000}, run_time=10.0) for i in range(size)]
    return WorkloadJob(id=name, submit_time=0.0, kind=JobKind.POD_GROUP, name=name, pods=pods, min_member=min_member)


def test_a_submitted_gang_is_its_group_then_its_pods_each_emitted_and_coupled() -> None:
    book, emitted = make_book()
    job = book.submit(gang("mpi", 2, min_member=2))
    assert emitted == [
        (EventKind.ADDED, "PodGroup mpi"),
        (EventKind.ADDED, "Pod mpi-0"),
        (EventKind.ADDED, "Pod mpi-1"),
    ]
    assert list(book.pods) == ["default/mpi-0", "default/mpi-1"] and list(book.groups) == ["default/mpi"]
    assert job.coupled and job.start_quorum == 2 and job.active == 2
    assert [sp.pod.scheduler_name for sp in job.pods] == ["test", "test"]  # the template names none
    assert book.pending_jobs == 1 and book.queue_series == [(0.0, 1)]


def test_the_queue_counts_a_job_until_its_first_bind_rejection_or_end() -> None:
    loop = EventLoop()
    book, _ = make_book(loop)
    bound, rejected, ended = (book.submit(gang(name, 1)) for name in ("bound", "rejected", "ended"))
    assert book.queue_series == [(0.0, 3)]

    def at_5(_: object) -> None:
        book.first_bind(bound, loop.now)
        book.reject(rejected, "never fits")
        book.reject(rejected, "never fits")  # once

    def at_7(_: object) -> None:
        book.finish_job(ended)
        book.finish_job(bound)  # it left the queue at its bind

    loop.schedule(5.0, Priority.STAGE, at_5)
    loop.schedule(7.0, Priority.STAGE, at_7)
    loop.run()
    assert book.queue_series == [(0.0, 3), (5.0, 1), (7.0, 0)]
    assert (bound.first_bind, rejected.rejected_reason, ended.finish) == (5.0, "never fits", 7.0)


def test_a_pod_name_taken_rejects_its_job_and_names_the_problem() -> None:
    book, _ = make_book()
    book.submit(gang("a", 1))
    clash = book.submit(
        WorkloadJob(id="b", submit_time=0.0, kind=JobKind.POD, name="b", pods=[PodTemplate("a-0", {CPU: 1000}, 1.0)])
    )
    assert book.problems == ["job b: pod default/a-0 already exists"]
    assert clash.rejected_reason == book.problems[0] and book.pending_jobs == 1


def test_a_job_and_pods_made_elsewhere_are_adopted_unbound() -> None:
    book, emitted = make_book()
    wjob = gang("served", 2)
    job = book.add_job(wjob, quorum=2)
    template = wjob.pods[0]
    pod = Pod("default", "served-0", uid="api-uid", requests=dict(template.requests))
    sp = book.adopt_pod(job, pod, timing_of(template, wjob, Lifecycle(), {}, "test"))
    assert book.pod("default/served-0") is sp and sp.bound_at is None and sp.pod.uid == "api-uid"
    assert job.coupled and emitted == [(EventKind.ADDED, "Pod served-0")]
    with pytest.raises(ValueError, match="already exists"):
        book.adopt_pod(job, pod, sp.timing)
    with pytest.raises(KeyError, match="nowhere"):
        book.pod("default/nowhere")
