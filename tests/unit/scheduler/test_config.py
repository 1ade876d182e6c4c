"""koord-scheduler configuration: defaults, enabling/disabling plugins, weights, args, and errors
that name the field and value."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import (
    DEFAULT_PLUGINS,
    ConfigError,
    LeaderElection,
    Profile,
    load_profile,
    parse_profile,
)
from scheduler.registry import KNOWN as REGISTERED
from scheduler.registry import build_framework

KNOWN = frozenset(DEFAULT_PLUGINS) | {"Extra"}
ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "tests/data/upstream/chart-v1.8.0/koord-scheduler-config.yaml"


def _fit(strategy: dict[str, Any]) -> dict[str, Any]:
    return {
        "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]}]
    }


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
        ({"profiles": [{"plugins": {"preSort": {}}}]}, "profiles[0].plugins.preSort"),
        ({"profiles": [{"plugins": {"permit": {"enabled": [{"name": "Nope"}]}}}]}, "plugin 'Nope'"),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"name": "Reservation", "weight": 0}]}}}]},
            "weight=0",
        ),
        ({"profiles": [{"pluginConfig": [{"name": "Nope", "args": {}}]}]}, "plugin 'Nope'"),
        (
            {"profiles": [{"pluginConfig": [{"name": "Extra", "args": {"kind": "OtherArgs"}}]}]},
            "kind='OtherArgs'",
        ),
        (
            {"profiles": [{"pluginConfig": [{"name": "Extra", "args": {"apiVersion": "v9"}}]}]},
            "apiVersion='v9'",
        ),
        ({"profiles": [{"schedulerName": "s", "typo": 1}]}, "profiles[0].typo: unknown field"),
        ({"clientConection": {}}, "clientConection: unknown field"),
        ({"leaderElection": {"leaderElect": "yes"}}, "leaderElection.leaderElect='yes'"),
        ({"leaderElection": {"resourceLock": "configmaps"}}, "leaderElection.resourceLock='configmaps'"),
        ({"leaderElection": {"resourceName": ""}}, "leaderElection.resourceName=''"),
        (_fit({"type": "MostAllocated"}), "scoringStrategy.type='MostAllocated'"),
        (_fit({"resources": [{"name": "cpu", "weight": 0}]}), "resources[0].weight=0"),
        (_fit({"resources": [{"weight": 1}]}), "resources[0].name=None"),
        (_fit({"requestedToCapacityRatio": {}}), "scoringStrategy.requestedToCapacityRatio"),
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


# --- upstream's chart configuration -------------------------------------------------------------------
def test_upstream_chart_config_loads_and_logs_what_it_ignores(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = yaml.safe_load(CHART.read_text())["data"]["koord-scheduler-config"]
    f = tmp_path / "koord-scheduler.config"
    f.write_text(text)
    with caplog.at_level(logging.WARNING, "koord-scheduler.config"):
        p = load_profile(f, REGISTERED)
    # koord's plugins all stay (queueSort/postFilter/bind "*" disable nothing of koord's) ...
    assert p.plugins == DEFAULT_PLUGINS
    assert p.weights == {"LoadAwareScheduling": 1}
    # ... LoadAwareScheduling gets the chart's args (apiVersion/kind checked and dropped) ...
    assert p.args["LoadAwareScheduling"] == {
        "filterExpiredNodeMetrics": False,
        "nodeMetricExpirationSeconds": 300,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "usageThresholds": {"cpu": 65, "memory": 95},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    assert p.args["NodeResourcesFit"] == {}
    assert p.leader_election == LeaderElection(True, "koord-scheduler", "koordinator-system")
    # ... and what koord lacks is one warning line naming it.
    [record] = caplog.records
    line = record.getMessage()
    for name in (
        "Coscheduling",
        "Reservation",
        "ElasticQuota",
        "DeviceShare",
        "PrioritySort",
        "DefaultBinder",
    ):
        assert name in line
    assert (
        "kubernetes.io/batch-cpu=1" in line
        and "pluginConfig: ElasticQuota, Coscheduling, DeviceShare" in line
    )
    assert "LoadAwareScheduling" not in line
    fw = build_framework(p)  # and the framework builds from it
    assert fw is not None


def test_chart_loadaware_args_are_still_validated() -> None:
    doc = yaml.safe_load(yaml.safe_load(CHART.read_text())["data"]["koord-scheduler-config"])
    doc["profiles"][0]["pluginConfig"][1]["args"]["usageThresholds"]["cpu"] = 170
    with pytest.raises(ConfigError, match="usageThresholds"):
        build_framework(parse_profile(doc, REGISTERED))


def test_koord_plugin_at_an_unmodelled_point_is_noted() -> None:
    doc = {"profiles": [{"plugins": {"permit": {"enabled": [{"name": "LoadAwareScheduling"}]}}}]}
    assert parse_profile(doc, KNOWN).ignored == ("plugins: LoadAwareScheduling at permit",)


def test_unused_fields_are_noted() -> None:
    doc = {
        "parallelism": 16,
        "leaderElection": {"leaseDuration": "15s", "resourceLock": "leases"},
        "profiles": [{"percentageOfNodesToScore": 50}],
    }
    p = parse_profile(doc, KNOWN)
    assert p.ignored == (
        "parallelism",
        "leaderElection.leaseDuration",
        "profiles[0].percentageOfNodesToScore",
    )
    assert p.leader_election == LeaderElection()


def test_fit_scoring_on_cpu_and_memory_at_weight_one_is_what_koord_does() -> None:
    doc = _fit({"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory"}]})
    assert parse_profile(doc, KNOWN).ignored == ()
    doc = _fit({"resources": [{"name": "cpu", "weight": 3}]})
    assert parse_profile(doc, KNOWN).ignored == ("NodeResourcesFit scoringStrategy.resources: cpu=3",)
