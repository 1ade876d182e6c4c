"""ElasticQuotaArgs (docs/rules/scheduler-elasticquota.md#plugin-arguments): decoded from the scheduler-config
v1 JSON names with upstream's defaults and validation. Invalid args raise ArgsError naming the field and
its value: the plugin is then not constructible.
Imports: the standard library and apis (duration, quantity).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

from apis.duration import DurationError, format_go_duration, parse_go_duration
from apis.quantity import Quantity, QuantityError, format_resource_list, parse_resource_list

NS: Final = 1_000_000_000
DEFAULT_DELAY_EVICT_TIME_NS: Final = 120 * NS
DEFAULT_REVOKE_POD_INTERVAL_NS: Final = 1 * NS
DEFAULT_QUOTA_SNAPSHOT_UPDATE_INTERVAL_NS: Final = 120 * NS
DEFAULT_QUOTA_GROUP_NAMESPACE: Final = "koordinator-system"
# MaxInt64/5 whole units (cpu in cores): the system and default quotas' max when none is given
DEFAULT_GROUP_MAX_VALUE: Final = ((1 << 63) - 1) // 5
_BOOLS: Final = {
    "monitorAllQuotas": False,
    "enableCheckParentQuota": False,
    "enableRuntimeQuota": True,
    "enableMinQuotaScale": True,
    "disableDefaultQuotaPreemption": True,
    "enableQueueHint": False,
}
_DURATIONS: Final = {
    "delayEvictTime": DEFAULT_DELAY_EVICT_TIME_NS,
    "revokePodInterval": DEFAULT_REVOKE_POD_INTERVAL_NS,
    "quotaSnapshotUpdateInterval": DEFAULT_QUOTA_SNAPSHOT_UPDATE_INTERVAL_NS,
}
_LISTS: Final = ("defaultQuotaGroupMax", "systemQuotaGroupMax")
_KNOWN: Final = frozenset(
    {*_BOOLS, *_DURATIONS, *_LISTS, "quotaGroupNamespace", "hookPlugins", "apiVersion", "kind"}
)


class ArgsError(ValueError):
    """Invalid ElasticQuotaArgs; the message names the field and the value."""

    def __init__(self, path: str, value: object, reason: str) -> None:
        self.path = path
        self.value = value
        super().__init__(f"ElasticQuotaArgs: {path}={value!r:.120}: {reason}")


def default_group_max() -> dict[str, Quantity]:
    return {
        "cpu": Quantity.from_int(DEFAULT_GROUP_MAX_VALUE),
        "memory": Quantity.from_int(DEFAULT_GROUP_MAX_VALUE),
    }


@dataclass(frozen=True, slots=True)
class ElasticQuotaArgs:
    delay_evict_time: int = DEFAULT_DELAY_EVICT_TIME_NS  # nanoseconds
    revoke_pod_interval: int = DEFAULT_REVOKE_POD_INTERVAL_NS
    quota_snapshot_update_interval: int = DEFAULT_QUOTA_SNAPSHOT_UPDATE_INTERVAL_NS
    default_quota_group_max: dict[str, Quantity] = field(default_factory=default_group_max)
    system_quota_group_max: dict[str, Quantity] = field(default_factory=default_group_max)
    quota_group_namespace: str = DEFAULT_QUOTA_GROUP_NAMESPACE
    monitor_all_quotas: bool = False
    enable_check_parent_quota: bool = False
    enable_runtime_quota: bool = True
    enable_min_quota_scale: bool = True
    disable_default_quota_preemption: bool = True
    enable_queue_hint: bool = False
    hook_plugins: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Self:
        """Defaults for absent (or null) fields, then upstream's validation: no negative quantity in
        defaultQuotaGroupMax / systemQuotaGroupMax, no negative delayEvictTime / revokePodInterval."""
        raw: Mapping[str, Any] = {} if args is None else args
        if not isinstance(raw, Mapping):
            raise ArgsError("args", raw, "must be an object")
        for key in raw:
            if key not in _KNOWN:
                raise ArgsError(str(key), raw[key], "unknown field")
        durations = {key: _duration(key, raw.get(key), default) for key, default in _DURATIONS.items()}
        for key in ("delayEvictTime", "revokePodInterval"):
            if durations[key] < 0:
                raise ArgsError(key, raw.get(key), "must not be negative")
        lists = {key: _group_max(key, raw.get(key)) for key in _LISTS}
        flags: dict[str, bool] = {}
        for key, default in _BOOLS.items():
            value = raw.get(key)
            if value is not None and not isinstance(value, bool):
                raise ArgsError(key, value, "must be a boolean")
            flags[key] = default if value is None else value
        namespace = raw.get("quotaGroupNamespace")
        if namespace is None or namespace == "":
            namespace = DEFAULT_QUOTA_GROUP_NAMESPACE
        if not isinstance(namespace, str):
            raise ArgsError("quotaGroupNamespace", namespace, "must be a string")
        hooks = raw.get("hookPlugins")
        if hooks is None:
            hooks = []
        if not isinstance(hooks, list) or not all(isinstance(h, Mapping) for h in hooks):
            raise ArgsError("hookPlugins", hooks, "must be a list of {key, factoryKey, factoryArgs} objects")
        return cls(
            delay_evict_time=durations["delayEvictTime"],
            revoke_pod_interval=durations["revokePodInterval"],
            quota_snapshot_update_interval=durations["quotaSnapshotUpdateInterval"],
            default_quota_group_max=lists["defaultQuotaGroupMax"],
            system_quota_group_max=lists["systemQuotaGroupMax"],
            quota_group_namespace=namespace,
            monitor_all_quotas=flags["monitorAllQuotas"],
            enable_check_parent_quota=flags["enableCheckParentQuota"],
            enable_runtime_quota=flags["enableRuntimeQuota"],
            enable_min_quota_scale=flags["enableMinQuotaScale"],
            disable_default_quota_preemption=flags["disableDefaultQuotaPreemption"],
            enable_queue_hint=flags["enableQueueHint"],
            hook_plugins=tuple(hooks),
        )

    def to_json(self) -> dict[str, Any]:
        """The v1 JSON of these args (what the configuration dump shows)."""
        return {
            "delayEvictTime": format_go_duration(self.delay_evict_time),
            "revokePodInterval": format_go_duration(self.revoke_pod_interval),
            "defaultQuotaGroupMax": format_resource_list(self.default_quota_group_max),
            "systemQuotaGroupMax": format_resource_list(self.system_quota_group_max),
            "quotaGroupNamespace": self.quota_group_namespace,
            "monitorAllQuotas": self.monitor_all_quotas,
            "enableCheckParentQuota": self.enable_check_parent_quota,
            "enableRuntimeQuota": self.enable_runtime_quota,
            "enableMinQuotaScale": self.enable_min_quota_scale,
            "disableDefaultQuotaPreemption": self.disable_default_quota_preemption,
            "enableQueueHint": self.enable_queue_hint,
            "quotaSnapshotUpdateInterval": format_go_duration(self.quota_snapshot_update_interval),
            "hookPlugins": [dict(h) for h in self.hook_plugins],
        }


def _duration(path: str, value: object, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ArgsError(path, value, 'must be a Go duration string such as "2m0s"')
    try:
        return parse_go_duration(value)
    except DurationError as e:
        raise ArgsError(path, value, f"is not a Go duration: {e}") from None


def _group_max(path: str, value: object) -> dict[str, Quantity]:
    if value is None:
        return default_group_max()
    if not isinstance(value, Mapping):
        raise ArgsError(path, value, "must be a ResourceList object")
    try:
        parsed = parse_resource_list(value)
    except QuantityError as e:
        raise ArgsError(path, value, str(e)) from None
    for name, q in parsed.items():
        if q.sign() < 0:
            raise ArgsError(f"{path}.{name}", str(q), "must not be negative")
    return parsed or default_group_max()
