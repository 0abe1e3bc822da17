"""The one error type of the API server: a Kubernetes ``Status`` built by helpers, as k8s.io/apimachinery's
``errors.NewNotFound`` and friends build it.

Every failure a client can cause ends as an :class:`ApiError` carrying the HTTP code, the ``reason`` clients switch
on (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Invalid``, ``Expired`` ...), a message worded as the real
server words it, and for ``Invalid`` the field causes (``spec.containers[0].image: Required value``). The HTTP
shell turns it into a ``Status`` body; the watch stream puts the same body in an ``ERROR`` event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ApiError",
    "Cause",
    "already_exists",
    "bad_request",
    "check_kind",
    "conflict",
    "expired",
    "forbidden",
    "future_version",
    "invalid",
    "method_not_allowed",
    "not_acceptable",
    "not_found",
    "not_supported",
    "page_not_found",
    "status_success",
    "too_large",
    "unauthorized",
    "unsupported_media_type",
]


@dataclass(frozen=True, slots=True)
class Cause:
    """One field problem of an ``Invalid`` error: ``reason`` is ``FieldValueRequired``, ``FieldValueInvalid`` ..."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


def not_supported(path: str, value: object, supported: Iterable[str]) -> Cause:
    """``FieldValueNotSupported``: ``value`` (quoted as the real server quotes it) is none of ``supported``, which
    the message lists in the order given."""
    listed = ", ".join(f'"{s}"' for s in supported)
    return Cause(path, f'Unsupported value: "{value}": supported values: {listed}', "FieldValueNotSupported")


@dataclass(slots=True)
class ApiError(Exception):
    """A request the server refuses; :meth:`status` is the ``Status`` body the client receives."""

    code: int
    reason: str
    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after: int = 0
    """``details.retryAfterSeconds``: when a client may try again (0: not said)."""
    plain: bytes | None = None
    """The body is this text, not a ``Status`` (the real server's ``404 page not found`` of a path no API serves)."""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [
                {"reason": c.reason, "message": c.message, "field": c.field}
                if c.field
                else {"reason": c.reason, "message": c.message}
                for c in self.causes
            ]
        if self.retry_after:
            details["retryAfterSeconds"] = self.retry_after
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # an internal error the real server reports without a reason
            del body["reason"]
        if details:
            body["details"] = details
        return body


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(resource, group)} "{name}" not found', resource, name, group)


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    message = f'{_qualified(resource, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, resource, name, group)


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    message = f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, resource, name, group)


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> ApiError:
    """422 ``Invalid``; the message lists every cause as the real server does (``Pod "x" is invalid: [...]``) and
    names a kind outside the core group with its group (``Job.batch "x" is invalid``, Go's ``GroupKind.String``)."""
    texts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid: {listed}'
    return ApiError(422, "Invalid", message, kind, name, group, list(causes))


def page_not_found(text: bytes = b"404 page not found\n") -> ApiError:
    """404 in plain text (no ``Status``): what the real server answers for a path of no group it serves, and, with
    an empty body, for an OpenAPI document it does not have."""
    return ApiError(404, "NotFound", text.decode().strip(), plain=text)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def check_kind(body: Any, kind: str, api_version: str, internal_group: str) -> dict[str, Any]:
    """``body`` as a ``kind`` of ``api_version`` (what a subresource such as ``scale`` takes; an empty ``kind`` or
    ``apiVersion`` is that one); raises the real server's 400 for a body that is not an object or names another
    kind or version (the conversion to ``internal_group.kind`` it has not)."""
    if not isinstance(body, dict):
        raise bad_request(f"the object provided is unrecognized (must be of type {kind})")
    given, version = body.get("kind") or kind, body.get("apiVersion") or api_version
    if (given, version) != (kind, api_version):
        short = version.rsplit("/", 1)[-1]
        raise bad_request(
            f'{given} in version "{short}" cannot be handled as a {kind}: converting ({short}.{given}) to '
            f"({internal_group}.{kind}): unknown conversion"
        )
    return body


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def expired(message: str = "too old resource version") -> ApiError:
    """410 ``Expired``: a watch or an exact list from a version older than the watch cache keeps."""
    return ApiError(410, "Expired", message)


def future_version(requested: int, current: int) -> ApiError:
    """504 ``Timeout`` with cause ``ResourceVersionTooLarge``: a list or watch from a version the server has not
    reached (after waiting for it). A client that sees it lists again from the current version: the server
    restarted with a new history (etcd restored from a backup, or a new simulated cluster)."""
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        causes=[Cause("", "Too large resource version", "ResourceVersionTooLarge")],
        retry_after=1,
    )


def not_acceptable(message: str) -> ApiError:
    """406: the answer cannot take the form the client asked for (``as=PartialObjectMetadataList`` of one object)."""
    return ApiError(406, "NotAcceptable", message)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"the request body is larger than the limit of {limit} bytes")


def unsupported_media_type(content_type: str, supported: str) -> ApiError:
    message = f"the body of the request was in an unknown format - accepted media types include: {supported}"
    if content_type:
        message = f"{content_type}: {message}"
    return ApiError(415, "UnsupportedMediaType", message)


def status_success(code: int = 200, **details: str) -> dict[str, Any]:
    """The ``Status`` a successful binding (201) or collection delete answers."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        body["details"] = details
    return body
