"""koordlet command-line flags (upstream names and defaults where upstream has them, docs/flags.md#koordlet)
and feature gates.

``parse(argv, env)`` returns validated ``Options``; a bad value exits with a message naming the flag and
the value. Upstream koordlet's Go-style argument lists are taken too (kube.goflags): its flags koord does
not implement, and feature gates koord does not know, end up in ``Options.warnings`` for the daemon to
log. Pure apart from argparse's exit. Imports: standard library, apis.duration, kube.{goflags,
upstreamflags,httpserver}, agent.system.{cgroup,podcgroup}.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.system.cgroup import HostPaths
from agent.system.podcgroup import CgroupDriver
from apis.duration import Duration
from apis.version import koord_version
from kube import upstreamflags
from kube.goflags import parse_gates, parse_go_args
from kube.httpserver import parse_addr

__all__ = ["FEATURE_GATES", "Options", "build_parser", "parse", "parse_feature_gates"]

# Upstream koordlet gates and defaults plus koord's own (docs/configuration.md#koordlet-feature-gates).
FEATURE_GATES: dict[str, bool] = {
    "BECPUSuppress": True,
    "CPUBurst": True,
    "BEMemoryEvict": False,
    "MemoryEvict": False,
    "MemoryAllocatableEvict": False,
    "BECPUEvict": False,
    "CPUEvict": False,
    "CPUAllocatableEvict": False,
    "RdtResctrl": True,
    "CgroupReconcile": False,
    "SystemConfig": False,
    "BlkIOReconcile": False,
    "PSICollector": False,
    "ResctrlCollector": False,
    "NodeMetricPromMetrics": False,
    # koord: per-interface network counters through netlink.
    "NetworkCollector": True,
    # Upstream's runtime-hook plugin: BE pod/container cgroups from batch resources (on by default).
    "BatchResource": True,
    # The NodeResourceTopology report (docs/rules/koordlet-topology.md#reporting).
    "NodeTopologyReport": True,
    # Upstream's runtime-hook plugin: container cpusets from the scheduler's allocation and the share
    # pools (docs/rules/koordlet-cpuset.md#reconcile).
    "CPUSetAllocator": True,
    # BE pods with a NUMA-aware allocation take the BE pools of their NUMA nodes (upstream: off).
    "BECPUManager": False,
    # Upstream's GPU gate: the node's Device object from its cards (docs/rules/koordlet-gpu.md#reporting).
    "Accelerators": False,
    # Upstream's runtime-hook gate; koord enforces the GPU allocation in the v1 device cgroup
    # (docs/rules/koordlet-gpu.md#container).
    "GPUEnvInject": False,
}
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` overlaid on the defaults; ``AllAlpha``/``AllBeta`` switch every gate. A gate koord
    does not know is dropped (``parse`` reports it); a malformed item raises ValueError naming it."""
    return parse_gates(text, FEATURE_GATES, upstreamflags.KOORDLET_GATES).values


@dataclass(frozen=True)
class Options:
    node_name: str
    kubeconfig: str | None
    paths: HostPaths
    cgroup_driver: CgroupDriver | None
    """None = detect from the cgroup tree."""
    collect_interval_seconds: float
    addr: str
    hub_address: str | None
    hub_token_file: Path | None
    hub_ca: Path | None
    """CA bundle the hub's TLS certificate must chain to; None: plaintext."""
    push_interval_seconds: float
    enable_node_metric_report: bool
    metric_cache_path: Path | None
    retention_seconds: float
    pod_retention_seconds: float
    kube_api_qps: float
    kube_api_burst: int
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(FEATURE_GATES))
    enable_qos: bool = True
    qos_dry_run: bool = False
    audit_log: Path | None = None
    metric_cache_checkpoint_seconds: float = 300.0
    """How often the metric cache is also saved while running; 0: on shutdown only."""
    node_topology_sync_seconds: float = 3.0
    """How often the NodeResourceTopology report is rebuilt (and written when changed); 0: never."""
    kubelet_config_file: Path = Path("/var/lib/kubelet/config.yaml")
    kubelet_root_dir: Path = Path("/var/lib/kubelet")
    gpu_fake_root: Path | None = None
    """A fake card tree read instead of NVML (``koord up``, tests; docs/rules/koordlet-gpu.md#backends)."""
    verbosity: int = 0
    """klog-style ``--v``: 4 and above log at debug level."""
    warnings: tuple[str, ...] = ()
    """Accepted arguments without effect (upstream flags, unknown gates), one line each, to be logged."""


