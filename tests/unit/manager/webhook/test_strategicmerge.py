"""manager.webhook.strategicmerge: upstream apimachinery's raw strategic-merge cases (their schema, their
expected results, list order included), then the Pod's patch metadata and the edge cases a profile
patch can hit (directives, nulls, errors instead of Go's panics, inputs untouched)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from manager.webhook.strategicmerge import PatchError, strategic_merge
from manager.webhook.strategicmerge_meta import Field, Schema
from manager.webhook.strategicmerge_order import aliased_view, go_cap

CASES = (
    Path(__file__).resolve().parents[3]
    / "data"
    / "upstream"
    / "apimachinery-strategicpatch"
    / "raw-cases.json"
)
UPSTREAM: list[dict[str, Any]] = json.loads(CASES.read_text())

# The test struct of apimachinery's tests (MergeItem, RetainKeysMergeItem) as patch metadata.
MERGE_ITEM: dict[str, Field] = {}
RETAIN_KEYS_ITEM: dict[str, Field] = {}
MERGE_ITEM.update(
    mergingList=Field("merge", "name", MERGE_ITEM),
    nonMergingList=Field(schema=MERGE_ITEM),
    mergingIntList=Field("merge"),
    mergeItemPtr=Field("merge", "name", MERGE_ITEM),
    replacingItem=Field("replace"),
    retainKeysMap=Field(schema=RETAIN_KEYS_ITEM),
    retainKeysMergingList=Field("merge", "name", MERGE_ITEM),
)
RETAIN_KEYS_ITEM.update(
    mergingIntList=Field("merge"),
    mergingList=Field("merge", "name", MERGE_ITEM),
    nonMergingList=Field(schema=MERGE_ITEM),
)


def test_there_are_upstream_cases() -> None:
    assert len(UPSTREAM) >= 30


@pytest.mark.parametrize("case", UPSTREAM, ids=[c["description"] for c in UPSTREAM])
def test_upstream_raw_case(case: dict[str, Any]) -> None:
    schema: Schema = MERGE_ITEM
    assert strategic_merge(case["original"], case["patch"], schema) == case["expected"]


def test_go_slice_capacity_and_the_aliased_live_list() -> None:
    assert [go_cap(n) for n in (0, 1, 2, 3, 5, 8, 9, 256, 257)] == [0, 1, 2, 4, 8, 8, 16, 256, 512]
    live = [{"name": 1}, {"name": 2}, {"name": 4}]  # capacity 4: one append lands in the old array
    patch = [{"name": 3}, {"name": 1, "$patch": "delete"}]
    assert aliased_view(live, patch, "name") == [{"name": 2}, {"name": 4}, {"name": 3}]
    assert live == [{"name": 1}, {"name": 2}, {"name": 4}]


# --- the Pod ----------------------------------------------------------------------------------------
POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"app": "a", "tier": "web"}, "finalizers": ["a", "b"]},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "args": ["x", "y"],
            }
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}


def merged(patch: Any) -> dict[str, Any]:
    return strategic_merge(POD, patch)


def test_maps_merge_and_null_deletes() -> None:
    out = merged({"metadata": {"labels": {"tier": None, "new": "x"}, "annotations": {"a": "b"}}})
    assert out["metadata"]["labels"] == {"app": "a", "new": "x"}
    assert out["metadata"]["annotations"] == {"a": "b"}
    assert merged({"spec": {"tolerations": None}})["spec"].keys() == {"containers", "volumes"}


def test_containers_and_env_merge_by_name() -> None:
    out = merged({"spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "3"}]}]}})
    (main,) = out["spec"]["containers"]
    assert main["image"] == "busybox"
    assert main["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]  # live order kept


def test_a_new_container_goes_first() -> None:
    out = merged({"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "main"]


def test_lists_without_a_merge_strategy_are_replaced() -> None:
    out = merged({"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}})
    assert out["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]
    out = merged({"spec": {"containers": [{"name": "main", "args": ["z"]}]}})
    assert out["spec"]["containers"][0]["args"] == ["z"]


def test_finalizers_are_a_union() -> None:
    assert merged({"metadata": {"finalizers": ["c", "a"]}})["metadata"]["finalizers"] == ["c", "a", "b"]
    deleted = merged({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert deleted["metadata"]["finalizers"] == ["b"]


def test_patch_directives() -> None:
    assert merged({"metadata": {"labels": {"$patch": "replace", "only": "this"}}})["metadata"]["labels"] == {
        "only": "this"
    }
    assert merged({"metadata": {"labels": {"$patch": "delete"}}})["metadata"]["labels"] == {}
    out = merged({"spec": {"containers": [{"name": "main", "$patch": "delete"}]}})
    assert out["spec"]["containers"] == []
    out = merged({"spec": {"containers": [{"name": "only"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "only"}]
    assert merged({"$patch": "replace", "metadata": {"name": "q"}}) == {"metadata": {"name": "q"}}


def test_retain_keys_on_a_volume() -> None:
    patch = {
        "spec": {
            "volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}]
        }
    }
    assert merged(patch)["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/x"}}]


def test_set_element_order() -> None:
    patch = {
        "spec": {"containers": [{"name": "main", "$setElementOrder/env": [{"name": "B"}, {"name": "A"}]}]}
    }
    assert [e["name"] for e in merged(patch)["spec"]["containers"][0]["env"]] == ["B", "A"]


def test_new_values_lose_their_nulls_and_directives() -> None:
    out = merged({"spec": {"nodeSelector": {"a": "b", "c": None}, "affinity": {"x": {"$patch": "delete"}}}})
    assert out["spec"]["nodeSelector"] == {"a": "b"}
    assert out["spec"]["affinity"] == {}


def test_inputs_are_not_modified() -> None:
    before = copy.deepcopy(POD)
    patch = {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "$patch": "delete"}]}]}}
    kept = copy.deepcopy(patch)
    out = merged(patch)
    assert before == POD
    assert patch == kept
    assert out["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ([], "invalid JSON document"),
        ("x", "invalid JSON document"),
        ({"metadata": {"labels": {"$patch": "merge"}}}, "unknown patch type: merge"),
        ({"spec": {"containers": [{"image": "x"}]}}, "does not contain declared merge key: name"),
        ({"spec": {"containers": [{"name": "main", "$patch": "merge"}]}}, "merging lists cannot yet"),
        ({"spec": {"containers": ["main"]}}, "list element types are not identical"),
        ({"spec": {"containers": [None]}}, "null"),
        ({"spec": {"containers": [{"name": {"a": 1}}]}}, "uncomparable"),
        ({"metadata": {"$retainKeys": "name"}}, "invalid patch format of retainKeys"),
        ({"metadata": {"$retainKeys": ["name"], "labels": {}}}, "invalid patch format of retainKeys"),
        (
            {"metadata": {"$deleteFromPrimitiveListX/finalizers": ["a"]}},
            "invalid patch format of primitive list",
        ),
        (
            {"spec": {"$setElementOrder/containers": [{"name": "x"}], "containers": [{"name": "main"}]}},
            "order",
        ),
    ],
)
def test_errors(patch: Any, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        merged(patch)
