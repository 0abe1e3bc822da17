"""``serviceaccounts/NAME/token``: the TokenRequest API (``authentication.k8s.io/v1``) that ``kubectl create token``
and kubelets use, as k8s.io/kubernetes' ``pkg/registry/core/serviceaccount/storage/token.go`` answers it, and the
tokens it issues accepted as bearer tokens.

A request names the ServiceAccount in the URL (404 when it does not exist) and may give ``spec.expirationSeconds``
(default 3600; fewer than 600 or more than 2^32 is a 422 in the real server's words; not an integer, a 400),
``spec.audiences`` (default: the issuer, ``https://kubernetes.default.svc.cluster.local``) and
``spec.boundObjectRef`` (a Pod, Secret or Node of the namespace that must exist: 404 otherwise; another kind is a
400). The answer (201) is the TokenRequest with its defaults and ``status.token`` and
``status.expirationTimestamp``; its metadata is the ServiceAccount's name, namespace and uid. Nothing is stored.

The token is a JWT with the claims the real one carries (``iss``, ``sub`` = ``system:serviceaccount:NS:NAME``,
``aud``, ``exp``, ``iat``, ``nbf``, ``jti``, and ``kubernetes.io`` naming the namespace, the ServiceAccount with
its uid, and the bound object), signed with HS256 and a key the server draws at start (the real server signs with
its ES256/RS256 service-account key; clients do not check the signature, the server does). A server started with
``--token`` accepts such a token as a bearer token while it has not expired, names the API server's audience
(the issuer), and its ServiceAccount (same uid) and bound object still exist, as the real server's authenticator
checks them; a token of an earlier start of the server is refused (401). The request is then the ServiceAccount's
(``kubectl auth whoami`` says so: :mod:`.authentication`), but ``cluster serve`` has no RBAC: its holder may do
what the static token's may (the real server would let the ServiceAccount do only what its roles grant).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import Sequence
from typing import Any

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.apiobjects.rules import int_decode_error
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError, Cause
from kubeflux.sim.apiserver.fields import managed_after
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.store import Store

__all__ = ["ADMIN", "ISSUER", "TokenIssuer"]

Object = dict[str, Any]
GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
"""The issuer, and the default audience (the real server's ``--service-account-issuer`` in the harness)."""
ADMIN: Object = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
"""Who holds the server's static token (anyone, without one): the admin, as the real harness's client certificate
names it (``system:masters`` may do everything, as every request on ``cluster serve`` may)."""
DEFAULT_SECONDS = 3600
MIN_SECONDS = 600
MAX_SECONDS = 2**32
WARN_ONLY_SECONDS = 3607
"""A pod-bound token asked for this long (kubelets ask so) lasts :data:`EXTENDED_SECONDS` (the real server's
``--service-account-extend-token-expiration``, on by default), its ``warnafter`` claim the time asked."""
EXTENDED_SECONDS = 365 * 24 * 3600
_BINDABLE = {("v1", "Pod"): "pods", ("v1", "Secret"): "secrets", ("v1", "Node"): "nodes"}
_CHECKED = (("/serviceaccounts", "serviceaccount"), ("/pods", "pod"), ("/secrets", "secret"), ("/nodes", "node"))
"""(collection, claim) of what a token names and must still exist for it to authenticate."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _invalid(cause: Cause) -> ApiError:
    return errors.invalid("TokenRequest", "", [cause], GROUP)


def _decoded(body: Any) -> Object:
    """The request's spec with its defaults, as decoded; raises the real server's 400s."""
    body = errors.check_kind(body, "TokenRequest", API_VERSION, "authentication")
    cannot = 'TokenRequest in version "v1" cannot be handled as a TokenRequest'
    spec = body.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(body.get("metadata") or {}, dict):
        raise errors.bad_request(f"{cannot}: spec and metadata must be objects")
    seconds = spec.get("expirationSeconds")
    problem = int_decode_error("TokenRequestSpec", "spec.expirationSeconds", seconds, "int64")
    if problem:
        raise errors.bad_request(f"{cannot}: {problem}")
    audiences = spec.get("audiences")
    if audiences is not None and (not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences)):
        raise errors.bad_request(f"{cannot}: spec.audiences must be a list of strings")
    bound = spec.get("boundObjectRef")
    if bound is not None and not isinstance(bound, dict):
        raise errors.bad_request(f"{cannot}: spec.boundObjectRef must be an object")
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    return {"audiences": audiences or [ISSUER], "expirationSeconds": seconds, "boundObjectRef": bound}


def _validate(spec: Object) -> None:
    """``ValidateTokenRequest``: the 422s."""
    seconds = spec["expirationSeconds"]
    if seconds < MIN_SECONDS:
        message = f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"
        raise _invalid(Cause("spec.expirationSeconds", message))
    if seconds > MAX_SECONDS:
        message = f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
        raise _invalid(Cause("spec.expirationSeconds", message))


def _check_names(body: Object, namespace: str, name: str) -> None:
    """A name or namespace in the request is the URL's."""
    meta = body.get("metadata") or {}
    for key, value in (("name", name), ("namespace", namespace)):
        given = meta.get(key)
        if given and given != value:
            what = "name" if key == "name" else "namespace"
            cause = Cause(
                f"metadata.{key}", f'Invalid value: "{given}": must match the service account {what} if specified'
            )
            raise errors.invalid("TokenRequest", name, [cause], GROUP)


class TokenIssuer:
    """Issues and checks the served cluster's ServiceAccount tokens (see the module docstring); one per server."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self._kid = _b64(hashlib.sha256(self._key).digest()[:24])

    def request(
        self, store: Store, accounts: ResourceType, namespace: str, name: str, body: Any, manager: str
    ) -> Object:
        """The answer to ``POST serviceaccounts/NAME/token`` in ``namespace``."""
        spec = _decoded(body)  # in the real handler's order: decoding, names, the account, validation, binding
        _check_names(body, namespace, name)
        account = store.get(accounts, namespace, name)
        _validate(spec)
        claims_extra: Object = {}
        bound = spec["boundObjectRef"]
        if bound is not None:
            claims_extra = self._bound_claims(store, namespace, name, bound)
        issued = int(store.clock())
        expires = issued + int(spec["expirationSeconds"])
        lasts = expires
        if "pod" in claims_extra and spec["expirationSeconds"] == WARN_ONLY_SECONDS and ISSUER in spec["audiences"]:
            lasts = issued + EXTENDED_SECONDS  # a kubelet's projected token: valid a year, warned about after 3607 s
            claims_extra["warnafter"] = expires
        meta = account["metadata"]
        claims: Object = {
            "aud": spec["audiences"],
            "exp": lasts,
            "iat": issued,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                **claims_extra,
                "serviceaccount": {"name": name, "uid": meta["uid"]},
            },
            "nbf": issued,
            "sub": f"system:serviceaccount:{namespace}:{name}",
        }
        answer_meta: Object = {
            "name": name,
            "namespace": namespace,
            "uid": meta["uid"],
            "creationTimestamp": format_timestamp(float(issued)),
        }
        if manager:
            given = body.get("spec") or {}
            asked_spec = {k: v for k, v in given.items() if v is not None}
            asked_spec["expirationSeconds"] = spec["expirationSeconds"]  # defaulted before the fields are recorded
            asked = {"apiVersion": API_VERSION, "metadata": {}, "spec": asked_spec}
            now_text = format_timestamp(float(issued))
            answer_meta["managedFields"] = managed_after(None, asked, manager, "Update", now_text, subresource="token")
        return {
            "kind": "TokenRequest",
            "apiVersion": API_VERSION,
            "metadata": answer_meta,
            "spec": spec,
            "status": {"token": self._sign(claims), "expirationTimestamp": format_timestamp(float(expires))},
        }

    def _bound_claims(self, store: Store, namespace: str, account: str, bound: Object) -> Object:
        version, kind = bound.get("apiVersion") or "", bound.get("kind") or ""
        plural = _BINDABLE.get((version, kind))
        if plural is None:
            raise errors.bad_request(f"cannot bind token to object of type {version}, Kind={kind}")
        resource = store.registry.find("", "v1", plural)
        assert resource is not None
        name = str(bound.get("name") or "")
        obj = store.get(resource, namespace if resource.namespaced else "", name)
        if plural == "pods":
            spec = obj.get("spec") or {}
            if (spec.get("serviceAccountName") or "default") != account:
                why = f'cannot bind token for serviceaccount "{account}" to pod running with different serviceaccount'
                raise errors.bad_request(f"{why} name.")
        uid = bound.get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            why = (
                f"the UID in the bound object reference ({uid}) does not match the UID in record. The object might "
                "have been deleted and then recreated"
            )
            raise errors.conflict(plural, name, why)
        claims: Object = {kind.lower(): {"name": name, "uid": obj["metadata"]["uid"]}}
        node = (obj.get("spec") or {}).get("nodeName") if plural == "pods" else None
        if node:  # ServiceAccountTokenPodNodeInfo: the pod's node, with its uid when it exists
            found = store.get_object("/nodes", "", node)
            claims["node"] = {"name": node, **({"uid": found["metadata"]["uid"]} if found else {})}
        return claims

    def _sign(self, claims: Object) -> str:
        header = _b64(json.dumps({"alg": "HS256", "kid": self._kid}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def identity(self, token: str, store: Store, audiences: Sequence[str] = (ISSUER,)) -> Object | None:
        """The user ``token`` authenticates (``username`` ``system:serviceaccount:NS:NAME``, the ServiceAccount's
        ``uid``, its ``groups`` and ``extra``, as the real authenticator's ``UserInfo``) when it is one of this
        issuer's, meant for one of ``audiences``, not expired, and its ServiceAccount (and bound pod, secret or node)
        still exist with the uids it names; else None."""
        claims = self._claims(token)
        now = store.clock()
        if claims is None or not claims.get("nbf", 0) <= now < claims.get("exp", 0):
            return None
        if not set(claims.get("aud") or ()) & set(audiences):
            return None
        private = claims.get("kubernetes.io") or {}
        namespace = str(private.get("namespace", ""))
        found: dict[str, Object] = {}
        for collection, key in _CHECKED:
            ref = private.get(key)
            if not isinstance(ref, dict) or (key == "node" and "pod" in private):  # a pod's node is not checked
                continue
            obj = store.get_object(collection, "" if key == "node" else namespace, str(ref.get("name", "")))
            meta = {} if obj is None else obj["metadata"]
            if obj is None or meta.get("uid") != ref.get("uid") or meta.get("deletionTimestamp"):
                return None
            found[key] = meta
        account = found.get("serviceaccount")
        if account is None:
            return None
        extra = {"authentication.kubernetes.io/credential-id": [f"JTI={claims.get('jti', '')}"]}
        for key in ("pod", "node"):
            ref = private.get(key)
            if isinstance(ref, dict):
                extra[f"authentication.kubernetes.io/{key}-name"] = [str(ref.get("name", ""))]
                if ref.get("uid"):
                    extra[f"authentication.kubernetes.io/{key}-uid"] = [str(ref["uid"])]
        return {
            "username": f"system:serviceaccount:{namespace}:{account['name']}",
            "uid": account["uid"],
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            "extra": dict(sorted(extra.items())),
        }

    def _claims(self, token: str) -> Object | None:
        """The claims of ``token`` when this issuer signed it."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(parts[2])):
                return None
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, TypeError):
            return None
        return claims if isinstance(claims, dict) else None

    def audiences(self, token: str) -> list[str]:
        """The audiences ``token`` names (none when it is not one of this issuer's)."""
        claims = self._claims(token) or {}
        return [a for a in claims.get("aud") or () if isinstance(a, str)]
