"""Shard arbiter throughput on loopback (docs/shards.md#measured): one ShardBinder (a Ledger over
``--nodes`` nodes, in a process of its own, as on the leader's host) and ``--shards`` shard processes,
each with ``--threads`` threads binding pods of 100m cpu / 64Mi to random nodes, one pod per call as the
scheduler's binding threads do: unary ``Bind``, or with ``--coalesce`` through the CoalescingArbiter
(concurrent calls share ``BindBatch`` round trips), or with ``--batch N`` explicit ``BindBatch`` of N.
Every pod fits (nodes are large), so every bind is a full decision
that counts on the ledger. Processes start together; the window is from the first shard's start to the
last shard's end (CLOCK_MONOTONIC is system-wide on Linux).

Prints ONE JSON object: binds_per_s, binds, accepted, seconds, and the settings.

Usage: python bench/shard_binder.py [--binds 20000] [--shards 2] [--threads 4] [--coalesce | --batch N]
       [--nodes 5000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

CHECKED = ("cpu", "memory", "ephemeral-storage")


def _arbiter(nodes: int, ports: Any, stop: Any) -> None:
    from scheduler.shards.ledger import Ledger
    from scheduler.shards.service import serve

    ledger = Ledger()
    for i in range(nodes):
        alloc = {"cpu": "1000", "memory": "4Ti", "pods": "100000"}
        ledger.set_node({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}})
    server = serve(ledger, workers=8)
    ports.put(server.port)
    stop.wait()
    server.stop(None)


def _shard(
    k: int, port: int, binds: int, threads: int, batch: int, coalesce: bool, nodes: int, go: Any, out: Any
) -> None:
    from scheduler.shards.arbiter import BindRequest
    from scheduler.shards.client import ArbiterClient, CoalescingArbiter

    client = ArbiterClient(lambda: f"127.0.0.1:{port}", timeout=30)
    one: ArbiterClient | CoalescingArbiter = CoalescingArbiter(client) if coalesce else client
    rnd = random.Random(k)
    reqs = [
        BindRequest(f"u{k}-{i}", f"ns/p{k}-{i}", f"n{rnd.randrange(nodes)}", {"cpu": 100, "memory": 64 << 20},
                    CHECKED, f"shard-{k}")
        for i in range(binds)
    ]  # fmt: skip
    accepted = [0] * threads

    def work(t: int) -> None:
        mine = reqs[t::threads]
        if batch:
            for i in range(0, len(mine), batch):
                accepted[t] += sum(d.accepted for d in client.bind_batch(mine[i : i + batch]))
        else:
            for r in mine:
                accepted[t] += one.bind(r).accepted

    client.bind(BindRequest(f"warm-{k}", "ns/warm", "n0", {}, (), f"shard-{k}"))  # connect first
    go.wait()
    start = time.monotonic()
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    out.put((start, time.monotonic(), binds, sum(accepted)))
    one.close()
    client.close()


def run(
    binds: int, shards: int, threads: int, batch: int, nodes: int, coalesce: bool = False
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    ports: Any = ctx.Queue()
    stop, go = ctx.Event(), ctx.Event()
    out: Any = ctx.Queue()
    arbiter = ctx.Process(target=_arbiter, args=(nodes, ports, stop))
    arbiter.start()
    procs: list[Any] = []
    try:
        port = ports.get(timeout=60)
        per = binds // shards
        procs = [
            ctx.Process(target=_shard, args=(k, port, per, threads, batch, coalesce, nodes, go, out))
            for k in range(shards)
        ]
        for p in procs:
            p.start()
        time.sleep(2.0)  # every shard built its requests and connected
        go.set()
        results = [out.get(timeout=600) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
        stop.set()
        arbiter.join(timeout=30)
    seconds = max(r[1] for r in results) - min(r[0] for r in results)
    total = sum(r[2] for r in results)
    return {
        "binds_per_s": round(total / seconds, 1),
        "binds": total,
        "accepted": sum(r[3] for r in results),
        "seconds": round(seconds, 3),
        "shards": shards,
        "threads": threads,
        "batch": batch,
        "coalesce": coalesce,
        "nodes": nodes,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binds", type=int, default=20_000)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--batch", type=int, default=0, help="BindBatch of N binds (0: unary Bind)")
    p.add_argument("--coalesce", action="store_true", help="one bind per call, sharing BindBatch round trips")
    p.add_argument("--nodes", type=int, default=5000)
    a = p.parse_args(argv)
    print(json.dumps(run(a.binds, a.shards, a.threads, a.batch, a.nodes, a.coalesce)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
