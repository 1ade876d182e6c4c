"""Tests for apis.pod: effective pod requests/limits (Kubernetes PodRequests/PodLimits) and pod helpers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.pod import (
    container_limits,
    container_requests,
    is_daemonset_pod,
    is_restartable_init_container,
    is_terminated,
    parse_time,
    pod_condition,
    pod_key,
    pod_limits,
    pod_requests,
)
from apis.quantity import Quantity, QuantityError

Res = dict[str, Any]


def ctr(requests: Res | None = None, limits: Res | None = None, sidecar: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    out: dict[str, Any] = {"name": "c", "image": "x", "resources": resources}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def make_pod(
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]] | None = None,
    overhead: Res | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if overhead is not None:
        spec["overhead"] = overhead
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def as_values(resources: dict[str, Quantity]) -> dict[str, int]:
    """Milli values per resource: compares by value regardless of how a quantity is spelled."""
    return {name: quantity.milli_value() for name, quantity in resources.items()}


def expect(extended: dict[str, str] | None = None, **native: str) -> dict[str, int]:
    """Expected milli values; native names as keywords, others (``kubernetes.io/batch-cpu``) by dict."""
    return {name: q(v).milli_value() for name, v in {**(extended or {}), **native}.items()}


# --- pod_requests ----------------------------------------------------------------------------------

REQUEST_CASES: list[Any] = [
    pytest.param(make_pod([ctr()]), {}, id="no-resources"),
    pytest.param(make_pod([]), {}, id="no-containers"),
    pytest.param(
        make_pod([ctr({"cpu": "100m", "memory": "1Gi"}), ctr({"cpu": "200m", "memory": "512Mi"})]),
        expect(cpu="300m", memory="1536Mi"),
        id="sum-of-containers",
    ),
    pytest.param(
        make_pod(
            [ctr({"cpu": "100m", "memory": "1Gi"}), ctr({"cpu": "200m"})],
            [ctr({"cpu": "2", "memory": "256Mi"})],
        ),
        expect(cpu="2", memory="1Gi"),
        id="init-container-max-per-resource",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "3"}), ctr({"cpu": "2", "memory": "64Mi"})]),
        expect(cpu="3", memory="64Mi"),
        id="several-init-containers-not-summed",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "0"})]),
        expect(cpu="1"),
        id="small-init-container",
    ),
    pytest.param(
        make_pod([ctr({"memory": "1Gi"})], [ctr({"cpu": "0"})]),
        expect(cpu="0", memory="1Gi"),
        id="init-zero-key-present",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "500m"}, sidecar=True)]),
        expect(cpu="1500m"),
        id="sidecar-added-to-sum",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "500m"}, sidecar=True), ctr({"cpu": "2"})]),
        expect(cpu="2500m"),
        id="init-after-sidecar-peaks-with-it",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "2"}), ctr({"cpu": "500m"}, sidecar=True)]),
        expect(cpu="2"),
        id="init-before-sidecar-alone",
    ),
    pytest.param(
        make_pod(
            [ctr({"cpu": "100m"})],
            [
                ctr({"cpu": "100m"}, sidecar=True),
                ctr({"cpu": "500m"}),
                ctr({"cpu": "200m"}, sidecar=True),
            ],
        ),
        expect(cpu="600m"),
        id="kep-753-mixed",
    ),
    pytest.param(
        make_pod(
            [ctr({"cpu": "100m"})],
            [
                ctr({"cpu": "100m", "memory": "1Gi"}, sidecar=True),
                ctr({"cpu": "300m"}),
                ctr({"cpu": "200m", "memory": "2Gi"}, sidecar=True),
            ],
        ),
        expect(cpu="400m", memory="3Gi"),
        id="kep-753-sum-wins",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1", "memory": "1Gi"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        expect(cpu="1250m", memory="1144Mi"),
        id="overhead-added",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], overhead={"memory": "120Mi"}),
        expect(cpu="1", memory="120Mi"),
        id="overhead-adds-missing-resource",
    ),
    pytest.param(
        make_pod([ctr({"cpu": "1"})], [ctr({"cpu": "2"})], overhead={"cpu": "100m"}),
        expect(cpu="2100m"),
        id="overhead-after-init-max",
    ),
    pytest.param(
        make_pod(
            [
                ctr({"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"}),
                ctr(
                    {
                        "kubernetes.io/batch-cpu": 500,
                        "kubernetes.io/batch-memory": "1Gi",
                        "nvidia.com/gpu": "1",
                    }
                ),
            ]
        ),
        expect(
            {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "3Gi", "nvidia.com/gpu": "1"}
        ),
        id="extended-resources",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "2", "memory": "1Gi"})]),
        {},
        id="limit-only-no-request",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "2"}), ctr({"cpu": "1"}, {"cpu": "1"})]),
        expect(cpu="1"),
        id="limit-only-plus-request",
    ),
    pytest.param(
        {
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": None, "limits": None}}, {"name": "d"}]
            }
        },
        {},
        id="null-resource-lists",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), REQUEST_CASES)
def test_pod_requests(pod: dict[str, Any], expected: dict[str, int]) -> None:
    assert as_values(pod_requests(pod)) == expected


# --- pod_limits ------------------------------------------------------------------------------------

LIMIT_CASES: list[Any] = [
    pytest.param(make_pod([ctr({"cpu": "1"})]), {}, id="no-limits"),
    pytest.param(
        make_pod([ctr(None, {"cpu": "1", "memory": "1Gi"}), ctr(None, {"cpu": "2"})]),
        expect(cpu="3", memory="1Gi"),
        id="sum",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "1"})], [ctr(None, {"cpu": "4", "memory": "2Gi"})]),
        expect(cpu="4", memory="2Gi"),
        id="init-max",
    ),
    pytest.param(
        make_pod(
            [ctr(None, {"cpu": "1"})], [ctr(None, {"cpu": "1"}, sidecar=True), ctr(None, {"cpu": "1500m"})]
        ),
        expect(cpu="2500m"),
        id="sidecar",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "1", "memory": "1Gi"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        expect(cpu="1250m", memory="1144Mi"),
        id="overhead-on-limited",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "1"})], overhead={"cpu": "250m", "memory": "120Mi"}),
        expect(cpu="1250m"),
        id="overhead-only-where-limited",
    ),
    pytest.param(
        make_pod([ctr(None, {"cpu": "0"})], overhead={"cpu": "250m"}),
        expect(cpu="0"),
        id="overhead-not-on-zero-limit",
    ),
    pytest.param(
        make_pod([ctr(None, {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"})]),
        expect({"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"}),
        id="extended",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), LIMIT_CASES)
def test_pod_limits(pod: dict[str, Any], expected: dict[str, int]) -> None:
    assert as_values(pod_limits(pod)) == expected


def test_limit_below_request_when_only_some_containers_limited() -> None:
    pod = make_pod([ctr({"cpu": "1"}), ctr({"cpu": "1"}, {"cpu": "1"})])
    assert pod_requests(pod)["cpu"] == q("2")
    assert pod_limits(pod)["cpu"] == q("1")


def test_container_resource_lists() -> None:
    c = ctr({"cpu": "250m", "memory": 1024}, {"cpu": "1"})
    assert as_values(container_requests(c)) == {"cpu": 250, "memory": 1024000}
    assert as_values(container_limits(c)) == {"cpu": 1000}
    assert as_values(container_requests(c, ["memory"])) == {"memory": 1024000}
    assert container_requests({}) == {}


def test_malformed_quantity_raises() -> None:
    with pytest.raises(QuantityError):
        pod_requests(make_pod([ctr({"cpu": "lots"})]))


def test_restartable_init_container() -> None:
    assert is_restartable_init_container(ctr(sidecar=True))
    assert not is_restartable_init_container(ctr())
    assert not is_restartable_init_container({"restartPolicy": "OnFailure"})


# --- hypothesis ------------------------------------------------------------------------------------

_NAMES = ["cpu", "memory", "kubernetes.io/batch-cpu"]
_resources = st.dictionaries(st.sampled_from(_NAMES), st.integers(min_value=0, max_value=10**9), max_size=3)


def _json(resources: dict[str, int]) -> dict[str, str]:
    return {name: f"{v}m" if name == "cpu" else str(v) for name, v in resources.items()}


def _milli(name: str, v: int) -> int:
    return v if name == "cpu" else v * 1000


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_resources, st.booleans()), max_size=4),
    st.lists(st.tuples(_resources, st.booleans()), max_size=3),
    st.one_of(st.none(), _resources),
)
def test_requests_cover_every_container(
    main: list[tuple[dict[str, int], bool]],
    init: list[tuple[dict[str, int], bool]],
    overhead: dict[str, int] | None,
) -> None:
    pod = make_pod(
        [ctr(_json(r)) for r, _ in main],
        [ctr(_json(r), sidecar=s) for r, s in init],
        None if overhead is None else _json(overhead),
    )
    total = as_values(pod_requests(pod))
    for r, _ in [*main, *init]:
        for name, v in r.items():
            assert total[name] >= _milli(name, v)
    if not init and overhead is None:
        plain: dict[str, int] = {}
        for r, _ in main:
            for name, v in r.items():
                plain[name] = plain.get(name, 0) + _milli(name, v)
        assert total == plain


# --- identity, phase, owners, conditions, time -----------------------------------------------------


def test_pod_key() -> None:
    assert pod_key({"metadata": {"namespace": "default", "name": "web-0"}}) == "default/web-0"
    assert pod_key({"metadata": {"name": "web-0"}}) == "/web-0"
    assert pod_key({}) == "/"


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("Succeeded", True),
        ("Failed", True),
        ("Running", False),
        ("Pending", False),
        ("Unknown", False),
        (None, False),
    ],
)
def test_is_terminated(phase: str | None, expected: bool) -> None:
    pod: dict[str, Any] = {"status": {} if phase is None else {"phase": phase}}
    assert is_terminated(pod) is expected
    assert is_terminated({}) is False


def test_is_daemonset_pod() -> None:
    def owned(*kinds: str) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [{"kind": k, "name": "o"} for k in kinds]}}

    assert is_daemonset_pod(owned("DaemonSet"))
    assert is_daemonset_pod(owned("ReplicaSet", "DaemonSet"))
    assert not is_daemonset_pod(owned("ReplicaSet"))
    assert not is_daemonset_pod(owned("daemonset"))
    assert not is_daemonset_pod({"metadata": {"ownerReferences": None}})
    assert not is_daemonset_pod({})


def test_pod_condition() -> None:
    init = {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}, init]}}
    assert pod_condition(pod, "Initialized") == init
    assert pod_condition(pod, "Ready") is None
    assert pod_condition({}, "Ready") is None
    assert pod_condition({"status": {"conditions": None}}, "Ready") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05Z", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
        ("2024-01-02T03:04:05.123456Z", dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)),
        ("2024-01-02T05:04:05+02:00", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
        ("2024-01-02T03:04:05", None),
        ("2024-01-02", None),
        ("", None),
        ("yesterday", None),
        (None, None),
        (1700000000, None),
    ],
)
def test_parse_time(text: Any, expected: dt.datetime | None) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    if parsed is not None:
        assert parsed.tzinfo is dt.UTC


def test_pod_requests_memo_follows_content_and_hands_out_copies() -> None:
    pod: dict[str, Any] = {"spec": {"containers": [ctr({"cpu": "1"})]}}
    first = pod_requests(pod)
    first["cpu"] = Quantity("5")  # the caller's dict: the memo is unaffected
    assert pod_requests(pod) == {"cpu": Quantity("1")}
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # mutated in place: no stale hit
    assert pod_requests(pod) == {"cpu": Quantity("2")}
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 3  # a number is read, not memoised
    assert pod_requests(pod) == {"cpu": Quantity("3")}
    sidecar = {
        "spec": {"initContainers": [ctr({"cpu": "1"}, sidecar=True)], "containers": [ctr({"cpu": "1"})]}
    }
    plain = {"spec": {"initContainers": [ctr({"cpu": "1"})], "containers": [ctr({"cpu": "1"})]}}
    assert pod_requests(sidecar) == {"cpu": Quantity("2")}
    assert pod_requests(plain) == {"cpu": Quantity("1")}
    with pytest.raises(QuantityError):
        pod_requests({"spec": {"containers": [ctr({"cpu": "x"})]}})
