"""Each pod read once: the last reading of every pod a shell follows, brought up to date by the fields that change
when a pod is bound, runs and ends, instead of read again from its whole manifest.

Reading a manifest (:func:`~kubeflux.apiobjects.manifests.pod_from_manifest`) is the costly part of following the
API: every pod arrives once pending, once bound, then with each phase. What the scheduler, the kubelet and the
binding write (the phase, ``spec.nodeName``, the annotations, the deletion mark, the conditions) changes no other
field that ``pod_from_manifest`` reads, so when nothing else changed the last reading is copied with those fields
(:func:`written_fields`); anything else changed, and the manifest is read again. The copy equals a fresh reading
(``tests/apiobjects/test_podreadings.py`` checks it on generated changes): what the API server does not check of
the written fields (``pods/binding`` takes any node name that is set) is checked here as the reader checks it, and a
version the reader would refuse is read again, so that its error names the field.

Both shells that follow a cluster use it: ``serve`` (its watch events) and the served cluster's in-process
schedulers and kubelet (:mod:`kubeflux.sim.apiserver.inprocess`).
"""

from __future__ import annotations

import dataclasses
import functools
from operator import attrgetter
from typing import Any, Final

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.apiobjects.rules import dns_subdomain_problem
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.phase import pod_phase

__all__ = ["PodReadings", "written_fields"]

Object = dict[str, Any]

