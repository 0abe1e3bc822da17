"""The three patch formats of ``PATCH``: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge.

Strategic merge follows k8s.io/apimachinery's ``strategicpatch`` for the lists kubectl and controllers patch: a
list whose field name is in :data:`MERGE_KEYS` is merged item by item on its key (containers by ``name``,
conditions by ``type``, ...), ``finalizers`` merges as a set; every other list is replaced, as for a field without
a ``patchStrategy``. The directives kubectl's client-side apply writes are honoured: ``$patch: delete|replace``,
``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>`` (the order of a merged
list). A patch that cannot apply raises a 400/422 ``ApiError`` with the reason, never an exception of its own.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeflux.sim.apiserver.errors import ApiError, bad_request

__all__ = ["MERGE_KEYS", "json_patch", "merge_patch", "strategic_merge_patch"]

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "conditions": "type",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "taints": "key",
    "addresses": "type",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
}
"""Lists merged by key: the ``patchMergeKey`` of the Kubernetes types for these field names."""

SET_LISTS = frozenset({"finalizers"})
"""Lists of scalars with ``patchStrategy: merge``: patched items are added, existing ones kept."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: a mapping merges recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- JSON patch -----------------------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise bad_request(f"json patch: invalid path {path!r}: must be a JSON pointer starting with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]] if path else []


def _index(container: list[Any], part: str, path: str, *, adding: bool) -> int:
    if adding and part == "-":
        return len(container)
    if not part.isdigit():
        raise _unprocessable(f"json patch: {path}: {part!r} is not an array index")
    index = int(part)
    if index > len(container) or (not adding and index == len(container)):
        raise _unprocessable(f"json patch: {path}: index {index} is out of range")
    return index


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _parent(doc: Any, path: Any) -> tuple[Any, str] | None:
    """The container of the member ``path`` points to, and that member's key or index; None for the whole
    document (the pointer ``""``)."""
    parts = _pointer(path)
    if not parts:
        return None
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node:
                raise _unprocessable(f"json patch: {path}: {part!r} does not exist")
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, path, adding=False)]
        else:
            raise _unprocessable(f"json patch: {path}: cannot descend into a {type(node).__name__}")
    return node, parts[-1]


def _get(doc: Any, path: Any) -> Any:
    found = _parent(doc, path)
    if found is None:
        return doc
    parent, last = found
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"json patch: {path}: does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, adding=False)]
    raise _unprocessable(f"json patch: {path}: does not exist")


def _remove(doc: Any, path: Any) -> Any:
    found = _parent(doc, path)
    if found is None:
        raise _unprocessable("json patch: cannot remove the whole document")
    parent, last = found
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"json patch: {path}: cannot remove a missing member")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, adding=False))
    raise _unprocessable(f"json patch: {path}: cannot remove from a {type(parent).__name__}")


def _add(doc: Any, path: Any, value: Any, *, replace: bool = False) -> Any:
    found = _parent(doc, path)
    if found is None:
        return value
    parent, last = found
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _unprocessable(f"json patch: {path}: cannot replace a missing member")
        parent[last] = value
    elif isinstance(parent, list):
        index = _index(parent, last, path, adding=not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    else:
        raise _unprocessable(f"json patch: {path}: cannot add to a {type(parent).__name__}")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 (``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``) on a copy of ``target``."""
    if not isinstance(operations, list):
        raise bad_request("json patch: the body must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for number, op in enumerate(operations):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise bad_request(f"json patch: operation {number} must be an object with an 'op'")
        name, path = op["op"], op.get("path")
        if name in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"json patch: operation {number} ({name}) needs a 'value'")
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif name == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif name == "remove":
            _remove(doc, path)
        elif name == "move":
            doc = _add(doc, path, _remove(doc, op.get("from")))
        elif name == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from"))))
        elif name == "test":
            if _get(doc, path) != op["value"]:
                raise _unprocessable(f"json patch: test operation {number} failed at {path}")
        else:
            raise bad_request(f"json patch: operation {number}: unknown op {name!r}")
    return doc


# --- strategic merge ------------------------------------------------------------------------------------------

_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_ELEMENT_ORDER = "$setElementOrder/"


def strategic_merge_patch(target: Any, patch: Any, *, appended: bool = False) -> Any:
    """Strategic merge of ``patch`` into a copy of ``target`` (see the module docstring for what is honoured).

    A list merged by key takes the order ``strategicpatch`` gives it (:func:`_patch_order`); ``appended`` keeps the
    live order and puts new items last instead, as server-side apply merges a configuration."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch: the body must be a JSON object")
    return _merge_map(target if isinstance(target, dict) else {}, patch, appended)


