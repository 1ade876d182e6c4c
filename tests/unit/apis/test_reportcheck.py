"""apis.reportcheck: the one check the MetricHub applies at ingest and every consumer applies when it
decodes; a good report passes without being decoded. Each semantically bad report of the fault probe
(a quantity "abc", an update time far in the future, devices_json that is not JSON, JSON nested 3,000
deep) is refused with its reason and never raises anything but NodeMetricError (no RecursionError);
every limit is tested at its edge. tests/unit/apis/test_reportcheck_oracle.py compares the check with
its oracle over generated reports."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn

import pytest

from apis import convert, quantity_plain, reportcheck, reportlimits
from apis.nodemetric import NodeMetricError
from apis.qos import PriorityClass, QoSClass
from apis.reportcheck import check_report, checked_item, reason_of
from proto.koord.v1 import metrichub_pb2 as pb
from tests.samples import full_nodemetric_dict

NOW = 1_790_000_000 * 10**9  # nanoseconds
SECOND = 10**9


def good() -> pb.NodeMetricReport:
    msg = convert.nodemetric_dict_to_report(full_nodemetric_dict())
    msg.status.update_time.FromNanoseconds(NOW)
    return msg


def reason(msg: pb.NodeMetricReport, received: int = NOW) -> str:
    with pytest.raises(NodeMetricError) as e:
        check_report(msg, received)
    return reason_of(e.value)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_good_report_passes_and_a_consumer_decodes_it_as_the_converter_does() -> None:
    msg = good()
    check_report(msg, NOW)
    item = pb.NodeMetricItem(report=msg)
    item.received_time.FromNanoseconds(NOW)
    assert checked_item(item) == convert.nodemetric_from_report(msg)
    check_report(pb.NodeMetricReport(node_name="n"), NOW)  # an empty status is fine


def _koordlet_report(pods: int) -> pb.NodeMetricReport:
    """A report shaped as a koordlet's (as bench/hub_ingest.py builds it)."""
    msg = pb.NodeMetricReport(node_name="node-1")
    msg.status.update_time.FromNanoseconds(NOW)
    node = msg.status.node_metric
    node.node_usage.resources.update({"cpu": "12345m", "memory": "40960Mi"})
    node.system_usage.resources.update({"cpu": "512m", "memory": "2Gi"})
    for aggs in (node.aggregated_node_usages, node.aggregated_system_usages):
        agg = aggs.add()
        agg.duration.FromSeconds(300)
        for kind in ("avg", "p50", "p90", "p95", "p99"):
            agg.usage[kind].resources.update({"cpu": "11500m", "memory": "39Gi"})
    numa = node.numa_usages.add(numa_node_id=1)
    numa.node_usage.resources["cpu"] = "3"
    for i in range(pods):
        pod = msg.status.pods_metric.add(name=f"app-{i}", namespace="team", priority="koord-prod", qos="LS")
        pod.pod_usage.resources.update({"cpu": f"{100 + i * 7}m", "memory": f"{256 + i}Mi"})
    msg.status.pods_metric.add(name="plain", namespace="team")  # no priority, no QoS: both valid
    msg.status.host_application_metric.add(name="sshd", priority="koord-prod", qos="LS")
    msg.status.prod_reclaimable_metric.resource.resources["cpu"] = "6"
    msg.status.prod_peak_metric.resource.resources["memory"] = "30Gi"
    msg.collect_policy.node_memory_collect_policy = "usageWithoutPageCache"
    return msg


def _with_json(msg: pb.NodeMetricReport) -> pb.NodeMetricReport:
    msg.status.pods_metric[0].extensions_json = '{"a": [1]}'
    msg.status.node_metric.node_usage.devices_json = '[{"minor": 0}]'
    return msg


GOOD: dict[str, Callable[[], pb.NodeMetricReport]] = {
    "sample": good,
    "koordlet": lambda: _koordlet_report(20),
    "with JSON": lambda: _with_json(_koordlet_report(2)),
    "empty": lambda: pb.NodeMetricReport(node_name="n"),
}


