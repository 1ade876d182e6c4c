"""The parts of a cluster the differential harness plays itself (docs/testing.md#the-kube-scheduler-oracle):
no kube-controller-manager and no kubelet run beside the two schedulers, yet preemption reads what the
disruption controller writes, VolumeBinding's PreBind waits for the PV controller, and victims are
deleted gracefully. So, between pods:

- kubelet: every pod bound to a node gets a distinct `status.startTime` (seconds apart, in binding
  order: preemption orders victims and candidates by it, and without one kube takes `time.Now()` at
  each comparison, which would make its choice random), and a pod being deleted (a victim, deleted
  with the default grace period) is deleted at once (`force_delete_terminating`);
- disruption controller (`sync_pdbs`): each PodDisruptionBudget's status — its pods are those its
  selector matches in its namespace; healthy are those bound and not being deleted (the pods this
  kubelet runs are ready); `disruptionsAllowed` = healthy − minAvailable, at least 0;
- PV controller (`complete_bindings`): a new PV without a claimRef becomes `Available` (the only phase
  VolumeBinding binds); a PV whose `claimRef` names a claim not yet bound to it (what kube-scheduler's
  PreBind writes for a WaitForFirstConsumer claim; or a pre-bound pair as created) gets the claim's
  `volumeName` and `pv.kubernetes.io/bind-completed` set and both phases `Bound`, which is what PreBind
  polls for.
Imports: standard library, kubernetes client, tests.differential.checker.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.differential.checker import Obj, selector_matches

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
# The kubelet's start times: fixed, so a replayed seed orders its pods the same way.
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
POLICY = ("policy", "v1beta1")


def pdb_status(pdb: Obj, pods: list[Obj]) -> Obj:
    """The disruption controller's status of a budget with an integer minAvailable, over `pods`."""
    meta, spec = pdb["metadata"], pdb.get("spec") or {}
    ns = meta.get("namespace") or ""
    matching = [
        p
        for p in pods
        if (p["metadata"].get("namespace") or "") == ns
        and selector_matches(spec.get("selector"), p["metadata"].get("labels") or {})
    ]
    healthy = [
        p for p in matching if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]
    desired = int(spec.get("minAvailable") or 0)
    return {
        "observedGeneration": meta.get("generation") or 1,
        "disruptionsAllowed": max(0, len(healthy) - desired),
        "currentHealthy": len(healthy),
        "desiredHealthy": desired,
        "expectedPods": len(matching),
    }


class Controllers:
    """The controllers' state for one harness: the next start time, the PDB statuses last written."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.core: Any = client.CoreV1Api(api)  # Any: the client's optional fields, read as present
        self.custom: Any = client.CustomObjectsApi(api)
        self._started = 0
        self._written: dict[tuple[str, str], Obj] = {}

    # --- kubelet -----------------------------------------------------------------------------------
    def start(self, ns: str, name: str) -> None:
        """Records the bound pod `name` as started, one second after the previous one."""
        self._started += 1
        t = (EPOCH + timedelta(seconds=self._started)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.core.patch_namespaced_pod_status(name, ns, {"status": {"startTime": t, "phase": "Running"}})

    def force_delete_terminating(self, ns: str, timeout: float) -> list[str]:
        """Deletes at once every pod of `ns` with a deletionTimestamp and waits until they are gone;
        returns their names."""
        doomed = [
            p.metadata.name
            for p in self.core.list_namespaced_pod(ns).items
            if p.metadata.deletion_timestamp is not None
        ]
        for name in doomed:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        deadline = time.monotonic() + timeout
        while doomed and time.monotonic() < deadline:
            names = {p.metadata.name for p in self.core.list_namespaced_pod(ns).items}
            if not names & set(doomed):
                break
            time.sleep(0.01)
        return sorted(doomed)

    # --- disruption controller ---------------------------------------------------------------------
    def sync_pdbs(self, pdbs: list[Obj], pods: list[Obj]) -> bool:
        """Writes the status of each of `pdbs` (a namespace's) from `pods` (as plain objects); True when
        a `disruptionsAllowed` changed (what the schedulers read)."""
        changed = False
        for pdb in pdbs:
            meta = pdb["metadata"]
            ns = meta["namespace"]
            status = pdb_status(pdb, pods)
            key = (ns, meta["name"])
            if self._written.get(key) == status:
                continue
            before = self._written.get(key, {}).get("disruptionsAllowed")
            self.custom.patch_namespaced_custom_object_status(
                *POLICY, ns, "poddisruptionbudgets", meta["name"], {"status": status}
            )
            self._written[key] = status
            changed |= before != status["disruptionsAllowed"]
        return changed

    def list_pdbs(self, ns: str) -> list[Obj]:
        got = self.custom.list_namespaced_custom_object(*POLICY, ns, "poddisruptionbudgets")
        return list(got.get("items") or [])

    def forget(self, ns: str) -> None:
        self._written = {k: v for k, v in self._written.items() if k[0] != ns}

    # --- PV controller -----------------------------------------------------------------------------
    def complete_bindings(self, ns: str) -> int:
        """Binds each claim of `ns` a PV's claimRef points at, and makes a new PV without one Available
        (VolumeBinding matches only Available PVs); returns how many claims it bound."""
        done = 0
        for pv in self.core.list_persistent_volume().items:
            ref = pv.spec.claim_ref
            if ref is None and (pv.status is None or pv.status.phase in (None, "Pending")):
                self.core.patch_persistent_volume_status(pv.metadata.name, {"status": {"phase": "Available"}})
            if ref is None or ref.namespace != ns or not ref.name:
                continue
            try:
                claim = self.core.read_namespaced_persistent_volume_claim(ref.name, ns)
            except ApiException:
                continue
            annotations = claim.metadata.annotations or {}
            if (
                claim.spec.volume_name == pv.metadata.name
                and BIND_COMPLETED in annotations
                and (claim.status.phase == "Bound" and pv.status.phase == "Bound")
            ):
                continue
            self.core.patch_persistent_volume_status(pv.metadata.name, {"status": {"phase": "Bound"}})
            self.core.patch_namespaced_persistent_volume_claim(ref.name, ns, {
                "metadata": {"annotations": {BIND_COMPLETED: "yes"}},
                "spec": {"volumeName": pv.metadata.name}})  # fmt: skip
            self.core.patch_namespaced_persistent_volume_claim_status(
                ref.name,
                ns,
                {
                    "status": {
                        "phase": "Bound",
                        "accessModes": claim.spec.access_modes,
                        "capacity": pv.spec.capacity,
                    }
                },
            )
            done += 1
        return done

    def delete_pv(self, name: str) -> None:
        """Deletes a PV, lifting the pv-protection finalizer no controller would lift here."""
        with contextlib.suppress(ApiException):
            self.core.patch_persistent_volume(name, {"metadata": {"finalizers": None}})
        with contextlib.suppress(ApiException):
            self.core.delete_persistent_volume(name)

    def delete_claim(self, ns: str, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.patch_namespaced_persistent_volume_claim(name, ns, {"metadata": {"finalizers": None}})
        with contextlib.suppress(ApiException):
            self.core.delete_namespaced_persistent_volume_claim(name, ns)
