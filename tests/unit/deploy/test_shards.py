"""deploy/ for scheduler shards (docs/shards.md#deploy): the scheduler's and the manager's ServiceAccounts
may do everything the shard heartbeat does with Leases in koordinator-system (the manager in the default
install only), the Deployments declare the arbiter port the flags default to and take POD_IP from the
downward API, and with the sharding flag added the arbiter would bind that pod IP on that port; the
installs leave sharding off."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from manager.main import build_parser as manager_parser
from scheduler.main import build_parser as scheduler_parser
from scheduler.main import shard_options
from scheduler.shards.wiring import DEFAULT_ARBITER_PORT
from tests.unit.deploy.test_manifests import (
    DEFAULT,
    NAMESPACE,
    STANDALONE,
    Obj,
    args_with_env,
    container,
    find,
    ports,
)

HEARTBEAT_VERBS = {"create", "get", "list", "watch", "update", "patch", "delete"}


def lease_verbs(objs: list[Obj], account: str) -> set[str]:
    """Verbs the ServiceAccount has on every Lease of koordinator-system (rules without resourceNames)."""
    verbs: set[str] = set()
    for b in (o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == NAMESPACE):
        if not any(s["name"] == account and s["namespace"] == NAMESPACE for s in b["subjects"]):
            continue
        role = find(objs, b["roleRef"]["kind"], b["roleRef"]["name"])
        for rule in role["rules"]:
            lease = "leases" in rule["resources"] and "coordination.k8s.io" in rule["apiGroups"]
            if lease and not rule.get("resourceNames"):
                verbs |= set(rule["verbs"])
    return verbs


@pytest.mark.parametrize(
    ("tree", "account", "granted"),
    [
        ("default", "koord-manager", True),
        ("default", "koord-scheduler", True),
        ("standalone", "koord-scheduler", True),
        ("standalone", "koord-manager", False),
    ],
)
def test_shard_lease_rights(tree: str, account: str, granted: bool) -> None:
    objs = DEFAULT if tree == "default" else STANDALONE
    verbs = lease_verbs(objs, account)
    assert (verbs >= HEARTBEAT_VERBS) is granted, verbs
    if not granted:
        assert verbs == {"create"}  # its leader election's create only


@pytest.mark.parametrize(
    ("tree", "script", "parser", "prefix"),
    [
        ("standalone", "koord-scheduler", scheduler_parser, ""),
        ("default", "koord-manager", manager_parser, "scheduler-"),
    ],
)
def test_arbiter_port_and_pod_ip(
    tree: str,
    script: str,
    parser: Callable[[], argparse.ArgumentParser],
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, c = container(DEFAULT if tree == "default" else STANDALONE, script)
    assert ports(c)["shard-arbiter"] == DEFAULT_ARBITER_PORT
    [pod_ip] = [e for e in c["env"] if e["name"] == "POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    args, _ = args_with_env(c)
    build = parser  # the component's build_parser
    kw = dict(namespace=NAMESPACE, group="koord-scheduler", identity="r", leader_lease="l")
    assert shard_options(build().parse_args(args), prefix, **kw) is None  # sharding stays off
    monkeypatch.setenv("POD_IP", "10.1.2.3")
    opts = shard_options(build().parse_args([*args, f"--{prefix}sharding"]), prefix, **kw)
    assert opts is not None and opts.listen == f"10.1.2.3:{DEFAULT_ARBITER_PORT}"
