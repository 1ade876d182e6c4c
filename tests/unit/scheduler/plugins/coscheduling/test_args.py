"""CoschedulingArgs: v1 JSON names, upstream's defaults and validation, errors naming field and value."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.plugins.coscheduling.args import ArgsError, CoschedulingArgs
from scheduler.plugins.coscheduling.plugin import Coscheduling


def test_defaults() -> None:
    args = CoschedulingArgs.from_args({})
    assert args == CoschedulingArgs.from_args(None) == CoschedulingArgs()
    assert args.default_timeout == 600 * 10**9
    assert args.controller_workers == 1
    assert args.default_match_policy == "once-satisfied"
    assert not (args.enable_preemption or args.aware_network_topology or args.skip_check_schedule_cycle)
    assert args.to_json()["defaultTimeout"] == "10m0s"


def test_null_fields_take_defaults_and_values_are_read() -> None:
    raw = {"defaultTimeout": "1m30s", "controllerWorkers": 3, "enablePreemption": True}
    raw |= {
        "awareNetworkTopology": None,
        "defaultMatchPolicy": "only-waiting",
        "skipCheckScheduleCycle": True,
    }
    args = CoschedulingArgs.from_args(raw | {"kind": "CoschedulingArgs"})
    assert args.default_timeout == 90 * 10**9
    assert args.controller_workers == 3
    assert args.enable_preemption and args.skip_check_schedule_cycle and not args.aware_network_topology
    assert args.default_match_policy == "only-waiting"
    assert CoschedulingArgs.from_args({"defaultTimeout": "0s"}).default_timeout == 0  # zero is valid


def test_default_match_policy_is_not_validated() -> None:
    assert CoschedulingArgs.from_args({"defaultMatchPolicy": "whatever"}).default_match_policy == "whatever"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"defaultTimeout": "-1s"}, "CoschedulingArgs: defaultTimeout='-1s': must not be negative"),
        ({"defaultTimeout": "10"}, "defaultTimeout='10': is not a Go duration"),
        ({"defaultTimeout": 600}, "defaultTimeout=600: must be a Go duration string"),
        ({"controllerWorkers": 0}, "CoschedulingArgs: controllerWorkers=0: must be at least 1"),
        ({"controllerWorkers": "2"}, "controllerWorkers='2': must be an int64"),
        ({"controllerWorkers": True}, "controllerWorkers=True: must be an int64"),
        ({"enablePreemption": "yes"}, "enablePreemption='yes': must be a boolean"),
        ({"defaultMatchPolicy": 1}, "defaultMatchPolicy=1: must be a string"),
        ({"defaultTimeoutSeconds": 5}, "defaultTimeoutSeconds=5: unknown field"),
    ],
)
def test_invalid_args_name_field_and_value(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as info:
        CoschedulingArgs.from_args(args)
    assert message in str(info.value)
    with pytest.raises(ValueError):
        Coscheduling.from_args(args)


def test_plugin_from_args() -> None:
    plugin = Coscheduling.from_args({"defaultTimeout": "5s"})
    assert plugin.name == "Coscheduling"
    assert plugin.args.default_timeout == 5 * 10**9
