"""A pending pod's ResourceClaim freed when it is allocated on a node the pod can no longer use, as kube-scheduler's
DynamicResources PostFilter frees it ("deallocation of ResourceClaim completed").

A claim stays allocated on its node while pods use it. A claim whose allocation was written for a pod that was then
not bound (``serve`` stopped between the claim's write and the Binding, a take-back after a refused Binding that
failed, another scheduler's) keeps its node; when that node fills up or is cordoned, the pod, which may go only
where its claim is, would wait for ever. So, when a pod fits no node and some node that every other filter passes was
refused only because a claim of the pod is allocated elsewhere (:data:`~kubeflux.scheduler.devices.NOT_AVAILABLE`),
one such claim, reserved for no pod or for this pod alone, is freed by a :class:`~kubeflux.scheduler.messages.
Deallocate` (the shell clears its allocation and ``reservedFor`` in one status write); the pod is tried again when
the claim's change is heard, and the claim allocated anew, wherever the pod fits.

Never freed, as kube-scheduler frees none of them:

* a claim reserved for another pod (it uses the claim, or another scheduler is binding it), or that a Bind of
  kubeflux's for another pod reserves and the claim does not show yet (:attr:`~kubeflux.scheduler.devices.
  DeviceBooks.binding`: a pod bound earlier in the same pass, or whose Bind is in flight);
* an allocation kubeflux assumed and has not yet seen written (its own Bind in flight: nothing to free);
* a claim being deleted (its controller frees it when no pod uses it).

The write is conditional on the claim's ``resourceVersion`` as read: a claim another writer changed meanwhile is left
as it is. One claim is freed per pass, as the PostFilter frees one per cycle; the same version of a claim is asked
once (the watch may show the change a pass or two later): again only when the claim has changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kubeflux.scheduler.devices import NOT_AVAILABLE, ClaimAllocation, DeviceBooks, ResourceClaim
from kubeflux.scheduler.fit import NodeFit
from kubeflux.scheduler.messages import Deallocate
from kubeflux.scheduler.objects import Pod

__all__ = ["ClaimFreeing", "freed"]


class ClaimFreeing:
    """Which claims of pods that fit nowhere to free (see the module docstring), and what was asked already."""

    def __init__(self, devices: DeviceBooks) -> None:
        self.devices = devices
        self.asked: dict[str, ResourceClaim] = {}
        """Claim key → the claim as it was when its freeing was asked (not asked again until the claim changes)."""

    def decide(self, pods: Iterable[tuple[Pod, NodeFit]]) -> Deallocate | None:
        """The claim to free for the first of ``pods`` (each with its fit now) that fits no node, and that some node
        refused only for a claim allocated elsewhere; None when there is none."""
        for pod, fit in pods:
            if fit.open:  # it fits a node now: PostFilter runs only for a pod that fits none
                continue
            elsewhere = [name for name, why in fit.unfit.items() if why == [NOT_AVAILABLE]]
            if not elsewhere:
                continue
            made = self._stuck(pod, elsewhere)
            if made is not None:
                asked = self.asked
                if len(asked) > 64:  # forget the claims changed since
                    self.asked = asked = {key: c for key, c in asked.items() if self.devices.claims.get(key) is c}
                asked[made.key] = self.devices.claims[made.key]
                return Deallocate(pod.key, pod.uid, made)
        return None

    def _stuck(self, pod: Pod, elsewhere: list[str]) -> ClaimAllocation | None:
        """The first claim of ``pod`` that is written allocated on a node other than one of ``elsewhere``, reserved
        for no pod or for this one alone, not being deleted and not asked already as it is."""
        devices = self.devices
        for key in dict.fromkeys(f"{pod.namespace}/{ref.claim}" for ref in pod.resource_claims if ref.claim):
            claim = devices.claims.get(key)
            if claim is None or claim.allocation is None or claim.deleting or not claim.node:
                continue
            if claim.reserved_for not in ((), (pod.uid,)):
                continue
            if devices.binding.get(key, set()) - {pod.uid}:  # another pod's Bind is reserving it (not shown yet)
                continue
            if all(claim.node == name for name in elsewhere):  # available wherever it was refused
                continue
            if self.asked.get(key) is claim:
                continue
            return ClaimAllocation(
                claim.namespace,
                claim.name,
                claim.uid,
                claim.node,
                claim.allocation,
                False,
                pod.uid in claim.reserved_for,
                claim.resource_version,
                claim.finalizers,
            )
        return None


def freed(held: ResourceClaim | None, decision: Deallocate) -> ResourceClaim | str:
    """For a simulated cluster: the claim ``held`` (as the cluster has it; None: gone) freed as ``decision`` asks
    (no allocation, reserved for no pod; its finalizers kept, as a status write cannot change them), or why the
    write is refused: the claim gone or replaced, or changed since the scheduler read it (its ``resourceVersion``,
    else its allocation or ``reservedFor``), as the API server's precondition refuses it (409)."""
    made = decision.claim
    if held is None or (made.uid and held.uid and held.uid != made.uid):
        return f'resourceclaims.resource.k8s.io "{made.name}" not found'
    if made.resource_version and held.resource_version:
        changed = held.resource_version != made.resource_version
    else:
        changed = held.allocation != made.results or held.reserved_for not in ((), (decision.uid,))
    if changed:
        return (
            f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{made.name}": the object has been '
            "modified; please apply your changes to the latest version and try again"
        )
    return dataclasses.replace(held, allocation=None, node="", reserved_for=())