_WRITTEN_METADATA: Final = frozenset(
    {"resourceVersion", "annotations", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"}
)
"""The metadata a pod's writers change that :func:`pod_from_manifest` reads only as the annotations and the deletion
mark (``managedFields``: the server's record of who wrote what, never read)."""


class PodReadings:
    """uid → the last version of each pod read and its reading (see the module docstring)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[Object, Pod]] = {}

    def __len__(self) -> int:
        return len(self._last)

    def read(self, type_: str, obj: Object, prev: Object | None = None) -> Pod:
        """Pod ``obj`` as of watch event ``type_`` (``prev``: its version before, when the shell has it); kept as
        the last reading unless the pod is ``DELETED``. Raises ``ManifestError`` as ``pod_from_manifest`` does."""
        if type_ == "DELETED":  # forgotten even when its last version cannot be read (it would stay for ever)
            try:
                return self.known(obj, prev) or pod_from_manifest(obj)
            finally:
                self._last.pop(_uid(obj), None)
        pod = self.known(obj, prev)
        if pod is None:
            pod = pod_from_manifest(obj)
        if pod.uid:
            self._last[pod.uid] = (obj, pod)
        return pod

    def known(self, obj: Object, prev: Object | None = None) -> Pod | None:
        """The reading of pod ``obj`` if it is the last version read, or follows from that version (``prev`` when
        given, else the last version kept) by :func:`written_fields`; None when the manifest must be read."""
        last = self._last.get(_uid(obj))
        if last is None:
            return None
        if last[0] is obj:
            return last[1]
        if prev is not None and last[0] is not prev:
            return None
        changes = written_fields(obj, last[0])
        return None if changes is None else _pod_with(last[1], changes)


def written_fields(obj: Object, prev: Object) -> dict[str, Any] | None:
    """The :class:`Pod` fields that differ between ``prev`` and ``obj`` (both validated pod manifests) when only the
    phase, ``spec.nodeName``, the annotations, the deletion mark or what no reading looks at changed; None when
    anything else :func:`pod_from_manifest` reads changed (then the pod is read again). ``prev`` was read; a value
    of ``obj`` that :func:`pod_from_manifest` would refuse (a phase that is no string, a node name that is no DNS
    subdomain: ``pods/binding`` checks only that it is set) gives None too, so that the fresh reading says why."""
    spec, before = _section(obj, "spec"), _section(prev, "spec")
    if spec is None or before is None or obj.get("kind") not in (None, "Pod"):  # (a list's items carry no kind)
        return None
    if spec is not before:  # a status write keeps the stored spec itself
        if any(v != before.get(k) for k, v in spec.items() if k != "nodeName"):
            return None
        if any(k not in spec for k in before if k != "nodeName"):
            return None
    meta, old = obj.get("metadata"), prev.get("metadata")
    if not isinstance(meta, dict) or not isinstance(old, dict):
        return None
    for key, value in meta.items():
        if key not in _WRITTEN_METADATA and value is not old.get(key) and value != old.get(key):
            return None
    if any(k not in meta for k in old if k not in _WRITTEN_METADATA):
        return None
    status, was = _section(obj, "status"), _section(prev, "status")
    if status is None or was is None:
        return None
    if status is not was and (
        _resized(status, was) or status.get("resourceClaimStatuses") != was.get("resourceClaimStatuses")
    ):
        return None  # (the claims made for it: read again)
    phase = status.get("phase")
    phase = "Pending" if phase is None or phase == "" else phase
    node = spec.get("nodeName")
    node = "" if node is None else node
    annotations = meta.get("annotations")
    annotations = {} if annotations is None else annotations
    if not isinstance(phase, str) or not isinstance(node, str):
        return None
    try:
        read_phase = pod_phase(phase)
    except ValueError:
        return None
    if node and node != before.get("nodeName") and _node_problem(node) is not None:
        return None
    if not isinstance(annotations, dict) or not _strings(annotations, old.get("annotations")):
        return None
    return {
        "phase": read_phase,
        "node_name": node,
        "annotations": dict(annotations),
        "deleted": meta.get("deletionTimestamp") is not None,
        "manifest": dict(obj),
    }


@functools.lru_cache(maxsize=8192)
def _node_problem(name: str) -> str | None:
    """:func:`dns_subdomain_problem` of a node name, remembered: every pod bound is checked, to one of a cluster's
    nodes (a regular expression each time: ~9 % of a bound pod's event)."""
    return dns_subdomain_problem(name)


def _resized(status: Object, was: Object) -> bool:
    """Whether what :func:`pod_from_manifest` reads of a status (an in-place resize: ``resize``, the ``PodResize*``
    conditions, the containers' ``resources``) differs. Most writes keep the containers' statuses themselves, so
    they are compared only when they are other objects."""
    if status.get("resize") != was.get("resize"):
        return True
    for field in ("containerStatuses", "initContainerStatuses"):
        now, before = status.get(field), was.get(field)
        if now is not before and _container_resources(now) != _container_resources(before):
            return True
    now, before = status.get("conditions"), was.get("conditions")
    return now is not before and _resize_conditions(now) != _resize_conditions(before)


def _section(obj: Object, key: str) -> Object | None:
    """``obj[key]`` as the readers take it: absent is empty; None when it is no mapping (read again, refused)."""
    value = obj.get(key)
    if value is None:
        return {}
    return value if isinstance(value, dict) else None


def _strings(annotations: Object, before: Any) -> bool:
    """Whether the annotations are a string map, as :func:`pod_from_manifest` checks (unchanged: they were)."""
    if annotations is before or annotations == before:
        return True
    return all(isinstance(key, str) and isinstance(value, str) for key, value in annotations.items())


def _uid(obj: Object) -> str:
    """``metadata.uid``, or "" (under which nothing is kept)."""
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return uid if isinstance(uid, str) else ""


# What a status list gives that pod_from_manifest reads; a list of anything but mappings, or no list, is kept as it
# is (so it differs from the version read, and the fresh reading refuses it naming the field).


def _container_resources(statuses: Any) -> Any:
    if not isinstance(statuses, list):
        return [] if statuses is None else statuses
    return [  # a container status without resources is not read
        (c.get("name"), c["resources"], c.get("allocatedResources")) if isinstance(c, dict) else c
        for c in statuses
        if not isinstance(c, dict) or c.get("resources") is not None
    ]


def _resize_conditions(conditions: Any) -> Any:
    if not isinstance(conditions, list):
        return [] if conditions is None else conditions
    return [c for c in conditions if not isinstance(c, dict) or str(c.get("type")).startswith("PodResize")]


_POD_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Pod) if f.init)
_POD_VALUES: Final = attrgetter(*_POD_FIELDS)
_POD_INDEX: Final = {name: index for index, name in enumerate(_POD_FIELDS)}


def _pod_with(pod: Pod, changes: dict[str, Any]) -> Pod:
    """``dataclasses.replace(pod, **changes)`` in a third of its time (it is called for every pod event)."""
    values = list(_POD_VALUES(pod))
    for name, value in changes.items():
        values[_POD_INDEX[name]] = value
    return Pod(*values)
