"""`VolumeBinderAPI` over the API server (docs/rules/scheduler-volumes.md#prebind): PUT of a PV and of a
PVC, GET of a PVC, as plain JSON (raw responses, read and released so connections return to the pool).
An API error becomes VolumeAPIError with the server's message.
Imports: standard library, kubernetes client, scheduler.plugins.volume.binderapi.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.plugins.volume.binderapi import VolumeAPIError

Obj = Mapping[str, Any]


def _message(e: ApiException) -> str:
    try:
        body = json.loads(e.body or "")
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return f"{e.status} {e.reason}"


def _json(resp: Any) -> dict[str, Any]:
    try:
        data = resp.read()
    finally:
        resp.release_conn()
    decoded = json.loads(data)
    if not isinstance(decoded, dict):
        raise VolumeAPIError(f"unexpected answer: {decoded!r}")
    return decoded


class KubeVolumeBinderAPI:
    """Over a kubernetes.client.ApiClient."""

    def __init__(self, api: Any) -> None:
        self.core = client.CoreV1Api(api)

    def update_pv(self, pv: Obj) -> Obj:
        try:
            body: Any = dict(pv)  # plain JSON; the client serialises dicts as they are
            return _json(
                self.core.replace_persistent_volume(str(pv["metadata"]["name"]), body, _preload_content=False)
            )
        except ApiException as e:
            raise VolumeAPIError(_message(e)) from None

    def update_pvc(self, pvc: Obj) -> Obj:
        meta = pvc["metadata"]
        body: Any = dict(pvc)
        try:
            resp = self.core.replace_namespaced_persistent_volume_claim(
                str(meta["name"]), str(meta.get("namespace") or "default"), body, _preload_content=False
            )
            return _json(resp)
        except ApiException as e:
            raise VolumeAPIError(_message(e)) from None

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        try:
            resp = self.core.read_namespaced_persistent_volume_claim(name, namespace, _preload_content=False)
            return _json(resp)
        except ApiException as e:
            if e.status == 404:
                return None
            raise VolumeAPIError(_message(e)) from None
