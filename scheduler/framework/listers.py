"""ClusterObjects: the cluster's Services, ReplicationControllers, ReplicaSets and StatefulSets as the
scheduler's informers deliver them, and the lookups kube-scheduler's spreading plugins make with
client-go listers (docs/rules/scheduler-spread.md#default-selector): the objects of each kind whose
selector matches a pod in its namespace, and the selector all of them make together
(``helper.DefaultSelector`` of kube-scheduler v1.20).

Thread-safe like the scheduler cache: informer callbacks (``on_add``/``on_update``/``on_delete``) and
scheduling cycles may run on different threads. A pod's default selector depends only on its
namespace and labels, so it is kept per (namespace, labels) until the next change of any object.
Imports: standard library, apis (jsonfields, kubeobjects, labelselector).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.jsonfields import as_mapping
from apis.kubeobjects import Pod
from apis.labelselector import OP_IN, LabelSelector, LabelSelectorError, Requirement

SERVICE: Final = "Service"
REPLICATION_CONTROLLER: Final = "ReplicationController"
REPLICA_SET: Final = "ReplicaSet"
STATEFUL_SET: Final = "StatefulSet"
KINDS: Final = (SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET)

#: A selector as a conjunction of requirements (``matchLabels`` entries become ``In`` one value,
#: which is what ``=`` means); the empty tuple matches every label set.
Requirements = tuple[Requirement, ...]


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (a JSON null value reads as "", as Go decodes it)."""
    raw = as_mapping(as_mapping(obj.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


def namespace_of(obj: Mapping[str, Any]) -> str:
    ns = as_mapping(obj.get("metadata")).get("namespace")
    return ns if isinstance(ns, str) else ""


def _name_of(obj: Mapping[str, Any]) -> str:
    name = as_mapping(obj.get("metadata")).get("name")
    return name if isinstance(name, str) else ""


def matches(reqs: Requirements, labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in reqs)


def canonical(reqs: Requirements) -> Requirements:
    """The same conjunction, without repeats and in a stable order (usable as a cache key)."""
    return tuple(sorted(set(reqs), key=lambda r: (r.key, r.operator, r.values)))


def map_requirements(selector: Mapping[str, str]) -> Requirements:
    """``labels.Set(m).AsSelector()``: one equality per entry."""
    return tuple(Requirement(k, OP_IN, (v,)) for k, v in sorted(selector.items()))


def selector_requirements(selector: LabelSelector) -> Requirements:
    """``metav1.LabelSelectorAsSelector`` of a valid selector, as requirements."""
    return map_requirements(dict(selector.match_labels)) + tuple(selector.match_expressions)


_INVALID: Final = object()  # a ReplicaSet/StatefulSet selector LabelSelectorAsSelector refuses


@dataclass(frozen=True, slots=True)
class _Entry:
    """One stored object and its compiled selector: a label map (Service, RC; None when unset), the
    requirements of a LabelSelector (RS, SS; None when unset), or ``_INVALID``."""

    obj: Mapping[str, Any]
    selector: object


def _compile(kind: str, obj: Mapping[str, Any]) -> _Entry:
    raw = as_mapping(obj.get("spec")).get("selector")
    if kind in (SERVICE, REPLICATION_CONTROLLER):
        if not isinstance(raw, Mapping):
            return _Entry(obj, None)
        return _Entry(obj, {str(k): v if isinstance(v, str) else "" for k, v in raw.items()})
    if raw is None:
        return _Entry(obj, None)
    try:
        return _Entry(obj, selector_requirements(LabelSelector.from_dict(raw)))
    except LabelSelectorError:
        return _Entry(obj, _INVALID)


class ClusterObjects:
    """The objects of KINDS by namespace and name; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, dict[str, dict[str, _Entry]]] = {k: {} for k in KINDS}  # kind → ns → name
        self._selectors: dict[tuple[str, frozenset[tuple[str, str]]], Requirements] = {}
        self.generation = 0  # grows on every change of a selector

    # --- informer events --------------------------------------------------------------------------
    def _check(self, kind: str) -> dict[str, dict[str, _Entry]]:
        found = self._objects.get(kind)
        if found is None:
            raise ValueError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")
        return found

    def on_add(self, kind: str, obj: Mapping[str, Any]) -> None:
        by_ns = self._check(kind)
        entry = _compile(kind, obj)
        with self._lock:
            names = by_ns.setdefault(namespace_of(obj), {})
            before = names.get(_name_of(obj))
            names[_name_of(obj)] = entry
            # Status-only updates (a ReplicaSet's replica counts change with every pod) keep the
            # selectors, so the kept default selectors stay valid.
            if before is None or before.selector != entry.selector:
                self._changed()

    def on_update(self, kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if (namespace_of(old), _name_of(old)) != (namespace_of(new), _name_of(new)):
            self.on_delete(kind, old)
        self.on_add(kind, new)

    def on_delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        by_ns = self._check(kind)
        ns = namespace_of(obj)
        with self._lock:
            names = by_ns.get(ns)
            if names is not None and names.pop(_name_of(obj), None) is not None:
                if not names:
                    del by_ns[ns]
                self._changed()

    def _changed(self) -> None:
        self.generation += 1
        self._selectors.clear()

    # --- lookups ----------------------------------------------------------------------------------
    def objects(self, kind: str, namespace: str) -> list[Mapping[str, Any]]:
        """The stored objects of `kind` in `namespace`, in name order."""
        by_ns = self._check(kind)
        with self._lock:
            names = by_ns.get(namespace, {})
            return [names[n].obj for n in sorted(names)]

    def _entries(self, kind: str, namespace: str) -> list[_Entry]:
        with self._lock:
            return list(self._objects[kind].get(namespace, {}).values())

    def pod_services(self, pod: Pod) -> list[Mapping[str, Any]]:
        """``helper.GetPodServices``: services of the pod's namespace whose selector (a map; an unset
        one matches nothing, an empty one everything) matches the pod's labels."""
        labels = labels_of(pod)
        out = []
        for e in self._entries(SERVICE, namespace_of(pod)):
            if isinstance(e.selector, dict) and all(labels.get(k) == v for k, v in e.selector.items()):
                out.append(e.obj)
        return out

    def pod_controllers(self, pod: Pod) -> list[Mapping[str, Any]]:
        """``GetPodControllers``: RCs whose non-empty selector map matches the pod (none for a pod
        without labels)."""
        labels = labels_of(pod)
        if not labels:
            return []
        out = []
        for e in self._entries(REPLICATION_CONTROLLER, namespace_of(pod)):
            sel = e.selector
            if isinstance(sel, dict) and sel and all(labels.get(k) == v for k, v in sel.items()):
                out.append(e.obj)
        return out

    def _by_label_selector(self, kind: str, pod: Pod) -> list[_Entry]:
        """``GetPodReplicaSets``/``GetPodStatefulSets``: objects whose non-empty selector matches the
        pod; none when the pod has no labels or any object of the namespace has an invalid selector
        (the lister returns an error then)."""
        labels = labels_of(pod)
        if not labels:
            return []
        entries = self._entries(kind, namespace_of(pod))
        if any(e.selector is _INVALID for e in entries):
            return []
        out = []
        for e in entries:
            # An unset selector is labels.Nothing() and an empty one Everything(): both match nothing here.
            if isinstance(e.selector, tuple) and e.selector and matches(e.selector, labels):
                out.append(e)
        return out

    def pod_replica_sets(self, pod: Pod) -> list[Mapping[str, Any]]:
        return [e.obj for e in self._by_label_selector(REPLICA_SET, pod)]

    def pod_stateful_sets(self, pod: Pod) -> list[Mapping[str, Any]]:
        return [e.obj for e in self._by_label_selector(STATEFUL_SET, pod)]

    def default_selector(self, pod: Pod) -> Requirements:
        """``helper.DefaultSelector``: the union of the matching Services' and RCs' selector maps
        (they match the pod, so they cannot conflict) and the requirements of the matching ReplicaSets'
        and StatefulSets' selectors; empty (``selector.Empty()``) when the pod belongs to none."""
        labels = labels_of(pod)
        key = (namespace_of(pod), frozenset(labels.items()))
        with self._lock:
            found = self._selectors.get(key)
            if found is not None:
                return found
            merged: dict[str, str] = {}
            for kind in (SERVICE, REPLICATION_CONTROLLER):
                objs = self.pod_services(pod) if kind == SERVICE else self.pod_controllers(pod)
                for obj in objs:
                    raw = as_mapping(as_mapping(obj.get("spec")).get("selector"))
                    merged.update({str(k): v if isinstance(v, str) else "" for k, v in raw.items()})
            reqs = map_requirements(merged)
            for kind in (REPLICA_SET, STATEFUL_SET):
                for e in self._by_label_selector(kind, pod):
                    assert isinstance(e.selector, tuple)
                    reqs += e.selector
            result = canonical(reqs)
            if len(self._selectors) > 4096:
                self._selectors.clear()
            self._selectors[key] = result
            return result
