"""The live status view of `koord up`: what an operator wants to see of the colocation at a glance.

``gather(api, koordlets)`` reads the cluster (Nodes, NodeMetrics, NodeSLOs, pods and, for the unbound
ones, the scheduler's reasons) and scrapes each koordlet's /metrics (suppress value, evictions);
``render(snapshot)`` is a pure function of that snapshot to text, so it is unit-tested on hand-made
snapshots.

Imports: standard library, prometheus_client.parser, kubernetes (lazily), apis.constants,
koord.localcluster.{demo,emunode}.
"""

from __future__ import annotations

import calendar
import json
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.constants import BATCH_CPU, BATCH_MEMORY, NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from apis.constants import LABEL_POD_QOS as QOS_LABEL
from koord.localcluster.demo import PROFILE_LABEL
from koord.localcluster.emunode import SIMULATED_LABEL, quantity_or_none


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    simulated: bool
    cpu_capacity: float  # cores
    memory_capacity: int  # bytes
    cpu_used: float | None  # cores, from the NodeMetric (None: no report yet)
    memory_used: int | None
    report_age_s: float | None
    suppress_threshold: int | None  # NodeSLO cpuSuppressThresholdPercent (None: BE suppress off/unknown)
    batch_cpu_milli: int | None
    batch_memory: int | None
    suppress_cores: float | None  # the koordlet's current BE CPU suppress value (None: not running)
    evictions: int | None


@dataclass(frozen=True, slots=True)
class PodRow:
    namespace: str
    name: str
    node: str
    qos: str
    priority_class: str
    phase: str
    batch: str = "-"  # the pod's kubernetes.io/batch-cpu / batch-memory requests, "-" when none
    profile: str = "-"  # the ClusterColocationProfile that rewrote it (the demo profile's label)
    why: str = ""  # an unbound pod's PodScheduled=False message: the scheduler's reasons


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: float
    nodes: list[NodeRow]
    pods: list[PodRow]
    notes: list[str] = field(default_factory=list)


def _gib(b: int | None) -> str:
    return "-" if b is None else f"{b / (1 << 30):.1f}Gi"


def _pct(used: float | None, cap: float) -> str:
    return "-" if used is None or cap <= 0 else f"{100 * used / cap:.0f}%"


def render(s: Snapshot) -> str:
    """Pure: the status view of a snapshot."""
    when = time.strftime("%H:%M:%S", time.localtime(s.at))
    out = [f"── koord status {when} " + "─" * 60]
    head = (
        "NODE",
        "KIND",
        "CPU USED",
        "CPU%",
        "MEM USED",
        "MEM%",
        "SUPPRESS@",
        "BATCH-CPU",
        "BATCH-MEM",
        "BE CPU CAP",
        "EVICTED",
        "REPORT",
    )
    rows: list[tuple[str, ...]] = [head]
    for n in s.nodes:
        rows.append(
            (
                n.name,
                "simulated" if n.simulated else "real",
                "-" if n.cpu_used is None else f"{n.cpu_used:.2f}/{n.cpu_capacity:g}",
                _pct(n.cpu_used, n.cpu_capacity),
                f"{_gib(n.memory_used)}/{_gib(n.memory_capacity)}",
                _pct(None if n.memory_used is None else float(n.memory_used), float(n.memory_capacity)),
                "-" if n.suppress_threshold is None else f"{n.suppress_threshold}%",
                "-" if n.batch_cpu_milli is None else f"{n.batch_cpu_milli}m",
                _gib(n.batch_memory),
                "-" if n.suppress_cores is None else f"{n.suppress_cores:.2f}",
                "-" if n.evictions is None else str(n.evictions),
                "-" if n.report_age_s is None else f"{n.report_age_s:.0f}s ago",
            )
        )
    out += _table(rows)
    out.append("")
    prow: list[tuple[str, ...]] = [("POD", "NODE", "QOS", "PRIORITY", "BATCH REQ", "MUTATED BY", "PHASE")]
    pods = sorted(s.pods, key=lambda p: (p.namespace, p.name))
    for p in pods:
        prow.append(
            (f"{p.namespace}/{p.name}", p.node or "(pending)", p.qos, p.priority_class, p.batch, p.profile,
             p.phase)
        )  # fmt: skip
    out += _table(prow) if s.pods else ["(no pods)"]
    # Why a pod waits: the scheduler's reasons (docs/rules/scheduler.md#queue-and-backoff), e.g. a busy host
    # whose real node has no batch-cpu left or is over the load threshold.
    out += [f"{p.namespace}/{p.name} pending: {p.why}" for p in pods if not p.node and p.why]
    out += s.notes
    return "\n".join(out)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


