"""The in-process half of the differential comparison (docs/testing.md#the-kube-scheduler-oracle): koord's
profile run on the objects kube saw (a koord `Snapshot` through `scheduler.framework.runtime.Framework`),
against what kube logged for the same attempt: the feasible nodes, the FitError message, each compared
score plugin's weighted score on every node kube scored, and for an unschedulable pod kube's preemption
(tests/differential/preemption.py). The profile is the standalone koord's with preemption and volume
binding on; it reads PDBs, nominated pods, storage objects, Services and workload controllers through a
`scheduler.registry.Handle`, as koord-scheduler does from its informers.
Imports: standard library, numpy, koord.localcluster, scheduler, tests.differential.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from koord.localcluster.kubescheduler import Attempt
from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PreScorePlugin
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework, fit_error_message
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.volumes import PV, PVC, STORAGE_CLASS, VolumeObjects
from scheduler.registry import KNOWN, Handle, build_framework
from tests.differential import preemption
from tests.differential.checker import Obj, violations
from tests.differential.generator import scored_plugins
from tests.differential.records import Decision, Report, Seen, known


class InProcess:
    """koord's profile from the configuration file `config`, compared on the families' scores."""

    def __init__(self, config: Path, families: frozenset[str]) -> None:
        self.families = families
        self.scored = scored_plugins(families)
        self.pdbs: list[Obj] = []
        self.volumes = VolumeObjects()
        self.objects = ClusterObjects()
        self._workloads: dict[str, list[Obj]] = {}
        handle = Handle(
            objects=self.objects, pdbs=lambda: self.pdbs, nominated=NominatedPods(), volumes=self.volumes
        )
        self.framework = build_framework(load_config(config, KNOWN).profiles[0], handle)

    def compare(self, report: Report, miss: Any, seen: Seen, kube: Decision, attempt: Attempt) -> None:
        """koord's profile in-process on the cluster kube saw, against what kube logged (and, for an
        unschedulable pod, against kube's preemption: tests/differential/preemption.py)."""
        pod = json.loads(json.dumps(kube.pod))
        pod["spec"].pop("nodeName", None)
        pod.pop("status", None)
        nodes, bound = seen.nodes, seen.bound
        self.pdbs = seen.pdbs
        for kind, objs in ((PV, seen.pvs), (PVC, seen.pvcs), (STORAGE_CLASS, seen.classes)):
            for old in list(self.volumes.objects(kind).values()):
                self.volumes.on_delete(kind, old)
            for obj in objs:
                self.volumes.on_add(kind, obj)
        if seen.workloads is not self._workloads:  # a new case's Services and controllers
            for kind, objs in self._workloads.items():
                for obj in objs:
                    self.objects.on_delete(kind, obj)
            for kind, objs in seen.workloads.items():
                for obj in objs:
                    self.objects.on_add(kind, obj)
            self._workloads = seen.workloads
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
            if "priority-pdb" in self.families:
                statuses = (
                    dict.fromkeys(snap.names, rejected)
                    if rejected is not None
                    else (rejections.as_dict() if rejections is not None else {})
                )
                found, compared = preemption.compare(
                    fw, pod, snap, state, statuses, kube.nominated, kube.victims
                )
                report.preemption_checks += 1
                report.preemptions += compared
                for m in found:
                    miss(*m)
            return
        kube_feasible = sorted(
            next(iter(attempt.scores.values()), {}) or ([kube.node] if attempt.feasible == 1 else [])
        )
        if sorted(names) != kube_feasible:
            by_name = {n["metadata"]["name"]: n for n in nodes}
            why = {
                n: violations(
                    pod, by_name[n], [p for p in bound if p["spec"].get("nodeName") == n], seen.cluster()
                )
                or "fits"
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
            report.plugin_scores[kube_plugin] = report.plugin_scores.get(kube_plugin, 0) + len(want)
            if len(set(want.values())) > 1:
                report.plugin_varied[kube_plugin] = report.plugin_varied.get(kube_plugin, 0) + 1
            if got != want:
                diff = {
                    n: (want.get(n), got.get(n))
                    for n in sorted(set(want) | set(got))
                    if want.get(n) != got.get(n)
                }
                miss("score", want, got, f"{kube_plugin} vs koord {koord_plugin}: node: (kube, koord) {diff}")
