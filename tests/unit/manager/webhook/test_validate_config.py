"""The slo-controller-config validating rule: upstream's checker cases (facts and outcomes), the manager's
documented invalid values (docs/configuration.md#invalid-values) and the messages naming key, field and
value. See docs/rules/manager.md#configmap-slo-controller-config.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis import constants as c
from apis import sloconfig
from manager.webhook.validate_config import CHECKED_KEYS, config_error_message, validate_slo_config

COLOCATION = c.COLOCATION_CONFIG_KEY
THRESHOLD = c.RESOURCE_THRESHOLD_CONFIG_KEY
QOS = c.RESOURCE_QOS_CONFIG_KEY
CAT_INVERTED = {"catRangeStartPercent": 50, "catRangeEndPercent": 40}
CAT_START_101 = {"catRangeStartPercent": 101}
BURST = c.CPU_BURST_CONFIG_KEY
SYSTEM = c.SYSTEM_CONFIG_KEY
EMPTY_SELECTOR = "must not be empty: a node entry needs matchLabels or matchExpressions"

# upstream's valid ConfigMap (Test_CreateCheckersChanged_and_CheckContents, "config valid and changed")
VALID: dict[str, str] = {
    COLOCATION: json.dumps(
        {
            "enable": True,
            "metricAggregateDurationSeconds": 100,
            "cpuReclaimThresholdPercent": 70,
            "memoryReclaimThresholdPercent": 80,
            "updateTimeThresholdSeconds": 300,
            "degradeTimeMinutes": 5,
            "resourceDiffThreshold": 0.1,
        }
    ),
    THRESHOLD: '{"clusterStrategy":{"enable":true,"cpuSuppressThresholdPercent":60}}',
    QOS: '{"clusterStrategy": {"enable": true, "beClass": {"cpuQOS": {"groupIdentity": 0}}}}',
    BURST: '{"clusterStrategy":{"cfsQuotaBurstPeriodSeconds":60}}',
    SYSTEM: '{"clusterStrategy":{"minFreeKbytesFactor":150}}',
}


def cm(data: dict[str, Any], name: str = c.SLO_CONTROLLER_CONFIG_NAME) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": c.DEFAULT_CONFIG_NAMESPACE}, "data": data}


def create(data: dict[str, Any], **kwargs: Any) -> list[str]:
    return validate_slo_config(cm(data), operation="CREATE", old=None, **kwargs)


def doc(key: str, value: Any, **kwargs: Any) -> list[str]:
    """CREATE with one key holding ``value`` as JSON."""
    return create({key: json.dumps(value)}, **kwargs)


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def entry(name: str, selector: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **fields}
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def labels(**pairs: str) -> dict[str, Any]:
    return {"matchLabels": pairs}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        req["values"] = list(values)
    return {"matchExpressions": [req]}


# --- which requests are checked ------------------------------------------------------------------------
def test_the_upstream_valid_configmap_is_allowed() -> None:
    assert create(VALID) == []


def test_every_key_the_manager_parses_is_checked() -> None:
    assert set(CHECKED_KEYS) == set(sloconfig.KNOWN_KEYS)


def test_other_configmaps_and_delete_are_allowed() -> None:
    bad = {THRESHOLD: "invalid_content"}
    assert validate_slo_config(cm(bad, name="other"), operation="CREATE", old=None) == []
    other_ns = {"metadata": {"name": c.SLO_CONTROLLER_CONFIG_NAME, "namespace": "default"}, "data": bad}
    assert validate_slo_config(other_ns, operation="CREATE", old=None) == []
    assert validate_slo_config(cm(bad), operation="DELETE", old=cm(bad)) == []
    assert validate_slo_config(cm(bad), operation="CONNECT", old=None) == []
    named = {"metadata": {"name": "mine", "namespace": "ns"}, "data": bad}
    assert validate_slo_config(named, operation="CREATE", old=None, name="mine", namespace="ns") != []


def test_config_changed_but_invalid_names_every_key() -> None:
    messages = create({k: "invalid_content" for k in (COLOCATION, THRESHOLD, QOS, BURST, SYSTEM)})
    assert len(messages) == 5
    for key in (COLOCATION, THRESHOLD, QOS, BURST, SYSTEM):
        assert any(m.startswith(f'{key}: (document): "invalid_content" invalid JSON') for m in messages)


def test_unchanged_or_emptied_keys_are_not_checked() -> None:
    """upstream IsCfgNotEmptyAndChanged: a stored bad key never blocks an edit of another key."""
    bad = {k: "invalid_content" for k in (COLOCATION, THRESHOLD, QOS, BURST, SYSTEM)}
    assert validate_slo_config(cm(bad), operation="UPDATE", old=cm(bad)) == []
    assert validate_slo_config(cm({}), operation="UPDATE", old=cm(VALID)) == []
    assert validate_slo_config(cm({**bad, THRESHOLD: ""}), operation="UPDATE", old=cm(bad)) == []
    edited = {**bad, BURST: VALID[BURST]}
    assert validate_slo_config(cm(edited), operation="UPDATE", old=cm(bad)) == []
    edited = {**VALID, BURST: '{"clusterStrategy":{"cfsQuotaBurstPercent":50}}'}
    assert validate_slo_config(cm(edited), operation="UPDATE", old=cm(VALID)) == [
        "cpu-burst-config: clusterStrategy.cfsQuotaBurstPercent: 50 must be >= 100"
    ]
    # UPDATE without the old object: every non-empty key is checked, as on CREATE
    assert len(validate_slo_config(cm(bad), operation="UPDATE", old=None)) == 5


def test_unknown_keys_are_not_checked() -> None:
    assert create({"my-extension": "not json"}) == []


# --- the manager's own rule (docs/configuration.md#invalid-values) ---------------------------------------
def test_the_documented_example_is_refused_naming_key_field_and_value() -> None:
    value = {
        "clusterStrategy": {
            "enable": True,
            "cpuSuppressThresholdPercent": 150,
            "memoryEvictThresholdPercent": 80,
        }
    }
    assert doc(THRESHOLD, value) == [
        "resource-threshold-config: clusterStrategy.cpuSuppressThresholdPercent: 150 must be <= 100"
    ]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (THRESHOLD, {"clusterStrategy": {"cpuSuppressThresholdPercent": "60"}},
         'resource-threshold-config: clusterStrategy.cpuSuppressThresholdPercent: "60" must be an integer'),
        (THRESHOLD, {"clusterStrategy": {"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 75}},
         "resource-threshold-config: clusterStrategy.memoryEvictThresholdPercent: 70 must be greater than "
         "memoryEvictLowerPercent=75"),
        (QOS, {"clusterStrategy": {"beClass": {"resctrlQOS": CAT_INVERTED}}},
         "resource-qos-config: clusterStrategy.beClass.resctrlQOS.catRangeEndPercent: 40 must be greater "
         "than catRangeStartPercent=50"),
        (COLOCATION, {"memoryCalculatePolicy": "mem"},
         'colocation-config: memoryCalculatePolicy: "mem" must be one of usage, request, maxUsageRequest'),
        (c.RESOURCE_AMPLIFICATION_CONFIG_KEY, {"enable": True, "resourceAmplificationRatio": {"cpu": 0.5}},
         'resource-amplification-config: resourceAmplificationRatio: {"cpu": 0.5} ratios below 1 are '
         "rejected"),
        (c.CPU_NORMALIZATION_CONFIG_KEY, {"enable": True, "defaultRatio": 0.0},
         "cpu-normalization-config: defaultRatio: 0 must be > 0"),
        (c.HOST_APPLICATION_CONFIG_KEY, {"applications": [{"name": "nginx", "qos": "GOLD"}]},
         'host-application-config: applications[0].qos: "GOLD" must be one of'),
        (BURST, {"nodeStrategies": [entry("a", labels(a="b"), cpuBurstPercent=0)]},
         "cpu-burst-config: nodeStrategies[0].cpuBurstPercent: 0 must be >= 1"),
        (SYSTEM, {"nodeStrategies": [entry("a", expr("a", "Near", "b"))]},
         'system-config: nodeStrategies[0].nodeSelector.matchExpressions[0].operator: "Near" is not a valid '
         "operator"),
    ],
    ids=["type", "inverted-pair", "inverted-cat-range", "enum", "amplification", "normalization", "host-app",
         "node-entry", "selector"],
)  # fmt: skip
def test_manager_invalid_values_are_refused(key: str, value: Any, expected: str) -> None:
    messages = doc(key, value)
    assert len(messages) == 1 and messages[0].startswith(expected), messages


def test_every_problem_the_manager_reports_is_refused_in_its_words() -> None:
    data = {
        COLOCATION: json.dumps({"metricAggregateDurationSeconds": 0, "degradeTimeMinutes": -1}),
        THRESHOLD: json.dumps({"clusterStrategy": {"cpuSuppressMinPercent": 101}}),
        QOS: json.dumps({"clusterStrategy": {"lsClass": {"memoryQOS": {"wmarkScalePermill": 0}}}}),
        BURST: "[1, 2]",
        SYSTEM: json.dumps({"clusterStrategy": {"watermarkScaleFactor": 401}}),
    }
    _, errors = sloconfig.parse_slo_controller_config(data)
    assert len(errors) == 6
    assert create(data) == [config_error_message(e) for e in errors]


# --- upstream's field rules (colocation, threshold, qos, burst, system checker tests) ------------------
@pytest.mark.parametrize(
    ("key", "value", "refused"),
    [
        (COLOCATION, {"metricAggregateDurationSeconds": 0}, True),
        (COLOCATION, {"cpuReclaimThresholdPercent": -1}, True),
        (COLOCATION, {"memoryReclaimThresholdPercent": 101}, False),
        (COLOCATION, {"degradeTimeMinutes": 0}, True),
        (COLOCATION, {"updateTimeThresholdSeconds": -1}, True),
        (COLOCATION, {"resourceDiffThreshold": 2}, True),
        (COLOCATION, {"midStaticCPUReservedPercent": 101}, True),
        (COLOCATION, {"midStaticMemoryReservedPercent": 100}, False),
        (COLOCATION, {"nodeConfigs": [entry("n", labels(a="b"), resourceDiffThreshold=-1)]}, True),
        (COLOCATION, {"nodeConfigs": [entry("n", labels(a="b"), resourceDiffThreshold=1.5)]}, True),
        (THRESHOLD, {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": -1}}, True),
        (THRESHOLD, {"clusterStrategy": {"cpuEvictBESatisfactionUpperPercent": 102}}, True),
        (THRESHOLD, {"clusterStrategy": {"cpuEvictBESatisfactionUpperPercent": 22,
                                         "cpuEvictBESatisfactionLowerPercent": 35}}, True),
        (QOS, {"clusterStrategy": {"beClass": {"cpuQOS": {"groupIdentity": 3}}}}, True),
        (QOS, {"clusterStrategy": {"beClass": {"memoryQOS": {"oomKillGroup": 3}}}}, True),
        (QOS, {"clusterStrategy": {"beClass": {"resctrlQOS": {"catRangeStartPercent": -1}}}}, True),
        (QOS, {"nodeStrategies": [entry("n", labels(a="b"), beClass={"resctrlQOS": CAT_START_101})]}, True),
        (BURST, {"clusterStrategy": {"cpuBurstPercent": 0}}, True),
        (BURST, {"clusterStrategy": {"cfsQuotaBurstPercent": -1}}, True),
        (BURST, {"clusterStrategy": {"cfsQuotaBurstPeriodSeconds": -2}}, True),
        (BURST, {"clusterStrategy": {"cpuBurstPercent": 100, "cfsQuotaBurstPercent": 200,
                                     "cfsQuotaBurstPeriodSeconds": 10000}}, False),
        (SYSTEM, {"clusterStrategy": {"minFreeKbytesFactor": -1}}, True),
        (SYSTEM, {"clusterStrategy": {"watermarkScaleFactor": 0}}, True),
        (SYSTEM, {"clusterStrategy": {"memcgReapBackGround": -1}}, True),
        (SYSTEM, {"clusterStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}}, False),
    ],
)  # fmt: skip
def test_upstream_field_rules(key: str, value: Any, refused: bool) -> None:
    assert bool(doc(key, value)) == refused


def test_upstream_colocation_bounds_name_the_entry() -> None:
    value = {
        "resourceDiffThreshold": 2,
        "nodeConfigs": [entry("n", labels(a="b"), midStaticCPUReservedPercent=150)],
    }
    assert doc(COLOCATION, value) == [
        "colocation-config: resourceDiffThreshold: 2 must be <= 1",
        "colocation-config: nodeConfigs[0].midStaticCPUReservedPercent: 150 must be <= 100",
    ]


def test_never_stricter_than_upstream_on_pairs() -> None:
    """Upstream refuses one member of an ordered pair set without the other; the manager pairs it with
    the default, and the webhook allows it (a webhook may be less strict than upstream's, never more)."""
    assert doc(THRESHOLD, {"clusterStrategy": {"cpuEvictBESatisfactionLowerPercent": 35}}) == []
    assert doc(THRESHOLD, {"clusterStrategy": {"enable": True, "memoryEvictThresholdPercent": 70}}) == []


# --- node entries (upstream checker_test: selectors, names, overlap, existing nodes) -------------------
def test_node_entries_need_a_selector() -> None:
    value = {"nodeConfigs": [entry("a", None, enable=True), entry("b", {}, enable=True)]}
    assert doc(COLOCATION, value) == [
        f"colocation-config: nodeConfigs[0].nodeSelector: null {EMPTY_SELECTOR}",
        f"colocation-config: nodeConfigs[1].nodeSelector: {{}} {EMPTY_SELECTOR}",
    ]
    value = {"clusterStrategy": {"enable": True}, "nodeStrategies": [entry("xxx-yyy", None, enable=True)]}
    assert doc(THRESHOLD, value) == [
        f"resource-threshold-config: nodeStrategies[0].nodeSelector: null {EMPTY_SELECTOR}"
    ]


def test_an_unparsable_selector_is_refused_once() -> None:
    value = {"nodeStrategies": [entry("a", {"matchLabels": {"bad key!": "x"}})]}
    messages = doc(BURST, value)
    assert len(messages) == 1 and messages[0].startswith(
        "cpu-burst-config: nodeStrategies[0].nodeSelector.matchLabels"
    )


def test_names_are_checked_only_when_asked() -> None:
    """upstream's --node-strategy-name-need-check (default false)."""
    value = {"nodeConfigs": [entry("", labels(a="a")), entry("x", labels(b="b")), entry("x", labels(c="c"))]}
    assert doc(COLOCATION, value) == []
    assert doc(COLOCATION, value, check_node_strategy_names=True) == [
        'colocation-config: nodeConfigs[0].name: "" must not be empty',
        'colocation-config: nodeConfigs[2].name: "x" is already the name of nodeConfigs[1]',
    ]


OVERLAP_CASES = [
    ("not overlap", labels(yyy="yyy"), False),
    ("more labels", {"matchLabels": {"xxx": "xxx", "yyy": "yyy"}}, True),
    ("In", expr("xxx", "In", "xxx", "yyy"), True),
    ("NotIn", expr("xxx", "NotIn", "yyy"), True),
    ("Exists", expr("xxx", "Exists"), True),
    ("DoesNotExist same key", expr("xxx", "DoesNotExist"), False),
    ("DoesNotExist other key", expr("yyy", "DoesNotExist"), True),
]


@pytest.mark.parametrize(
    ("second", "overlap"), [c[1:] for c in OVERLAP_CASES], ids=[c[0] for c in OVERLAP_CASES]
)
def test_selector_overlap(second: dict[str, Any], overlap: bool) -> None:
    """upstream Test_nodeConfigProfileChecker_NodeSelectorOverlap: strategy1 is xxx=xxx."""
    value = {"nodeStrategies": [entry("strategy1", labels(xxx="xxx")), entry("strategy2", second)]}
    messages = doc(SYSTEM, value)
    assert bool(messages) == overlap
    if overlap:
        shown = json.dumps(second, sort_keys=True)
        prefix = f"system-config: nodeStrategies[1].nodeSelector: {shown} overlaps "
        prefix += "nodeStrategies[0] ('strategy1'): "
        assert len(messages) == 1 and messages[0].startswith(prefix + "a node labelled {"), messages


CONFLICT_CASES = [
    ("disjoint, node has one label", labels(yyy="yyy"), {"xxx": "xxx"}, False),
    ("disjoint, node has both labels", labels(yyy="yyy"), {"xxx": "xxx", "yyy": "yyy"}, True),
    ("In matches the node", expr("xxx", "In", "xxx", "yyy"), {"xxx": "xxx"}, True),
    ("In matches only the second", expr("xxx", "In", "xxx", "yyy"), {"xxx": "yyy"}, False),
]


@pytest.mark.parametrize(
    ("second", "node_labels", "conflict"), [c[1:] for c in CONFLICT_CASES], ids=[c[0] for c in CONFLICT_CASES]
)
def test_existing_node_conflict(second: dict[str, Any], node_labels: dict[str, str], conflict: bool) -> None:
    """upstream Test_ExistNodeConflict, on the entries the overlap check lets through."""
    value = {"nodeConfigs": [entry("strategy1", labels(xxx="xxx")), entry("strategy2", second)]}
    nodes = [node("test-node0", node_labels)]
    overlap = doc(COLOCATION, value)
    messages = doc(COLOCATION, value, nodes=nodes)
    assert bool(messages) == (conflict or bool(overlap))
    if conflict and not overlap:
        assert messages == [
            f"colocation-config: nodeConfigs[1].nodeSelector: {json.dumps(second, sort_keys=True)} overlaps "
            "nodeConfigs[0] ('strategy1'): the existing node \"test-node0\" matches them all"
        ]


def test_node_conflict_is_named_once_per_set_of_entries() -> None:
    """upstream slo_config_plugin_test "nodeStrategies have node conflict", and one message however many
    nodes conflict."""
    entries = [entry("test1", labels(xxx="xxx"), enable=True), entry("test2", labels(yyy="yyy"), enable=True)]
    data = {**VALID, COLOCATION: json.dumps({"enable": True, "nodeConfigs": entries})}
    both = {"xxx": "xxx", "yyy": "yyy"}
    nodes = [node("test-node0", both), node("test-node1", {"yyy": "yyy"}), node("test-node2", both)]
    messages = create(data, nodes=nodes)
    assert len(messages) == 1 and '"test-node0"' in messages[0]
    assert create(data, nodes=nodes[1:2]) == []
    assert create(data) == []  # without nodes only the selectors themselves are compared


# --- resource-qos-config networkQOS (upstream Test_ResourceQOS_ConfigContentsValid) --------------------
def net(**classes: Any) -> dict[str, Any]:
    return {name: {"networkQOS": value} for name, value in classes.items()}


SYS_1000M = {"clusterStrategy": {"totalNetworkBandwidth": "1000M"}}
SYS_NODE_1000M = {"nodeStrategies": [entry("n", labels(xxx="yyy"), totalNetworkBandwidth="1000M")]}


def two(first: str, second: str, a: int | str, b: int | str) -> dict[str, Any]:
    """``first`` and ``second`` classes' networkQOS with ingress requests ``a`` and ``b``."""
    return net(**{first: {"ingressRequest": a}, second: {"ingressRequest": b}})


def one(value: int | str) -> dict[str, Any]:
    return {"clusterStrategy": net(lsrClass={"ingressRequest": value})}


def node_entry(classes: dict[str, Any], selector: dict[str, Any]) -> dict[str, Any]:
    return {"nodeStrategies": [entry("n", selector, **classes)]}


NET_CASES = [
    ("percentage below 0", one(-1), None, True),
    ("percentage above 100", one(101), None, True),
    ("percentage valid", one(50), None, False),
    ("quantity invalid", one("50a"), None, True),
    ("quantity empty", one(""), None, True),
    ("quantity valid", one("50m"), None, False),
    ("cluster percentages over 100", {"clusterStrategy": two("lsrClass", "lsClass", 50, 60)}, None, True),
    ("node percentages over 100", node_entry(two("lsrClass", "lsClass", 50, 60), labels(a="b")), None, True),
    (
        "node quantities over the node total",
        node_entry(two("lsrClass", "lsClass", "500M", "600M"), labels(xxx="yyy")),
        SYS_NODE_1000M,
        True,
    ),
    (
        "cluster quantities over the cluster total",
        {"clusterStrategy": two("lsrClass", "lsClass", "500M", "600M")},
        SYS_1000M,
        True,
    ),
    (
        "cluster quantities within the cluster total",
        {"clusterStrategy": two("lsrClass", "lsClass", "400M", "600M")},
        SYS_1000M,
        False,
    ),
    (
        "one format in the cluster strategy",
        {"clusterStrategy": two("lsrClass", "lsClass", "500M", 60)},
        None,
        True,
    ),
]


@pytest.mark.parametrize(
    ("value", "system", "refused"), [c[1:] for c in NET_CASES], ids=[c[0] for c in NET_CASES]
)
def test_net_qos(value: dict[str, Any], system: dict[str, Any] | None, refused: bool) -> None:
    data = {QOS: json.dumps(value)} | ({} if system is None else {SYSTEM: json.dumps(system)})
    assert bool(create(data)) == refused


def test_net_qos_messages() -> None:
    value = {"clusterStrategy": net(lsrClass={"ingressRequest": "500M"}, lsClass={"ingressRequest": "600M"})}
    assert create({QOS: json.dumps(value), SYSTEM: json.dumps(SYS_1000M)}) == [
        'resource-qos-config: clusterStrategy: {"lsClass.networkQOS.ingressRequest": "600M", '
        '"lsrClass.networkQOS.ingressRequest": "500M"} ingress requests add up to 1100M, above the '
        "totalNetworkBandwidth 1G of system-config clusterStrategy"
    ]
    value = {"clusterStrategy": net(lsrClass={"ingressRequest": 50}, beClass={"ingressRequest": 60})}
    assert doc(QOS, value) == [
        'resource-qos-config: clusterStrategy: {"beClass.networkQOS.ingressRequest": 60, '
        '"lsrClass.networkQOS.ingressRequest": 50} ingress request percentages add up to 110, above 100'
    ]


def test_net_qos_never_stricter_than_upstream() -> None:
    """Upstream also subtracts a quantity's bytes from 100 % and compares percentages with the byte total
    (refusing "500M" anywhere, and any request when no total is known) and refuses resource-qos-config
    when system-config is absent: koord does not, as the manager reads those values fine."""
    classes = net(lsrClass={"ingressRequest": "500M"}, lsClass={"ingressRequest": "60"})
    assert doc(QOS, {"nodeStrategies": [entry("n", labels(xxx="yyy"), **classes)]}) == []
    assert doc(QOS, {"clusterStrategy": net(lsrClass={"ingressRequest": 10})}) == []
    assert (
        create(
            {
                QOS: json.dumps({"clusterStrategy": net(lsrClass={"ingressRequest": 10})}),
                SYSTEM: VALID[SYSTEM],
            }
        )
        == []
    )


def test_many_selector_values_stay_cheap() -> None:
    """Upstream builds the product of every expression's value count (here about 10^19 label sets);
    only the distinct ones (the lcm, capped) are built."""
    exprs = [{"key": f"k{n}", "operator": "In", "values": [f"v{i}" for i in range(n)]} for n in range(2, 24)]
    value = {"nodeStrategies": [entry("wide", {"matchExpressions": exprs}), entry("k2", labels(k2="v1"))]}
    messages = doc(BURST, value)
    assert len(messages) == 1 and "overlaps nodeStrategies[0] ('wide')" in messages[0]
