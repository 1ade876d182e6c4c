"""ElasticQuota's wiring without an API server (docs/rules/scheduler-elasticquota.md#wiring): the registry
entry (attached to its framework; refused next to DefaultPreemption at postFilter, naming the profile), the
events the queue requeues on, the informer handlers (QuotaEvents), the leader's status, special-quota and
revoke rounds over a recording API (QuotaController), and the per-quota metrics as scraped."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from apis.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, SPECIAL_QUOTAS, SYSTEM_QUOTA
from scheduler.config import ConfigError, parse_config
from scheduler.framework.interfaces import ClusterEvent, Pod
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.queuedpod import event_matches
from scheduler.quotacontroller import QuotaController, QuotaEvents
from scheduler.quotametrics import QuotaMetrics
from scheduler.registry import KNOWN, build_framework

from ._support import pod, quota


def _p(d: dict[str, Any]) -> Pod:
    return cast("Pod", d)


def _profile(post_filter: dict[str, Any]) -> Any:
    plugins = {
        "preFilter": {"enabled": [{"name": "ElasticQuota"}]},
        "postFilter": post_filter,
        "reserve": {"enabled": [{"name": "ElasticQuota"}]},
    }
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "quota-profile",
                "plugins": plugins,
                "pluginConfig": [{"name": "ElasticQuota", "args": {"monitorAllQuotas": True}}],
            }
        ],
    }
    return parse_config(doc, KNOWN).profiles[0]


def test_the_registry_builds_and_attaches_it_without_default_preemption_at_post_filter() -> None:
    fw = build_framework(
        _profile({"enabled": [{"name": "ElasticQuota"}], "disabled": [{"name": "DefaultPreemption"}]})
    )
    [plugin] = [p for p in fw.plugins if isinstance(p, ElasticQuota)]
    assert plugin.framework is fw and plugin.args.monitor_all_quotas
    assert [p.name for p in fw.post_filters] == ["ElasticQuota"]


def test_elastic_quota_next_to_default_preemption_at_post_filter_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        build_framework(_profile({"enabled": [{"name": "ElasticQuota"}]}))
    assert str(err.value).startswith(
        "profile 'quota-profile': plugins.postFilter: 'ElasticQuota' and 'DefaultPreemption' are both enabled"
    )


def test_bad_args_name_the_plugin_and_field() -> None:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "q",
                "plugins": {"preFilter": {"enabled": [{"name": "ElasticQuota"}]}},
                "pluginConfig": [{"name": "ElasticQuota", "args": {"delayEvictTime": "-1s"}}],
            }
        ],
    }
    with pytest.raises(
        ConfigError, match=r"pluginConfig ElasticQuota\.args: ElasticQuotaArgs: delayEvictTime"
    ):
        build_framework(parse_config(doc, KNOWN).profiles[0])


def test_pod_deletes_and_any_quota_event_requeue_what_the_quota_rejected() -> None:
    registered = ElasticQuota().events_to_register()
    for event in (
        ClusterEvent("Pod", "Delete"),
        *(ClusterEvent("ElasticQuota", a) for a in ("Add", "Update", "Delete")),
    ):
        assert any(event_matches(r, event) for r in registered), event
    assert not any(event_matches(r, ClusterEvent("Pod", "Add")) for r in registered)


class RecordingAPI:
    """The calls of CustomObjectsApi and CoreV1Api the controller makes; `fail` maps a call to the
    ApiException status it raises."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, int] = {}

    def _record(self, what: str, *args: Any) -> None:
        if what in self.fail:
            raise ApiException(status=self.fail[what], reason="test")
        self.calls.append((what, args))

    def patch_namespaced_custom_object_status(self, *args: Any) -> None:
        self._record("status", *args)

    def patch_namespaced_custom_object(self, *args: Any) -> None:
        self._record("object", *args)

    def create_namespaced_custom_object(self, *args: Any) -> None:
        self._record("create", *args)

    def delete_namespaced_pod(self, *args: Any) -> None:
        self._record("delete", *args)


Wired = tuple[ElasticQuota, QuotaEvents, QuotaController, RecordingAPI, list[ClusterEvent]]
REGISTRIES: dict[int, CollectorRegistry] = {}


def _wired(**args: Any) -> Wired:
    plugin = ElasticQuota(ElasticQuotaArgs.from_args(args))
    lock = threading.RLock()
    registry = CollectorRegistry()
    metrics = QuotaMetrics(registry)
    ctl = QuotaController(None, plugin, lock, metrics=metrics)
    api = RecordingAPI()
    ctl.custom = ctl.core = cast(Any, api)
    REGISTRIES[id(ctl)] = registry
    events: list[ClusterEvent] = []
    return plugin, QuotaEvents([plugin], lock, events.append, ctl, metrics), ctl, api, events


