"""Micro benchmark of the MetricHub's report check (apis.reportcheck.check_report) against the check it
replaced (tests/oracles/reportcheck.py: the whole report decoded by apis.convert), on one realistic
report: a koordlet's report of ``--pods`` pods as bench/hub_ingest.py builds it (node, system and 30
aggregated usages, host applications, reclaimable and peak metrics: 56 resource maps at 20 pods).

Each timing is the per-report CPU time of this thread (time.thread_time_ns, so a loaded machine's
preemption does not count), the best of ``--repeats`` rounds of ``--number`` checks; the two checks
alternate round by round so both see the same machine. ``consumer_us`` times a consumer's
checked_item (the check, then the decode into a NodeMetric).

Prints ONE JSON object: pods, report_bytes, check_us (now), oracle_us (before), speedup, consumer_us.
Usage: python bench/report_check.py [--pods 20] [--number 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the oracle lives under tests/
    sys.path.insert(0, str(REPO))

from apis.reportcheck import check_report, checked_item  # noqa: E402
from bench.hub_ingest import make_report  # noqa: E402
from proto.koord.v1 import metrichub_pb2 as pb  # noqa: E402
from tests.oracles.reportcheck import check_report as oracle_check  # noqa: E402


def _cpu_us(fn: Callable[[], object], number: int) -> float:
    t0 = time.thread_time_ns()
    for _ in range(number):
        fn()
    return (time.thread_time_ns() - t0) / number / 1_000


def measure(pods: int, number: int, repeats: int) -> dict[str, object]:
    raw = make_report("node-1", pods=pods)
    msg = pb.NodeMetricReport.FromString(raw)
    received = time.time_ns()
    item = pb.NodeMetricItem(report=msg)
    item.received_time.FromNanoseconds(received)
    size = len(raw)
    runs: dict[str, Callable[[], object]] = {
        "check_us": lambda: check_report(msg, received, size),
        "oracle_us": lambda: oracle_check(msg, received, size),
        "consumer_us": lambda: checked_item(item),
    }
    best = {name: float("inf") for name in runs}
    for fn in runs.values():
        fn()  # warm caches (quantity shapes, parsed quantities)
    for _ in range(repeats):
        for name, fn in runs.items():
            best[name] = min(best[name], _cpu_us(fn, number))
    return {
        "pods": pods,
        "report_bytes": size,
        "check_us": round(best["check_us"], 1),
        "oracle_us": round(best["oracle_us"], 1),
        "speedup": round(best["oracle_us"] / best["check_us"], 2),
        "consumer_us": round(best["consumer_us"], 1),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--pods", type=int, default=20, help="pods in the report (default 20)")
    ap.add_argument("--number", type=int, default=2000, help="checks per timed round (default 2000)")
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds per check; the best counts")
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.pods, args.number, args.repeats)))


if __name__ == "__main__":
    main()
