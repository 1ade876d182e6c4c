"""The deploy/ tree, rendered by koord.kustomize: one image whose console scripts the manifests call
with flags the daemons really accept, consistent ports, probes, selectors and scrape annotations,
RBAC references that resolve, the PriorityClasses (docs/upstream.md#qos-and-priority-classes), and the
pod settings the koordlet and
koord-manager need. The Dockerfile is checked against pyproject.toml (no Docker engine needed)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.options import parse as parse_koordlet
from koord.kustomize import build
from koord.localcluster.components import DAEMON_ENV
from manager.hubendpoints import ENDPOINTS_PORT_NAME
from manager.options import build_parser as manager_parser
from scheduler.main import build_parser as scheduler_parser

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SCRIPTS = set(PYPROJECT["project"]["scripts"])
VERSION = PYPROJECT["project"]["version"]
IMAGE = f"ghcr.io/koord-project/koord:{VERSION}"
NAMESPACE = "koordinator-system"

Obj = dict[str, Any]
DEFAULT = build(DEPLOY)
STANDALONE = build(DEPLOY / "overlays" / "standalone-scheduler")
MONITORING = build(DEPLOY / "prometheus-operator")
CERT_MANAGER = build(DEPLOY / "overlays" / "cert-manager")
TREES = {"default": DEFAULT, "standalone": STANDALONE, "prometheus-operator": MONITORING,
         "cert-manager": CERT_MANAGER}  # fmt: skip


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(hits) == 1, f"{kind}/{name}: {len(hits)} found"
    return hits[0]


def workloads(objs: list[Obj]) -> Iterator[Obj]:
    return (o for o in objs if o["kind"] in ("Deployment", "DaemonSet"))


def containers(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for w in workloads(objs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            yield w, c


def port_of(addr: str) -> int:
    return int(addr.rpartition(":")[2])


def args_with_env(c: Obj) -> tuple[list[str], dict[str, str]]:
    """The container's args with $(VAR) expanded as the kubelet would (fieldRefs get sample values)."""
    env = {e["name"]: e.get("value", "node-1") for e in c.get("env", [])}
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c.get("args", [])], env


# -- the image -------------------------------------------------------------------------------------------


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_dockerfile_runs_every_console_script_and_nothing_else() -> None:
    text = dockerfile()
    [smoke] = [line for line in text.splitlines() if line.startswith("RUN ") and "--version" in line]
    called = {part.split()[0] for part in smoke.removeprefix("RUN ").split("&&")}
    assert called == SCRIPTS


def test_dockerfile_shape() -> None:
    text = dockerfile()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert not re.search(r"^ENTRYPOINT", text, re.M), "each manifest sets its own command"
    assert re.search(r"^RUN .*pip install '?\.(\[gpu\])?'? ", text, re.M)  # the gpu extra: NVML
    [user] = re.findall(r"^USER (\S+)", text, re.M)
    assert not user.startswith("0") and user != "root"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_command_is_a_console_script_of_the_one_image(tree: str) -> None:
    for w, c in containers(TREES[tree]):
        assert c["command"][0] in SCRIPTS, f"{w['metadata']['name']}: {c['command']}"
        assert len(c["command"]) == 1
        assert c["image"] == IMAGE


def test_three_components_in_the_two_installs() -> None:
    assert {c["command"][0] for _, c in containers(DEFAULT)} == {"koordlet", "koord-manager"}
    assert {c["command"][0] for _, c in containers(STANDALONE)} == {
        "koordlet",
        "koord-manager",
        "koord-scheduler",
    }
    # The overlay is self-contained: it installs the CRDs and the base objects too.
    for kind in ("CustomResourceDefinition", "Namespace", "PriorityClass", "ConfigMap"):
        want = {o["metadata"]["name"] for o in DEFAULT if o["kind"] == kind}
        assert want and {o["metadata"]["name"] for o in STANDALONE if o["kind"] == kind} == want, kind


# -- flags -------------------------------------------------------------------------------------------------


def container(objs: list[Obj], script: str) -> tuple[Obj, Obj]:
    [hit] = [(w, c) for w, c in containers(objs) if c["command"][0] == script]
    return hit


