"""The score-only families of the differential generator and their configuration, without an API
server (docs/testing.md#the-kube-scheduler-oracle): ImageLocality's images, SelectorSpread's Services and
controllers (and its profile entry in both schedulers), NodePreferAvoidPods' annotation and owners."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koord.localcluster.kubescheduler import scheduler_config
from scheduler.config import load_config
from scheduler.registry import KNOWN
from tests.differential.generator import ENABLED, generate, scored_plugins
from tests.differential.harness import WORKLOADS, koord_config
from tests.differential.koordproc import SELECTOR_SPREAD
from tests.differential.scorefamilies import AVOID_ANNOTATION, IMAGE_SIZES, MB

SCORE_FAMILIES = frozenset({"image-locality", "selector-spread", "prefer-avoid-pods"})


def _without_score_features(pod: dict[str, Any]) -> dict[str, Any]:
    pod = json.loads(json.dumps(pod))
    pod["metadata"].pop("ownerReferences", None)
    pod["metadata"]["labels"].pop("track", None)
    for c in [*pod["spec"]["containers"], *(pod["spec"].get("initContainers") or [])]:
        c["image"] = "busybox"
    return pod


def test_score_families_leave_the_other_families_objects_as_they_were() -> None:
    """They draw from a generator of their own: a seed keeps its preemptions and volume bindings."""
    for seed in (5, 10, 14):
        base, full = generate(seed, ENABLED - SCORE_FAMILIES), generate(seed)
        assert [n["spec"] for n in base.nodes] == [n["spec"] for n in full.nodes]
        assert [n["metadata"]["labels"] for n in base.nodes] == [n["metadata"]["labels"] for n in full.nodes]
        assert base.pending == [_without_score_features(p) for p in full.pending]
        assert base.bound == [_without_score_features(p) for p in full.bound]
        assert base.extra == [o for o in full.extra if o["kind"] not in WORKLOADS]
        assert all("images" not in n["status"] for n in base.nodes)
        assert all(not n["metadata"].get("annotations") for n in base.nodes)


def test_image_locality_family() -> None:
    cases = [generate(seed, frozenset({"image-locality", "resources"})) for seed in range(1, 6)]
    nodes = [n for c in cases for n in c.nodes]
    sizes = {i["sizeBytes"] for n in nodes for i in n["status"].get("images", [])}
    assert sizes <= set(IMAGE_SIZES) and len(sizes) >= 4
    assert min(sizes) < 23 * MB and max(sizes) > 1000 * MB
    # One size per image name within a case (kube keeps the first node's size for every node).
    for c in cases:
        by_name: dict[str, set[int]] = {}
        for n in c.nodes:
            for i in n["status"].get("images", []):
                for name in i["names"]:
                    by_name.setdefault(name, set()).add(i["sizeBytes"])
        assert all(len(s) == 1 for s in by_name.values())
    images = {c["image"] for case in cases for p in case.pending for c in p["spec"]["containers"]}
    assert "localhost:5000/d1/cache" in images and "example.com/d1/web" in images  # normalised to :latest
    assert any(p["spec"].get("initContainers") for c in cases for p in c.pending)


def test_selector_spread_family() -> None:
    cases = [generate(seed, frozenset({"selector-spread"})) for seed in range(1, 11)]
    kinds = {o["kind"] for c in cases for o in c.extra}
    assert kinds == set(WORKLOADS)
    assert any("track" in p["metadata"]["labels"] for c in cases for p in c.pending)
    rs = [o for c in cases for o in c.extra if o["kind"] == "ReplicaSet"]
    assert any("matchExpressions" in o["spec"]["selector"] for o in rs)
    assert any("matchLabels" in o["spec"]["selector"] for o in rs)


def test_prefer_avoid_pods_family() -> None:
    case = generate(3, frozenset({"prefer-avoid-pods"}))
    annotated = [n for n in case.nodes if AVOID_ANNOTATION in n["metadata"].get("annotations", {})]
    assert annotated
    entries = [e for n in annotated for e in json.loads(n["metadata"]["annotations"][AVOID_ANNOTATION])
               ["preferAvoidPods"]]  # fmt: skip
    assert all(e["podSignature"]["podController"]["uid"] for e in entries)  # API validation wants it
    owners = [r for p in case.pending for r in p["metadata"].get("ownerReferences", [])]
    uids = {e["podSignature"]["podController"]["uid"] for e in entries}
    assert any(r["uid"] in uids and r["controller"] for r in owners)
    assert not generate(3, frozenset({"resources"})).nodes[0]["metadata"].get("annotations")


def test_selector_spread_is_enabled_in_both_profiles_only_for_its_family(tmp_path: Path) -> None:
    assert "SelectorSpread" in scored_plugins(ENABLED)
    kube = scheduler_config(Path("/k"), "kube-oracle", 4321, plugins=SELECTOR_SPREAD)
    assert kube["profiles"] == [{"schedulerName": "kube-oracle", "plugins": SELECTOR_SPREAD}]
    plugins = koord_config("s", Path("/k"), selector_spread=True)["profiles"][0]["plugins"]
    assert plugins["score"]["disabled"] == [{"name": "LoadAwareScheduling"}]
    assert plugins["score"]["enabled"] == [{"name": "SelectorSpread", "weight": 1}]
    for spread in (True, False):
        config = tmp_path / f"koord-{spread}.json"
        config.write_text(json.dumps(koord_config("s", tmp_path / "kubeconfig", selector_spread=spread)))
        profile = load_config(config, KNOWN).profiles[0]
        for point in ("preScore", "score"):
            assert ("SelectorSpread" in {e.name for e in profile.points[point]}) is spread
        assert {e.name: e.weight for e in profile.points["score"]}.get("SelectorSpread", 1) == 1
