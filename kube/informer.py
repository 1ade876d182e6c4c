"""The list+watch informer: LIST a resource (recording its resourceVersion and reconciling the local
store: adds, updates and deletes relative to what was known), then WATCH from that resourceVersion
with bookmarks. A 410 Gone / "too old resource version" relists at once; connection and server errors
relist after a capped exponential backoff (0.2 s doubling to 10 s). A periodic resync re-delivers
``on_update(obj, obj)`` for every stored object. Objects are plain Kubernetes JSON dicts (camelCase
keys), read raw with ``_preload_content=False``; handlers run one at a time, on the informer's threads,
and must treat the dicts they get as read-only. ``Informer[T]`` is typed by the object it watches
(``apis.kubeobjects``: ``Informer[Pod]``, ``Informer[Node]``, ...): decoding the JSON is where it
becomes a ``T``, unchecked (the API server's schema is trusted, readers still use ``.get``).

Works with any client whose list methods take the kubernetes client's keyword arguments and return a
urllib3 response (the kubernetes client, or the lean ``kube.rest`` client); an API error is any exception
with an integer ``status`` attribute. Imports: the standard library and apis.{kubeobjects,waits}.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

from apis.kubeobjects import KubeObject
from apis.waits import clamp_seconds

__all__ = ["Handler", "Informer", "object_key"]

log = logging.getLogger(__name__)

Handler = Callable[..., None]
T = TypeVar("T", bound=KubeObject)

BACKOFF_INITIAL = 0.2
BACKOFF_MAX = 10.0
LIST_PAGE_SIZE = 500
CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (HTTP 410 Gone): relist now."""


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _rv(obj: Mapping[str, Any]) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv is not None else None


def _uid(obj: Mapping[str, Any]) -> object:
    return (obj.get("metadata") or {}).get("uid")


def _lines(resp: Any) -> Iterator[str]:
    """The newline-delimited JSON lines of a streaming watch response, as they arrive."""
    buf = bytearray()
    for chunk in resp.stream(amt=None, decode_content=False):
        buf.extend(chunk if isinstance(chunk, bytes | bytearray) else str(chunk).encode())
        while (nl := buf.find(b"\n")) != -1:
            line, buf = bytes(buf[:nl]), buf[nl + 1 :]
            if line.strip():
                yield line.decode("utf-8", errors="replace")


def _abort(resp: Any) -> None:
    """Unblock a thread reading ``resp`` (a urllib3 response) by shutting its socket down."""
    try:
        resp.shutdown()
        return
    except Exception:  # older urllib3, or already released: fall back to the raw socket
        pass
    try:
        import socket

        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass


class _Backoff:
    def __init__(self, initial: float = BACKOFF_INITIAL, cap: float = BACKOFF_MAX) -> None:
        self.initial, self.cap = initial, cap
        self._next = initial
        self.expired_streak = 0  # 410s in a row with no progress between them

    def reset(self) -> None:
        self._next = self.initial
        self.expired_streak = 0

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay


