"""Which ResourceClaim states the scheduler cores hear: the newest of what the watch delivers and what serve's own
claim writes were answered, as kube-scheduler's assume cache keeps claims (``k8s.io/kubernetes/pkg/scheduler/util/
assumecache``).

serve learns a claim's state from two sources: the watch, and the server's answers to its own writes of the claim (a
Bind's, and their taking back when the Binding is refused: :mod:`kubeflux.kube.claimwrites`). An answer is newer
than anything the watch has delivered so far, and its own watch event may come seconds later on a loaded API
server. So the cores hear the answer at once, and never an older state after it:

* a watch event (``ADDED``, ``MODIFIED``) is passed on unless the claim (the same uid) is known at a
  ``resourceVersion`` as new or newer: the event of a write already heard through its answer, or of one before it;
* ``DELETED`` is always passed on, and the claim forgotten;
* a write's answer is passed on only for a claim known (seen by the watch and not deleted since), of the same uid,
  at an older ``resourceVersion``: an answer that comes after the watch showed the claim deleted (or replaced by
  another of its name) must not bring it back.

Versions are compared as integers, as the assume cache parses them (``strconv.ParseInt``); one that is not an
integer (never from a real server) is always passed on. One entry per claim that exists.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ClaimVersions"]


def _identity(claim: dict[str, Any]) -> tuple[str, str, int | None]:
    """(``namespace/name``, uid, resourceVersion as an integer or None)."""
    meta = claim.get("metadata") or {}
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    try:
        version: int | None = int(meta.get("resourceVersion") or "")
    except ValueError:
        version = None
    return key, str(meta.get("uid") or ""), version


class ClaimVersions:
    """The uid and newest ``resourceVersion`` the cores have heard of each claim (see the module docstring)."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[str, int | None]] = {}
        """``namespace/name`` → (uid, resourceVersion) last passed on."""

    def watched(self, type_: str, claim: dict[str, Any]) -> bool:
        """Whether the watch event ``type_`` of ``claim`` is news for the cores (and remember it when it is)."""
        key, uid, version = _identity(claim)
        if type_ == "DELETED":
            self.known.pop(key, None)
            return True
        known = self.known.get(key)
        if known is not None and known[0] == uid and _not_newer(version, known[1]):
            return False
        self.known[key] = (uid, version)
        return True

    def written(self, claim: dict[str, Any]) -> bool:
        """Whether the server's answer ``claim`` to a write of serve's is news for the cores (and remember it)."""
        key, uid, version = _identity(claim)
        known = self.known.get(key)
        if known is None or known[0] != uid or _not_newer(version, known[1]):
            return False
        self.known[key] = (uid, version)
        return True


def _not_newer(version: int | None, known: int | None) -> bool:
    return version is not None and known is not None and version <= known
