"""``authorization.k8s.io/v1``: the access reviews ``kubectl auth can-i`` and controllers ask, answered as the real
server answers its admin.

``cluster serve`` has one identity: whoever holds its token (:attr:`ServerSettings.token`), or anyone when it has
none, and that identity may do everything, as the real server's ``system:masters`` may (the request is allowed before
RBAC is asked, so the answer has no reason). A review about another user (``SubjectAccessReview``) is allowed too: the
served cluster has no RBAC, so any client that gets in may do what it asks. Reviews are validated as the real server
validates them (422 with its causes), answered 201 and never stored.

Each review is a :class:`ReviewStrategy`: the resource is ``create_only`` and the strategy's :meth:`answer` is the
response to its ``POST``.
"""

from __future__ import annotations

from typing import Any

from kubeflux.sim.apiserver.errors import ApiError, Cause
from kubeflux.sim.apiserver.registry import ResourceType, Strategy

__all__ = ["GROUP", "ReviewStrategy", "review_resources"]

Object = dict[str, Any]
GROUP = "authorization.k8s.io"
_EVERYTHING_RULES: Object = {
    "resourceRules": [
        {
            "verbs": ["create"],
            "apiGroups": [GROUP],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        },
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    ],
    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    "incomplete": False,
}
"""What a ``SelfSubjectRulesReview`` lists for the admin (the real server's rules of ``cluster-admin``, and the
reviews every user may create)."""


def _invalid(causes: list[Cause]) -> ApiError:
    texts = [f"{c.field}: {c.message}" for c in causes]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, "Invalid", f'.{GROUP} "" is invalid: {listed}', group=GROUP, causes=causes)


def _attributes_causes(spec: Object) -> list[Cause]:
    """Exactly one of ``resourceAttributes`` and ``nonResourceAttributes`` (``ValidateSubjectAccessReviewSpec``)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is None and non_resource is None:
        message = "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        return [Cause("spec.resourceAttributes", message)]
    if resource is not None and non_resource is not None:
        message = "Invalid value: cannot be specified in combination with resourceAttributes"
        return [Cause("spec.nonResourceAttributes", message)]
    causes = []
    for name, value in (("resourceAttributes", resource), ("nonResourceAttributes", non_resource)):
        if value is not None and not isinstance(value, dict):
            causes.append(Cause(f"spec.{name}", "Invalid value: must be an object"))
    return causes


class ReviewStrategy(Strategy):
    """One kind of review: ``SelfSubjectAccessReview``, ``SubjectAccessReview``, ``LocalSubjectAccessReview`` or
    ``SelfSubjectRulesReview``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def answer(self, body: Any, namespace: str) -> Object:
        """The review with its ``status``; raises the real server's 400 or 422."""
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", f"the body must be a {self.kind}")
        spec = body.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        given = body.get("metadata")
        meta: Object = given if isinstance(given, dict) else {}
        head: Object = {"kind": self.kind, "apiVersion": f"{GROUP}/v1"}
        if self.kind == "SelfSubjectRulesReview":
            if not isinstance(spec.get("namespace", ""), str):
                raise _invalid([Cause("spec.namespace", "Invalid value: must be a string")])
            return {**head, "metadata": {}, "spec": {}, "status": dict(_EVERYTHING_RULES)}
        causes = _attributes_causes(spec)
        about_another = self.kind in ("SubjectAccessReview", "LocalSubjectAccessReview")
        if about_another and not causes and not spec.get("user") and not spec.get("groups"):
            message = 'Invalid value: "": at least one of user or group must be specified'
            causes.append(Cause("spec.user", message))
        if self.kind == "LocalSubjectAccessReview" and not causes:
            attributes = spec.get("resourceAttributes") or {}
            if attributes.get("namespace", "") != namespace:
                given = attributes.get("namespace", "")
                message = f'Invalid value: "{given}": must match metadata.namespace'
                causes.append(Cause("spec.resourceAttributes.namespace", message))
        if causes:
            raise _invalid(causes)
        answered_meta = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")}
        return {**head, "metadata": answered_meta, "spec": spec, "status": {"allowed": True}}


def review_resources() -> list[ResourceType]:
    """The reviews as served resources (create only, as the real server's)."""
    return [
        ResourceType(GROUP, "v1", plural, kind, namespaced, ReviewStrategy(kind), create_only=True)
        for plural, kind, namespaced in (
            ("localsubjectaccessreviews", "LocalSubjectAccessReview", True),
            ("selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
            ("selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
            ("subjectaccessreviews", "SubjectAccessReview", False),
        )
    ]
