"""CoschedulingArgs (docs/rules/scheduler-coscheduling.md#plugin-arguments): decoded from the
scheduler-config v1 JSON names with upstream's defaults and validation. Invalid args raise ArgsError
naming the field and its value: the plugin is then not constructible.
Imports: the standard library and apis (duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

from apis.duration import DurationError, format_go_duration, parse_go_duration

DEFAULT_TIMEOUT_NS: Final = 600 * 1_000_000_000
DEFAULT_CONTROLLER_WORKERS: Final = 1
DEFAULT_MATCH_POLICY: Final = "once-satisfied"
_BOOLS: Final = ("skipCheckScheduleCycle", "enablePreemption", "awareNetworkTopology")
_KNOWN: Final = frozenset(
    {"defaultTimeout", "controllerWorkers", "defaultMatchPolicy", *_BOOLS, "apiVersion", "kind"}
)


class ArgsError(ValueError):
    """Invalid CoschedulingArgs; the message names the field and the value."""

    def __init__(self, path: str, value: object, reason: str) -> None:
        self.path = path
        self.value = value
        super().__init__(f"CoschedulingArgs: {path}={value!r}: {reason}")


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    default_timeout: int = DEFAULT_TIMEOUT_NS  # nanoseconds: a gang's Permit wait when none is given
    controller_workers: int = DEFAULT_CONTROLLER_WORKERS
    skip_check_schedule_cycle: bool = False  # deprecated, no effect
    enable_preemption: bool = False
    aware_network_topology: bool = False
    default_match_policy: str = DEFAULT_MATCH_POLICY

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Self:
        """Defaults for absent (or null) fields, then upstream's validation: defaultTimeout must not be
        negative and controllerWorkers must be at least 1. defaultMatchPolicy is not validated upstream
        (a gang whose own policy is invalid gets this value as it is)."""
        raw: Mapping[str, Any] = args or {}
        if not isinstance(raw, Mapping):
            raise ArgsError("args", raw, "must be an object")
        for key in raw:
            if key not in _KNOWN:
                raise ArgsError(str(key), raw[key], "unknown field")
        timeout = _duration("defaultTimeout", raw.get("defaultTimeout"))
        if timeout < 0:
            raise ArgsError("defaultTimeout", raw.get("defaultTimeout"), "must not be negative")
        workers = raw.get("controllerWorkers")
        if workers is None:
            workers = DEFAULT_CONTROLLER_WORKERS
        if isinstance(workers, bool) or not isinstance(workers, int) or not -(1 << 63) <= workers < 1 << 63:
            raise ArgsError("controllerWorkers", workers, "must be an int64")
        if workers < 1:
            raise ArgsError("controllerWorkers", workers, "must be at least 1")
        policy = raw.get("defaultMatchPolicy")
        if policy is None:
            policy = DEFAULT_MATCH_POLICY
        if not isinstance(policy, str):
            raise ArgsError("defaultMatchPolicy", policy, "must be a string")
        flags = {}
        for key in _BOOLS:
            value = raw.get(key)
            if value is not None and not isinstance(value, bool):
                raise ArgsError(key, value, "must be a boolean")
            flags[key] = bool(value)
        return cls(
            default_timeout=timeout,
            controller_workers=workers,
            skip_check_schedule_cycle=flags["skipCheckScheduleCycle"],
            enable_preemption=flags["enablePreemption"],
            aware_network_topology=flags["awareNetworkTopology"],
            default_match_policy=policy,
        )

    def to_json(self) -> dict[str, Any]:
        """The v1 JSON of these args (what the configuration dump shows)."""
        return {
            "defaultTimeout": format_go_duration(self.default_timeout),
            "controllerWorkers": self.controller_workers,
            "skipCheckScheduleCycle": self.skip_check_schedule_cycle,
            "enablePreemption": self.enable_preemption,
            "awareNetworkTopology": self.aware_network_topology,
            "defaultMatchPolicy": self.default_match_policy,
        }


def _duration(path: str, value: object) -> int:
    if value is None:
        return DEFAULT_TIMEOUT_NS
    if not isinstance(value, str):
        raise ArgsError(path, value, 'must be a Go duration string such as "600s"')
    try:
        return parse_go_duration(value)
    except DurationError as e:
        raise ArgsError(path, value, f"is not a Go duration: {e}") from None