def ports(c: Obj) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in c.get("ports", [])}


def test_koordlet_flags_parse_and_match_ports_and_mounts() -> None:
    ds, c = container(DEFAULT, "koordlet")
    args, env = args_with_env(c)
    opts, _ = parse_koordlet(args, env)
    assert opts.node_name == "node-1"
    [node_env] = [e for e in c["env"] if e["name"] == "NODE_NAME"]
    assert node_env["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert port_of(opts.addr) == ports(c)["metrics"] == 9316
    assert opts.hub_address == "koord-manager-hub.koordinator-system.svc:9317"
    assert str(opts.hub_token_file) == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}

    def host_path(container_path: Path) -> str:
        mount = mounts[str(container_path)]
        return str(volumes[mount["name"]]["hostPath"]["path"])

    assert host_path(opts.paths.cgroup_root) == "/sys/fs/cgroup"
    assert host_path(opts.paths.proc) == "/proc"
    assert host_path(opts.paths.sys) == "/sys"
    assert mounts[str(opts.paths.proc)]["readOnly"] is True
    assert mounts[str(opts.paths.sys)]["readOnly"] is True
    # resctrl (<sys>/fs/resctrl) is written: it sits under the writable /sys/fs mount.
    assert host_path(opts.paths.sys / "fs") == "/sys/fs"
    assert not mounts[str(opts.paths.sys / "fs")].get("readOnly", False)
    assert opts.metric_cache_path is not None and opts.audit_log is not None
    assert opts.metric_cache_path.parent == opts.audit_log.parent == Path("/var/lib/koordlet")
    assert host_path(opts.metric_cache_path.parent) == "/var/lib/koordlet"
    # The kubelet's files the NodeResourceTopology report reads, at the same path, read only.
    assert host_path(opts.kubelet_root_dir) == str(opts.kubelet_root_dir) == "/var/lib/kubelet"
    assert opts.kubelet_config_file.parent == opts.kubelet_root_dir
    assert mounts[str(opts.kubelet_root_dir)]["readOnly"] is True
    assert mounts[str(opts.kubelet_root_dir)]["mountPropagation"] == "HostToContainer"


def test_manager_flags_parse_and_match_ports() -> None:
    _, c = container(DEFAULT, "koord-manager")
    args, _ = args_with_env(c)
    a = manager_parser().parse_args(args)
    assert a.enable_scheduler and a.enable_leader_election and a.hub_auth == "tokenreview"
    assert a.leader_election_namespace == a.config_namespace == NAMESPACE
    assert port_of(a.hub_addr) == ports(c)["hub"] == 9317
    assert port_of(a.metrics_addr) == ports(c)["metrics"] == 8080
    assert port_of(a.health_probe_addr) == ports(c)["health"] == 8000
    _, c = container(STANDALONE, "koord-manager")
    assert not manager_parser().parse_args(args_with_env(c)[0]).enable_scheduler


def test_standalone_scheduler_flags_parse_and_match_ports() -> None:
    dep, c = container(STANDALONE, "koord-scheduler")
    a = scheduler_parser().parse_args(args_with_env(c)[0])
    assert a.leader_elect and a.leader_elect_resource_namespace == NAMESPACE
    assert a.metrics_port == ports(c)["metrics"] == 10251
    assert a.hub_addr == "koord-manager-hub.koordinator-system.svc:9317"
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "koord-scheduler"


# -- probes, services, scrape annotations ------------------------------------------------------------------


def resolve_port(c: Obj, port: int | str) -> int:
    return ports(c)[port] if isinstance(port, str) else port


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_probes_hit_declared_ports(tree: str) -> None:
    for w, c in containers(TREES[tree]):
        for probe in ("livenessProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            assert resolve_port(c, get["port"]) in ports(c).values(), (w["metadata"]["name"], probe)
        if c["command"][0] in ("koordlet", "koord-manager"):
            assert (c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]) == (
                "/healthz", "/readyz",
            )  # fmt: skip


