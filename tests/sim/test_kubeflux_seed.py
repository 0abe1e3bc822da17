"""The seed's demos (sprint 3 of the KubeFlux informer project), run through the real simulator.

One worker with 16 cores, pods of 8 cores each, scheduled by kubeflux. A Fluence without an informer runs two
pods and then waits forever; kubeflux releases each pod's cores when it ends, however it ends.
"""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob


def worker() -> list[Node]:
    return [Node("kind-worker", allocatable={CPU: 16_000, MEMORY: 64 * 2**30})]


def pi_pod(name: str, submit: float, run: float, *, exit_code: int = 0, scheduler: str = "") -> WorkloadJob:
    template = PodTemplate(name, {CPU: 8_000}, run, exit_code=exit_code, scheduler_name=scheduler)
    return WorkloadJob(name, submit, JobKind.POD, name, pods=[template])


def run(jobs: list[WorkloadJob], *, with_default: bool = False) -> Simulation:
    kubeflux = KubefluxScheduler()
    schedulers: dict[str, object] = {"kubeflux": kubeflux}
    if with_default:
        schedulers["default-scheduler"] = KubeDefaultScheduler()
    sim = Simulation(
        Workload("seed-000", jobs),
        worker(),
        schedulers,  # type: ignore[arg-type]
        primary="kubeflux",
        options=SimulationOptions(keep_events=True),
    )
    sim.run()
    return sim


def intervals(sim: Simulation, prefix: str) -> list[tuple[float, float]]:
    spans = []
    for job in sim.cluster.jobs:
        for sp in job.pods:
            if sp.pod.name.startswith(prefix):
                assert sp.running_at is not None and sp.finished_at is not None, sp.pod.key
                spans.append((sp.running_at, sp.finished_at))
    return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    points = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, delta in points:
        running += delta
        peak = max(peak, running)
    return peak


def test_four_pods_that_succeed_then_four_more_all_run_two_at_a_time() -> None:
    jobs = [pi_pod(f"pi-{i}", 0.0, 60.0) for i in range(4)] + [pi_pod(f"pi-{i}", 5.0, 60.0) for i in range(4, 8)]
    sim = run(jobs)
    spans = intervals(sim, "pi-")
    assert len(spans) == 8
    assert most_at_once(spans) == 2
    assert sorted(start for start, _ in spans) == [0.0, 0.0, 60.0, 60.0, 120.0, 120.0, 180.0, 180.0]


def test_pods_that_segfault_release_their_cores_and_the_queue_continues() -> None:
    jobs = [pi_pod(f"pi-segfault-{i}", 0.0, 30.0, exit_code=139) for i in range(4)]
    jobs += [pi_pod(f"pi-{i}", 1.0, 60.0) for i in range(4)]
    sim = run(jobs)
    failed = [sp for job in sim.cluster.jobs for sp in job.pods if sp.pod.name.startswith("pi-segfault")]
    assert all(sp.exit_code == 139 and sp.pod.phase.value == "Failed" for sp in failed)
    spans = intervals(sim, "pi-")
    assert len(spans) == 8
    assert most_at_once(spans) == 2
    assert max(start for start, _ in spans) == 120.0  # 2 x 30 s of segfaults, then 60 s, then the last two


def test_a_pod_of_another_scheduler_takes_cores_that_kubeflux_does_not_place_onto() -> None:
    other = pi_pod("web", 0.0, 300.0, scheduler="default-scheduler")
    jobs = [other] + [pi_pod(f"pi-{i}", 1.0, 60.0) for i in range(3)]
    sim = run(jobs, with_default=True)
    assert sim.cluster.pod("default/web").pod.node_name == "kind-worker"
    spans = intervals(sim, "pi-")
    assert sorted(start for start, _ in spans) == [1.0, 61.0, 121.0]  # one at a time beside the other pod
    assert not [e for e in sim.cluster.event_counts if e.startswith("OutOf")]  # the kubelet never refused one


def test_a_node_that_goes_down_loses_its_pods_and_kubeflux_carries_on_elsewhere() -> None:
    from kubeflux.sim.cluster import NodeOutage

    nodes = [Node(f"w{i}", allocatable={CPU: 16_000, MEMORY: 64 * 2**30}) for i in range(2)]
    jobs = [pi_pod(f"pi-{i}", 0.0, 100.0) for i in range(4)] + [pi_pod("late", 50.0, 100.0)]
    kubeflux = KubefluxScheduler()
    sim = Simulation(
        Workload("outage", jobs),
        nodes,
        {"kubeflux": kubeflux},
        options=SimulationOptions(outages=[NodeOutage("w0", 20.0, 300.0)]),
    )
    sim.run()
    lost = [sp for job in sim.cluster.jobs for sp in job.pods if sp.reason == "NodeLost"]
    assert {sp.pod.name for sp in lost} == {"pi-0", "pi-1"}  # lonode filled w0 first
    late = sim.cluster.pod("default/late")
    assert late.pod.node_name == "w1" and late.bound_at == 100.0  # w0 is down; w1 frees at 100


def test_kubeflux_logs_what_fluence_logs() -> None:
    kubeflux = KubefluxScheduler()
    sim = Simulation(Workload("log", [pi_pod("pi-0", 0.0, 10.0)]), worker(), {"kubeflux": kubeflux})
    sim.run()
    log = list(kubeflux.log)
    assert log[:5] == [
        "Number nodes  1",
        "Node  kind-worker  flux cpu  16",
        f"Node  kind-worker  total mem  {64 * 2**30}",
        "Can request at most  16  exclusive cpu",
        'Match policy:  {"matcher_policy": "lonode"}',
    ]
    assert log[5].startswith("Match allocate default/pi-0: jobid 1 node kind-worker cores 8 (")
    assert log[6] == "Cancel flux job: 1 for pod default/pi-0 (Succeeded)"
