"""PodTopologySpread Filter (and PreFilter) as kube-scheduler v1.20.2: skew against the global minimum,
self-match, eligible nodes, reason strings and codes, default constraints; args defaults and
validation; Go's math.Log."""

from __future__ import annotations

import math
import struct

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.podtopologyspread import PodTopologySpread, SpreadArgs
from scheduler.plugins.podtopologyspread.constraints import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    DefaultConstraint,
    go_log,
)
from tests.unit.scheduler.plugins.test_podtopologyspread_support import (
    HOST,
    exists,
    filter_statuses,
    hnode,
    node,
    pod,
    spread,
)

NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


def zone_nodes() -> list[dict[str, object]]:
    return [
        hnode("node-a", zone="zone1"),
        hnode("node-b", zone="zone1"),
        hnode("node-x", zone="zone2"),
        hnode("node-y", zone="zone2"),
    ]


def test_reason_strings_are_kubes() -> None:
    from scheduler.plugins.podtopologyspread import filtering

    assert filtering.ERR_REASON_CONSTRAINTS_NOT_MATCH == NOT_MATCH
    assert filtering.ERR_REASON_NODE_LABEL_NOT_MATCH == MISSING


def test_zone_skew_against_the_minimum() -> None:
    # kube's "pods spread across zones as 3/3, all nodes fit": zone1 has 3 matching, zone2 has 3.
    pods = [
        pod(f"a{i}", n, labels={"foo": ""})
        for i, n in enumerate(["node-a", "node-a", "node-b", "node-x", "node-y", "node-y"])
    ]
    snap = Snapshot.build(zone_nodes(), pods)
    p = pod(labels={"foo": ""}, topologySpreadConstraints=[spread(1, "zone", "DoNotSchedule", exists("foo"))])
    got = filter_statuses(PodTopologySpread(), p, snap)
    assert all(st.is_success() for st in got.values())
    # one more in zone2: zone2 (4) + 1 - 3 = 2 > 1
    snap = Snapshot.build(zone_nodes(), [*pods, pod("extra", "node-x", labels={"foo": ""})])
    got = filter_statuses(PodTopologySpread(), p, snap)
    assert got["node-a"].is_success() and got["node-b"].is_success()
    assert got["node-x"].code == Code.UNSCHEDULABLE and got["node-x"].reasons == (NOT_MATCH,)
    assert got["node-x"].plugin == "PodTopologySpread"


def test_self_match_only_when_the_pod_matches_its_selector() -> None:
    pods = [pod("a", "node-a", labels={"foo": ""})]
    snap = Snapshot.build([hnode("node-a"), hnode("node-b")], pods)
    c = [spread(1, HOST, "DoNotSchedule", exists("foo"))]
    matching = filter_statuses(
        PodTopologySpread(), pod(labels={"foo": ""}, topologySpreadConstraints=c), snap
    )
    assert matching["node-a"].reasons == (NOT_MATCH,) and matching["node-b"].is_success()
    # 1 + 0 - 0 = 1, not above maxSkew 1
    other = filter_statuses(PodTopologySpread(), pod(labels={"bar": ""}, topologySpreadConstraints=c), snap)
    assert other["node-a"].is_success()


def test_missing_topology_key_is_unresolvable_and_decided_by_the_first_failing_constraint() -> None:
    snap = Snapshot.build([hnode("node-a", zone="z1"), node("no-host", zone="z1"), hnode("no-zone")], [])
    c = [spread(1, "zone", "DoNotSchedule", exists("foo")), spread(1, HOST, "DoNotSchedule", exists("foo"))]
    got = filter_statuses(PodTopologySpread(), pod(labels={"foo": ""}, topologySpreadConstraints=c), snap)
    assert got["node-a"].is_success()
    for name in ("no-host", "no-zone"):
        assert got[name].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert got[name].reasons == (MISSING,)


def test_only_nodes_passing_node_affinity_define_the_minimum() -> None:
    # zone2 is empty but the pod may not go there (nodeSelector): the minimum is zone1's... 2 - 2 = 0
    pods = [pod("a", "node-a", labels={"foo": ""}), pod("b", "node-b", labels={"foo": ""})]
    nodes = [
        hnode("node-a", zone="zone1", pool="x"),
        hnode("node-b", zone="zone1", pool="x"),
        hnode("node-x", zone="zone2"),
    ]
    snap = Snapshot.build(nodes, pods)
    c = [spread(1, "zone", "DoNotSchedule", exists("foo"))]
    restricted = pod(labels={"foo": ""}, topologySpreadConstraints=c, nodeSelector={"pool": "x"})
    assert filter_statuses(PodTopologySpread(), restricted, snap)["node-a"].is_success()
    free = pod(labels={"foo": ""}, topologySpreadConstraints=c)
    assert filter_statuses(PodTopologySpread(), free, snap)["node-a"].reasons == (NOT_MATCH,)


