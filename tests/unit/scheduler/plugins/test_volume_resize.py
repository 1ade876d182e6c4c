"""The volume plugins' views follow nodes removed and added in place (`resize`, then `refresh` of the
new rows): the pods' volumes per row (with what plugins derived from them), the CSI and in-tree limit
columns, and VolumeBinding's label index. After random row changes mixed with pod changes, every
volume filter still equals its oracle on every row, and each view holds what a view rebuilt from the
same rows holds."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import BASE_RESOURCES, Snapshot
from scheduler.framework.volumes import VolumeObjects
from scheduler.plugins.volume.binding_filter import LabelIndex, label_index, term_rows
from scheduler.plugins.volume.common import PodVolumesView, pod_volumes_view
from scheduler.plugins.volume.limits import NodeVolumeLimits, _LimitsView, csi_attach_limit_key
from scheduler.plugins.volume.limits_intree import (
    AzureDiskLimits,
    CinderLimits,
    EBSLimits,
    GCEPDLimits,
    _LimitColumn,
)
from scheduler.plugins.volume.matching import DOES_NOT_EXIST, EXISTS, IN, NOT_IN, Req
from scheduler.plugins.volume.restrictions import VolumeRestrictions
from scheduler.plugins.volume.zone import VolumeZone
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.plugins._support import add_pods, make_node
from tests.unit.scheduler.plugins._volume_support import statuses, vpod
from tests.unit.scheduler.plugins.test_volume_property import ZONE_KEYS, clusters, volume_lists

Obj = dict[str, Any]
LIMIT_KEYS = ["attachable-volumes-aws-ebs", "attachable-volumes-gce-pd", csi_attach_limit_key("drv")]
REQS = [
    Req(ZONE_KEYS[0], IN, frozenset({"a"})),
    Req(ZONE_KEYS[1], IN, frozenset({"a", "b"})),
    Req(ZONE_KEYS[0], NOT_IN, frozenset({"b"})),
    Req(ZONE_KEYS[2], EXISTS, frozenset()),
    Req(ZONE_KEYS[1], DOES_NOT_EXIST, frozenset()),
]


@st.composite
def nodes(draw: st.DrawFn, name: str) -> Obj:
    alloc = {"cpu": "4"}
    for key in draw(st.lists(st.sampled_from(LIMIT_KEYS), max_size=2)):
        alloc[key] = str(draw(st.integers(0, 3)))
    labels = draw(st.dictionaries(st.sampled_from(ZONE_KEYS), st.sampled_from(["a", "b", "c"]), max_size=2))
    return make_node(name, labels=labels, allocatable=alloc)


def decoded(index: LabelIndex) -> list[str | None]:
    return [index.values[c] if c >= 0 else None for c in index.codes.tolist()]


def check_views(snap: Snapshot, store: VolumeObjects) -> None:
    kept_pods, fresh_pods = pod_volumes_view(snap), PodVolumesView()
    fresh_pods.rebuild(snap)
    assert kept_pods.rows == fresh_pods.rows and kept_pods.with_volumes == fresh_pods.with_volumes
    assert len(kept_pods.derived) == snap.n
    for key, view in snap._views.items():
        if isinstance(view, _LimitsView):
            fresh_limits = _LimitsView(store)
            fresh_limits.rebuild(snap)
            assert (
                view.rows == fresh_limits.rows
                and view.has_limits.tolist() == fresh_limits.has_limits.tolist()
            )
            for k, arr in view.arrays.items():
                assert arr.tolist() == fresh_limits.array(k).tolist(), k
        elif isinstance(view, _LimitColumn):
            fresh_column = _LimitColumn(view.plugin)
            fresh_column.rebuild(snap)
            assert view.values.tolist() == fresh_column.values.tolist(), key
        elif isinstance(view, LabelIndex):
            fresh_index = LabelIndex(view.key)
            fresh_index.rebuild(snap)
            assert decoded(view) == decoded(fresh_index)
            for req in REQS:
                if req.key == view.key:
                    assert view.mask(req).tolist() == fresh_index.mask(req).tolist()
            for values in ({"a"}, {"b", "c"}, {"a", "nowhere"}):
                assert (
                    view.rows_of(frozenset(values)).tolist()
                    == fresh_index.rows_of(frozenset(values)).tolist()
                )


@settings(max_examples=150, deadline=None)
@given(clusters(), volume_lists, st.data())
def test_volume_views_follow_rows_moved_in_place(
    cluster: tuple[VolumeObjects, list[Obj], list[Obj], list[Obj]], vols: list[Obj], data: st.DataObject
) -> None:
    store, node_objs, pods, late = cluster
    infos = [
        new_node(n, [p for p in pods if p["spec"]["nodeName"] == n["metadata"]["name"]]) for n in node_objs
    ]
    snap = Snapshot(infos, (*BASE_RESOURCES, *LIMIT_KEYS))  # the new nodes' limits have columns
    plugins = [
        VolumeRestrictions(),
        VolumeZone(store),
        NodeVolumeLimits(store),
        EBSLimits(store),
        GCEPDLimits(store),
        AzureDiskLimits(store),
        CinderLimits(store),
    ]
    pod = vpod(volumes=vols)
    for plugin in plugins:  # the views are made, and rows' derived volumes kept
        statuses(plugin, pod, snap)
    for key in ZONE_KEYS:
        term_rows(snap, (REQS[0], Req(key, IN, frozenset({"b"}))))  # label indexes with their row sets
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 4))):
        if snap.n and data.draw(st.booleans()):  # a pod with volumes on an existing node
            name = data.draw(st.sampled_from(snap.names))
            add_pods(snap, [vpod(f"s{step}", node=name, volumes=data.draw(volume_lists))], step + 1)
        added = []
        for j in range(data.draw(st.integers(0, 2))):
            name = f"m{step}-{j}"
            on = [
                vpod(f"{name}-{k}", node=name, volumes=data.draw(volume_lists))
                for k in range(data.draw(st.integers(0, 2)))
            ]
            added.append(new_node(data.draw(nodes(name)), on, step + 1))
        move(snap, added, rng, data.draw(st.integers(0, 2)))
        check_views(snap, store)
        for plugin in plugins:
            statuses(plugin, pod, snap)
        for key in ZONE_KEYS:
            index = label_index(snap, key)
            assert index.codes.shape == (snap.n,)
    add_pods(snap, [p for p in late if p["spec"]["nodeName"] in snap.index], 9)
    check_views(snap, store)
