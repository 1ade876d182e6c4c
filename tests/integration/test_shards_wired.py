"""Three standalone koord-scheduler shards on the real API server (docs/shards.md#wiring): 8 nodes with
room for 8 pods each, 120 pods. Exactly the 64 that fit are bound, each once, no node's bound requests
exceed its allocatable, every shard bound some, the other 56 stay Pending. Then one shard that does not
host the arbiter is killed (SIGKILL: its Lease is left to expire); once it has, the survivors own its
pods: with room for every pod added, all 120 end up bound, the dead shard's included. The shards run with
the arbiter's security on (docs/shards.md#security): their Leases in a namespace of their own, the arbiter
on TLS, each shard sending a real ServiceAccount's token, which the arbiter checks by TokenReview; another
ServiceAccount's token is refused."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from apis.pod import pod_requests
from apis.quantity import parse_resource_list
from koord.localcluster.controlplane import ControlPlane, free_ports, http_ok
from scheduler.framework.units import to_values
from scheduler.shards.membership import ARBITER_ANNOTATION, GROUP_LABEL, lease_name
from scheduler.shards.ring import owns
from tests.helpers.processes import stop_all
from tests.integration.podhelpers import make_pod, wait_for
from tests.integration.shardsecurity import ShardSecurity, forget_as, service_account_token
from tests.integration.shardsecurity import shard_sec as shard_sec  # the fixture

pytestmark = pytest.mark.apiserver

SHARDS = ("shard-a", "shard-b", "shard-c")
LEASE_SECONDS = 3
PODS, PER_NODE, NODES = 120, 8, 8
NODE = {"cpu": "2", "memory": "4Gi", "pods": "110"}  # 8 pods of 250m


def add_nodes(core: Any, tag: str, names: list[str]) -> None:
    for name in names:
        core.create_node({
            "metadata": {"name": name, "labels": {"koord-test": tag}},
            "status": {"allocatable": NODE, "capacity": NODE},
        })  # fmt: skip
        core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here


def scrape(port: int) -> dict[str, float]:
    """``name{label=value,...}`` → value of the scheduler's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def live_shards(kube: Any, namespace: str) -> set[str]:
    leases = client.CoordinationV1Api(kube).list_namespaced_lease(
        namespace, label_selector=f"{GROUP_LABEL}=koord-scheduler"
    )
    return {x.spec.holder_identity for x in leases.items if x.spec.holder_identity}


