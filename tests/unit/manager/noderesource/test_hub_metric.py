"""The NodeResource controller reads the hub as a consumer that survives a bad entry: a hub report it
cannot decode (NodeMetricError, RecursionError) costs that node its hub metric — the CR is used, the
skip is counted by reason — never the reconcile; a good, fresher hub report still wins."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from apis.nodemetric import NodeMetricError
from apis.reportlimits import JSON_TOO_DEEP, ReportError
from manager.controllers.config import ConfigController
from manager.controllers.noderesource import NodeResourceController
from manager.gateway import Gateway
from manager.metrics import ManagerMetrics

CR = {"metadata": {"name": "n"}, "status": {"updateTime": "2026-11-22T02:00:00Z"}}
FRESH = {"metadata": {"name": "n"}, "status": {"updateTime": "2026-11-22T03:00:00Z"}}


class _Informer:
    def add_handlers(self, *handlers: object) -> None:
        pass


class _Gateway:
    nodes = _Informer()
    nodemetrics = _Informer()

    def node_names(self) -> list[str]:
        return []

    def nodemetric(self, name: str) -> Mapping[str, Any] | None:
        return CR


class _Config:
    def on_change(self, fn: Callable[[], None]) -> None:
        pass


def controller(lookup: Callable[[str], Mapping[str, Any] | None]) -> NodeResourceController:
    return NodeResourceController(
        cast(Gateway, _Gateway()), cast(ConfigController, _Config()), ManagerMetrics(CollectorRegistry()),
        hub_lookup=lookup,
    )  # fmt: skip


def raising(e: BaseException) -> Callable[[str], Mapping[str, Any] | None]:
    def lookup(_name: str) -> Mapping[str, Any] | None:
        raise e

    return lookup


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            NodeMetricError("status.nodeMetric.nodeUsage.resources.cpu", "invalid quantity", "abc"),
            "invalid_field",
        ),
        (ReportError(JSON_TOO_DEEP, "status.podsMetric[0].extensions", "too deep", "[[["), "json_too_deep"),
        (RecursionError("maximum recursion depth exceeded"), "invalid_field"),
    ],
)
def test_a_bad_hub_report_falls_back_to_the_cr(error: BaseException, reason: str) -> None:
    ctl = controller(raising(error))
    assert ctl.nodemetric("n") == CR
    assert ctl.hub_skipped.labels(reason)._value.get() == 1


def test_a_good_fresher_hub_report_wins() -> None:
    ctl = controller(lambda _name: FRESH)
    assert ctl.nodemetric("n") == FRESH
