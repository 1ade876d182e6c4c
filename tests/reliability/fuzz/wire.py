"""Hypothesis strategies for what crosses a process boundary as a whole document: NodeMetric objects (as
the API server hands them over), NodeMetricReport bytes (as a koordlet, or anyone holding a token, sends
them to the MetricHub) and scenario files for `koord simulate`. Structured inputs are mutated the way
real corruption looks: a value swapped for one of another type or an extreme one, a key dropped, a list
element duplicated, bytes flipped, cut or inserted, two messages concatenated (protobuf merges them).
Imports: hypothesis, google.protobuf, the standard library, apis, proto.koord.v1, tests.samples and
tests.reliability.fuzz.strategies (test code).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from apis import convert
from apis.nodemetric import NodeMetric, NodeMetricError
from proto.koord.v1 import metrichub_pb2 as pb
from tests.reliability.fuzz.strategies import (
    FLOAT_EDGES,
    INT_EDGES,
    Strategy,
    gojson_doc,
    json_values,
    mangled,
    quantity_texts,
    scalars,
    short_text,
)
from tests.samples import full_nodemetric_dict

REPO = Path(__file__).resolve().parents[3]
SCENARIO_DIR = REPO / "tests" / "scenarios"
RECEIVED_NS = 1_795_000_000 * 10**9
"""The hub's receive time in every report target (2026-11-18); update times are drawn around it."""
NODE_NAMES = ("node-1", "a", "n.example.com", "", "Node-1", "-a", "a" * 254, "a..b", "ü", "node_1")

JsonPath = tuple[str | int, ...]


# --- structure-aware mutation of JSON documents --------------------------------------------------------
def _paths(value: Any, prefix: JsonPath = ()) -> Iterator[JsonPath]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


def _at(doc: Any, path: JsonPath) -> Any:
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def _nudged(draw: st.DrawFn, old: Any) -> Any:
    """A value near ``old`` (same type, other magnitude) or of another type."""
    if isinstance(old, bool) or old is None:
        return draw(scalars)
    if isinstance(old, int):
        return draw(
            st.sampled_from((old + 1, old - 1, -old, old * 1000, old * 2**40)) | st.sampled_from(INT_EDGES)
        )
    if isinstance(old, float):
        return draw(st.sampled_from((old + 0.5, -old, old * 1e300)) | st.sampled_from(FLOAT_EDGES))
    if isinstance(old, str):
        return draw(mangled(old) | quantity_texts | short_text | st.just(old * 50))
    return draw(json_values(max_leaves=6))


replacements: Strategy = st.one_of(
    scalars, json_values(max_leaves=6), quantity_texts, st.sampled_from(({}, [], None, [None], [{}]))
)


