"""deploy/ wires koord-manager's admission webhooks: every replica serves them behind one Service, the
configurations fail open (failurePolicy Ignore) with short timeouts and skip koord's and the system's
namespaces, the paths are the ones the server routes, the manager may do exactly what the certificate
keeper and the handlers need, and the cert-manager overlay swaps the bootstrap for cert-manager's Secret
and CA injection (docs/install.md#admission-webhooks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koord.kustomize import build
from manager.options import build_parser as manager_parser
from manager.webhook.flags import MUTATING_CONFIG, VALIDATING_CONFIG, WebhookOptions

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DEFAULT = build(DEPLOY)
CERT_MANAGER = build(DEPLOY / "overlays" / "cert-manager")
STANDALONE = build(DEPLOY / "overlays" / "standalone-scheduler")
NAMESPACE = "koordinator-system"
SECRET = "koord-manager-webhook-certs"
Obj = dict[str, Any]


def _one(objs: list[Obj], kind: str, name: str) -> Obj:
    [obj] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def _manager(objs: list[Obj]) -> tuple[Obj, Obj]:
    pod = _one(objs, "Deployment", "koord-manager")["spec"]["template"]["spec"]
    [c] = pod["containers"]
    return pod, c


def _hooks(objs: list[Obj]) -> list[Obj]:
    return [
        *_one(objs, "MutatingWebhookConfiguration", MUTATING_CONFIG)["webhooks"],
        *_one(objs, "ValidatingWebhookConfiguration", VALIDATING_CONFIG)["webhooks"],
    ]


@pytest.mark.parametrize("tree", [DEFAULT, STANDALONE, CERT_MANAGER])
def test_every_replica_serves_behind_the_service(tree: list[Obj]) -> None:
    _, c = _manager(tree)
    opts = WebhookOptions.from_args(manager_parser().parse_args(c["args"]), NAMESPACE)
    assert opts is not None and opts.addr == ":9443"
    [port] = [p for p in c["ports"] if p["name"] == "webhook"]
    assert port["containerPort"] == 9443
    svc = _one(tree, "Service", opts.service_name)
    labels = _one(tree, "Deployment", "koord-manager")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()  # all replicas, not the leader's Endpoints
    [sport] = svc["spec"]["ports"]
    assert sport["port"] == 443 and sport["targetPort"] == "webhook"
    assert f"{svc['metadata']['name']}.{NAMESPACE}.svc" in opts.hosts  # the name the API server dials
    configurations = (opts.mutating_config, opts.validating_config)
    assert configurations == (MUTATING_CONFIG, VALIDATING_CONFIG)


@pytest.mark.parametrize("tree", [DEFAULT, CERT_MANAGER])
def test_configurations_fail_open_fast_and_skip_system_namespaces(tree: list[Obj]) -> None:
    hooks = _hooks(tree)
    paths = {h["clientConfig"]["service"]["path"] for h in hooks}
    assert paths == {"/mutate-pod", "/validate-pod", "/validate-configmap"}
    for h in hooks:
        assert h["failurePolicy"] == "Ignore" and h["sideEffects"] == "None"
        assert 1 <= h["timeoutSeconds"] <= 10
        assert "v1" in h["admissionReviewVersions"]
        ref = h["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["port"]) == ("koord-manager-webhook", NAMESPACE, 443)
        if h["rules"][0]["resources"] == ["pods"]:
            exprs = h["namespaceSelector"]["matchExpressions"]
            assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": ["kube-system", NAMESPACE]} in exprs  # fmt: skip
            assert {"key": "koordinator.sh/webhook", "operator": "NotIn", "values": ["disabled"]} in exprs
    [mutating] = _one(tree, "MutatingWebhookConfiguration", MUTATING_CONFIG)["webhooks"]
    assert mutating["rules"][0]["operations"] == ["CREATE"]
    # Kubernetes 1.20 has no kubernetes.io/metadata.name label: koord's namespace opts out by label.
    ns = _one(tree, "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["koordinator.sh/webhook"] == "disabled"


def test_the_manager_may_keep_its_certificate_and_read_what_the_handlers_need() -> None:
    role = _one(DEFAULT, "ClusterRole", "koord-manager")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r for r in role["rules"]}
    for key in [(("config.koordinator.sh",), ("clustercolocationprofiles",)), (("",), ("namespaces",)),
                (("scheduling.k8s.io",), ("priorityclasses",))]:  # fmt: skip
        assert rules[key]["verbs"] == ["list", "watch"] and "resourceNames" not in rules[key]
    for kind, name in [("mutatingwebhookconfigurations", MUTATING_CONFIG),
                       ("validatingwebhookconfigurations", VALIDATING_CONFIG)]:  # fmt: skip
        r = rules[(("admissionregistration.k8s.io",), (kind,))]
        assert r["verbs"] == ["get", "patch"] and r["resourceNames"] == [name]
    pod, c = _manager(DEFAULT)
    args = manager_parser().parse_args(c["args"])
    assert args.webhook_tls_secret == SECRET
    [mount] = [m for m in c["volumeMounts"] if Path(args.webhook_cert_dir).is_relative_to(m["mountPath"])]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume and not mount.get("readOnly")  # the manager writes the files


def test_cert_manager_overlay_serves_its_secret_and_injects_the_ca() -> None:
    pod, c = _manager(CERT_MANAGER)
    args = manager_parser().parse_args(c["args"])
    assert args.webhook_tls_secret == ""  # no bootstrap, no caBundle patching
    [mount] = [m for m in c["volumeMounts"] if m["mountPath"] == args.webhook_cert_dir]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert mount["readOnly"] is True and volume["secret"]["secretName"] == SECRET
    cert = _one(CERT_MANAGER, "Certificate", "koord-manager-webhook")
    assert cert["spec"]["secretName"] == SECRET
    opts = WebhookOptions.from_args(args, NAMESPACE)
    assert opts is not None and set(cert["spec"]["dnsNames"]) <= set(opts.hosts)
    for kind, name in [("MutatingWebhookConfiguration", MUTATING_CONFIG),
                       ("ValidatingWebhookConfiguration", VALIDATING_CONFIG)]:  # fmt: skip
        annotations = _one(CERT_MANAGER, kind, name)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{cert['metadata']['name']}"
