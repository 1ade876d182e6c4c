"""deploy/ on the REAL API server (v1.20.2, --authorization-mode=Node,RBAC): `kubectl apply -k deploy/`
(or, without kubectl, every rendered object created or replaced through the Python client), the
standalone-scheduler overlay on top, and the Prometheus-operator ServiceMonitors; every object is
accepted and reads back as written. Then SubjectAccessReviews check, per ServiceAccount, every access
its component's code makes (allowed) and what it must not do (refused), in both install modes.

The session's bootstrap already installed the namespace, CRDs, PriorityClasses and ConfigMap, so the
apply must be idempotent against them; the module removes what it created and leaves those.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from koord.kustomize import build
from koord.localcluster.bootstrap import wait_crds_established
from koord.localcluster.controlplane import ControlPlane
from scheduler.config import load_config
from scheduler.registry import KNOWN, build_framework

pytestmark = pytest.mark.apiserver

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OVERLAY = DEPLOY / "overlays" / "standalone-scheduler"
MONITORING = DEPLOY / "prometheus-operator"
CHART_SCHEDULER_CONFIG = DEPLOY.parent / "tests/data/upstream/chart-v1.8.0/koord-scheduler-config.yaml"
NS = "koordinator-system"
SHARDS = "koordinator-shards"  # the scheduler shards' Leases (docs/shards.md#deploy)
KUBECTL = shutil.which("kubectl")
EMBEDDED_BINDING = "koord-manager-embedded-scheduler"
EMBEDDED_SHARDS_BINDING = "koord-manager-shards"
Obj = dict[str, Any]

# kube-apiserver 1.20 serves PodDisruptionBudget only as policy/v1beta1. The manifests keep policy/v1
# (real clusters >= 1.25 no longer serve v1beta1), so the test converts the PDBs for this server; the
# spec fields used (minAvailable, selector) are the same in both versions.
PDB_SKEW = re.compile(r'no matches for kind "PodDisruptionBudget" in version "policy/v1"')

# A minimal stand-in for the Prometheus operator's ServiceMonitor CRD (the real one carries a full
# schema); enough for the API server to accept and store deploy/prometheus-operator.
SERVICE_MONITOR_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                  "singular": "servicemonitor"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}  # fmt: skip


def for_this_server(obj: Obj) -> Obj:
    if obj["kind"] == "PodDisruptionBudget" and obj["apiVersion"] == "policy/v1":
        obj = copy.deepcopy(obj)
        obj["apiVersion"] = "policy/v1beta1"  # see PDB_SKEW
    return obj


def is_subset(want: Any, have: Any, path: str = "") -> list[str]:
    """Where ``want`` (the manifest) differs from ``have`` (the stored object, with server defaults). A
    zero value (false, 0, "") may be absent: the API server drops omitempty fields."""
    if have is None and want in (False, 0, "") and not isinstance(want, dict | list):
        return []
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path}: {have!r} is not an object"]
        return [d for k, v in want.items() for d in is_subset(v, have.get(k), f"{path}.{k}")]
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [f"{path}: {have!r} != {want!r}"]
        return [
            d
            for i, (w, h) in enumerate(zip(want, have, strict=True))
            for d in is_subset(w, h, f"{path}[{i}]")
        ]
    return [] if want == have else [f"{path}: {have!r} != {want!r}"]


class Installer:
    """Puts the cluster in one install mode ("default" or "standalone") and cleans up afterwards."""

    def __init__(self, cp: ControlPlane, api: Any, tmp: Path) -> None:
        self.cp, self.api, self.tmp = cp, api, tmp
        # Its discovery cache in the test's folder, not $TMPDIR/osrcp-<hash>.json left behind.
        self.dyn = dynamic.DynamicClient(api, cache_file=str(tmp / "discovery.json"))  # type: ignore[no-untyped-call]
        self.mode = ""
        self.created: dict[tuple[str, str, str, str], Obj] = {}
        self.log: list[str] = []

    # -- apply -----------------------------------------------------------------------------------------
    def _resource(self, obj: Obj) -> Any:
        return self.dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def read(self, obj: Obj) -> Obj | None:
        res = self._resource(obj)
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        try:
            found: Obj = res.get(name=obj["metadata"]["name"], namespace=ns).to_dict()
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return found

    def create_or_replace(self, obj: Obj) -> None:
        """Create obj, or replace the stored one (its resourceVersion, and a Service's allocated
        clusterIP, which is immutable, carried over)."""
        res = self._resource(obj)
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        try:
            res.create(body=obj, namespace=ns)
            return
        except ApiException as e:
            if e.status != 409:
                raise
        current = self.read(obj)
        assert current is not None
        body = copy.deepcopy(obj)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if obj["kind"] == "Service" and "clusterIP" not in obj["spec"]:
            body["spec"]["clusterIP"] = current["spec"]["clusterIP"]
        res.replace(body=body, namespace=ns)

    def _remember_new(self, objs: list[Obj]) -> None:
        for obj in map(for_this_server, objs):
            meta = obj["metadata"]
            key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
            if key not in self.created and self.read(obj) is None:
                self.created[key] = obj

    def _kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        argv = [KUBECTL, f"--kubeconfig={self.cp.kubeconfig_path}", f"--cache-dir={self.tmp / 'kube-cache'}",
                *args]  # fmt: skip
        env = {**os.environ, "HOME": str(self.tmp)}
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, env=env)
        self.log.append(f"$ kubectl {' '.join(args)}\n{out.stdout}{out.stderr}")
        return out

    def apply_tree(self, tree: Path, use_kubectl: bool = True) -> list[Obj]:
        """`kubectl apply -k tree`; without kubectl (or ``use_kubectl=False``), create-or-replace each
        object koord.kustomize renders. Either way the PDBs go in as policy/v1beta1 (PDB_SKEW)."""
        objs = build(tree)
        self._remember_new(objs)
        if KUBECTL is not None and use_kubectl:
            out = self._kubectl("apply", "-k", str(tree))
            if out.returncode != 0:
                errors = [e for e in out.stderr.splitlines() if e.strip() and not e.startswith("Warning:")]
                unexpected = [e for e in errors if not PDB_SKEW.search(e) and "ensure CRDs" not in e]
                assert not unexpected, f"kubectl apply -k {tree} failed:\n{out.stderr}"
            pdbs = [for_this_server(o) for o in objs if o["kind"] == "PodDisruptionBudget"]
            if pdbs:
                out = self._kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(pdbs))
                assert out.returncode == 0, out.stderr
        else:
            ordered = sorted(objs, key=lambda o: o["kind"] != "CustomResourceDefinition")
            for obj in map(for_this_server, ordered):
                self.create_or_replace(obj)
        return objs

    def ensure(self, mode: str) -> None:
        if self.mode == mode:
            return
        if mode == "default":
            self.apply_tree(DEPLOY)
        else:
            self.apply_tree(DEPLOY)
            self.apply_tree(OVERLAY)
            # Switching a default install to the (self-contained) overlay: `kubectl apply` does not
            # prune, so the overlay's README step removes the embedded scheduler's binding.
            rbac = client.RbacAuthorizationV1Api(self.api)
            for delete in (
                lambda: rbac.delete_cluster_role_binding(EMBEDDED_BINDING),
                lambda: rbac.delete_namespaced_role_binding(EMBEDDED_SHARDS_BINDING, SHARDS),
            ):
                try:
                    delete()
                except ApiException as e:
                    if e.status != 404:
                        raise
        self.mode = mode

    def install_service_monitor_crd(self) -> None:
        self._remember_new([SERVICE_MONITOR_CRD])
        self.create_or_replace(SERVICE_MONITOR_CRD)
        wait_crds_established(self.api, [SERVICE_MONITOR_CRD["metadata"]["name"]])

    # -- cleanup ---------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Deletes what this module created (namespaced first, CRDs last); bootstrap's objects stay."""
        order = sorted(self.created.values(), key=lambda o: o["kind"] == "CustomResourceDefinition")
        for obj in order:
            res = self._resource(obj)
            ns = obj["metadata"].get("namespace") if res.namespaced else None
            try:
                res.delete(name=obj["metadata"]["name"], namespace=ns)
            except ApiException as e:
                if e.status != 404:
                    raise


