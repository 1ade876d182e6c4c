"""apis.reportcheck against its oracle (tests/oracles/reportcheck.py: the limits, then the whole report
decoded by apis.convert): over generated reports the production check refuses exactly what the oracle
refuses, with the same error (type, reason and text), and a consumer decodes every accepted report as
the oracle does. Reports come from the hub_report fuzz strategies (tests/reliability/fuzz/wire.py) and
from edits of a full, valid report that keep most of it valid, so both verdicts are drawn often."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st

from apis import convert
from apis.nodemetric import NodeMetricError
from apis.qos import PriorityClass, QoSClass
from apis.reportcheck import check_report, checked_item, reason_of
from manager.metrichub.ingest import parse_report
from proto.koord.v1 import metrichub_pb2 as pb
from tests.oracles.reportcheck import check_report as oracle_check
from tests.reliability.fuzz import strategies, wire
from tests.reliability.fuzz.budget import fuzz_settings
from tests.samples import full_nodemetric_dict

RECEIVED = wire.RECEIVED_NS

Verdict = tuple[str, ...]


def _verdict(check: Callable[[], object]) -> Verdict:
    try:
        check()
    except NodeMetricError as e:
        return ("refused", type(e).__name__, reason_of(e), str(e), repr(e.value))
    except Exception as e:  # the oracle's own failures must be the production check's too
        return ("raised", type(e).__name__, str(e))
    return ("accepted",)


def assert_same_verdict(msg: pb.NodeMetricReport, size: int | None = None) -> bool:
    """The two checks agree on `msg`; True when both accept it (and then decode it alike)."""
    oracle = _verdict(lambda: oracle_check(msg, RECEIVED, size))
    production = _verdict(lambda: check_report(msg, RECEIVED, size))
    assert production == oracle
    if oracle != ("accepted",):
        return False
    item = pb.NodeMetricItem(report=msg)
    item.received_time.FromNanoseconds(RECEIVED)
    assert checked_item(item) == oracle_check(msg, RECEIVED, size)
    return True


# --- edits of a valid report ------------------------------------------------------------------------
def _valid() -> pb.NodeMetricReport:
    msg = convert.nodemetric_dict_to_report(full_nodemetric_dict())
    msg.status.update_time.FromNanoseconds(RECEIVED)
    for i in range(3):  # a few more pods than the sample, one without priority and QoS
        pod = msg.status.pods_metric.add(name=f"p{i}", namespace="ns", priority="koord-batch" if i else "")
        pod.pod_usage.resources.update({"cpu": f"{i}50m", "memory": f"{i + 1}Gi"})
    return msg


def _maps(msg: pb.NodeMetricReport) -> Iterator[pb.ResourceMap]:
    st_ = msg.status
    node = st_.node_metric
    yield node.node_usage
    yield node.system_usage
    for agg in (*node.aggregated_node_usages, *node.aggregated_system_usages):
        yield from (agg.usage[k] for k in sorted(agg.usage))
    for numa in node.numa_usages:
        yield numa.node_usage
        yield numa.system_usage
    yield from (p.pod_usage for p in st_.pods_metric)
    yield from (h.usage for h in st_.host_application_metric)
    yield st_.prod_reclaimable_metric.resource
    yield st_.prod_peak_metric.resource


_good_quantities = st.sampled_from(("0", "250m", "1.5Gi", "64Mi", "+1e3", ".5", "7E", "1" * 64, "9" * 30))
_enum_names = st.sampled_from([*PriorityClass._value2member_map_, *QoSClass._value2member_map_])
_json = strategies.json_text(strategies.json_values(max_leaves=6))
_device_lists = st.lists(
    st.dictionaries(st.sampled_from(("minor", "type", "")), strategies.scalars, max_size=2)
)


@st.composite
def edited_reports(draw: st.DrawFn) -> pb.NodeMetricReport:
    """A valid report after 0–3 edits: a quantity, a pod's priority or QoS, an aggregation key, a JSON
    field, the update time or the memory policy set to a value that may or may not decode."""
    msg = _valid()
    for _ in range(draw(st.integers(0, 3))):
        maps = list(_maps(msg))
        rm = maps[draw(st.integers(0, len(maps) - 1))]
        edit = draw(
            st.sampled_from(
                ("quantity", "quantity", "enum", "key", "devices", "extensions", "time", "policy")
            )
        )
        if edit == "quantity":
            name = draw(st.sampled_from(("cpu", "memory", "nvidia.com/gpu", "")))
            rm.resources[name] = draw(_good_quantities | strategies.quantity_texts)
        elif edit == "enum":
            pod = msg.status.pods_metric[draw(st.integers(0, len(msg.status.pods_metric) - 1))]
            text = draw(_enum_names | strategies.short_text)
            if draw(st.booleans()):
                pod.priority = text
            else:
                pod.qos = text
        elif edit == "key":
            node = msg.status.node_metric
            agg = (
                node.aggregated_node_usages.add()
                if draw(st.booleans())
                else node.aggregated_system_usages.add()
            )
            agg.usage[draw(st.sampled_from(("avg", "p99", "p42", "", "AVG")))].resources["cpu"] = "1"
        elif edit == "devices":
            rm.devices_json = draw(_device_lists.map(json.dumps) | _json)
        elif edit == "extensions":
            pod = msg.status.pods_metric[draw(st.integers(0, len(msg.status.pods_metric) - 1))]
            pod.extensions_json = draw(st.sampled_from(("{}", '{"a": [1]}')) | _json)
        elif edit == "time":
            ts = msg.status.update_time
            ts.seconds = draw(
                st.sampled_from((-62_135_596_801, -62_135_596_800, 253_402_300_799, 253_402_300_800))
            )
            ts.nanos = draw(st.sampled_from((0, -1, 999_999_999, 1_000_000_000)))
        else:
            msg.collect_policy.node_memory_collect_policy = draw(
                st.sampled_from(("usageWithPageCache", "usageWithoutPageCache", "", "x"))
            )
    return msg


@fuzz_settings(300)
@given(edited_reports())
def test_edited_reports_get_the_oracles_verdict(msg: pb.NodeMetricReport) -> None:
    assert_same_verdict(msg)


@fuzz_settings(200)
@given(wire.report_bytes)
def test_hub_report_inputs_get_the_oracles_verdict(raw: bytes) -> None:
    try:
        msg = parse_report(raw)
    except DecodeError:
        return
    assert_same_verdict(msg, len(raw))


def test_the_edits_reach_both_verdicts() -> None:
    """The edited reports are not all refused (nor all accepted): the property compares both paths."""
    verdicts: list[bool] = []

    @fuzz_settings(100)
    @given(edited_reports())
    def collect(msg: pb.NodeMetricReport) -> None:
        verdicts.append(assert_same_verdict(msg))

    collect()
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.9, sum(verdicts)


def test_the_valid_base_is_accepted() -> None:
    assert assert_same_verdict(_valid())