def test_informer_handlers_feed_the_plugin_and_the_queue() -> None:
    plugin, handlers, ctl, _, events = _wired()
    handlers.node_add({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}})
    handlers.quota_add(quota("a", {"cpu": "6"}))
    handlers.pod_add(_p(pod("p", {"cpu": "2"}, "a", node="n1")))
    assert plugin.manager.cluster_total == {"cpu": 8000}
    info = plugin.manager.info("a")
    assert info is not None and info.used == {"cpu": 2000}
    assert events == [ClusterEvent("ElasticQuota", "Add")] and set(ctl.objects) == {"default/a"}
    handlers.quota_add({"metadata": {"name": "bad"}, "spec": {"max": {"cpu": "lots"}}})  # logged, skipped
    assert events == [ClusterEvent("ElasticQuota", "Add")] and not plugin.manager.known("bad")
    handlers.pod_delete(_p(pod("p", {"cpu": "2"}, "a", node="n1")))
    handlers.node_delete({"metadata": {"name": "n1"}})
    handlers.quota_delete(quota("a", {"cpu": "6"}))
    assert plugin.manager.cluster_total == {} and not plugin.manager.known("a") and not ctl.objects
    assert events[-1] == ClusterEvent("ElasticQuota", "Delete")


def test_status_round_patches_only_what_changed_and_creates_the_special_quotas() -> None:
    _, handlers, ctl, api, _ = _wired()
    handlers.node_add({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}})
    handlers.quota_add(quota("a", {"cpu": "6"}))
    handlers.pod_add(_p(pod("p", {"cpu": "2"}, "a", node="n1")))
    assert ctl.sync_all() == 1
    [(what, args), (what2, args2)] = api.calls
    assert (what, args[2:5], args[5]) == (
        "status",
        ("default", "elasticquotas", "a"),
        {"status": {"used": {"cpu": "2"}}},
    )
    assert (
        what2 == "object" and "quota.scheduling.koordinator.sh/runtime" in args2[5]["metadata"]["annotations"]
    )
    api.calls.clear()
    api.fail["status"] = 500  # logged; tried again on the next round
    assert ctl.sync_all() == 0
    del api.fail["status"]
    assert ctl.ensure_special_quotas()
    created = {args[4]["metadata"]["name"]: args[4] for what, args in api.calls if what == "create"}
    assert set(created) == SPECIAL_QUOTAS and {args[2] for _, args in api.calls} == {"koordinator-system"}
    assert (
        created[ROOT_QUOTA]["metadata"]["labels"]["quota.scheduling.koordinator.sh/allow-lent-resource"]
        == "false"
    )
    assert created[SYSTEM_QUOTA]["spec"]["max"]["cpu"] == "1844674407370955161"
    api.fail["create"] = 409  # already there
    assert ctl.ensure_special_quotas()
    api.fail["create"] = 404  # no such namespace yet: not done
    assert not ctl.ensure_special_quotas()
    assert DEFAULT_QUOTA in created


def test_revoke_round_deletes_the_due_pods_and_counts_them() -> None:
    _, handlers, ctl, api, _ = _wired(monitorAllQuotas=True, delayEvictTime="1s")
    handlers.node_add({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}})
    handlers.quota_add(quota("a", {"cpu": "10"}))
    for i, prio in enumerate((1, 2)):
        handlers.pod_add(_p(pod(f"p{i}", {"cpu": "3"}, "a", node="n1", priority=prio)))
    assert ctl.revoke_once(0) == 0  # over since now: not yet due
    api.fail["delete"] = 404  # gone already: taken back all the same
    assert ctl.revoke_once(2 * 10**9) == 1
    assert ctl.revoked == ["default/p0"]
    del api.fail["delete"]
    api.fail["delete"] = 500
    assert ctl.revoke_once(3 * 10**9) == 0
    del api.fail["delete"]
    assert ctl.revoke_once(4 * 10**9) == 1 and api.calls == [("delete", ("p0", "default"))]
    revoked = REGISTRIES[id(ctl)].get_sample_value(
        "koord_scheduler_elastic_quota_revoked_pods_total", {"name": "a"}
    )
    assert revoked == 2


def test_metrics_show_each_quota_and_drop_a_deleted_one() -> None:
    registry = CollectorRegistry()
    plugin = ElasticQuota(ElasticQuotaArgs())
    ctl = QuotaController(None, plugin, threading.RLock(), metrics=QuotaMetrics(registry))
    plugin.on_node("n1", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}})
    plugin.on_quota_add(quota("a", {"cpu": "6"}, {"cpu": "1"}))
    plugin.on_any_pod_add(_p(pod("p", {"cpu": "2"}, "a", node="n1")))
    ctl.refresh_metrics()

    def samples(family: str) -> dict[tuple[str, str], float]:
        text = generate_latest(registry).decode()
        for f in text_string_to_metric_families(text):
            if f.name == family:
                return {(s.labels["name"], s.labels["resource"]): s.value for s in f.samples}
        return {}

    assert samples("koord_scheduler_elastic_quota_used")[("a", "cpu")] == 2000
    assert samples("koord_scheduler_elastic_quota_min")[("a", "cpu")] == 1000
    assert samples("koord_scheduler_elastic_quota_max")[("a", "cpu")] == 6000
    assert samples("koord_scheduler_elastic_quota_runtime")[("a", "cpu")] == 2000
    assert samples("koord_scheduler_elastic_quota_runtime")[(ROOT_QUOTA, "cpu")] == 8000
    plugin.on_quota_delete(quota("a", {"cpu": "6"}))
    ctl.refresh_metrics()
    assert ("a", "cpu") not in samples("koord_scheduler_elastic_quota_max")