def _merge_map(target: dict[str, Any], patch: dict[str, Any], appended: bool) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive is not None:
        raise bad_request(f"strategic merge patch: unknown $patch directive {directive!r}")
    result = dict(target)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key == "$retainKeys":
            if not isinstance(value, list):
                raise bad_request("strategic merge patch: $retainKeys must be a list")
            keep = set(value)
            result = {k: v for k, v in result.items() if k in keep or k in patch}
        elif key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if isinstance(value, list) and isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in value]
        elif key.startswith(_ELEMENT_ORDER) and isinstance(value, list):
            orders[key[len(_ELEMENT_ORDER) :]] = value
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _merge_map(current if isinstance(current, dict) else {}, value, appended)
            if not result[key] and value.get("$patch") == "delete":
                result.pop(key)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value, appended)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _ordered(field, result[field], order)
    return result


def _merge_list(field: str, current: Any, patch: list[Any], appended: bool) -> list[Any]:
    existing = current if isinstance(current, list) else []
    if field in SET_LISTS:
        merged = list(existing)
        merged.extend(item for item in patch if item not in merged)
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        replaced = [item for item in patch if not (isinstance(item, dict) and item.get("$patch"))]
        return copy.deepcopy(replaced)
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if i.get("$patch") != "replace"]
    for item in patch:
        if key not in item:
            raise bad_request(f"strategic merge patch: an item of {field} has no merge key {key!r}")
    deleted = [item[key] for item in patch if item.get("$patch") == "delete"]
    merged = [copy.deepcopy(i) for i in existing if not (isinstance(i, dict) and i.get(key) in deleted)]
    server_order = [i.get(key) if isinstance(i, dict) else None for i in merged]
    patch_order: list[Any] = []
    for item in patch:
        if item.get("$patch") == "delete":
            continue
        patch_order.append(item[key])
        position = next((i for i, old in enumerate(merged) if isinstance(old, dict) and old.get(key) == item[key]), -1)
        if position >= 0:
            merged[position] = _merge_map(merged[position], item, appended)
        else:
            merged.append(_merge_map({}, item, appended))
    if appended or not patch_order:
        return merged
    return _patch_order(merged, key, patch_order, server_order)


def _patch_order(merged: list[Any], key: str, patch_order: list[Any], server_order: list[Any]) -> list[Any]:
    """The order strategicpatch's ``normalizeElementOrder`` gives a merged list: the patched items in the patch's
    order, merged with the other items in the live order, a live item going first only while it stood before the
    next patched one in the live list. So a new item comes before the live items not yet placed: ``[b, c]`` patched
    with ``[a]`` is ``[a, b, c]``, with ``[c]`` stays ``[b, c]``."""

    def named(item: Any) -> Any:
        return item.get(key) if isinstance(item, dict) else None

    patched = sorted((i for i in merged if named(i) in patch_order), key=lambda i: patch_order.index(named(i)))
    server_only = [i for i in merged if named(i) not in patch_order]

    def live(item: Any) -> int:
        return server_order.index(named(item)) if named(item) in server_order else -1

    ordered: list[Any] = []
    left = right = 0
    while left < len(server_only) or right < len(patched):
        if right < len(patched) and (
            left >= len(server_only) or not 0 <= live(server_only[left]) < live(patched[right])
        ):
            ordered.append(patched[right])
            right += 1
        else:
            ordered.append(server_only[left])
            left += 1
    return ordered


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = MERGE_KEYS.get(field)
    if key is None:
        return items

    def rank(item: Any) -> int:
        value = item.get(key) if isinstance(item, dict) else item
        for position, wanted in enumerate(order):
            wanted_value = wanted.get(key) if isinstance(wanted, dict) else wanted
            if wanted_value == value:
                return position
        return len(order)

    return sorted(items, key=rank)
