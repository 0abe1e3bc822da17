"""Field managers: ``metadata.managedFields`` and server-side apply, as k8s.io/apiserver's fieldmanager keeps them.

An object's fields are its *leaves*, each a path of steps in the ``FieldsV1`` notation: ``f:name`` for a member,
``k:{"name":"main"}`` for an item of a list merged by key (:data:`~kubeflux.sim.apiserver.patch.MERGE_KEYS`),
``v:"x"`` for an item of a set (finalizers); any other list is one leaf (atomic). Each write records who owns
what:

- an *update* (create, ``PUT``, the patches) gives its manager the leaves it changed, and takes them from the
  others; leaves the write removed are nobody's;
- an *apply* (``application/apply-patch+yaml``) gives its manager exactly the leaves of its configuration. A leaf
  another manager owns whose value the configuration changes is a *conflict* (409, one cause per field) unless
  ``force`` takes it; leaves the manager applied before and no longer applies are removed when nobody else owns
  them. The configuration is merged into the object by strategic merge.

Only requests over HTTP are tracked (the server's own components write without a manager, as a fast path); the
entries are those of the real server (``manager``, ``operation``, ``apiVersion``, ``time``, ``fieldsType``,
``fieldsV1``, ``subresource``). Ownership of a list item as a whole (the ``.`` of ``FieldsV1``) is not modelled:
an item is its leaves.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.patch import MERGE_KEYS, SET_LISTS, strategic_merge_patch

__all__ = ["Leaves", "apply_configuration", "leaves", "managed_after", "remove_leaf", "to_fields_v1"]

Object = dict[str, Any]
Path = tuple[str, ...]
Leaves = dict[Path, Any]
_SYSTEM_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    }
)


def _item_key(field: str, item: Any) -> str | None:
    key = MERGE_KEYS.get(field)
    if key is None or not isinstance(item, dict) or key not in item:
        return None
    return "k:" + json.dumps({key: item[key]}, separators=(",", ":"), sort_keys=True)


def _walk(value: Any, path: Path, field: str, out: Leaves) -> None:
    if isinstance(value, dict):
        if not value:
            out[path] = {}
        for name, child in value.items():
            _walk(child, (*path, f"f:{name}"), name, out)
    elif isinstance(value, list) and value and field in SET_LISTS:
        for item in value:
            out[(*path, "v:" + json.dumps(item, separators=(",", ":")))] = item
    elif isinstance(value, list) and value and all(_item_key(field, item) for item in value):
        for item in value:
            key = _item_key(field, item)
            assert key is not None
            _walk(item, (*path, key), "", out)
    else:
        out[path] = value


def leaves(obj: Object, subresource: str = "", status_separate: bool = False) -> Leaves:
    """The leaves of ``obj`` a manager can own: none of the server's metadata, ``apiVersion`` or ``kind``; with a
    status subresource, a write of the main resource owns no status and a status write only status."""
    found: Leaves = {}
    for name, value in obj.items():
        if name in ("apiVersion", "kind"):
            continue
        if status_separate and (name == "status") != (subresource == "status"):
            continue
        if name == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _SYSTEM_META}
            if not value:
                continue
        _walk(value, (f"f:{name}",), name, found)
    return found


def to_fields_v1(paths: set[Path] | Leaves) -> Object:
    """``paths`` as the nested ``FieldsV1`` mapping (an item's node carries ``"."``)."""
    root: Object = {}
    for path in sorted(paths):
        node = root
        for step in path:
            node = node.setdefault(step, {})
            if step[0] in "kv":
                node.setdefault(".", {})
    return root


def from_fields_v1(fields: Any, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    if not isinstance(fields, dict):
        return found
    children = [k for k in fields if k != "."]
    if not children:
        if prefix:
            found.add(prefix)
        return found
    for key in children:
        found |= from_fields_v1(fields[key], (*prefix, key))
    return found


def _entries(meta: Object) -> list[Object]:
    entries = meta.get("managedFields")
    return [dict(e) for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def managed_after(
    old: Object | None,
    new: Object,
    manager: str,
    operation: str,
    now: str,
    *,
    subresource: str = "",
    status_separate: bool = False,
    applied: set[Path] | None = None,
) -> list[Object]:
    """The ``managedFields`` of ``new`` after ``manager``'s write (``applied``: the leaves of an apply)."""
    new_leaves = leaves(new, subresource, status_separate)
    old_leaves = leaves(old, subresource, status_separate) if old is not None else {}
    entries = _entries(old["metadata"]) if old is not None else []
    if applied is not None:  # changed leaves of an apply were nobody's, or forced from their owners
        owned = applied & set(new_leaves)
        taken = {p for p in owned if p not in old_leaves or old_leaves[p] != new_leaves[p]}
    else:
        taken = {p for p, v in new_leaves.items() if p not in old_leaves or old_leaves[p] != v}
        owned = set(taken)
    removed = set(old_leaves) - set(new_leaves)
    result: list[Object] = []
    for entry in entries:
        paths = from_fields_v1(entry.get("fieldsV1"))
        same = (
            entry.get("manager") == manager
            and entry.get("operation") == operation
            and entry.get("subresource", "") == subresource
        )
        if same:
            if applied is None:
                owned |= paths - removed
            continue
        paths -= removed | taken
        if paths:
            entry["fieldsV1"] = to_fields_v1(paths)
            result.append(entry)
    if owned:
        entry = {
            "manager": manager,
            "operation": operation,
            "apiVersion": new.get("apiVersion", ""),
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(owned),
        }
        if subresource:
            entry["subresource"] = subresource
        result.append(entry)
    return result


def _show(path: Path) -> str:
    text = ""
    for step in path:
        if step.startswith("f:"):
            text += "." + step[2:]
        elif step.startswith("k:"):
            key = json.loads(step[2:])
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]"
        else:
            text += f"[{step[2:]}]"
    return text


def remove_leaf(obj: Object, path: Path) -> None:
    """Remove the leaf at ``path`` from ``obj``, and the maps and list items it leaves empty."""
    trail: list[tuple[Any, Any]] = []
    node: Any = obj
    for step in path:
        if isinstance(node, dict) and step.startswith("f:") and step[2:] in node:
            trail.append((node, step[2:]))
            node = node[step[2:]]
        elif isinstance(node, list) and step[0] in "kv":
            index = next((i for i, item in enumerate(node) if _matches(step, item)), None)
            if index is None:
                return
            trail.append((node, index))
            node = node[index]
        else:
            return
    while trail:
        parent, key = trail.pop()
        del parent[key]
        if parent or not trail:
            return


def _matches(step: str, item: Any) -> bool:
    if step.startswith("v:"):
        return bool(json.dumps(item, separators=(",", ":")) == step[2:])
    key = json.loads(step[2:])
    return isinstance(item, dict) and all(item.get(k) == v for k, v in key.items())


def apply_configuration(
    live: Object,
    config: Object,
    manager: str,
    *,
    force: bool,
    subresource: str = "",
    status_separate: bool = False,
) -> tuple[Object, set[Path]]:
    """``live`` with ``config`` applied by ``manager``, and the leaves it now owns; 409 on conflicts."""
    applied = leaves(config, subresource, status_separate)
    live_leaves = leaves(live, subresource, status_separate)
    entries = _entries(live.get("metadata") or {})
    conflicts: list[tuple[Path, str, str]] = []
    others: set[Path] = set()
    before: set[Path] = set()
    for entry in entries:
        paths = from_fields_v1(entry.get("fieldsV1"))
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            before = paths
            continue
        others |= paths
        for path in paths & set(applied):
            if path in live_leaves and live_leaves[path] != applied[path]:
                conflicts.append((path, str(entry.get("manager")), str(entry.get("apiVersion", ""))))
    if conflicts and not force:
        causes = [Cause(_show(p), f'conflict with "{m}" using {v}', "FieldManagerConflict") for p, m, v in conflicts]
        plural = "conflict" if len(causes) == 1 else "conflicts"
        listed = "\n".join(f"- {c.message}: {c.field}" for c in causes)
        message = f"Apply failed with {len(causes)} {plural}: " + (
            f"{causes[0].message}: {causes[0].field}" if len(causes) == 1 else listed
        )
        raise errors.ApiError(409, "Conflict", message, causes=causes)
    merged = copy.deepcopy(live)
    for path in sorted(before - set(applied) - others, reverse=True):
        remove_leaf(merged, path)
    patch = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
    meta = patch.get("metadata")
    if isinstance(meta, dict):
        patch["metadata"] = {k: v for k, v in meta.items() if k not in _SYSTEM_META}
    merged = strategic_merge_patch(merged, patch, appended=True)
    return merged, set(applied)
