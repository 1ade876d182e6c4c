"""The slo-controller-config cache (docs/configuration.md#node-overrides-and-merge-rules,
docs/rules/manager.md#a-bad-configmap-key-never-stops-the-manager): watches the one ConfigMap, parses every
key with ``apis.sloconfig`` (keep-last-good per key) and tells subscribers when the cached config changed.

Only Create and Update (with changed ``data``) count; Delete is ignored, so the cache survives a
deleted ConfigMap. A rejected key (not decodable) raises a Warning Event on the ConfigMap naming the key
and the error (``ColocationCfgUnmarshalFailed`` for colocation-config, ``SLOCfgUnmarshalFailed`` for the
others) and sets ``koord_manager_config_last_error{key}`` to 1, back to 0 once the key is accepted or
removed; invalid fields of an accepted key (each now at its last good or default value,
docs/configuration.md "Invalid values") raise one Warning Event ``SLOCfgFieldInvalid`` per key naming
every field, value and the value that applies. Every problem bumps ``koord_manager_config_errors_total{key}``.
The first load happens on the ConfigMap's Create event or lazily in ``available()``: a ConfigMap absent
from the synced cache loads the defaults (colocation flagged in error, as upstream).
Events are emitted from reconciles (this controller's, or a node reconcile's lazy first load), which
run only on the leader.
Imports: the standard library, apis, manager.{gateway,controller.runtime,metrics}.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from apis import constants as c
from apis.kubeobjects import ConfigMap
from apis.sloconfig import ConfigKeyError, SLOControllerConfig, parse_slo_controller_config
from manager.controllerruntime.runtime import Controller
from manager.gateway import Gateway
from manager.metrics import ManagerMetrics

__all__ = [
    "COLOCATION_EVENT_REASON",
    "FIELD_EVENT_REASON",
    "SLO_EVENT_REASON",
    "ConfigController",
    "event_reason",
]

log = logging.getLogger(__name__)

COLOCATION_EVENT_REASON: Final = "ColocationCfgUnmarshalFailed"
SLO_EVENT_REASON: Final = "SLOCfgUnmarshalFailed"
FIELD_EVENT_REASON: Final = "SLOCfgFieldInvalid"
_UNLOADED: Final = object()


def event_reason(key: str) -> str:
    """The upstream Warning Event reason for a rejected ``key``."""
    return COLOCATION_EVENT_REASON if key == c.COLOCATION_CONFIG_KEY else SLO_EVENT_REASON


def _data(cm: ConfigMap | None) -> dict[str, str] | None:
    if cm is None:
        return None
    return {str(k): str(v) for k, v in (cm.get("data") or {}).items()}


class ConfigController:
    """The cached ``SLOControllerConfig``; ``controller`` (named ``config``) processes ConfigMap events."""

    def __init__(self, gateway: Gateway, metrics: ManagerMetrics | None = None, *, resync_seconds: float = 0):
        self.gateway = gateway
        self.metrics = metrics if metrics is not None else ManagerMetrics()
        self.key = f"{gateway.config_namespace}/{gateway.config_name}"
        self._lock = threading.RLock()
        self._config: SLOControllerConfig | None = None
        self._last_data: Any = _UNLOADED
        self._rejected: set[str] = set()  # keys whose latest value was rejected (last_error at 1)
        self._callbacks: list[Callable[[], None]] = []
        self.controller = Controller(
            "config",
            self.reconcile,
            1,
            self.metrics,
            list_keys=lambda: [self.key],
            resync_seconds=resync_seconds,
        )
        gateway.config_maps.add_handlers(on_add=self._on_add, on_update=self._on_update)

    # -- public -----------------------------------------------------------------------------------------

    def current(self) -> SLOControllerConfig | None:
        """The cached config, ``None`` while it was never loaded."""
        with self._lock:
            return self._config

    def available(self) -> bool:
        """Whether reconciles may use the config: loads it lazily when it never was
        (docs/configuration.md#how-a-key-is-loaded) and the colocation part is usable
        (``colocation_available``)."""
        with self._lock:
            if self._config is None:
                self._sync()
            return self._config is not None and self._config.colocation_available

    def slo_available(self) -> bool:
        """Whether the NodeSLO keys are loaded (they always are after one sync, even with bad keys)."""
        with self._lock:
            if self._config is None:
                self._sync()
            return self._config is not None

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every change of the cached config (on the config controller's thread)."""
        with self._lock:
            self._callbacks.append(callback)

    # -- events -----------------------------------------------------------------------------------------

    def _on_add(self, obj: ConfigMap) -> None:
        self.controller.enqueue(self.key)

    def _on_update(self, old: ConfigMap, new: ConfigMap) -> None:
        if (old.get("data") or {}) != (new.get("data") or {}) or self._last_data is _UNLOADED:
            self.controller.enqueue(self.key)

    # -- reconcile ----------------------------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        with self._lock:
            self._sync()
        return None

    def _sync(self) -> None:
        """Load the ConfigMap from the informer cache (lock held); reconciles run only on the leader,
        so only the leader reports (Events) what it finds."""
        cm = self.gateway.config_map()
        if cm is None:
            # Deleted at runtime: ignored. Never loaded: only an absent ConfigMap in a synced cache counts.
            if self._config is not None or not self.gateway.config_maps.has_synced:
                return
            data: dict[str, str] | None = None
        else:
            data = _data(cm)
        if self._config is not None and data == self._last_data:
            return
        previous = self._config
        config, errors = parse_slo_controller_config(data, previous)
        self._last_data = data
        self._report(cm, data, errors)
        self._config = config
        if config != previous:
            log.info("slo-controller-config %s: cached config changed", self.key)
            for callback in list(self._callbacks):
                try:
                    callback()
                except Exception:
                    log.exception("slo-controller-config: change callback failed")

    def _report(
        self, cm: ConfigMap | None, data: Mapping[str, str] | None, errors: list[ConfigKeyError]
    ) -> None:
        by_key: dict[str, list[ConfigKeyError]] = {}
        for err in errors:
            by_key.setdefault(err.key, []).append(err)
            self.metrics.config_errors.labels(key=err.key).inc()
            log.warning("%s", err)
        # A key rejected before and now removed is no longer in error: its default applies.
        for key in set(data or {}) | set(by_key) | self._rejected:
            rejected = [e for e in by_key.get(key, []) if e.rejected]
            self.metrics.config_last_error.labels(key=key).set(1 if rejected else 0)
            if rejected and cm is not None:
                message = f"failed to parse key {key}: " + "; ".join(str(e) for e in rejected)
                self.gateway.event(cm, "Warning", event_reason(key), message[:1024])
            repaired = [e for e in by_key.get(key, []) if not e.rejected]
            if repaired and cm is not None:
                message = f"invalid fields in key {key}: " + "; ".join(str(e) for e in repaired)
                self.gateway.event(cm, "Warning", FIELD_EVENT_REASON, message[:1024])
        self._rejected = {e.key for e in errors if e.rejected}
