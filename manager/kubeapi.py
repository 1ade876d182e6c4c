"""What every manager gateway shares (manager.gateway for the controllers, manager.webhook.gateway for
the admission webhooks): ``GatewayError``, the one boundary ``call`` where an API response becomes the
JSON object it holds, and ``SharedInformer`` (an informer whose events fan out to many handler sets,
with indexes). Only gateway modules import this one: they are the manager's only API callers.
Imports: the standard library, apis.kubeobjects, kube.informer.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from apis.kubeobjects import KubeObject
from kube.informer import Handler, Informer, object_key

__all__ = ["REQUEST_TIMEOUT", "GatewayError", "SharedInformer", "call"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)
REQUEST_TIMEOUT = 10.0


class GatewayError(RuntimeError):
    """An API call failed: ``op`` (create/update/…), ``kind`` and ``name`` of the object, HTTP ``status``
    (``None`` for transport errors) and the underlying ``cause``."""

    def __init__(self, op: str, kind: str, name: str, status: int | None, cause: BaseException) -> None:
        reason = getattr(cause, "reason", "") or type(cause).__name__
        detail = _message(cause)
        super().__init__(
            f"{op} {kind} {name}: " + (f"HTTP {status} {reason}" if status else reason) + f": {detail}"
        )
        self.op, self.kind, self.name, self.status, self.cause = op, kind, name, status, cause

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


def _message(cause: BaseException) -> str:
    body = getattr(cause, "body", None)
    if isinstance(body, bytes | str):
        try:
            decoded = json.loads(body)
            if isinstance(decoded, dict) and decoded.get("message"):
                return str(decoded["message"])
        except ValueError:
            pass
    return str(cause)[:300]


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status", None)
    return status if isinstance(status, int) and status > 0 else None


class SharedInformer(Generic[T]):
    """An ``Informer[T]`` whose events fan out to any number of handler sets, with optional indexes.

    ``indexers`` maps an index name to a function giving an object's index values."""

    def __init__(
        self,
        list_func: Callable[..., Any],
        *,
        kwargs: Mapping[str, Any] | None = None,
        name: str,
        key_filter: Callable[[str], bool] | None = None,
        indexers: Mapping[str, Callable[[T], list[str]]] | None = None,
        resync_seconds: float = 0,
    ) -> None:
        self.name = name
        self._filter = key_filter
        self._handlers: list[tuple[Handler | None, Handler | None, Handler | None]] = []
        self._indexers = dict(indexers or {})
        self._index: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._values: dict[str, dict[str, list[str]]] = {n: {} for n in self._indexers}
        self._lock = threading.RLock()
        self.informer: Informer[T] = Informer(
            list_func,
            kwargs=kwargs,
            name=name,
            resync_seconds=resync_seconds,
            on_add=self._on_add,
            on_update=self._on_update,
            on_delete=self._on_delete,
        )

    def add_handlers(
        self,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
    ) -> None:
        with self._lock:
            self._handlers.append((on_add, on_update, on_delete))

    def start(self, stop: threading.Event) -> threading.Thread:
        return self.informer.start(stop)

    @property
    def has_synced(self) -> bool:
        return self.informer.has_synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self.informer.has_synced.wait(timeout)

    def get(self, key: str) -> T | None:
        if self._filter is not None and not self._filter(key):
            return None
        return self.informer.get(key)

    def keys(self) -> list[str]:
        return [k for k in self.informer.store() if self._filter is None or self._filter(k)]

    def by_index(self, index: str, value: str) -> list[T]:
        with self._lock:
            keys = list(self._index[index].get(value, ()))
        return [o for k in keys if (o := self.informer.get(k)) is not None]

    # -- delivery (on the informer's thread) ---------------------------------------------------------------

    def _visible(self, obj: T) -> bool:
        return self._filter is None or self._filter(object_key(obj))

    def _reindex(self, key: str, obj: T | None) -> None:
        with self._lock:
            for name, fn in self._indexers.items():
                for value in self._values[name].pop(key, []):
                    bucket = self._index[name].get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del self._index[name][value]
                if obj is not None:
                    values = [v for v in fn(obj) if v]
                    self._values[name][key] = values
                    for value in values:
                        self._index[name].setdefault(value, set()).add(key)

    def _dispatch(self, slot: int, *objs: T) -> None:
        with self._lock:
            handlers = [h[slot] for h in self._handlers]
        for handler in handlers:
            if handler is None:
                continue
            try:
                handler(*objs)
            except Exception:
                log.exception("informer %s: handler failed", self.name)

    def _on_add(self, obj: T) -> None:
        self._reindex(object_key(obj), obj)
        if self._visible(obj):
            self._dispatch(0, obj)

    def _on_update(self, old: T, new: T) -> None:
        self._reindex(object_key(new), new)
        if self._visible(new):
            self._dispatch(1, old, new)

    def _on_delete(self, obj: T) -> None:
        self._reindex(object_key(obj), None)
        if self._visible(obj):
            self._dispatch(2, obj)


def call(op: str, kind: str, name: str, method: Callable[..., Any], *args: Any, **kw: Any) -> dict[str, Any]:
    """``method``'s response as the JSON object it holds (``{}`` when empty); any failure leaves as a
    ``GatewayError``. The gateways' public methods give the result its apis.kubeobjects type."""
    try:
        resp = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kw)
        data = resp.data
    except Exception as e:
        raise GatewayError(op, kind, name, _status(e), e) from e
    if not data:
        return {}
    try:
        decoded = json.loads(data)
    except ValueError as e:
        raise GatewayError(op, kind, name, None, e) from e
    return decoded if isinstance(decoded, dict) else {}
