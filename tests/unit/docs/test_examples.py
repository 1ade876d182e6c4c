"""The operator guides' examples stay true (docs/guides/reserve-before-you-scale.md,
docs/guides/quota-tree-three-teams.md): every manifest under docs/examples/ parses, its Reservations and
ElasticQuotas pass our own parsers, the scheduler configuration snippets load and build a framework with
the plugin at the points the guides say, the Reservation's owners are the Deployment's pods and nobody
else, and `koord simulate` gives the runtime quotas and admission reasons the quota guide shows.
Unit tests: no API server. Imports: apis, scheduler, koord (the simulate evaluator), the standard library,
yaml and pytest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from apis.elasticquota import ANNOTATION_REQUEST, ANNOTATION_RUNTIME, parse_elastic_quota
from apis.kubeobjects import Pod
from apis.reservation import parse_reservation
from apis.reservation_pod import parse_affinity, reservation_matches_owner
from koord.simulate import simulate_file, simulate_scenario
from scheduler.config import parse_config
from scheduler.framework.results import fit_error_message
from scheduler.framework.status import Status
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.plugins.nodeaffinity import ERR_REASON_POD
from scheduler.plugins.reservation.filtering import ERR_AFFINITY
from scheduler.registry import KNOWN, build_framework, profile_points

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"
GUIDES = ROOT / "docs" / "guides"
RESERVATION = EXAMPLES / "reservation"
QUOTA = EXAMPLES / "elasticquota"
RUNTIME = QUOTA / "runtime.json"
TEAMS = ("org", "team-a", "team-b", "team-c")


def _objects(path: Path) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no object"
    for d in docs:
        assert isinstance(d, dict) and d.get("apiVersion") and d.get("kind"), f"{path}: {d!r:.80}"
    return docs


def _all(directory: Path, kind: str) -> list[dict[str, Any]]:
    return [d for p in sorted(directory.glob("*.yaml")) for d in _objects(p) if d["kind"] == kind]


def _pod_of(template: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """A pod the Deployment's ReplicaSet creates from `template`."""
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-6d4cf56db6",
        "uid": "rs",
        "controller": True,
    }
    meta = {
        **template["metadata"],
        "namespace": namespace,
        "name": name,
        "uid": name,
        "ownerReferences": [rs],
    }
    return {"metadata": meta, "spec": template["spec"]}


def _guide(name: str) -> str:
    return (GUIDES / name).read_text()


def _profile(path: Path) -> Any:
    config = parse_config(yaml.safe_load(path.read_text()), KNOWN)
    [profile] = config.profiles
    return profile