def _seconds(flag: str, text: str, minimum: float = 0.0) -> float:
    try:
        value = Duration.parse(text).total_seconds()
    except ValueError:
        raise ValueError(f"{flag}: {text!r} is not a duration (e.g. 1s, 500ms, 12h)") from None
    if value <= minimum:
        raise ValueError(f"{flag}: {text!r} must be longer than {minimum:g}s")
    return value


def _seconds_or_off(flag: str, text: str) -> float:
    """A duration longer than 0 s, or 0 (``0``, ``0s``) for "off"."""
    try:
        if Duration.parse(text).total_seconds() == 0:
            return 0.0
    except ValueError:
        pass  # _seconds names the flag and the expected form
    return _seconds(flag, text)


def build_parser() -> argparse.ArgumentParser:
    d = HostPaths()
    p = argparse.ArgumentParser(
        prog="koordlet", description="koord node agent: collect, report, enforce QoS."
    )
    p.add_argument("--version", action="version", version=f"koordlet {koord_version()}")
    p.add_argument("--node-name", default=None, help="this node's name (default: env NODE_NAME; required)")
    p.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: KUBECONFIG, else in-cluster)"
    )
    p.add_argument("--cgroup-root-dir", default=str(d.cgroup_root), help="host cgroup mount (%(default)s)")
    p.add_argument(
        "--proc-root-dir", default=str(d.proc), help="host /proc (%(default)s; the DaemonSet uses hostPID)"
    )
    p.add_argument("--sys-root-dir", default=str(d.sys), help="host /sys (%(default)s)")
    p.add_argument(
        "--cgroup-driver",
        choices=["auto", "cgroupfs", "systemd"],
        default="auto",
        help="kubelet cgroup driver",
    )
    p.add_argument("--collect-res-used-interval", default="1s", help="collect interval (%(default)s)")
    p.add_argument("--addr", default=":9316", help="/metrics, /healthz, /readyz address (%(default)s)")
    p.add_argument("--hub-address", default="", help="koord-manager MetricHub host:port (empty: no push)")
    p.add_argument(
        "--hub-token-file",
        default=None,
        help="bearer token sent to the hub (default: the pod's ServiceAccount token when mounted)",
    )
    p.add_argument(
        "--hub-ca",
        default=None,
        help="CA bundle (PEM) the hub's certificate must chain to: connect with TLS (default: plaintext)",
    )
    p.add_argument("--push-interval-seconds", type=float, default=5.0, help="hub push period (%(default)s)")
    p.add_argument(
        "--enable-node-metric-report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the NodeMetric status (%(default)s)",
    )
    p.add_argument(
        "--metric-cache-path",
        default="/metric-data/metric-cache.npz",
        help="file the metric cache is saved to on shutdown and reloaded from on start ('' = none)",
    )
    p.add_argument(
        "--metric-cache-checkpoint-interval",
        default="5m",
        help="the metric cache is also saved this often while running, so a crash loses at most this much "
        "history (%(default)s; 0 = on shutdown only)",
    )
    p.add_argument(
        "--metric-retention",
        default="12h",
        help="most history kept for node series (%(default)s); the agent keeps what the NodeMetric "
        "windows need (30m + 5m by default)",
    )
    p.add_argument(
        "--pod-metric-retention",
        default="6m",
        help="history kept for pod/container series (%(default)s; raised to the NodeMetric aggregation "
        "window + 1m when that is longer)",
    )
    p.add_argument("--kube-api-qps", type=float, default=20.0)
    p.add_argument("--kube-api-burst", type=int, default=30)
    p.add_argument(
        "--feature-gates",
        default="",
        help="Gate=true|false,... (see FEATURE_GATES; gates koord does not know are logged and ignored)",
    )
    p.add_argument(
        "--enable-qos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the QoS strategies (suppress, burst, eviction) per their feature gates (%(default)s)",
    )
    p.add_argument(
        "--qos-dry-run",
        action="store_true",
        help="decide and audit every cgroup write, write nothing (evictions are still made: use the gates)",
    )
    p.add_argument(
        "--audit-log",
        default="/var/log/koordlet/audit.log",
        help="JSON-lines audit of every cgroup change and eviction (%(default)s; '' = none)",
    )
    p.add_argument(
        "--node-topology-sync-interval",
        default="3s",
        help="how often the NodeResourceTopology report is rebuilt, written only when it changed "
        "(%(default)s; 0 = no report)",
    )
    p.add_argument(
        "--kubelet-config-file",
        default="/var/lib/kubelet/config.yaml",
        help="the kubelet's KubeletConfiguration (CPU manager and topology manager policy) (%(default)s)",
    )
    p.add_argument(
        "--kubelet-root-dir",
        default="/var/lib/kubelet",
        help="the kubelet's --root-dir, holding cpu_manager_state (%(default)s)",
    )
    p.add_argument(
        "--gpu-fake-root",
        default="",
        help="read the GPUs from this fake card tree (<dir>/gpus/<index>/...) instead of NVML, for koord up "
        "and tests (default: NVML)",
    )
    p.add_argument(
        "-v",
        "--v",
        dest="v",
        type=int,
        nargs="?",
        const=4,
        default=0,
        help="log verbosity as upstream's klog --v=N: 4 and above log at debug level (-v alone: 4)",
    )
    p.add_argument("--verbose", action="store_true", help="debug logging (same as --v=4)")
    return p


