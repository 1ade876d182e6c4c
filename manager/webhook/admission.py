"""Admission webhooks' wire format (pure): decoding an AdmissionReview (admission.k8s.io v1 and v1beta1,
whichever the webhook configuration's ``admissionReviewVersions`` made the API server send), building
the review that answers it (the request's uid and apiVersion echoed), and ``json_patch``, the RFC 6902
diff a mutating webhook returns.

A webhook is a ``Handler``: an ``AdmissionRequest`` in, an ``AdmissionResponse`` out (``allowed``,
``denied``, ``errored``, ``patched``). The responses carry the status codes controller-runtime's
admission package uses (200 allowed, 403 denied with reason Forbidden, the given code for errors), so
the API server reports our refusals as it reports upstream's.
Imports: the standard library only.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "API_VERSIONS",
    "AdmissionRequest",
    "AdmissionResponse",
    "Handler",
    "ReviewError",
    "allowed",
    "decode_review",
    "denied",
    "errored",
    "json_patch",
    "patched",
    "review",
]

V1 = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"
API_VERSIONS = (V1, V1BETA1)
JSON_PATCH = "JSONPatch"


class ReviewError(ValueError):
    """The body is not an AdmissionReview request this server can answer (the server says 400)."""


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` the webhooks read; ``raw`` is the whole request.
    ``object`` / ``old_object`` are the JSON objects as sent (read-only; ``None`` when absent: no
    ``object`` on DELETE, no ``old_object`` on CREATE)."""

    uid: str
    api_version: str
    operation: str
    kind: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    username: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class AdmissionResponse:
    """A webhook's answer. ``code``/``reason``/``message`` become the response's ``status``; ``patch``
    (RFC 6902 operations) is only allowed on an allowed answer."""

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.patch and not self.allowed:
            raise ValueError("a denied admission carries no patch")


Handler = Callable[[AdmissionRequest], AdmissionResponse]


def allowed(message: str = "") -> AdmissionResponse:
    return AdmissionResponse(True, 200, "", message)


def denied(message: str, code: int = 403) -> AdmissionResponse:
    """A refusal; 403 carries the reason Forbidden, as controller-runtime's ``Denied``."""
    return AdmissionResponse(False, code, "Forbidden" if code == 403 else "", message)


def errored(code: int, message: str) -> AdmissionResponse:
    """The webhook could not decide (controller-runtime's ``Errored``): refused with ``code``."""
    return AdmissionResponse(False, code, "", message)


def patched(ops: Sequence[Mapping[str, Any]], message: str = "") -> AdmissionResponse:
    """Allowed with the JSONPatch ``ops`` (plain allowed when there are none)."""
    return AdmissionResponse(True, 200, "", message, tuple(ops))


# -- decoding -------------------------------------------------------------------------------------------


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _member(request: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = request.get(key)
    return value if isinstance(value, dict) else {}


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key} is not a JSON object")
    return value


def decode_review(body: bytes | str) -> AdmissionRequest:
    """The request of an AdmissionReview (v1 or v1beta1); ``ReviewError`` naming what is wrong."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise ReviewError(f"body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ReviewError("body is not a JSON object")
    version = doc.get("apiVersion")
    if version not in API_VERSIONS:
        raise ReviewError(f"apiVersion {version!r} is not one of {', '.join(API_VERSIONS)}")
    if doc.get("kind") != "AdmissionReview":
        raise ReviewError(f"kind {doc.get('kind')!r} is not AdmissionReview")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing")
    kind, resource, user = (_member(request, k) for k in ("kind", "resource", "userInfo"))
    return AdmissionRequest(
        uid=uid,
        api_version=str(version),
        operation=_str(request.get("operation")),
        kind=_str(kind.get("kind")),
        group=_str(kind.get("group")),
        version=_str(kind.get("version")),
        resource=_str(resource.get("resource")),
        sub_resource=_str(request.get("subResource")),
        name=_str(request.get("name")),
        namespace=_str(request.get("namespace")),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=request.get("dryRun") is True,
        username=_str(user.get("username")),
        raw=request,
    )


# -- the answer -----------------------------------------------------------------------------------------


def review(api_version: str, uid: str, response: AdmissionResponse) -> dict[str, Any]:
    """The AdmissionReview answering request ``uid`` in the request's own ``api_version``."""
    status: dict[str, Any] = {"code": response.code}
    if response.reason:
        status["reason"] = response.reason
    if response.message:
        status["message"] = response.message
    body: dict[str, Any] = {"uid": uid, "allowed": response.allowed, "status": status}
    if response.patch:
        encoded = json.dumps([dict(op) for op in response.patch], separators=(",", ":")).encode()
        body["patchType"] = JSON_PATCH
        body["patch"] = base64.b64encode(encoded).decode()
    if response.warnings:
        body["warnings"] = list(response.warnings)
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": body}


# -- RFC 6902 diff --------------------------------------------------------------------------------------


def pointer_token(key: str) -> str:
    """A JSON Pointer reference token (RFC 6901): ``~`` → ``~0``, then ``/`` → ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def _kind(value: object) -> str:
    """The JSON type, telling apart what Python compares equal but JSON does not (True, 1, 1.0)."""
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _equal(a: Any, b: Any) -> bool:
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "object":
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if kind == "array":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _plain(value: Any) -> Any:
    """A deep copy as plain dicts and lists (what json.dumps writes)."""
    kind = _kind(value)
    if kind == "object":
        return {str(k): _plain(v) for k, v in value.items()}
    if kind == "array":
        return [_plain(v) for v in value]
    return copy.deepcopy(value)


def _diff(before: Any, after: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if _equal(before, after):
        return
    kind = _kind(before)
    if kind == "object" and _kind(after) == "object":
        for key in before:
            if key not in after:
                ops.append({"op": "remove", "path": f"{path}/{pointer_token(str(key))}"})
        for key, value in after.items():
            child = f"{path}/{pointer_token(str(key))}"
            if key in before:
                _diff(before[key], value, child, ops)
            else:
                ops.append({"op": "add", "path": child, "value": _plain(value)})
        return
    if kind == "array" and _kind(after) == "array":
        common = min(len(before), len(after))
        for i in range(common):  # the same index on both sides: each element diffs in place
            _diff(before[i], after[i], f"{path}/{i}", ops)
        for i in range(common, len(after)):
            ops.append({"op": "add", "path": f"{path}/{i}", "value": _plain(after[i])})
        for i in reversed(range(common, len(before))):  # from the end: earlier indices stay put
            ops.append({"op": "remove", "path": f"{path}/{i}"})
        return
    ops.append({"op": "replace", "path": path, "value": _plain(after)})


def json_patch(before: Any, after: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations that turn the JSON document ``before`` into ``after`` (add, remove and
    replace; keys are escaped as JSON Pointer tokens, so ``koordinator.sh/qosClass`` is
    ``koordinator.sh~1qosClass``). Applied in order they give exactly ``after``; empty when equal."""
    ops: list[dict[str, Any]] = []
    _diff(before, after, "", ops)
    return ops