@pytest.mark.parametrize("make", GOOD.values(), ids=GOOD.keys())
def test_a_good_report_passes_without_being_decoded(
    make: Callable[[], pb.NodeMetricReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub's work: the flat view proves a good report decodes, so apis.convert never runs."""
    msg = make()

    def decode(*_: object) -> NoReturn:
        raise AssertionError("decoded")

    monkeypatch.setattr(reportcheck, "nodemetric_from_report", decode)
    check_report(msg, NOW)


def test_every_map_entry_is_serialised_with_its_key_and_value() -> None:
    """The flat view counts on it: an entry left off would hide an empty key or quantity."""
    assert pb.ResourceMap(resources={"": ""}).SerializeToString() == b"\n\x04\n\x00\x12\x00"
    usage = pb.AggregatedUsage()
    usage.usage[""].SetInParent()
    assert usage.SerializeToString() == b"\n\x04\n\x00\x12\x00"
    assert "" in PriorityClass._value2member_map_ and "" in QoSClass._value2member_map_  # proto3 omits ""
    assert quantity_plain.PLAIN_MAX_CHARS <= reportlimits.MAX_QUANTITY_CHARS  # plain texts keep the limit


def _devices(text: str) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.status.node_metric.node_usage.devices_json = text

    return mutate


def _extensions(text: str) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.status.pods_metric[0].extensions_json = text

    return mutate


def _cpu(text: str) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.status.node_metric.node_usage.resources["cpu"] = text

    return mutate


def _node(name: str) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.node_name = name

    return mutate


def _ahead(seconds: int) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.status.update_time.FromNanoseconds(NOW + seconds * SECOND)

    return mutate


BAD: list[tuple[str, Callable[[pb.NodeMetricReport], None], str]] = [
    ("cpu abc", _cpu("abc"), "invalid_field"),
    ("quantity too long", _cpu("1" * (reportlimits.MAX_QUANTITY_CHARS + 1)), "invalid_field"),
    ("quantity of 200,000 digits", _cpu("1" * 200_000), "invalid_field"),
    ("update time a year ahead", _ahead(365 * 86_400), "future_update_time"),
    (
        "update time just past the skew",
        _ahead(reportlimits.MAX_FUTURE_SKEW_SECONDS + 1),
        "future_update_time",
    ),
    ("update time at the end of time", _ahead(250_000_000_000), "future_update_time"),
    ("devices not JSON", _devices("{not json"), "invalid_field"),
    ("devices nested 3,000 deep", _devices(nested(3000)), "json_too_deep"),
    ("devices nested past the limit", _devices(nested(reportlimits.MAX_JSON_DEPTH + 1)), "json_too_deep"),
    ("extensions nested 3,000 deep", _extensions('{"a":' * 3000 + "1" + "}" * 3000), "json_too_deep"),
    ("devices too long", _devices('["' + "x" * reportlimits.MAX_JSON_BYTES + '"]'), "json_too_large"),
    ("empty node name", _node(""), "node_name"),
    ("node name with capitals", _node("Node-1"), "node_name"),
    ("node name too long", _node("a" * (reportlimits.MAX_NODE_NAME_CHARS + 1)), "node_name"),
]


@pytest.mark.parametrize(("mutate", "why"), [(m, w) for _, m, w in BAD], ids=[n for n, _, _ in BAD])
def test_bad_reports_are_refused_with_their_reason(
    mutate: Callable[[pb.NodeMetricReport], None], why: str
) -> None:
    msg = good()
    msg.status.pods_metric[0].extensions_json = "{}"
    mutate(msg)
    t0 = time.monotonic()
    assert reason(msg) == why
    assert time.monotonic() - t0 < 5.0  # no input makes the check slow (a long quantity was quadratic)


def objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_limits_hold_at_their_edge() -> None:
    at_skew = good()
    at_skew.status.update_time.FromNanoseconds(NOW + reportlimits.MAX_FUTURE_SKEW_SECONDS * SECOND)
    check_report(at_skew, NOW)
    deepest = good()
    deepest.status.pods_metric[0].extensions_json = objects(reportlimits.MAX_JSON_DEPTH)
    check_report(deepest, NOW)
    deepest.status.pods_metric[0].extensions_json = objects(reportlimits.MAX_JSON_DEPTH + 1)
    assert reason(deepest) == "json_too_deep"
    longest = good()
    longest.status.pods_metric[0].extensions_json = '{"a":"' + "x" * (reportlimits.MAX_JSON_BYTES - 8) + '"}'
    assert len(longest.status.pods_metric[0].extensions_json) == reportlimits.MAX_JSON_BYTES
    longest.status.node_metric.node_usage.resources["cpu"] = "1" * reportlimits.MAX_QUANTITY_CHARS
    check_report(longest, NOW)
    check_report(_named("a" * reportlimits.MAX_NODE_NAME_CHARS), NOW)


def _named(name: str) -> pb.NodeMetricReport:
    return pb.NodeMetricReport(node_name=name)


def test_size_is_the_wire_size() -> None:
    msg = good()
    assert (
        reason_of(_raises(lambda: check_report(msg, NOW, reportlimits.MAX_REPORT_BYTES + 1))) == "too_large"
    )
    check_report(msg, NOW, reportlimits.MAX_REPORT_BYTES)
    big = pb.NodeMetricReport(node_name="n")
    big.status.pods_metric.add(name="x" * reportlimits.MAX_REPORT_BYTES)
    assert reason(big) == "too_large"  # size computed when not given


def _raises(fn: Callable[[], object]) -> NodeMetricError:
    with pytest.raises(NodeMetricError) as e:
        fn()
    return e.value


def test_a_consumer_checks_the_time_against_the_hubs_receive_time() -> None:
    item = pb.NodeMetricItem(report=good())
    item.received_time.FromNanoseconds(NOW)
    assert checked_item(item).name == "node-1"  # whatever this machine's clock says
    item.received_time.FromNanoseconds(NOW - (reportlimits.MAX_FUTURE_SKEW_SECONDS + 1) * SECOND)
    assert reason_of(_raises(lambda: checked_item(item))) == "future_update_time"