@pytest.fixture(scope="module")
def installer(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installer]:
    api = control_plane.api_client()
    inst = Installer(control_plane, api, tmp_path_factory.mktemp("deploy"))
    try:
        yield inst
    finally:
        try:
            inst.cleanup()
        finally:
            api.close()


def assert_reads_back(inst: Installer, objs: list[Obj]) -> None:
    problems = []
    for obj in map(for_this_server, objs):
        stored = inst.read(obj)
        name = f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        if stored is None:
            problems.append(f"{name}: not found")
        else:
            problems += [f"{name}: {d}" for d in is_subset(obj, stored)]
    assert not problems, "\n".join(problems + inst.log[-3:])


# -- install ---------------------------------------------------------------------------------------------


def test_default_install_is_accepted_and_reads_back(installer: Installer) -> None:
    installer.ensure("default")
    objs = build(DEPLOY)
    assert_reads_back(installer, objs)
    assert {o["kind"] for o in objs} >= {"DaemonSet", "Deployment", "PodDisruptionBudget", "Service"}


@pytest.mark.parametrize("use_kubectl", [True, False], ids=["kubectl", "python-client"])
def test_default_install_is_idempotent(installer: Installer, use_kubectl: bool) -> None:
    installer.ensure("default")
    installer.apply_tree(DEPLOY, use_kubectl=use_kubectl)
    assert_reads_back(installer, build(DEPLOY))


