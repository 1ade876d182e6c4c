"""A run of broken slo-controller-config edits against a running koord-manager process
(docs/rules/manager.md#a-bad-configmap-key-never-stops-the-manager,
docs/configuration.md#how-a-key-is-loaded).
tests/integration/manager covers each kind of break once on in-process controllers; here they come one
after another, so "last good" must survive a chain of failures and a deleted ConfigMap:

text that is not JSON, a field of the wrong JSON type, a field out of range, a wrong-typed colocation key,
the ConfigMap deleted, re-created with a key of the wrong top-level type and a field out of range. The
NodeSLO and NodeMetric are not touched (same resourceVersion) from the last good config to the fix; each
rejected key raises a Warning Event naming it, an out-of-range field one naming the last good value; the
error gauge is 1 exactly while a key's latest value is rejected, which ends when the key is fixed or
removed (removed: its default strategy applies). The fixed config applies; the process never restarted.

Imports: standard library, pytest, kubernetes, apis.constants, tests.reliability.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from tests.reliability.controlplane_procs import delete_node, manager
from tests.reliability.helpers import FreezableControlPlane, http_get, sample, scrape, wait_for

pytestmark = pytest.mark.apiserver

NAME = "slo-controller-config"
RT, CC = "resource-threshold-config", "colocation-config"


def _threshold(percent: Any) -> str:
    return json.dumps({"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": percent}})


def _colocation(interval: Any) -> str:
    return json.dumps({"enable": True, "metricReportIntervalSeconds": interval})


GOOD = {RT: _threshold(60), CC: _colocation(30)}


class Config:
    """The ConfigMap, the node's objects, the manager's gauges and the ConfigMap's Events."""

    def __init__(self, kube: Any, ns: str, node: str, port: int) -> None:
        self.core, self.custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
        self.ns, self.node, self.port = ns, node, port

    def put(self, data: dict[str, str]) -> None:
        body = {"metadata": {"name": NAME}, "data": data}
        try:
            self.core.replace_namespaced_config_map(NAME, self.ns, body)
        except client.ApiException as e:
            if e.status != 404:
                raise
            self.core.create_namespaced_config_map(self.ns, body)

    def obj(self, plural: str) -> dict[str, Any]:
        try:
            got: Any = self.custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, self.node)
        except client.ApiException:
            return {}
        return dict(got)

    def threshold(self) -> Any:
        spec = self.obj(NODE_SLO_PLURAL).get("spec") or {}
        return (spec.get("resourceUsedThresholdWithBE") or {}).get("cpuSuppressThresholdPercent")

    def interval(self) -> Any:
        spec = self.obj(NODE_METRIC_PLURAL).get("spec") or {}
        return (spec.get("metricCollectPolicy") or {}).get("reportIntervalSeconds")

    def versions(self) -> tuple[str, str]:
        """The resourceVersions of the node's NodeSLO and NodeMetric."""
        slo, metric = (self.obj(p).get("metadata") or {} for p in (NODE_SLO_PLURAL, NODE_METRIC_PLURAL))
        return str(slo.get("resourceVersion")), str(metric.get("resourceVersion"))

    def last_error(self, key: str) -> float:
        return sample(scrape(self.port), "koord_manager_config_last_error", key=key)

    def events(self) -> list[tuple[str, str]]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={NAME}").items
        return [(str(e.reason), str(e.message)) for e in items if e.type == "Warning"]

    def event(self, reason: str, *words: str) -> str:
        """Waits for a Warning Event ``reason`` whose message holds every word; its message."""
        found: str = wait_for(
            lambda: next((m for r, m in self.events() if r == reason and all(w in m for w in words)), ""),
            20, 0.2, f"a {reason} Event naming {words}",
        )  # fmt: skip
        return found


def test_a_run_of_broken_configmaps_keeps_the_last_good_config(
    own_control_plane: FreezableControlPlane, own_kube: Any, own_namespace: str, tmp_path: Path
) -> None:
    ns = own_namespace
    node = f"cfgf-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(own_kube).create_node({"metadata": {"name": node}})
    mgr = manager(own_control_plane.cp.kubeconfig_path, tmp_path, ns, node, "--no-enable-scheduler").daemon
    cfg = Config(own_kube, ns, node, mgr.port)
    try:
        cfg.put(GOOD)
        mgr.start()
        wait_for(lambda: cfg.threshold() == 60 and cfg.interval() == 30, 60, 0.5, "the good config applied")
        good = cfg.versions()

        # The threshold key: not JSON, then a wrong type, then an out-of-range field.
        cfg.put({**GOOD, RT: "{not json"})
        assert "invalid JSON" in cfg.event("SLOCfgUnmarshalFailed", RT)
        assert cfg.last_error(RT) == 1
        cfg.put({**GOOD, RT: _threshold("55")})
        cfg.event("SLOCfgUnmarshalFailed", RT, "cpuSuppressThresholdPercent", "55")
        cfg.put({**GOOD, RT: _threshold(150)})
        cfg.event("SLOCfgFieldInvalid", RT, "150", "last good value: 60")
        wait_for(lambda: cfg.last_error(RT) == 0, 10, 0.2, "the key accepted, the field repaired")
        # The colocation key of the wrong type.
        cfg.put({**GOOD, RT: _threshold(150), CC: json.dumps({"enable": "yes"})})
        cfg.event("ColocationCfgUnmarshalFailed", CC)
        assert cfg.last_error(CC) == 1
        # The ConfigMap deleted (ignored: the cache stays), then re-created broken.
        cfg.core.delete_namespaced_config_map(NAME, ns)
        time.sleep(3.0)
        cfg.put({RT: "[]", CC: _colocation(-5)})
        cfg.event("SLOCfgUnmarshalFailed", RT, "[]")
        cfg.event("SLOCfgFieldInvalid", CC, "metricReportIntervalSeconds", "-5", "last good value: 30")
        assert cfg.versions() == good, "a broken config reached the NodeSLO or NodeMetric"
        assert (cfg.threshold(), cfg.interval()) == (60, 30)
        assert cfg.last_error(RT) == 1 and cfg.last_error(CC) == 0

        # The rejected key removed: its default strategy applies and it is no longer in error.
        cfg.put({CC: _colocation(40)})
        wait_for(lambda: cfg.threshold() == 65 and cfg.interval() == 40, 20, 0.2, "defaults and the fix")
        assert cfg.last_error(RT) == 0, "the error gauge outlived the key"
        # Fixed.
        cfg.put({RT: _threshold(50), CC: _colocation(40)})
        wait_for(lambda: cfg.threshold() == 50, 20, 0.2, "the fixed key applied")
        assert cfg.last_error(RT) == 0 and cfg.last_error(CC) == 0
        assert len(mgr.starts) == 1 and mgr.proc is not None and mgr.proc.poll() is None
        assert http_get(mgr.port, "/healthz")[0] == 200
    except AssertionError as e:
        raise AssertionError(f"{e}\nevents: {cfg.events()}\n--- koord-manager:\n{mgr.tail()}") from None
    finally:
        assert mgr.stop() in (0, None), mgr.tail()
        with contextlib.suppress(client.ApiException):
            delete_node(own_kube, node)
