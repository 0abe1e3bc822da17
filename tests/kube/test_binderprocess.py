"""serve's writer in a process of its own (:mod:`kubeflux.kube.binderprocess`) against the simulated cluster over
HTTP: every Binding written and answered, a refused one taken back by the core, and the process always ending —
when stopped, when killed (serve then stops), when serve is killed, and when its client cannot be built.

A race is made by pausing the writer's process (SIGSTOP) while a Binding waits in its pipe; nothing is mocked."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER
from kubeflux.kube import binderprocess
from kubeflux.kube.binder import BindOutcome, PodRef
from kubeflux.kube.binderprocess import BinderProcess
from kubeflux.kube.command import api_client
from kubeflux.scheduler.devices import AllocatedDevice, ClaimAllocation
from kubeflux.scheduler.interface import Bind
from tests.dra import DRIVER, claim, claiming_pod, gpu_class, gpu_slice

from .conftest import CEILING, Cluster, eventually, pod


def _ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _ignored(pid: int) -> set[signal.Signals]:
    """The signals process ``pid`` ignores (``SigIgn`` in ``/proc/PID/status``)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:"))
    mask = int(line.split()[1], 16)
    return {sig for sig in signal.Signals if mask >> (sig - 1) & 1}


@contextmanager
def _paused(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _bound(pods: dict[str, dict[str, Any]], *names: str) -> bool:
    return all(bool((pods[n].get("spec") or {}).get("nodeName")) for n in names if n in pods)


def test_every_binding_is_written_and_answered_and_a_refused_one_comes_back_with_the_servers_reason(
    cluster: Cluster,
) -> None:
    bound: list[str] = []
    refused: list[BindOutcome] = []
    connect = partial(api_client, cluster.kubeconfig, None, False, 4)
    refs = []
    for name in ("a", "b", "c", "taken"):
        created = cluster.create(pod(name, "1", run=None, scheduler="nobody"))
        refs.append(PodRef("default", name, created["metadata"]["uid"]))
    cluster.bind("taken", "node-0000")  # bound by another scheduler: serve's Binding loses
    writer = BinderProcess(
        connect, on_bound=lambda scheduler, decision, ref: bound.append(ref.name), on_refused=refused.append, workers=2
    )
    try:
        for ref in refs:
            writer.bind("kubeflux", Bind(f"default/{ref.name}", ref.uid, "node-0000"), ref)
        assert writer.drain(CEILING)  # the Scheduled events too
        assert writer.pending == 0
        assert sorted(bound) == ["a", "b", "c"] and writer.binds == 3
        assert [outcome.decision.pod for outcome in refused] == ["default/taken"] and writer.refused == 1
        assert refused[0].scheduler == "kubeflux" and refused[0].reason.startswith("409")
        scheduled = sorted(e["regarding"]["name"] for e in cluster.events() if e.get("reason") == "Scheduled")
        assert scheduled == ["a", "b", "c"]
    finally:
        writer.stop()
    assert writer.process.exitcode == 0 and not writer.failed
    writer.stop()  # idempotent


def test_the_claims_a_binding_wrote_come_back_as_the_server_answered_before_its_outcome(cluster: Cluster) -> None:
    """serve's books take a Bind's claims from the answers to its writes (the watch may show them seconds later):
    they cross the pipe before the Bind's outcome."""
    custom = client.CustomObjectsApi(cluster.api)
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", gpu_class())
    custom.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", gpu_slice("node-0000", 1))
    body = claim("c", 1)
    del body["metadata"]["uid"]
    made = custom.create_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims", body)
    meta = made["metadata"]
    created = cluster.create(claiming_pod("p", "nobody", claim_name="c"))
    ref = PodRef("default", "p", created["metadata"]["uid"])
    gpu = AllocatedDevice("gpus", DRIVER, "node-0000", "gpu-0")
    allocation = ClaimAllocation(
        "default", "c", meta["uid"], "node-0000", (gpu,), resource_version=meta["resourceVersion"]
    )
    heard: list[tuple[str, Any]] = []
    writer = BinderProcess(
        partial(api_client, cluster.kubeconfig, None, False, 4),
        on_bound=lambda scheduler, decision, pod: heard.append(("bound", pod.name)),
        on_claims=lambda claims: heard.append(("claims", claims)),
    )
    try:
        writer.bind("kubeflux", Bind("default/p", ref.uid, "node-0000", resource_claims=(allocation,)), ref)
        assert writer.drain(CEILING)
    finally:
        writer.stop()
    assert [what for what, _ in heard] == ["claims", "bound"]
    (answer,) = heard[0][1]
    now = custom.get_namespaced_custom_object("resource.k8s.io", "v1", "default", "resourceclaims", "c")
    assert answer["metadata"]["resourceVersion"] == now["metadata"]["resourceVersion"]  # the last write's answer
    assert [r["uid"] for r in answer["status"]["reservedFor"]] == [ref.uid]
    assert answer["metadata"]["finalizers"] == [FINALIZER]


def test_a_binding_lost_to_another_scheduler_while_in_the_pipe_is_unreserved_by_serve(two_nodes: Cluster) -> None:
    """The pod is bound elsewhere while serve's Binding for it waits in the paused writer: the cluster refuses it
    (409), the refusal goes back to the loop, and the core releases the cores it held (three more 8-core pods fit
    on the 32 cores, not two) and counts the pod where it runs (a fourth waits)."""
    cluster = two_nodes
    with cluster.serve() as serve:
        assert isinstance(serve.binder, BinderProcess)
        eventually(serve.synced.is_set)
        with _paused(serve.binder.process.pid):
            cluster.create(pod("race", "8", run=None))
            eventually(lambda: serve.binder.pending >= 1)  # decided: its Binding is in the pipe
            cluster.bind("race", "node-0001")
        eventually(lambda: serve.binder.refused >= 1)  # twice when queued again before the watch shows it bound
        for name in ("p1", "p2", "p3", "p4"):
            cluster.create(pod(name, "8", run=None))
        cluster.wait_for(lambda pods: sum(_bound(pods, n) for n in ("p1", "p2", "p3", "p4")) == 3)
        eventually(lambda: serve.bound == 3)
        assert serve.alive and not serve.binder.failed


def test_a_writer_process_killed_refuses_the_bindings_it_did_not_answer_and_serve_stops(cluster: Cluster) -> None:
    serve = cluster.serve()
    try:
        assert isinstance(serve.binder, BinderProcess)
        eventually(serve.synced.is_set)
        pid = serve.binder.process.pid
        with _paused(pid):
            cluster.create(pod("lost", "8", run=None))
            eventually(lambda: serve.binder.pending >= 1)
            os.kill(pid, signal.SIGKILL)
        eventually(lambda: serve.binder.refused == 1)
        assert "ended unexpectedly" in serve.binder.failed
        eventually(lambda: not serve.alive)  # its liveness fails; the command exits 1
        assert not (cluster.pods()["lost"].get("spec") or {}).get("nodeName")
    finally:
        serve.stop()
    assert _ended(pid)


def test_the_writer_process_ignores_interrupts_and_ends_when_its_parent_is_killed(cluster: Cluster) -> None:
    """A Ctrl-C reaches the whole process group: the writer leaves stopping to serve. serve killed (-9): the
    writer sees its pipe close and ends, writing nothing more."""
    script = textwrap.dedent(
        f"""
        import sys, threading
        from functools import partial
        from pathlib import Path
        from kubeflux.kube.binderprocess import BinderProcess
        from kubeflux.kube.command import api_client
        if __name__ == "__main__":
            writer = BinderProcess(partial(api_client, Path({str(cluster.kubeconfig)!r}), None, False, 2))
            print(writer.process.pid, flush=True)
            threading.Event().wait()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(binderprocess.__file__).parents[2])},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        eventually(lambda: _ignored(child) >= {signal.SIGINT, signal.SIGTERM})
        os.kill(child, signal.SIGINT)
        os.kill(child, signal.SIGTERM)
        assert not _ended(child)
        parent.kill()
        parent.wait(CEILING)
        eventually(lambda: _ended(child))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_writer_process_imports_neither_the_engine_nor_numpy() -> None:
    """The writer's process imports its modules as serve starts, on the core the API server answers serve's lists
    with (two cores: they compete): what it needs only. With the engine and NumPy (through the exception a bad pod
    request raises, then defined beside the engine's translation) its imports took 0.41 s of CPU instead of 0.24."""
    script = "import sys, kubeflux.kube.binderprocess; print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(Path(binderprocess.__file__).parents[2])}
    imported = set(
        subprocess.run(
            [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
    )
    heavy = {
        "numpy",
        "kubeflux.match.engine",
        "kubeflux.scheduler.core",
        "kubeflux.scheduler.translate",
        "kubeflux.apiobjects.manifests",
        "kubeflux.resources.graph",
    }
    assert "kubeflux.kube.binder" in imported
    assert not heavy & imported


def test_a_writer_whose_client_cannot_be_built_says_why_and_refuses_every_binding(tmp_path: Path) -> None:
    refused: list[BindOutcome] = []
    writer = BinderProcess(partial(api_client, tmp_path / "missing", None, False, 1), on_refused=refused.append)
    try:
        eventually(lambda: bool(writer.failed))
        assert writer.failed.startswith("cannot configure the Kubernetes client")
        writer.bind("kubeflux", Bind("default/p", "uid-1", "node-0000"), PodRef("default", "p", "uid-1"))
        assert [outcome.decision.pod for outcome in refused] == ["default/p"]
        assert writer.failed in refused[0].reason
        assert not writer.drain(1.0)
    finally:
        writer.stop()
    assert _ended(writer.process.pid)


def test_a_writer_that_has_ended_has_no_writes_pending(tmp_path: Path) -> None:
    """Once the writer's process has ended nothing it was told is pending any more (it was refused, or dropped):
    ``pending`` (serve's ``writes pending`` gauge) goes back to 0 for what is said afterwards, in a batch or not."""
    writer = BinderProcess(partial(api_client, tmp_path / "missing", None, False, 1))
    try:
        eventually(lambda: bool(writer.failed))
        writer.bind("kubeflux", Bind("default/p", "uid-1", "node-0000"), PodRef("default", "p", "uid-1"))
        with writer.batch():
            writer.forget("uid-2")
        assert writer.pending == 0 and writer.refused == 1
    finally:
        writer.stop()


def _writer_and_pod(cluster: Cluster) -> tuple[BinderProcess, PodRef, list[str]]:
    """A writer for ``cluster``, the pending pod ``default/a`` and the names of the pods it says bound."""
    created = cluster.create(pod("a", "1", run=None, scheduler="nobody"))
    bound: list[str] = []
    writer = BinderProcess(
        partial(api_client, cluster.kubeconfig, None, False, 2),
        on_bound=lambda scheduler, decision, pod: bound.append(pod.name),
    )
    return writer, PodRef("default", "a", created["metadata"]["uid"]), bound


def test_the_thread_holding_a_batch_can_drain_and_stop_the_writer(cluster: Cluster) -> None:
    """drain() and stop() wait for the writer's answer: the messages held by the caller's own batch go first, at
    once (held to the batch's end, the answer could never come: drain said False, stop killed the process)."""
    writer, ref, bound = _writer_and_pod(cluster)
    try:
        with writer.batch():
            writer.bind("kubeflux", Bind("default/a", ref.uid, "node-0000"), ref)
            assert writer.drain(5.0)
            assert bound == ["a"]
            writer.stop(1.0)
    finally:
        writer.stop()
    assert writer.process.exitcode == 0 and not writer.failed


def test_a_batch_inside_another_sends_what_it_holds_at_its_end(cluster: Cluster) -> None:
    """serve's round holds its events' forgets and each core's pass its decisions: a core's Binds go at the end of
    its pass, not after every core's pass of the round."""
    writer, ref, bound = _writer_and_pod(cluster)
    try:
        with writer.batch():
            with writer.batch():
                writer.bind("kubeflux", Bind("default/a", ref.uid, "node-0000"), ref)
            deadline = time.monotonic() + 30.0
            while not bound and time.monotonic() < deadline:  # the outer batch still open
                time.sleep(0.05)
            assert bound == ["a"]
    finally:
        writer.stop()


def test_the_childs_answers_gather_in_a_burst_but_go_at_once_after_a_quiet_spell_or_when_urgent() -> None:
    """The writer's answers cross the pipe gathered (each message costs both processes a pickle, system calls and a
    thread woken), but never held when nothing came for a while, nor when someone waits for them (a drain) or the
    core must plan again (a refused Binding). A gathering ten times the tests' ceiling shows what waits: a message
    held for it would fail the wait for it."""
    delivered: queue.Queue[tuple[Any, ...]] = queue.Queue()
    sending = threading.Event()
    sending.set()

    def deliver(message: tuple[Any, ...]) -> None:
        sending.wait()
        delivered.put(message)

    outbox = binderprocess._Outbox(deliver, gather=10 * CEILING)
    sender = threading.Thread(target=outbox.run, daemon=True)
    sender.start()
    outbox.say(("bound", 1))
    assert delivered.get(timeout=CEILING) == ("bound", 1)  # after a quiet spell: at once
    outbox.say(("bound", 2))
    outbox.say(("pending", 0, 1))
    outbox.say(("bound", 3))
    time.sleep(0.3)
    assert delivered.empty()  # gathering
    outbox.say(("refused", 4, "409 Conflict"))
    assert delivered.get(timeout=CEILING) == (
        "batch",
        [("bound", 2), ("pending", 0, 1), ("bound", 3), ("refused", 4, "409 Conflict")],
    )
    sending.clear()  # an urgent word said while another message is being delivered
    outbox.say(("refused", 5, "404 Not Found"))
    time.sleep(0.1)
    outbox.say(("bound", 6))
    outbox.say(("drained", 7, True, 4, 0))
    sending.set()
    assert delivered.get(timeout=CEILING) == ("refused", 5, "404 Not Found")
    assert delivered.get(timeout=CEILING) == ("batch", [("bound", 6), ("drained", 7, True, 4, 0)])
    outbox.say(("stopped",))
    assert delivered.get(timeout=CEILING) == ("stopped",)
    sender.join(CEILING)
    assert not sender.is_alive()  # ends after its last word


def test_a_burst_of_answers_goes_once_gathered_and_the_first_after_a_quiet_spell_at_once() -> None:
    delivered: queue.Queue[tuple[Any, ...]] = queue.Queue()
    outbox = binderprocess._Outbox(delivered.put, gather=0.05)
    sender = threading.Thread(target=outbox.run, daemon=True)
    sender.start()
    outbox.say(("bound", 1))
    outbox.say(("bound", 2))
    outbox.say(("bound", 3))
    taken = [delivered.get(timeout=CEILING)]
    if taken[0] == ("bound", 1):  # (the sender took the first before the others were said)
        taken.append(delivered.get(timeout=CEILING))
    assert taken[-1] == ("batch", [("bound", 2), ("bound", 3)]) or taken == [
        ("batch", [("bound", 1), ("bound", 2), ("bound", 3)])
    ]
    time.sleep(0.2)  # a quiet spell, longer than the gathering
    outbox.say(("bound", 4))
    assert delivered.get(timeout=CEILING) == ("bound", 4)
    outbox.say(("failed", "gone"))
    assert delivered.get(timeout=CEILING) == ("failed", "gone")
    sender.join(CEILING)
    assert not sender.is_alive()
