"""ImageLocality: image sizes scaled by spread, the 23MB/1000MB thresholds, normalised image names,
kube 1.20.2's integer math; the image index follows node changes and new nodes; equal to its oracle
(tests/oracles/basic.py) over generated snapshots."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.imagelocality import ImageLocality, normalized_image_name

from ._oracle_checks import check_scores
from ._support import add_nodes, make_node, make_pod, refresh_nodes

MB = 1024 * 1024


def node(name: str, *images: tuple[list[str], int]) -> dict[str, Any]:
    n = make_node(name)
    n["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return n


def pod(*images: Any) -> dict[str, Any]:
    p = make_pod(requests=[None] * len(images))
    for c, image in zip(p["spec"]["containers"], images, strict=True):
        c["image"] = image
    return p


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.2", "nginx:1.2"),
        ("registry:5000/nginx", "registry:5000/nginx:latest"),
        ("registry:5000/nginx:1", "registry:5000/nginx:1"),
        ("gcr.io/x/y@sha256:abc", "gcr.io/x/y@sha256:abc"),
        ("", ":latest"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized


def test_kube_worked_example() -> None:
    # kube's test: node1 has gcr.io/40 (40MB) and gcr.io/250 (250MB), node2 has gcr.io/300 and
    # gcr.io/2000 (2000MB); each image on one of two nodes (spread 1/2).
    n1 = node("n1", (["gcr.io/40:latest", "gcr.io/40:v1"], 40 * MB), (["gcr.io/250:latest"], 250 * MB))
    n2 = node("n2", (["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB))
    snap = Snapshot.build([n1, n2])
    # one container gcr.io/40: node1 20MB < 23MB -> 0; node2 nothing -> 0
    assert check_scores(ImageLocality(), pod("gcr.io/40"), snap) == [0, 0]
    # gcr.io/250 on both nodes (spread 1): 250MB -> 100 * (250 - 23) / (1000 - 23) = 23
    assert check_scores(ImageLocality(), pod("gcr.io/250"), snap) == [23, 23]
    # two containers: node1 40MB/2 + 250MB = 270MB -> 100 * 247MB / 1977MB = 12; node2 250MB -> 11
    assert check_scores(ImageLocality(), pod("gcr.io/40", "gcr.io/250"), snap) == [12, 11]


def test_thresholds_and_clamping() -> None:
    snap = Snapshot.build([node("a", (["big:latest"], 3000 * MB)), node("b", (["small:latest"], 10 * MB))])
    # big only on a (spread 1/2): 1500MB clamped to 1000MB -> 100; b has none
    assert check_scores(ImageLocality(), pod("big"), snap) == [100, 0]
    assert check_scores(ImageLocality(), pod("big", "big"), snap) == [100, 0]  # 3000MB of 2000MB max
    assert check_scores(ImageLocality(), pod(), snap) == [0, 0]  # no containers
    assert check_scores(ImageLocality(), pod("big:other"), snap) == [0, 0]


def test_index_follows_node_changes_and_new_nodes() -> None:
    snap = Snapshot.build([node("a", (["img:1"], 500 * MB)), node("b")])
    plugin = ImageLocality()
    # 500MB * 1/2 = 250MB -> 23
    assert check_scores(plugin, pod("img:1"), snap) == [23, 0]
    refresh_nodes(snap, {1: node("b", (["img:1"], 500 * MB))}, 2)
    assert check_scores(plugin, pod("img:1"), snap) == [48, 48]  # 500MB -> 100 * 477 / 977
    add_nodes(snap, [node("c")], 3)
    assert check_scores(plugin, pod("img:1"), snap) == [31, 31, 0]  # 500 * 2/3 = 333MB
    refresh_nodes(snap, {0: node("a")}, 4)
    assert check_scores(plugin, pod("img:1"), snap) == [0, 14, 0]  # 500 * 1/3 = 166MB


images = st.sampled_from(["a", "a:latest", "b:1", "c", "reg:5000/d"])
node_images = st.lists(
    st.tuples(
        st.lists(images, min_size=1, max_size=2), st.sampled_from([0, 5 * MB, 100 * MB, 600 * MB, 2**40])
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(node_images, max_size=6), st.lists(images, max_size=3), st.data())
def test_plugin_equals_oracle(nodes: list[Any], wanted: list[str], data: st.DataObject) -> None:
    snap = Snapshot.build([node(f"n{i}", *imgs) for i, imgs in enumerate(nodes)])
    p = pod(*wanted)
    check_scores(ImageLocality(), p, snap)
    if nodes:
        refresh_nodes(snap, {0: node("n0", *data.draw(node_images))}, 2)
        check_scores(ImageLocality(), p, snap)
    add_nodes(snap, [node("m", *data.draw(node_images))], 3)
    check_scores(ImageLocality(), p, snap)