class Informer(Generic[T]):
    """Keeps a local store of the objects ``list_func(**kwargs)`` returns, current through a watch,
    and tells handlers about every change.

    ``list_func`` is a kubernetes client list method that supports ``watch=True`` (for example
    ``CoreV1Api(api).list_namespaced_pod`` with ``kwargs={"namespace": ns, "field_selector": ...}``,
    ``CoreV1Api(api).list_node``, or ``CustomObjectsApi(api).list_cluster_custom_object`` with
    ``kwargs={"group": ..., "version": ..., "plural": ...}``). Handlers: ``on_add(obj)``,
    ``on_update(old, new)``, ``on_delete(obj)`` (the last known state when a relist finds the object
    gone). A relist delivers an update only for objects whose resourceVersion changed; the resync
    (every ``resync_seconds`` when > 0) delivers ``on_update(obj, obj)`` for all of them. Handler
    exceptions are logged and do not stop the informer.
    """

    def __init__(
        self,
        list_func: Callable[..., Any],
        *,
        kwargs: Mapping[str, Any] | None = None,
        resync_seconds: float = 0,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
        name: str = "",
        watch_timeout: int = 300,
    ) -> None:
        self._list_func = list_func
        self._kwargs = dict(kwargs or {})
        self.resync_seconds = resync_seconds
        self._on_add = on_add
        self._on_update = on_update
        self._on_delete = on_delete
        self.name = name or getattr(list_func, "__name__", "informer")
        self.watch_timeout = max(1, int(watch_timeout))
        self.has_synced = threading.Event()
        self._store: dict[str, T] = {}
        self._lock = threading.RLock()  # the store, and delivery: handlers never run concurrently
        self._resp_lock = threading.Lock()
        self._resp: Any = None
        self._resource_version: str | None = None

    # -- reading ------------------------------------------------------------------------------------

    def store(self) -> dict[str, T]:
        """A snapshot of the store: key (``namespace/name`` or ``name``) -> object."""
        with self._lock:
            return dict(self._store)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._store.get(key)

    @property
    def resource_version(self) -> str | None:
        """The resourceVersion the informer is current to (last list, event or bookmark)."""
        return self._resource_version

    # -- running ------------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run in a daemon thread until ``stop`` is set."""
        t = threading.Thread(target=self.run, args=(stop,), name=f"informer-{self.name}", daemon=True)
        t.start()
        return t

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set; returns promptly after it is (the open watch is cut)."""
        helper = threading.Thread(target=self._helper, args=(stop,), name=f"informer-{self.name}-resync")
        helper.daemon = True
        helper.start()
        backoff = _Backoff()
        need_list = True
        try:
            while not stop.is_set():
                try:
                    if need_list:
                        self._list(stop)
                        need_list = False
                    self._watch(stop, backoff)
                except _ExpiredError as e:
                    log.info("informer %s: %s; relisting", self.name, e)
                    need_list = True
                    self._expired_pause(stop, backoff)
                except Exception as e:
                    if stop.is_set():
                        break
                    need_list = True
                    if _status(e) == 410:  # an expired continue token or watch resourceVersion
                        log.info("informer %s: %s; relisting", self.name, _describe(e))
                        self._expired_pause(stop, backoff)
                        continue
                    delay = backoff.next()
                    log.warning("informer %s: %s; relisting in %.1fs", self.name, _describe(e), delay)
                    stop.wait(delay)
        finally:
            helper.join(timeout=1.0)

    @staticmethod
    def _expired_pause(stop: threading.Event, backoff: _Backoff) -> None:
        """The first 410 relists at once; repeated ones without progress back off like errors."""
        backoff.expired_streak += 1
        if backoff.expired_streak > 1:
            stop.wait(backoff.next())

    def _helper(self, stop: threading.Event) -> None:
        """Resync on schedule, and cut the open watch the moment ``stop`` is set."""
        period = self.resync_seconds
        next_resync = time.monotonic() + period if period > 0 else None
        while True:
            wait = None if next_resync is None else next_resync - time.monotonic()
            timeout = None if wait is None else clamp_seconds(wait, f"informer {self.name}: resync period")
            if stop.wait(timeout):
                break
            if next_resync is not None and time.monotonic() >= next_resync:
                if self.has_synced.is_set():
                    self._resync()
                next_resync = time.monotonic() + period
        with self._resp_lock:
            resp = self._resp
        if resp is not None:
            _abort(resp)

    def _resync(self) -> None:
        with self._lock:
            for obj in list(self._store.values()):
                self._call(self._on_update, obj, obj)

    # -- list -----------------------------------------------------------------------------------------

    def _list(self, stop: threading.Event) -> None:
        items: list[T] = []
        cont: str | None = None
        rv: str | None = None
        while True:
            extra: dict[str, Any] = {"limit": LIST_PAGE_SIZE}
            if cont:
                extra["_continue"] = cont
            resp = self._list_func(
                **self._kwargs,
                **extra,
                _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT),
            )
            page = json.loads(self._read_body(resp, stop))
            meta = page.get("metadata") or {}
            rv = meta.get("resourceVersion")
            kind = str(page.get("kind") or "")
            item_kind = kind[: -len("List")] if kind.endswith("List") else kind
            for item in page.get("items") or []:
                # A core LIST leaves kind/apiVersion off its items; watch events carry them.
                item.setdefault("kind", item_kind)
                item.setdefault("apiVersion", page.get("apiVersion"))
                items.append(cast(T, item))  # the boundary: JSON becomes a typed object here
            cont = meta.get("continue")
            if not cont or stop.is_set():
                break
        if stop.is_set():
            return
        self._replace(items, rv)

    def _read_body(self, resp: Any, stop: threading.Event) -> bytes:
        """Read a (possibly large) LIST body where the helper can cut it when ``stop`` is set."""
        with self._resp_lock:
            self._resp = resp
        try:
            if stop.is_set():
                return b"{}"
            data: bytes = resp.data
            return data
        finally:
            with self._resp_lock:
                self._resp = None
            resp.release_conn()

    def _replace(self, items: list[T], rv: str | None) -> None:
        """Reconcile the store with a full listing: add the new, update the changed, delete the gone."""
        with self._lock:
            fresh = {object_key(o): o for o in items}
            for key, gone in list(self._store.items()):
                if key not in fresh:
                    del self._store[key]
                    self._call(self._on_delete, gone)
            for key, obj in fresh.items():
                old = self._store.get(key)
                self._store[key] = obj
                if old is None:
                    self._call(self._on_add, obj)
                elif _uid(old) != _uid(obj):
                    # Deleted and re-created while we were not watching: two distinct objects.
                    self._call(self._on_delete, old)
                    self._call(self._on_add, obj)
                elif _rv(old) != _rv(obj):
                    self._call(self._on_update, old, obj)
            self._resource_version = rv
        self.has_synced.set()

    # -- watch ---------------------------------------------------------------------------------------

    def _watch(self, stop: threading.Event, backoff: _Backoff) -> None:
        """One watch request from the current resourceVersion, until the server ends it (normal:
        returns), ``stop`` is set (returns), the resourceVersion expires (_ExpiredError) or it fails."""
        timeout = random.randint(self.watch_timeout, 2 * self.watch_timeout)
        resp = self._list_func(
            **self._kwargs,
            watch=True,
            resource_version=self._resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, timeout + 30),
        )
        with self._resp_lock:
            self._resp = resp
        try:
            if stop.is_set():  # set before the response was registered: the helper could not cut it
                return
            for line in _lines(resp):
                if stop.is_set():
                    return
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("informer %s: undecodable watch line %.200r", self.name, line)
                    continue
                self._handle(event)
                backoff.reset()
        finally:
            with self._resp_lock:
                self._resp = None
            try:
                resp.close()
                resp.release_conn()
            except Exception:
                pass

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        raw: dict[str, Any] = event.get("object") or {}
        if kind == "ERROR":  # the object is a meta/v1 Status
            code = raw.get("code")
            msg = f"watch error {code} {raw.get('reason')}: {raw.get('message')}"
            if code == 410 or "too old resource version" in str(raw.get("message", "")):
                raise _ExpiredError(msg)
            raise RuntimeError(msg)
        obj = cast(T, raw)  # the boundary: JSON becomes a typed object here
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self._resource_version = rv
            return
        key = object_key(obj)
        with self._lock:
            old = self._store.get(key)
            if kind in ("ADDED", "MODIFIED"):
                self._store[key] = obj
                if old is None:
                    self._call(self._on_add, obj)
                else:
                    self._call(self._on_update, old, obj)
            elif kind == "DELETED":
                self._store.pop(key, None)
                self._call(self._on_delete, obj)
            else:
                log.warning("informer %s: unknown watch event type %r", self.name, kind)
            if rv:
                self._resource_version = rv

    def _call(self, handler: Callable[..., None] | None, *args: T) -> None:
        if handler is None:
            return
        try:
            handler(*args)
        except Exception:
            log.exception("informer %s: handler %s failed", self.name, getattr(handler, "__name__", handler))


def _status(e: BaseException) -> int | None:
    """The HTTP status of an API error (kubernetes ApiException or kube.rest.RestError), else None."""
    status = getattr(e, "status", None)
    return status if isinstance(status, int) else None


def _describe(e: BaseException) -> str:
    status = _status(e)
    if status is not None:
        return f"API error {status} {getattr(e, 'reason', '')}".rstrip()
    return f"{type(e).__name__}: {e}"
