"""NodePorts: the pod's container hostPorts against the ports the node's pods use (HostPortInfo
semantics: TCP and 0.0.0.0 by default, 0.0.0.0 conflicting with every IP), kube 1.20.2's reason; the
view follows pods added and removed; equal to its oracle (tests/oracles/basic.py) over generated
snapshots."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodeports import NodePorts, container_ports

from ._oracle_checks import check_filter
from ._support import add_nodes, add_pods, make_node, make_pod

REJECT = Status(
    Code.UNSCHEDULABLE, ("node(s) didn't have free ports for the requested pod ports",), "NodePorts"
)
OK = Status.success()


def port(
    host_port: int | None = None, protocol: str | None = None, ip: str | None = None, **more: Any
) -> dict[str, Any]:
    p: dict[str, Any] = {"containerPort": 8080, **more}
    if host_port is not None:
        p["hostPort"] = host_port
    if protocol is not None:
        p["protocol"] = protocol
    if ip is not None:
        p["hostIP"] = ip
    return p


def pod_with(*ports: dict[str, Any], name: str = "p", node: str | None = None) -> dict[str, Any]:
    pod = make_pod(name, node=node, requests=[None])
    pod["spec"]["containers"][0]["ports"] = list(ports)
    return pod


@pytest.mark.parametrize(
    ("used", "wanted", "want"),
    [
        ([], [port(80)], OK),
        ([port(80)], [port(80)], REJECT),
        ([port(80)], [port(81)], OK),
        ([port(80, "UDP")], [port(80)], OK),  # protocols differ
        ([port(80, "TCP")], [port(80, "")], REJECT),  # empty protocol is TCP
        ([port(80, "tcp")], [port(80)], OK),  # protocols compare as written
        ([port(80, ip="127.0.0.1")], [port(80, ip="127.0.0.2")], OK),  # different IPs
        ([port(80, ip="127.0.0.1")], [port(80, ip="127.0.0.1")], REJECT),
        ([port(80, ip="127.0.0.1")], [port(80)], REJECT),  # wanted 0.0.0.0 conflicts with any IP
        ([port(80, ip="127.0.0.1")], [port(80, ip="0.0.0.0")], REJECT),
        ([port(80)], [port(80, ip="127.0.0.1")], REJECT),  # used 0.0.0.0 conflicts with every IP
        ([port(80, ip="")], [port(80, ip="10.0.0.1")], REJECT),  # empty IP is 0.0.0.0
        ([port()], [port()], OK),  # no hostPort: never a conflict
        ([port(0)], [port(0)], OK),
        ([port(-1)], [port(-1)], OK),
        ([port(80)], [port(81), port(80, "SCTP"), port(80)], REJECT),  # any wanted port conflicting
    ],
)
def test_conflicts(used: list[dict[str, Any]], wanted: list[dict[str, Any]], want: Status) -> None:
    snap = Snapshot.build([make_node("n")], [pod_with(*used, name="e", node="n")])
    assert check_filter(NodePorts(), pod_with(*wanted), snap) == [want]


def test_only_regular_containers_count() -> None:
    pod = pod_with(port(80))
    pod["spec"]["initContainers"] = [{"name": "i", "ports": [port(81)]}]
    snap = Snapshot.build([make_node("n")], [pod_with(port(81), name="e", node="n")])
    assert check_filter(NodePorts(), pod, snap) == [OK]
    assert container_ports(pod) == [("0.0.0.0", "TCP", 80)]


def test_used_ports_follow_pods_added_and_removed() -> None:
    snap = Snapshot.build([make_node("a"), make_node("b")], [pod_with(port(80), name="x", node="a")])
    pod = pod_with(port(80))
    assert check_filter(NodePorts(), pod, snap) == [REJECT, OK]
    add_pods(snap, [pod_with(port(80, ip="10.0.0.1"), name="y", node="b")], 2)
    assert check_filter(NodePorts(), pod, snap) == [REJECT, REJECT]
    # x leaves a: its port is free again
    info = snap.infos[0]
    info.remove_pod("ns/x", 3)
    snap.refresh([info])
    assert check_filter(NodePorts(), pod, snap) == [OK, REJECT]
    add_nodes(snap, [make_node("c")], 4)
    assert check_filter(NodePorts(), pod, snap) == [OK, REJECT, OK]


def test_two_pods_declaring_one_port_keep_it_used_while_either_is_there() -> None:
    snap = Snapshot.build(
        [make_node("a")], [pod_with(port(80), name="x", node="a"), pod_with(port(80), name="y", node="a")]
    )
    info = snap.infos[0]
    info.remove_pod("ns/x", 2)
    snap.refresh([info])
    assert check_filter(NodePorts(), pod_with(port(80)), snap) == [REJECT]


ports = st.builds(
    port,
    st.one_of(st.none(), st.sampled_from([0, 80, 81, 443])),
    st.one_of(st.none(), st.sampled_from(["", "TCP", "UDP", "tcp"])),
    st.one_of(st.none(), st.sampled_from(["", "0.0.0.0", "10.0.0.1", "10.0.0.2"])),
)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 5),
    st.lists(st.tuples(st.integers(0, 4), st.lists(ports, max_size=3)), max_size=8),
    st.lists(ports, max_size=3),
    st.data(),
)
def test_plugin_equals_oracle(
    n: int, existing: list[Any], wanted: list[dict[str, Any]], data: st.DataObject
) -> None:
    nodes = [make_node(f"n{i}") for i in range(n)]
    pods = [pod_with(*ps, name=f"e{k}", node=f"n{i}") for k, (i, ps) in enumerate(existing)]
    snap = Snapshot.build(nodes, pods)
    pod = pod_with(*wanted)
    check_filter(NodePorts(), pod, snap)
    if n:
        more = [
            pod_with(
                *data.draw(st.lists(ports, max_size=2)),
                name=f"m{k}",
                node=f"n{data.draw(st.integers(0, n - 1))}",
            )
            for k in range(2)
        ]
        add_pods(snap, more, 5)
        check_filter(NodePorts(), pod, snap)
        info = snap.infos[data.draw(st.integers(0, n - 1))]
        for key in list(info.pods)[:1]:
            info.remove_pod(key, 6)
        snap.refresh([info])
        check_filter(NodePorts(), pod, snap)


def test_a_pod_updated_in_place_of_its_old_object_is_read_again() -> None:
    snap = Snapshot.build([make_node("a")], [pod_with(port(80), name="x", node="a")])
    assert check_filter(NodePorts(), pod_with(port(80)), snap) == [REJECT]
    add_pods(snap, [pod_with(port(81), name="x", node="a")], 2)  # same key, a new object
    assert check_filter(NodePorts(), pod_with(port(80)), snap) == [OK]
    assert check_filter(NodePorts(), pod_with(port(81)), snap) == [REJECT]
