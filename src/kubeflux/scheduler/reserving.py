"""How kubeflux reserves a job (a lone pod, or a pod group's members) that cannot start now, for later.

:meth:`Reserver.reserve` finds the earliest time at which the job can start, in every resource kubeflux counts. A
lone pod asks the engine (``allocate_orelse_reserve``) and keeps its answer when the exact books agree then; a
group of alike members all required asks it the same of one gang jobspec, and its reservation of the last pass is
kept when the engine would make it again (:mod:`kubeflux.scheduler.kept`); otherwise, and for other groups, the
times at which something is planned to end are tried in order, each with the same assignment search as now
(:meth:`Placer.assignment <kubeflux.scheduler.placing.Placer.assignment>`), and the first that fits is held:
engine jobs for the cores and gpus, holds in the books in time for everything else. At most :data:`RESERVE_TRIES`
times are searched per job and pass; beyond that the job has no reservation this pass (it says so) and is planned
again on the next.
"""

from __future__ import annotations

from typing import Final

from kubeflux.match.engine import MatchOp, MatchResult
from kubeflux.scheduler.filtering import alike_run
from kubeflux.scheduler.graphview import first_placement
from kubeflux.scheduler.kept import KeptReservation, still_first
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.placing import EXACT_ROUNDS, Assignment, Placer
from kubeflux.scheduler.profile import tick
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.translate import Placement, gang_jobspec

__all__ = ["RESERVE_TRIES", "Reserver"]

RESERVE_TRIES: Final = 64
"""Start times searched per job and pass when the engine's own reservation does not hold in the exact books."""


