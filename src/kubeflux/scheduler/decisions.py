"""What a scheduler's decisions do, said once for every shell: :func:`apply_decisions` writes them to a shell's
:class:`~kubeflux.scheduler.interface.DecisionSink` (the simulator's cluster, ``serve``'s binder, the served
cluster's store), as kube-scheduler's binding cycle is one function whatever the plugins.

For each decision, in the order the scheduler made them:

1. the pod it names is looked up (:meth:`~DecisionSink.pod`); a pod gone meanwhile gets nothing, and a
   :class:`~kubeflux.scheduler.messages.Bind` for it is refused: told back to the scheduler's ``unreserve`` with
   the shell's NotFound answer (:meth:`~DecisionSink.not_found`);
2. a :class:`~kubeflux.scheduler.messages.PodWarning` is recorded on the pod, whichever scheduler owns it; an
   :class:`~kubeflux.scheduler.messages.Evict` evicts it, whichever scheduler owns it (preemption takes any pod of
   lower priority); one the cluster refuses (a PodDisruptionBudget) is said (:meth:`~DecisionSink.problem`) and
   told back to a scheduler that waits for its victims (:class:`~kubeflux.scheduler.interface.Unevict`), and the
   later evictions of the same victim job (``Evict.victim``) are not sent, each told back so: a job is evicted whole
   or, as far as the cluster allows, not at all (its pods that a budget guards are asked first);
3. any other decision about a pod another scheduler owns is not applied, and said (:meth:`~DecisionSink.problem`);
4. a ``Bind`` binds the pod; one the cluster refuses is told back to ``unreserve`` with the cluster's answer;
   an :class:`~kubeflux.scheduler.messages.Unschedulable` marks the pod ``PodScheduled=False``; a
   :class:`~kubeflux.scheduler.messages.Reject` marks it so for good (the pod can never run here); a
   :class:`~kubeflux.scheduler.messages.Deallocate` frees the pod's claim (kube-scheduler's DynamicResources
   PostFilter), one the cluster refuses being said (:meth:`~DecisionSink.problem`): the claim stays as it is, and
   the scheduler decides again upon the claim as the watch shows it next;
5. a decision whose fields are not of their types (a ``None`` node: compiled, every typed read checks it) is not
   applied, and said; the others still are.

The shells differ only in how they write (at once in virtual time, through the API's own paths, or on a pool of
writer threads) and in what they write beside (events, annotations, metrics), never in what a decision means.
"""

from __future__ import annotations

from typing import TypeVar

from kubeflux.scheduler.interface import Decision, DecisionSink, Unevict, Unreserve
from kubeflux.scheduler.messages import Bind, Deallocate, Evict, PodWarning, Reject, Unschedulable, not_evicted_whole

__all__ = ["apply_decisions"]

P = TypeVar("P")


def apply_decisions(
    scheduler: str,
    decisions: list[Decision],
    sink: DecisionSink[P],
    unreserve: Unreserve | None,
    now: float,
) -> int:
    """Apply the decisions of the scheduler named ``scheduler`` to ``sink`` at ``now`` (see the module docstring);
    ``unreserve`` is the scheduler when it takes refused Binds back (None: it does not). Returns how many pods
    were bound or evicted and claims freed (the changes made)."""
    made = 0
    refused_jobs: set[str] = set()  # victims of which one pod's eviction was refused: the rest of each is spared
    for decision in decisions:
        try:
            pod = sink.pod(decision.pod, decision.uid)
            if pod is None:  # deleted meanwhile: the API server answers NotFound, the scheduler will hear DELETED
                if type(decision) is Bind and unreserve is not None:
                    why = sink.not_found(decision.pod)
                    unreserve.unreserve(decision.pod, decision.uid, decision.node, why, now)
                continue
            if type(decision) is PodWarning:
                sink.warn(pod, decision)
                continue
            if type(decision) is Evict:
                victim = decision.victim
                spared = victim and victim in refused_jobs
                refused = not_evicted_whole(victim) if spared else sink.evict(pod, decision)
                if refused:
                    if victim:
                        refused_jobs.add(victim)
                    sink.problem(f"scheduler {scheduler!r} could not evict pod {decision.pod}: {refused}")
                    if isinstance(unreserve, Unevict):
                        unreserve.unevict(decision.pod, decision.uid, refused, now)
                else:
                    made += 1
                continue
            owner = sink.owner(pod)
            if owner != scheduler:
                sink.problem(f"scheduler {scheduler!r} decided for pod {decision.pod} owned by {owner!r}")
                continue
            if type(decision) is Unschedulable:
                sink.unschedulable(pod, decision)
            elif type(decision) is Bind:
                refused = sink.bind(pod, decision)
                if not refused:
                    made += 1
                elif unreserve is not None:
                    unreserve.unreserve(decision.pod, decision.uid, decision.node, refused, now)
            elif type(decision) is Reject:
                sink.reject(pod, decision)
            elif type(decision) is Deallocate:
                refused = sink.deallocate(pod, decision)
                if refused:
                    sink.problem(f"scheduler {scheduler!r} could not deallocate {decision.claim.key}: {refused}")
                else:
                    made += 1
        except TypeError as exc:  # a field not of its type (compiled, every typed read checks it)
            sink.problem(f"scheduler {scheduler!r} sent an invalid decision, ignored: {decision!r}: {exc}")
    return made
