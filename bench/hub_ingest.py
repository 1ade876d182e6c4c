"""MetricHub ingest: simulated koordlets of ``--nodes`` nodes stream realistic reports (~30 pods, node +
aggregated + system usages) through the real gRPC server on 127.0.0.1, with the static-token
authenticator on (every agent has its own `system:node:<name>` token, so the own-node check runs on
every report), while ``--watchers`` scheduler Watch streams are attached.

Processes: this one runs the hub (one GIL, as koord-manager would); agent processes and one watcher
process are separate. Agents hold client streams, each bound to one node's token and carrying
``--reports-per-stream`` reports of that node (a koordlet that keeps its Report stream open), paced to
``--rate`` reports/s in total. Delivery latency = watcher's parse time − the hub's received_time.
A second, short phase measures hubpush's current pattern (one report per call) as ``unary_calls_per_s``.

Prints ONE JSON object: nodes, reports_per_s, delivery_p99_ms (+ details).
Usage: python bench/hub_ingest.py [--nodes 5000] [--rate 5500] [--seconds 10] [--watchers 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
import grpc.aio

from manager.metrichub.aioserver import serve_aio
from manager.metrichub.auth import Authorizer, StaticTokenAuthenticator
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb

REPORT = "/koord.v1.MetricHub/Report"
WATCH = "/koord.v1.MetricHub/Watch"
LIST = "/koord.v1.MetricHub/List"
READER = "bench-scheduler"


def _rmap(m: pb.ResourceMap, cpu: str, mem: str) -> None:
    m.resources["cpu"] = cpu
    m.resources["memory"] = mem


def make_report(node: str, pods: int = 30) -> bytes:
    r = pb.NodeMetricReport(node_name=node)
    st = r.status
    st.update_time.GetCurrentTime()
    nm = st.node_metric
    _rmap(nm.node_usage, "12345m", "40960Mi")
    _rmap(nm.system_usage, "512m", "2Gi")
    for aggs in (nm.aggregated_node_usages, nm.aggregated_system_usages):
        for minutes in (5, 10, 30):
            agg = aggs.add()
            agg.duration.FromSeconds(minutes * 60)
            for kind in ("avg", "p50", "p90", "p95", "p99"):
                _rmap(agg.usage[kind], "11500m", "39Gi")
    for i in range(pods):
        p = st.pods_metric.add(name=f"app-{i:03d}-7d9f8c6b5-x2k4q", namespace=f"team-{i % 7}")
        _rmap(p.pod_usage, f"{100 + i * 7}m", f"{256 + i}Mi")
        p.priority, p.qos = ("koord-prod", "LS") if i % 3 else ("koord-batch", "BE")
    for name in ("nginx", "sshd"):
        h = st.host_application_metric.add(name=name, priority="koord-prod", qos="LS")
        _rmap(h.usage, "50m", "64Mi")
    _rmap(st.prod_reclaimable_metric.resource, "6", "12Gi")
    _rmap(st.prod_peak_metric.resource, "9", "30Gi")
    r.collect_policy.aggregate_duration_seconds = 300
    r.collect_policy.report_interval_seconds = 60
    return r.SerializeToString()


def _ident(b: bytes) -> bytes:
    return b


def agent_proc(nodes: list[int], port: int, rate: float, seconds: float, per_stream: int,
               streams: int, unary: bool, out: Any, ready: Any, go: Any, start: Any) -> None:  # fmt: skip
    """`streams` concurrent Report streams (grpc.aio) over its nodes, paced to `rate` reports/s in total."""
    payload = {n: make_report(f"node-{n}") for n in nodes}
    accepted = [0] * streams
    errors: list[str] = []
    cpu0 = [0.0]

    async def main() -> None:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        call = channel.stream_unary(REPORT, request_serializer=_ident,
                                    response_deserializer=pb.ReportAck.FromString)  # fmt: skip
        await channel.channel_ready()
        ready.put("agent")
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        cpu0[0] = time.process_time()
        t0 = start.value
        end = t0 + seconds
        period = streams / rate

        async def loop(k: int) -> None:
            mine = nodes[k::streams]
            due = t0 + k * period / streams
            i = 0
            while time.time() < end and mine:
                n = mine[i % len(mine)]
                i += 1
                stream = call(timeout=30, metadata=(("authorization", f"Bearer tok-{n}"),))
                try:
                    for _ in range(1 if unary else per_stream):
                        delay = due - time.time()
                        if delay > 0.002:
                            await asyncio.sleep(delay)
                        due += period
                        if time.time() >= end:
                            break
                        await stream.write(payload[n])
                    await stream.done_writing()
                    accepted[k] += (await stream).accepted
                except grpc.RpcError as e:
                    errors.append(f"{e.code()}: {e.details()}")

        await asyncio.gather(*(loop(k) for k in range(streams)))
        await channel.close()

    asyncio.run(main())
    cpu = time.process_time() - cpu0[0]
    out.put({"accepted": sum(accepted), "errors": errors[:5], "n_errors": len(errors), "cpu": cpu})


def watcher_proc(port: int, ks: list[int], seconds: float, warm: float, out: Any, ready: Any, go: Any,
                 start: Any) -> None:  # fmt: skip
    """`watchers` Watch streams (grpc.aio); each event is parsed, its delivery latency recorded."""
    lat: list[float] = []
    watchers = len(ks)
    counts = [0] * watchers
    cpu = [0.0]

    async def main() -> None:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        watch = channel.unary_stream(WATCH, request_serializer=pb.WatchRequest.SerializeToString,
                                     response_deserializer=pb.NodeMetricEvent.FromString)  # fmt: skip
        lister = channel.unary_unary(LIST, request_serializer=pb.ListRequest.SerializeToString,
                                     response_deserializer=pb.ListResponse.FromString)  # fmt: skip
        calls = []
        for k in range(watchers):
            md = (("authorization", f"Bearer sched-{ks[k]}"),)
            since = (await lister(pb.ListRequest(node_name="none"), metadata=md, timeout=30)).revision
            calls.append(watch(pb.WatchRequest(since_revision=since), metadata=md))
        for _ in calls:
            ready.put("watcher")
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        cpu[0] = time.process_time()
        t_from, t_to = start.value + warm, start.value + seconds

        async def follow(k: int) -> None:
            try:
                async for ev in calls[k]:
                    now = time.time()
                    counts[k] += 1
                    recv = ev.item.received_time.ToNanoseconds() / 1e9
                    if t_from <= recv <= t_to:
                        lat.append(now - recv)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.CANCELLED:
                    print(f"watcher {k}: {e.code()} {e.details()}", file=sys.stderr)

        tasks = [asyncio.create_task(follow(k)) for k in range(watchers)]
        await asyncio.sleep(max(0.0, t_to + 3 - time.time()))
        for c in calls:
            c.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await channel.close()

    asyncio.run(main())
    out.put({"latencies": lat, "events": counts, "cpu": time.process_time() - cpu[0]})


def _quiesce(limit: float = 30.0) -> None:
    """Waits (bounded) until the hub is idle, so a phase does not pay for the previous one's backlog."""
    deadline = time.time() + limit
    while time.time() < deadline:
        c0 = time.process_time()
        time.sleep(0.5)
        if time.process_time() - c0 < 0.02:
            return