def test_three_shards_bind_each_pod_once_and_take_over_a_dead_one(
    control_plane: ControlPlane, kube: Any, namespace: str, tmp_path: Path, shard_sec: ShardSecurity
) -> None:
    sec = shard_sec
    core = client.CoreV1Api(kube)
    tag = uuid.uuid4().hex[:6]
    nodes = [f"shard-{tag}-{i}" for i in range(NODES)]
    extra = [f"shard-{tag}-x{i}" for i in range((PODS - NODES * PER_NODE) // PER_NODE)]
    add_nodes(core, tag, nodes)
    ports = dict(zip(SHARDS, free_ports(len(SHARDS)), strict=True))
    procs: dict[str, subprocess.Popen[Any]] = {}
    logs = {name: tmp_path / f"{name}.log" for name in SHARDS}
    leases_ns = sec.lease_namespace
    try:
        for name, port in ports.items():
            with logs[name].open("w") as err:
                procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "scheduler.main", f"--kubeconfig={control_plane.kubeconfig_path}",
                     "--bind-workers=2", f"--leader-elect-identity={name}", f"--metrics-port={port}",
                     f"--leader-elect-resource-namespace={namespace}", "--sharding",
                     "--shard-arbiter-addr=127.0.0.1:0", "--shard-advertise-host=127.0.0.1",
                     f"--shard-lease-duration={LEASE_SECONDS}", *sec.flags()],
                    stdout=subprocess.DEVNULL, stderr=err,
                )  # fmt: skip
        for port in ports.values():
            assert wait_for(lambda p=port: http_ok(f"http://127.0.0.1:{p}/readyz"), timeout=60)
        # Pods created once all three are members, so each owns about a third of them.
        assert wait_for(lambda: live_shards(kube, leases_ns) == set(SHARDS), timeout=30)
        members = "koord_scheduler_shard_members{}"
        for port in ports.values():
            assert wait_for(lambda p=port: scrape(p).get(members) == 3, timeout=30)
        uids: dict[str, str] = {}
        for i in range(PODS):
            make_pod(core, namespace, f"p{i:03d}", cpu="250m", selector={"koord-test": tag})

        def bound() -> dict[str, str]:
            pods = core.list_namespaced_pod(namespace).items
            uids.update({p.metadata.name: p.metadata.uid for p in pods})
            return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}

        assert wait_for(lambda: len(bound()) >= NODES * PER_NODE, timeout=60), len(bound())
        first = bound()
        assert len(first) == NODES * PER_NODE
        assert_no_overcommit(core, nodes)
        key = "scheduler_schedule_attempts_total{profile=koord-scheduler,result=scheduled}"

        def binds(names: list[str] | tuple[str, ...]) -> dict[str, int]:
            return {n: int(scrape(ports[n]).get(key, 0)) for n in names}

        # Every bind the shards made succeeded once: their counts add up to the pods bound (a decision is
        # counted just after its bind returned, hence the wait).
        assert wait_for(lambda: sum(binds(SHARDS).values()) == len(first), timeout=10), binds(SHARDS)
        per_shard = binds(SHARDS)
        assert all(v > 0 for v in per_shard.values()), per_shard
        # The arbiter admits the allowed ServiceAccount's token only.
        holder = client.CoordinationV1Api(kube).read_namespaced_lease("koord-scheduler", namespace)
        address = arbiter_of(kube, leases_ns, holder.spec.holder_identity)
        assert forget_as(sec, address, sec.token_file.read_text()) == grpc.StatusCode.OK
        stranger = service_account_token(core, namespace, "stranger")
        assert forget_as(sec, address, stranger) == grpc.StatusCode.PERMISSION_DENIED
        assert forget_as(sec, address, None) == grpc.StatusCode.UNAUTHENTICATED

        # Kill a shard that does not host the arbiter (a leader's death is the elector's failover).
        leader = client.CoordinationV1Api(kube).read_namespaced_lease("koord-scheduler", namespace)
        victim = next(n for n in SHARDS if n != leader.spec.holder_identity)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait(timeout=10)
        survivors = [n for n in SHARDS if n != victim]
        # Its Lease stays (no delete); the survivors drop it once it expires by their own clocks.
        assert victim in live_shards(kube, leases_ns)
        for n in survivors:
            assert wait_for(lambda p=ports[n]: scrape(p).get(members) == 2, timeout=30), n
        theirs = [
            name for name, uid in uids.items() if name not in first and owns(victim, uid, sorted(SHARDS))
        ]
        assert theirs  # ~a third of the 56 pending pods
        add_nodes(core, tag, extra)
        nodes += extra
        assert wait_for(lambda: len(bound()) == PODS, timeout=60), len(bound())
        assert_no_overcommit(core, nodes)
        before = sum(per_shard[n] for n in survivors)
        assert wait_for(lambda: sum(binds(survivors).values()) - before == PODS - len(first), timeout=10)
        events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
        per_pod = Counter(e.involved_object.name for e in events)
        assert max(per_pod.values()) == 1  # no pod was bound twice
        assert lease_name(victim) in {
            x.metadata.name for x in client.CoordinationV1Api(kube).list_namespaced_lease(leases_ns).items
        }
    except AssertionError:
        for name, path in logs.items():
            print(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-40:]))
        raise
    finally:
        stop_all(procs.values(), 30)
        for name in {*nodes, *extra}:
            with contextlib.suppress(client.exceptions.ApiException):
                core.delete_node(name)


def arbiter_of(kube: Any, namespace: str, identity: str) -> str:
    lease = client.CoordinationV1Api(kube).read_namespaced_lease(lease_name(identity), namespace)
    return str(lease.metadata.annotations[ARBITER_ANNOTATION])


def assert_no_overcommit(core: Any, nodes: list[str]) -> None:
    san = core.api_client.sanitize_for_serialization
    for name in nodes:
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
        used: Counter[str] = Counter()
        for p in pods:
            used.update(to_values(pod_requests(san(p))))
        alloc = to_values(parse_resource_list(NODE))
        assert len(pods) <= int(NODE["pods"]), name
        for res, amount in used.items():
            assert amount <= alloc.get(res, 0), (name, res, amount, alloc)