class Reserver:
    """Reserves jobs that cannot start now for the earliest time they fit (see the module docstring): engine jobs
    and holds in the books in time, dropped again by the books' ``cancel_reservations``."""

    def __init__(self, placer: Placer) -> None:
        self.placer = placer

    def reserve(
        self, job: PendingJob, now: float, earliest: int | None = None, *, left_out_too: bool = False
    ) -> float | None:
        """Reserve ``job`` at the earliest time it fits in every resource (see the module docstring), not before
        ``earliest`` (a back-off); its start, or None when nothing is held. ``left_out_too``: the members beyond
        minMember that a group's reservation leaves out are reserved as well (:meth:`_reserve_left_out`)."""
        graph = self.placer.books.graph
        assert graph is not None
        start = tick(now)
        first = max(start, earliest if earliest is not None else start)
        pods = list(job.pods.values())
        minimum = self.placer.queue.minimum(job)
        after = first
        job.assigned = {}
        alike = (
            len(pods) > 1
            and minimum == len(pods)
            and alike_run(job) == len(pods)
            and not self.placer.filter.spread_among(pods)
        )
        if self.placer.books.deferred is not job or not alike:
            self.placer.books.drop_deferred()
        if len(pods) == 1:
            result, reserved = self._reserve_pod(job, pods[0], first, start)
            if result is not None and not result.matched:
                # No node takes the pod's even split over sockets, ever: without sockets it can never run; with
                # them its node's sockets may be smaller or uneven (it runs spanned: _span_sockets), so it is
                # searched as the groups are, else the pods behind it would take its cores forever.
                if graph.socket_size is None:
                    return None
            elif result is not None:
                if reserved:
                    job.expected_start = float(result.at)
                    return job.expected_start
                after = max(after, result.at)
        elif alike:
            held = self._reserve_alike(job, pods, first, start)
            if held is not None:
                return held
        shortest = min(self.placer.profile.planned(pod, first, reserve=True) for pod in pods)
        tries = 0
        for at in [after, *self.placer.books.plans.release_times(after)]:
            if at <= start:
                continue
            if at + shortest > self.placer.profile.horizon or tries >= RESERVE_TRIES:
                break
            if not self.placer.filter.may_fit(job, at):
                continue
            tries += 1
            exact: set[str] = set()
            for _ in range(EXACT_ROUNDS):
                found = self.placer.assignment(job, at, start, minimum, exact)
                if not isinstance(found, list):
                    break
                short = self._hold_assignment(job, found, at, start)
                if short is None:
                    job.assigned = {uid: node for uid, _, node, _ in found}
                    job.left_out = job.pods.keys() - job.assigned.keys()
                    job.expected_start = float(at)
                    if left_out_too and job.left_out:
                        self._reserve_left_out(job, at, start)
                    return job.expected_start
                exact.add(short)
        if tries >= RESERVE_TRIES:
            self.placer.log.append(f"No reservation for {job.key}: none of {RESERVE_TRIES} start times searched fits")
        return None

    def _reserve_pod(self, job: PendingJob, pod: Pod, first: int, start: int) -> tuple[MatchResult | None, bool]:
        """The engine's reservation of one pod of ``job`` from ``first`` (``allocate_orelse_reserve``), and whether
        it is held (its engine job among the job's reservations, its books in time): when it starts after ``start``
        and the exact books agree then; else it is cancelled. The result is None for a pod that takes no core or
        gpu."""
        graph = self.placer.books.graph
        assert graph is not None
        duration = self.placer.profile.planned(pod, first, reserve=True)
        result = self.placer.match(
            MatchOp.ALLOCATE_ORELSE_RESERVE, pod, duration, first, self.placer.filter.static_fit(pod).unfit
        )
        if result is None or not result.matched:
            return result, False
        node = first_placement(result).node
        if result.at > start and self.placer.filter.fits_during(node, pod, result.at, result.at + duration):
            job.reservations.append(result.jobid)
            self._reserve_books(job, node, pod, result.at, duration)
            return result, True
        graph.cancel(result.jobid, freed=())
        return result, False

    def _reserve_left_out(self, job: PendingJob, at: int, start: int) -> None:
        """Reserve the members ``job``'s reservation at ``at`` left out, each on its own at its earliest start from
        then (a member never starts before its group), in pod order, and tell each its start (conservative
        backfilling: left with none, such a member would, once its group started, take ahead of the jobs behind it
        the start they were told). A member the engine's reservation does not hold in the exact books stays out."""
        for uid in [uid for uid in job.pods if uid in job.left_out]:
            result, reserved = self._reserve_pod(job, job.pods[uid], at, start)
            if result is not None and reserved:
                job.left_out.discard(uid)
                job.member_reservations[uid] = (result.jobid, float(result.at))

    def _reserve_alike(self, job: PendingJob, pods: list[Pod], first: int, start: int) -> float | None:
        """A group of alike members all required: the engine reserves its slots as one job (as it reserves a lone
        pod), kept when the exact books agree on every node it chose; None (nothing held) otherwise. The engine's
        reservation of the last pass is put back instead of searched again when it would be the same
        (:mod:`kubeflux.scheduler.kept`)."""
        graph = self.placer.books.graph
        assert graph is not None
        pod = pods[0]
        duration = self.placer.profile.planned(pod, first, reserve=True)
        one_per_node = self.placer.filter.one_per_node(pods)
        spec = gang_jobspec(pods, duration, self.placer.profile.shape.gpu_resources, one_per_node=one_per_node is True)
        if spec is None:
            return None
        hidden = self.placer.filter.static_fit(pod)
        kept = job.kept
        held = self.placer.books.deferred is job  # its reservation is still in the engine, as the last pass made it
        same = (
            kept is not None
            and first == start
            and still_first(kept, graph, job, pods, duration, hidden, start, held=held)
        )
        if held and not same:
            self.placer.books.drop_deferred()
        job.kept = None
        mark = graph.released.mark()
        jobid = -1
        if same:
            assert kept is not None
            at, per_node, leaves = kept.at, kept.per_node, kept.leaves
            if held:
                self.placer.books.deferred = None
                jobid = kept.jobid
                self.placer.log.append(
                    f"Match allocate_orelse_reserve {job.key}: jobid {jobid} reserved at {at} (kept)"
                )
            else:
                jobid = graph.reserve_again(leaves, at, duration, job.key, start)
        if jobid < 0:
            # The books may already show that the gang cannot start now: the engine's walk at now then fails too
            # (its window is no shorter than the one the books were asked about), and is not made.
            later = (
                first == start
                and duration >= self.placer.profile.planned(pod, start)
                and self.placer.filter.too_few_slots(job, start, len(pods))
            )
            result = graph.match(MatchOp.ALLOCATE_ORELSE_RESERVE, spec, job.key, first, hidden.unfit, later=later)
            if not result.matched:
                return None
            jobid, at = result.jobid, result.at
            cores, gpus = self.placer.books.pod_shape(pod)
            placements = result.placements
            per_node = tuple(
                (where.node, len(where.cores) // cores if cores else len(where.gpus) // max(gpus, 1))
                for where in placements
            )
            leaves = tuple(uid for where in placements for uid in self._leaf_uids(where))
        if (
            at <= start
            or sum(count for _, count in per_node) != len(pods)
            or not all(self.placer.filter.fits_many(node, pod, count, at, at + duration) for node, count in per_node)
        ):
            graph.cancel(jobid, freed=leaves if same and held else (), owner=job)
            return None
        job.reservations.append(jobid)
        if self.placer.profile.keep_reservations:
            cores, gpus = self.placer.books.pod_shape(pod)
            counts = {"core": cores * len(pods), "gpu": gpus * len(pods)}
            job.kept = KeptReservation(jobid, at, duration, tuple(pods), hidden, leaves, counts, per_node, mark)
        for node, count in per_node:
            for _ in range(count):
                self._reserve_books(job, node, pod, at, duration)
        job.expected_start = float(at)
        return job.expected_start

    def _leaf_uids(self, where: Placement) -> list[int]:
        """The core and gpu vertices of a placement's node that it names."""
        graph = self.placer.books.graph
        assert graph is not None
        vertices = graph.engine.graph.vertices
        names = {*where.cores, *where.gpus}
        return [uid for uids in graph.leaves(where.node, made=True) for uid in uids if vertices[uid].name in names]

    def _reserve_books(self, job: PendingJob, node: str, pod: Pod, at: int, duration: int) -> None:
        job.holds.append(self.placer.books.plans.hold(node, at, at + duration, pod.requests))

    def _hold_assignment(self, job: PendingJob, found: Assignment, at: int, now: int) -> str | None:
        """Reserve an assignment found for ``at``: engine jobs for its members' cores and gpus, holds for the rest;
        the name of a node whose cores could not give it when one could not (nothing is kept then)."""
        for _, pod, node, duration in found:
            leaves = self.placer.leaves(pod, node, at, duration)
            jobid = -1 if leaves is None else self.placer.replay_member(pod, node, leaves, at, duration, now)
            if leaves is None or jobid < 0:
                self.placer.books.cancel_reservations(job)
                return node
            if jobid:
                job.reservations.append(jobid)
            self._reserve_books(job, node, pod, at, duration)
        return None
