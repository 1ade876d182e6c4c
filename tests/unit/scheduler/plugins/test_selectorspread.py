"""SelectorSpread as kube-scheduler v1.20.2: the expected scores of its own zone tests
(pkg/scheduler/framework/plugins/selectorspread/selector_spread_test.go, TestZoneSelectorSpreadPriority),
node-only spreading, skipped pods, the zone key, and its place (off) in the v1.20.2 default profile."""

from __future__ import annotations

from typing import Any

from scheduler.framework.listers import ClusterObjects
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.selectorspread import DEFAULT_WEIGHT, SelectorSpread, zone_key
from tests.unit.scheduler.plugins.test_podtopologyspread_support import (
    HOST,
    exists,
    final_scores,
    node,
    pod,
    spread,
)

L1 = {"label1": "l1", "baz": "blah"}
L2 = {"label2": "l2", "baz": "blah"}
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
ZONE = "topology.kubernetes.io/zone"
MACHINES = {
    "machine1.zone1": "zone1",
    "machine1.zone2": "zone2",
    "machine2.zone2": "zone2",
    "machine1.zone3": "zone3",
    "machine2.zone3": "zone3",
    "machine3.zone3": "zone3",
}


def zoned_nodes() -> list[dict[str, Any]]:
    return [node(n, {BETA_ZONE: z}) for n, z in MACHINES.items()]


def service(selector: dict[str, str]) -> ClusterObjects:
    c = ClusterObjects()
    c.on_add("Service", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": selector}})
    return c


def run(objects: ClusterObjects, placed: list[tuple[str, dict[str, str]]]) -> list[int]:
    snap = Snapshot.build(zoned_nodes(), [pod(f"e{i}", n, labels=lbl) for i, (n, lbl) in enumerate(placed)])
    got = final_scores(SelectorSpread(objects), pod(labels=L1), snap, list(MACHINES))
    return [got[n] for n in MACHINES]


def test_nothing_scheduled_and_no_services_score_max() -> None:
    assert run(ClusterObjects(), []) == [100] * 6
    assert run(ClusterObjects(), [("machine1.zone1", {})]) == [100] * 6
    assert run(service({"key": "value"}), [("machine1.zone1", L2)]) == [100] * 6


def test_kube_zone_cases() -> None:
    assert run(service(L1), [("machine1.zone1", L2), ("machine1.zone2", L1)]) == [100, 0, 33, 100, 100, 100]
    five = [
        ("machine1.zone1", L2),
        ("machine1.zone2", L1),
        ("machine2.zone2", L1),
        ("machine1.zone3", L2),
        ("machine2.zone3", L1),
    ]
    assert run(service(L1), five) == [100, 0, 0, 66, 33, 66]
    four = [("machine1.zone1", L1), ("machine1.zone2", L1), ("machine2.zone2", L2), ("machine1.zone3", L1)]
    assert run(service(L1), four) == [0, 0, 33, 0, 33, 33]
    five4 = [*four[:2], ("machine2.zone2", L1), ("machine2.zone2", L2), ("machine1.zone3", L1)]
    assert run(service(L1), five4) == [33, 0, 0, 33, 66, 66]


def test_replication_controller_case() -> None:
    c = ClusterObjects()
    c.on_add(
        "ReplicationController", {"metadata": {"name": "rc", "namespace": "ns"}, "spec": {"selector": L1}}
    )
    placed = [("machine1.zone3", L1), ("machine1.zone2", L1), ("machine1.zone3", L1)]
    assert run(c, placed) == [100, 50, 66, 0, 33, 33]


def test_without_zones_only_nodes_count() -> None:
    snap = Snapshot.build(
        [node("a"), node("b"), node("c")],
        [pod("e1", "a", labels=L1), pod("e2", "a", labels=L1), pod("e3", "b", labels=L1)],
    )
    assert final_scores(SelectorSpread(service(L1)), pod(labels=L1), snap, ["a", "b", "c"]) == {
        "a": 0,
        "b": 50,
        "c": 100,
    }


def test_pod_with_its_own_constraints_is_skipped() -> None:
    snap = Snapshot.build([node("a"), node("b")], [pod("e1", "a", labels=L1)])
    p = pod(labels=L1, topologySpreadConstraints=[spread(1, HOST, "ScheduleAnyway", exists("label1"))])
    assert final_scores(SelectorSpread(service(L1)), p, snap, ["a", "b"]) == {"a": 0, "b": 0}


def test_zone_key_prefers_beta_labels() -> None:
    beta = node("n", {BETA_ZONE: "b", ZONE: "s", "topology.kubernetes.io/region": "r"})
    assert zone_key(beta) == "r:\x00:b"  # type: ignore[arg-type]
    assert zone_key(node("n", {ZONE: "s"})) == ":\x00:s"  # type: ignore[arg-type]
    assert zone_key(node("n")) == ""  # type: ignore[arg-type]
    # a beta zone label present but empty is taken as it is
    assert zone_key(node("n", {BETA_ZONE: "", ZONE: "s"})) == ""  # type: ignore[arg-type]


def test_not_in_the_v1_20_default_profile() -> None:
    # the DefaultPodTopologySpread gate (beta, on by default in v1.20) leaves spreading to
    # PodTopologySpread; with the gate off kube adds SelectorSpread with weight 1
    assert DEFAULT_WEIGHT == 1
