"""MetricHub under one abusive client (docs/rules/manager.md#metrichub-limits). The hub runs alone in
its own process (one GIL, as koord-manager would), the abuser in another, and ``--honest`` agents in
this one, each sending one report per ``--interval`` seconds as one short Report call (hubpush's
pattern) and timing it.

Scenarios:
- ``tokens``: ``--flooders`` concurrent callers, each sending reports with a fresh random bearer token
  per call, against TokenReview authentication whose reviews take ``--review-ms`` (a fake review
  function inside the hub process: the gRPC server and every client are real). The honest agents'
  tokens are reviewed once before the flood and cached.
- ``flood``: one node identity sends ``--report-kib`` reports (default 1 MiB) over ``--streams``
  concurrent calls as fast as the hub answers; the hub's resident memory is sampled every 100 ms.

Every loop is bounded by ``--seconds`` and by a count. Prints ONE JSON object: the honest agents'
latencies (``honest_p99_ms``), the abuser's outcomes by status code, the hub's refusal counters, its
TokenReviews, its stored and history bytes and its RSS (start, max, end).

Usage: python bench/hub_abuse.py tokens [--flooders 200] [--honest 20] [--seconds 10] [--review-ms 50]
       python bench/hub_abuse.py flood [--streams 8] [--honest 20] [--seconds 10] [--report-kib 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
import grpc.aio
import psutil

from manager.metrichub.auth import Authorizer, FixedTokenAuthenticator, Identity, TokenReviewAuthenticator
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb

REPORT = "/koord.v1.MetricHub/Report"
MAX_CALLS_PER_TASK = 100_000
MiB = 1 << 20


class FakeReview:
    """TokenReview with a latency: "honest-<i>" is node honest-<i>'s token, anything else is invalid."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls = 0

    def __call__(self, token: str) -> Mapping[str, Any]:
        self.calls += 1
        time.sleep(self.latency)
        if token.startswith("honest-"):
            return {"authenticated": True, "user": {"username": f"system:node:{token}"}}
        return {"authenticated": False}


def hub_proc(cfg: dict[str, Any], out: Any, stop: Any) -> None:
    store = HubStore()
    review = FakeReview(cfg["review_ms"] / 1000)
    if cfg["scenario"] == "tokens":
        authn: Any = TokenReviewAuthenticator(review)
    else:
        tokens = {f"honest-{i}": Identity(f"system:node:honest-{i}") for i in range(cfg["honest"])}
        authn = FixedTokenAuthenticator({**tokens, "flood": Identity("system:node:flood-0")})
    server, port = serve(store, "127.0.0.1:0", authenticator=authn, authorizer=Authorizer())
    out.put(port)
    stop.wait(cfg["seconds"] + 120)
    out.put({
        "hub_refused": store.refused.snapshot(), "hub_auth_refused": store.auth_refused.snapshot(),
        "token_reviews": review.calls, "stored_bytes": store.stored_bytes,
        "history_bytes": store.history_bytes, "reports_stored": store.reports_received,
    })  # fmt: skip
    server.stop(grace=None).wait(10)


def report(node: str, pad: int = 0) -> bytes:
    r = pb.NodeMetricReport(node_name=node)
    r.status.update_time.GetCurrentTime()
    r.status.node_metric.node_usage.resources["cpu"] = "1500m"
    if pad:
        r.status.pods_metric.add(name="p" * pad)
    return r.SerializeToString()


def _ident(b: bytes) -> bytes:
    return b


async def _call(channel: Any, token: str, data: bytes) -> str:
    call = channel.stream_unary(
        REPORT, request_serializer=_ident, response_deserializer=pb.ReportAck.FromString
    )
    try:
        await call(iter([data]), timeout=30, metadata=(("authorization", f"Bearer {token}"),))
    except grpc.aio.AioRpcError as e:
        return str(e.code().name)
    return "OK"


def abuser_proc(port: int, cfg: dict[str, Any], out: Any, start: Any) -> None:
    async def main() -> Counter[str]:
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("c", i)]) for i in range(8)]
        outcomes: Counter[str] = Counter()
        for _ in range(60_000):  # wait for the start time (bounded: 10 minutes)
            if start.value != 0.0:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(max(0.0, start.value - time.time()))
        deadline = start.value + cfg["seconds"]
        big = report("flood-0", cfg["report_kib"] * 1024 - 200) if cfg["scenario"] == "flood" else b""

        async def task(k: int) -> None:
            channel = channels[k % len(channels)]
            for _ in range(MAX_CALLS_PER_TASK):
                if time.time() >= deadline:
                    return
                if cfg["scenario"] == "tokens":
                    outcomes[await _call(channel, secrets.token_hex(16), report("x"))] += 1
                else:
                    outcomes[await _call(channel, "flood", big)] += 1

        tasks = cfg["flooders"] if cfg["scenario"] == "tokens" else cfg["streams"]
        await asyncio.gather(*(task(k) for k in range(tasks)))
        for ch in channels:
            await ch.close()
        return outcomes

    out.put(dict(asyncio.run(main())))


