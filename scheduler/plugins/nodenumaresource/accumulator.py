"""The CPU accumulator ``take_cpus`` (docs/rules/scheduler-nodenumaresource.md#accumulator): which
logical CPUs a pod gets out of the available ones, for a bind policy (whole cores, or spread over
cores), an exclusive policy (keep away from cores / NUMA nodes other exclusive pods hold) and a NUMA
allocate strategy (pack or spread NUMA nodes). Every ordering ends in an id, so the result is a
function of the inputs. Pure. Imports: the standard library, apis.numa, this package.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from apis.numa import BIND_FULL_PCPUS, EXCLUSIVE_NUMA_NODE_LEVEL, EXCLUSIVE_PCPU_LEVEL, NUMA_MOST_ALLOCATED
from scheduler.plugins.nodenumaresource.allocation import CPUAlloc
from scheduler.plugins.nodenumaresource.topology import CPU, CPUTopology

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED = "failed to allocate cpus"


class AllocationError(Exception):
    """The accumulator (or the allocation around it) could not satisfy the request; str() is the reason."""


class _Acc:
    """The accumulator's state (docs/rules/scheduler-nodenumaresource.md#accumulator)."""

    def __init__(
        self,
        topo: CPUTopology,
        max_ref_count: int,
        available: Iterable[int],
        allocated: Mapping[int, CPUAlloc],
        need: int,
        exclusive_policy: str,
        strategy: str,
    ) -> None:
        self.topo = topo
        self.max_ref = max_ref_count
        self.free: dict[int, CPU] = {c: topo.details[c] for c in available if c in topo.details}
        self.ref: dict[int, int] = {}
        if max_ref_count > 1:
            self.ref = {c: (allocated[c].ref_count if c in allocated else 0) for c in self.free}
        self.need = need
        self.policy = exclusive_policy
        self.most = strategy == NUMA_MOST_ALLOCATED
        self.result: set[int] = set()
        self.excl_cores: set[int] = set()
        self.excl_nodes: set[int] = set()
        for cpu, rec in allocated.items():
            info = topo.details.get(cpu, CPU(cpu, 0, 0, 0))  # unknown CPUs count as core 0 / node 0
            if rec.exclusive_policy == EXCLUSIVE_PCPU_LEVEL:
                self.excl_cores.add(info.core)
            elif rec.exclusive_policy == EXCLUSIVE_NUMA_NODE_LEVEL:
                self.excl_nodes.add(info.node)

    # --- state --------------------------------------------------------------------------------------
    def take(self, cpus: list[int]) -> None:
        self.result.update(cpus)
        for c in cpus:
            self.free.pop(c, None)
            info = self.topo.details[c]
            if self.policy == EXCLUSIVE_PCPU_LEVEL:
                self.excl_cores.add(info.core)
            elif self.policy == EXCLUSIVE_NUMA_NODE_LEVEL:
                self.excl_nodes.add(info.node)
        self.need -= len(cpus)

    def satisfied(self) -> bool:
        return self.need < 1

    def pcpu_excluded(self, info: CPU) -> bool:
        return self.policy == EXCLUSIVE_PCPU_LEVEL and info.core in self.excl_cores

    def numa_excluded(self, info: CPU) -> bool:
        return self.policy == EXCLUSIVE_NUMA_NODE_LEVEL and info.node in self.excl_nodes

    def order(self, n: int) -> int:
        """Strategy order: fewer free first for MostAllocated, more free first otherwise."""
        return n if self.most else -n

    # --- helpers ------------------------------------------------------------------------------------
    def core_ref(self, core: int) -> int:
        return sum(self.ref.get(c, 0) for c, info in self.free.items() if info.core == core)

    def sort_cpus(self, cpus: list[int]) -> list[int]:
        cpus = sorted(cpus)
        if self.max_ref > 1:
            cpus.sort(key=lambda c: (self.ref.get(c, 0), c))
        return cpus

    def first_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        out: list[int] = []
        for c in cpus:
            core = self.topo.details[c].core
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    def _full_cores(self, skip: Callable[[CPU], bool]) -> tuple[dict[int, list[int]], Counter[int]]:
        in_core: dict[int, list[int]] = {}
        socket_free: Counter[int] = Counter()
        for c, info in self.free.items():
            if skip(info):
                continue
            in_core.setdefault(info.core, []).append(c)
            socket_free[info.socket] += 1
        per_core = self.topo.cpus_per_core
        return {k: sorted(v) for k, v in in_core.items() if len(v) == per_core}, socket_free

    def _core_lists(self, cores: dict[int, list[int]], group: Callable[[CPU], int]) -> dict[int, list[int]]:
        grouped: dict[int, list[int]] = {}
        for core, cpus in cores.items():
            grouped.setdefault(group(self.free[cpus[0]]), []).append(core)
        out: dict[int, list[int]] = {}
        for g, keys in grouped.items():
            keys.sort(key=lambda k: (-len(cores[k]), self.core_ref(k) if self.max_ref > 1 else 0, k))
            out[g] = [c for k in keys for c in cores[k]]
        return out

    def free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        cores, socket_free = self._full_cores(lambda i: filter_exclusive and self.numa_excluded(i))
        lists = self._core_lists(cores, lambda i: i.node)
        nodes = sorted(
            lists,
            key=lambda n: (
                self.order(len(lists[n])),
                self.order(socket_free[self.free[lists[n][0]].socket]),
                n,
            ),
        )
        return [lists[n] for n in nodes]

    def free_cores_in_socket(self) -> list[list[int]]:
        cores, _ = self._full_cores(lambda i: False)
        lists = self._core_lists(cores, lambda i: i.socket)
        return [lists[s] for s in sorted(lists, key=lambda s: (self.order(len(lists[s])), s))]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        in_node: dict[int, list[int]] = {}
        node_free: Counter[int] = Counter()
        socket_free: Counter[int] = Counter()
        for c, info in self.free.items():
            if filter_exclusive and (self.pcpu_excluded(info) or self.numa_excluded(info)):
                continue
            in_node.setdefault(info.node, []).append(c)
            node_free[info.node] += 1
            socket_free[info.socket] += 1
        for n, cpus in in_node.items():
            cpus = self.sort_cpus(cpus)
            in_node[n] = self.first_per_core(cpus) if filter_exclusive else cpus
        nodes = sorted(
            in_node,
            key=lambda n: (
                self.order(node_free[n]),
                self.order(socket_free[self.free[in_node[n][0]].socket]),
                n,
            ),
        )
        return [in_node[n] for n in nodes]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        in_socket: dict[int, list[int]] = {}
        for c, info in self.free.items():
            if filter_exclusive and self.pcpu_excluded(info):
                continue
            in_socket.setdefault(info.socket, []).append(c)
        for s, cpus in in_socket.items():
            cpus = self.sort_cpus(cpus)
            in_socket[s] = self.first_per_core(cpus) if filter_exclusive else cpus
        return [in_socket[s] for s in sorted(in_socket, key=lambda s: (self.order(len(in_socket[s])), s))]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        in_core: dict[int, list[int]] = {}
        core_socket: dict[int, int] = {}
        core_node: dict[int, int] = {}
        node_free: Counter[int] = Counter()
        socket_free: Counter[int] = Counter()
        for c, info in self.free.items():
            if filter_exclusive and (self.pcpu_excluded(info) or self.numa_excluded(info)):
                continue
            in_core.setdefault(info.core, []).append(c)
            core_socket[info.core] = info.socket
            core_node[info.core] = info.node
            node_free[info.node] += 1
            socket_free[info.socket] += 1
        colo = {s: len(self.topo.cpus_in_socket(s) & self.result) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            s = core_socket[core]
            return (
                -colo[s], self.order(socket_free[s]), self.order(node_free[core_node[core]]),
                len(in_core[core]), s, self.core_ref(core) if self.max_ref > 1 else 0, core,
            )  # fmt: skip

        return [c for core in sorted(in_core, key=key) for c in self.sort_cpus(in_core[core])]

    def spread(self, cpus: list[int]) -> list[int]:
        """Passes over the list, each emitting the first not-yet-emitted CPU of every core."""
        if len(cpus) <= self.topo.cpus_per_core:
            return cpus
        out: list[int] = []
        rest = cpus
        while rest:
            seen: set[int] = set()
            later: list[int] = []
            for c in rest:
                core = self.topo.details[c].core
                if core in seen:
                    later.append(c)
                else:
                    seen.add(core)
                    out.append(c)
            rest = later
        return out


def take_cpus(
    topo: CPUTopology,
    max_ref_count: int,
    available: Iterable[int],
    allocated: Mapping[int, CPUAlloc],
    need: int,
    bind_policy: str,
    exclusive_policy: str,
    strategy: str,
) -> frozenset[int]:
    """The accumulator's result; AllocationError with the reason when it fails."""
    a = _Acc(topo, max_ref_count, available, allocated, need, exclusive_policy, strategy)
    if a.satisfied():
        return frozenset(a.result)
    if a.need > len(a.free):
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    full = bind_policy == BIND_FULL_PCPUS
    per_core = topo.cpus_per_core
    if (full or per_core == 1) and _whole_cores(a, per_core):
        return frozenset(a.result)
    if not full and _spread_in_one(a):
        return frozenset(a.result)
    for filter_exclusive in (True, False):  # fallback
        for c in a.spread(a.free_cpus(filter_exclusive)):
            if a.need >= 1:
                a.take([c])
            if a.satisfied():
                return frozenset(a.result)
    raise AllocationError(ERR_FAILED)


def _whole_cores(a: _Acc, per_core: int) -> bool:
    """Steps 1a–1d; True when satisfied."""
    if a.need <= a.topo.cpus_per_node:
        for filter_exclusive in (True, False):
            for cpus in a.free_cores_in_node(filter_exclusive):
                if len(cpus) >= a.need:
                    a.take(cpus[: a.need])
                    return True
    if a.need <= a.topo.cpus_per_socket:
        for cpus in a.free_cores_in_socket():
            if len(cpus) >= a.need:
                a.take(cpus[: a.need])
                return True
    set_aside: list[list[int]] = []
    for cpus in sorted(a.free_cores_in_socket(), key=lambda x: -len(x)):  # stable
        if a.need < len(cpus):
            set_aside.append(cpus)
            continue
        a.take(cpus)
        if a.satisfied():
            return True
    if a.need >= per_core:
        for cpus in sorted(set_aside, key=len):  # stable
            for i in range(0, len(cpus), per_core):
                # a new list takes its first core before any check: over-takes when need is not a
                # multiple of the core size (docs/rules/scheduler-nodenumaresource.md#accumulator)
                a.take(cpus[i : i + per_core])
                if a.satisfied():
                    return True
                if a.need < per_core:
                    break
    return False


def _spread_in_one(a: _Acc) -> bool:
    """Steps 2a–2b; True when satisfied."""
    if a.need <= a.topo.cpus_per_node:
        for filter_exclusive in (True, False):
            for cpus in a.free_cpus_in_node(filter_exclusive):
                if len(cpus) >= a.need:
                    a.take(a.spread(cpus)[: a.need])
                    return True
    if a.need <= a.topo.cpus_per_socket:
        for filter_exclusive in (True, False):
            for cpus in a.free_cpus_in_socket(filter_exclusive):
                if len(cpus) >= a.need:
                    a.take(a.spread(cpus)[: a.need])
                    return True
    return False


def take_preferred_cpus(
    topo: CPUTopology,
    max_ref_count: int,
    available: frozenset[int],
    preferred: frozenset[int],
    allocated: Mapping[int, CPUAlloc],
    need: int,
    bind_policy: str,
    exclusive_policy: str,
    strategy: str,
) -> frozenset[int]:
    """First from the preferred CPUs that are available, then the rest from the others
    (docs/rules/scheduler-nodenumaresource.md#allocation)."""
    result: frozenset[int] = frozenset()
    pref = available & preferred
    args = (bind_policy, exclusive_policy, strategy)
    if pref:
        result = take_cpus(topo, max_ref_count, pref, allocated, min(need, len(pref)), *args)
        need -= len(result)
        available = available - pref
    if need > 0:
        result = result | take_cpus(topo, max_ref_count, available, allocated, need, *args)
    return result