def test_standalone_overlay_is_accepted_and_reads_back(installer: Installer) -> None:
    installer.ensure("standalone")
    objs = build(OVERLAY)
    assert_reads_back(installer, objs)
    dep = installer.read({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "koord-manager",
                          "namespace": NS}})  # fmt: skip
    assert dep is not None
    assert "--no-enable-scheduler" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": EMBEDDED_BINDING}}  # fmt: skip
    assert installer.read(binding) is None


def test_service_monitors_are_accepted_with_the_operator_crd(installer: Installer) -> None:
    installer.install_service_monitor_crd()
    objs = installer.apply_tree(MONITORING)
    assert [o["kind"] for o in objs] == ["ServiceMonitor"] * 3
    assert_reads_back(installer, objs)


@pytest.mark.parametrize("mode", ["default", "standalone"])
def test_scheduler_config_map_on_the_server_is_the_one_the_scheduler_loads(
    installer: Installer, mode: str, tmp_path: Path
) -> None:
    """The ConfigMap koord-scheduler-config as the API server stores it: the file the manager or the
    standalone scheduler gets mounted loads, with upstream chart v1.8.0's LoadAwareScheduling args."""
    installer.ensure(mode)
    stored = client.CoreV1Api(installer.api).read_namespaced_config_map("koord-scheduler-config", NS)
    mounted = tmp_path / "koord-scheduler.config"
    mounted.write_text(stored.data["koord-scheduler-config"])
    config = load_config(mounted, KNOWN)
    [profile] = config.profiles
    chart = yaml.safe_load(
        yaml.safe_load(CHART_SCHEDULER_CONFIG.read_text())["data"]["koord-scheduler-config"]
    )
    [chart_args] = [
        e["args"] for e in chart["profiles"][0]["pluginConfig"] if e["name"] == "LoadAwareScheduling"
    ]
    want = {k: v for k, v in chart_args.items() if k not in ("apiVersion", "kind")}
    assert profile.args["LoadAwareScheduling"] == want
    assert config.skipped == ()  # every plugin it names, koord has
    fw = build_framework(profile)
    assert "Coscheduling" in [p.name for p in fw.permits] and "Coscheduling" in [
        p.name for p in fw.pre_enqueues
    ]


# -- RBAC: SubjectAccessReviews ------------------------------------------------------------------------------
# (verb, resource[/subresource], namespace, name, allowed). Group comes from RESOURCE_GROUPS. An empty
# namespace is a cluster-wide request (all namespaces for namespaced resources).

RESOURCE_GROUPS = {
    "nodemetrics": "slo.koordinator.sh", "nodeslos": "slo.koordinator.sh",
    "tokenreviews": "authentication.k8s.io", "leases": "coordination.k8s.io",
    "subjectaccessreviews": "authorization.k8s.io", "deployments": "apps",
    "clustercolocationprofiles": "config.koordinator.sh", "priorityclasses": "scheduling.k8s.io",
    "mutatingwebhookconfigurations": "admissionregistration.k8s.io",
    "validatingwebhookconfigurations": "admissionregistration.k8s.io",
    "replicasets": "apps", "statefulsets": "apps", "poddisruptionbudgets": "policy",
    "storageclasses": "storage.k8s.io", "csinodes": "storage.k8s.io",
    "podgroups": "scheduling.sigs.k8s.io", "elasticquotas": "scheduling.sigs.k8s.io",
    "devices": "scheduling.koordinator.sh",
}  # fmt: skip
MUTATING, VALIDATING = (
    "koordinator-mutating-webhook-configuration",
    "koordinator-validating-webhook-configuration",
)