async def honest_agents(
    port: int, cfg: dict[str, Any], start_at: float
) -> tuple[list[float], Counter[str], Counter[str]]:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("h", i)]) for i in range(4)]
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    first: Counter[str] = Counter()
    for i in range(cfg["honest"]):  # first contact (a TokenReview each), before the abuse starts
        first[await _call(channels[0], f"honest-{i}", report(f"honest-{i}"))] += 1
    await asyncio.sleep(max(0.0, start_at - time.time()))
    deadline = start_at + cfg["seconds"]

    async def agent(i: int) -> None:
        due = start_at + cfg["interval"] * i / cfg["honest"]
        for _ in range(MAX_CALLS_PER_TASK):
            await asyncio.sleep(max(0.0, due - time.time()))
            if time.time() >= deadline:
                return
            t0 = time.perf_counter()
            outcomes[await _call(channels[i % 4], f"honest-{i}", report(f"honest-{i}"))] += 1
            latencies.append(time.perf_counter() - t0)
            due += cfg["interval"]

    await asyncio.gather(*(agent(i) for i in range(cfg["honest"])))
    for ch in channels:
        await ch.close()
    return latencies, outcomes, first


def _sampler(pid: int, stop: threading.Event, samples: list[tuple[float, int, float]]) -> None:
    """(time, RSS, CPU seconds) of the hub every 100 ms."""
    proc = psutil.Process(pid)
    for _ in range(100_000):
        try:
            times = proc.cpu_times()
            samples.append((time.time(), proc.memory_info().rss, times.user + times.system))
        except psutil.Error:
            return
        if stop.wait(0.1):
            return


def _cpu_cores(samples: list[tuple[float, int, float]], t0: float, t1: float) -> float | None:
    """The hub's CPU (cores) between t0 and t1, from the samples nearest inside."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return None
    return round((inside[-1][2] - inside[0][2]) / (inside[-1][0] - inside[0][0]), 2)


def _quarters(samples: list[tuple[float, int, float]], t0: float, seconds: float) -> list[float]:
    """The hub's RSS (MiB) at the end of each quarter of the abuse: flat, or still growing."""
    out = []
    for k in (1, 2, 3, 4):
        before = [s for s in samples if s[0] <= t0 + seconds * k / 4]
        out.append(round(before[-1][1] / MiB, 1) if before else 0.0)
    return out


def _pct(xs: list[float], q: float) -> float | None:
    return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q: Any = ctx.Queue()
    stop = ctx.Event()
    start = ctx.Value("d", 0.0)
    hub = ctx.Process(target=hub_proc, args=(cfg, q, stop))
    hub.start()
    samples: list[tuple[float, int, float]] = []
    sampling = threading.Event()
    try:
        port = q.get(timeout=60)
        abuser_q: Any = ctx.Queue()
        abuser = ctx.Process(target=abuser_proc, args=(port, cfg, abuser_q, start))
        abuser.start()
        sampler = threading.Thread(target=_sampler, args=(hub.pid, sampling, samples))
        sampler.start()
        start_at = time.time() + 2.0  # the abuser's interpreter starts, the honest agents say hello
        start.value = start_at
        latencies, honest, first = asyncio.run(honest_agents(port, cfg, start_at))
        abuse = abuser_q.get(timeout=cfg["seconds"] + 120)
        abuser.join(30)
        sampling.set()
        sampler.join(10)
        stop.set()
        stats = q.get(timeout=60)
    finally:
        stop.set()
        sampling.set()
        hub.join(30)
        if hub.is_alive():
            hub.kill()
            hub.join(10)
    latencies.sort()
    rss = [s[1] / MiB for s in samples] or [0.0]
    return {
        "scenario": cfg["scenario"],
        "honest_first_contact": dict(first),
        "honest_calls": sum(honest.values()),
        "honest_ok": honest.get("OK", 0),
        "honest_p50_ms": _pct(latencies, 0.5),
        "honest_p99_ms": _pct(latencies, 0.99),
        "honest_max_ms": round(1000 * latencies[-1], 2) if latencies else None,
        "abuser_outcomes": abuse,
        **stats,
        "hub_cpu_cores": _cpu_cores(samples, start_at, start_at + cfg["seconds"]),
        "hub_rss_mib_start": round(rss[0], 1),
        "hub_rss_mib_max": round(max(rss), 1),
        "hub_rss_mib_end": round(rss[-1], 1),
        "hub_rss_mib_by_quarter": _quarters(samples, start_at, cfg["seconds"]),
        **{
            k: cfg[k]
            for k in ("seconds", "honest", "interval", "flooders", "streams", "report_kib", "review_ms")
        },
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", choices=("tokens", "flood"))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--honest", type=int, default=20, help="honest agents (one report per interval each)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between an honest agent's reports")
    ap.add_argument("--flooders", type=int, default=200, help="tokens: concurrent random-token callers")
    ap.add_argument("--review-ms", type=float, default=50.0, help="tokens: latency of one TokenReview")
    ap.add_argument("--streams", type=int, default=8, help="flood: concurrent calls of the flooding node")
    ap.add_argument("--report-kib", type=int, default=1024, help="flood: size of each flooding report")
    args = ap.parse_args(argv)
    cfg = vars(args) | {
        "seconds": max(1.0, min(args.seconds, 120.0)),  # bounded in time
        "honest": max(1, min(args.honest, 1000)),
        "flooders": max(1, min(args.flooders, 2000)),
        "streams": max(1, min(args.streams, 64)),
    }
    print(json.dumps(run(cfg)))


if __name__ == "__main__":
    main()
