"""The term index (docs/rules/scheduler-interpodaffinity.md#performance): where each selector is filed,
that the candidates for a pod always hold every group whose term matches it (the index never drops a
match) and that the groups it reports matching are exactly those, under random adds and removes —
checked against the brute force (every group held, ``AffinityTerm.matches``) — and that
``LabelSelector.matches`` runs only for the candidates whose filed requirement is not the whole
selector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from apis.labelselector import LabelSelector, Requirement
from scheduler.plugins.interpodaffinity.podindex import ANTI, HARD, PREF
from scheduler.plugins.interpodaffinity.termindex import GroupKey, TermIndex, buckets, requirement
from scheduler.plugins.interpodaffinity.terms import AffinityTerm

KEYS, VALUES, NAMESPACES = ["app", "tier"], ["a", "b", ""], ["ns", "other", "ns", ""]


def sel(labels: dict[str, str] | None = None, *exprs: tuple[str, str, tuple[str, ...]]) -> LabelSelector:
    return LabelSelector(labels or {}, tuple(Requirement(k, op, vs) for k, op, vs in exprs))


def term(selector: LabelSelector | None, *namespaces: str) -> AffinityTerm:
    return AffinityTerm(frozenset(namespaces or ("ns",)), selector, "zone")


# --- where a selector is filed -------------------------------------------------------------------


def test_match_labels_pair_is_filed_first() -> None:
    s = sel({"app": "a", "tier": "b"}, ("x", "In", ("a",)))
    assert requirement(s) == ("app", ("a",))
    assert buckets(term(s, "ns", "other")) == ((("ns", "app", "a"), ("other", "app", "a")), False)


def test_in_with_fewest_values_beats_exists_and_a_longer_in() -> None:
    s = sel(None, ("x", "Exists", ()), ("app", "In", ("a", "b", "a")), ("tier", "In", ("b",)))
    assert requirement(s) == ("tier", ("b",))
    s = sel(None, ("x", "Exists", ()), ("app", "In", ("a", "b", "a")))
    assert buckets(term(s)) == ((("ns", "app", "a"), ("ns", "app", "b")), False)  # repeats filed once


def test_lone_requirement_is_exact() -> None:
    assert buckets(term(sel({"app": "a"}))) == ((("ns", "app", "a"),), True)
    assert buckets(term(sel(None, ("app", "In", ("a", "b"))))) == (
        (("ns", "app", "a"), ("ns", "app", "b")),
        True,
    )
    assert buckets(term(sel(None, ("app", "Exists", ())))) == ((("ns", "app"),), True)


def test_no_positive_requirement_is_tried_for_the_whole_namespace() -> None:
    assert buckets(term(sel(None, ("app", "NotIn", ("a",)), ("x", "DoesNotExist", ())))) == (
        (("ns",),),
        False,
    )
    assert buckets(term(sel(), "ns", "other")) == ((("ns",), ("other",)), True)  # {} matches every pod


def test_absent_selector_and_in_without_values_are_filed_nowhere() -> None:
    assert buckets(term(None)) == ((), True)
    assert buckets(term(sel(None, ("app", "In", ()), ("x", "Exists", ())))) == ((), False)


# --- candidates against the brute force ----------------------------------------------------------

expr = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
).flatmap(
    lambda ko: (
        st.just((*ko, ()))
        if ko[1] in ("Exists", "DoesNotExist")
        else st.lists(st.sampled_from(VALUES), min_size=0 if ko[1] == "In" else 1, max_size=3).map(
            lambda vs: (*ko, tuple(vs))
        )
    )
)
selectors = st.one_of(
    st.none(),
    st.builds(
        lambda labels, exprs: sel(labels, *exprs),
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=1),
        st.lists(expr, max_size=2),
    ),
)
terms = st.builds(
    lambda s, names: AffinityTerm(frozenset(names), s, "zone"),
    selectors,
    st.lists(st.sampled_from(NAMESPACES), min_size=1, max_size=3),
)
groups = st.tuples(st.sampled_from([ANTI, HARD, PREF]), terms, st.sampled_from([0, 1, -5]))
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), min_size=1, max_size=2)


def snapshot_of(index: TermIndex) -> dict[tuple[str, ...], dict[GroupKey, bool]]:
    return {b: dict(d) for b, d in index.buckets.items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(groups, min_size=1, max_size=12), st.data())
def test_candidates_hold_every_match_and_follow_adds_and_removes(
    held: list[GroupKey], data: st.DataObject
) -> None:
    index = TermIndex()
    live: dict[GroupKey, None] = {}
    for g in held:
        if g not in live:
            index.add(g)
            live[g] = None
    for g in data.draw(st.lists(st.sampled_from(held), max_size=6)):
        if g in live:
            index.remove(g)
            del live[g]
    index.remove((ANTI, term(None, "nowhere"), 0))  # a group never added: nothing happens
    fresh = TermIndex()
    for g in live:
        fresh.add(g)
    assert snapshot_of(index) == snapshot_of(fresh)
    assert set(index.groups) == set(live)
    for _ in range(8):
        ns, labels = data.draw(st.sampled_from(NAMESPACES)), data.draw(label_sets)
        brute = [g for g in live if g[1].matches(ns, labels)]
        found = index.candidates(ns, labels)
        assert len(found) == len({g for g, _ in found})  # each group at most once
        assert set(brute) <= {g for g, _ in found}  # the index never drops a match
        assert all(g[1].matches(ns, labels) for g, exact in found if exact)
        assert sorted(map(repr, index.matching(ns, labels))) == sorted(map(repr, brute))
        assert {g for g in index.matching(ns, labels, HARD)} == {g for g in brute if g[0] != HARD}
        event(f"matching {min(len(brute), 3)}; candidates left out {min(len(live) - len(found), 3)}")


# --- LabelSelector.matches runs only where the index cannot decide ----------------------------------


@contextmanager
def counted_matches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls = [0]
    real = LabelSelector.matches

    def counting(self: LabelSelector, labels: Mapping[str, str]) -> bool:
        calls[0] += 1
        return real(self, labels)

    monkeypatch.setattr(LabelSelector, "matches", counting)
    yield calls


def test_matches_runs_only_for_inexact_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    index = TermIndex()
    apps = [(ANTI, term(sel({"app": f"app-{i}"})), 0) for i in range(50)]
    for g in apps:
        index.add(g)
    not_db = (ANTI, term(sel(None, ("app", "NotIn", ("db",)))), 0)  # tried for every pod of ns
    both = (ANTI, term(sel({"app": "app-3"}, ("tier", "Exists", ()))), 0)  # filed under app=app-3
    index.add(not_db)
    index.add(both)
    with counted_matches(monkeypatch) as calls:
        assert index.matching("ns", {"app": "app-3"}) == [not_db, apps[3]]
        assert calls[0] == 2  # not_db and both: the 50 exact groups need no call
        assert index.matching("ns", {"app": "app-3", "tier": "t"}) == [not_db, apps[3], both]
        assert index.matching("other", {"app": "app-3"}) == []
        assert index.matching("ns", {}) == [not_db]
        assert calls[0] == 5