KOORDLET = [
    # agent/gateway.py informers (field selectors narrow them to the node), status write, eviction, events
    ("list", "pods", "", "", True), ("watch", "pods", "", "", True),
    ("list", "nodes", "", "", True), ("watch", "nodes", "", "", True),
    ("list", "nodeslos", "", "", True), ("watch", "nodeslos", "", "", True),
    ("list", "nodemetrics", "", "", True), ("watch", "nodemetrics", "", "", True),
    ("patch", "nodemetrics/status", "", "node-1", True),
    ("create", "pods/eviction", "default", "p", True),
    ("create", "events", "default", "", True),
    # must not
    ("delete", "pods", "default", "p", False), ("deletecollection", "pods", "default", "", False),
    ("create", "pods", "default", "", False), ("update", "pods", "default", "p", False),
    ("update", "configmaps", NS, "slo-controller-config", False),
    ("patch", "configmaps", NS, "slo-controller-config", False),
    ("get", "configmaps", NS, "slo-controller-config", False),
    ("update", "nodes", "", "node-1", False), ("patch", "nodes", "", "node-1", False),
    ("create", "nodes", "", "", False), ("update", "nodes/status", "", "node-1", False),
    ("update", "nodemetrics", "", "node-1", False), ("delete", "nodemetrics", "", "node-1", False),
    ("create", "nodeslos", "", "", False), ("update", "nodeslos", "", "node-1", False),
    ("create", "pods/binding", "default", "p", False), ("get", "secrets", "default", "s", False),
    ("list", "secrets", "", "", False), ("create", "tokenreviews", "", "", False),
    ("update", "leases", NS, "koordinator-manager", False),
]  # fmt: skip

MANAGER = [
    # manager/gateway.py informers and writes, metrichub/kubeauth.py, leader election, config Events
    ("list", "nodes", "", "", True), ("watch", "nodes", "", "", True), ("get", "nodes", "", "n", True),
    ("patch", "nodes", "", "n", True), ("update", "nodes/status", "", "n", True),
    ("list", "pods", "", "", True), ("watch", "pods", "", "", True), ("get", "pods", NS, "koordlet-x", True),
    *[(v, r, "", "n", True) for r in ("nodemetrics", "nodeslos") for v in ("create", "update", "delete")],
    *[(v, r, "", "", True) for r in ("nodemetrics", "nodeslos") for v in ("list", "watch")],
    *[(v, "devices", "", "", True) for v in ("get", "list", "watch")],
    ("create", "tokenreviews", "", "", True),
    ("list", "configmaps", NS, "", True), ("watch", "configmaps", NS, "", True),
    ("create", "events", NS, "", True), ("patch", "events", NS, "e", True),
    ("create", "leases", NS, "", True), ("get", "leases", NS, "koordinator-manager", True),
    ("update", "leases", NS, "koordinator-manager", True),
    # manager/hubendpoints.py: the leader routes the hub Service to itself
    ("create", "endpoints", NS, "", True), ("get", "endpoints", NS, "koord-manager-hub", True),
    ("update", "endpoints", NS, "koord-manager-hub", True),
    # manager/certs.py through the gateway: the hub's TLS Secret, created by the first replica
    ("create", "secrets", NS, "", True), ("get", "secrets", NS, "koord-manager-hub-tls", True),
    ("update", "secrets", NS, "koord-manager-hub-tls", False),
    ("delete", "secrets", NS, "koord-manager-hub-tls", False),
    # manager/webhook/gateway.py: the handlers' informers, the webhook Secret (renewed in place), caBundles
    *[(v, r, "", "", True) for r in ("clustercolocationprofiles", "namespaces", "priorityclasses")
      for v in ("list", "watch")],
    ("get", "secrets", NS, "koord-manager-webhook-certs", True),
    ("update", "secrets", NS, "koord-manager-webhook-certs", True),
    ("delete", "secrets", NS, "koord-manager-webhook-certs", False),
    ("get", "mutatingwebhookconfigurations", "", MUTATING, True),
    ("patch", "mutatingwebhookconfigurations", "", MUTATING, True),
    ("get", "validatingwebhookconfigurations", "", VALIDATING, True),
    ("patch", "validatingwebhookconfigurations", "", VALIDATING, True),
    ("patch", "mutatingwebhookconfigurations", "", "someone-elses", False),
    ("delete", "mutatingwebhookconfigurations", "", MUTATING, False),
    ("create", "validatingwebhookconfigurations", "", "", False),
    ("create", "clustercolocationprofiles", "", "", False), ("update", "namespaces", "", "n", False),
    # must not
    ("update", "endpoints", NS, "kube-dns", False), ("delete", "endpoints", NS, "koord-manager-hub", False),
    ("update", "endpoints", "default", "kubernetes", False),
    ("create", "pods", "default", "", False),
    ("update", "pods", "default", "p", False), ("create", "pods/eviction", "default", "p", False),
    ("update", "configmaps", NS, "slo-controller-config", False),
    ("patch", "configmaps", NS, "slo-controller-config", False),
    ("list", "configmaps", "kube-system", "", False), ("get", "secrets", NS, "s", False),
    ("list", "secrets", "", "", False), ("delete", "nodes", "", "n", False),
    ("create", "nodes", "", "", False),
    ("patch", "nodemetrics/status", "", "n", False),
    ("update", "leases", NS, "koord-scheduler", False),
    ("delete", "leases", NS, "koordinator-manager", False),
    ("update", "leases", "kube-system", "kube-scheduler", False),
    ("create", "subjectaccessreviews", "", "", False), ("update", "deployments", NS, "koord-manager", False),
]  # fmt: skip

