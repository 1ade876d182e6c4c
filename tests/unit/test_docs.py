"""The operator docs (docs/) must follow the code: every slo-controller-config key and typed field, every
koordlet feature gate, every daemon flag, every upstream flag and gate koord accepts without implementing
it, and every Prometheus metric the code exports is documented; every scenario file a
doc cites exists; and the docs stand on their own (no references to material outside the repository).
Every ``docs/<page>.md#<anchor>`` the code cites, and every anchor a doc links to, is a heading; the code
cites docs/ that way, never by opaque ids of a specification outside the repository.

Everything is collected from the code (parsers' key sets, dataclass field tables, fresh registries, an
AST scan of the sources), never from hard-coded lists.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent.evictor import Evictor
from agent.metrics import AgentMetrics, BlindnessCollector
from agent.options import FEATURE_GATES
from agent.options import build_parser as koordlet_parser
from apis import nodeslo, sloconfig, sloconfig_types
from apis.gojson import GoStruct, struct_openapi
from kube import upstreamflags
from manager.metrichub.metrics import HubCollector
from manager.metrichub.store import HubStore
from manager.metrics import ManagerMetrics
from manager.options import build_parser as manager_parser
from scheduler.main import build_parser as scheduler_parser
from scheduler.metrics import SchedulerMetrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SOURCE_PACKAGES = ("agent", "manager", "scheduler", "kube")
METRIC_CALLS = frozenset(
    {"Counter", "Gauge", "Histogram", "Summary", "ExactCounter", "GaugeMetricFamily", "CounterMetricFamily"}
)


def _doc_files() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _all_docs() -> str:
    return "\n".join(p.read_text() for p in _doc_files())


def _doc(name: str) -> str:
    return (DOCS / name).read_text()


def test_docs_exist() -> None:
    for name in ("README.md", "architecture.md", "configuration.md", "install.md", "troubleshooting.md"):
        assert (DOCS / name).is_file(), name
    assert (DOCS / "simulate.md").is_file()


# --- slo-controller-config -------------------------------------------------------------------------
def test_every_configmap_key_is_documented() -> None:
    text = _doc("configuration.md")
    keys = set(sloconfig.KNOWN_KEYS)
    assert keys, "no ConfigMap keys found in apis.sloconfig.KNOWN_KEYS"
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, f"ConfigMap keys missing from docs/configuration.md: {missing}"


def _config_structs() -> list[type[Any]]:
    structs: list[type[Any]] = []
    for module in (sloconfig_types, nodeslo):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, GoStruct)
                and value is not GoStruct
                and value.__module__ == module.__name__
                and dataclasses.is_dataclass(value)
            ):
                structs.append(value)
    return structs


def _field_json_names() -> dict[str, set[str]]:
    """JSON field name → the structs that declare it, for every typed ConfigMap struct, read from the
    OpenAPI schema the codec generates (inline structs expanded, nested structs included)."""
    names: dict[str, set[str]] = {}
    for cls in _config_structs():
        for name in _schema_property_names(struct_openapi(cls)):
            names.setdefault(name, set()).add(cls.__name__)
    return names


def _schema_property_names(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for key, value in props.items():
                yield key
                yield from _schema_property_names(value)
        for key in ("items", "additionalProperties"):
            if key in schema:
                yield from _schema_property_names(schema[key])
    elif isinstance(schema, list):
        for item in schema:
            yield from _schema_property_names(item)


# Label-selector internals are the standard Kubernetes type, documented by reference, not field by field.
_SELECTOR_INTERNALS = frozenset({"key", "operator", "values"})


def test_every_typed_config_field_is_documented() -> None:
    text = _doc("configuration.md")
    names = _field_json_names()
    assert len(names) > 50, f"expected the typed config tables, found only {sorted(names)}"
    for sample in ("cpuSuppressThresholdPercent", "cpuReclaimThresholdPercent", "cfsQuotaBurstPercent"):
        assert sample in names, f"field discovery broke: {sample} not found"
    missing = sorted(
        f"{name} ({', '.join(sorted(owners))})"
        for name, owners in names.items()
        if name not in _SELECTOR_INTERNALS and not re.search(rf"\b{re.escape(name)}\b", text)
    )
    assert not missing, f"config fields missing from docs/configuration.md: {missing}"


# --- feature gates -------------------------------------------------------------------------------
def test_every_feature_gate_is_documented() -> None:
    text = _all_docs()
    assert FEATURE_GATES
    missing = sorted(g for g in FEATURE_GATES if f"`{g}`" not in text)
    assert not missing, f"feature gates missing from docs/: {missing}"


def test_every_upstream_gate_is_documented() -> None:
    """The upstream gates each component accepts without implementing them (kube.upstreamflags)."""
    text = _doc("flags.md")
    gates = (upstreamflags.KOORDLET_GATES - set(FEATURE_GATES)) | upstreamflags.MANAGER_GATES
    gates |= upstreamflags.SCHEDULER_GATES
    assert "RDMADevices" in gates  # an upstream koordlet gate koord does not implement
    missing = sorted(g for g in gates if f"`{g}`" not in text)
    assert not missing, f"upstream feature gates missing from docs/flags.md: {missing}"


# --- command-line flags --------------------------------------------------------------------------
def _parsers() -> dict[str, argparse.ArgumentParser]:
    return {
        "koordlet": koordlet_parser(),
        "koord-manager": manager_parser(),
        "koord-scheduler": scheduler_parser(),
    }


def test_every_flag_is_documented() -> None:
    text = _doc("flags.md")
    flags = {
        (name, s)
        for name, parser in _parsers().items()
        for action in parser._actions
        for s in action.option_strings
    }
    assert ("koord-manager", "--sync-period") in flags and ("koordlet", "--v") in flags
    missing = sorted(f"{name} {flag}" for name, flag in flags if f"`{flag}`" not in text)
    assert not missing, f"flags missing from docs/flags.md: {missing}"


def test_every_accepted_upstream_flag_is_documented() -> None:
    text = _doc("flags.md")
    tables = {"koordlet": upstreamflags.KOORDLET, "koord-manager": upstreamflags.MANAGER}
    tables["koord-scheduler"] = upstreamflags.SCHEDULER
    assert "runtime-hooks-host-endpoint" in tables["koordlet"]
    missing = sorted(
        f"{c} --{flag}" for c, table in tables.items() for flag in table if f"`--{flag}`" not in text
    )
    assert not missing, f"accepted upstream flags missing from docs/flags.md: {missing}"
    for alias, target in upstreamflags.SCHEDULER_ALIASES.items():
        assert f"`--{alias}`" in text and f"`{target}`" in text


# --- Prometheus metrics --------------------------------------------------------------------------
def _registry_metric_names() -> set[str]:
    """Family names exported by the metric objects, built on fresh registries."""
    names: set[str] = set()
    agent_registry = CollectorRegistry()
    AgentMetrics("node-a", agent_registry)
    BlindnessCollector("node-a", lambda: 1.0, agent_registry)
    gateway = types.SimpleNamespace(node_name="node-a")
    Evictor(gateway, agent_registry)  # type: ignore[arg-type]
    manager_registry = CollectorRegistry()
    ManagerMetrics(manager_registry)
    HubCollector(HubStore(), manager_registry)
    scheduler_registry = CollectorRegistry()
    SchedulerMetrics(scheduler_registry)
    for registry in (agent_registry, manager_registry, scheduler_registry):
        for family in registry.collect():
            if family.name.startswith("process_") or family.name.startswith("python_"):
                continue  # the process collector's standard series, documented as a group
            names.add(family.name)
    return names


def _source_files() -> Iterator[Path]:
    for package in SOURCE_PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _literal_prefix(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _source_metric_names() -> set[str]:
    """Metric names passed as the first argument of a metric constructor anywhere in the daemons."""
    names: set[str] = set()
    for path in _source_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in METRIC_CALLS and node.args:
                text = _literal_prefix(node.args[0])
                if (
                    text
                    and isinstance(node.args[0], ast.Constant)
                    and re.fullmatch(r"[a-z_:][a-z0-9_:]*", text)
                ):
                    names.add(text)
    return names


def _qos_gauge_names() -> set[str]:
    """``koordlet_<name>`` of every gauge a QoS strategy publishes (``gauges[...]`` keys and
    ``gauges = {...}`` literals)."""
    names: set[str] = set()
    for path in sorted((ROOT / "agent" / "qosmanager").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            keys: list[ast.expr] = []
            if isinstance(node, ast.Subscript) and _target_name(node.value) == "gauges":
                keys.append(node.slice)
            elif isinstance(node, ast.AnnAssign | ast.Assign):
                targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
                if any(_target_name(t) == "gauges" for t in targets) and isinstance(node.value, ast.Dict):
                    keys.extend(k for k in node.value.keys if k is not None)
            for key in keys:
                text = _literal_prefix(key)
                if text:
                    names.add("koordlet_" + text.split("{", 1)[0])
    return names


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def test_metric_discovery_finds_the_known_families() -> None:
    found = _registry_metric_names() | _source_metric_names() | _qos_gauge_names()
    for sample in (
        "koordlet_collector_rounds",
        "koord_manager_config_errors",
        "slo_controller_node_resource_reconcile_count",
        "scheduler_schedule_attempts",
        "koordlet_be_suppress_cpu_cores",
    ):
        assert sample in found, f"metric discovery broke: {sample} not found in {sorted(found)}"


@pytest.mark.parametrize(
    "source", ["registries", "sources", "qos gauges"], ids=["registries", "sources", "qos-gauges"]
)
def test_every_metric_is_documented(source: str) -> None:
    text = _doc("architecture.md")
    names = {
        "registries": _registry_metric_names,
        "sources": _source_metric_names,
        "qos gauges": _qos_gauge_names,
    }[source]()
    assert names
    # A counter family `x` is exposed as `x_total`; the doc names the exposed series, which contains `x`.
    missing = sorted(n for n in names if not re.search(rf"`{re.escape(n)}(_total)?`", text))
    assert not missing, f"metrics missing from docs/architecture.md: {missing}"


# --- scenario citations and self-containment -------------------------------------------------------
SCENARIO_REF = re.compile(r"tests/scenarios/[A-Za-z0-9_./-]+\.json")


def test_cited_scenarios_exist() -> None:
    cited = {m.group(0) for p in _doc_files() for m in SCENARIO_REF.finditer(p.read_text())}
    assert cited, "the docs should cite scenario files as runnable examples"
    missing = sorted(c for c in cited if not (ROOT / c).is_file())
    assert not missing, f"docs cite scenario files that do not exist: {missing}"


def test_relative_links_resolve() -> None:
    broken = []
    for path in _doc_files():
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target:
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not broken, f"broken links: {broken}"


@pytest.mark.parametrize("forbidden", ["shared/", "SPEC.md", "ARCHITECTURE.md", "SPEC §"])
def test_docs_are_self_contained(forbidden: str) -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _doc_files() if forbidden in p.read_text()]
    assert not offenders, f"{forbidden!r} mentioned in {offenders}"


# --- code citations of docs/ -----------------------------------------------------------------------
CITING_PACKAGES = (
    "agent",
    "manager",
    "scheduler",
    "apis",
    "kube",
    "koord",
    "bench",
    "hack",
    "tests",
    "proto",
)
DOC_ANCHOR_REF = re.compile(r"docs/([\w./-]+\.md)#([\w-]+)")
DOC_LINK_ANCHOR = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
# Opaque ids of a specification that is not in the repository; the code cites docs/ pages by anchor.
OPAQUE_CITATIONS = {
    "spec section": r"SPEC(\.md| ?§| ?App)",
    "section sign": r"§|\\u00a7",
    "appendix": r"\bApp(endix|\.) [A-Z]\b",
    "decision id": r"\bD(10|[1-9])\b",
    "edge case number": r"\bedge cases? [0-9]",
    "issue number": r"\b[Ii]ssue [0-9]+",
    "scenario spec": r"\bSCENARIOS\.md",
}


def _slug(title: str) -> str:
    """GitHub's heading anchor: link text kept, lower case, punctuation dropped, spaces → '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown page (fenced code skipped; repeats get GitHub's -1, -2 …)."""
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = _slug(match.group(2))
            seen[base] = seen.get(base, 0) + 1
    anchors = set(seen)
    anchors |= {f"{base}-{i}" for base, n in seen.items() for i in range(1, n)}
    return anchors


def _citing_files() -> Iterator[Path]:
    for package in CITING_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not path.name.endswith("_pb2.py") and not path.name.endswith("_pb2_grpc.py"):
                yield path
    yield from sorted((ROOT / "proto").rglob("*.proto"))
    yield from sorted((ROOT / "tests" / "scenarios").rglob("*.json"))  # their "source" and descriptions


def test_slug_matches_github() -> None:
    assert (
        _slug("CPU suppress (gate `BECPUSuppress`, every 1 s)") == "cpu-suppress-gate-becpusuppress-every-1-s"
    )
    assert _slug("The manager's default resourceQOSStrategy is empty") == (
        "the-managers-default-resourceqosstrategy-is-empty"
    )
    assert _slug("nodeslo: one NodeSLO per node") == "nodeslo-one-nodeslo-per-node"


def test_code_citations_of_docs_resolve() -> None:
    """Every ``docs/<page>.md#<anchor>`` in the code names an existing page and one of its headings."""
    cited: dict[tuple[str, str], list[str]] = {}
    for path in _citing_files():
        for match in DOC_ANCHOR_REF.finditer(path.read_text()):
            cited.setdefault((match.group(1), match.group(2)), []).append(str(path.relative_to(ROOT)))
    assert len(cited) > 20, f"citation discovery broke: {sorted(cited)}"
    assert ("rules/koordlet.md", "freshness-rule") in cited
    anchors = {p.relative_to(DOCS).as_posix(): _anchors(p) for p in _doc_files()}
    broken = sorted(
        f"docs/{page}#{anchor} (in {', '.join(sorted(set(files)))})"
        for (page, anchor), files in cited.items()
        if anchor not in anchors.get(page, set())
    )
    assert not broken, f"code cites docs anchors that do not exist: {broken}"


def test_doc_link_anchors_resolve() -> None:
    """Every ``[text](page.md#anchor)`` and ``[text](#anchor)`` link between docs pages lands on a heading."""
    broken = []
    for path in _doc_files():
        for target, anchor in DOC_LINK_ANCHOR.findall(path.read_text()):
            if "://" in target:
                continue
            page = (path.parent / target).resolve() if target else path
            if page.suffix == ".md" and anchor not in _anchors(page):
                broken.append(f"{path.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, f"broken anchors: {broken}"


@pytest.mark.parametrize("kind", sorted(OPAQUE_CITATIONS))
def test_code_cites_docs_not_opaque_ids(kind: str) -> None:
    pattern = re.compile(OPAQUE_CITATIONS[kind])
    this_file = Path(__file__).resolve()
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _citing_files()
        if path.resolve() != this_file
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, f"{kind} cited instead of a docs/ anchor: {offenders}"
