"""NodeNUMAResource inside a Framework with NodeResourcesFit
(docs/rules/scheduler-nodenumaresource.md#wiring):
LSE pods get disjoint whole-core cpusets through Reserve and PreBind, bound pods come back through the pod
events, and a pod that no longer fits gets the plugin's reason in the FitError."""

from __future__ import annotations

import json
from typing import cast

from apis.cpuset import parse_cpuset
from apis.kubeobjects import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from scheduler.plugins.noderesources import NodeResourcesFit
from tests.unit.scheduler.plugins.nodenumaresource._support import node, nrt, pod

REQUIRED = {"scheduling.koordinator.sh/resource-spec": '{"requiredCPUBindPolicy":"FullPCPUs"}'}


def test_lse_pods_get_disjoint_cpusets_until_the_cpus_run_out() -> None:
    numa = NodeNUMAResource.from_args({})
    fw = Framework([NodeResourcesFit(), numa])
    nodes = [node(f"n{i}", cpu="32") for i in range(2)]
    for i in range(2):
        numa.on_topology(f"n{i}", nrt(f"n{i}", sockets=1, cores_per_node=4))  # 8 CPUs each
    bound: list[Pod] = []
    cpusets: dict[str, list[frozenset[int]]] = {"n0": [], "n1": []}
    for k in range(4):
        p = pod(f"p{k}", cpu="4", annotations=REQUIRED)
        state, snap = CycleState(0), Snapshot.build(nodes, bound)
        result = fw.schedule(state, p, snap)
        assert result.node is not None, result.status
        assert fw.reserve(state, p, result.node).is_success()
        assert fw.pre_bind(state, p, result.node).is_success()
        status = json.loads(p["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"])
        cpus = parse_cpuset(status["cpuset"])
        assert len(cpus) == 4
        assert all(not cpus & other for other in cpusets[result.node])
        cpusets[result.node].append(cpus)
        done = cast(Pod, {**p, "spec": {**p["spec"], "nodeName": result.node}})
        numa.on_pod_add(done)
        bound.append(done)
    assert sorted(len(v) for v in cpusets.values()) == [2, 2]  # LeastAllocated spreads the nodes
    p = pod("late", cpu="2", annotations=REQUIRED)
    result = fw.schedule(CycleState(0), p, Snapshot.build(nodes, bound))
    assert result.node is None
    assert (
        result.status.message() == "0/2 nodes are available: 2 not enough cpus available to satisfy request."
    )
