"""The options of a request as the real server checks them: ``ListOptions`` (resource versions, initial events),
``dryRun`` of the write options, ``fieldManager`` and ``force`` of a patch. A bad option is a 422 ``Invalid`` of
the options kind (``ListOptions.meta.k8s.io "" is invalid: ...``), as k8s.io/apimachinery's validation words it."""

from __future__ import annotations

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)

__all__ = ["check_list_options", "dry_run", "field_manager", "flag", "integer", "list_selectors"]

_MATCHES = ("", "Exact", "NotOlderThan")


def flag(query: dict[str, str], name: str) -> bool:
    """A boolean option: true when given as ``true`` or ``1``."""
    return query.get(name, "").lower() in ("true", "1")


def integer(query: dict[str, str], name: str) -> int | None:
    """An integer option, None when not given; 400 when it is no integer."""
    text = query.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise errors.bad_request(f"{name}: invalid integer {text!r}") from exc


def list_selectors(resource: ResourceType, query: dict[str, str]) -> tuple[LabelSelector, FieldSelector]:
    """The ``labelSelector`` and ``fieldSelector`` of a list, watch or deletecollection of ``resource``."""
    labels = parse_label_selector(query.get("labelSelector", ""))
    fields = parse_field_selector(query.get("fieldSelector", ""), resource.fields, resource.plural)
    return labels, fields


def check_list_options(query: dict[str, str], watch: bool) -> None:
    """``resourceVersionMatch`` and ``sendInitialEvents`` as ``ValidateListOptions`` checks them."""
    causes: list[Cause] = []
    match = query.get("resourceVersionMatch", "")
    version = query.get("resourceVersion", "")
    initial_events = flag(query, "sendInitialEvents")
    if match not in _MATCHES:
        causes.append(errors.not_supported("resourceVersionMatch", match, _MATCHES))
    elif initial_events:
        if not watch:
            causes.append(
                Cause("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list", "FieldValueForbidden")
            )
        elif match != "NotOlderThan":
            causes.append(
                Cause(
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    "FieldValueForbidden",
                )
            )
    elif match and watch:
        causes.append(
            Cause(
                "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch", "FieldValueForbidden"
            )
        )
    elif match and not version:
        causes.append(
            Cause(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                "FieldValueForbidden",
            )
        )
    elif match == "Exact" and version == "0":
        causes.append(
            Cause(
                "resourceVersionMatch",
                'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                "FieldValueForbidden",
            )
        )
    if causes:
        raise errors.invalid("ListOptions.meta.k8s.io", "", causes)


def dry_run(query: dict[str, str], options_kind: str) -> bool:
    """Whether the write is a dry run (``dryRun=All``); any other value is refused, as the real server does."""
    value = query.get("dryRun")
    if value is None:
        return False
    if value != "All":
        cause = Cause("dryRun", f'Unsupported value: ["{value}"]: supported values: "All"', "FieldValueNotSupported")
        raise errors.invalid(f"{options_kind}.meta.k8s.io", "", [cause])
    return True


def field_manager(query: dict[str, str], user_agent: str) -> str:
    """``fieldManager``, or the first part of the user agent (``kubectl/v1.36``: ``kubectl``), as the real server."""
    manager = query.get("fieldManager", "")
    if manager:
        if len(manager) > 128:
            cause = Cause("fieldManager", "Too long: may not be more than 128 bytes", "FieldValueTooLong")
            raise errors.invalid("PatchOptions.meta.k8s.io", "", [cause])
        return manager
    return user_agent.split("/", 1)[0][:128] or "unknown"
