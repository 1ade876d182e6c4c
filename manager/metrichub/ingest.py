"""How the MetricHub accepts one report (docs/rules/manager.md#metrichub-limits). Runs on the hub's
event loop; each step refuses before the next, costlier one:

1. size: longer than the report bound → RESOURCE_EXHAUSTED (`too_large`);
2. rate: the node's token bucket (the caller's bound node, known before parsing; without
   authentication the node the report names) lacks the report's cost → RESOURCE_EXHAUSTED
   (`rate_limited`), answered after the tarpit's delay;
3. wire format: not a NodeMetricReport (bad protobuf, bad UTF-8) → INVALID_ARGUMENT (`malformed`);
4. binding: a report for another node than the caller's → PERMISSION_DENIED (`foreign_node`);
5. content: apis.reportcheck.check_report, the very check every consumer applies when it decodes
   (node name, update time against the receive time, every field, JSON size and depth) →
   INVALID_ARGUMENT (its reason). A report longer than `inline_check_bytes` is checked on a thread
   of its own so the loop keeps serving; while MAX_LARGE_CHECKS such checks run or wait, another
   large report gets UNAVAILABLE (`checks_busy`);
6. room: the store's node count or bytes exhausted → RESOURCE_EXHAUSTED (`store_full`).

The report is then stored as the bytes the agent sent, stamped with the receive time the check used.
Every refusal is counted by reason (`Ingest.refused`).

Imports: asyncio, standard library, google.protobuf, apis (nodemetric, reportcheck, reportlimits),
manager.metrichub (limits, store), proto.koord.v1.
"""

from __future__ import annotations

import asyncio
import time
from concurrent import futures

from google.protobuf.message import DecodeError

from apis.nodemetric import NodeMetricError
from apis.reportcheck import check_report, reason_of
from apis.reportlimits import MALFORMED, TOO_LARGE
from manager.metrichub.limits import BucketMap, Counts, HubLimits, RefusedError, Tarpit, report_cost
from manager.metrichub.store import HubStore, StoreFullError
from proto.koord.v1 import metrichub_pb2 as pb

__all__ = ["Bound", "Ingest", "parse_report"]

Bound = tuple[str, str]  # (the caller's user name, the node it may report for)
MAX_LARGE_CHECKS = 4


def parse_report(data: bytes) -> pb.NodeMetricReport:
    """The report in `data`, parsed in full (DecodeError: bad wire format, bad UTF-8 in any string)."""
    return pb.NodeMetricReport.FromString(data)


class Ingest:
    def __init__(
        self,
        store: HubStore,
        limits: HubLimits,
        refused: Counts,
        checker: futures.Executor,
        rates: BucketMap | None = None,
        tarpit: Tarpit | None = None,
    ) -> None:
        self.store = store
        self.limits = limits
        self.refused = refused
        self._checker = checker
        self.rates = rates or BucketMap(limits.report_rate, limits.report_burst, limits.report_nodes_tracked)
        self.tarpit = tarpit or Tarpit(limits.refusal_delay, limits.max_delayed)
        self._large_checks = 0  # touched on the loop only

    def _refuse(self, code: str, reason: str, details: str) -> RefusedError:
        self.refused.inc(reason)
        return RefusedError(code, reason, details)

    async def _take(self, node: str, cost: int) -> None:
        wait = self.rates.take(node, cost)
        if wait > 0:
            await self.tarpit.hold()
            raise self._refuse(
                "RESOURCE_EXHAUSTED", "rate_limited",
                f"node {node[:80]!r} reports too often (at most {self.limits.report_rate:g} report tokens/s, "
                f"this one costs {cost}); retry in {wait:.1f}s",
            )  # fmt: skip

    async def accept(self, raw: bytes, bound: Bound | None) -> int:
        """Stores the report in `raw` and returns the new revision; RefusedError (counted) when a step
        of the module docstring refuses it."""
        size = len(raw)
        if size > self.limits.report_bytes:
            raise self._refuse(
                "RESOURCE_EXHAUSTED",
                TOO_LARGE,
                f"report of {size} bytes (at most {self.limits.report_bytes})",
            )
        cost = report_cost(size)
        if bound is not None:
            await self._take(bound[1], cost)
        try:
            msg = parse_report(raw)
        except DecodeError as e:
            raise self._refuse("INVALID_ARGUMENT", MALFORMED, f"not a NodeMetricReport: {e}") from None
        node = msg.node_name
        if bound is None:
            await self._take(node, cost)
        elif node != bound[1]:
            raise self._refuse(
                "PERMISSION_DENIED", "foreign_node",
                f"{bound[0]!r} is bound to node {bound[1]!r} and may not report for node {node[:80]!r}",
            )  # fmt: skip
        received = time.time_ns()
        try:
            if size <= self.limits.inline_check_bytes:
                check_report(msg, received, size)
            else:
                await self._check_aside(msg, received, size)
        except NodeMetricError as e:
            raise self._refuse("INVALID_ARGUMENT", reason_of(e), str(e)[:500]) from None
        try:
            return self.store.put_raw(node, raw, received_ns=received)
        except StoreFullError as e:
            raise self._refuse("RESOURCE_EXHAUSTED", "store_full", str(e)) from None

    async def _check_aside(self, msg: pb.NodeMetricReport, received: int, size: int) -> None:
        if self._large_checks >= MAX_LARGE_CHECKS:
            raise self._refuse(
                "UNAVAILABLE", "checks_busy", f"{MAX_LARGE_CHECKS} large reports are being checked; retry"
            )
        self._large_checks += 1
        try:
            await asyncio.get_running_loop().run_in_executor(self._checker, check_report, msg, received, size)
        finally:
            self._large_checks -= 1