# The embedded scheduler's rights: the manager has them in the default install only.
MANAGER_EMBEDDED = [
    ("create", "pods/binding", "default", "p"), ("patch", "pods/status", "default", "p"),
    ("delete", "pods", "default", "p"),  # preemption's victims
    ("list", "poddisruptionbudgets", "", ""), ("update", "persistentvolumeclaims", "default", "c"),
    # the embedded scheduler's shard Leases (docs/shards.md#deploy): every Lease of the shards' namespace
    ("list", "leases", SHARDS, ""), ("watch", "leases", SHARDS, ""), ("create", "leases", SHARDS, ""),
    ("patch", "leases", SHARDS, "koord-scheduler-shard-x"),
    ("delete", "leases", SHARDS, "koord-scheduler-shard-x"),
]  # fmt: skip

SCHEDULER = [
    # scheduler/gateway.py and scheduler/main.py (Lease koord-scheduler)
    ("list", "pods", "", "", True), ("watch", "pods", "", "", True),
    ("list", "nodes", "", "", True), ("watch", "nodes", "", "", True),
    ("list", "nodemetrics", "", "", True), ("watch", "nodemetrics", "", "", True),
    ("create", "pods/binding", "default", "p", True), ("patch", "pods/status", "default", "p", True),
    ("create", "events", "default", "", True), ("patch", "events", "default", "e", True),
    ("create", "leases", NS, "", True), ("get", "leases", NS, "koord-scheduler", True),
    ("update", "leases", NS, "koord-scheduler", True),
    # scheduler/shards/heartbeat.py: its own shard Lease, the group's by label, in the shards' namespace
    # only (docs/shards.md#deploy); the leader Lease koord-scheduler is read with the rights above
    ("create", "leases", SHARDS, "", True),
    ("list", "leases", SHARDS, "", True), ("watch", "leases", SHARDS, "", True),
    ("get", "leases", SHARDS, "koord-scheduler-shard-x", True),
    ("patch", "leases", SHARDS, "koord-scheduler-shard-x", True),
    ("delete", "leases", SHARDS, "koord-scheduler-shard-x", True),
    # the shard arbiter authenticates its callers (docs/shards.md#security)
    ("create", "tokenreviews", "", "", True),
    # the spreading plugins' selectors, preemption (PDBs, victims), the volume plugins and VolumeBinding
    *[(v, r, "", "", True) for r in ("services", "replicationcontrollers", "replicasets", "statefulsets",
                                      "poddisruptionbudgets", "persistentvolumes", "persistentvolumeclaims",
                                      "storageclasses", "csinodes") for v in ("list", "watch")],
    ("delete", "pods", "default", "p", True),
    # Coscheduling: PodGroups, their status, the bind-gang annotations
    ("list", "podgroups", "", "", True), ("watch", "podgroups", "", "", True),
    ("patch", "podgroups/status", "default", "g", True), ("patch", "pods", "default", "p", True),
    ("update", "podgroups", "default", "g", False), ("delete", "podgroups", "default", "g", False),
    # ElasticQuota: the informer, the special quotas, the status annotations and status.used
    *[(v, "elasticquotas", "", "", True) for v in ("list", "watch")],
    *[(v, "elasticquotas", "koordinator-system", "q", True) for v in ("get", "create", "update", "patch")],
    *[(v, "elasticquotas/status", "team", "q", True) for v in ("patch", "update")],
    ("delete", "elasticquotas", "team", "q", False),
    ("update", "persistentvolumes", "", "pv", True),
    ("update", "persistentvolumeclaims", "default", "c", True),
    ("get", "persistentvolumeclaims", "default", "c", True),
    # must not
    ("update", "configmaps", NS, "slo-controller-config", False),
    ("list", "configmaps", NS, "", False),
    ("patch", "nodes/status", "", "n", False), ("update", "nodes/status", "", "n", False),
    ("patch", "nodes", "", "n", False), ("deletecollection", "pods", "default", "", False),
    ("update", "pods", "default", "p", False), ("delete", "persistentvolumes", "", "pv", False),
    ("create", "pods/eviction", "default", "p", False), ("update", "nodemetrics", "", "n", False),
    ("create", "nodeslos", "", "", False), ("get", "secrets", "default", "s", False),
    ("update", "leases", NS, "koordinator-manager", False),
    ("delete", "leases", NS, "koordinator-manager", False),
    ("delete", "leases", NS, "koord-scheduler-shard-x", False), ("list", "leases", NS, "", False),
    ("update", "leases", "kube-system", "kube-scheduler", False),
]  # fmt: skip