def test_ineligible_nodes_of_an_existing_domain_still_count() -> None:
    # v1.20.2 counts every node of a domain that an eligible node opened, eligible or not
    nodes = [
        hnode("node-a", zone="zone1", pool="x"),
        hnode("node-b", zone="zone1"),
        hnode("node-x", zone="zone2", pool="x"),
    ]
    pods = [pod("b1", "node-b", labels={"foo": ""}), pod("b2", "node-b", labels={"foo": ""})]
    snap = Snapshot.build(nodes, pods)
    p = pod(
        labels={"foo": ""},
        nodeSelector={"pool": "x"},
        topologySpreadConstraints=[spread(1, "zone", "DoNotSchedule", exists("foo"))],
    )
    got = filter_statuses(PodTopologySpread(), p, snap)
    assert got["node-a"].reasons == (NOT_MATCH,)  # zone1 counts node-b's 2 pods: 2 + 1 - 0 > 1
    assert got["node-x"].is_success()


def test_other_namespaces_and_terminating_pods_do_not_count() -> None:
    terminating = pod("t", "node-a", labels={"foo": ""})
    terminating["metadata"]["deletionTimestamp"] = "2021-01-01T00:00:00Z"
    pods = [
        pod("o", "node-a", ns="other", labels={"foo": ""}),
        pod("o2", "node-a", ns="other", labels={"foo": ""}),
        terminating,
    ]
    snap = Snapshot.build([hnode("node-a"), hnode("node-b")], pods)
    p = pod(labels={"foo": ""}, topologySpreadConstraints=[spread(1, HOST, "DoNotSchedule", exists("foo"))])
    assert all(st.is_success() for st in filter_statuses(PodTopologySpread(), p, snap).values())


def test_schedule_anyway_constraints_do_not_filter_and_pod_constraints_replace_defaults() -> None:
    objects = ClusterObjects()
    objects.on_add(
        "Service", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"foo": "x"}}}
    )
    args = SpreadArgs("List", (DefaultConstraint(1, HOST, "DoNotSchedule"),))
    snap = Snapshot.build([hnode("node-a"), hnode("node-b")], [pod("a", "node-a", labels={"foo": "x"})])
    plugin = PodTopologySpread(objects, args)
    by_default = filter_statuses(plugin, pod(labels={"foo": "x"}), snap)
    assert by_default["node-a"].reasons == (NOT_MATCH,) and by_default["node-b"].is_success()
    soft = pod(
        labels={"foo": "x"}, topologySpreadConstraints=[spread(1, HOST, "ScheduleAnyway", exists("foo"))]
    )
    assert all(st.is_success() for st in filter_statuses(plugin, soft, snap).values())
    # a pod no Service/controller selects gets no default constraint
    assert all(st.is_success() for st in filter_statuses(plugin, pod(labels={"foo": "y"}), snap).values())


def test_invalid_selector_fails_prefilter_with_an_error() -> None:
    snap = Snapshot.build([hnode("node-a")], [])
    bad = {"matchExpressions": [{"key": "foo", "operator": "Bogus"}]}
    p = pod(topologySpreadConstraints=[spread(1, HOST, "DoNotSchedule", bad)])
    st = PodTopologySpread().pre_filter(CycleState(0.0), p, snap)  # type: ignore[arg-type]
    assert st.code == Code.ERROR
    assert st.reasons[0].startswith("obtaining pod's hard topology spread constraints: ")
    # the same selector on a ScheduleAnyway constraint only fails PreScore
    soft = pod(topologySpreadConstraints=[spread(1, HOST, "ScheduleAnyway", bad)])
    assert PodTopologySpread().pre_filter(CycleState(0.0), soft, snap).is_success()  # type: ignore[arg-type]


def test_filter_follows_pods_added_after_the_first_cycle() -> None:
    snap = Snapshot.build([hnode("node-a"), hnode("node-b")], [])
    p = pod(labels={"foo": ""}, topologySpreadConstraints=[spread(1, HOST, "DoNotSchedule", exists("foo"))])
    plugin = PodTopologySpread()
    assert all(st.is_success() for st in filter_statuses(plugin, p, snap).values())
    from scheduler.framework.snapshot import PodInfo

    info = snap.infos[0]
    info.add_pod(PodInfo.of(pod("a", "node-a", labels={"foo": ""})), 1)  # type: ignore[arg-type]
    snap.refresh([info])
    assert filter_statuses(plugin, p, snap)["node-a"].reasons == (NOT_MATCH,)


