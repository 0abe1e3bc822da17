"""The engine's tables by vertex and by job hold one int object per vertex uid and per job, not one per entry.

Compiled (mypyc), code holds an ``int`` unboxed and makes a new int object at each store into a dict, set or
tuple; the pure sources store the object they were given. With a table per kind of record (spans, allocations,
exclusive uses, tags, the vertices of a job) that was one more object per table, vertex and job: a million more
(~30 MB) at 2,000 nodes of 64 cores. :meth:`Schedule.uid_objects` gives the graph's own uid objects, and the code
that records a job boxes its id and window once; these tests hold compiled and pure alike.
"""

from __future__ import annotations

from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from tests.match._wide import jobspec_of, slot

JOBS = (5001, 5002, 5003)
"""Job ids past the small-int cache (Python shares the ints -5 to 256 whatever stores them)."""


def _engine_with_jobs() -> Engine:
    """Four nodes of 300 cores (uids past the small-int cache), two jobs of two whole nodes, one starting later."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=300) for i in range(4)]), policy="lonode")
    for jobid in JOBS:  # the third one waits for the first to end: a reservation
        assert engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, jobspec_of([slot(2, 300)]), jobid=jobid, now=10).matched
    return engine


def test_every_table_by_vertex_keys_it_by_the_graphs_own_uid_object() -> None:
    engine = _engine_with_jobs()
    traverser = engine.schedule.view
    vertices = engine.graph.vertices
    tables = {
        "plans": traverser.plans,
        "allocations": traverser.allocations,
        "reservations": traverser.reservations,
        "x_uses": traverser.x_uses,
        "tags": traverser.tags,
    }
    for name, table in tables.items():
        assert len(table) >= 600, name  # every core of a job (two nodes of 300)
        strays = [uid for uid in table if uid is not vertices[uid].uid]
        assert not strays, f"{name}: {len(strays)} keys are copies of the graph's uid, e.g. {strays[:3]}"
    for jobid, uids in traverser.job_vertices.items():
        assert all(uid is vertices[uid].uid for uid in uids), jobid


def test_a_jobs_records_share_its_id_and_window() -> None:
    engine = _engine_with_jobs()
    traverser = engine.schedule.view
    ids: dict[int, set[int]] = {}
    windows: dict[int, set[int]] = {}
    for uses in traverser.x_uses.values():
        for jobid, (start, end, _) in uses.items():
            ids.setdefault(jobid, set()).add(id(jobid))
            windows.setdefault(jobid, set()).update((id(start), id(end)))
    for tags in traverser.tags.values():
        for jobid in tags:
            ids[jobid].add(id(jobid))
    assert sorted(ids) == list(JOBS)
    # a few objects per job id and window (pure: one), one per node and per vertex above that recorded the job,
    # not one per core (600 per job)
    assert all(len(objects) <= 10 for objects in ids.values()), {j: len(o) for j, o in ids.items()}
    assert all(len(objects) <= 20 for objects in windows.values()), {j: len(o) for j, o in windows.items()}
