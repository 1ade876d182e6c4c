"""The differential harness: koord-scheduler against the real kube-scheduler v1.20.2 on one API server
(docs/testing.md#the-kube-scheduler-oracle).

Both schedulers run at once, each taking only pods addressed to it (`schedulerName`). A generated case
(tests/differential/generator.py) is created as API objects; then its pending pods go one at a time, in
lockstep: koord's copy `c-<pod>` is created and decided, then deleted; kube's copy `k-<pod>` is created
and decided, and stays bound (an unschedulable copy is deleted). So both decide every pod on the same
cluster — the same nodes, the same bound pods, PVs, claims and PDB statuses — whichever node ties sent
the earlier pods to, and the pods watch delivers each deletion before the next creation.

Keeping the copies apart. Only kube's copy may change the cluster beyond itself: koord's live copy runs
with DefaultPreemption off at postFilter and VolumeBinding off at reserve and preBind (`koord_config`), so
it decides without deleting kube's pods or binding the claims kube's copy is about to decide on. koord's
preemption is compared in-process instead (tests/differential/preemption.py), and its volume decisions
through the outcome, the FitError and the in-process filters. kube's copy preempts for real: its first
attempt fails with the FitError and a `nominatedNodeName`; the pods it deleted (still terminating, with
no kubelet) are its victims, which the harness then deletes at once; its retry binds it. With no
controller manager or kubelet, the harness plays their parts (tests/differential/controllers.py): pod
start times, PDB statuses, PV phases and the completion of claim bindings that kube's PreBind waits for.

Per pod it requires:
- the same outcome of the first attempt: both bound, or both unschedulable with the same FitError;
- every placement, kube's (after preempting, on the cluster without its victims; with claims, each
  bound to a PV that fits the node) and koord's, passes the independent checker
  (tests/differential/checker.py);
- in-process, koord's profile on the cluster kube saw (a koord `Snapshot` of the same objects run through
  `scheduler.framework.runtime.Framework`, PDBs, nominated pods and storage objects given through a
  `scheduler.registry.Handle` as in production): the feasible nodes are the ones kube scored (or its
  single feasible node), the FitError message is kube's, each compared score plugin's (weighted) score
  equals kube's logged one on every node kube scored, and for an unschedulable pod kube's preemption
  (or its absence) agrees with koord's candidates: kube's node among koord's tied best, koord's victims
  there the pods kube deleted. Node names are otherwise never compared: ties go to a random node in kube
  and in koord alike.

With the selector-spread family, both profiles enable SelectorSpread, which 1.20.2's default profile
leaves out (tests/differential/koordproc.py SELECTOR_SPREAD). Cases are cleaned up (pods, nodes, the
namespace, cluster-scoped objects; tests/differential/caseobjects.py) before the next one.
Imports: standard library, kubernetes client, koord.localcluster, tests.differential.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from koord.localcluster.controlplane import ControlPlane
from koord.localcluster.kubescheduler import Attempt, KubeScheduler, parse_log
from tests.differential.caseobjects import WORKLOADS, create_extra, delete_extra, list_workloads
from tests.differential.checker import bound_claim_violations, violations
from tests.differential.controllers import Controllers
from tests.differential.generator import ENABLED, Case, Obj, generate
from tests.differential.inprocess import InProcess
from tests.differential.koordproc import SELECTOR_SPREAD, KoordScheduler, koord_config
from tests.differential.records import KNOWN_REASONS, Decision, Mismatch, Report, Seen, known

__all__ = ["KNOWN_REASONS", "WORKLOADS", "Differential", "Report", "known", "koord_config"]

KUBE = "kube-oracle"
KOORD = "koord-diff"
REPO = Path(__file__).resolve().parents[2]
DECISION_TIMEOUT_S = 30.0
# A preemptor binds at its retry, after its backoff (1 s) once its victims are gone.
PREEMPTOR_BIND_TIMEOUT_S = 15.0
# Between one pod's decision and the next pod: a scheduler's cache and queue are fed by separate
# informer handlers, so a new pod could in principle be taken before the previous event is applied.
SETTLE_S = 0.02
SYNC_LABEL = "koord.sh/differential-sync"


class Differential:
    """`with Differential(cp, workdir) as d: report = d.run(seed)`."""

    def __init__(self, cp: ControlPlane, workdir: Path, families: frozenset[str] = ENABLED) -> None:
        self.cp, self.workdir, self.families = cp, workdir, families
        workdir.mkdir(parents=True, exist_ok=True)
        self.koord_config = workdir / "koord-scheduler.config.json"
        spread = "selector-spread" in families
        self.koord_config.write_text(
            json.dumps(koord_config(KOORD, cp.kubeconfig_path, selector_spread=spread))
        )
        self.kube = KubeScheduler(cp, KUBE, workdir / "kube", plugins=SELECTOR_SPREAD if spread else None)
        self.koord = KoordScheduler(cp, self.koord_config, workdir)
        whole = workdir / "koord-in-process.config.json"
        whole.write_text(
            json.dumps(koord_config(KOORD, cp.kubeconfig_path, live=False, selector_spread=spread))
        )
        self.in_process = InProcess(whole, families)
        self.ctl: Controllers | None = None
        self.api: Any = None
        self._log_pos = 0  # bytes of kube's log read so far
        self._log = ""  # the complete lines of kube's log read since the case began
        self._objects: dict[str, list[Obj]] = {}  # the case's workloads (list_workloads)

    def __enter__(self) -> Differential:
        self.api = self.cp.api_client()
        self.ctl = Controllers(self.api)
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
            self._objects = list_workloads(self.api, ns)
            decided: list[tuple[Obj, Seen, Decision, Decision]] = []
            for pod in case.pending:
                time.sleep(SETTLE_S)
                seen = self._seen(core, ns)
                koord = self._decide(core, ns, pod, "c-", KOORD, keep=False)
                kube = self._decide_kube(core, ns, pod)
                decided.append((pod, seen, kube, koord))
            attempts = self._kube_attempts(ns, [d[2] for d in decided])
            for pod, seen, kube, koord in decided:
                report.pods += 1
                self._compare(report, seed, ns, pod["metadata"]["name"], seen, kube, koord, attempts)
        finally:
            self._cleanup(core, ns, case)
        return report

    def _plain(self, obj: Any) -> Obj:
        return self.api.sanitize_for_serialization(obj)  # type: ignore[no-any-return]

    @staticmethod
    def _list(call: Any, *args: Any) -> list[Obj]:
        """A list call's items as the API server's JSON (the client's models are slow to build)."""
        return list(json.loads(call(*args, _preload_content=False).data)["items"])

    def _seen(self, core: Any, ns: str) -> Seen:
        """Brings the PDB statuses up to date, then lists what both copies will decide on."""
        assert self.ctl is not None
        pods = self._list(core.list_pod_for_all_namespaces)
        pdbs = self.ctl.list_pdbs(ns)
        # No wait for the schedulers' PDB informers: only kube's copy preempts, and it is created after
        # koord's copy was decided and deleted, long after the status reached the informers.
        if self.ctl.sync_pdbs(pdbs, pods):
            pdbs = self.ctl.list_pdbs(ns)
        storage = client.StorageV1Api(self.api)
        return Seen(
            nodes=self._list(core.list_node),
            bound=[p for p in pods if p["spec"].get("nodeName")],
            pvs=self._list(core.list_persistent_volume),
            pvcs=self._list(core.list_namespaced_persistent_volume_claim, ns),
            classes=self._list(storage.list_storage_class),
            pdbs=pdbs,
            workloads=self._objects,
        )

    def _create(self, case: Case, ns: str) -> None:
        core = client.CoreV1Api(self.api)
        for obj in case.extra:
            create_extra(self.api, obj, ns)
        for node in case.nodes:
            core.create_node(node)
        # Admission taints a new node not-ready; no node lifecycle controller lifts it here: set the
        # generated taints (a merge patch replaces the list) once every node exists. Each update also
        # makes kube's cache recount, for the node's image summaries, the nodes listing each image (it
        # counts at a node's add or update): counted with every node there, as koord counts. The last
        # node's patch is the last node event, for _sync: a scheduler that saw it saw every node.
        for node in case.nodes:
            core.patch_node(node["metadata"]["name"], {
                "metadata": {"labels": {SYNC_LABEL: "yes"}},
                "spec": {"taints": node["spec"].get("taints") or None}})  # fmt: skip
        for pod in case.bound:
            body = json.loads(json.dumps(pod))
            body["spec"]["schedulerName"] = "diff-none"
            core.create_namespaced_pod(ns, body)
        assert self.ctl is not None
        for pod in case.bound:
            self.ctl.start(ns, pod["metadata"]["name"])
        self.ctl.complete_bindings(ns)

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

    def _decide_kube(self, core: Any, ns: str, pod: Obj) -> Decision:
        """kube's copy, kept when bound. Meanwhile the harness is its PV controller; when it preempts,
        its victims' kubelet (they go at once) and then waits for its retry to bind it."""
        assert self.ctl is not None
        ctl = self.ctl
        name = "k-" + pod["metadata"]["name"]
        body = json.loads(json.dumps(pod))
        body["metadata"]["name"] = name
        body["spec"]["schedulerName"] = KUBE
        core.create_namespaced_pod(ns, body)
        claims = any(v.get("persistentVolumeClaim") for v in body["spec"].get("volumes") or [])

        def tick() -> None:
            if claims:
                ctl.complete_bindings(ns)

        d = self._await(core, ns, name, tick)
        d.reread_as_retry()
        nominated = (d.pod.get("status") or {}).get("nominatedNodeName")
        if d.node is None and nominated:
            d.nominated = nominated
            d.victims = ctl.force_delete_terminating(ns, DECISION_TIMEOUT_S)
            with contextlib.suppress(TimeoutError):
                again = self._await(core, ns, name, tick, bound=True, timeout=PREEMPTOR_BIND_TIMEOUT_S)
                d.final, d.pod = again.node, again.pod
        if d.placed is None:
            self._delete(core, ns, name)
            return d
        ctl.start(ns, name)
        if claims:
            d.volumes = (
                [self._plain(v) for v in core.list_persistent_volume().items],
                [self._plain(c) for c in core.list_namespaced_persistent_volume_claim(ns).items],
            )
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

    def _await(
        self, core: Any, ns: str, name: str, tick: Any = None, bound: bool = False,
        timeout: float = DECISION_TIMEOUT_S,
    ) -> Decision:  # fmt: skip
        """The pod's first decision (with `bound`, its binding); `tick()` runs between reads."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = core.read_namespaced_pod(name, ns)
            if p.spec.node_name:
                return Decision(p.spec.node_name, None, self._plain(p))
            for c in p.status.conditions or []:
                if bound:
                    break
                if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                    return Decision(None, c.message, self._plain(p))
            if tick is not None:
                tick()
            time.sleep(0.01)
        raise TimeoutError(f"pod {ns}/{name}: no scheduling decision within {timeout:.0f}s")

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
        self, report: Report, seed: int, ns: str, name: str, seen: Seen,
        kube: Decision, koord: Decision, attempts: dict[str, list[Attempt]],
    ) -> None:  # fmt: skip
        def miss(kind: str, k: Any, c: Any, detail: str = "") -> None:
            report.mismatches.append(Mismatch(seed, name, kind, k, c, detail))

        tried = attempts.get(f"{ns}/{kube.pod['metadata']['name']}") or []
        if kube.nominated is not None and kube.message is None and tried:  # (Decision.reread_as_retry)
            kube.message = tried[0].fit_error
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
        by_name = {n["metadata"]["name"]: n for n in seen.nodes}
        # kube's copy placed after preempting is checked on the cluster without its victims.
        for who, d, gone in (("kube", kube, frozenset(kube.victims)), ("koord", koord, frozenset())):
            node = d.placed
            if node is None:
                continue
            cluster = seen.cluster(gone)
            on = [p for p in cluster.pods if p["spec"].get("nodeName") == node]
            broken = violations(d.pod, by_name[node], on, cluster)
            if d.volumes is not None:
                broken += bound_claim_violations(d.pod, by_name[node], *d.volumes)
            if broken:
                miss(f"constraint-{who}", node if who == "kube" else None,
                     node if who == "koord" else None, "; ".join(broken))  # fmt: skip
        if any(v.get("persistentVolumeClaim") for v in kube.pod["spec"].get("volumes") or []):
            if kube.placed is not None and kube.volumes is not None:
                report.volume_pods_bound += 1
                was = {c["metadata"]["name"]: c["spec"].get("volumeName") for c in seen.pvcs}
                now = {c["metadata"]["name"]: c["spec"].get("volumeName") for c in kube.volumes[1]}
                report.claims_bound += sum(1 for c, v in now.items() if v and not was.get(c))
            else:
                report.volume_pods_refused += 1
        if not tried:
            miss("log", "no attempt logged", None)
            return
        if kube.node is not None and tried[0].fit_error is not None:
            # Not koord's: kube decided this pod on a cluster other than the one listed for it.
            miss("harness-race", tried[0].fit_error, None, "kube's first attempt failed, a retry bound it")
            return
        if kube.nominated is not None and kube.final is None:
            miss("harness-race", kube.nominated, None, "kube preempted but its retry did not bind it")
        self.in_process.compare(report, miss, seen, kube, tried[0])

    def _cleanup(self, core: Any, ns: str, case: Case) -> None:
        with contextlib.suppress(ApiException):
            core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for node in case.nodes:
            with contextlib.suppress(ApiException):
                core.delete_node(node["metadata"]["name"])
        for obj in case.extra:
            with contextlib.suppress(ApiException):
                delete_extra(self.api, self.ctl, obj, ns)
        with contextlib.suppress(ApiException):
            core.delete_namespace(ns)
        if self.ctl is not None:
            self.ctl.forget(ns)
