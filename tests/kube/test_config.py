"""The serve configuration: the example loads, defaults are usable, and every mistake names its field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.kube.config import ConfigError, load_config, parse_config
from kubeflux.scheduler.core import Backfill
from kubeflux.scheduler.sharing import CappedSharing
from kubeflux.scheduler.translate import NodeShape
from tests.shared import REPO


def test_the_example_config_loads_and_builds_its_scheduler() -> None:
    config = load_config(REPO / "examples" / "serve" / "config.yaml")
    assert [s.name for s in config.schedulers] == ["kubeflux"]
    core = config.schedulers[0].build()
    assert core.name == "kubeflux" and core.backfill is Backfill.EASY and core.queue_depth == 64


def test_no_file_is_every_default() -> None:
    config = load_config(None)
    assert config.schedulers[0].name == "kubeflux"
    assert config.schedules("any-namespace")


def test_the_default_node_shape_is_the_graph_kubeflux_always_built() -> None:
    config = load_config(None)
    assert config.nodes.shape() == NodeShape()
    assert config.schedulers[0].build(config.nodes.shape()).profile.shape == NodeShape()


def test_a_nodes_section_shapes_every_schedulers_graph() -> None:
    config = parse_config(
        {
            "schedulers": [{"name": "a"}, {"name": "b"}],
            "nodes": {"socketsLabel": "example.com/sockets", "socketsDefault": 2, "gpuResources": ["amd.com/gpu"]},
        }
    )
    shape = config.nodes.shape()
    assert shape == NodeShape("example.com/sockets", 2, ("amd.com/gpu",))
    assert all(profile.build(shape).profile.shape is shape for profile in config.schedulers)


def test_two_schedulers_and_namespaces() -> None:
    config = parse_config(
        {
            "schedulers": [
                {"name": "kubeflux", "queuePolicy": "conservative"},
                {"name": "hpc-capped", "sharing": "capped", "cappedFraction": 0.25, "matchPolicy": "hinode"},
            ],
            "namespaces": ["hpc", "ml"],
        }
    )
    assert config.schedules("hpc") and not config.schedules("default")
    capped = config.schedulers[1]
    assert capped.sharing_policy() == CappedSharing(0.25)
    assert capped.build().backfill is Backfill.EASY


def test_each_scheduler_preempts_as_kube_scheduler_does_unless_its_profile_says_never() -> None:
    """Issue 31's per-scheduler setting: ``preemption: lowerPriority`` by default, ``never`` turns it off."""
    config = parse_config({"schedulers": [{"name": "urgent-ok"}, {"name": "patient", "preemption": "never"}]})
    assert [profile.build().profile.preemption for profile in config.schedulers] == ["lowerPriority", "never"]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"schedulers": [{"queuePolicy": "fifo"}]}, "serve.yaml: schedulers[0].queuePolicy: Input should be"),
        ({"schedulers": [{"matchPolicy": "lowest"}]}, "schedulers[0].matchPolicy: unknown match policy 'lowest'"),
        ({"schedulers": [{"sharing": "capped", "cappedFraction": 2}]}, "schedulers[0].cappedFraction"),
        (
            {"schedulers": [{"sharing": "capped", "cappedFraction": float("nan")}]},
            "schedulers[0].cappedFraction: Input should be a finite number",
        ),
        ({"watch": {"queueCapacity": 10**11}}, "watch.queueCapacity: Input should be less than or equal to 1000000"),
        ({"schedulers": [{"name": "Kube Flux"}]}, "schedulers[0].name"),
        ({"schedulers": [{}, {}]}, "schedulers: scheduler names must be distinct; repeated: kubeflux"),
        ({"schedulers": []}, "schedulers: List should have at least 1 item"),
        ({"namespaces": ["ok", "Not_OK"]}, "namespaces[1]"),
        ({"watch": {"pageSize": 0}}, "watch.pageSize"),
        ({"binding": {"workers": "many"}}, "binding.workers"),
        ({"clock": "sundial"}, "clock: Input should be 'auto', 'wall' or 'server'"),
        ({"schedulers": [{"preemption": "always"}]}, "schedulers[0].preemption: Input should be 'lowerPriority' or"),
        ({"nodes": {"socketsLabel": "bad key!"}}, "nodes.socketsLabel: not a label key"),
        ({"nodes": {"socketsLabel": "example.com/sockets"}}, "nodes: socketsDefault must be at least 1 when"),
        ({"nodes": {"socketsDefault": -1}}, "nodes.socketsDefault: Input should be greater than or equal to 0"),
        ({"nodes": {"socketsDefault": 4096}}, "nodes.socketsDefault: Input should be less than or equal to 1024"),
        ({"nodes": {"gpuResources": ["gpu"]}}, "nodes.gpuResources[0]: String should match pattern"),
        ({"nodes": {"gpuResources": []}}, "nodes.gpuResources: List should have at least 1 item"),
        ({"nodes": {"gpuResources": ["amd.com/gpu", "amd.com/gpu"]}}, "nodes.gpuResources: GPU resources must be"),
        ({"nodes": {"coresFrom": "capacity"}}, "nodes.coresFrom: Extra inputs are not permitted"),
        ({"schedulrs": []}, "schedulrs: Extra inputs are not permitted"),
        (["a", "list"], "serve.yaml: expected a mapping of settings, got list"),
    ],
)
def test_a_mistake_names_the_field(data: object, named: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(data, "serve.yaml")
    assert named in str(error.value)


def test_a_file_that_is_not_yaml_or_missing_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schedulers: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML") as error:
        load_config(bad)
    assert f'in "{bad}", line 2' in str(error.value)  # the position names the file, not "<unicode string>"
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_serve_refuses_a_bad_config_before_touching_a_cluster(tmp_path: Path) -> None:
    bad = tmp_path / "serve.yaml"
    bad.write_text("schedulers:\n  - queuePolicy: lifo\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", "--config", str(bad), "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert "schedulers[0].queuePolicy" in result.output


def test_leader_election_durations_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match="retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds"):
        parse_config({"leaderElection": {"enabled": True, "leaseDurationSeconds": 5, "renewDeadlineSeconds": 8}})
    config = load_config(REPO / "examples" / "serve" / "config.yaml")
    assert not config.leader_election.enabled and config.operations.address == "127.0.0.1"
