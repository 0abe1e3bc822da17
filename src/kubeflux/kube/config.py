"""The configuration of ``kubeflux serve``: a typed, validated YAML file (``--config``).

Every field is checked when the file is read, and an error names the file and the field path
(``serve.yaml: schedulers[0].queuePolicy: Input should be 'fcfs', 'easy' or 'conservative'``), so a typo stops
the scheduler before it touches the cluster rather than after it bound the first pod. Unknown fields are errors
too: a misspelt option silently ignored is how a scheduler ends up running with a policy nobody chose.

The file's keys are camelCase, as in Kubernetes' own component configs; ``examples/serve/config.yaml`` is a
complete example and docs/serve.md the reference.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kubeflux.kube.keepalive import PIPELINE
from kubeflux.match.policy import PolicyError, parse_policy
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.objects import GPU
from kubeflux.scheduler.sharing import CappedSharing, SharingPolicy, sharing_policy
from kubeflux.scheduler.topology import DEFAULT_LEVELS, check_levels
from kubeflux.scheduler.translate import MAX_SOCKETS, NodeShape

__all__ = [
    "BindingConfig",
    "ConfigError",
    "LeaderElectionConfig",
    "NodesConfig",
    "OperationsConfig",
    "SchedulerProfile",
    "ServeConfig",
    "WatchConfig",
    "load_config",
    "parse_config",
]

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
"""A label key: an optional DNS-subdomain prefix and ``/``, then a name (Kubernetes' qualified name)."""
_EXTENDED_RESOURCE = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
"""An extended resource name: domain-prefixed (``nvidia.com/gpu``, ``amd.com/gpu``, ``gpu.intel.com/i915``)."""


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)


class SchedulerProfile(_Strict):
    """One scheduler: the pods whose ``spec.schedulerName`` is ``name`` are placed with these policies."""

    name: Annotated[str, Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)] = "kubeflux"
    match_policy: Annotated[str, Field(alias="matchPolicy")] = "lonode"
    """A Fluxion match policy (``first``, ``low``, ``high``, ``lonode``, ``hinode``, ...) or ``key=value`` options."""
    queue_policy: Annotated[Backfill, Field(alias="queuePolicy")] = Backfill.EASY
    queue_depth: Annotated[int, Field(alias="queueDepth", ge=1, le=100_000)] = 64
    sharing: Literal["shared", "exclusive", "capped"] = "shared"
    """Which nodes, and how much of each, this scheduler may use beside others (:mod:`kubeflux.scheduler.sharing`)."""
    capped_fraction: Annotated[float, Field(alias="cappedFraction", gt=0.0, le=1.0)] = 0.5
    """With ``sharing: capped``: the share of each node's allocatable this scheduler may use."""
    group_backoff_seconds: Annotated[float, Field(alias="groupBackoffSeconds", gt=0.0)] = 10.0
    max_backoff_seconds: Annotated[float, Field(alias="maxBackoffSeconds", gt=0.0)] = 300.0
    preemption: Literal["lowerPriority", "never"] = "lowerPriority"
    """``lowerPriority`` (kube-scheduler's default): a job that cannot start now evicts whole jobs of lower priority
    through the Eviction API when that lets it start (:mod:`kubeflux.scheduler.preempting`); ``never``: it waits."""

    @field_validator("match_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        try:
            parse_policy(value)
        except PolicyError as exc:
            raise ValueError(str(exc)) from exc
        return value

    def sharing_policy(self) -> SharingPolicy:
        return CappedSharing(self.capped_fraction) if self.sharing == "capped" else sharing_policy(self.sharing)

    def build(self, shape: NodeShape | None = None) -> KubefluxScheduler:
        """A new scheduler core with this profile, its nodes shaped by ``shape`` (the defaults when None)."""
        return KubefluxScheduler(
            self.name,
            policy=self.match_policy,
            backfill=self.queue_policy,
            queue_depth=self.queue_depth,
            sharing=self.sharing_policy(),
            group_backoff=self.group_backoff_seconds,
            max_backoff=self.max_backoff_seconds,
            shape=shape,
            preemption=self.preemption,
        )


class NodesConfig(_Strict):
    """How each Node becomes vertices of the scheduler's graph (:class:`~kubeflux.scheduler.translate.NodeShape`).

    Cores are always the node's allocatable cpu in whole cores: a pod's cpu request is in the same unit, and the
    exact books check allocatable anyway. Kubernetes has no well-known label for a node's socket count, so the label
    is whichever one the cluster's admins write (by hand, or with a Node Feature Discovery rule)."""

    sockets_label: Annotated[str, Field(alias="socketsLabel", max_length=317)] = ""
    """A node label whose value is the node's socket count (``kubeflux.io/sockets: "2"``); empty: none is read."""
    sockets_default: Annotated[int, Field(alias="socketsDefault", ge=0, le=MAX_SOCKETS)] = 0
    """The sockets of a node without the label, or with a bad one (reported, never fatal): 0 gives the node no
    socket level (cores and gpus right under it); with ``socketsLabel`` it must be at least 1."""
    gpu_resources: Annotated[list[Annotated[str, Field(pattern=_EXTENDED_RESOURCE)]], Field(alias="gpuResources")] = (
        Field(default_factory=lambda: [GPU], min_length=1)
    )
    """The extended resources that are GPUs: a node's gpu vertices are the sum of its allocatable of each."""
    topology_levels: Annotated[list[str], Field(alias="topologyLevels", max_length=16)] = Field(
        default_factory=lambda: list(DEFAULT_LEVELS)
    )
    """Node labels forming topology levels above the nodes, top first, as a Kueue ``Topology`` lists them
    (``kubernetes.io/hostname``, the node itself, is left out); only levels some node carries are built; ``[]``:
    none (:mod:`kubeflux.scheduler.topology`)."""

    @field_validator("topology_levels")
    @classmethod
    def _levels(cls, value: list[str]) -> list[str]:
        return list(check_levels(value))

    @field_validator("sockets_label")
    @classmethod
    def _label_key(cls, value: str) -> str:
        if value and re.match(_LABEL_KEY, value) is None:
            raise ValueError(f"not a label key (an optional DNS prefix and '/', then a name): {value!r}")
        return value

    @field_validator("gpu_resources")
    @classmethod
    def _distinct_gpus(cls, names: list[str]) -> list[str]:
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"GPU resources must be distinct; repeated: {', '.join(repeated)}")
        return names

    @model_validator(mode="after")
    def _sockets_everywhere(self) -> NodesConfig:
        if self.sockets_label and self.sockets_default < 1:
            raise ValueError(
                "socketsDefault must be at least 1 when socketsLabel is set: a pod's jobspec walks through the "
                "socket level, so every node needs one (1: one socket holding the whole node)"
            )
        return self

    def shape(self) -> NodeShape:
        return NodeShape(
            self.sockets_label, self.sockets_default, tuple(self.gpu_resources), tuple(self.topology_levels)
        )


