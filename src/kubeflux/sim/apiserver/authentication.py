"""``authentication.k8s.io/v1``: the reviews that say who a credential is, as the real server answers them.

* ``SelfSubjectReview`` (``kubectl auth whoami``): the requester's user: the admin (``kubernetes-admin``, groups
  ``system:masters`` and ``system:authenticated``) for the static token, or anyone on a server without one; the
  ServiceAccount's user for a token the server issued (:mod:`.tokens`: ``system:serviceaccount:NS:NAME``, its uid,
  its groups and the token's ``credential-id``).
* ``TokenReview`` (what webhooks and kubelets ask): whether ``spec.token`` is a token the server issued, valid for
  ``spec.audiences`` (default: the API server's), and whose; ``status.error`` ``invalid bearer token`` when not (the
  static token is not reviewed: on the real server a review sees only the authenticators of tokens it knows). A
  review without a token is a 400.

Both are answered 201 and never stored.
"""

from __future__ import annotations

from typing import Any

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.fields import managed_after
from kubeflux.sim.apiserver.registry import ResourceType, Strategy
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.tokens import ISSUER, TokenIssuer

__all__ = ["GROUP", "AuthenticationReview", "authentication_resources"]

Object = dict[str, Any]
GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"


class AuthenticationReview(Strategy):
    """One review: ``SelfSubjectReview`` or ``TokenReview``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def answer(self, body: Any, user: Object, tokens: TokenIssuer, store: Store, manager: str) -> Object:
        """The review with its ``status``; raises the real server's 400."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {self.kind})")
        head: Object = {"kind": self.kind, "apiVersion": API_VERSION}
        if self.kind == "SelfSubjectReview":
            return {**head, "metadata": {"creationTimestamp": store.now()}, "status": {"userInfo": user}}
        spec = body.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        meta: Object = {}
        if manager:  # the request's fields are the client's, as the real server records
            asked = {"apiVersion": API_VERSION, "metadata": {}, "spec": spec}
            meta["managedFields"] = managed_after(None, asked, manager, "Update", store.now())
        audiences = [a for a in spec.get("audiences") or () if isinstance(a, str)] or [ISSUER]
        found = tokens.identity(token, store, audiences)
        if found is None:
            status: Object = {"user": {}, "error": "invalid bearer token"}
        else:
            named = [a for a in tokens.audiences(token) if a in audiences]
            status = {"authenticated": True, "user": found, "audiences": named}
        return {**head, "metadata": meta, "spec": spec, "status": status}


def authentication_resources() -> list[ResourceType]:
    """The reviews as served resources (create only, cluster-scoped, as the real server's)."""
    return [
        ResourceType(GROUP, "v1", plural, kind, False, AuthenticationReview(kind), create_only=True)
        for plural, kind in (("selfsubjectreviews", "SelfSubjectReview"), ("tokenreviews", "TokenReview"))
    ]
