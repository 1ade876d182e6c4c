"""Metric kinds of the koordlet metric cache and their exact label sets (docs/rules/koordlet.md#metric-cache),
as data, plus the label validation rules for samples (exact set) and queries (any registered subset).

Imports: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class MetricCacheError(ValueError):
    """Base error of the metric cache."""


class UnknownKindError(MetricCacheError):
    """The metric kind is not registered."""


class LabelSetError(MetricCacheError):
    """The labels given do not fit the kind's registered label set."""


@dataclass(frozen=True)
class MetricKind:
    """A metric kind (`__name__`) and the exact set of property labels its samples carry."""

    name: str
    labels: frozenset[str]


NUMA = ("numa_node_id",)
BE = ("be_resource", "be_allocation")
POD = ("pod_uid",)
CONTAINER = ("container_id",)
HOST_APP = ("host_app_name",)
PSI = ("psi_resource", "psi_precision", "psi_degree")
GPU = ("gpu_minor", "gpu_device_uuid")
INTERFACE = ("interface",)

NETWORK_KINDS = tuple(
    f"node_network_{direction}_{what}"
    for what in ("bytes", "packets", "errors", "drops")
    for direction in ("rx", "tx")
)
"""koord additions (not upstream): per-interface rates per second from the netlink counters."""

_USAGE_SUFFIXES = (
    "memory_usage_with_page_cache",
    "memory_with_hot_page_usage",
    "memory_cold_page_size",
)

_TABLE: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        (
            "node_cpu_usage",
            "node_memory_usage",
            *(f"node_{s}" for s in _USAGE_SUFFIXES),
            "sys_cpu_usage",
            "sys_memory_usage",
        ),
        (),
    ),
    (
        ("node_numa_cpu_usage", "node_numa_memory_usage", "sys_numa_cpu_usage", "sys_numa_memory_usage"),
        NUMA,
    ),
    (("node_be",), BE),
    (
        (
            "pod_cpu_usage",
            "pod_memory_usage",
            *(f"pod_{s}" for s in _USAGE_SUFFIXES),
            "pod_cpu_throttled",
            "pod_psi_cpu_full_supported",
        ),
        POD,
    ),
    (("container_psi_cpu_full_supported",), POD + CONTAINER),
    (
        (
            "container_cpu_usage",
            "container_memory_usage",
            *(f"container_{s}" for s in _USAGE_SUFFIXES),
            "container_cpu_throttled",
        ),
        CONTAINER,
    ),
    (
        (
            "host_application_cpu_usage",
            "host_application_memory_usage",
            *(f"host_application_{s}" for s in _USAGE_SUFFIXES),
        ),
        HOST_APP,
    ),
    (("pod_psi",), POD + PSI),
    (("container_psi",), POD + PSI + CONTAINER),
    (("container_cpi",), (*POD, *CONTAINER, "cpi_resource")),
    (("resctrl_resource_llc",), ("qos", "cache_id")),
    (("resctrl_resource_mb",), ("qos", "cache_id", "resctrl_mb_type")),
    (("node_gpu_core_usage", "node_gpu_memory_usage", "node_gpu_memory_total"), GPU),
    (("pod_gpu_core_usage", "pod_gpu_memory_usage", "pod_gpu_memory_total"), GPU + POD),
    (
        ("container_gpu_core_usage", "container_gpu_memory_usage", "container_gpu_memory_total"),
        GPU + CONTAINER,
    ),
    # koord additions (not upstream): node-level PSI from /proc/pressure and the network rates.
    (("node_psi",), PSI),
    (NETWORK_KINDS, INTERFACE),
)


def _build() -> dict[str, MetricKind]:
    out: dict[str, MetricKind] = {}
    for names, labels in _TABLE:
        for name in names:
            if name in out:
                raise AssertionError(f"metric kind {name} registered twice")
            out[name] = MetricKind(name, frozenset(labels))
    return out


KINDS: Mapping[str, MetricKind] = _build()
"""Every registered metric kind by name."""


def get_kind(name: str) -> MetricKind:
    """The registered kind `name`, or `UnknownKindError`."""
    kind = KINDS.get(name)
    if kind is None:
        raise UnknownKindError(f"unknown metric kind {name!r}")
    return kind


def validate_sample_labels(kind: str, labels: Mapping[str, str]) -> MetricKind:
    """Check a sample's labels are exactly the registered set of `kind` (string values); return the kind."""
    k = get_kind(kind)
    given = frozenset(labels)
    if given != k.labels:
        missing = sorted(k.labels - given)
        extra = sorted(given - k.labels)
        raise LabelSetError(f"metric {kind}: label set mismatch (missing {missing}, unregistered {extra})")
    for key, value in labels.items():
        if not isinstance(value, str):
            raise LabelSetError(f"metric {kind}: label {key} must be a string, got {type(value).__name__}")
    return k


def validate_query_labels(kind: str, labels: Mapping[str, str]) -> MetricKind:
    """Check a query's labels are a subset of the registered set of `kind`; return the kind."""
    k = get_kind(kind)
    extra = sorted(frozenset(labels) - k.labels)
    if extra:
        raise LabelSetError(f"metric {kind}: unregistered query labels {extra}")
    return k