class WatchConfig(_Strict):
    """How the informers list and watch."""

    page_size: Annotated[int, Field(alias="pageSize", ge=1, le=100_000)] = 10_000
    """Objects per list page (``limit``/``continue``). One page of 10,000 pods holds ~40 MB decoded at once; pages of
    500 took serve 0.1-0.2 s longer to its first bind on 10,000 pods, and the API server more CPU to serve them
    (docs/performance.md, "The pods' list in one page")."""
    timeout_seconds: Annotated[int, Field(alias="timeoutSeconds", ge=1, le=3600)] = 300
    """A watch is ended by the server after this long and opened again from the last version seen."""
    queue_capacity: Annotated[int, Field(alias="queueCapacity", ge=1, le=1_000_000)] = 10_000
    """Events the watch threads may hold for the scheduling loop before they wait for it (back-pressure)."""
    retry_seconds: Annotated[float, Field(alias="retrySeconds", gt=0.0, le=300.0)] = 1.0
    """Pause before opening a watch again after an error (doubling up to 30 s while errors last)."""


class BindingConfig(_Strict):
    """How decisions are written to the cluster."""

    workers: Annotated[int, Field(ge=1, le=64)] = 8
    """Threads that send Bindings, events and status patches, so a slow API server does not stall matching. Each
    waits for its answer: with 4, a loaded real API server (a Binding answered in ~13 ms) got ~3.8 Bindings at a
    time, ~300/s; with 8, ~7.4 at a time, ~430/s (``benchmarks/serve.py --real``, issue 28)."""
    pipeline: Annotated[int, Field(ge=1, le=PIPELINE)] = PIPELINE
    """Bindings (and, after a burst, events) a thread sends back to back on one connection before reading their
    answers (HTTP/1.1 pipelining: :data:`~kubeflux.kube.keepalive.PIPELINE`); 1: each waits for its answer, for a
    proxy in front of the API server that mishandles pipelined requests."""
    process: bool = True
    """Whether those threads run in a process of their own (:mod:`kubeflux.kube.binderprocess`), so that the
    writes and the scheduling passes never wait for each other's GIL."""
    unschedulable_interval_seconds: Annotated[float, Field(alias="unschedulableIntervalSeconds", ge=0.0)] = 5.0
    """A waiting pod's condition and FailedScheduling event change at most this often (the newest message wins)."""
    unschedulable_delay_seconds: Annotated[float, Field(alias="unschedulableDelaySeconds", ge=0.0)] = 1.0
    """A pod is first told it waits after this: one bound at the next pass, or a gang member whose siblings are
    on their way, is not told at all."""
    event_burst: Annotated[int, Field(alias="eventBurst", ge=1)] = 25
    """FailedScheduling events a pod may get at once (client-go's event spam filter: a bucket per object)."""
    event_refill_seconds: Annotated[float, Field(alias="eventRefillSeconds", ge=0.0)] = 300.0
    """One more event every this many seconds once the burst is spent (client-go: one every 5 minutes)."""


