"""What a gang's members ask of each other (:mod:`kubeflux.scheduler.among`), as the assignment search holds it: a
table of gangs a user writes, and the round robin bind order of a spread among them."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.scheduler.among import among, spread_order
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.topology import ZONE_LEVEL
from tests.scheduler._relations import affinity, spread

HOST = "kubernetes.io/hostname"


def rank(name: str, app: str = "mpi", **spec: Any) -> Pod:
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": app}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }
    return pod_from_manifest(body)


def anti(app: str = "mpi", key: str = HOST) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def read(pods: list[Pod]) -> tuple[str, list[bool], str | None, bool] | None:
    found = among(pods, lambda namespace: {"kubernetes.io/metadata.name": namespace}, lambda: True)
    return None if found is None else (found.key, found.flags, found.affine, found.spread is not None)


@pytest.mark.parametrize(
    ("gang", "read_as"),
    [
        pytest.param([rank(f"r{i}") for i in range(3)], ("", [False] * 3, None, False), id="nothing"),
        pytest.param(
            [rank(f"r{i}", **spread()) for i in range(3)], ("", [False] * 3, None, True), id="spread-on-every-rank"
        ),
        pytest.param([rank("r0", **spread()), rank("r1"), rank("r2")], None, id="spread-on-one-rank-only"),
        pytest.param(
            [rank("r0", **spread()), rank("r1", **spread(skew=2)), rank("r2", **spread())],
            None,
            id="spreads-that-differ",
        ),
        pytest.param(
            [rank(f"r{i}", **affinity()) for i in range(3)], ("", [False] * 3, ZONE_LEVEL, False), id="affine-by-zone"
        ),
        pytest.param(
            [rank(f"r{i}", affinity={**affinity()["affinity"], **anti()}) for i in range(3)],
            (HOST, [True] * 3, ZONE_LEVEL, False),
            id="affine-by-zone-one-per-node",
        ),
        pytest.param(
            [
                rank(
                    f"r{i}",
                    affinity={
                        "podAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                affinity()["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                                    0
                                ],
                                affinity("db")["affinity"]["podAffinity"][
                                    "requiredDuringSchedulingIgnoredDuringExecution"
                                ][0],
                            ]
                        }
                    },
                )
                for i in range(2)
            ],
            None,
            id="affine-to-the-ranks-and-to-a-database",
        ),
        pytest.param([rank(f"r{i}", **affinity(), **spread()) for i in range(2)], None, id="affine-and-spread-at-once"),
        pytest.param(
            [rank("launcher", "launcher", **affinity()), rank("w0", **affinity()), rank("w1", **affinity())],
            None,
            id="a-launcher-affine-to-workers-it-is-not-one-of",
        ),
    ],
)
def test_what_members_ask_of_each_other(gang: list[Pod], read_as: object) -> None:
    assert read(gang) == read_as


def test_ranks_are_bound_round_robin_from_the_domain_with_the_fewest_matching_pods() -> None:
    # Domains 0, 1, 2 hold 2, 0, 0 matching pods; ranks go 1, 2, 2, 1, 0 (two each to 1 and 2, one to 0).
    domains = [1, 2, 2, 1, 0]
    order = spread_order(domains, {0: 2, 1: 0, 2: 0})
    assert [domains[i] for i in order] == [1, 2, 1, 2, 0]
