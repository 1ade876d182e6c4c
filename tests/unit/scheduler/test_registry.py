"""Building a profile's framework from the registry; plugin args errors name the field."""

from __future__ import annotations

import pytest

from scheduler.config import DEFAULT_PLUGINS, ConfigError, Profile, parse_profile
from scheduler.registry import KNOWN, build_framework


def test_default_profile_builds_every_default_plugin() -> None:
    fw = build_framework(Profile())
    assert [p.name for p in fw.plugins] == list(DEFAULT_PLUGINS)
    assert [p.name for p in fw.scores] == ["NodeResourcesFit", "LoadAwareScheduling"]
    assert {p.name for p in fw.filters} == set(DEFAULT_PLUGINS)
    assert [p.name for p in fw.reserves] == ["LoadAwareScheduling"]


def test_args_reach_the_plugin_and_bad_args_name_the_field() -> None:
    doc = {
        "profiles": [
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 70}}}]}
        ]
    }
    fw = build_framework(parse_profile(doc, KNOWN))
    la = next(p for p in fw.plugins if p.name == "LoadAwareScheduling")
    assert la.args.usage_thresholds["cpu"] == 70  # type: ignore[attr-defined]
    bad = {
        "profiles": [
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 120}}}]}
        ]
    }
    with pytest.raises(ConfigError, match=r"LoadAwareScheduling\.args: .*usageThresholds.*120"):
        build_framework(parse_profile(bad, KNOWN))
    with pytest.raises(ConfigError, match="NodeAffinity takes no arguments"):
        build_framework(
            parse_profile({"profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": {"x": 1}}]}]})
        )
