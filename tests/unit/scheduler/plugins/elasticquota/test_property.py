"""Properties of the runtime quota (docs/rules/scheduler-elasticquota.md#runtime-quota): the production
calculator equals the oracle of tests/oracles/elasticquota.py on random children, and keeps its promises
(no child above its request from sharing, the whole amount handed out when demand allows, mins kept when
the total covers them); the group quota manager's requests, used and runtime equal the oracle's path-wise
evaluation on random trees with random pods (test_lazy_tree.py compares the incremental state with a full
recomputation after random event sequences)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.elasticquota import parse_elastic_quota
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.calculator import Share, redistribute
from scheduler.plugins.elasticquota.manager import GroupQuotaManager
from tests.oracles import elasticquota as oracle

from ._support import pod, quota

NAMES = ["a", "b", "c", "d", "e", "f"]


@st.composite
def children(draw: st.DrawFn) -> tuple[int, list[Share]]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    big = draw(st.booleans())
    scale = 10**15 if big else 1
    shares = [
        Share(
            n,
            draw(st.integers(0, 10)) * (scale if draw(st.booleans()) else 1),
            draw(st.integers(0, 500)) * scale,
            draw(st.integers(0, 300)) * scale,
            draw(st.integers(0, 100)) * scale,
            draw(st.booleans()),
        )
        for n in names
    ]
    return draw(st.integers(-50, 1200)) * scale + draw(st.integers(0, 7)), shares


@settings(max_examples=60, deadline=None)
@given(children())
def test_redistribute_equals_the_oracle_and_keeps_its_promises(case: tuple[int, list[Share]]) -> None:
    total, shares = case
    got = redistribute(total, shares)
    want = oracle.redistribute(
        total,
        [
            oracle.Child(s.name, s.shared_weight, s.request, s.min, s.guarantee, s.allow_lent_resource)
            for s in shares
        ],
    )
    assert got == want
    floors = {s.name: max(s.min, s.guarantee) for s in shares}
    for s in shares:
        if s.request > floors[s.name]:
            assert floors[s.name] <= got[s.name] <= s.request  # max (the limited request) never exceeded
        else:
            assert got[s.name] == (s.request if s.allow_lent_resource else floors[s.name])
    base = sum(min(s.request, floors[s.name]) if s.allow_lent_resource else floors[s.name] for s in shares)
    if base <= total:
        assert sum(got.values()) <= max(total, base)  # conservation
        hungry = [s for s in shares if got[s.name] < s.request and s.shared_weight > 0]
        if hungry:  # something still wanted more: everything was handed out
            assert sum(got.values()) == total


RES = ["cpu", "memory"]


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int], bool]:
    n = draw(st.integers(1, 6))
    quotas: list[dict[str, Any]] = []
    parents: list[str] = []
    for i in range(n):
        name = f"q{i}"
        parent = draw(st.sampled_from(["", *parents])) if parents else ""
        is_parent = draw(st.booleans())
        max_ = {
            r: str(draw(st.integers(0, 40)) * (1 if r == "memory" else 100))
            for r in RES
            if draw(st.booleans()) or r == "cpu"
        }
        min_ = {r: str(draw(st.integers(0, 20))) for r in RES if draw(st.booleans())}
        weight = draw(
            st.one_of(
                st.none(), st.dictionaries(st.sampled_from(RES), st.integers(0, 9).map(str), max_size=2)
            )
        )
        annotations = (
            {"quota.scheduling.koordinator.sh/shared-weight": json.dumps(weight)}
            if weight is not None
            else None
        )
        quotas.append(
            quota(
                name,
                max_,
                min_,
                parent=parent,
                is_parent=is_parent,
                lend=draw(st.booleans()),
                annotations=annotations,
            )
        )
        if is_parent:
            parents.append(name)
    pods = [
        pod(
            f"p{j}",
            {r: str(draw(st.integers(0, 30))) for r in RES if draw(st.booleans())},
            quota_name=draw(
                st.sampled_from(
                    [
                        *(q["metadata"]["name"] for q in quotas),
                        "koordinator-system-quota",
                        "koordinator-default-quota",
                    ]
                )
            ),
            node=draw(st.sampled_from(["", "n1"])),
        )
        for j in range(draw(st.integers(0, 8)))
    ]
    total = {"cpu": draw(st.integers(0, 200)) * 1000, "memory": draw(st.integers(0, 200)), "pods": 110}
    return quotas, pods, total, draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(trees())
def test_the_manager_equals_the_path_wise_oracle(
    case: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int], bool],
) -> None:
    quotas, pods, total, scale = case
    mgr = GroupQuotaManager(ElasticQuotaArgs(enable_min_quota_scale=scale))
    mgr.set_cluster_total(total)
    for q in quotas:
        mgr.upsert_quota(parse_elastic_quota(q))
    for p in pods:
        mgr.on_pod_add(mgr.resolve(p), p)
    model = oracle.TreeOracle({}, dict(total), scale)
    for name, info in mgr.quotas.items():
        model.quotas[name] = oracle.OQuota(
            name, info.parent, info.max, info.min, info.shared_weight, info.quota.allow_lent_resource
        )
    for p in pods:
        req = {
            r: int(v) * (1000 if r == "cpu" else 1)
            for r, v in p["spec"]["containers"][0]["resources"]["requests"].items()
        }
        model.quotas[mgr.resolve(p)].pods.append((req, bool(p["spec"].get("nodeName"))))
    mgr.refresh()
    for name, info in mgr.quotas.items():
        assert info.request == model.request(name), name
        assert info.used == model.used(name), name
        if name not in (oracle.ROOT, oracle.SYSTEM, oracle.DEFAULT):
            assert info.child_request == model.child_request(name), name
            assert info.runtime == model.runtime(name), name
    assert mgr.root_total() == model.root_total()