def run_phase(port: int, args: argparse.Namespace, rate: float, seconds: float, unary: bool,
              watch: bool) -> dict[str, Any]:  # fmt: skip
    _quiesce()
    ctx = mp.get_context("spawn")
    q: Any = ctx.Queue()
    ready: Any = ctx.Queue()
    go = ctx.Event()
    start = ctx.Value("d", 0.0)
    procs = []
    warm = 1.0 if seconds > 3 else 0.0
    if watch:  # one process per watcher, like separate schedulers
        for k in range(args.watchers):
            procs.append(
                ctx.Process(target=watcher_proc, args=(port, [k], seconds, warm, q, ready, go, start))
            )
    per = [list(range(args.nodes))[i :: args.agent_procs] for i in range(args.agent_procs)]
    for nodes in per:
        procs.append(ctx.Process(target=agent_proc, args=(nodes, port, rate / args.agent_procs, seconds,
                                                          args.reports_per_stream, args.streams, unary, q,
                                                          ready, go, start)))  # fmt: skip
    for p in procs:
        p.start()
    for _ in range(args.agent_procs + (args.watchers if watch else 0)):
        ready.get(timeout=120)
    start.value = time.time() + 0.2
    go.set()
    time.sleep(max(0.0, start.value - time.time()))
    cpu0 = time.process_time()
    time.sleep(seconds)
    hub_cpu = (time.process_time() - cpu0) / seconds
    results = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    agents = [r for r in results if "accepted" in r]
    lat = sorted(x for r in results if "latencies" in r for x in r["latencies"])
    out: dict[str, Any] = {
        "accepted": sum(a["accepted"] for a in agents),
        "hub_cpu_cores": round(hub_cpu, 2),
        "errors": sum(a["n_errors"] for a in agents),
        "error_samples": [e for a in agents for e in a["errors"]][:3],
        "agent_cpu_cores": round(sum(a["cpu"] for a in agents) / seconds, 2),
        "watcher_cpu_cores": round(sum(r["cpu"] for r in results if "latencies" in r) / seconds, 2),
    }
    if lat:
        out["p50_ms"] = round(1000 * statistics.median(lat), 2)
        out["p99_ms"] = round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 2)
        out["max_ms"] = round(1000 * lat[-1], 2)
        out["samples"] = len(lat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=5000.0, help="offered reports/s (all agents)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--watchers", type=int, default=3)
    ap.add_argument("--streams", type=int, default=16, help="concurrent Report streams per agent process")
    ap.add_argument("--agent-procs", type=int, default=1)
    ap.add_argument("--reports-per-stream", type=int, default=50)
    ap.add_argument("--unary-seconds", type=float, default=3.0, help="0 skips the one-report-per-call phase")
    ap.add_argument("--engine", choices=("aio", "threads"), default="aio", help="hub server implementation")
    ap.add_argument(
        "--sweep", default="1000,1500,2000,3000", help="offered rates of short extra phases ('' none)"
    )
    args = ap.parse_args()
    args.nodes = max(1, min(args.nodes, 20_000))
    args.seconds = max(1.0, min(args.seconds, 60.0))  # bounded in time
    tmp = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    tokens = tmp / "tokens.csv"
    rows = [f"tok-{n},system:node:node-{n}" for n in range(args.nodes)]
    rows += [f"sched-{k},{READER}" for k in range(args.watchers)]
    tokens.write_text("\n".join(rows) + "\n")
    store = HubStore()
    authz = Authorizer(reader_users={READER}, reader_groups=())
    authn = StaticTokenAuthenticator(tokens)
    server: Any
    if args.engine == "aio":
        server, port = serve_aio(store, "127.0.0.1:0", authenticator=authn, authorizer=authz)
    else:
        workers = args.streams * args.agent_procs + args.watchers + 8
        server, port = serve(store, "127.0.0.1:0", workers, authenticator=authn, authorizer=authz)
    sweep: list[dict[str, Any]] = []
    try:
        main_phase = run_phase(port, args, args.rate, args.seconds, unary=False, watch=True)
        for rate in [float(r) for r in args.sweep.split(",") if r][:6]:
            ph = run_phase(port, args, rate, 4.0, unary=False, watch=True)
            accepted = round(ph["accepted"] / 4.0)
            sweep.append({"offered": rate, "accepted_per_s": accepted, "p99_ms": ph.get("p99_ms"),
                          "hub_cpu_cores": ph["hub_cpu_cores"]})  # fmt: skip
        unary = None
        if args.unary_seconds > 0:
            u = run_phase(port, args, args.rate, args.unary_seconds, unary=True, watch=False)
            unary = round(u["accepted"] / args.unary_seconds)
    finally:
        server.stop(grace=None)
        tokens.unlink()
        os.rmdir(tmp)
    result = {
        "nodes": args.nodes,
        "reports_per_s": round(main_phase["accepted"] / args.seconds),
        "delivery_p99_ms": main_phase.get("p99_ms"),
        "delivery_p50_ms": main_phase.get("p50_ms"),
        "delivery_max_ms": main_phase.get("max_ms"),
        "offered_per_s": args.rate,
        "report_bytes": len(make_report("node-0")),
        "watchers": args.watchers,
        "deliveries": main_phase.get("samples"),
        "errors": main_phase["errors"],
        "error_samples": main_phase["error_samples"],
        "hub_cpu_cores": main_phase["hub_cpu_cores"],
        "agent_cpu_cores": main_phase["agent_cpu_cores"],
        "watcher_cpu_cores": main_phase["watcher_cpu_cores"],
        "max_rate_with_p99_le_50ms": max(
            [
                p["accepted_per_s"]
                for p in [
                    *sweep,
                    {
                        "accepted_per_s": main_phase["accepted"] / args.seconds,
                        "p99_ms": main_phase.get("p99_ms"),
                    },
                ]
                if p["p99_ms"] is not None and p["p99_ms"] <= 50
            ]
            or [0]
        ),
        "sweep": sweep,
        "unary_calls_per_s": unary,
        "seconds": args.seconds,
        "engine": args.engine,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
