"""Informer-event micro-benchmark (docs/scheduler-scale.md#events-and-cycles): what the scheduling thread
pays per informer event and per snapshot update, outside the live run's noise. The scale benchmark's world
(bench/_scale_driver.py: `--nodes` nodes filled to half their capacity with bound pods, a tenth of them
"rich" — spread and anti-affinity — with NodeMetrics) is listed into the daemon's EventRouter, one rich
probe pod is filtered and scored (every plugin builds its views), then a fixed, seeded stream of
`--events` events goes through the router's handlers in the live run's mix: a pod deleted (`delete`), a
NodeMetric replaced (`metric`: decoded beforehand, as the informer's thread does; the merger posts it to
the scheduler's lock), a bind coming back (`bind`: the pod assumed in the cache, untimed, then its update
to bound), a bound pod the scheduler never saw added (`add`), with `SchedulerCache.update_snapshot` of the
default profile's snapshot every `--every` events, as the scheduling loop does between cycles.

Prints one JSON object: nodes, pods, events per kind, us_per_event (mean per kind), us_per_update (mean,
p50, p90 of the snapshot updates), rows_per_update (mean NodeInfos re-copied), us_per_event_all (events
and updates, per event), setup_s, total_s, and `digest`: a hash of the snapshot and its pod views at the
end, equal before and after a change that keeps the state the same; with `--check`, `digest_from_scratch`
of a snapshot and views built from the cache anew, which `digest` must equal.
Usage: python bench/scheduler_events.py [--nodes 20000] [--events 20000] [--every 10] [--seed 7] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.kubeobjects import Pod  # noqa: E402
from apis.nodemetric import NodeMetric  # noqa: E402
from bench._scale_driver import World, _key, build_world  # noqa: E402
from bench._scheduler_world import SCHEDULER_NAME, time_string  # noqa: E402
from bench.scheduler_scale import _NoBinder, prime  # noqa: E402
from scheduler.cache import SchedulerCache  # noqa: E402
from scheduler.framework.snapshot import Snapshot  # noqa: E402
from scheduler.gateway import CR_SOURCE, EventRouter  # noqa: E402
from scheduler.queue import SchedulingQueue  # noqa: E402
from scheduler.registry import Handle, build_framework, default_profile  # noqa: E402
from scheduler.scheduler import Scheduler, freeze_heap  # noqa: E402

# The live run's mix per second at 20,000 nodes and 1,000 pods/s offered (~200 bound): deletes, NodeMetric
# updates, binds coming back (the pod assumed, then its update), bound pods the scheduler never saw.
MIX: tuple[tuple[str, int], ...] = (("delete", 1700), ("metric", 550), ("bind", 200), ("add", 20))
Event = tuple[str, Any]
BIND_LAG = 25  # events between a pod's assumption and its bind's update


def setup(nodes: int, seed: int) -> tuple[Scheduler, EventRouter, World]:
    fw = build_framework(default_profile(), Handle(), rng=random.Random(seed))
    sched = Scheduler(fw, SchedulerCache(), SchedulingQueue(), _NoBinder(), bind_workers=0)
    router = EventRouter(sched, SCHEDULER_NAME)
    world = build_world(nodes, 0.5, 0.1, seed)
    world.apply_initial(router, 60.0)
    prime(sched)
    return sched, router, world


def stream(world: World, events: int, seed: int) -> list[Event]:
    """The events, drawn before the clock starts; `world` follows them (a deleted pod is not deleted
    again, a NodeMetric lists the node's pods of that moment). A bind's pod is assumed (`assume`, the
    scheduler's own part, untimed) BIND_LAG events before its update comes back, as in the live loop
    where snapshot updates fall in between."""
    rnd = random.Random(seed + 1)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    out: list[Event] = []
    live = list(world.live)
    stamp = time.time()
    later: dict[int, list[Event]] = {}
    for i in range(events + BIND_LAG):
        for ev in later.pop(i, []):
            key = _key(ev[1][1])
            world.place(key, ev[1][1]["spec"]["nodeName"], ev[1][1])
            live.append(key)
            out.append(ev)
        if i >= events:
            continue
        kind = rnd.choices(kinds, weights)[0]
        if kind == "delete" and live:
            j = rnd.randrange(len(live))
            live[j], live[-1] = live[-1], live[j]
            key = live.pop()
            lp = world.live.pop(key)
            world.nodes[lp.node].pods.discard(key)
            out.append(("delete", lp.pod))
        elif kind == "metric":
            name = world.names[rnd.randrange(len(world.names))]
            obj = world.metric(name, stamp + i * 1e-3)
            out.append(("metric", (name, NodeMetric.from_dict(obj))))
        else:
            name = world.names[rnd.randrange(len(world.names))]
            pending = world.new_pod("e")
            cond = {"type": "PodScheduled", "status": "True", "lastTransitionTime": time_string(stamp)}
            pod = {**pending, "spec": {**pending["spec"], "nodeName": name}, "status": {"phase": "Running"}}
            pod["status"]["conditions"] = [cond]
            if kind == "bind":
                out.append(("assume", (pending, pod)))
                later.setdefault(i + BIND_LAG, []).append(("bind", (pending, pod)))
                continue
            key = _key(pod)
            world.place(key, name, pod)
            live.append(key)
            out.append((kind, (pending, pod)))
    return out


def digest(snapshot: Snapshot) -> str:
    """The snapshot's rows (names, matrices, pods) and its views' pod data, hashed."""
    h = hashlib.sha256()
    order = sorted(range(snapshot.n), key=lambda i: snapshot.names[i])
    for i in order:
        info = snapshot.infos[i]
        h.update(info.name.encode())
        h.update(repr(sorted(info.pods)).encode())
        h.update(repr(sorted(info.requested.items())).encode())
        h.update(repr((info.nonzero, int(snapshot.pod_count[i]))).encode())
        h.update(snapshot.requested[:, i].tobytes() + snapshot.nonzero[:, i].tobytes())
        h.update(snapshot.allocatable[:, i].tobytes())
    for key, view in sorted(snapshot._views.items(), key=lambda kv: repr(kv[0])):
        rows = _pod_rows(view)
        if rows is not None:
            h.update(repr(key).encode())
            for i in order:
                h.update(repr(sorted(rows[i])).encode())
                # each entry holds the pod object the row holds (interpodaffinity: .pod; spread: (slot, pod))
                pods = snapshot.infos[i].pods
                stale = [k for k, e in rows[i].items() if getattr(e, "pod", None) is not pods[k].pod
                         and not (isinstance(e, tuple) and e[1] is pods[k].pod)]  # fmt: skip
                h.update(repr(stale).encode())
        groups = getattr(view, "groups", None)
        if rows is not None and isinstance(groups, dict):
            h.update(repr(sorted(sorted(map(repr, m)) for m in groups.values())).encode())  # (keys vary)
    return h.hexdigest()[:16]


def _pod_rows(view: object) -> list[dict[str, Any]] | None:
    """A pod view's per-row dicts of pod keys (InterPodAffinity's, PodTopologySpread's), else None."""
    rows = getattr(view, "rows", None)
    return rows if isinstance(rows, list) and all(isinstance(r, dict) for r in rows) else None


def scratch_digest(sched: Scheduler, snapshot: Snapshot) -> str:
    """`digest` of a snapshot built from the cache from scratch, with new views of the kinds `snapshot`
    holds that `digest` reads (made without arguments): what the incremental updates must equal."""
    fresh = Snapshot()
    sched.cache.update_snapshot(fresh)
    for key, view in snapshot._views.items():
        if _pod_rows(view) is not None:
            fresh.view(key, type(view))
    return digest(fresh)


def run(nodes: int, events: int, every: int, seed: int, check: bool = False) -> dict[str, Any]:
    t0 = time.monotonic()
    sched, router, world = setup(nodes, seed)
    evs = stream(world, events, seed)
    snapshot = sched.snapshot
    freeze_heap()
    spent: dict[str, float] = {k: 0.0 for k, _ in MIX}
    counts: dict[str, int] = {k: 0 for k, _ in MIX}
    updates: list[float] = []
    rows = 0
    cache = sched.cache
    t1 = time.monotonic()
    timed = 0
    for kind, arg in evs:
        if kind == "assume":  # the scheduler's own part, not an event's: the pod assumed on its node
            with sched.lock:
                cache.assume_pod(cast(Pod, arg[1]), arg[1]["spec"]["nodeName"])
            continue
        timed += 1
        t = time.perf_counter()
        if kind == "delete":
            router.pod_delete(cast(Pod, arg))
        elif kind == "add":
            router.pod_add(cast(Pod, arg[1]))
        elif kind == "bind":
            router.pod_update(cast(Pod, arg[0]), cast(Pod, arg[1]))
        else:
            router.merger.update(CR_SOURCE, arg[0], arg[1])
        spent[kind] += time.perf_counter() - t
        counts[kind] += 1
        if timed % every == 0:
            gen = cache.generation
            rows += sum(1 for _ in _changed_since(cache, snapshot))
            t = time.perf_counter()
            with sched.lock:
                cache.update_snapshot(snapshot)
            updates.append(time.perf_counter() - t)
            assert cache.generation == gen
    t2 = time.monotonic()
    with sched.lock:  # the events after the last update (untimed): the digests see every event
        cache.update_snapshot(snapshot)
    ordered = sorted(updates)
    return {
        "nodes": nodes,
        "pods": sum(len(info.pods) for info in snapshot.infos),
        "events": counts,
        "every": every,
        "us_per_event": {k: round(spent[k] * 1e6 / counts[k], 1) if counts[k] else None for k in spent},
        "us_per_update": {
            "mean": round(statistics.fmean(updates) * 1e6, 1) if updates else None,
            "p50": round(ordered[len(ordered) // 2] * 1e6, 1) if updates else None,
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e6, 1) if updates else None,
        },
        "rows_per_update": round(rows / len(updates), 2) if updates else None,
        "us_per_event_all": round((sum(spent.values()) + sum(updates)) * 1e6 / max(1, timed), 1),
        "setup_s": round(t1 - t0, 1),
        "total_s": round(t2 - t0, 1),
        "digest": digest(snapshot),
        **({"digest_from_scratch": scratch_digest(sched, snapshot)} if check else {}),
    }


def _changed_since(cache: SchedulerCache, snapshot: Snapshot) -> list[str]:
    """The known nodes the next update re-copies (for rows_per_update)."""
    synced = cache._synced.get(snapshot)
    if synced is None:
        return []
    out: list[str] = []
    for info in reversed(cache._infos.values()):
        if info.generation <= synced[0]:
            break
        out.append(info.name)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--every", type=int, default=10, help="events between two snapshot updates")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--check", action="store_true", help="also digest a snapshot rebuilt from scratch")
    a = ap.parse_args(argv)
    if not 1 <= a.nodes <= 100_000 or not 1 <= a.events <= 1_000_000 or not 1 <= a.every <= 100_000:
        ap.error("--nodes 1..100000, --events 1..1000000, --every 1..100000")
    result = run(a.nodes, a.events, a.every, a.seed, a.check)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
