"""The differential harness: koord-scheduler against the real kube-scheduler v1.20.2 on one API server
(docs/testing.md#the-kube-scheduler-oracle).

Both schedulers run at once, each taking only pods addressed to it (`schedulerName`). A generated case
(tests/differential/generator.py) is created as API objects; then its pending pods go one at a time, in
lockstep: koord's copy `c-<pod>` is created and decided, then deleted; kube's copy `k-<pod>` is created
and decided, and stays bound (an unschedulable copy is deleted). So both decide every pod on the same
cluster — the same nodes, the same bound pods — whichever node ties sent the earlier pods to, and the
pods watch delivers each deletion before the next creation. Per pod it requires:

- the same outcome: both bound, or both unschedulable with the same FitError message;
- every placement, kube's and koord's, passes the independent checker (tests/differential/checker.py);
- in-process, koord's profile on the cluster kube saw (a koord `Snapshot` of the same objects run through
  `scheduler.framework.runtime.Framework`): the feasible nodes are the ones kube scored (or its single
  feasible node), the FitError message is kube's, and each compared score plugin's (weighted) score
  equals kube's logged one on every node kube scored. Node names are never compared: ties go to a random
  node in kube and in koord alike.

Cases are cleaned up (pods, nodes, the namespace, cluster-scoped objects) before the next one.
Imports: standard library, kubernetes client, koord.localcluster, scheduler (config, registry,
framework), tests.differential.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from koord.localcluster.controlplane import ControlPlane, free_ports
from koord.localcluster.kubescheduler import Attempt, KubeScheduler, parse_log, scheduler_config
from koord.localcluster.procs import spawn_logged, stop_process
from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PreScorePlugin
from scheduler.framework.runtime import Framework, fit_error_message
from scheduler.framework.snapshot import Snapshot
from scheduler.registry import KNOWN, build_framework
from tests.differential.checker import violations
from tests.differential.generator import ENABLED, Case, Obj, generate, scored_plugins

KUBE = "kube-oracle"
KOORD = "koord-diff"
REPO = Path(__file__).resolve().parents[2]
DECISION_TIMEOUT_S = 30.0
# Between one pod's decision and the next pod: a scheduler's cache and queue are fed by separate
# informer handlers, so a new pod could in principle be taken before the previous event is applied.
SETTLE_S = 0.02
SYNC_LABEL = "koord.sh/differential-sync"
# Known koord differences, each a reason string koord writes → the one kube-scheduler 1.20.2 writes,
# applied to koord's FitError messages before they are compared (and counted in Report.known). Deleting
# an entry turns its check back on.
KNOWN_REASONS: dict[str, str] = {}


def known(message: str) -> str:
    """koord's FitError message with KNOWN_REASONS replaced by kube's wording."""
    for koord_reason, kube_reason in KNOWN_REASONS.items():
        message = message.replace(koord_reason, kube_reason)
    return message


def koord_config(scheduler_name: str, kubeconfig: Path) -> Obj:
    """koord-scheduler's configuration: kube's (the default profile, every node scored), in `v1beta2`,
    whose defaults are 1.20's with the LeastAllocated score given by NodeResourcesFit (koord runs 1.20's
    profile that way; `v1beta1` names NodeResourcesLeastAllocated, which koord does not register), and
    without LoadAwareScheduling (it needs NodeMetrics; kube has no such plugin)."""
    doc: Obj = dict(scheduler_config(kubeconfig, scheduler_name, 1))
    doc["apiVersion"] = "kubescheduler.config.k8s.io/v1beta2"
    off = {"disabled": [{"name": "LoadAwareScheduling"}]}
    doc["profiles"] = [
        {"schedulerName": scheduler_name, "plugins": {"filter": off, "score": off, "reserve": off}}
    ]
    return doc


@dataclass
class Mismatch:
    seed: int
    pod: str
    # outcome, fit-error, constraint-kube, constraint-koord, feasible, in-process-fit-error, score, log,
    # harness-race
    kind: str
    kube: Any
    koord: Any
    detail: str = ""


@dataclass
class Report:
    seeds: int = 0
    pods: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    scored_pods: int = 0
    score_comparisons: int = 0
    known: int = 0
    """FitError messages that matched only through KNOWN_REASONS."""
    mismatches: list[Mismatch] = field(default_factory=list)
    families: list[str] = field(default_factory=list)

    def add(self, other: Report) -> None:
        self.seeds += other.seeds
        self.pods += other.pods
        self.scheduled += other.scheduled
        self.unschedulable += other.unschedulable
        self.scored_pods += other.scored_pods
        self.score_comparisons += other.score_comparisons
        self.known += other.known
        self.mismatches.extend(other.mismatches)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mismatches"] = len(self.mismatches)
        d["mismatch_details"] = [asdict(m) for m in self.mismatches]
        return d


@dataclass
class Decision:
    node: str | None
    message: str | None
    pod: Obj


class KoordScheduler:
    """koord-scheduler standalone (`python -m scheduler.main`), leader election off, ready on /readyz."""

    def __init__(self, cp: ControlPlane, config: Path, state_dir: Path) -> None:
        self.cp, self.config, self.state_dir = cp, config, state_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0

    @property
    def log_path(self) -> Path:
        return self.state_dir / "koord-scheduler.log"

    def spawn(self) -> None:
        """Starts the process; `wait_ready` waits for it (kube-scheduler starts meanwhile)."""
        (self._port,) = free_ports(1)
        self._proc = spawn_logged(self.log_path, [
            sys.executable, "-m", "scheduler.main", f"--kubeconfig={self.cp.kubeconfig_path}",
            f"--config={self.config}", "--no-leader-elect", f"--metrics-port={self._port}",
            "--bind-workers=2",
        ], die_with_parent=True)  # fmt: skip

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self._proc is not None, "not spawned"
        port = self._port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"koord-scheduler exited during start:\n{tail}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r,
            ):
                if r.status == 200:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"koord-scheduler not ready after {timeout:.0f}s; log {self.log_path}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc)


class Differential:
    """`with Differential(cp, workdir) as d: report = d.run(seed)`."""

    def __init__(self, cp: ControlPlane, workdir: Path, families: frozenset[str] = ENABLED) -> None:
        self.cp, self.workdir, self.families = cp, workdir, families
        self.scored = scored_plugins(families)
        workdir.mkdir(parents=True, exist_ok=True)
        self.koord_config = workdir / "koord-scheduler.config.json"
        self.koord_config.write_text(json.dumps(koord_config(KOORD, cp.kubeconfig_path)))
        self.kube = KubeScheduler(cp, KUBE, workdir / "kube")
        self.koord = KoordScheduler(cp, self.koord_config, workdir)
        # koord's profile in-process, the same configuration file as the standalone scheduler's
        self.framework = build_framework(load_config(self.koord_config, KNOWN).profiles[0])
        self.api: Any = None
        self._log_pos = 0  # bytes of kube's log read so far
        self._log = ""  # the complete lines of kube's log read since the case began

    def __enter__(self) -> Differential:
        self.api = self.cp.api_client()
        try:
            self.koord.spawn()  # both start at once: koord's imports take seconds
            self.kube.start()
            self.koord.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.koord.stop()
        self.kube.stop()
        if self.api is not None:
            self.api.close()
            self.api = None

    # --- one case ----------------------------------------------------------------------------------
    def run(self, seed: int, **size: int) -> Report:
        case = generate(seed, self.families, **size)
        core = client.CoreV1Api(self.api)
        ns = f"diff-{seed}-{uuid.uuid4().hex[:6]}"
        report = Report(seeds=1, families=sorted(self.families))
        core.create_namespace({"metadata": {"name": ns}})
        self._pull_log()
        self._log = ""
        try:
            self._create(case, ns)
            self._sync(core, ns, case.nodes[-1]["metadata"]["name"])
            decided: list[tuple[Obj, list[Obj], list[Obj], Decision, Decision]] = []
            for pod in case.pending:
                time.sleep(SETTLE_S)
                nodes = [self._plain(n) for n in core.list_node().items]
                bound = [self._plain(p) for p in core.list_pod_for_all_namespaces().items if p.spec.node_name]
                koord = self._decide(core, ns, pod, "c-", KOORD, keep=False)
                kube = self._decide(core, ns, pod, "k-", KUBE, keep=True)
                decided.append((pod, nodes, bound, kube, koord))
            attempts = self._kube_attempts(ns, [d[3] for d in decided])
            for pod, nodes, bound, kube, koord in decided:
                report.pods += 1
                self._compare(report, seed, ns, pod["metadata"]["name"], nodes, bound, kube, koord, attempts)
        finally:
            self._cleanup(core, ns, case)
        return report

    def _plain(self, obj: Any) -> Obj:
        return self.api.sanitize_for_serialization(obj)  # type: ignore[no-any-return]

    def _create(self, case: Case, ns: str) -> None:
        core = client.CoreV1Api(self.api)
        for obj in case.extra:
            self._create_extra(obj, ns)
        for node in case.nodes:
            core.create_node(node)
            # Admission taints a new node not-ready; no node lifecycle controller lifts it here: set the
            # generated taints (a merge patch replaces the list).
            core.patch_node(
                node["metadata"]["name"], {"spec": {"taints": node["spec"].get("taints") or None}}
            )
        # The last node event, for _sync: a scheduler that saw it saw every node as created and patched.
        last = case.nodes[-1]["metadata"]["name"]
        core.patch_node(last, {"metadata": {"labels": {SYNC_LABEL: "yes"}}})
        for pod in case.bound:
            body = json.loads(json.dumps(pod))
            body["spec"]["schedulerName"] = "diff-none"
            core.create_namespaced_pod(ns, body)

    def _create_extra(self, obj: Obj, ns: str) -> None:
        kind = obj["kind"]
        if kind == "PriorityClass":
            client.SchedulingV1Api(self.api).create_priority_class(obj)
        elif kind == "PodDisruptionBudget":  # policy/v1beta1 (1.20), which the client has no class for
            client.CustomObjectsApi(self.api).create_namespaced_custom_object(
                "policy", "v1beta1", ns, "poddisruptionbudgets", obj
            )
        elif kind == "StorageClass":
            client.StorageV1Api(self.api).create_storage_class(obj)
        elif kind == "PersistentVolume":
            client.CoreV1Api(self.api).create_persistent_volume(obj)
        elif kind == "PersistentVolumeClaim":
            client.CoreV1Api(self.api).create_namespaced_persistent_volume_claim(ns, obj)
        else:
            raise ValueError(f"kind {kind!r}: the harness does not create it")

    def _sync(self, core: Any, ns: str, last: str) -> None:
        """Waits until both schedulers saw every node event: a probe pod each, tolerating everything,
        without requests, held to the last node by its last event (SYNC_LABEL); the nodes watch delivers
        in order. It binds, or finds that node full ("Too many pods") among all the nodes."""
        total = len(core.list_node().items)
        for name in (KOORD, KUBE):
            deadline = time.monotonic() + DECISION_TIMEOUT_S
            while True:
                probe = {"metadata": {"name": f"sync-{name}"}, "spec": {
                    "schedulerName": name,
                    "nodeSelector": {"kubernetes.io/hostname": last, SYNC_LABEL: "yes"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
                d = self._await(core, ns, core.create_namespaced_pod(ns, probe).metadata.name)
                self._pull_log()
                mark = len(self._log)
                self._delete(core, ns, f"sync-{name}")
                if d.node is not None and name == KOORD:  # as in _decide
                    self._await_log(f"delete event for scheduled pod {ns}/sync-{name} ", mark)
                message = d.message or ""
                if d.node is not None or (message.startswith(f"0/{total} ") and "1 Too many pods" in message):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not see all {total} nodes: {d.message}")
                time.sleep(0.2)

    def _decide(self, core: Any, ns: str, pod: Obj, prefix: str, scheduler: str, keep: bool) -> Decision:
        name = prefix + pod["metadata"]["name"]
        body = json.loads(json.dumps(pod))
        body["metadata"]["name"] = name
        body["spec"]["schedulerName"] = scheduler
        core.create_namespaced_pod(ns, body)
        d = self._await(core, ns, name)
        if not keep or d.node is None:
            self._pull_log()
            mark = len(self._log)
            self._delete(core, ns, name)
            if d.node is not None and scheduler != KUBE:
                # kube-scheduler's cache and queue are fed by separate informer listeners: the next
                # pod must not reach its queue before this deletion reaches its cache.
                self._await_log(f"delete event for scheduled pod {ns}/{name} ", mark)
        return d

    def _pull_log(self) -> None:
        """Appends the complete lines kube-scheduler logged since the last pull."""
        with self.kube.log_path.open("rb") as f:
            f.seek(self._log_pos)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._log_pos += end
        self._log += data[:end].decode(errors="replace")

    def _await_log(self, needle: str, start: int, timeout: float = DECISION_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self._log[start:]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kube-scheduler did not log {needle!r} within {timeout:.0f}s")
            time.sleep(0.005)
            self._pull_log()

    def _await(self, core: Any, ns: str, name: str) -> Decision:
        deadline = time.monotonic() + DECISION_TIMEOUT_S
        while time.monotonic() < deadline:
            p = core.read_namespaced_pod(name, ns)
            if p.spec.node_name:
                return Decision(p.spec.node_name, None, self._plain(p))
            for c in p.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                    return Decision(None, c.message, self._plain(p))
            time.sleep(0.01)
        raise TimeoutError(f"pod {ns}/{name}: no scheduling decision within {DECISION_TIMEOUT_S:.0f}s")

    @staticmethod
    def _delete(core: Any, ns: str, name: str) -> None:
        with contextlib.suppress(ApiException):
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        deadline = time.monotonic() + DECISION_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                core.read_namespaced_pod(name, ns)
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            time.sleep(0.01)
        raise TimeoutError(f"pod {ns}/{name} still there after deletion")

    def _kube_attempts(self, ns: str, kube: list[Decision]) -> dict[str, list[Attempt]]:
        """kube's log of this case, once it holds the last pod's decision (stderr is unbuffered; the
        bind is logged asynchronously after the API server has it)."""
        want = [f"{ns}/{d.pod['metadata']['name']}" for d in kube]
        deadline = time.monotonic() + 10
        while True:
            self._pull_log()
            parsed = parse_log(self._log)
            done = all(
                any(a.node is not None or a.fit_error is not None for a in parsed.get(k, [])) for k in want
            )
            if done or time.monotonic() > deadline:
                return parsed
            time.sleep(0.05)

    # --- comparison --------------------------------------------------------------------------------
    def _compare(
        self, report: Report, seed: int, ns: str, name: str, nodes: list[Obj], bound: list[Obj],
        kube: Decision, koord: Decision, attempts: dict[str, list[Attempt]],
    ) -> None:  # fmt: skip
        def miss(kind: str, k: Any, c: Any, detail: str = "") -> None:
            report.mismatches.append(Mismatch(seed, name, kind, k, c, detail))

        if (kube.node is None) != (koord.node is None):
            miss("outcome", kube.node or kube.message, koord.node or koord.message)
        elif kube.node is None:
            report.unschedulable += 1
            if kube.message != koord.message:
                if kube.message == known(koord.message or ""):
                    report.known += 1
                else:
                    miss("fit-error", kube.message, koord.message)
        else:
            report.scheduled += 1
        by_name = {n["metadata"]["name"]: n for n in nodes}
        for who, d in (("kube", kube), ("koord", koord)):
            if d.node is not None:
                on = [p for p in bound if p["spec"].get("nodeName") == d.node]
                if broken := violations(d.pod, by_name[d.node], on):
                    miss(f"constraint-{who}", d.node if who == "kube" else None,
                         d.node if who == "koord" else None, "; ".join(broken))  # fmt: skip
        tried = attempts.get(f"{ns}/{kube.pod['metadata']['name']}") or []
        if not tried:
            miss("log", "no attempt logged", None)
            return
        if kube.node is not None and tried[0].fit_error is not None:
            # Not koord's: kube decided this pod on a cluster other than the one listed for it.
            miss("harness-race", tried[0].fit_error, None, "kube's first attempt failed, a retry bound it")
            return
        self._compare_in_process(report, miss, nodes, bound, kube, tried[0])

    def _compare_in_process(
        self, report: Report, miss: Any, nodes: list[Obj], bound: list[Obj], kube: Decision, attempt: Attempt
    ) -> None:
        """koord's profile in-process on the cluster kube saw, against what kube logged."""
        pod = json.loads(json.dumps(kube.pod))
        pod["spec"].pop("nodeName", None)
        pod.pop("status", None)
        fw = self.framework
        snap = Snapshot.build(nodes, bound)
        state = CycleState(time.time())
        pre = [p.pre_filter(state, pod, snap) for p in fw.pre_filters]
        rejected = next((s for s in pre if not s.is_success() and not s.is_skip()), None)
        feasible, rejections = fw.filter_all(state, pod, snap) if rejected is None else ([], None)
        names = [snap.names[int(i)] for i in feasible]
        if kube.node is None:
            msg = (
                rejected.message()
                if rejected is not None
                else fit_error_message(
                    snap.n, rejections.as_dict().values() if rejections is not None else ()
                )
            )
            if names or known(msg) != attempt.fit_error:
                miss("in-process-fit-error", attempt.fit_error, names or msg)
            return
        kube_feasible = sorted(
            next(iter(attempt.scores.values()), {}) or ([kube.node] if attempt.feasible == 1 else [])
        )
        if sorted(names) != kube_feasible:
            by_name = {n["metadata"]["name"]: n for n in nodes}
            why = {
                n: violations(pod, by_name[n], [p for p in bound if p["spec"].get("nodeName") == n]) or "fits"
                for n in sorted(set(names) ^ set(kube_feasible))
            }
            miss(
                "feasible",
                kube_feasible,
                sorted(names),
                f"independent checker on the nodes in dispute: {why}",
            )
            return
        if not attempt.scores:
            return
        report.scored_pods += 1
        weights = dict(zip((p.name for p in fw.scores), fw.weights, strict=True))
        rows = np.asarray(feasible, np.int64)
        for kube_plugin, koord_plugins in self.scored.items():
            plugin = next((p for name in koord_plugins for p in fw.scores if p.name == name), None)
            if plugin is None:
                miss("score", kube_plugin, None, f"koord has no score plugin of {koord_plugins}")
                continue
            koord_plugin = plugin.name
            one = Framework([plugin], {plugin.name: weights[plugin.name]})
            st = state.clone()
            if isinstance(plugin, PreScorePlugin):
                plugin.pre_score(st, pod, snap, rows)
            got = dict(zip(names, one.score_all(st, pod, snap, rows).tolist(), strict=True))
            want = attempt.scores.get(kube_plugin, {})
            report.score_comparisons += len(want)
            if got != want:
                diff = {
                    n: (want.get(n), got.get(n))
                    for n in sorted(set(want) | set(got))
                    if want.get(n) != got.get(n)
                }
                miss("score", want, got, f"{kube_plugin} vs koord {koord_plugin}: node: (kube, koord) {diff}")

    def _cleanup(self, core: Any, ns: str, case: Case) -> None:
        with contextlib.suppress(ApiException):
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for node in case.nodes:
            with contextlib.suppress(ApiException):
                core.delete_node(node["metadata"]["name"])
        for obj in case.extra:
            with contextlib.suppress(ApiException):
                self._delete_extra(obj, ns)
        with contextlib.suppress(ApiException):
            core.delete_namespace(ns)

    def _delete_extra(self, obj: Obj, ns: str) -> None:
        name, kind = obj["metadata"]["name"], obj["kind"]
        if kind == "PriorityClass":
            client.SchedulingV1Api(self.api).delete_priority_class(name)
        elif kind == "PodDisruptionBudget":
            client.CustomObjectsApi(self.api).delete_namespaced_custom_object(
                "policy", "v1beta1", ns, "poddisruptionbudgets", name
            )
        elif kind == "StorageClass":
            client.StorageV1Api(self.api).delete_storage_class(name)
        elif kind == "PersistentVolume":
            client.CoreV1Api(self.api).delete_persistent_volume(name)
        elif kind == "PersistentVolumeClaim":
            client.CoreV1Api(self.api).delete_namespaced_persistent_volume_claim(name, ns)