@st.composite
def mutated(draw: st.DrawFn, doc: Any, max_mutations: int = 4) -> Any:
    """``doc`` after 1..``max_mutations`` edits: replace a value (by a nearby or an arbitrary one), drop
    a key or list element, duplicate a list element, add a key."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = list(_paths(doc))
        path = paths[draw(st.integers(0, len(paths) - 1))]
        op = draw(st.sampled_from(("nudge", "replace", "drop", "duplicate", "add")))
        target = _at(doc, path)
        if op in ("nudge", "replace"):
            # copied: a drawn value may be a strategy's constant, which the next edit must not change
            value = copy.deepcopy(draw(_nudged(target) if op == "nudge" else replacements))
            if not path:
                doc = value
                continue
            _at(doc, path[:-1])[path[-1]] = value
        elif op == "drop" and path:
            del _at(doc, path[:-1])[path[-1]]
        elif op == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]))
        elif op == "add" and isinstance(target, dict):
            target[draw(short_text)] = copy.deepcopy(draw(replacements))
    return doc


# --- NodeMetric ----------------------------------------------------------------------------------------
nodemetric_dicts: Strategy = st.one_of(
    gojson_doc(NodeMetric),
    st.builds(full_nodemetric_dict).flatmap(mutated),
    st.builds(full_nodemetric_dict).flatmap(mutated).flatmap(mutated),
    json_values(),
)
"""NodeMetric objects as JSON: shaped by the field specs, mutations of a full canonical one, or any JSON."""


def _report_of(d: Any) -> pb.NodeMetricReport:
    """The report of a NodeMetric object, or of the full sample when the object does not decode."""
    try:
        return convert.nodemetric_to_report(NodeMetric.from_dict(d))
    except NodeMetricError:
        return convert.nodemetric_dict_to_report(full_nodemetric_dict())


_text = quantity_texts | short_text
_maps = st.dictionaries(st.sampled_from(("cpu", "memory")) | short_text, _text, max_size=3)
_json_texts = _text | st.builds(json.dumps, json_values(max_leaves=4))
_node_names = st.sampled_from(NODE_NAMES) | short_text
_usage_kinds = st.lists(st.sampled_from(("avg", "p99")) | short_text, max_size=2)
_qos = st.sampled_from(("BE", "LS", "")) | short_text


@st.composite
def _raw_report(draw: st.DrawFn) -> pb.NodeMetricReport:
    """A report set field by field with any strings: bad quantities, enums and JSON texts included."""
    r = pb.NodeMetricReport(node_name=draw(_node_names))
    nm = r.status.node_metric
    nm.node_usage.resources.update(draw(_maps))
    if draw(st.booleans()):
        nm.node_usage.devices_json = draw(_json_texts)
    for _ in range(draw(st.integers(0, 2))):
        agg = nm.aggregated_node_usages.add()
        agg.duration.seconds = draw(st.integers(-(2**40), 2**40))
        for kind in draw(_usage_kinds):
            agg.usage[kind].resources.update(draw(_maps))
    for _ in range(draw(st.integers(0, 2))):
        p = r.status.pods_metric.add(name=draw(short_text), namespace=draw(short_text))
        p.qos, p.priority = draw(_qos), draw(short_text)
        p.pod_usage.resources.update(draw(_maps))
        if draw(st.booleans()):
            p.extensions_json = draw(_json_texts)
    if draw(st.booleans()):
        r.collect_policy.report_interval_seconds = draw(st.integers(-(2**63), 2**63 - 1))
        r.collect_policy.node_memory_collect_policy = draw(short_text)
    return r


@st.composite
def _with_time(draw: st.DrawFn, r: pb.NodeMetricReport) -> pb.NodeMetricReport:
    """``r`` with a node name and an update time around the receive time (or far off, or invalid)."""
    r.node_name = draw(st.sampled_from(NODE_NAMES) | st.just(r.node_name))
    choice = draw(st.sampled_from(("near", "near", "far", "unset", "keep")))
    if choice == "near":
        r.status.update_time.FromNanoseconds(RECEIVED_NS + draw(st.integers(-(10**12), 120 * 10**9)))
    elif choice == "far":
        r.status.update_time.seconds = draw(st.integers(-(2**63), 2**63 - 1))
        r.status.update_time.nanos = draw(st.integers(-(2**31), 2**31 - 1))
    elif choice == "unset":
        r.status.ClearField("update_time")
    return r


reports: Strategy = st.one_of(
    nodemetric_dicts.map(_report_of).flatmap(_with_time),
    _raw_report().flatmap(_with_time),
)


@st.composite
def _corrupted(draw: st.DrawFn, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("flip", "cut", "insert")))
        if not raw:
            raw += draw(st.binary(max_size=8))
            continue
        i = draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[i] = draw(st.integers(0, 255))
        elif op == "cut":
            del raw[i:]
        else:
            raw[i:i] = draw(st.binary(min_size=1, max_size=4))
    return bytes(raw)


report_bytes: Strategy = st.one_of(
    reports.map(lambda r: r.SerializeToString()),
    reports.map(lambda r: r.SerializeToString()),
    reports.map(lambda r: r.SerializeToString()).flatmap(_corrupted),
    st.tuples(reports, reports).map(lambda rs: rs[0].SerializeToString() + rs[1].SerializeToString()),
    st.binary(max_size=64),
)
"""NodeMetricReport wire bytes: valid reports (good and bad content), corrupted ones, merged ones, noise."""


# --- scenario files ------------------------------------------------------------------------------------
@functools.cache
def shipped_scenarios() -> tuple[tuple[str, Any], ...]:
    """(kind, scenario) of every file under tests/scenarios/ (read once)."""
    out = []
    for path in sorted(SCENARIO_DIR.glob("*/*.json")):
        scenario = json.loads(path.read_text())
        out.append((str(scenario.get("kind")), scenario))
    return tuple(out)


@st.composite
def scenarios(draw: st.DrawFn, kind: str | None = None) -> Any:
    """A shipped scenario (of ``kind`` when given) after up to six edits; now and then another kind's."""
    pool = [s for k, s in shipped_scenarios() if kind is None or k == kind]
    doc = draw(mutated(draw(st.sampled_from(pool)), max_mutations=6))
    if isinstance(doc, dict) and draw(st.integers(0, 9)) == 0:
        doc["kind"] = draw(st.sampled_from(sorted({k for k, _ in shipped_scenarios()})))
    return doc
