"""Share pools (docs/rules/koordlet-cpuset.md#share-pools): LSE vs LSR pods, the node reservation and the
exclusive SYSTEM-QoS cpuset, the kubelet static CPU manager's CPUs, pool grouping and ordering. Expected
pools are worked out by hand from the rules."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.system.nodeinfo import CpuInfo
from agent.topology.sharepools import pool_cpus, share_pools
from apis.kubeobjects import Pod

# 2 sockets x 1 NUMA node each, 4 CPUs per node: node 0 = CPUs 0-3 (socket 0), node 1 = CPUs 4-7 (socket 1).
CPUS = tuple(CpuInfo(cpu, cpu % 4 // 2, cpu // 4, cpu // 4) for cpu in range(8))
NONE: frozenset[int] = frozenset()


def pod(qos: str | None, status: Any) -> Pod:
    labels = {"koordinator.sh/qosClass": qos} if qos is not None else {}
    text = status if isinstance(status, str) else json.dumps(status)
    annotations = {"scheduling.koordinator.sh/resource-status": text}
    return {"metadata": {"labels": labels, "annotations": annotations}}


def pools(*pairs: tuple[int, int, str]) -> list[dict[str, Any]]:
    return [{"socket": s, "node": n, "cpuset": c} for s, n, c in pairs]


def run(pods: list[Pod], reserved: frozenset[int] = NONE, system: frozenset[int] = NONE,
        static: frozenset[int] = NONE) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    return share_pools(CPUS, pods, reserved=reserved, system_exclusive=system, kubelet_static_assigned=static)


def test_no_pods_both_pools_are_every_cpu_per_numa_node() -> None:
    ls, be = run([])
    assert ls == pools((0, 0, "0-3"), (1, 1, "4-7"))
    assert be == ls


def test_lse_cpus_leave_both_pools_lsr_cpus_only_the_ls_pool() -> None:
    ls, be = run([pod("LSE", {"cpuset": "0-1"}), pod("LSR", {"cpuset": "4,6"})])
    assert ls == pools((0, 0, "2-3"), (1, 1, "5,7"))
    assert be == pools((0, 0, "2-3"), (1, 1, "4-7"))


def test_any_qos_with_a_cpuset_leaves_the_ls_pool_only_lse_leaves_be() -> None:
    ls, be = run([pod(None, {"cpuset": "3"}), pod("LS", {"cpuset": "7"}), pod("BE", {"cpuset": "2"})])
    assert ls == pools((0, 0, "0-1"), (1, 1, "4-6"))
    assert be == pools((0, 0, "0-3"), (1, 1, "4-7"))


def test_a_node_emptied_by_pods_is_dropped() -> None:
    ls, be = run([pod("LSE", {"cpuset": "4-7"})])
    assert ls == pools((0, 0, "0-3"))
    assert be == pools((0, 0, "0-3"))


def test_a_node_emptied_by_the_reservation_or_system_qos_is_kept_empty() -> None:
    ls, be = run([], reserved=frozenset({0, 1}), system=frozenset({2, 3, 4}))
    assert ls == pools((0, 0, ""), (1, 1, "5-7"))
    assert be == ls


def test_pods_then_reservation_node_kept_although_pods_hold_part_of_it() -> None:
    # node 1: the LSR pod takes 4-5 (LS pool left 6-7), the reservation then takes 6-7 → kept as "".
    ls, be = run([pod("LSR", {"cpuset": "4-5"})], reserved=frozenset({6, 7}))
    assert ls == pools((0, 0, "0-3"), (1, 1, ""))
    assert be == pools((0, 0, "0-3"), (1, 1, "4-5"))


def test_kubelet_static_cpus_leave_both_pools_before_grouping() -> None:
    ls, be = run([], static=frozenset({0, 1, 2, 3, 5}))
    assert ls == pools((1, 1, "4,6-7"))
    assert be == ls


def test_unparsable_status_or_cpuset_holds_nothing() -> None:
    ls, _ = run([pod("LSE", "{not json"), pod("LSE", {"cpuset": "x-1"}), pod("LSR", {"cpuset": 3})])
    assert ls == pools((0, 0, "0-3"), (1, 1, "4-7"))


def test_pools_sorted_by_socket_then_node_socket_from_lowest_cpu() -> None:
    cpus = (CpuInfo(0, 0, 1, 2), CpuInfo(1, 0, 1, 2), CpuInfo(2, 0, 0, 3), CpuInfo(3, 0, 1, 0))
    ls, _ = share_pools(cpus, [], reserved=NONE, system_exclusive=NONE, kubelet_static_assigned=NONE)
    assert ls == pools((0, 3, "2"), (1, 0, "3"), (1, 2, "0-1"))


def test_deleted_pod_returns_its_cpus() -> None:
    lsr = pod("LSR", {"cpuset": "0-3"})
    assert run([lsr])[0] == pools((1, 1, "4-7"))
    assert run([])[0] == pools((0, 0, "0-3"), (1, 1, "4-7"))


def test_pool_cpus() -> None:
    assert pool_cpus(pools((0, 0, "0-1"), (1, 1, ""), (1, 2, "bad"))) == {0, 1}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[tuple[CpuInfo, ...], list[Pod], dict[str, frozenset[int]]]:
    n = draw(st.integers(1, 16))
    nodes = draw(st.integers(1, 4))
    cpus = tuple(CpuInfo(c, c // 2, (c % nodes) // 2, c % nodes) for c in range(n))
    ids = st.frozensets(st.integers(0, n + 2), max_size=n)
    pods = [pod(q, {"cpuset": ",".join(map(str, sorted(s)))}) for q, s in draw(
        st.lists(st.tuples(st.sampled_from(["LSE", "LSR", "LS", "BE", None]), ids), max_size=5))]  # fmt: skip
    sets = {k: draw(ids) for k in ("reserved", "system", "static")}
    return cpus, pods, sets


@settings(max_examples=60, deadline=None)
@given(worlds())
def test_pool_invariants(world: tuple[tuple[CpuInfo, ...], list[Pod], dict[str, frozenset[int]]]) -> None:
    cpus, pods, sets = world
    ls, be = share_pools(
        cpus, pods, reserved=sets["reserved"], system_exclusive=sets["system"],
        kubelet_static_assigned=sets["static"],
    )  # fmt: skip
    node_of = {c.cpu: c.numa_node for c in cpus}
    held = {c for p in pods for c in pool_cpus([{"cpuset": _status_cpuset(p)}])}
    lse = {c for p in pods if _qos(p) == "LSE" for c in pool_cpus([{"cpuset": _status_cpuset(p)}])}
    removed = sets["reserved"] | sets["system"] | sets["static"]
    assert pool_cpus(ls) == set(node_of) - removed - held
    assert pool_cpus(be) == set(node_of) - removed - lse
    for pools in (ls, be):
        assert [(p["socket"], p["node"]) for p in pools] == sorted((p["socket"], p["node"]) for p in pools)
        assert all(node_of[c] == p["node"] for p in pools for c in pool_cpus([p]))


def _status_cpuset(p: Pod) -> str:
    return str(
        json.loads(p["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"])["cpuset"]
    )


def _qos(p: Pod) -> str | None:
    return p["metadata"]["labels"].get("koordinator.sh/qosClass")
