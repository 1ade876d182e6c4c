"""Property: the production decisions of JobReservation equal the readable oracle of
tests/oracles/jobreservation.py over generated jobs, nodes and locks — elect, one reserve step, the
nodes a job may use — with values around every tolerance; and on generated snapshots the plugin's
vectorised Filter and the nodes' Idle equal the oracle's per-node forms."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.jobreservation import decisions as d
from scheduler.plugins.jobreservation.jobs import node_idles
from scheduler.plugins.jobreservation.plugin import JobReservation
from tests.oracles import jobreservation as oracle

NOW = _dt.datetime(2026, 11, 20, 12, tzinfo=_dt.UTC)
SCALARS = ("nvidia.com/gpu", "example.com/foo")
CPU = st.sampled_from([0.0, 5.0, 9.0, 10.0, 11.0, 995.0, 1000.0, 1005.0, 1010.0, 4000.0])
MEM = st.sampled_from([0.0, 0.5, 1.0, 2.0, 1000.0, 1001.0, float(1 << 30)])
SCALAR = st.sampled_from([0.0, 5.0, 10.0, 11.0, 995.0, 1000.0, 2000.0])
STATUSES = ("Pending", "Allocated", "Binding", "Bound", "Running", "Succeeded", "Failed", "Releasing")


@st.composite
def resources(draw: st.DrawFn) -> dict[str, float]:
    r = {"cpu": draw(CPU), "memory": draw(MEM)}
    for name in SCALARS:
        if draw(st.booleans()):
            r[name] = draw(SCALAR)
    return r


@st.composite
def jobs(draw: st.DrawFn) -> list[d.Job]:
    out = []
    for i in range(draw(st.integers(0, 5))):
        stamp = draw(st.none() | st.integers(-3, 3).map(lambda h: NOW + _dt.timedelta(hours=h)))
        tasks = draw(st.lists(st.tuples(st.sampled_from(STATUSES), resources()), max_size=4))
        out.append(
            d.Job(
                name=f"j{draw(st.integers(0, 3))}" if i else "j0",
                priority=draw(st.integers(-1, 2)),
                phase=draw(st.sampled_from(["Pending", "Pending", "Inqueue", "Running"])),
                schedule_start=stamp,
                min_available=draw(st.integers(0, 4)),
                tasks=tuple(d.Task(s, r) for s, r in tasks),
            )
        )
    return out


NODE_NAMES = ("a", "b", "c", "d", "e")


@settings(max_examples=60, deadline=None)
@given(
    jobs(),
    st.lists(resources(), max_size=5),
    st.sets(st.sampled_from(NODE_NAMES)),
    st.sampled_from([None, "j0", "j1", "j3", "gone"]),
)
def test_decisions_equal_the_oracle(
    job_list: list[d.Job], idles: list[dict[str, float]], locked: set[str], target: str | None
) -> None:
    nodes = [d.NodeIdle(NODE_NAMES[i], r) for i, r in enumerate(idles)]
    assert d.elect(target, job_list, NOW) == oracle.elect(target, job_list, NOW)
    for a in nodes:
        for b in nodes:
            assert d.less_equal(a.idle, b.idle) == oracle.fits(a.idle, b.idle)
    step = d.lock_step(target, job_list, nodes, locked)
    job = next((j for j in job_list if j.name == target), None)
    if target is None:
        want: tuple[Any, ...] = (None, locked, None)
    elif job is None or oracle.ready(job.min_available, [(t.status, t.resreq) for t in job.tasks]):
        want = (None, set(), None)
    else:
        new = oracle.max_idle([(n.name, n.idle) for n in nodes], locked)
        want = (target, locked | ({new} if new else set()), new)
    assert (step.target, set(step.locked), step.newly_locked) == want
    names = [n.name for n in nodes]
    for name in ("j0", "j1", "other"):
        assert d.allowed_nodes(target, locked, name, names) == oracle.allowed(target, locked, name, names)


def _node(name: str, cpu: int, gpus: int | None) -> dict[str, Any]:
    alloc = {"cpu": f"{cpu}m", "memory": "4Gi", "pods": "110"}
    if gpus is not None:
        alloc["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


def _pod(name: str, node: str, cpu: int, gpus: int, gang: str | None) -> dict[str, Any]:
    requests = {"cpu": f"{cpu}m", "memory": "1Mi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    annotations = {"gang.scheduling.koordinator.sh/name": gang} if gang else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": requests}}]},
    }


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4000), st.none() | st.integers(0, 4)), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2000), st.integers(0, 2)), max_size=8),
    st.sets(st.sampled_from([f"n{i}" for i in range(7)])),
    st.sampled_from([None, "ns/big", "ns/small"]),
    st.sampled_from([None, "big", "small"]),
)
def test_filter_and_idle_equal_the_oracle(
    shapes: list[tuple[int, int | None]],
    placed: list[tuple[int, int, int]],
    locked: set[str],
    target: str | None,
    pod_gang: str | None,
) -> None:
    nodes = [_node(f"n{i}", cpu, gpus) for i, (cpu, gpus) in enumerate(shapes)]
    pods = [_pod(f"p{k}", f"n{i % len(nodes)}", cpu, g, None) for k, (i, cpu, g) in enumerate(placed)]
    snap = Snapshot.build(nodes, pods)
    plugin = JobReservation()
    plugin.target, plugin.locked = target, frozenset(locked)
    pod = _pod("x", "", 100, 0, pod_gang)
    del pod["spec"]["nodeName"]
    result = plugin.filter_all(CycleState(0.0), pod, snap)
    pod_job = f"ns/{pod_gang}" if pod_gang else None
    for i, name in enumerate(snap.names):
        assert (not result.passed[i]) == oracle.rejects(target, locked, pod_job, name)
    by_name = {info.name: info for info in snap.infos}
    idles = list(node_idles(snap))
    assert [n.name for n in idles] == sorted(snap.names)
    for n in idles:
        assert n.idle == oracle.idle(by_name[n.name])
