"""Building a profile's framework from the registry: the default profile's plugins per extension point,
args reaching the plugin, and args errors naming the field."""

from __future__ import annotations

import pytest

from scheduler.config import ConfigError, parse_config
from scheduler.registry import KNOWN, build_framework, default_profile


def test_default_profile_builds_every_registered_default_plugin() -> None:
    fw = build_framework(default_profile())
    assert {p.name for p in fw.plugins} == set(default_profile().plugins)
    order = [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
    ]
    assert [p.name for p in fw.filters][:6] == order  # kube 1.20's filter order
    assert {"NodeResourcesFit", "LoadAwareScheduling"} <= {p.name for p in fw.scores}
    assert "LoadAwareScheduling" in [p.name for p in fw.reserves]


def _args(name: str, args: object) -> dict[str, object]:
    return {"profiles": [{"pluginConfig": [{"name": name, "args": args}]}]}


def test_args_reach_the_plugin_and_bad_args_name_the_field() -> None:
    [profile] = parse_config(_args("LoadAwareScheduling", {"usageThresholds": {"cpu": 70}}), KNOWN).profiles
    fw = build_framework(profile)
    la = next(p for p in fw.plugins if p.name == "LoadAwareScheduling")
    assert la.args.usage_thresholds["cpu"] == 70  # type: ignore[attr-defined]
    [bad] = parse_config(_args("LoadAwareScheduling", {"usageThresholds": {"cpu": 120}}), KNOWN).profiles
    with pytest.raises(ConfigError, match=r"LoadAwareScheduling\.args: .*usageThresholds.*120"):
        build_framework(bad)
    [extra] = parse_config(_args("TaintToleration", {"x": 1}), KNOWN).profiles
    with pytest.raises(ConfigError, match="TaintToleration takes no arguments"):
        build_framework(extra)
    bogus = {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Bogus"}]}]}}  # fmt: skip
    [bad_affinity] = parse_config(_args("NodeAffinity", {"addedAffinity": bogus}), KNOWN).profiles
    with pytest.raises(ConfigError, match=r"NodeAffinity\.args: addedAffinity\..*'Bogus'"):
        build_framework(bad_affinity)
