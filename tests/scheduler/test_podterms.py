"""The filters that look at the pods around a pod (:mod:`kubeflux.scheduler.podterms`) in the scheduler core: host
ports, required inter-pod affinity and anti-affinity (with the symmetry of existing pods' anti-affinity), topology
spread, each node's reason in kube-scheduler's words, and a gang whose members may not share a node placed in one
match."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.manifests import ManifestError, namespace_from_manifest, pod_from_manifest, pod_to_manifest
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import POD_GROUP_LABEL, AffinityTerm, LabelSelector, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node
from tests.scheduler._relations import affinity, spread

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def labelled(name: str, zone: str, **kwargs: object) -> Any:
    return node(name, labels={HOST: name, ZONE: zone}, **kwargs)


def manifest_pod(name: str, spec: dict[str, Any], labels: dict[str, str] | None = None, **meta: Any) -> Pod:
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}, **meta},
        "spec": {
            "schedulerName": "kubeflux",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            **spec,
        },
    }
    return pod_from_manifest(body)


def anti(app: str, key: str = HOST) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def ports(port: int, ip: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {"containerPort": port, "hostPort": port}
    if ip:
        entry["hostIP"] = ip
    container = {"name": "c", "ports": [entry], "resources": {"requests": {"cpu": "1"}}}
    return {"containers": [container]}


def other(
    name: str, on: str, labels: dict[str, str], spec: dict[str, Any] | None = None, metadata_namespace: str = "default"
) -> Pod:
    """A pod another scheduler bound to ``on`` (in ``metadata_namespace``)."""
    spec = {"schedulerName": "default-scheduler", "nodeName": on, **(spec or {})}
    return manifest_pod(name, spec, labels, namespace=metadata_namespace)


def cluster(*nodes: Any) -> Cluster:
    return Cluster(KubefluxScheduler(), list(nodes))


def test_anti_affinity_counts_every_node_in_kube_schedulers_words() -> None:
    c = cluster(labelled("n1", "a"), labelled("n2", "a"), labelled("n3", "b", cores=0))
    c.add(other("web-1", "n1", {"app": "web"}))
    c.add(manifest_pod("web-2", anti("web", ZONE), {"app": "web"}))
    said = messages(c.run())
    assert said == {
        "default/web-2": "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod anti-affinity rules."
    }


def test_an_existing_pods_anti_affinity_keeps_the_incoming_pod_away() -> None:
    c = cluster(labelled("n1", "a"), labelled("n2", "b"))
    c.add(other("guard", "n1", {"app": "guard"}, anti("web", ZONE)))
    c.add(manifest_pod("web", {}, {"app": "web"}))
    assert bound(c.run()) == {"default/web": "n2"}
    c.add(manifest_pod("web2", {"nodeSelector": {ZONE: "a"}}, {"app": "web"}))
    assert messages(c.run()) == {
        "default/web2": "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules."
    }


def webs_in_two_namespaces(**namespace_labels: dict[str, str]) -> Cluster:
    """Two nodes in two zones, a ``web`` pod of namespace ``team-a`` on the first and one of ``team-b`` on the second,
    the core told of the namespaces labelled ``namespace_labels`` (by name)."""
    c = cluster(labelled("n1", "a"), labelled("n2", "b"))
    for name, labels in namespace_labels.items():
        c.tell(ADDED, namespace_from_manifest({"metadata": {"name": name.replace("_", "-"), "labels": labels}}))
    c.add(other("web-1", "n1", {"app": "web"}, metadata_namespace="team-a"))
    c.add(other("web-2", "n2", {"app": "web"}, metadata_namespace="team-b"))
    return c


def away_from_web(namespace_selector: dict[str, Any]) -> dict[str, Any]:
    """A pod spec with anti-affinity by zone against the ``web`` pods of the namespaces ``namespace_selector``
    selects."""
    spec = anti("web", ZONE)
    spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] = (
        namespace_selector
    )
    return spec


def test_a_namespace_selector_on_the_name_label_the_api_server_gives_every_namespace() -> None:
    c = webs_in_two_namespaces()
    only_team_a = {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    not_default = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["x"]}]}
    c.add(manifest_pod("db", away_from_web(only_team_a), {"app": "db"}))
    assert bound(c.run()) == {"default/db": "n2"}  # away from team-a's web only
    c.add(manifest_pod("db2", away_from_web(not_default), {"app": "db"}))
    assert messages(c.run()) == {
        "default/db2": "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    }


def test_a_namespace_selector_on_a_namespace_label_follows_the_namespaces_as_they_are_labelled() -> None:
    c = webs_in_two_namespaces(team_a={"tier": "prod"})
    prod = {"matchLabels": {"tier": "prod"}}
    c.add(manifest_pod("db", away_from_web(prod), {"app": "db"}))
    assert bound(c.run()) == {"default/db": "n2"}  # away from the prod namespace's web only
    c.tell(ADDED, namespace_from_manifest({"metadata": {"name": "team-b", "labels": {"tier": "prod"}}}))
    c.add(manifest_pod("db2", away_from_web(prod), {"app": "db"}))
    assert messages(c.run()) == {
        "default/db2": "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    }


def test_a_namespace_selector_an_unlabelled_namespace_passes_selects_every_namespace_as_kube_scheduler_does() -> None:
    # kube-scheduler v1.36 puts a pod asking for app=c pods of namespaces "team NotIn [x]" beside one of a namespace
    # labelled team: x (measured: tests/realkube/test_filter_differential.py); "team In [y]" does not.
    c = cluster(labelled("n1", "a"), labelled("n2", "b"))
    c.tell(ADDED, namespace_from_manifest({"metadata": {"name": "team-x", "labels": {"team": "x"}}}))
    c.add(other("c-1", "n2", {"app": "c"}, metadata_namespace="team-x"))
    for name, expression in (
        ("not-x", {"key": "team", "operator": "NotIn", "values": ["x"]}),
        ("in-y", {"key": "team", "operator": "In", "values": ["y"]}),
    ):
        term = affinity("c", HOST)["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        term["namespaceSelector"] = {"matchExpressions": [expression]}
        near = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
        c.add(manifest_pod(name, near, {"app": "q"}))
    decisions = c.run()
    assert bound(decisions) == {"default/not-x": "n2"}
    assert messages(decisions) == {
        "default/in-y": "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
    }


def test_affinity_follows_the_pods_it_names_and_the_first_of_a_set_goes_anywhere() -> None:
    c = cluster(labelled("n1", "a"), labelled("n2", "b"))
    c.add(manifest_pod("db-0", affinity("db"), {"app": "db"}))  # matches its own term: the first goes anywhere
    first = bound(c.run())["default/db-0"]
    zone = "a" if first == "n1" else "b"
    c.add(manifest_pod("cache", affinity("db"), {"app": "cache"}))
    assert bound(c.run()) == {"default/cache": first}
    c.add(manifest_pod("lone", affinity("nothing"), {"app": "lone"}))
    assert messages(c.run()) == {"default/lone": "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."}
    assert zone


def test_topology_spread_by_zone() -> None:
    c = cluster(labelled("n1", "a"), labelled("n2", "a"), labelled("n3", "b"), node("bare", labels={HOST: "bare"}))
    c.add(other("w1", "n1", {"app": "w"}))
    c.add(manifest_pod("w2", spread("w"), {"app": "w"}))
    assert bound(c.run()) == {"default/w2": "n3"}  # a: 1, b: 0 → b; the bare node lacks the key
    c.add(manifest_pod("w3", {**spread("w"), "nodeSelector": {ZONE: "a"}}, {"app": "w"}))
    # only zone a counts (node affinity honoured): one domain, skew 1 + 1 - 1 ≤ 1
    assert bound(c.run())["default/w3"] in ("n1", "n2")
    c.add(manifest_pod("w4", {**spread("w"), "nodeSelector": {ZONE: "a"}}, {"app": "w"}))
    c.add(manifest_pod("w5", {**spread("w"), "nodeName": ""}, {"app": "w"}))
    said = c.run()
    assert bound(said) == {"default/w4": "n1"} or bound(said) == {"default/w5": "n3"} or len(bound(said)) == 2
    c.add(manifest_pod("w6", {**spread("w"), "nodeSelector": {HOST: "bare"}}, {"app": "w"}))
    assert messages(c.run())["default/w6"] == (
        "0/4 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), "
        "3 node(s) didn't match Pod's node affinity/selector."
    )


def test_host_ports_conflict_on_the_same_address_or_any() -> None:
    c = cluster(labelled("n1", "a"), labelled("n2", "a"))
    c.add(other("p1", "n1", {}, ports(8080)))
    c.add(other("p2", "n2", {}, ports(8080, "10.0.0.1")))
    c.add(manifest_pod("q", ports(8080, "10.0.0.2")))
    assert bound(c.run()) == {"default/q": "n2"}
    c.add(manifest_pod("r", ports(8080)))
    assert messages(c.run()) == {
        "default/r": "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    }


def test_an_mpi_gang_with_one_rank_per_node_is_placed_whole_in_one_match() -> None:
    nodes = [labelled(f"n{i}", "a", cores=8) for i in range(6)]
    c = cluster(*nodes)
    c.tell(ADDED, PodGroup("default", "mpi", 4))
    ranks = [manifest_pod(f"rank-{i}", anti("mpi"), {"app": "mpi", POD_GROUP_LABEL: "mpi"}) for i in range(4)]
    c.add(*ranks)
    placed = bound(c.run())
    assert len(placed) == 4 and len(set(placed.values())) == 4
    assert any("jobid" in line and "mpi" in line for line in c.scheduler.log)
    assert sum("Match allocate" in line and "default/mpi" in line for line in c.scheduler.log) == 1


def test_a_gang_with_more_ranks_than_nodes_waits() -> None:
    c = cluster(*[labelled(f"n{i}", "a", cores=8) for i in range(3)])
    c.tell(ADDED, PodGroup("default", "mpi", 4))
    c.add(*[manifest_pod(f"rank-{i}", anti("mpi"), {"app": "mpi", POD_GROUP_LABEL: "mpi"}) for i in range(4)])
    decisions = c.run()
    assert not bound(decisions)


def zone_gang(*zones: str) -> Cluster:
    """Nodes of 8, 8, 4 and 4 cpus in ``zones``, and an MPI gang of ranks of 2, 2, 8 and 8 cpus, each with required
    anti-affinity against the others by zone."""
    c = cluster(
        *(labelled(f"n{i}", zone, cores=cores) for i, (zone, cores) in enumerate(zip(zones, (8, 8, 4, 4), strict=True)))
    )
    c.tell(ADDED, PodGroup("default", "mpi", 4))
    for i, cpu in enumerate([2, 2, 8, 8]):
        spec = {**anti("mpi", ZONE), "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}
        c.add(manifest_pod(f"rank-{i}", spec, {"app": "mpi", POD_GROUP_LABEL: "mpi"}))
    return c


def test_a_gang_with_one_rank_per_zone_lands_in_as_many_zones() -> None:
    # One by one the small ranks take the big zones; the assignment search finds the small ones the small zones, and
    # must keep them apart: both fit zone c's node, which anti-affinity between them forbids.
    placed = bound(zone_gang("a", "b", "c", "d").run())
    zones = {"n0": "a", "n1": "b", "n2": "c", "n3": "d"}
    assert len(placed) == 4 and len({zones[node] for node in placed.values()}) == 4
    assert placed["default/rank-2"] in ("n0", "n1") and placed["default/rank-0"] in ("n2", "n3")


def test_a_gang_with_one_rank_per_zone_and_more_ranks_than_zones_is_refused_saying_why() -> None:
    decisions = zone_gang("a", "b", "c", "c").run()
    assert not bound(decisions)
    said = messages(decisions)["default/rank-0"]
    assert "can never fit" in said and f"4 of its pods must each have a {ZONE} of its own" in said, said


def test_manifest_fields_read_back_equal_and_bad_ones_named() -> None:
    made = manifest_pod("x", {**anti("web"), **spread("web"), **ports(80)}, {"app": "web"})
    assert made.terms is not None and made.terms.anti_affinity[0] == AffinityTerm(
        LabelSelector((("app", "web"),)), frozenset({"default"}), None, HOST
    )
    again = pod_from_manifest(pod_to_manifest(made))
    assert again.terms == made.terms
    with pytest.raises(ManifestError, match=r"spec.topologySpreadConstraints\[0\].maxSkew"):
        manifest_pod("bad", spread("web", skew=0))
    bad = anti("web")
    bad["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] = ""
    with pytest.raises(ManifestError, match="topologyKey"):
        manifest_pod("bad", bad)
    keys = {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": HOST, "matchLabelKeys": ["rev"]}
    merged = manifest_pod(
        "m",
        {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [keys]}}},
        {"app": "w", "rev": "7"},
    )
    assert merged.terms is not None
    selector = merged.terms.anti_affinity[0].selector
    assert selector is not None and selector.matches({"app": "w", "rev": "7"}) and not selector.matches({"app": "w"})


@pytest.mark.parametrize(
    ("selector", "field", "problem"),
    [
        ({"matchLabels": {"app": "no spaces"}}, "labelSelector.matchLabels", "a valid label must be"),
        ({"matchLabels": {"-app": "w"}}, "labelSelector.matchLabels", "name part must consist"),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["ok", "n0t ok"]}]},
            r"labelSelector.matchExpressions\[0\].values\[1\]",
            "a valid label must be",
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]},
            r"labelSelector.matchExpressions\[0\].operator",
            "not a valid selector operator",
        ),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": [1]}]},
            r"labelSelector.matchExpressions\[0\].values\[0\]",
            "expected a string",
        ),
    ],
)
def test_a_term_whose_label_selector_the_api_server_refuses_is_named(selector: Any, field: str, problem: str) -> None:
    term = {"labelSelector": selector, "topologyKey": HOST}
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    at = r"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution\[0\]."
    with pytest.raises(ManifestError, match=at + field + ".*" + problem):
        manifest_pod("bad", spec)


def kube_default() -> Any:
    from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

    return KubeDefaultScheduler("kubeflux", preemption="never")


@pytest.mark.parametrize("make", [KubefluxScheduler, kube_default], ids=["kubeflux", "kube-default"])
def test_the_core_and_the_kube_default_baseline_say_the_same(make: Any) -> None:
    c = Cluster(make(), [labelled("n1", "a"), labelled("n2", "a"), labelled("n3", "b", cores=0), labelled("n4", "c")])
    c.add(other("web-1", "n1", {"app": "web"}, ports(80)))
    c.add(other("guard", "n4", {"app": "guard"}, anti("web", ZONE)))
    c.add(manifest_pod("web-2", {**anti("web", ZONE), **ports(80)}, {"app": "web"}))
    assert messages(c.run()) == {
        "default/web-2": "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't have free ports for the "
        "requested pod ports, 1 node(s) didn't match pod anti-affinity rules, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules."
    }
    c.add(manifest_pod("spread", spread("web"), {"app": "web"}))
    assert messages(c.run()) == {
        "default/spread": "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy existing pods "
        "anti-affinity rules, 2 node(s) didn't match pod topology spread constraints."
    }
    c.add(manifest_pod("spread-other", spread("web"), {"app": "other"}))  # not counted itself: skew 1 at most
    assert bound(c.run())["default/spread-other"] in ("n1", "n2", "n4")


def test_a_pod_with_unusable_terms_built_through_python_is_rejected_naming_the_field() -> None:
    from kubeflux.scheduler.objects import PodTerms, SpreadConstraint
    from kubeflux.scheduler.testing import pod

    c = cluster(labelled("n1", "a"))
    bad = PodTerms(spread=(SpreadConstraint(0, ZONE, None),))
    c.add(pod("bad", 1000, terms=bad))
    said = messages(c.run())
    assert "terms.spread" in said["default/bad"]


def test_preemption_evicts_only_where_the_pods_around_would_let_the_pod_go() -> None:
    from kubeflux.scheduler.messages import Evict
    from kubeflux.scheduler.testing import pod

    long = {"kubeflux.io/walltime": "10000"}
    c = cluster(labelled("n1", "a"), labelled("n2", "b"))
    c.add(pod("low-old", 4000, t=0, labels={"app": "low"}, annotations=dict(long)))
    assert bound(c.run(0.0)) == {"default/low-old": "n1"}
    c.add(pod("low-new", 4000, t=5, labels={"app": "low"}, annotations=dict(long)))
    assert bound(c.run(5.0)) == {"default/low-new": "n2"}
    c.add(other("guard", "n2", {"app": "guard"}, {"containers": [{"name": "c"}]}))
    urgent = manifest_pod("urgent", {**anti("guard"), "priority": 1000}, {"app": "urgent"})
    c.add(urgent)
    evicted = [d.pod for d in c.run(6.0) if isinstance(d, Evict)]
    assert evicted == ["default/low-old"]  # low-new loses less work, but the guard on n2 keeps the pod away