# --- gathering (effects) ----------------------------------------------------------------------
def scrape(url: str, timeout: float = 2.0) -> dict[str, float]:
    """``{'name{labels}': value}`` of a /metrics page; {} when unreachable."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # a loopback URL of ours
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(smp.labels.items()))
            out[f"{smp.name}{{{labels}}}"] = smp.value
    return out


def _sum(samples: Mapping[str, float], name: str) -> float | None:
    vals = [v for k, v in samples.items() if k.startswith(name + "{")]
    return sum(vals) if vals else None


def _usage(nm: Mapping[str, Any]) -> tuple[float | None, int | None, float | None]:
    status = nm.get("status") or {}
    res = (((status.get("nodeMetric") or {}).get("nodeUsage") or {}).get("resources")) or {}
    cpu, mem = quantity_or_none(res.get("cpu")), quantity_or_none(res.get("memory"))
    age = None
    if ut := status.get("updateTime"):
        try:
            age = max(0.0, time.time() - calendar.timegm(time.strptime(ut, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            age = None
    return (None if cpu is None else cpu.milli_value() / 1000, None if mem is None else mem.value(), age)


def _batch_requests(spec: Mapping[str, Any]) -> str:
    """``cpu/memory`` of the first container with batch requests, e.g. ``200/64Mi`` (the demo's pods have
    one container); "-" when none."""
    for ctr in spec.get("containers") or []:
        req = (ctr.get("resources") or {}).get("requests") or {}
        if BATCH_CPU in req or BATCH_MEMORY in req:
            return f"{req.get(BATCH_CPU, '-')}/{req.get(BATCH_MEMORY, '-')}"
    return "-"


def _unschedulable(status: Mapping[str, Any]) -> str:
    """The message of a PodScheduled=False condition ("" when the pod has none)."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return ""


def gather(api: Any, koordlet_metrics: Mapping[str, str], namespaces: tuple[str, ...] = ()) -> Snapshot:
    """Reads the cluster through ``api`` (a kubernetes ApiClient) and each node's koordlet /metrics
    (``koordlet_metrics``: node → URL); ``namespaces`` limits the pods shown (empty: all but kube-*)."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    def raw(call: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(call(*args, _preload_content=False, **kw).data)
        return data

    nodes = raw(core.list_node).get("items") or []
    metrics = {
        m["metadata"]["name"]: m
        for m in raw(custom.list_cluster_custom_object, SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL).get(
            "items"
        )
        or []
    }
    slos = {
        m["metadata"]["name"]: m
        for m in raw(custom.list_cluster_custom_object, SLO_GROUP, SLO_VERSION, "nodeslos").get("items") or []
    }
    rows: list[NodeRow] = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        alloc = (node.get("status") or {}).get("allocatable") or {}
        cap = (node.get("status") or {}).get("capacity") or {}
        cpu_cap, mem_cap = quantity_or_none(cap.get("cpu")), quantity_or_none(cap.get("memory"))
        cpu_used, mem_used, age = _usage(metrics.get(name, {}))
        thr = ((slos.get(name) or {}).get("spec") or {}).get("resourceUsedThresholdWithBE") or {}
        bcpu, bmem = quantity_or_none(alloc.get(BATCH_CPU)), quantity_or_none(alloc.get(BATCH_MEMORY))
        samples = scrape(koordlet_metrics[name]) if name in koordlet_metrics else {}
        ev = _sum(samples, "koordlet_pod_eviction_total")
        rows.append(
            NodeRow(
                name=name,
                simulated=(node["metadata"].get("labels") or {}).get(SIMULATED_LABEL) == "true",
                cpu_capacity=0.0 if cpu_cap is None else cpu_cap.milli_value() / 1000,
                memory_capacity=0 if mem_cap is None else mem_cap.value(),
                cpu_used=cpu_used,
                memory_used=mem_used,
                report_age_s=age,
                suppress_threshold=thr.get("cpuSuppressThresholdPercent") if thr.get("enable") else None,
                batch_cpu_milli=None if bcpu is None else bcpu.value(),
                batch_memory=None if bmem is None else bmem.value(),
                suppress_cores=_sum(samples, "koordlet_be_suppress_cpu_cores"),
                evictions=None if not samples else int(ev or 0),
            )
        )
    pods: list[PodRow] = []
    for pod in raw(core.list_pod_for_all_namespaces).get("items") or []:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns = meta.get("namespace", "")
        if (namespaces and ns not in namespaces) or (not namespaces and ns.startswith("kube-")):
            continue
        labels = meta.get("labels") or {}
        pod_status = pod.get("status") or {}
        phase = pod_status.get("phase", "")
        if meta.get("deletionTimestamp"):
            phase = "Terminating"
        pods.append(
            PodRow(
                ns,
                meta.get("name", ""),
                spec.get("nodeName", ""),
                labels.get(QOS_LABEL, "-"),
                spec.get("priorityClassName", "-"),
                phase,
                _batch_requests(spec),
                labels.get(PROFILE_LABEL, "-"),
                "" if spec.get("nodeName") else _unschedulable(pod_status),
            )
        )
    return Snapshot(at=time.time(), nodes=rows, pods=pods)
