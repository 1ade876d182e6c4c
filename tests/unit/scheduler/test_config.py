"""koord-scheduler configuration: defaults, enabling/disabling plugins, weights, args, and errors
that name the field and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import DEFAULT_PLUGINS, ConfigError, Profile, load_profile, parse_profile

KNOWN = frozenset(DEFAULT_PLUGINS) | {"Extra"}


def test_defaults() -> None:
    assert parse_profile(None) == Profile()
    assert (
        parse_profile({"apiVersion": "kubescheduler.config.k8s.io/v1", "profiles": []}).plugins
        == DEFAULT_PLUGINS
    )
    assert Profile().scheduler_name == "koord-scheduler"


def test_enable_disable_weights_and_args(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: my-sched
  plugins:
    multiPoint:
      disabled: [{name: NodeResourcesFit}]
      enabled: [{name: LoadAwareScheduling, weight: 3}, {name: Extra}]
  pluginConfig:
  - name: LoadAwareScheduling
    args: {usageThresholds: {cpu: 70}}
"""
    )
    p = load_profile(f, KNOWN)
    assert p.scheduler_name == "my-sched"
    assert p.plugins == (
        "NodeUnschedulable",
        "NodeAffinity",
        "TaintToleration",
        "LoadAwareScheduling",
        "Extra",
    )
    assert p.weights == {"LoadAwareScheduling": 3}
    assert p.args == {"LoadAwareScheduling": {"usageThresholds": {"cpu": 70}}}


def test_disable_all_then_enable() -> None:
    doc = {
        "profiles": [{"plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "Extra"}]}}}]
    }
    assert parse_profile(doc, KNOWN).plugins == ("Extra",)


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"apiVersion": "v2"}, "apiVersion='v2'"),
        ({"kind": "Other"}, "kind='Other'"),
        ({"profiles": [{}, {}]}, "exactly one profile"),
        ({"profiles": [{"schedulerName": ""}]}, "profiles[0].schedulerName=''"),
        ({"profiles": [{"plugins": {"queueSort": {}}}]}, "profiles[0].plugins.queueSort"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "X", "weight": 0}]}}}]}, ".weight=0"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}]}, "plugin 'Nope'"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{}]}}}]}, "enabled[0].name=None"),
        ({"profiles": [{"pluginConfig": [{"name": "Extra", "args": [1]}]}]}, "pluginConfig[0].args=[1]"),
        ([], "config=[]"),
    ],
)
def test_errors_name_field_and_value(doc: object, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_profile(doc, KNOWN)
    assert needle in str(e.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--config="):
        load_profile(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_profile(bad)
