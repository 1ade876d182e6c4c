"""deploy/ for scheduler shards (docs/shards.md#deploy): the scheduler's and the manager's ServiceAccounts
may do everything the shard heartbeat does with Leases in koordinator-shards, a namespace the install
creates (the manager in the default install only), and have no rule over every Lease of
koordinator-system; the Deployments declare the arbiter port the flags default to and take POD_IP from the
downward API, and with the sharding flag added the arbiter would bind that pod IP on that port, serve TLS
(docs/shards.md#security: the standalone scheduler the Secret koord-scheduler-shard-tls, the embedded one
the hub's certificate) and keep its Leases in koordinator-shards; the installs leave sharding off."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from manager.options import build_parser as manager_parser
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


SHARDS = "koordinator-shards"


def lease_verbs(objs: list[Obj], account: str, namespace: str = SHARDS) -> set[str]:
    """Verbs the ServiceAccount has on every Lease of ``namespace`` (rules without resourceNames)."""
    verbs: set[str] = set()
    for b in (o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == namespace):
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
    # least privilege: no rule over every Lease of koordinator-system, whose leader Leases others hold
    assert lease_verbs(objs, account, NAMESPACE) <= {"create"}
    assert any(o["kind"] == "Namespace" and o["metadata"]["name"] == SHARDS for o in objs)
    if not granted:
        assert verbs == set()  # nothing in the shards' namespace


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
    w, c = container(DEFAULT if tree == "default" else STANDALONE, script)
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
    assert opts.lease_namespace == SHARDS and opts.security is not None
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path in (opts.security.cert_file, opts.security.key_file, opts.security.ca_file):
        assert any(path.is_relative_to(m) for m in mounts), path  # files of a mounted volume
    if tree == "standalone":
        volumes = {v["name"]: v for v in w["spec"]["template"]["spec"]["volumes"]}
        vol = volumes[mounts[str(opts.security.cert_file.parent)]]
        assert vol["secret"] == {"secretName": "koord-scheduler-shard-tls", "optional": True}
        assert opts.security.server_name == "koord-scheduler-shard-arbiter"
    else:  # the embedded scheduler serves the hub's certificate, made for the hub Service's names
        assert opts.security.server_name == "koord-manager-hub"
