"""``cluster serve`` answers as the real kube-apiserver v1.36 does: one scripted sequence of requests and kubectl
commands (tests/realkube/differential) against both, compared step by step.

The real side is etcd and kube-apiserver with four controllers of kube-controller-manager: the ServiceAccount
controller (pods are refused until a namespace has its ``default`` ServiceAccount), the garbage collector and the
namespace controller, whose work ``cluster serve``'s store does itself (dependents, ``orphan`` and
``foregroundDeletion`` finalizers, a namespace's contents), and the resource quota controller, whose work
``cluster serve``'s own does. No scheduler, kubelet, KWOK or Job controller on either side. ``cluster serve`` runs
with no nodes, no kubelet and no controllers but its quota controller.

Per step the status code must be equal. Every other difference (Status reason, causes, fields present and their
types, watch events, kubectl output) must be in :data:`ALLOWED` with the reason it is there; a new one fails, and so
does an allowed one that no longer occurs (the list says what is true).
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store

from .differential import steps_controllers, steps_objects, steps_pods, steps_quota, steps_reads, steps_refusals
from .differential.known import KNOWN
from .differential.runner import Observation, Server, Step, differences, run
from .differential.steps_objects import POD_FAILURE_POLICIES

STEPS: list[Step] = [
    *steps_pods.STEPS,
    *steps_refusals.STEPS,
    *steps_objects.STEPS,
    *steps_reads.STEPS,
    *steps_controllers.STEPS,
    *steps_quota.STEPS,
]

_EMPTY_COLLECTION_VERBS = '*"deletecollection"* != *"get", "list", "watch"]*'
EXPLAINED: dict[tuple[str, str], str] = {
    ("node *", "-*spec.taints*"): (
        "no node lifecycle controller: the real TaintNodesByCondition admission taints every new node "
        "node.kubernetes.io/not-ready:NoSchedule, which only that controller removes once the node is Ready; "
        "cluster serve taints none, so that nodes a client registers (KWOK's) can be scheduled without it"
    ),
    ("discovery *", f"value *{_EMPTY_COLLECTION_VERBS}"): (
        "what kube-scheduler watches and kubeflux does not model (services, volumes, storage, PDBs ...) is served "
        "as an empty, read-only collection: writes are 405, so discovery lists get, list and watch"
    ),
    ("whoami", "-status.userInfo.extra*"): (
        "the real admin authenticates with a client certificate, whose hash is its credential id; cluster serve's "
        "admin holds a static token, which has none"
    ),
    ("term namespace terminating", "+status.conditions*"): (
        "the store empties a Terminating namespace at once and says what holds it; the real namespace controller "
        "writes the same conditions after its first pass, seconds after this step"
    ),
    (
        "pod merge patch bad label",
        "causes [[]('metadata.labels', 'FieldValueInvalid'), ('metadata.labels', 'FieldValueInvalid'), "
        "('metadata.labels', 'FieldValueInvalid'), ('metadata.labels', 'FieldValueInvalid')] != "
        "[[]('metadata.labels', 'FieldValueInvalid')]",
    ): "the real server reports one bad label four times on a pod update (four validators); cluster serve once",
    **{
        (step, f"causes [[]({cause}), ({cause})] != [[]({cause})]"): (
            "the real server reports this cause twice on an update (validated twice); cluster serve once"
        )
        for step, cause in (
            ("pod finalizer while deleting", "'metadata.finalizers', 'FieldValueForbidden'"),
            ("finalizer added while deleting", "'metadata.finalizers', 'FieldValueForbidden'"),
            ("node bad taint", "'metadata.taints[[]0].effect', 'FieldValueNotSupported'"),
        )
    },
    ("pv*", "-metadata.finalizers*"): (
        "no StorageObjectInUseProtection: the real admission gives every PersistentVolume and claim the "
        "kubernetes.io/pv-protection or pvc-protection finalizer, which kube-controller-manager's protection "
        "controllers remove once nothing uses the object; cluster serve runs neither, so its volumes and claims go at "
        "once when deleted"
    ),
}
"""(step name pattern, difference pattern) → why the difference stays (fnmatch patterns): what is so by design."""
ALLOWED = {**EXPLAINED, **KNOWN}
SAME_WORDS = (
    "pod gated binding",
    "pod gated add gate",
    "pod gated change selector",
    "pod gated widen affinity",
    "pod gated with node",
    "pod gated twice",
    "pod gated bad name",
    "pod gated no name",
    "pod ungated add gate",
    "pod gate not an object",
    "pod gate name not a string",
    "pod gates strategic new one",
    "pod gates drop selector",
    "pod gates binding while deleting",
    "job gated template twice",
    "job gated template bad name",
    "pod unknown priority class",
    "pod priority not its class's",
    "pod policy not its class's",
    "pod never without a class",
    "job negative completions",
    "job restart policy Always",
    "job restart policy Sometimes",
    "pod bad restart policy",
    "pod init container restart Sometimes",
    *(f"job pod failure policy {name}" for name, _, _ in POD_FAILURE_POLICIES[1:]),
    *steps_quota.SAME_WORDS,
    *steps_refusals.SAME_WORDS,
)
"""Refusals whose message cluster serve writes in the real server's words (the Priority admission; a 422 naming a
kind outside the core group, ``Job.batch``; restart policies; a Job's ``podFailurePolicy``, its 400s and 422s; the
quota admission's refusals, a Scale's and a TokenRequest's):
compared word for word, where other steps compare code, reason and causes only."""


@pytest.fixture(scope="module")
def real(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    plane = ControlPlane(tmp_path_factory.mktemp("real"), binaries).start()
    try:
        plane.start_controller_manager("--controllers=serviceaccount,garbagecollector,namespace,resourcequota")
        yield Server(
            "real",
            plane.server,
            binaries.path("kubectl"),
            plane.kubeconfig,
            cert=(plane.pki / "admin.crt", plane.pki / "admin.key"),
            ca=plane.ca,
        )
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def served(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("served")
    server = ApiServer(
        [],
        settings=ServerSettings(),
        store=Store(default_registry()),
        controllers=True,
        disabled_controllers=("job", "podgroup", "disruption", "persistentvolume-binder"),
    ).start()
    try:
        kubeconfig = server.write_kubeconfig(folder / "kubeconfig")
        yield Server("served", server.url, binaries.path("kubectl"), kubeconfig)
    finally:
        server.stop()


def _run_both(real: Server, served: Server) -> tuple[list[Observation], list[Observation]]:
    results: dict[str, list[Observation]] = {}

    def one(server: Server) -> None:
        results[server.name] = run(server, STEPS)

    threads = [threading.Thread(target=one, args=(s,)) for s in (real, served)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results["real"], results["served"]


def _allowed(step: str, difference: str) -> tuple[str, str] | None:
    for key in ALLOWED:
        if fnmatch.fnmatchcase(step, key[0]) and fnmatch.fnmatchcase(difference, key[1]):
            return key
    return None


def test_cluster_serve_answers_as_the_real_api_server(real: Server, served: Server, tmp_path: Path) -> None:
    assert len({s.name for s in STEPS}) == len(STEPS), "step names are unique"
    real_seen, served_seen = _run_both(real, served)
    unexplained: list[str] = []
    codes: list[str] = []
    used: set[tuple[str, str]] = set()
    for step, a, b in zip(STEPS, real_seen, served_seen, strict=True):
        for difference in differences(a, b):
            key = _allowed(step.name, difference)
            if difference.startswith("code "):
                codes.append(f"{step.name}: {difference}")
            if key is None:
                shown = f" ({a.message[:200]!r} | {b.message[:200]!r})" if difference.startswith("code ") else ""
                unexplained.append(f"{step.name}: {difference}{shown}")
            else:
                used.add(key)
    worded = {step.name: (a.message, b.message) for step, a, b in zip(STEPS, real_seen, served_seen, strict=True)}
    unlike = [
        f"{name}: {worded[name][1]!r} != real {worded[name][0]!r}"
        for name in SAME_WORDS
        if not worded[name][0] or worded[name][1] != worded[name][0]
    ]
    assert not unlike, "other words than the real server's:\n" + "\n".join(unlike)
    report = "\n".join(unexplained)
    (Path(os.environ.get("KUBEFLUX_DIFFERENTIAL_REPORT") or tmp_path / "differences.txt")).write_text(report)
    stale = [f"{k[0]}: {k[1]}" for k in ALLOWED if k not in used]
    print(f"{len(STEPS)} steps; {len(codes)} status-code differences; {len(unexplained)} unexplained")
    assert not unexplained, f"{len(unexplained)} unexplained differences:\n{report}"
    assert not stale, "allowed differences that no longer occur:\n" + "\n".join(stale)