def selected(objs: list[Obj], selector: dict[str, str]) -> list[tuple[Obj, Obj]]:
    return [
        (w, c) for w, c in containers(objs)
        if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
    ]  # fmt: skip


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_services_select_pods_and_their_named_ports(tree: str) -> None:
    objs = TREES[tree]
    for svc in (o for o in objs if o["kind"] == "Service"):
        if "selector" not in svc["spec"]:
            # Only the hub is selector-less: the leading manager writes its Endpoints.
            assert svc["metadata"]["name"] == "koord-manager-hub"
            continue
        hits = selected(objs, svc["spec"]["selector"])
        assert hits, f"Service {svc['metadata']['name']} selects no pod"
        for _, c in hits:
            for p in svc["spec"]["ports"]:
                assert resolve_port(c, p["targetPort"]) in ports(c).values()
        ann = svc["metadata"].get("annotations", {})
        if ann.get("prometheus.io/scrape") == "true":
            assert int(ann["prometheus.io/port"]) in {p["port"] for p in svc["spec"]["ports"]}
            assert ann["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_every_pod_is_annotated_for_scraping_on_its_metrics_port(tree: str) -> None:
    for w, c in containers(TREES[tree]):
        ann = w["spec"]["template"]["metadata"]["annotations"]
        assert ann["prometheus.io/scrape"] == "true"
        assert int(ann["prometheus.io/port"]) == ports(c)["metrics"]
        assert ann["prometheus.io/path"] == "/metrics"


def test_service_monitors_select_metrics_services_by_port_name() -> None:
    services = [o for o in DEFAULT + STANDALONE if o["kind"] == "Service"]
    for sm in MONITORING:
        assert sm["apiVersion"] == "monitoring.coreos.com/v1" and sm["kind"] == "ServiceMonitor"
        assert sm["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
        want = sm["spec"]["selector"]["matchLabels"]
        hits = [s for s in services if want.items() <= s["metadata"]["labels"].items()]
        assert hits, sm["metadata"]["name"]
        for svc in hits:
            names = {p["name"] for p in svc["spec"]["ports"]}
            assert {e["port"] for e in sm["spec"]["endpoints"]} <= names


def test_hub_service_is_routed_to_the_leader() -> None:
    svc = find(DEFAULT, "Service", "koord-manager-hub")
    assert "selector" not in svc["spec"]
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        (ENDPOINTS_PORT_NAME, 9317, 9317)
    ]
    deploy = find(DEFAULT, "Deployment", "koord-manager")
    (c,) = deploy["spec"]["template"]["spec"]["containers"]
    assert "--hub-endpoints=koord-manager-hub" in c["args"]
    assert ports(c)["hub"] == 9317
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "valueFrom" in e}
    assert env == {
        "POD_IP": "status.podIP",
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
    }


# -- RBAC and namespaces ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_rbac_references_resolve(tree: str) -> None:
    objs = TREES[tree]
    accounts = {
        (o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs if o["kind"] == "ServiceAccount"
    }
    assert accounts == {(NAMESPACE, n) for n in ("koordlet", "koord-manager", "koord-scheduler")}
    for b in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = b["roleRef"]
        role = find(objs, ref["kind"], ref["name"])
        if b["kind"] == "RoleBinding" and ref["kind"] == "Role":
            assert role["metadata"]["namespace"] == b["metadata"]["namespace"]
        for s in b["subjects"]:
            assert (s["kind"], (s["namespace"], s["name"]) in accounts) == ("ServiceAccount", True)
    for w in workloads(objs):
        sa = w["spec"]["template"]["spec"]["serviceAccountName"]
        assert (w["metadata"]["namespace"], sa) in accounts


def rules(objs: list[Obj], kind: str, name: str) -> list[tuple[str, str, str]]:
    return [
        (g, r, v)
        for rule in find(objs, kind, name)["rules"]
        for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    ]  # fmt: skip


def test_koordlet_cannot_delete_pods_or_touch_configmaps() -> None:
    granted = rules(DEFAULT, "ClusterRole", "koordlet")
    assert ("", "pods/eviction", "create") in granted
    assert not [g for g in granted if g[1] == "pods" and g[2] not in ("get", "list", "watch")]
    assert not [g for g in granted if g[1] == "configmaps" or g[2] == "*" or g[1] == "*"]


def test_no_wildcards_anywhere() -> None:
    for o in DEFAULT + STANDALONE:
        for rule in o.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], o["metadata"]["name"]


