"""manager.webhook.admission: AdmissionReview v1 and v1beta1 in and out (uid and apiVersion echoed), the
status codes of allowed / denied / errored answers, the base64 JSONPatch, and json_patch checked by
applying it with a small RFC 6902 applier written here."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.webhook.admission import (
    AdmissionResponse,
    ReviewError,
    allowed,
    decode_review,
    denied,
    errored,
    json_patch,
    patched,
    review,
)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add / remove / replace (what json_patch emits), strict about missing targets."""
    doc = copy.deepcopy(doc)
    for op in ops:
        path = op["path"]
        if path == "":
            assert op["op"] == "replace"
            doc = copy.deepcopy(op["value"])
            continue
        assert path.startswith("/")
        *parents, last = [_unescape(t) for t in path[1:].split("/")]
        target = doc
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] == "add":
                assert 0 <= index <= len(target)
                target.insert(index, copy.deepcopy(op["value"]))
            elif op["op"] == "remove":
                del target[index]
            else:
                assert 0 <= index < len(target)
                target[index] = copy.deepcopy(op["value"])
        else:
            if op["op"] == "add":
                target[last] = copy.deepcopy(op["value"])
            elif op["op"] == "remove":
                del target[last]
            else:
                assert last in target, f"replace of a missing member {path}"
                target[last] = copy.deepcopy(op["value"])
    return doc


def _review(version: str, **request: Any) -> bytes:
    body = {"uid": "u-1", "operation": "CREATE", **request}
    return json.dumps({"apiVersion": version, "kind": "AdmissionReview", "request": body}).encode()


POD = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}}, "spec": {"containers": []}}


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_a_review_round_trips_in_the_version_it_came_in(version: str) -> None:
    req = decode_review(
        _review(
            version,
            kind={"group": "", "version": "v1", "kind": "Pod"},
            resource={"group": "", "version": "v1", "resource": "pods"},
            name="p", namespace="ns", object=POD, dryRun=True, userInfo={"username": "alice"},
        )
    )  # fmt: skip
    assert (req.uid, req.api_version, req.operation) == ("u-1", version, "CREATE")
    assert (req.kind, req.group, req.version, req.resource, req.sub_resource) == ("Pod", "", "v1", "pods", "")
    assert (req.name, req.namespace, req.object, req.old_object) == ("p", "ns", POD, None)
    assert req.dry_run and req.username == "alice"
    answer = review(req.api_version, req.uid, allowed())
    assert answer == {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "response": {"uid": "u-1", "allowed": True, "status": {"code": 200}},
    }


def test_denied_errored_and_patched_answers() -> None:
    no = review("admission.k8s.io/v1", "u", denied("QoS class LS needs priority koord-prod"))
    assert no["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "QoS class LS needs priority koord-prod"},
    }
    err = review("admission.k8s.io/v1", "u", errored(500, "priorityclasses koord-batch not found"))
    assert err["response"]["status"] == {"code": 500, "message": "priorityclasses koord-batch not found"}
    assert err["response"]["allowed"] is False
    ops = [{"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"}]
    yes = review("admission.k8s.io/v1beta1", "u", patched(ops))["response"]
    assert yes["patchType"] == "JSONPatch" and yes["allowed"] is True
    assert json.loads(base64.b64decode(yes["patch"])) == ops
    assert "patch" not in review("admission.k8s.io/v1", "u", patched([]))["response"]
    warned = review("admission.k8s.io/v1", "u", AdmissionResponse(True, warnings=("careful",)))
    assert warned["response"]["warnings"] == ["careful"]
    with pytest.raises(ValueError, match="no patch"):
        AdmissionResponse(False, 403, patch=tuple(ops))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}', "apiVersion"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}', "kind 'Pod'"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', "uid"),
        (_review("admission.k8s.io/v1", object=[1]), r"request\.object"),
    ],
)
def test_what_is_not_an_admission_review_is_named(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        decode_review(body)


def test_json_patch_escapes_keys_and_changes_only_what_changed() -> None:
    before: dict[str, Any] = {
        "metadata": {"labels": {"app": "x", "a~b": "1"}, "name": "p"},
        "spec": {"priority": 0},
    }
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["koordinator.sh/qosClass"] = "BE"
    del after["metadata"]["labels"]["a~b"]
    after["spec"]["priority"] = 5000
    ops = json_patch(before, after)
    assert ops == [
        {"op": "remove", "path": "/metadata/labels/a~0b"},
        {"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"},
        {"op": "replace", "path": "/spec/priority", "value": 5000},
    ]
    assert apply_patch(before, ops) == after
    assert json_patch(before, copy.deepcopy(before)) == []


def test_json_patch_tells_json_types_apart_and_handles_lists_and_roots() -> None:
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"x": 1}, {"x": True}), ({"x": 1}, {"x": 1.0}), ({"x": None}, {"x": 0})
    ]  # fmt: skip
    for before, after in pairs:
        ops = json_patch(before, after)
        assert ops == [{"op": "replace", "path": "/x", "value": after["x"]}]
        assert json.dumps(apply_patch(before, ops)) == json.dumps(after)
    grow = json_patch({"c": [{"n": 1}]}, {"c": [{"n": 2}, {"n": 3}, {"n": 4}]})
    assert grow == [
        {"op": "replace", "path": "/c/0/n", "value": 2},
        {"op": "add", "path": "/c/1", "value": {"n": 3}},
        {"op": "add", "path": "/c/2", "value": {"n": 4}},
    ]
    shrink = json_patch({"c": [1, 2, 3]}, {"c": [1]})
    assert shrink == [{"op": "remove", "path": "/c/2"}, {"op": "remove", "path": "/c/1"}]
    assert apply_patch({"c": [1, 2, 3]}, shrink) == {"c": [1]}
    assert json_patch([1], {"a": 1}) == [{"op": "replace", "path": "", "value": {"a": 1}}]


def test_the_patch_is_a_copy_not_the_after_document() -> None:
    after: dict[str, Any] = {"metadata": {"labels": {"a": "b"}}}
    ops = json_patch({}, after)
    after["metadata"]["labels"]["a"] = "changed"
    assert ops[0]["value"] == {"labels": {"a": "b"}}


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.5, 1.0])
    | st.sampled_from(["", "a", "b"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "b/c", "~d", "e~1", "koordinator.sh/qosClass"]), children, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_applying_json_patch_gives_the_after_document(before: Any, after: Any) -> None:
    result = apply_patch(before, json_patch(before, after))
    assert json.dumps(result, sort_keys=True) == json.dumps(after, sort_keys=True)