# --- args -------------------------------------------------------------------------------------------
def test_args_defaults() -> None:
    assert SpreadArgs.from_args({}).defaulting_type == "System"
    assert PodTopologySpread.from_args({}).defaults == SYSTEM_DEFAULT_CONSTRAINTS
    assert (
        DefaultConstraint(3, "kubernetes.io/hostname", "ScheduleAnyway"),
        DefaultConstraint(5, "topology.kubernetes.io/zone", "ScheduleAnyway"),
    ) == SYSTEM_DEFAULT_CONSTRAINTS
    listed = SpreadArgs.from_args(
        {"defaultConstraints": [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]}
    )
    assert listed.defaulting_type == "List"
    assert listed.constraints == (DefaultConstraint(2, "rack", "DoNotSchedule"),)
    assert SpreadArgs.from_args({"defaultingType": "List"}).constraints == ()
    assert SpreadArgs.from_args({"DefaultingType": "List"}).defaulting_type == "List"  # Go's JSON keys


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"defaultingType": "Other"}, "defaultingType='Other': must be one of"),
        (
            {
                "defaultingType": "System",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "defaultingType='System': when .defaultConstraints are not empty",
        ),
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "defaultConstraints[0].maxSkew=0: must be greater than zero",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]},
            "defaultConstraints[0].topologyKey: Required value",
        ),
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "bad key", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "defaultConstraints[0].topologyKey='bad key'",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "Maybe"}]},
            "defaultConstraints[0].whenUnsatisfiable='Maybe': Unsupported value",
        ),
        (
            {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "k"}]},
            "defaultConstraints[0].whenUnsatisfiable: Required value",
        ),
        (
            {
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "k",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {},
                    }
                ]
            },
            "defaultConstraints[0].labelSelector: Forbidden",
        ),
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"},
                ]
            },
            "defaultConstraints[1]: Duplicate value: {k, DoNotSchedule}",
        ),
    ],
)
def test_args_validation(args: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as e:
        PodTopologySpread.from_args(args)
    assert message in str(e.value)


# --- Go's math.Log ------------------------------------------------------------------------------------
# math.Float64bits(math.Log(x)) printed by Go 1.19 on amd64; the C library's log differs on these.
GO_LOG_BITS = {
    3: "3ff193ea7aad030a",
    14: "40051cca16d7bba8",
    48: "400ef8383c50bb74",
    74: "4011375cd6fcab1c",
    176: "4014ae935b3cb89e",
}


def test_go_log_is_bit_exact() -> None:
    for x, bits in GO_LOG_BITS.items():
        want = struct.unpack(">d", bytes.fromhex(bits))[0]
        assert go_log(float(x)) == want
        assert math.log(x) != want  # why go_log exists
    assert go_log(2.0) == math.log(2.0)


# --- kube-scheduler v1.20.2's own Filter cases (filtering_test.go)
S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def four_nodes(**drop: str) -> list[dict[str, object]]:
    out = []
    for name, zone in (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2")):
        lbls = {"zone": zone, "node": name}
        for k, n in drop.items():
            if n == name:
                del lbls[k]
        out.append(node(name, lbls))
    return out


def kube_case(
    nodes: list[dict[str, object]], where: list[str], constraints: list[dict[str, object]], **spec: object
) -> dict[str, Code]:
    snap = Snapshot.build(nodes, [pod(f"e{i}", n, labels={"foo": ""}) for i, n in enumerate(where)])
    p = pod(labels={"foo": ""}, topologySpreadConstraints=constraints, **spec)
    return {name: st.code for name, st in filter_statuses(PodTopologySpread(), p, snap).items()}


def on(key: str) -> dict[str, object]:
    return spread(1, key, "DoNotSchedule", exists("foo"))


def test_kube_zone_absent_on_node_b() -> None:
    nodes = four_nodes()
    nodes[1]["metadata"]["labels"] = {"zon": "zone1", "node": "node-b"}  # type: ignore[index]
    got = kube_case(nodes, ["node-a", "node-b", "node-x", "node-y"], [on("zone")])
    assert got == {"node-a": S, "node-b": UU, "node-x": U, "node-y": U}


def test_kube_all_nodes_lack_rack() -> None:
    assert kube_case(four_nodes()[::2], [], [on("rack")]) == {"node-a": UU, "node-x": UU}


def test_kube_node_affinity_restricts_the_minimum() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}
                ]
            }
        }
    }
    where = ["node-a", "node-a", "node-b", "node-y", "node-y", "node-y"]
    got = kube_case(four_nodes(), where, [on("node")], affinity=affinity)
    assert got == {"node-a": S, "node-b": S, "node-x": S, "node-y": U}


def test_kube_two_constraints_node_label_absent_on_node_x() -> None:
    got = kube_case(four_nodes(node="node-x"), ["node-a", "node-y"], [on("zone"), on("node")])
    assert got == {"node-a": U, "node-b": S, "node-x": UU, "node-y": U}
