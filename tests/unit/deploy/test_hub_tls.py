"""deploy/ serves the MetricHub over TLS: koord-manager bootstraps the Secret koord-manager-hub-tls into
the files it serves (in its writable /tmp), may create Secrets and read only that one, the certificate
names the address the clients dial, and every hub client (koordlet, standalone scheduler) trusts the
ca.crt of that Secret, mounted read-only (docs/install.md#tls-for-the-metrichub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.options import parse as parse_koordlet
from koord.kustomize import build
from manager.hubsetup import HUB_SERVICE
from manager.options import build_parser as manager_parser
from scheduler.main import build_parser as scheduler_parser

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DEFAULT = build(DEPLOY)
STANDALONE = build(DEPLOY / "overlays" / "standalone-scheduler")
SECRET = "koord-manager-hub-tls"
NAMESPACE = "koordinator-system"
Obj = dict[str, Any]


def _workload(objs: list[Obj], name: str) -> tuple[Obj, Obj]:
    [w] = [o for o in objs if o["kind"] in ("Deployment", "DaemonSet") and o["metadata"]["name"] == name]
    [c] = w["spec"]["template"]["spec"]["containers"]
    return w["spec"]["template"]["spec"], c


def _mounted_from(pod: Obj, c: Obj, path: Path) -> tuple[Obj, Obj]:
    """The volume mount holding `path` and its volume."""
    [mount] = [m for m in c["volumeMounts"] if path.is_relative_to(m["mountPath"])]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return mount, volume


def _trusts_the_secret_ca(pod: Obj, c: Obj, ca: Path) -> None:
    mount, volume = _mounted_from(pod, c, ca)
    assert mount.get("readOnly") is True
    assert volume["secret"] == {"secretName": SECRET, "items": [{"key": "ca.crt", "path": ca.name}]}


def test_the_manager_bootstraps_and_serves_the_certificate() -> None:
    pod, c = _workload(DEFAULT, "koord-manager")
    a = manager_parser().parse_args(c["args"])
    assert a.hub_tls_secret == SECRET and not a.hub_tls_hosts
    assert (a.hub_endpoints or HUB_SERVICE) == HUB_SERVICE  # the certificate names this Service
    files = [Path(a.hub_tls_cert), Path(a.hub_tls_key), Path(a.hub_ca)]
    assert [f.name for f in files] == ["tls.crt", "tls.key", "ca.crt"]
    for f in files:  # written at start: a writable emptyDir (the root filesystem is read-only)
        mount, volume = _mounted_from(pod, c, f)
        assert "emptyDir" in volume and not mount.get("readOnly")


def test_the_manager_may_create_secrets_and_read_only_its_own() -> None:
    [role] = [o for o in DEFAULT if o["kind"] == "Role" and o["metadata"]["name"] == "koord-manager"]
    assert role["metadata"]["namespace"] == NAMESPACE
    rules = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert sorted((tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in rules) == [
        (("create",), ()),
        (("get",), (SECRET,)),
        (("get", "update"), ("koord-manager-webhook-certs",)),  # renewed in place (test_webhooks.py)
    ]


@pytest.mark.parametrize("tree", [DEFAULT, STANDALONE])
def test_koordlets_trust_the_secret_ca(tree: list[Obj]) -> None:
    pod, c = _workload(tree, "koordlet")
    env = {e["name"]: "node-1" for e in c.get("env", [])}
    args = [a.replace("$(NODE_NAME)", env["NODE_NAME"]) for a in c["args"]]
    opts, _ = parse_koordlet(args, env)
    assert opts.hub_ca is not None and opts.hub_address is not None
    assert opts.hub_address.startswith(f"{HUB_SERVICE}.{NAMESPACE}.svc:")  # a name the certificate holds
    _trusts_the_secret_ca(pod, c, opts.hub_ca)


def test_the_standalone_scheduler_trusts_the_secret_ca() -> None:
    pod, c = _workload(STANDALONE, "koord-scheduler")
    a = scheduler_parser().parse_args(c["args"])
    assert a.hub_addr.startswith(f"{HUB_SERVICE}.{NAMESPACE}.svc:") and a.hub_ca
    _trusts_the_secret_ca(pod, c, Path(a.hub_ca))
