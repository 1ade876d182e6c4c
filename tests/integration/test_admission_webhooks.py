"""koord-manager's admission webhooks end to end: a koord-manager process serving them, the configurations
of deploy/manager/webhooks.yaml pointed at it by URL, and pods and ConfigMaps created through the real
API server's admission chain (docs/install.md#admission-webhooks).

- a pod in a namespace a ClusterColocationProfile matches comes back mutated exactly as `koord simulate`
  (kind ColocationProfile) says; a pod in an unmatched namespace is untouched; probability "0%" and
  "100%" behave as the rules say;
- a bad slo-controller-config is refused naming key, field and value; a good one passes;
- a pod with a forbidden QoS/priority combination is refused with upstream's message;
- with koord-manager stopped, pods are still admitted (failurePolicy Ignore), but not mutated.

The configurations only select this test's namespaces (a label), so other tests never meet them."""

from __future__ import annotations

import base64
import copy
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis import constants as c
from koord.localcluster.bootstrap import load_manifests
from koord.localcluster.controlplane import ControlPlane, free_ports
from manager.webhook.simulate_profile import simulate
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COLOCATE = "koordinator.sh/enable-colocation"


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A plain pod as a team writes it (never started: no node matches its selector)."""
    res = {"cpu": "500m", "memory": "64Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {COLOCATE: "true", **(labels or {})}},
        "spec": {
            "nodeSelector": {"koord-test/none": "none"},
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": res, "limits": res}}
            ],
        },
    }


class Setup:
    """One koord-manager serving the webhooks, configurations selecting namespaces labelled ``tag``."""

    def __init__(self, cp: ControlPlane, kube: Any, tmp: Path) -> None:
        self.cp, self.kube, self.tmp = cp, kube, tmp
        self.tag = uuid.uuid4().hex[:8]
        self.core = client.CoreV1Api(kube)
        self.custom = client.CustomObjectsApi(kube)
        self.adm = client.AdmissionregistrationV1Api(kube)
        self.names = {kind: f"koord-test-{kind.lower()}-{self.tag}" for kind in ("Mutating", "Validating")}
        self.namespaces: list[str] = []
        self.profiles: list[dict[str, Any]] = []
        self.proc: subprocess.Popen[str] | None = None
        [self.port] = free_ports(1)

    def namespace(self, **labels: str) -> str:
        name = f"t-wh-{uuid.uuid4().hex[:8]}"
        body = {"metadata": {"name": name, "labels": {"koord-test/webhooks": self.tag, **labels}}}
        self.core.create_namespace(body)
        self.namespaces.append(name)
        return name

    def profile(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        obj = {"apiVersion": c.CONFIG_API_VERSION, "kind": c.CLUSTER_COLOCATION_PROFILE_KIND,
               "metadata": {"name": f"{name}-{self.tag}"}, "spec": spec}  # fmt: skip
        created: dict[str, Any] = self.custom.create_cluster_custom_object(
            c.CONFIG_GROUP, c.CONFIG_VERSION, c.CLUSTER_COLOCATION_PROFILE_PLURAL, obj
        )
        self.profiles.append(created)
        return created

    def install(self) -> None:
        """deploy/manager/webhooks.yaml under this test's names, by URL, narrowed to its namespaces."""
        for obj in load_manifests([DEPLOY / "manager" / "webhooks.yaml"]):
            kind = "Mutating" if obj["kind"] == "MutatingWebhookConfiguration" else "Validating"
            obj["metadata"] = {"name": self.names[kind]}
            for hook in obj["webhooks"]:
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.port}{hook['clientConfig']['service']['path']}"
                }
                hook["namespaceSelector"] = {"matchLabels": {"koord-test/webhooks": self.tag}}
            create = (
                self.adm.create_mutating_webhook_configuration
                if kind == "Mutating"
                else self.adm.create_validating_webhook_configuration
            )
            create(obj)

    def start_manager(self, config_namespace: str) -> None:
        env = {**os.environ, "POD_NAMESPACE": config_namespace}
        hub, metrics = free_ports(2)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "manager.main", f"--kubeconfig={self.cp.kubeconfig_path}",
             f"--hub-addr=127.0.0.1:{hub}", f"--metrics-addr=127.0.0.1:{metrics}", "--health-probe-addr=",
             "--hub-auth=none", "--controllers=", "--no-enable-scheduler", "--no-enable-leader-election",
             f"--config-namespace={config_namespace}", f"--webhook-addr=127.0.0.1:{self.port}",
             f"--webhook-tls-secret=webhook-certs-{self.tag}", f"--webhook-cert-dir={self.tmp / 'certs'}",
             "--webhook-hosts=127.0.0.1", f"--mutating-webhook-configuration={self.names['Mutating']}",
             f"--validating-webhook-configuration={self.names['Validating']}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip

    def stop_manager(self) -> str:
        """Stops koord-manager (SIGTERM); its stderr."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        code, self.proc = self.proc.returncode, None
        assert code == 0, err[-3000:]
        return err

    def serving(self, namespace: str) -> bool:
        """The caBundle is patched and a dry-run pod comes back mutated (the webhooks answer)."""
        ca = self.adm.read_mutating_webhook_configuration(self.names["Mutating"]).webhooks[0].client_config
        if not ca.ca_bundle:
            return False
        got = self.create(namespace, _pod("probe"), dry_run="All")
        return c.LABEL_POD_QOS in (got["metadata"].get("labels") or {})

    def create(self, namespace: str, pod: dict[str, Any], **kw: Any) -> dict[str, Any]:
        import json

        resp = self.core.create_namespaced_pod(namespace, pod, _preload_content=False, **kw)
        out: dict[str, Any] = json.loads(resp.data)
        return out

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate(timeout=30)
        for kind, name in self.names.items():
            delete = getattr(self.adm, f"delete_{kind.lower()}_webhook_configuration")
            try:
                delete(name)
            except ApiException as e:
                if e.status != 404:
                    raise
        for p in self.profiles:
            self.custom.delete_cluster_custom_object(
                c.CONFIG_GROUP, c.CONFIG_VERSION, c.CLUSTER_COLOCATION_PROFILE_PLURAL, p["metadata"]["name"]
            )
        for ns in self.namespaces:
            self.core.delete_namespace(ns)


@pytest.fixture()
def setup(control_plane: ControlPlane, kube: Any, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(control_plane, kube, tmp_path)
    try:
        yield s
    finally:
        s.close()


BATCH_PROFILE = {
    "selector": {"matchLabels": {COLOCATE: "true"}},
    "qosClass": "BE",
    "priorityClassName": "koord-batch",
    "koordinatorPriority": 1000,
    "schedulerName": "koord-scheduler",
    "labels": {"koord-test/mutated": "true"},
}


def _expected(
    s: Setup, namespace: str, pod: dict[str, Any], profiles: list[dict[str, Any]]
) -> dict[str, Any]:
    """What `koord simulate` says the webhook makes of ``pod`` in ``namespace``."""
    ns = s.core.read_namespace(namespace)
    batch = s.kube.sanitize_for_serialization(
        client.SchedulingV1Api(s.kube).read_priority_class("koord-batch")
    )
    scenario = {"kind": "ColocationProfile", "profiles": profiles, "priorityClasses": [batch],
                "namespaces": [{"metadata": {"name": namespace, "labels": ns.metadata.labels}}],
                "pod": {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}}  # fmt: skip
    result: dict[str, Any] = simulate(scenario)["pod"]
    return result


def _admitted_view(pod: dict[str, Any]) -> dict[str, Any]:
    """The parts of a pod the profile may change, as the API server stored or simulate returned them."""
    spec = pod["spec"]
    return {
        "labels": pod["metadata"].get("labels") or {},
        "annotations": {k: v for k, v in (pod["metadata"].get("annotations") or {}).items()},
        "schedulerName": spec.get("schedulerName", "default-scheduler"),
        "priorityClassName": spec.get("priorityClassName"),
        "priority": spec.get("priority", 0),
        "preemptionPolicy": spec.get("preemptionPolicy", "PreemptLowerPriority"),
        "resources": [ctr.get("resources") for ctr in spec["containers"]],
    }


def test_pods_are_mutated_as_simulate_says_and_bad_input_is_refused(setup: Setup) -> None:
    s = setup
    matched = s.namespace(**{COLOCATE: "true"})
    unmatched = s.namespace()
    zero, hundred = s.namespace(**{"koord-test/dice": "zero"}), s.namespace(**{"koord-test/dice": "hundred"})
    profiles = [
        s.profile("batch", {**BATCH_PROFILE, "namespaceSelector": {"matchLabels": {COLOCATE: "true"}}}),
        s.profile("zero", {**BATCH_PROFILE, "probability": "0%",
                           "namespaceSelector": {"matchLabels": {"koord-test/dice": "zero"}}}),
        s.profile("hundred", {**BATCH_PROFILE, "probability": "100%",
                              "namespaceSelector": {"matchLabels": {"koord-test/dice": "hundred"}}}),
    ]  # fmt: skip
    s.install()
    s.start_manager(matched)
    assert wait_for(lambda: s.serving(matched), timeout=90), "the webhooks never served"

    for ns in (matched, unmatched, zero, hundred):
        pod = _pod("plain")
        got = s.create(ns, copy.deepcopy(pod))
        want = _expected(s, ns, pod, profiles)
        assert _admitted_view(got) == _admitted_view(want), ns
    by_ns = {
        ns: s.core.read_namespaced_pod("plain", ns).to_dict() for ns in (matched, unmatched, zero, hundred)
    }
    requests = {ns: p["spec"]["containers"][0]["resources"]["requests"] for ns, p in by_ns.items()}
    assert requests[matched] == requests[hundred] == {c.BATCH_CPU: "500", c.BATCH_MEMORY: "64Mi"}
    assert requests[unmatched] == requests[zero] == {"cpu": "500m", "memory": "64Mi"}
    assert by_ns[matched]["metadata"]["labels"][c.LABEL_POD_QOS] == "BE"
    assert by_ns[matched]["spec"]["priority"] == 5000
    assert c.LABEL_POD_QOS not in by_ns[zero]["metadata"]["labels"]

    # The pod validating webhook: BE with koord-prod is refused with upstream's message.
    bad = _pod("be-prod", {c.LABEL_POD_QOS: "BE"})
    bad["spec"]["priorityClassName"] = "koord-prod"
    with pytest.raises(ApiException) as refused:
        s.create(unmatched, bad)
    assert refused.value.status == 400
    assert "cannot be used in combination" in str(refused.value.body)

    # The ConfigMap validating webhook: a bad slo-controller-config is refused naming key, field, value.
    threshold = '{"clusterStrategy": {"cpuSuppressThresholdPercent": 150}}'
    cm = {
        "metadata": {"name": c.SLO_CONTROLLER_CONFIG_NAME},
        "data": {"resource-threshold-config": threshold},
    }
    with pytest.raises(ApiException) as refused:
        s.core.create_namespaced_config_map(matched, cm)
    message = str(refused.value.body)
    assert (
        "resource-threshold-config" in message
        and "cpuSuppressThresholdPercent" in message
        and "150" in message
    )
    cm["data"]["resource-threshold-config"] = '{"clusterStrategy": {"cpuSuppressThresholdPercent": 60}}'
    s.core.create_namespaced_config_map(matched, cm)
    s.stop_manager()


def test_pods_are_admitted_unmutated_while_the_manager_is_down(setup: Setup) -> None:
    s = setup
    matched = s.namespace(**{COLOCATE: "true"})
    s.profile("batch", {**BATCH_PROFILE, "namespaceSelector": {"matchLabels": {COLOCATE: "true"}}})
    s.install()
    s.start_manager(matched)
    assert wait_for(lambda: s.serving(matched), timeout=90), "the webhooks never served"
    first = s.create(matched, _pod("while-up"))
    assert first["metadata"]["labels"][c.LABEL_POD_QOS] == "BE"
    bundle = (
        s.adm.read_mutating_webhook_configuration(s.names["Mutating"]).webhooks[0].client_config.ca_bundle
    )
    assert b"BEGIN CERTIFICATE" in base64.b64decode(bundle)

    s.stop_manager()
    # failurePolicy Ignore: admitted at once, as written: no QoS label, native requests kept.
    down = s.create(matched, _pod("while-down"))
    assert c.LABEL_POD_QOS not in down["metadata"]["labels"]
    assert down["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "64Mi"}
    assert down["spec"].get("schedulerName") == "default-scheduler"

    # A restarted manager keeps the CA (the Secret survives) and mutates again.
    s.start_manager(matched)
    assert wait_for(lambda: s.serving(matched), timeout=90)
    again = s.adm.read_mutating_webhook_configuration(s.names["Mutating"]).webhooks[0].client_config.ca_bundle
    assert again == bundle
    s.stop_manager()