class OperationsConfig(_Strict):
    """Where ``/metrics``, ``/healthz``, ``/readyz``, ``/livez`` and ``/kubeflux/queue`` are served
    (:mod:`kubeflux.kube.operations`)."""

    enabled: bool = True
    address: str = "127.0.0.1"
    """Loopback unless asked: a probe or a Prometheus in the pod's network namespace reaches it there."""
    port: Annotated[int, Field(ge=0, le=65535)] = 10260
    """0: a free port (tests). ``serve --operations-port`` overrides it."""
    unreachable_seconds: Annotated[float, Field(alias="unreachableSeconds", gt=0.0, le=3600.0)] = 30.0
    """``/readyz`` is false once the API server has been unreachable (or failing every request) this long."""


class LeaderElectionConfig(_Strict):
    """Several replicas, one scheduling: a ``coordination.k8s.io/v1`` Lease (:mod:`kubeflux.kube.leader`), with
    kube-scheduler's defaults."""

    enabled: bool = False
    namespace: Annotated[str, Field(alias="resourceNamespace", min_length=1, max_length=63, pattern=_DNS_LABEL)] = (
        "kube-system"
    )
    name: Annotated[str, Field(alias="resourceName", min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)] = "kubeflux"
    lease_seconds: Annotated[float, Field(alias="leaseDurationSeconds", gt=0.0)] = 15.0
    renew_seconds: Annotated[float, Field(alias="renewDeadlineSeconds", gt=0.0)] = 10.0
    retry_seconds: Annotated[float, Field(alias="retryPeriodSeconds", gt=0.0)] = 2.0

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionConfig:
        if not self.retry_seconds < self.renew_seconds < self.lease_seconds:
            raise ValueError(
                "retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds is required (a leader must stop "
                "before another may start)"
            )
        return self


class ServeConfig(_Strict):
    """The whole file (see the module docstring)."""

    api_version: Annotated[Literal["kubeflux.io/v1alpha1"], Field(alias="apiVersion")] = "kubeflux.io/v1alpha1"
    kind: Literal["ServeConfig"] = "ServeConfig"
    schedulers: Annotated[list[SchedulerProfile], Field(min_length=1, default_factory=lambda: [SchedulerProfile()])]
    namespaces: list[Annotated[str, Field(min_length=1, max_length=63, pattern=_DNS_LABEL)]] = Field(
        default_factory=list
    )
    """Namespaces whose pods kubeflux schedules; empty: all. Pods of every namespace are still counted."""
    clock: Literal["auto", "wall", "server"] = "auto"
    """``wall``: Unix time. ``server``: the simulated cluster's time (``GET /kubeflux/time``); ``auto``: the
    server's when it publishes one, else wall."""
    nodes: NodesConfig = Field(default_factory=NodesConfig)
    watch: WatchConfig = Field(default_factory=WatchConfig)
    binding: BindingConfig = Field(default_factory=BindingConfig)
    operations: OperationsConfig = Field(default_factory=OperationsConfig)
    leader_election: Annotated[LeaderElectionConfig, Field(alias="leaderElection")] = Field(
        default_factory=LeaderElectionConfig
    )

    @field_validator("schedulers")
    @classmethod
    def _distinct_names(cls, schedulers: list[SchedulerProfile]) -> list[SchedulerProfile]:
        names = [s.name for s in schedulers]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"scheduler names must be distinct; repeated: {', '.join(repeated)}")
        return schedulers

    def schedules(self, namespace: str) -> bool:
        """Whether kubeflux places the pods of ``namespace``."""
        return not self.namespaces or namespace in self.namespaces


def _field_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def parse_config(data: object, source: str = "config") -> ServeConfig:
    """``data`` (a decoded YAML document; None is the defaults) as a :class:`ServeConfig`, or :class:`ConfigError`
    naming ``source`` and the fields at fault."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{source}: {_field_path(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
        ]
        raise ConfigError("\n".join(problems)) from None


def load_config(path: Path | None) -> ServeConfig:
    """The configuration in ``path`` (None: every default), or :class:`ConfigError`."""
    if path is None:
        return ServeConfig.model_validate({})
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    stream = io.StringIO(text)
    stream.name = str(path)  # what a YAML error's position names (not "<unicode string>")
    try:
        data = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    return parse_config(data, str(path))
