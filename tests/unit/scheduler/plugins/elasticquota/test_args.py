"""ElasticQuotaArgs (docs/rules/scheduler-elasticquota.md#plugin-arguments): v1 JSON names, upstream's
defaults and validation, errors naming field and value."""

from __future__ import annotations

from typing import Any

import pytest

from apis.quantity import Quantity
from scheduler.plugins.elasticquota.args import ArgsError, ElasticQuotaArgs
from scheduler.plugins.elasticquota.plugin import ElasticQuota

HUGE = Quantity.parse("1844674407370955161")


def test_defaults() -> None:
    args = ElasticQuotaArgs.from_args({})
    assert args == ElasticQuotaArgs.from_args(None) == ElasticQuotaArgs()
    assert args.delay_evict_time == 120 * 10**9 and args.revoke_pod_interval == 10**9
    assert args.quota_snapshot_update_interval == 120 * 10**9
    assert args.default_quota_group_max == {"cpu": HUGE, "memory": HUGE} == args.system_quota_group_max
    assert args.quota_group_namespace == "koordinator-system"
    assert args.enable_runtime_quota and args.enable_min_quota_scale and args.disable_default_quota_preemption
    assert not (args.monitor_all_quotas or args.enable_check_parent_quota or args.enable_queue_hint)
    j = args.to_json()
    assert j["delayEvictTime"] == "2m0s" and j["revokePodInterval"] == "1s"
    assert j["defaultQuotaGroupMax"] == {"cpu": "1844674407370955161", "memory": "1844674407370955161"}


def test_values_are_read_and_explicit_false_kept() -> None:
    args = ElasticQuotaArgs.from_args(
        {
            "kind": "ElasticQuotaArgs",
            "delayEvictTime": "30s",
            "revokePodInterval": "500ms",
            "enableRuntimeQuota": False,
            "enableMinQuotaScale": False,
            "disableDefaultQuotaPreemption": False,
            "monitorAllQuotas": True,
            "enableCheckParentQuota": True,
            "defaultQuotaGroupMax": {"cpu": "2"},
            "systemQuotaGroupMax": {},
            "quotaGroupNamespace": "quotas",
            "hookPlugins": [{"key": "k", "factoryKey": "f"}],
        }
    )
    assert args.delay_evict_time == 30 * 10**9 and args.revoke_pod_interval == 5 * 10**8
    assert not (
        args.enable_runtime_quota or args.enable_min_quota_scale or args.disable_default_quota_preemption
    )
    assert args.monitor_all_quotas and args.enable_check_parent_quota
    assert args.default_quota_group_max == {"cpu": Quantity.parse("2")}
    assert args.system_quota_group_max == {"cpu": HUGE, "memory": HUGE}  # empty → the default
    assert args.quota_group_namespace == "quotas" and len(args.hook_plugins) == 1
    assert ElasticQuota.from_args({"enableRuntimeQuota": False}).args.enable_runtime_quota is False


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"delayEvictTime": "-1s"}, "delayEvictTime='-1s': must not be negative"),
        ({"revokePodInterval": "-2s"}, "revokePodInterval='-2s': must not be negative"),
        ({"delayEvictTime": 5}, "delayEvictTime=5: must be a Go duration string"),
        ({"delayEvictTime": "soon"}, "delayEvictTime='soon': is not a Go duration"),
        ({"defaultQuotaGroupMax": {"cpu": "-1"}}, "defaultQuotaGroupMax.cpu='-1': must not be negative"),
        (
            {"systemQuotaGroupMax": {"memory": "-1Gi"}},
            "systemQuotaGroupMax.memory='-1Gi': must not be negative",
        ),
        ({"systemQuotaGroupMax": {"cpu": "x"}}, "systemQuotaGroupMax="),
        ({"systemQuotaGroupMax": []}, "systemQuotaGroupMax=\\[\\]: must be a ResourceList"),
        ({"enableRuntimeQuota": "yes"}, "enableRuntimeQuota='yes': must be a boolean"),
        ({"quotaGroupNamespace": 3}, "quotaGroupNamespace=3: must be a string"),
        ({"hookPlugins": {}}, "hookPlugins=\\{\\}: must be a list"),
        ({"delayEvict": "1s"}, "delayEvict='1s': unknown field"),
    ],
)
def test_invalid_args_name_field_and_value(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError, match=message):
        ElasticQuotaArgs.from_args(raw)


def test_args_must_be_an_object() -> None:
    with pytest.raises(ArgsError, match="args=3: must be an object"):
        ElasticQuotaArgs.from_args(3)  # type: ignore[arg-type]
