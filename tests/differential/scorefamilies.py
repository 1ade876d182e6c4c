"""The score-only families of the differential generator (docs/testing.md#the-kube-scheduler-oracle):
ImageLocality's node images, SelectorSpread's Services and workload controllers, NodePreferAvoidPods'
node annotation and pod controllers. `add_score_families` dresses a generated case with them from a
random generator of its own (seeded from the case's seed), so enabling them leaves every other
family's objects exactly as they were: a seed keeps its preemptions and volume bindings.
Imports: standard library, tests.differential.checker (the object type).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tests.differential.checker import Obj

if TYPE_CHECKING:  # generator.py imports this module
    from tests.differential.generator import Case

MB = 1024 * 1024
# 1.20's imagelocality clamps a node's sum to [23 MB, 1000 MB × containers]: sizes below, at and
# around both thresholds, and one far above.
IMAGE_SIZES = (5 * MB, 23 * MB, 24 * MB, 90 * MB, 333 * MB, 999 * MB, 1000 * MB, 1800 * MB)
AVOID_ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
TRACKS = ("stable", "canary")


def add_score_families(case: Case, families: Iterable[str]) -> None:
    on = frozenset(families)
    r = random.Random(f"{case.seed}/score-families")
    if "image-locality" in on:
        _images(case, r)
    if "selector-spread" in on:
        _selectors(case, r)
    if "prefer-avoid-pods" in on:
        _avoid(case, r)


def _images(case: Case, r: random.Random) -> None:
    """Nodes list some of the case's images (each under one or two names, a size per image for the
    whole case, as one registry gives); pods' containers and init containers name them with and
    without a tag (1.20 appends `:latest` when the name has no tag after its last `/`, so
    `localhost:5000/x` is `localhost:5000/x:latest`), or name images no node has."""
    p = case.prefix
    images = [
        [f"example.com/{p}/web:latest", f"example.com/{p}/web:v1"],
        [f"example.com/{p}/db:v2"],
        [f"localhost:5000/{p}/cache:latest"],
        [f"{p}-tools:latest", f"docker.io/library/{p}-tools:latest"],
        [f"example.com/{p}/big:v1"],
    ]
    sizes = [r.choice(IMAGE_SIZES) for _ in images]
    for node in case.nodes:
        if r.random() < 0.8:
            listed = [{"names": names, "sizeBytes": size}
                      for names, size in zip(images, sizes, strict=True) if r.random() < 0.5]  # fmt: skip
            node["status"]["images"] = listed
    refs = (
        f"example.com/{p}/web", f"example.com/{p}/web:v1", f"example.com/{p}/db:v2",
        f"example.com/{p}/db", f"localhost:5000/{p}/cache", f"{p}-tools",
        f"docker.io/library/{p}-tools", f"example.com/{p}/big:v1", "busybox",
    )  # fmt: skip
    for pod in case.pending:
        spec = pod["spec"]
        for c in spec["containers"]:
            if r.random() < 0.75:
                c["image"] = r.choice(refs)
        for c in spec.get("initContainers") or []:  # never counted by 1.20
            c["image"] = r.choice(refs)


def _selectors(case: Case, r: random.Random) -> None:
    """A `track` label on some pods, and in the case's namespace Services and RCs (label-map
    selectors), ReplicaSets and StatefulSets (LabelSelectors, some with expressions) selecting some of
    the pods: SelectorSpread's selector is all of those that match a pod together, and
    PodTopologySpread's system default constraints apply to the pods they select."""
    for pod in case.bound + case.pending:
        if r.random() < 0.5:
            pod["metadata"]["labels"]["track"] = r.choice(TRACKS)
    p = case.prefix
    apps = ("web", "db", "cache")

    def template(labels: dict[str, str]) -> Obj:
        return {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip

    for app in apps:
        if r.random() < 0.5:
            case.extra.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{p}-svc-{app}"},
                               "spec": {"clusterIP": "None", "selector": {"app": app},
                                        "ports": [{"port": 80}]}})  # fmt: skip
    if r.random() < 0.5:
        labels = {"app": r.choice(apps), **({"track": "stable"} if r.random() < 0.5 else {})}
        case.extra.append({"apiVersion": "v1", "kind": "ReplicationController",
                           "metadata": {"name": f"{p}-rc"},
                           "spec": {"replicas": 0, "selector": labels,
                                    "template": template(labels)}})  # fmt: skip
    if r.random() < 0.6:
        two = r.sample(apps, 2)
        if r.random() < 0.5:
            selector: Obj = {"matchExpressions": [{"key": "app", "operator": "In", "values": two}]}
        else:
            selector = {"matchLabels": {"app": two[0]}}
        case.extra.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": f"{p}-rs"},
                           "spec": {"replicas": 0, "selector": selector,
                                    "template": template({"app": two[0]})}})  # fmt: skip
    if r.random() < 0.4:
        labels = {"track": r.choice(TRACKS)}
        case.extra.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": f"{p}-ss"},
                           "spec": {"replicas": 0, "serviceName": f"{p}-ss",
                                    "selector": {"matchLabels": labels},
                                    "template": template(labels)}})  # fmt: skip


def _avoid(case: Case, r: random.Random) -> None:
    """Controllers by (kind, name, uid) — not created: nothing here garbage-collects pods whose owner
    does not exist, and only the kind and uid count; some nodes' preferAvoidPods annotation lists a few
    of them (now and then with the kind of another, which must not match); some pods are owned by one,
    as its controller or not (only a controlling RC or RS counts)."""
    p = case.prefix

    def uid() -> str:
        return str(uuid.UUID(int=r.getrandbits(128)))

    controllers = [
        ("apps/v1", "ReplicaSet", f"{p}-rs-a", uid()), ("v1", "ReplicationController", f"{p}-rc-a", uid()),
        ("apps/v1", "ReplicaSet", f"{p}-rs-b", uid()), ("apps/v1", "StatefulSet", f"{p}-ss-a", uid()),
    ]  # fmt: skip
    others = {"ReplicaSet": "ReplicationController", "ReplicationController": "ReplicaSet",
              "StatefulSet": "ReplicaSet"}  # fmt: skip
    for node in case.nodes:
        if r.random() >= 0.5:
            continue
        entries = []
        for api, kind, name, id_ in r.sample(controllers, r.randint(1, 2)):
            if r.random() < 0.15:
                kind = others[kind]
            ref = {"apiVersion": api, "kind": kind, "name": name, "uid": id_, "controller": True}
            entries.append({"podSignature": {"podController": ref}, "reason": "differential",
                            "message": "some message"})  # fmt: skip
        annotations = node["metadata"].setdefault("annotations", {})
        annotations[AVOID_ANNOTATION] = json.dumps({"preferAvoidPods": entries})
    for pod in case.bound + case.pending:
        if r.random() < 0.6:
            api, kind, name, id_ = r.choice(controllers)
            ref = {"apiVersion": api, "kind": kind, "name": name, "uid": id_, "controller": r.random() < 0.85}
            pod["metadata"]["ownerReferences"] = [ref]
