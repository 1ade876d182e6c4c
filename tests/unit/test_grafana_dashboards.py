"""The Grafana dashboards in deploy/grafana/ are well formed: each parses, has unique panel ids, takes its
data source from the ``${datasource}`` variable, and every query is balanced PromQL naming only metrics
koord exports (read from the metrics objects on fresh registries, plus the metric constructors and QoS
gauge keys in the source for the few built inside controllers). The queries are run against a real
Prometheus in tests/integration/test_prometheus.py. The kustomization ships every dashboard.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.evictor import Evictor
from agent.metrics import AgentMetrics, BlindnessCollector
from manager.metrichub.metrics import HubCollector
from manager.metrichub.store import HubStore
from manager.metrics import ExactCounter, ManagerMetrics
from scheduler.metrics import SchedulerMetrics

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))
DATASOURCE_UID = "${datasource}"
KNOWN_VARIABLES = {"__rate_interval", "__interval", "__range", "node", "datasource"}
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool",
    "inf", "nan",
}  # fmt: skip
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
}
CONSTRUCTOR_SUFFIXES = {"Counter": ("_total",), "Histogram": ("_bucket", "_count", "_sum")}


def _panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in board.get("panels", []):
        yield p
        yield from p.get("panels", [])


def _load(path: Path) -> dict[str, Any]:
    board = json.loads(path.read_text())
    assert isinstance(board, dict)
    return board


def _exprs() -> list[tuple[str, str]]:
    return [
        (f"{path.stem}:{p['id']}:{t.get('refId')}", t["expr"])
        for path in DASHBOARDS
        for p in _panels(_load(path))
        for t in p.get("targets", [])
        if t.get("expr")
    ]


def _registry_names(registry: CollectorRegistry) -> set[str]:
    names: set[str] = set()
    for family in registry.collect():
        names |= {s.name for s in family.samples}
        if not family.samples:
            names |= {family.name + s for s in SUFFIXES.get(family.type, ("",))}
    return names


def exported_metric_names() -> set[str]:
    """Sample names koord's daemons can expose."""
    names: set[str] = set()
    agent = CollectorRegistry()
    AgentMetrics("n", agent)
    BlindnessCollector("n", lambda: 1.0, agent)
    Evictor(_NamedGateway(), agent)  # type: ignore[arg-type]
    names |= _registry_names(agent)
    manager = CollectorRegistry()
    metrics = ManagerMetrics(manager)
    for counter in vars(metrics).values():
        if isinstance(counter, ExactCounter):  # exposed under exactly its name, once it has a sample
            counter.inc(**dict.fromkeys(counter.labelnames, "x"))
    HubCollector(HubStore(), manager)
    names |= _registry_names(manager)
    scheduler = CollectorRegistry()
    SchedulerMetrics(scheduler)
    names |= _registry_names(scheduler)
    # Metrics built inside controllers (noderesource) and the QoS strategies' gauges (koordlet_<key>).
    constructor = re.compile(r"\b(Gauge|Counter|Histogram|ExactCounter)\(\s*\"([a-zA-Z_:][\w:]*)\"")
    gauge_key = re.compile(r"gauges(?:\[|[^=\n]*=\s*\{\s*)f?['\"]([a-z_]+)")  # gauges[k] = …, gauges = {k: …}
    for pkg in ("agent", "manager", "scheduler", "kube"):
        for src in (ROOT / pkg).rglob("*.py"):
            text = src.read_text()
            for kind, name in constructor.findall(text):
                names |= {name + s for s in CONSTRUCTOR_SUFFIXES.get(kind, ("",))}
            if "qosmanager" in src.parts:
                names |= {f"koordlet_{key}" for key in gauge_key.findall(text)}
    return names


class _NamedGateway:
    node_name = "n"


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)


def balanced(expr: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in _strip_strings(expr):
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (label matchers, ranges, grouping clauses, function
    names and keywords removed)."""
    text = _strip_strings(expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        if m.group(2) or m.group(1).lower() in PROMQL_WORDS:
            continue
        names.add(m.group(1))
    return names


def test_there_are_dashboards() -> None:
    assert {p.name for p in DASHBOARDS} >= {"koord-node.json", "koord-cluster.json"}


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_dashboard_model(path: Path) -> None:
    board = _load(path)
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    panels = list(_panels(board))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"]["uid"] == DATASOURCE_UID
    for p in panels:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": DATASOURCE_UID}, p["title"]
        assert p["targets"], p["title"]
        ref_ids = [t["refId"] for t in p["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == DATASOURCE_UID and t["expr"], p["title"]


EXPORTED = exported_metric_names()


@pytest.mark.parametrize("expr", [e for _, e in _exprs()], ids=[i for i, _ in _exprs()])
def test_query_is_promql_over_exported_metrics(expr: str) -> None:
    assert balanced(expr), expr
    assert "vector(" not in expr, "no synthetic series: a panel shows what koord exports"
    used_vars = set(re.findall(r"\$\{?(\w+)", expr))
    assert used_vars <= KNOWN_VARIABLES, used_vars - KNOWN_VARIABLES
    names = metric_names(expr)
    assert names, f"no metric selected by {expr!r}"
    assert names <= EXPORTED, f"not exported by koord: {sorted(names - EXPORTED)}"


def test_variable_queries_use_exported_metrics() -> None:
    for path in DASHBOARDS:
        for v in _load(path)["templating"]["list"]:
            if v["type"] == "query":
                m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", v["definition"])
                assert m and m.group(1) in EXPORTED, v["definition"]


def test_metric_name_extraction() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, type) "
        '(rate(a_bucket{node=~"$node",x="y(z"}[$__rate_interval])))'
        " / on (instance) group_left (node) b and c offset 5m"
    )
    assert balanced(expr)
    assert metric_names(expr) == {"a_bucket", "b", "c"}
    assert not balanced("rate(x[5m)")
    assert "koordlet_node_used_cpu_cores" in EXPORTED and "koordlet_pod_eviction_total" in EXPORTED
    assert "koordlet_be_suppress_cpu_cores" in EXPORTED
    assert "slo_controller_node_extended_resource_allocatable_internal" in EXPORTED
    assert "slo_controller_nodeslo_reconcile_count" in EXPORTED


def test_kustomization_ships_every_dashboard() -> None:
    k = yaml.safe_load((GRAFANA / "kustomization.yaml").read_text())
    assert k["namespace"] == "koordinator-system"
    assert k["generatorOptions"]["disableNameSuffixHash"] is True
    assert k["generatorOptions"]["labels"]["grafana_dashboard"] == "1"
    [gen] = k["configMapGenerator"]
    assert gen["name"] == "koord-grafana-dashboards"
    assert sorted(gen["files"]) == [p.name for p in DASHBOARDS]
