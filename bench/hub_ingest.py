"""MetricHub ingest: ``--nodes`` simulated koordlets each keep one Report stream open to the real hub
(grpc.aio, static-token authentication on: every stream carries its own `system:node:<name>` token,
so the own-node check runs on every report) and send one realistic report (~4 KB: 30 pods, node,
aggregated and system usages) every ``--interval`` seconds, phases spread evenly; ``--watchers``
scheduler streams (WatchBatch, or Watch with ``--watch single``) receive every change.

Processes: this one runs only the hub (one GIL, as koord-manager would). The agents run in
``--agent-procs`` processes over ``--channels`` TCP connections each; every watcher is its own
process and parses every event in full, as the scheduler does. Each process's CPU is counted
separately (``*_cpu_cores``), as is the whole machine's (``machine_busy_cores``, from /proc/stat;
``other_cpu_cores`` is the rest: other work, interrupts; a noisy run shows there).

Measured over ``--seconds`` after ``--warmup`` seconds of steady load:
- reports_per_s: reports the hub stored per second (its own counter), against offered_per_s.
- delivery: for every event a watcher receives, its arrival time at the watcher (before parsing)
  minus the time the agent *sent* the report (the report's status.update_time, stamped just before
  the write), so queueing anywhere (agent's gRPC, the hub's sockets and loop, the watch stream)
  counts. delivery_from_hub_* measure from the hub's received_time instead. Same host, same clock.
- delivered_ratio: events received in the window / (reports stored × watchers): < 1 means the
  watchers fall behind.

``--calls-per-s N`` adds a phase in hubpush's pattern (one short Report call per push) at N calls/s.

Prints ONE JSON object: nodes, reports_per_s, delivery_p99_ms (+ details).
``--tls`` serves the hub over TLS (as deploy/ does; agents and watchers trust its CA).

Usage: python bench/hub_ingest.py [--nodes 5000] [--interval 1] [--seconds 10] [--watchers 3] [--tls]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
import grpc.aio

from manager.certs import new_serving_cert
from manager.metrichub.auth import Authorizer, StaticTokenAuthenticator
from manager.metrichub.server import serve, tls_credentials
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb

REPORT = "/koord.v1.MetricHub/Report"
LIST = "/koord.v1.MetricHub/List"
READER = "bench-scheduler"


def _rmap(m: pb.ResourceMap, cpu: str, mem: str) -> None:
    m.resources["cpu"] = cpu
    m.resources["memory"] = mem


def make_report(node: str, pods: int = 30, stamped: bool = True) -> bytes:
    """A koordlet-like report; without `stamped`, status.update_time is left for stamp() to add."""
    r = pb.NodeMetricReport(node_name=node)
    st = r.status
    if stamped:
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


def stamp(now: float) -> bytes:
    """A report holding only status.update_time = now: appended to a report, protobuf merges it into
    the status (a 20-byte suffix instead of re-serialising 4 KB per send)."""
    r = pb.NodeMetricReport()
    r.status.update_time.FromNanoseconds(int(now * 1e9))
    return r.SerializeToString()


def _ident(b: bytes) -> bytes:
    return b


def _channels(port: int, n: int, ca: bytes | None) -> list[Any]:
    """n channels to the hub (TLS trusting `ca` when given); a channel arg of its own per channel:
    one TCP connection each (no shared subchannel)."""
    target = f"127.0.0.1:{port}"
    if ca is None:
        return [grpc.aio.insecure_channel(target, options=[("bench.channel", i)]) for i in range(n)]
    creds = grpc.ssl_channel_credentials(root_certificates=ca)
    return [grpc.aio.secure_channel(target, creds, options=[("bench.channel", i)]) for i in range(n)]


def agent_proc(nodes: list[int], port: int, cfg: dict[str, Any], out: Any, ready: Any, start: Any) -> None:
    """One Report stream per node over `channels` connections; a report per node every `interval`."""
    base = {n: make_report(f"node-{n}", stamped=False) for n in nodes}
    interval, calls_mode = cfg["interval"], cfg["calls"]
    res: dict[str, Any] = {"sent": 0, "acked": 0, "errors": 0, "error_samples": []}

    def failed(e: BaseException) -> None:
        res["errors"] += 1
        if len(res["error_samples"]) < 3:
            res["error_samples"].append(
                f"{e.code()}: {e.details()}" if isinstance(e, grpc.aio.AioRpcError) else repr(e)
            )

    async def main() -> None:
        channels = _channels(port, cfg["channels"], cfg["ca"])
        calls = [
            ch.stream_unary(REPORT, request_serializer=_ident, response_deserializer=pb.ReportAck.FromString)
            for ch in channels
        ]
        md = {n: (("authorization", f"Bearer tok-{n}"),) for n in nodes}
        streams: dict[int, Any] = {}
        gate = asyncio.Semaphore(200)

        async def open_stream(k: int, n: int) -> None:
            async with gate:
                st = calls[k % len(calls)](timeout=3600, metadata=md[n])
                try:
                    await st.write(base[n] + stamp(time.time()))  # the node is in the hub from now on
                    streams[n] = st
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
                    failed(e)

        if not calls_mode:
            await asyncio.gather(*(open_stream(k, n) for k, n in enumerate(nodes)))
        ready.put("agent")
        while start.value == 0.0:
            await asyncio.sleep(0.01)
        t0, t_from, t_to = (
            start.value,
            start.value + cfg["warmup"],
            start.value + cfg["warmup"] + cfg["seconds"],
        )
        cpu = [0.0, 0.0]

        async def one_call(n: int, k: int) -> None:
            call = calls[k % len(calls)](timeout=30, metadata=md[n])
            try:
                await call.write(base[n] + stamp(time.time()))
                await call.done_writing()
                res["acked"] += (await call).accepted
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
                failed(e)

        async def node_loop(k: int, n: int) -> None:
            due = t0 + interval * k / len(nodes)
            st = streams.get(n)
            pending: set[asyncio.Task[None]] = set()
            while True:
                delay = due - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = time.time()
                if now >= t_to:
                    break
                if t_from <= now:
                    res["sent"] += 1
                due += interval
                if calls_mode:
                    task = asyncio.create_task(one_call(n, k))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    continue
                if st is None:
                    return
                try:
                    await st.write(base[n] + stamp(now))
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
                    failed(e)
                    return
            await asyncio.gather(*pending)

        async def cpu_marks() -> None:
            await asyncio.sleep(max(0.0, t_from - time.time()))
            cpu[0] = time.process_time()
            await asyncio.sleep(max(0.0, t_to - time.time()))
            cpu[1] = time.process_time()

        await asyncio.gather(cpu_marks(), *(node_loop(k, n) for k, n in enumerate(nodes)))
        res["cpu"] = cpu[1] - cpu[0]
        for st in streams.values():
            try:
                await st.done_writing()
                res["acked"] += (await st).accepted
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
                failed(e)
        for ch in channels:
            await ch.close()

    asyncio.run(main())
    out.put(res)


def watcher_proc(port: int, k: int, cfg: dict[str, Any], out: Any, ready: Any, start: Any) -> None:
    """One WatchBatch (or Watch) stream; every message is parsed in full, its events timed."""
    lat_sent: list[float] = []
    lat_hub: list[float] = []
    res: dict[str, Any] = {"events": 0, "messages": 0}
    batched = cfg["watch"] == "batch"

    async def main() -> None:
        (channel,) = _channels(port, 1, cfg["ca"])
        md = (("authorization", f"Bearer sched-{k}"),)
        lister = channel.unary_unary(LIST, request_serializer=pb.ListRequest.SerializeToString,
                                     response_deserializer=pb.ListResponse.FromString)  # fmt: skip
        since = (await lister(pb.ListRequest(node_name="-"), metadata=md, timeout=30)).revision
        method = "/koord.v1.MetricHub/" + ("WatchBatch" if batched else "Watch")
        watch = channel.unary_stream(method, request_serializer=pb.WatchRequest.SerializeToString,
                                     response_deserializer=_ident)  # fmt: skip
        call = watch(pb.WatchRequest(since_revision=since), metadata=md)
        ready.put("watcher")
        while start.value == 0.0:
            await asyncio.sleep(0.01)
        t_from = start.value + cfg["warmup"]
        t_to = t_from + cfg["seconds"]
        cpu = [0.0, 0.0]

        def parse(data: bytes) -> Sequence[pb.NodeMetricEvent]:
            if batched:
                return pb.NodeMetricEventBatch.FromString(data).events
            return (pb.NodeMetricEvent.FromString(data),)

        async def follow() -> None:
            try:
                async for data in call:
                    now = time.time()
                    events = parse(data)
                    res["messages"] += 1
                    for ev in events:
                        sent = ev.item.report.status.update_time.ToNanoseconds() / 1e9
                        if t_from <= sent <= t_to:
                            res["events"] += 1
                            lat_sent.append(now - sent)
                            lat_hub.append(now - ev.item.received_time.ToNanoseconds() / 1e9)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.CANCELLED:
                    print(f"watcher {k}: {e.code()} {e.details()}", file=sys.stderr)

        task = asyncio.create_task(follow())
        await asyncio.sleep(max(0.0, t_from - time.time()))
        cpu[0] = time.process_time()
        await asyncio.sleep(max(0.0, t_to - time.time()))
        cpu[1] = time.process_time()
        await asyncio.sleep(2.0)  # reports sent at the end of the window still arrive
        call.cancel()
        await asyncio.gather(task, return_exceptions=True)
        res["cpu"] = cpu[1] - cpu[0]
        await channel.close()

    asyncio.run(main())
    res["lat_sent"], res["lat_hub"] = lat_sent, lat_hub
    out.put(res)


def _busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def _pct(xs: list[float], q: float) -> float:
    return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def run_phase(
    port: int, store: HubStore, args: argparse.Namespace, calls: bool, watch: bool
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q: Any = ctx.Queue()
    ready: Any = ctx.Queue()
    start = ctx.Value("d", 0.0)
    interval = args.nodes / args.calls_per_s if calls else args.interval
    cfg = {"interval": interval, "calls": calls, "channels": args.channels, "warmup": args.warmup,
           "seconds": args.seconds, "watch": args.watch, "ca": args.ca}  # fmt: skip
    procs = []
    if watch:
        procs += [
            ctx.Process(target=watcher_proc, args=(port, k, cfg, q, ready, start))
            for k in range(args.watchers)
        ]
    nodes = list(range(args.nodes))
    procs += [
        ctx.Process(target=agent_proc, args=(nodes[i :: args.agent_procs], port, cfg, q, ready, start))
        for i in range(args.agent_procs)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    time.sleep(1.0)  # the hub settles after the streams opened
    load = os.getloadavg()[0]
    start.value = t0 = time.time() + 0.5
    time.sleep(max(0.0, t0 + args.warmup - time.time()))
    cpu0, busy0, n0 = time.process_time(), _busy(), store.reports_received
    time.sleep(args.seconds)
    cpu1, busy1, n1 = time.process_time(), _busy(), store.reports_received
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    agents = [r for r in results if "acked" in r]
    watchers = [r for r in results if "lat_sent" in r]
    s = args.seconds
    stored = n1 - n0
    out: dict[str, Any] = {
        "reports_per_s": round(stored / s),
        "offered_per_s": round(sum(a["sent"] for a in agents) / s),
        "errors": sum(a["errors"] for a in agents),
        "error_samples": [e for a in agents for e in a["error_samples"]][:3],
        "hub_cpu_cores": round((cpu1 - cpu0) / s, 2),
        "agent_cpu_cores": round(sum(a["cpu"] for a in agents) / s, 2),
        "watcher_cpu_cores": round(sum(w["cpu"] for w in watchers) / s, 2),
        "machine_busy_cores": round((busy1[0] - busy0[0]) / (busy1[1] - busy0[1]) * (os.cpu_count() or 1), 2),
        "loadavg_1m_before": round(load, 2),
    }
    # Whatever else ran on the machine meanwhile (a noisy run shows here).
    ours = out["hub_cpu_cores"] + out["agent_cpu_cores"] + out["watcher_cpu_cores"]
    out["other_cpu_cores"] = round(out["machine_busy_cores"] - ours, 2)
    lat = sorted(x for w in watchers for x in w["lat_sent"])
    hub_lat = sorted(x for w in watchers for x in w["lat_hub"])
    if lat:
        messages = sum(w["messages"] for w in watchers)
        out |= {
            "delivery_p50_ms": _pct(lat, 0.5),
            "delivery_p99_ms": _pct(lat, 0.99),
            "delivery_max_ms": round(1000 * lat[-1], 2),
            "delivery_from_hub_p99_ms": _pct(hub_lat, 0.99),
            "deliveries": len(lat),
            "delivered_ratio": round(len(lat) / max(1, stored * len(watchers)), 3),
            "events_per_watch_message": round(sum(w["events"] for w in watchers) / max(1, messages), 1),
        }
    elif watch:
        out["delivery_p99_ms"] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000, help="simulated agents, one Report stream each")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between a node's reports")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window")
    ap.add_argument("--warmup", type=float, default=3.0, help="steady load before the window")
    ap.add_argument("--watchers", type=int, default=3)
    ap.add_argument("--watch", choices=("batch", "single"), default="batch", help="WatchBatch or Watch")
    ap.add_argument("--agent-procs", type=int, default=2)
    ap.add_argument("--channels", type=int, default=50, help="TCP connections per agent process")
    ap.add_argument("--calls-per-s", type=float, default=0.0, help="also measure one call per report")
    ap.add_argument("--batch-window-ms", type=float, default=5.0, help="the hub's watcher wake-up window")
    ap.add_argument(
        "--tls", action="store_true", help="the hub serves TLS (a certificate from manager.certs)"
    )
    args = ap.parse_args()
    args.nodes = max(1, min(args.nodes, 20_000))
    args.seconds = max(1.0, min(args.seconds, 60.0))  # bounded in time
    args.agent_procs = max(1, min(args.agent_procs, args.nodes))
    tmp = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    tokens = tmp / "tokens.csv"
    rows = [f"tok-{n},system:node:node-{n}" for n in range(args.nodes)]
    rows += [f"sched-{k},{READER}" for k in range(args.watchers)]
    tokens.write_text("\n".join(rows) + "\n")
    store = HubStore()
    authz = Authorizer(reader_users={READER}, reader_groups=())
    authn = StaticTokenAuthenticator(tokens)
    credentials, args.ca = None, None
    if args.tls:
        made = new_serving_cert("koord-manager-hub", ["127.0.0.1"])
        (tmp / "tls.crt").write_bytes(made.cert)
        (tmp / "tls.key").write_bytes(made.key)
        credentials, args.ca = tls_credentials(tmp / "tls.crt", tmp / "tls.key"), made.ca
    server, port = serve(store, "127.0.0.1:0", authenticator=authn, authorizer=authz, credentials=credentials,
                         batch_window=args.batch_window_ms / 1000)  # fmt: skip
    try:
        main_phase = run_phase(port, store, args, calls=False, watch=True)
        calls = run_phase(port, store, args, calls=True, watch=False) if args.calls_per_s > 0 else None
    finally:
        server.stop(grace=None).wait(10)
        shutil.rmtree(tmp)
    result = {
        "nodes": args.nodes,
        "reports_per_s": main_phase.pop("reports_per_s"),
        "delivery_p99_ms": main_phase.pop("delivery_p99_ms"),
        **main_phase,
        "report_bytes": len(make_report("node-0")),
        "interval_s": args.interval,
        "watchers": args.watchers,
        "watch": args.watch,
        "agent_procs": args.agent_procs,
        "connections": args.agent_procs * args.channels,
        "seconds": args.seconds,
        "batch_window_ms": args.batch_window_ms,
        "tls": args.tls,
        "cpus": os.cpu_count(),
    }
    if calls is not None:
        result["calls"] = calls
    print(json.dumps(result))


if __name__ == "__main__":
    main()
