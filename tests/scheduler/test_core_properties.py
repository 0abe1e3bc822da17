"""Property: whatever happens in the cluster, kubeflux's books stay true to it.

Random sequences of arrivals (kubeflux's and another scheduler's pods), completions, failures, deletions, nodes
added, removed and cordoned, and scheduler restarts. After every step: no node is over-committed; the exact books
equal the cluster's pods; and the engine's graph holds, node by node, as many busy cores as a graph rebuilt from
the cluster's pods and nodes alone. And every "0/N nodes are available" message kubeflux gives a pod is the one
kube-scheduler's filters give, computed afresh from the cluster at that point of the pass.
"""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.constraints import filter_node, fit_error_message
from kubeflux.scheduler.core import REASON_RESERVED, KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod, PodPhase
from kubeflux.scheduler.translate import DURATION_ANNOTATION

ADDED, MODIFIED, DELETED = EventKind.ADDED, EventKind.MODIFIED, EventKind.DELETED

Step = tuple[str, int, int, bool]
steps = st.lists(
    st.tuples(
        st.sampled_from(
            ["ours", "ours", "ours", "other", "end", "end", "delete", "node+", "node-", "cordon", "restart"]
        ),
        st.integers(0, 30),
        st.sampled_from([250, 500, 1000, 1500, 2000, 4000]),
        st.booleans(),
    ),
    min_size=5,
    max_size=40,
)


class World:
    memory = False
    """Whether kubeflux's pods request memory too (up to nearly a node's), besides cpu."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.now = 0.0
        self.serial = 0
        self.scheduler = KubefluxScheduler()
        for _ in range(3):
            self.add_node(4)

    def tell(self, kind: EventKind, obj: Pod | Node) -> None:
        self.scheduler.observe(ClusterEvent(kind, obj), self.now)

    def add_node(self, cores: int) -> None:
        self.serial += 1
        node = Node(f"n{self.serial}", allocatable={CPU: cores * 1000, MEMORY: 2**34})
        self.nodes[node.name] = node
        self.tell(ADDED, node)

    def used(self, name: str) -> int:
        return sum(p.requests[CPU] for p in self.pods.values() if p.node_name == name and not p.phase.terminal)

    def live(self) -> list[Pod]:
        return [p for p in self.pods.values() if not p.phase.terminal]

    def apply(self, step: Step) -> None:
        what, pick, cpu, flag = step
        self.now += 5.0
        if what in ("ours", "other"):
            self.serial += 1
            annotations = {DURATION_ANNOTATION: "30"} if flag else {}
            scheduler = "kubeflux" if what == "ours" else "default-scheduler"
            pod = Pod(
                "default",
                f"p{self.serial}",
                f"u{self.serial}",
                scheduler,
                0,
                self.now,
                {CPU: cpu, MEMORY: pick * 2**29} if self.memory and what == "ours" else {CPU: cpu},
                annotations=annotations,
            )
            if what == "other":  # kube-scheduler's first fit, on the real free room
                for node in self.nodes.values():
                    if not node.unschedulable and self.used(node.name) + cpu <= node.allocatable[CPU]:
                        pod.node_name, pod.phase = node.name, PodPhase.RUNNING
                        break
            self.pods[pod.key] = pod
            self.tell(ADDED, pod)
        elif what in ("end", "delete") and self.live():
            pods = self.live()
            pod = pods[pick % len(pods)]
            if what == "end":
                pod.phase = PodPhase.FAILED if flag else PodPhase.SUCCEEDED
                self.tell(MODIFIED, pod)
            else:
                del self.pods[pod.key]
                self.tell(DELETED, pod)
        elif what == "node+":
            self.add_node(2 + pick % 4)
        elif what in ("node-", "cordon") and len(self.nodes) > 1:
            node = list(self.nodes.values())[pick % len(self.nodes)]
            if what == "cordon":
                node.unschedulable = not node.unschedulable
                self.tell(MODIFIED, node)
            else:
                del self.nodes[node.name]
                self.tell(DELETED, node)
                for pod in [p for p in self.pods.values() if p.node_name == node.name]:
                    del self.pods[pod.key]
                    self.tell(DELETED, pod)
        elif what == "restart":
            self.scheduler = self.rebuilt(with_pending=True)
        self.schedule()

    def schedule(self) -> None:
        self.bind(self.scheduler.schedule(self.now))

    def bind(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Bind):
                pod = self.pods[decision.pod]
                pod.node_name, pod.phase = decision.node, PodPhase.RUNNING
                pod.annotations = {**pod.annotations, **decision.annotations}
                self.tell(MODIFIED, pod)

    def rebuilt(self, *, with_pending: bool) -> KubefluxScheduler:
        fresh = KubefluxScheduler()
        for node in self.nodes.values():
            fresh.observe(ClusterEvent(ADDED, node), self.now)
        for pod in self.live():
            if with_pending or pod.node_name:
                fresh.observe(ClusterEvent(ADDED, pod), self.now)
        return fresh

    def check(self) -> None:
        for node in self.nodes.values():
            assert self.used(node.name) <= node.allocatable[CPU], f"{node.name} over-committed"
            assert self.scheduler.books.ledger.on(node.name).get(CPU, 0) == self.used(node.name)
        queue = self.scheduler.queue
        for job in queue.jobs.values():  # the registers a full pass visits instead of every waiting job
            holds = job.reservations or job.holds or job.left_out or job.member_reservations
            if holds or job.expected_start is not None:
                assert job in queue.reserving, f"{job.key} holds a reservation no full pass would cancel"
            if any(said[1] is not None for uid, said in job.told.items() if uid in job.pods):
                assert job in queue.starts_told, f"{job.key} was told a start no full pass would take back"
        fresh = self.rebuilt(with_pending=False)
        assert fresh.schedule(self.now) == []
        graph, again = self.scheduler.books.graph, fresh.books.graph
        if graph is None or again is None:
            return
        at = math.floor(self.now)
        for name in self.nodes:
            if graph.usable(name) and again.usable(name):
                assert graph.busy_cores(name, at) == again.busy_cores(name, at), name


@settings(max_examples=150, deadline=None)
@given(steps)
def test_the_books_and_the_graph_stay_true_to_the_cluster(sequence: list[Step]) -> None:
    world = World()
    world.schedule()
    for step in sequence:
        world.apply(step)
        world.check()


class MessageWorld(World):
    """Checks every Unschedulable message of a pass against kube-scheduler's filters run on every node, with the
    pods bound so far (the cluster's, and this pass's binds decided before the message)."""

    memory = True

    def schedule(self) -> None:
        used: dict[str, Counter[str]] = {name: Counter() for name in self.nodes}
        for pod in self.live():
            if pod.node_name in used:
                used[pod.node_name].update(pod.requests)
        decisions = self.scheduler.schedule(self.now)
        for decision in decisions:
            if isinstance(decision, Bind):
                used[decision.node].update(self.pods[decision.pod].requests)
            elif isinstance(decision, Unschedulable):
                pod = self.pods[decision.pod]
                reasons: Counter[str] = Counter()
                for node in self.nodes.values():
                    # a node the filters pass failed the engine's match: its cores are reserved
                    reasons.update(filter_node(pod, node, dict(used[node.name])) or [REASON_RESERVED])
                assert decision.message == fit_error_message(len(self.nodes), reasons), decision.pod
        self.bind(decisions)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_unschedulable_messages_equal_a_full_recomputation(sequence: list[Step]) -> None:
    world = MessageWorld()
    world.schedule()
    for step in sequence:
        world.apply(step)
