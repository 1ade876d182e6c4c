"""Recording core/v1 Events about objects, best effort: failures are logged, never raised, so an
unavailable API server cannot break the caller. An event identical to one recorded within the
aggregation window (same object, type, reason and message; 10 minutes by default, measured from its
last occurrence) is not created again: the existing Event's ``count`` and ``lastTimestamp`` are
patched instead, as client-go's event correlator does. Events are remembered for aggregation only
while they can still be aggregated (the window) and at most ``max_cache`` of them, so events about
objects that come and go (pods) leave nothing behind once their window has passed.

Imports: the kubernetes client and the standard library only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes import client
from kubernetes.client.exceptions import ApiException

__all__ = ["EVENT_TYPES", "EventRecorder"]

log = logging.getLogger(__name__)

EVENT_TYPES: Final = ("Normal", "Warning")
AGGREGATION_WINDOW: Final = 600.0
REQUEST_TIMEOUT: Final = 5.0
_MAX_NAME = 253


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    last_seen: float


def _time(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Creates Events with ``source.component = component`` (and ``source.host`` when given).

    ``api`` is a ``kubernetes.client.ApiClient`` (or a ``CoreV1Api``). ``obj`` is the object the
    event is about, as Kubernetes JSON (it needs ``kind``, ``apiVersion`` and ``metadata``); events
    about cluster-scoped objects go to the ``default`` namespace, as in client-go. Thread-safe;
    calls are synchronous with a short request timeout.
    """

    def __init__(
        self,
        api: Any,
        component: str,
        *,
        host: str = "",
        window: float = AGGREGATION_WINDOW,
        max_cache: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._core: Any = api if hasattr(api, "create_namespaced_event") else client.CoreV1Api(api)
        self.component = component
        self.host = host
        self.window = window
        self._max_cache = max_cache
        self._clock = clock
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an event about ``obj``; never raises."""
        try:
            if type not in EVENT_TYPES:
                raise ValueError(f"event type {type!r} is not one of {EVENT_TYPES}")
            ref = _reference(obj)
            namespace = ref.get("namespace") or "default"
            key = (
                ref.get("uid", ""),
                ref.get("kind", ""),
                ref.get("apiVersion", ""),
                namespace,
                ref.get("name", ""),
                type,
                reason,
                message,
            )
            with self._lock:  # one at a time, so identical concurrent events are counted, not doubled
                self._prune_locked()
                seen = self._seen.get(key)
                if seen is not None and self._clock() - seen.last_seen < self.window and self._bump(seen):
                    self._seen.move_to_end(key)
                    return
                self._seen.pop(key, None)
                name = self._create(ref, namespace, type, reason, message)
                self._seen[key] = _Seen(name, namespace, 1, self._clock())
                self._prune_locked()
        except Exception as e:
            log.warning(
                "event %s %s about %s not recorded: %s",
                *(type, reason, _describe_obj(obj), _describe(e)),
            )

    def _prune_locked(self) -> None:
        """Forget what can no longer be aggregated: entries past the window (the map is ordered by last
        occurrence, oldest first), then the oldest beyond ``max_cache``. Events about objects that come
        and go (pods) would otherwise stay here until ``max_cache`` others pushed them out."""
        seen, cutoff = self._seen, self._clock() - self.window
        while seen and next(iter(seen.values())).last_seen <= cutoff:
            seen.popitem(last=False)
        while len(seen) > self._max_cache:
            seen.popitem(last=False)

    def __len__(self) -> int:
        """Events remembered for aggregation."""
        with self._lock:
            return len(self._seen)

    def _bump(self, seen: _Seen) -> bool:
        """Count one more occurrence on the existing Event; False if it is gone (create anew)."""
        body = {"count": seen.count + 1, "lastTimestamp": _time()}
        try:
            resp = self._core.patch_namespaced_event(
                seen.name, seen.namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
            _release(resp)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        seen.count += 1
        seen.last_seen = self._clock()
        return True

    def _create(self, ref: dict[str, Any], namespace: str, type: str, reason: str, message: str) -> str:
        now = datetime.now(UTC)
        suffix = f".{time.time_ns():x}"
        name = str(ref.get("name") or "event")[: _MAX_NAME - len(suffix)] + suffix
        source = {"component": self.component}
        if self.host:
            source["host"] = self.host
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "source": source,
            "firstTimestamp": _time(now),
            "lastTimestamp": _time(now),
            "count": 1,
        }
        resp = self._core.create_namespaced_event(
            namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        created: dict[str, Any] = json.loads(resp.data)
        return str(created["metadata"]["name"])


def _release(resp: Any) -> None:
    """Read a raw response to its end and give its connection back to the pool (unread, the connection
    is dropped with the response, and the next request opens a new one)."""
    read = getattr(resp, "read", None)
    if callable(read):
        read()
    release = getattr(resp, "release_conn", None)
    if callable(release):
        release()


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ObjectReference (involvedObject) of a Kubernetes JSON object."""
    meta = obj.get("metadata") or {}
    ref = {
        "kind": obj.get("kind"),
        "apiVersion": obj.get("apiVersion"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if not ref["name"]:
        raise ValueError("object has no metadata.name")
    return {k: v for k, v in ref.items() if v}


def _describe_obj(obj: Mapping[str, Any]) -> str:
    try:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{meta.get('name', '?')}"
    except Exception:
        return repr(obj)[:100]


def _describe(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"API error {e.status} {e.reason}"
    return f"{type(e).__name__}: {e}"
