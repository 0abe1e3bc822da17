"""The mutating admission plugins every real cluster runs on a pod create, in their order: ``ServiceAccount``
(``spec.serviceAccountName`` defaults to ``default``; unless ``automountServiceAccountToken`` is false, a projected
``kube-api-access-*`` volume with the token, the cluster's CA and the namespace, mounted in every container) and
``DefaultTolerationSeconds`` (tolerate ``not-ready`` and ``unreachable`` nodes for 300 s). kubeflux has no
ServiceAccount objects: every namespace is taken to have its ``default`` one."""

from __future__ import annotations

from typing import Any

__all__ = ["admit_pod"]

Object = dict[str, Any]
_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_TOLERATED = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _suffix(uid: str) -> str:
    """Five characters of the volume's name, from the pod's uid (the real server draws them at random)."""
    number = int(uid.replace("-", "")[:12] or "0", 16)
    letters = []
    for _ in range(5):
        number, digit = divmod(number, len(_ALPHABET))
        letters.append(_ALPHABET[digit])
    return "".join(letters)


def _token_volume(name: str) -> Object:
    return {
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def admit_pod(pod: Object) -> None:
    """Apply the plugins to ``pod`` (its spec is a mapping, its metadata has a uid)."""
    spec = pod["spec"]
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = account
    if spec.get("automountServiceAccountToken") is not False:
        containers = [c for f in ("initContainers", "containers") for c in spec.get(f) or () if isinstance(c, dict)]
        mounted = any(m.get("mountPath") == _TOKEN_PATH for c in containers for m in c.get("volumeMounts") or ())
        if containers and not mounted:
            name = f"kube-api-access-{_suffix(str(pod['metadata'].get('uid', '')))}"
            spec["volumes"] = [*(spec.get("volumes") or []), _token_volume(name)]
            for container in containers:
                mount = {"name": name, "readOnly": True, "mountPath": _TOKEN_PATH}
                container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        return
    present = tolerations or []
    added = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in _TOLERATED
        if not any(
            isinstance(t, dict) and t.get("key") in (key, None, "") and t.get("effect") in ("NoExecute", None, "")
            for t in present
        )
    ]
    if added:
        spec["tolerations"] = [*present, *added]