def _points(profile: Any) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The extension points and score weights of the framework the profile builds."""
    fw = build_framework(profile)
    return profile_points(profile, {p.name: p for p in fw.plugins})


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.yaml")), ids=lambda p: p.name)
def test_every_example_manifest_parses(path: Path) -> None:
    for obj in _objects(path):
        where = f"{path.name}: {obj['kind']} {obj.get('metadata', {}).get('name')}"
        if obj["kind"] == "Reservation":
            assert parse_reservation(obj).name == obj["metadata"]["name"], where
        elif obj["kind"] == "ElasticQuota":
            assert parse_elastic_quota(obj).name == obj["metadata"]["name"], where
        elif obj["kind"] == "KubeSchedulerConfiguration":
            profile = _profile(path)
            assert build_framework(profile) is not None, where
        else:
            assert obj["kind"] in {"Namespace", "Deployment", "Pod"}, where


def test_every_example_is_shown_by_its_guide() -> None:
    guides = _guide("reserve-before-you-scale.md") + _guide("quota-tree-three-teams.md")
    files = sorted(p.relative_to(ROOT).as_posix() for p in EXAMPLES.rglob("*") if p.is_file())
    assert files
    missing = [f for f in files if f not in guides]
    assert not missing, f"example files no guide mentions: {missing}"


def test_the_examples_use_their_profiles_scheduler_name() -> None:
    for directory in (RESERVATION, QUOTA):
        name = _profile(directory / "scheduler-config.yaml").scheduler_name
        pods = [d["spec"] for d in _all(directory, "Pod")]
        pods += [d["spec"]["template"]["spec"] for d in _all(directory, "Deployment")]
        pods += [d["spec"]["template"]["spec"] for d in _all(directory, "Reservation")]
        assert pods and {p["schedulerName"] for p in pods} == {name}, directory.name


# --- reserve before you scale ---------------------------------------------------------------------
def test_reservation_profile_is_the_charts() -> None:
    profile = _profile(RESERVATION / "scheduler-config.yaml")
    points, weights = _points(profile)
    for point in ("preFilter", "filter", "preScore", "score", "reserve", "preBind", "bind"):
        assert "Reservation" in points[point], point
    assert points["postFilter"] == ["Reservation", "DefaultPreemption"]
    assert "LoadAwareScheduling" not in profile.plugins
    assert weights["Reservation"] == 5000


def test_reservation_owners_are_the_deployments_pods_only() -> None:
    [deployment] = _all(RESERVATION, "Deployment")
    template, ns = deployment["spec"]["template"], deployment["metadata"]["namespace"]
    reservations = {d["metadata"]["name"]: parse_reservation(d) for d in _all(RESERVATION, "Reservation")}
    assert set(reservations) == {"web-next", "web-short"}
    web = _pod_of(template, ns, "web-3")
    assert reservation_matches_owner(web, reservations["web-next"])
    assert not reservation_matches_owner(web, reservations["web-short"])  # nobody owns it: it expires
    # the same labels in another namespace, or on a pod no ReplicaSet controls, are no owners
    assert not reservation_matches_owner(_pod_of(template, "elsewhere", "web-x"), reservations["web-next"])
    bare = _pod_of(template, ns, "web-bare")
    del bare["metadata"]["ownerReferences"]
    assert not reservation_matches_owner(bare, reservations["web-next"])
    pods = {d["metadata"]["name"]: d for d in _all(RESERVATION, "Pod")}
    assert set(pods) == {"intruder", "named-intruder"}
    for pod in pods.values():
        assert not reservation_matches_owner(pod, reservations["web-next"])
    assert parse_affinity(pods["named-intruder"]).name == "web-next"
    # sizes the guide relies on: 2 x 1 cpu + 1 cpu reserved on a 4-cpu node leave 1 cpu, not 1.5
    assert deployment["spec"]["replicas"] == 2
    assert template["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    web_next = reservations["web-next"]
    assert web_next.ttl_ns == 3600 * 10**9 and web_next.allocate_once is None and web_next.is_allocate_once
    assert reservations["web-short"].ttl_ns == 30 * 10**9
    assert pods["intruder"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1500m"


def test_reservation_guide_shows_the_reasons_the_code_gives() -> None:
    text = _guide("reserve-before-you-scale.md")
    named = fit_error_message(4, [Status.unresolvable(ERR_AFFINITY)] * 4)
    assert named in text
    plain = [Status.unschedulable("Insufficient cpu")] + [Status.unresolvable(ERR_REASON_POD)] * 3
    assert fit_error_message(4, plain) in text
    assert "scheduling.koordinator.sh/reservation-allocated" in text


# --- a quota tree for three teams -----------------------------------------------------------------
def _quotas() -> list[dict[str, Any]]:
    return _all(QUOTA, "ElasticQuota")


def _scenario() -> dict[str, Any]:
    data = json.loads(RUNTIME.read_text())
    assert isinstance(data, dict)
    return data


def test_quota_profile_keeps_preemption_within_a_quota() -> None:
    profile = _profile(QUOTA / "scheduler-config.yaml")
    points, _ = _points(profile)
    for point in ("preFilter", "postFilter", "reserve"):
        assert "ElasticQuota" in points[point], point
    assert "DefaultPreemption" not in points["postFilter"]
    assert profile.args["ElasticQuota"]["monitorAllQuotas"] is True  # the revoke runs only with it


def test_runtime_scenario_is_the_guides_tree_and_gives_its_expect() -> None:
    scenario = _scenario()
    assert scenario["kind"] == "ElasticQuota" and scenario["operation"] == "runtime"
    assert scenario["quotas"] == _quotas()
    assert scenario["args"] == _profile(QUOTA / "scheduler-config.yaml").args["ElasticQuota"]
    result = simulate_file(str(RUNTIME))
    assert result == scenario["expect"]


def _shown_runtime(heading: str) -> dict[str, Any]:
    """The first ```json block after `heading` in the quota guide."""
    text = _guide("quota-tree-three-teams.md")
    start = text.index(heading)
    block = re.search(r"```json\n(.*?)```", text[start:], re.S)
    assert block, f"no json block after {heading!r}"
    shown = json.loads(block.group(1))
    assert isinstance(shown, dict)
    return shown


def test_quota_guide_shows_what_simulate_computes() -> None:
    runtime = _scenario()["expect"]["runtime"]
    assert _shown_runtime("## What koord simulate says") == {name: runtime[name] for name in TEAMS}


def _runtime_with(requests: dict[str, Any]) -> dict[str, Any]:
    result = simulate_scenario({**_scenario(), "requests": requests})
    return {name: result["runtime"][name]["cpu"] for name in TEAMS}


# The guide's table of the three steps: team-a alone, team-b arrives, team-c's over-max pod.
STEPS = {
    "a": ({"team-a": {"cpu": "5"}}, {"org": 6000, "team-a": 5000, "team-b": 0, "team-c": 1000}),
    "b": (
        {"team-a": {"cpu": "5"}, "team-b": {"cpu": "2"}},
        {"org": 6000, "team-a": 3000, "team-b": 2000, "team-c": 1000},
    ),
    "c": (
        {"team-a": {"cpu": "5"}, "team-b": {"cpu": "2"}, "team-c": {"cpu": "3"}},
        {"org": 6000, "team-a": 2500, "team-b": 2000, "team-c": 1500},
    ),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_quota_guide_steps(step: str) -> None:
    requests, expected = STEPS[step]
    assert _runtime_with(requests) == expected
    row = re.search(rf"^\| {step} \|.*$", _guide("quota-tree-three-teams.md"), re.M)
    assert row, f"no table row for step {step}"
    cells = [c.strip() for c in row.group(0).strip("|").split("|")]
    shown = [c for c in cells if re.fullmatch(r"[0-9.]+m?", c)]
    assert shown == [_cpu(expected[name]) for name in TEAMS], row.group(0)


def _cpu(milli: int) -> str:
    return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"


def _pod(ns: str, name: str, cpu: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}"}, "spec": spec}


def _admit(pods: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any]:
    scenario = _scenario()
    return simulate_scenario({
        "kind": "ElasticQuota", "operation": "admit", "args": scenario["args"],
        "clusterTotal": scenario["clusterTotal"], "quotas": scenario["quotas"], "pods": pods, "pod": pod,
    })  # fmt: skip


def _pending_message(reason: str) -> str:
    """The PodScheduled message of a pod the quota turned away at PreFilter, on koord up's four nodes."""
    return fit_error_message(4, [Status.unschedulable(reason)] * 4)


def test_quota_guide_shows_the_admission_reasons() -> None:
    text = _guide("quota-tree-three-teams.md")
    running = [_pod("team-a", f"a-{i}", "1", "node") for i in range(3)]
    running += [_pod("team-b", f"b-{i}", "1", "node") for i in range(2)]
    # step b: team-a runs 3 pods and 1 recreated pod waits; the other recreated one is turned away
    result = _admit([*running, _pod("team-a", "a-pending", "1", None)], _pod("team-a", "a-new", "1", None))
    assert result["code"] == "Unschedulable"
    assert f"`{_pending_message(result['reason'])}`" in text
    # step c: team-c's 3-cpu pod is over its max of 2
    pending = [_pod("team-a", f"a-p{i}", "1", None) for i in range(2)]
    result = _admit([*running, *pending], _pod("team-c", "c-big", "3", None))
    assert result["code"] == "Unschedulable"
    assert f"`{_pending_message(result['reason'])}`" in text


def test_quota_guide_shows_the_status_the_scheduler_writes() -> None:
    """Step b's view of the quotas: the annotations and status.used the status controller computes."""
    plugin = ElasticQuota.from_args(_scenario()["args"])
    for quota in _quotas():
        plugin.on_quota_add(quota)
    plugin.on_node("n", {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "12", "pods": "110"}}})
    pods = [_pod("team-a", f"a-{i}", "1", "n") for i in range(3)]
    pods += [_pod("team-a", f"a-p{i}", "1", None) for i in range(2)]
    pods += [_pod("team-b", f"b-{i}", "1", "n") for i in range(2)]
    for pod in pods:
        plugin.on_any_pod_add(cast(Pod, pod))
    rows = []
    for quota in _quotas():
        patch = plugin.status_patch(quota)
        assert patch is not None
        notes = patch["metadata"]["annotations"]
        used = patch.get("status", {}).get("used")
        shown = "<none>" if not used else "map[" + " ".join(f"{k}:{v}" for k, v in sorted(used.items())) + "]"
        rows.append([quota["metadata"]["name"], notes[ANNOTATION_RUNTIME], notes[ANNOTATION_REQUEST], shown])
    text = _guide("quota-tree-three-teams.md")
    block = re.search(r"```\nNAME +RUNTIME +REQUEST +USED\n(.*?)```", text, re.S)
    assert block, "no quota view in the guide"
    shown = [line.split() for line in block.group(1).splitlines() if not line.startswith("koordinator-")]
    assert shown == rows
