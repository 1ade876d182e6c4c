"""deploy/'s scheduler configuration: the ConfigMap koord-scheduler-config holds a KubeSchedulerConfiguration
whose LoadAwareScheduling args are upstream chart v1.8.0's (vendored in tests/data/upstream), which koord
loads without ignoring anything; the embedded scheduler (koord-manager --scheduler-config) and the
standalone one (--config) read it through a configMap volume that resolves to that key."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from koord.kustomize import build
from manager.options import parse_args as manager_args
from scheduler.config import LeaderElection, parse_config
from scheduler.main import leader_election
from scheduler.main import parse_args as scheduler_args
from scheduler.registry import KNOWN, build_framework

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
CHART = ROOT / "tests/data/upstream/chart-v1.8.0/koord-scheduler-config.yaml"
NAME, KEY = "koord-scheduler-config", "koord-scheduler-config"
TREES = {"default": build(DEPLOY), "standalone": build(DEPLOY / "overlays" / "standalone-scheduler")}
Obj = dict[str, Any]


def _configmap(objs: list[Obj]) -> Obj:
    [cm] = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == NAME]
    return cm


def _document(cm: Obj) -> Obj:
    doc = yaml.safe_load(cm["data"][KEY])
    assert isinstance(doc, dict)
    return doc


def _plugin_config(doc: Obj, name: str) -> Obj:
    [entry] = [e for e in doc["profiles"][0]["pluginConfig"] if e["name"] == name]
    return dict(entry["args"])


def test_loadaware_args_equal_the_upstream_chart() -> None:
    chart = _document(yaml.safe_load(CHART.read_text()))
    for objs in TREES.values():
        cm = _configmap(objs)
        assert cm["metadata"]["namespace"] == "koordinator-system"
        shipped = _document(cm)
        assert _plugin_config(shipped, "LoadAwareScheduling") == _plugin_config(chart, "LoadAwareScheduling")
        assert _plugin_config(shipped, "DeviceShare") == _plugin_config(chart, "DeviceShare")
        assert shipped["leaderElection"] == chart["leaderElection"]
        assert shipped["profiles"][0]["schedulerName"] == chart["profiles"][0]["schedulerName"]


def test_shipped_config_loads_with_nothing_skipped() -> None:
    config = parse_config(_document(_configmap(TREES["default"])), KNOWN)
    assert config.skipped == ()  # every plugin it names, koord has
    not_yet = "default plugins koord-scheduler does not have yet"
    assert all(line.startswith(not_yet) for line in config.ignored)
    [profile] = config.profiles
    assert profile.args["LoadAwareScheduling"]["nodeMetricExpirationSeconds"] == 300
    assert config.leader_election == LeaderElection(True, "koord-scheduler", "koordinator-system")
    fw = build_framework(profile)
    # NodeNUMAResource and DeviceShare where the chart has them
    for point in (fw.pre_filters, fw.filters, fw.scores, fw.reserves, fw.pre_binds):
        assert {"NodeNUMAResource", "DeviceShare"} <= {x.name for x in point}


def _container(objs: list[Obj], script: str) -> tuple[Obj, Obj]:
    [hit] = [
        (w, c)
        for w in objs
        if w["kind"] == "Deployment"
        for c in w["spec"]["template"]["spec"]["containers"]
        if c["command"][0] == script
    ]
    return hit


def _mounted_key(workload: Obj, container: Obj, path: str) -> tuple[str, str]:
    """(ConfigMap name, key) the file at ``path`` in the container comes from."""
    file = PurePosixPath(path)
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    for mount in container["volumeMounts"]:
        if file.parent == PurePosixPath(mount["mountPath"]):
            source = volumes[mount["name"]]["configMap"]
            [item] = [i for i in source["items"] if i["path"] == file.name]
            assert mount.get("readOnly") is True
            return source["name"], item["key"]
    raise AssertionError(f"{path}: no volume mounted at {file.parent}")


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_manager_mounts_it_for_the_embedded_scheduler(tree: str) -> None:
    dep, c = _container(TREES[tree], "koord-manager")
    args, warnings = manager_args(c["args"])
    assert warnings == []
    assert args.enable_scheduler is (tree == "default")
    assert _mounted_key(dep, c, args.scheduler_config) == (NAME, KEY)


def test_standalone_scheduler_mounts_it() -> None:
    dep, c = _container(TREES["standalone"], "koord-scheduler")
    args, warnings = scheduler_args(c["args"])
    assert warnings == []
    assert _mounted_key(dep, c, args.config) == (NAME, KEY)
    config = parse_config(_document(_configmap(TREES["standalone"])), KNOWN)
    # The flags and the file agree on the Lease.
    assert leader_election(args, config) == (True, "koordinator-system", "koord-scheduler")
