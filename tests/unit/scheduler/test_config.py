"""koord-scheduler configuration: versions v1beta1..v1, defaults per version, kube-scheduler's merge of
enabled/disabled lists, multiPoint expansion, several profiles, the plugins koord lacks named in one error
(or skipped), and errors that name the field and value."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import ConfigError, LeaderElection, load_config, parse_config
from scheduler.profiledefaults import Entry, merge
from scheduler.registry import KNOWN as REGISTERED
from scheduler.registry import build_framework, default_profile

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "tests/data/upstream/chart-v1.8.0/koord-scheduler-config.yaml"
FIVE = ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "LoadAwareScheduling")
KNOWN = frozenset(FIVE)


def doc(version: str = "v1", **root: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"kubescheduler.config.k8s.io/{version}",
        "kind": "KubeSchedulerConfiguration",
        **root,
    }


def names(entries: tuple[Entry, ...]) -> list[str]:
    return [e.name for e in entries]


def chart() -> dict[str, Any]:
    loaded = yaml.safe_load(yaml.safe_load(CHART.read_text())["data"]["koord-scheduler-config"])
    assert isinstance(loaded, dict)
    return loaded


# --- merging, as kube-scheduler -----------------------------------------------------------------------
def test_merge_drops_disabled_replaces_reconfigured_and_appends_the_rest() -> None:
    base = (Entry("A", 1), Entry("B", 1), Entry("C", 1))
    assert merge(base, [Entry("X", 2), Entry("B", 5)], ["C"]) == (Entry("A", 1), Entry("B", 5), Entry("X", 2))
    assert merge(base, [Entry("X")], ["*"]) == (Entry("X"),)
    assert merge(base, [], []) == base


def test_no_file_runs_kube_120_defaults_with_what_koord_has() -> None:
    config = parse_config(None, KNOWN)
    assert config.version == "v1beta2"
    [p] = config.profiles
    assert p.scheduler_name == "koord-scheduler"
    assert names(p.points["filter"]) == list(FIVE)  # kube 1.20's filter order, LoadAware last
    assert names(p.points["score"]) == [
        "NodeResourcesFit",
        "NodeAffinity",
        "TaintToleration",
        "LoadAwareScheduling",
    ]
    assert names(p.points["reserve"]) == ["LoadAwareScheduling"]
    assert any("InterPodAffinity" in line for line in config.ignored)  # a default koord lacks, noted


def test_default_framework_runs_each_plugin_where_it_implements_the_point() -> None:
    fw = build_framework(default_profile())
    # kube 1.20's filter order, over the plugins koord has
    order = [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
    ]
    assert [p.name for p in fw.filters][:6] == order
    assert "LoadAwareScheduling" in [p.name for p in fw.scores]
    assert "NodeResourcesFit" in [p.name for p in fw.pre_filters]  # its filter reads what preFilter computed
    assert [p.name for p in fw.reserves] == ["VolumeBinding", "LoadAwareScheduling"]  # kube 1.20 order
    assert [p.name for p in fw.pre_binds] == ["VolumeBinding"]


def test_v1_multipoint_expansion_order_and_weights() -> None:
    d = doc(
        profiles=[
            {
                "plugins": {
                    "multiPoint": {"enabled": [{"name": "LoadAwareScheduling", "weight": 4}]},
                    "filter": {
                        "enabled": [{"name": "NodeResourcesFit"}],
                        "disabled": [{"name": "TaintToleration"}],
                    },
                    "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]},
                }
            }
        ]
    )
    [p] = parse_config(d, KNOWN).profiles
    fw = build_framework(p)
    # filter: NodeResourcesFit (named at filter and multiPoint) first, then the multiPoint-only ones in
    # order, TaintToleration disabled at filter only
    assert [x.name for x in fw.filters] == [
        "NodeResourcesFit", "NodeUnschedulable", "NodeAffinity", "LoadAwareScheduling",
    ]  # fmt: skip
    weights = {x.name: w for x, w in zip(fw.scores, fw.weights, strict=True)}
    # the score point's weight wins; TaintToleration (disabled at filter only) and NodeAffinity score with
    # v1's multiPoint weights
    assert weights == {
        "NodeResourcesFit": 7,
        "LoadAwareScheduling": 4,
        "TaintToleration": 3,
        "NodeAffinity": 2,
    }


def test_disable_all_then_enable() -> None:
    d = doc(
        "v1beta1",
        profiles=[{"plugins": {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeName"}]}}}],
    )
    [p] = parse_config(d, KNOWN | {"NodeName"}).profiles
    assert names(p.points["filter"]) == ["NodeName"]


def test_several_profiles_one_per_scheduler_name() -> None:
    d = doc(
        profiles=[
            {"schedulerName": "a"},
            {
                "schedulerName": "b",
                "plugins": {"multiPoint": {"disabled": [{"name": "LoadAwareScheduling"}]}},
            },
        ]
    )
    config = parse_config(d, KNOWN)
    assert [p.scheduler_name for p in config.profiles] == ["a", "b"]
    assert "LoadAwareScheduling" in config.profiles[0].plugins
    b = config.profile("b")
    assert b is not None and "LoadAwareScheduling" not in b.plugins
    with pytest.raises(ConfigError, match="schedulerName 'a' used by more than one profile"):
        parse_config(doc(profiles=[{"schedulerName": "a"}, {"schedulerName": "a"}]), KNOWN)


def test_root_fields() -> None:
    config = parse_config(doc(podInitialBackoffSeconds=2, podMaxBackoffSeconds=30, parallelism=8), KNOWN)
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds, config.parallelism) == (
        2,
        30,
        8,
    )
    assert any(line.startswith("parallelism") for line in config.ignored)


# --- what koord does not have --------------------------------------------------------------------------
def test_upstream_chart_names_every_missing_plugin_in_one_error() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(chart(), REGISTERED)
    msg = str(e.value)
    for name in (
        "SchedulingHint",
        "DefaultPreBind",
    ):
        assert name in msg
    assert "--ignore-unknown-plugins" in msg
    assert "Coscheduling" not in msg  # registered: docs/rules/scheduler-coscheduling.md#wiring
    assert "Reservation" not in msg  # registered: docs/rules/scheduler-reservation.md#wiring
    assert "ElasticQuota" not in msg  # registered: docs/rules/scheduler-elasticquota.md#wiring
    assert "NodeNUMAResource" not in msg  # registered: docs/rules/scheduler-nodenumaresource.md#wiring
    assert "DeviceShare" not in msg  # registered: docs/rules/scheduler-deviceshare.md#wiring
    assert "LoadAwareScheduling" not in msg and "PrioritySort" not in msg and "DefaultBinder" not in msg


def test_upstream_chart_loads_with_ignore_unknown_plugins(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "koord-scheduler.config"
    f.write_text(yaml.safe_dump(chart()))
    with caplog.at_level(logging.WARNING, "koord-scheduler.config"):
        config = load_config(f, REGISTERED, ignore_unknown=True)
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "skipped (--ignore-unknown-plugins)" in record.getMessage()
    assert "SchedulingHint" in record.getMessage() and "DefaultPreBind" in record.getMessage()
    assert "DeviceShare" not in record.getMessage() and "NodeNUMAResource" not in record.getMessage()
    assert "ElasticQuota" not in record.getMessage()
    assert "Coscheduling" not in record.getMessage()
    [p] = config.profiles
    assert p.args["LoadAwareScheduling"]["usageThresholds"] == {"cpu": 65, "memory": 95}
    assert p.args["Coscheduling"]["enablePreemption"] is True
    assert config.leader_election == LeaderElection(True, "koord-scheduler", "koordinator-system")
    fw = build_framework(p)
    assert "LoadAwareScheduling" in [x.name for x in fw.filters]
    # the chart enables Coscheduling at every point it names, and the framework runs its hooks
    for point in (fw.pre_enqueues, fw.pre_filters, fw.post_filters, fw.pre_scores, fw.scores, fw.reserves,
                  fw.permits, fw.pre_binds, fw.post_binds, fw.before_pre_filters, fw.after_post_filters,
                  fw.next_pods):  # fmt: skip
        assert "Coscheduling" in [x.name for x in point]
    # and Reservation at every point it names, first where the chart puts it first
    for point in (fw.pre_filters, fw.filters, fw.post_filters, fw.pre_scores, fw.scores, fw.reserves,
                  fw.pre_binds, fw.binds, fw.transformers):  # fmt: skip
        assert "Reservation" in [x.name for x in point]
    assert next(x.name for x in fw.post_filters) == "Reservation"
    assert fw.weights[[x.name for x in fw.scores].index("Reservation")] == 5000
    # and ElasticQuota where the chart names it, alone with them at postFilter (DefaultPreemption disabled)
    for point in (fw.pre_filters, fw.post_filters, fw.reserves):
        assert "ElasticQuota" in [x.name for x in point]
    assert "DefaultPreemption" not in [x.name for x in fw.post_filters]
    # and NodeNUMAResource and DeviceShare at every point the chart names, with the chart's args
    for point in (fw.pre_filters, fw.filters, fw.scores, fw.reserves, fw.pre_binds):
        assert {"NodeNUMAResource", "DeviceShare"} <= {x.name for x in point}


def test_a_koord_plugin_at_a_point_it_does_not_implement_is_an_error() -> None:
    d = doc(profiles=[{"plugins": {"permit": {"enabled": [{"name": "LoadAwareScheduling"}]}}}])
    with pytest.raises(
        ConfigError, match=r"plugins\.permit: plugin 'LoadAwareScheduling' does not extend the permit"
    ):
        build_framework(parse_config(d, REGISTERED).profiles[0])


@pytest.mark.parametrize(
    ("d", "needle"),
    [
        ({"apiVersion": "v2"}, "apiVersion='v2'"),
        (doc("v2"), "kubescheduler.config.k8s.io/v2"),
        ({"kind": "Other"}, "kind='Other'"),
        ({"profiles": [{"schedulerName": ""}]}, "profiles[0].schedulerName=''"),
        ({"profiles": [{"plugins": {"preSort": {}}}]}, "profiles[0].plugins.preSort: not an extension point"),
        (
            doc("v1beta1", profiles=[{"plugins": {"multiPoint": {}}}]),
            "plugins.multiPoint: not an extension point of kubescheduler.config.k8s.io/v1beta1",
        ),
        ({"profiles": [{"plugins": {"permit": {"enabled": [{"name": "Nope"}]}}}]}, "Nope (permit)"),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": -1}]}}}]},
            "weight=-1",
        ),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": 10**30}]}}}]},
            "weight=1000000000000000000000000000000: must be an integer in 0..2147483647 (int32)",
        ),
        (
            {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "NodeAffinity", "weight": 2}]}}}]},
            "only score and multiPoint plugins have a weight",
        ),
        (
            {
                "profiles": [
                    {"plugins": {"filter": {"enabled": [{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]}}}
                ]
            },
            "named twice",
        ),
        ({"profiles": [{"plugins": {"filter": {"enable": []}}}]}, "filter.enable: unknown field"),
        ({"profiles": [{"pluginConfig": [{"name": "Nope", "args": {}}]}]}, "Nope (pluginConfig)"),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": {"kind": "OtherArgs"}}]}]},
            "kind='OtherArgs'",
        ),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": {"apiVersion": "v9"}}]}]},
            "apiVersion='v9'",
        ),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeAffinity"}, {"name": "NodeAffinity"}]}]},
            "configured twice",
        ),
        ({"profiles": [{"schedulerName": "s", "typo": 1}]}, "profiles[0].typo: unknown field"),
        ({"profiles": [{"percentageOfNodesToScore": 101}]}, "percentageOfNodesToScore=101"),
        ({"clientConection": {}}, "clientConection: unknown field"),
        ({"percentageOfNodesToScore": -1}, "percentageOfNodesToScore=-1"),
        ({"podInitialBackoffSeconds": 0}, "podInitialBackoffSeconds=0"),
        (
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
            "podMaxBackoffSeconds=2: must be >= podInitialBackoffSeconds (5)",
        ),
        ({"leaderElection": {"leaderElect": "yes"}}, "leaderElection.leaderElect='yes'"),
        ({"leaderElection": {"resourceLock": "configmaps"}}, "leaderElection.resourceLock='configmaps'"),
        ({"leaderElection": {"resourceName": ""}}, "leaderElection.resourceName=''"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{}]}}}]}, "enabled[0].name=None"),
        (
            {"profiles": [{"pluginConfig": [{"name": "NodeAffinity", "args": [1]}]}]},
            "pluginConfig[0].args=[1]",
        ),
        ([], "config=[]"),
    ],
)
def test_errors_name_field_and_value(d: object, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(d, KNOWN)
    assert needle in str(e.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--config="):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)


def test_chart_loadaware_args_are_still_validated() -> None:
    d = chart()
    d["profiles"][0]["pluginConfig"][1]["args"]["usageThresholds"]["cpu"] = 170
    with pytest.raises(ConfigError, match="usageThresholds"):
        build_framework(parse_config(d, REGISTERED, ignore_unknown=True).profiles[0])
