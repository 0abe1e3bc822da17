"""Events, in their two views: ``v1`` Events as stored, and ``events.k8s.io/v1`` Events converted to and from
them as the real server converts."""

from __future__ import annotations

from typing import Any

from kubeflux.sim.apiserver.data_strategies import events_v1_causes, events_v1_update_causes
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import Strategy, objects_causes, path_segment_causes

__all__ = ["EventStrategy", "EventsV1Strategy", "core_event_from_v1", "event_v1_from_core"]

Object = dict[str, Any]


class EventStrategy(Strategy):
    name_causes = staticmethod(path_segment_causes)

    def canonicalize(self, obj: Object) -> None:
        for field in ("eventTime", "firstTimestamp", "lastTimestamp"):
            if field not in obj:
                obj[field] = None
        for field in ("reportingComponent", "reportingInstance"):
            if obj.get(field) is None:
                obj[field] = ""
        for field in ("involvedObject", "source"):
            if obj.get(field) is None:
                obj[field] = {}

    def validate(self, obj: Object) -> list[Cause]:
        causes = objects_causes(obj, "", ("involvedObject", "source", "series", "related"))
        involved = obj.get("involvedObject")
        namespace = involved.get("namespace") if isinstance(involved, dict) else None
        if namespace and namespace != obj["metadata"].get("namespace"):
            causes.append(
                Cause("involvedObject.namespace", f'Invalid value: "{namespace}": does not match event.namespace')
            )
        for field in ("reason", "message", "type", "reportingComponent", "reportingInstance", "action"):
            if obj.get(field) is not None and not isinstance(obj.get(field), str):
                causes.append(Cause(field, "Invalid value: must be a string"))
        count = obj.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            causes.append(Cause("count", "Invalid value: must be an integer"))
        return causes

    fields = frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    )


class EventsV1Strategy(EventStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        return super().validate(obj) + events_v1_causes(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return events_v1_update_causes(new, old) + super().validate(new)

    fields = frozenset(
        {
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        }
    )


_EVENT_FIELDS = (  # (events.k8s.io/v1, core/v1)
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_EVENT_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


_EVENT_V1_ZERO: tuple[tuple[str, Any], ...] = (
    ("eventTime", None),
    ("deprecatedSource", {}),
    ("deprecatedFirstTimestamp", None),
    ("deprecatedLastTimestamp", None),
)
"""What events.k8s.io/v1 shows though unset (Go structs that are not pointers)."""


def event_v1_from_core(obj: Object) -> Object:
    """A stored core/v1 Event as events.k8s.io/v1 shows it (the real server's conversion)."""
    view: Object = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for field in _EVENT_SAME:
        value = obj.get(field)
        if value is not None and value != "":
            view[field] = value
    for new, old in _EVENT_FIELDS:
        if obj.get(old) not in (None, "", {}, 0):
            view[new] = obj[old]
    for field, zero in _EVENT_V1_ZERO:
        view.setdefault(field, dict(zero) if isinstance(zero, dict) else zero)
    return view


def core_event_from_v1(obj: Object) -> Object:
    stored: Object = {"apiVersion": "v1", "kind": "Event"}
    for field in _EVENT_SAME:
        if obj.get(field) is not None:
            stored[field] = obj[field]
    for new, old in _EVENT_FIELDS:
        if obj.get(new) is not None:
            stored[old] = obj[new]
    return stored