def test_manager_loses_the_scheduler_role_in_the_standalone_overlay() -> None:
    find(DEFAULT, "ClusterRoleBinding", "koord-manager-embedded-scheduler")
    assert not [o for o in STANDALONE if o["metadata"]["name"] == "koord-manager-embedded-scheduler"]


@pytest.mark.parametrize("tree", sorted(TREES))
def test_namespaced_objects_live_in_koordinator_system(tree: str) -> None:
    """... but the scheduler shards' Lease rights, in the shards' own namespace (docs/shards.md#deploy)."""
    cluster = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
               "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}  # fmt: skip
    shards = {"koord-scheduler-shards", "koord-manager-shards"}
    for o in TREES[tree]:
        if o["kind"] in ("Role", "RoleBinding") and o["metadata"]["name"] in shards:
            assert o["metadata"]["namespace"] == "koordinator-shards"
            continue
        assert o["metadata"].get("namespace") == (None if o["kind"] in cluster else NAMESPACE), o["kind"]
        assert o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "koord"


def test_the_default_install_holds_crds_and_base() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in DEFAULT}
    assert {("CustomResourceDefinition", "nodemetrics.slo.koordinator.sh"),
            ("CustomResourceDefinition", "nodeslos.slo.koordinator.sh"),
            ("CustomResourceDefinition", "clustercolocationprofiles.config.koordinator.sh"),
            ("Namespace", NAMESPACE), ("ConfigMap", "slo-controller-config")} <= kinds  # fmt: skip
    assert DEFAULT[0]["kind"] == "Namespace"


def test_priority_classes_as_spec_1_2() -> None:
    pcs = {o["metadata"]["name"]: o for o in DEFAULT if o["kind"] == "PriorityClass"}
    assert {n: o["value"] for n, o in pcs.items()} == {
        "koord-prod": 9000, "koord-mid": 7000, "koord-batch": 5000, "koord-free": 3000,
    }  # fmt: skip
    for o in pcs.values():
        assert o["apiVersion"] == "scheduling.k8s.io/v1"
        assert o["preemptionPolicy"] == "PreemptLowerPriority" and o["globalDefault"] is False


# -- pod settings ------------------------------------------------------------------------------------------


def test_koordlet_daemonset() -> None:
    ds, c = container(DEFAULT, "koordlet")
    pod = ds["spec"]["template"]["spec"]
    assert ds["kind"] == "DaemonSet" and ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert pod["hostPID"] is True and pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["priorityClassName"] == "system-node-critical"
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"},
                              "limits": {"cpu": "500m", "memory": "256Mi"}}  # fmt: skip
    sc = c["securityContext"]
    assert not sc.get("privileged", False)
    assert sc["capabilities"]["drop"] == ["ALL"] and "SYS_ADMIN" in sc["capabilities"]["add"]
    # The API refuses allowPrivilegeEscalation: false together with CAP_SYS_ADMIN.
    assert "allowPrivilegeEscalation" not in sc
    assert sc["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize(("tree", "name"), [("default", "koord-manager"), ("standalone", "koord-scheduler")])
def test_replicated_deployments(tree: str, name: str) -> None:
    objs = TREES[tree]
    dep = find(objs, "Deployment", name)
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["replicas"] == 2
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pdb = find(objs, "PodDisruptionBudget", name)
    assert pdb["apiVersion"] == "policy/v1" and pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for c in pod["containers"]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("tree", ["default", "standalone"])
def test_every_daemon_runs_with_two_malloc_arenas_as_koord_up_does(tree: str) -> None:
    """docs/install.md#memory-of-the-daemons: the manifests and `koord up` set the same malloc limit."""
    seen = set()
    for workload, c in containers(TREES[tree]):
        name = workload["metadata"]["name"]
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        assert env.get("MALLOC_ARENA_MAX") == DAEMON_ENV["MALLOC_ARENA_MAX"] == "2", name
        seen.add(name)
    assert {"koord-manager", "koordlet"} <= seen
