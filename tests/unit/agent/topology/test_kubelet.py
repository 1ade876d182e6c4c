"""The kubelet CPU manager as the koordlet reads it (docs/rules/koordlet-topology.md#kubelet-cpu-manager):
KubeletConfiguration and checkpoint parsing, kubelet's takeByTopology, the static policy's reserved CPUs,
the topology manager policy names and the CPUs the static policy assigned. Expected values worked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.system.nodeinfo import CpuInfo
from agent.topology.kubelet import (
    KubeletConfig,
    KubeletConfigError,
    kubelet_allocated,
    parse_cpu_manager_state,
    parse_kubelet_config,
    read_cpu_manager_state,
    read_kubelet_config,
    static_reserved_cpus,
    take_by_topology,
    topology_policy,
)
from apis.kubeobjects import Pod

# One socket, one NUMA node, 4 cores x 2 threads: core k = CPUs k and k+4.
HT8 = tuple(CpuInfo(cpu, cpu % 4, 0, 0) for cpu in range(8))
# Two sockets, one NUMA node each, 4 single-thread cores per socket: socket s = CPUs 4s..4s+3.
TWO_SOCKETS = tuple(CpuInfo(cpu, cpu % 4, cpu // 4, cpu // 4) for cpu in range(8))
ALL8 = frozenset(range(8))


def test_config_fields_and_kubelet_defaults() -> None:
    cfg = parse_kubelet_config(
        "kind: KubeletConfiguration\ncpuManagerPolicy: static\n"
        "cpuManagerPolicyOptions:\n  full-pcpus-only: 'true'\nreservedSystemCPUs: 0,4\n"
        "kubeReserved:\n  cpu: 500m\ntopologyManagerPolicy: single-numa-node\n",
        "cfg",
    )
    assert cfg.cpu_manager_policy == "static"
    assert cfg.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert cfg.reserved_system_cpus == "0,4"
    assert cfg.kube_reserved == {"cpu": "500m"}
    assert cfg.topology_manager_policy == "single-numa-node"
    assert cfg.topology_manager_scope == "container"  # kubelet's default scope
    assert parse_kubelet_config('{"kind": "KubeletConfiguration"}', "json") == KubeletConfig()
    assert parse_kubelet_config("", "empty").cpu_manager_policy == "none"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("cpuManagerPolicy: [static]", "cpuManagerPolicy"),
        ("cpuManagerPolicyOptions: yes-please", "cpuManagerPolicyOptions"),
        ("- a list", "not a KubeletConfiguration"),
        ("a: [unclosed", "not YAML"),
    ],
)
def test_bad_config_names_the_file_and_field(text: str, needle: str) -> None:
    with pytest.raises(KubeletConfigError) as e:
        parse_kubelet_config(text, "/etc/kubelet.yaml")
    assert "/etc/kubelet.yaml" in str(e.value) and needle in str(e.value)


def test_missing_files_are_none_not_errors(tmp_path: Path) -> None:
    assert read_kubelet_config(tmp_path / "config.yaml") is None
    assert read_cpu_manager_state(tmp_path) is None
    (tmp_path / "cpu_manager_state").write_text("")
    assert read_cpu_manager_state(tmp_path) is None  # empty: upstream only warns
    (tmp_path / "cpu_manager_state").write_text(
        '{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"u1":{"app":"2-3"}},"checksum":1}'
    )
    assert read_cpu_manager_state(tmp_path) == {"u1": {"app": "2-3"}}


def test_checkpoint_errors_name_the_field() -> None:
    assert parse_cpu_manager_state('{"policyName":"none","defaultCpuSet":""}', "s") == {}
    with pytest.raises(KubeletConfigError, match=r"entries\.u1"):
        parse_cpu_manager_state('{"entries":{"u1":{"app":3}}}', "s")
    with pytest.raises(KubeletConfigError, match="not JSON"):
        parse_cpu_manager_state("{", "s")


# --- takeByTopology -----------------------------------------------------------------------------------
def test_two_cpus_on_a_hyperthreaded_node_are_core_zeros_siblings() -> None:
    # No socket or NUMA node is needed whole; core 0 (CPUs 0, 4) is the lowest free core.
    assert take_by_topology(HT8, ALL8, 2) == frozenset({0, 4})


def test_an_odd_count_takes_a_whole_core_then_the_next_cores_first_thread() -> None:
    # Core 0 whole (need 3 >= 2); then one CPU: cores 1-3 all have 2 free, lowest id core 1 → CPU 1.
    assert take_by_topology(HT8, ALL8, 3) == frozenset({0, 1, 4})


def test_a_whole_socket_first_then_the_next_sockets_lowest_core() -> None:
    # need 5: socket 0 (4 CPUs) is free and needed whole; then 1 CPU of socket 1: CPU 4.
    assert take_by_topology(TWO_SOCKETS, ALL8, 5) == frozenset({0, 1, 2, 3, 4})


def test_single_cpus_fill_partly_used_cores_first() -> None:
    # Free: core 0 {0,4}, core 1 {1,5}, core 2 {2}, core 3 {3}. One CPU: cores by fewest free CPUs,
    # then id → core 2 → CPU 2.
    assert take_by_topology(HT8, frozenset({0, 1, 2, 3, 4, 5}), 1) == frozenset({2})


def test_a_free_core_is_taken_whole_when_others_are_broken() -> None:
    assert take_by_topology(HT8, frozenset({1, 2, 3, 5, 6, 7}), 2) == frozenset({1, 5})


def test_not_enough_cpus_is_none() -> None:
    assert take_by_topology(HT8, frozenset({1, 2}), 3) is None
    assert take_by_topology(HT8, ALL8, 0) == frozenset()


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 7)), st.integers(0, 8))
def test_take_returns_exactly_n_available_cpus_or_none(available: set[int], need: int) -> None:
    got = take_by_topology(HT8, frozenset(available), need)
    if need > len(available):
        assert got is None
    else:
        assert got is not None and len(got) == need and got <= available


# --- static policy reserved CPUs --------------------------------------------------------------------------
def test_reserved_system_cpus_win() -> None:
    cfg = KubeletConfig("static", reserved_system_cpus="3,7", kube_reserved={"cpu": "4"})
    assert static_reserved_cpus(cfg, HT8) == {3, 7}


def test_reserved_from_kube_and_system_reserved_rounded_up() -> None:
    # 500m + 1 = 1500m → ceil → 2 CPUs by takeByTopology → {0, 4}.
    cfg = KubeletConfig("static", kube_reserved={"cpu": "500m"}, system_reserved={"cpu": "1"})
    assert static_reserved_cpus(cfg, HT8) == {0, 4}


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        (KubeletConfig("static"), "cannot determine reserved CPU"),
        (KubeletConfig("static", kube_reserved={"cpu": "0"}), "> 0"),
        (KubeletConfig("static", reserved_system_cpus="9"), "not a subset of online-cpus: 0-7"),
        (KubeletConfig("static", system_reserved={"cpu": "lots"}), "systemReserved.cpu"),
        (KubeletConfig("static", kube_reserved={"cpu": "9"}), "unable to reserve"),
        (KubeletConfig("static", kube_reserved={"cpu": "1", "gpu": "1"}), "cannot reserve 'gpu'"),
        (KubeletConfig("static", kube_reserved={"cpu": "1", "memory": "-1Gi"}), "kubeReserved.memory"),
    ],
)
def test_static_reservation_errors(cfg: KubeletConfig, needle: str) -> None:
    with pytest.raises(KubeletConfigError, match=needle):
        static_reserved_cpus(cfg, HT8)


@pytest.mark.parametrize(
    ("policy", "scope", "want"),
    [
        ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
        ("single-numa-node", "container", "SingleNUMANodeContainerLevel"),
        ("restricted", "pod", "RestrictedPodLevel"),
        ("best-effort", "container", "BestEffortContainerLevel"),
        ("none", "pod", "None"),
        ("restricted", "node", "None"),
    ],
)
def test_topology_policy_names(policy: str, scope: str, want: str) -> None:
    assert topology_policy(policy, scope) == want


def _pod(uid: str, name: str, labels: dict[str, str] | None = None, status: str | None = None) -> Pod:
    ann = {"scheduling.koordinator.sh/resource-status": status} if status else {}
    return {
        "metadata": {"uid": uid, "namespace": "ns", "name": name, "labels": labels or {}, "annotations": ann}
    }


def test_kubelet_allocated_skips_koord_pods_and_unions_containers() -> None:
    entries = {
        "uid-b": {"c": "2-3"},
        "uid-a": {"c1": "1", "c2": "5"},
        "uid-ls": {"c": "6"},  # raw QoS LS: koord places it
        "uid-st": {"c": "7"},  # has a resource-status cpuset: koord places it
        "uid-x": {"c": "bad", "d": ""},  # nothing parsable: not listed
    }
    pods = [
        _pod("uid-a", "a"),
        _pod("uid-ls", "ls", {"koordinator.sh/qosClass": "LS"}),
        _pod("uid-st", "st", status='{"cpuset":"7"}'),
    ]
    allocs, cpus = kubelet_allocated(entries, pods)
    assert [a.to_json() for a in allocs] == [
        {"namespace": "ns", "name": "a", "uid": "uid-a", "cpuset": "1,5", "managedByKubelet": True},
        {"uid": "uid-b", "cpuset": "2-3", "managedByKubelet": True},
    ]
    assert cpus == {1, 2, 3, 5}