def cases() -> Iterator[Any]:
    table = {"koordlet": KOORDLET, "koord-manager": MANAGER, "koord-scheduler": SCHEDULER}
    for mode in ("default", "standalone"):
        for sa, rows in table.items():
            for verb, resource, ns, name, allowed in rows:
                yield pytest.param(mode, sa, verb, resource, ns, name, allowed,
                                   id=f"{mode}-{sa}-{'can' if allowed else 'cannot'}-{verb}-{resource}"
                                      f"{'@' + ns if ns else ''}{'/' + name if name else ''}")  # fmt: skip
        for verb, resource, ns, name in MANAGER_EMBEDDED:
            allowed = mode == "default"
            yield pytest.param(mode, "koord-manager", verb, resource, ns, name, allowed,
                               id=f"{mode}-koord-manager-{'can' if allowed else 'cannot'}-{verb}-{resource}"
                                  f"@{ns}/{name}")  # fmt: skip


def review(api: Any, sa: str, verb: str, resource: str, ns: str, name: str) -> tuple[bool, str]:
    res, _, sub = resource.partition("/")
    attrs = {"verb": verb, "group": RESOURCE_GROUPS.get(res, ""), "resource": res}
    if sub:
        attrs["subresource"] = sub
    if ns:
        attrs["namespace"] = ns
    if name:
        attrs["name"] = name
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{NS}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
            "resourceAttributes": attrs,
        },
    }
    authz: Any = client.AuthorizationV1Api(api)  # the kubernetes client is treated as untyped
    status = authz.create_subject_access_review(body).status
    return bool(status.allowed), f"{status.reason or ''} {status.evaluation_error or ''}".strip()


@pytest.mark.parametrize(("mode", "sa", "verb", "resource", "ns", "name", "allowed"), list(cases()))
def test_service_account_access(
    installer: Installer, kube: Any, mode: str, sa: str, verb: str, resource: str, ns: str, name: str,
    allowed: bool,
) -> None:  # fmt: skip
    installer.ensure(mode)
    deadline = time.monotonic() + 5  # the RBAC authorizer's informer sees new bindings within ms
    while True:
        got, why = review(kube, sa, verb, resource, ns, name)
        if got == allowed or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == allowed, f"{sa} {verb} {resource} ns={ns!r} name={name!r}: allowed={got} ({why})"


def test_non_resource_discovery_of_policy_v1_is_allowed_for_the_koordlet(
    installer: Installer, kube: Any
) -> None:
    """The evictor discovers the Eviction version with GET /apis/policy/v1 (system:discovery)."""
    installer.ensure("default")
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"system:serviceaccount:{NS}:koordlet",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "nonResourceAttributes": {"path": "/apis/policy/v1", "verb": "get"}}}  # fmt: skip
    authz: Any = client.AuthorizationV1Api(kube)
    assert authz.create_subject_access_review(body).status.allowed


@pytest.mark.parametrize(
    ("verb", "resource", "ns"),
    [
        ("list", "pods", ""),
        ("create", "pods/eviction", "default"),
        ("create", "tokenreviews", ""),
        ("list", "nodes", ""),
    ],
)
def test_a_service_account_without_bindings_is_refused(
    installer: Installer, kube: Any, verb: str, resource: str, ns: str
) -> None:
    """Control for the table above: these grants come from deploy/rbac, not from cluster defaults."""
    installer.ensure("default")
    assert review(kube, "nobody", verb, resource, ns, "")[0] is False