def parse(argv: Sequence[str] | None, env: Mapping[str, str]) -> tuple[Options, argparse.Namespace]:
    p = build_parser()
    a, warnings = parse_go_args(
        p,
        argv,
        "koordlet",
        upstreamflags.KOORDLET,
        upstreamflags.KOORDLET_GATES,
        FEATURE_GATES,
    )
    try:
        node = a.node_name or env.get("NODE_NAME", "")
        if not node:
            raise ValueError("--node-name: not set and env NODE_NAME is empty (the node name is required)")
        interval = _seconds("--collect-res-used-interval", a.collect_res_used_interval)
        if interval < 1:
            raise ValueError(f"--collect-res-used-interval: {a.collect_res_used_interval!r} is below 1s")
        if not (math.isfinite(a.push_interval_seconds) and a.push_interval_seconds > 0):
            raise ValueError(f"--push-interval-seconds: {a.push_interval_seconds} must be a number > 0")
        for flag, value in (("--addr", a.addr), ("--hub-address", a.hub_address)):
            if value:
                try:
                    parse_addr(value)
                except ValueError as e:
                    raise ValueError(f"{flag}: {e}") from None
        if not (math.isfinite(a.kube_api_qps) and a.kube_api_qps > 0) or a.kube_api_burst < 1:
            raise ValueError(
                f"--kube-api-qps/--kube-api-burst: {a.kube_api_qps}/{a.kube_api_burst} must be > 0"
            )
        if a.v < 0:
            raise ValueError(f"--v: {a.v} must be 0 or more")
        token = Path(a.hub_token_file) if a.hub_token_file else None
        if token is None and SERVICE_ACCOUNT_TOKEN.exists():
            token = SERVICE_ACCOUNT_TOKEN
        opts = Options(
            node_name=node,
            kubeconfig=a.kubeconfig,
            paths=HostPaths(
                cgroup_root=Path(a.cgroup_root_dir), proc=Path(a.proc_root_dir), sys=Path(a.sys_root_dir)
            ),
            cgroup_driver=None if a.cgroup_driver == "auto" else CgroupDriver(a.cgroup_driver),
            collect_interval_seconds=interval,
            addr=a.addr,
            hub_address=a.hub_address or None,
            hub_token_file=token,
            hub_ca=Path(a.hub_ca) if a.hub_ca else None,
            push_interval_seconds=a.push_interval_seconds,
            enable_node_metric_report=a.enable_node_metric_report,
            metric_cache_path=Path(a.metric_cache_path) if a.metric_cache_path else None,
            retention_seconds=_seconds("--metric-retention", a.metric_retention),
            pod_retention_seconds=_seconds("--pod-metric-retention", a.pod_metric_retention),
            kube_api_qps=a.kube_api_qps,
            kube_api_burst=a.kube_api_burst,
            feature_gates=a.feature_gates,
            enable_qos=a.enable_qos,
            qos_dry_run=a.qos_dry_run,
            audit_log=Path(a.audit_log) if a.audit_log else None,
            metric_cache_checkpoint_seconds=_seconds_or_off(
                "--metric-cache-checkpoint-interval", a.metric_cache_checkpoint_interval
            ),
            node_topology_sync_seconds=_seconds_or_off(
                "--node-topology-sync-interval", a.node_topology_sync_interval
            ),
            kubelet_config_file=Path(a.kubelet_config_file),
            kubelet_root_dir=Path(a.kubelet_root_dir),
            gpu_fake_root=Path(a.gpu_fake_root) if a.gpu_fake_root else None,
            verbosity=max(a.v, 4) if a.verbose else a.v,
            warnings=tuple(warnings),
        )
    except ValueError as e:
        p.error(str(e))
    return opts, a
