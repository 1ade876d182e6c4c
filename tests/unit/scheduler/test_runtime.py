"""The framework runtime: first rejecting filter per node, FitError text, weights, ties drawn at random,
single-feasible shortcut, Reserve rollback; per-node plugins adapted (called only on the rows still
feasible, same result as vectorised ones); a plugin with both forms is refused."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray
from scheduler.framework.runtime import Framework, fit_error_message, select_best
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status


def node(name: str, cpu: str = "4", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}


class LabelRule:
    """Rejects nodes without label `key` (UNSCHEDULABLE, reason names the key)."""

    def __init__(self, key: str, name: str | None = None) -> None:
        self.key = key
        self._name = name or f"NeedsLabel-{key}"

    @property
    def name(self) -> str:
        return self._name

    def status(self, snapshot: Snapshot, i: int) -> Status:
        if self.key in snapshot.infos[i].node["metadata"].get("labels", {}):
            return Status.success()
        return Status.unschedulable(f"node(s) lack label {self.key}")


class NeedsLabel(LabelRule):
    """The rule as a per-node Filter; records the rows it was called on."""

    def __init__(self, key: str, name: str | None = None) -> None:
        super().__init__(key, name)
        self.rows: list[int] = []

    def filter(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, i: int) -> Status:
        self.rows.append(i)
        return self.status(snapshot, i)


class NeedsLabelAll(LabelRule):
    """The rule as a vectorised Filter."""

    def filter_all(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot) -> FilterResult:
        failed = np.array([not self.status(snapshot, i).is_success() for i in range(snapshot.n)], bool)
        return FilterResult.from_mask(failed, Status.unschedulable(f"node(s) lack label {self.key}"))


class CPUScore:
    """Per-node Score: allocatable cpu in cores, capped at 100."""

    calls = 0

    @property
    def name(self) -> str:
        return "CPUScore"

    def score(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, i: int) -> tuple[int, Status]:
        CPUScore.calls += 1
        return min(100, int(snapshot.allocatable[snapshot.col["cpu"], i]) // 1000), Status.success()


class CPUScoreAll:
    """The same rule vectorised."""

    @property
    def name(self) -> str:
        return "CPUScore"

    def score_all(
        self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, feasible: IntArray
    ) -> IntArray:
        CPUScore.calls += 1
        scores: IntArray = np.minimum(100, snapshot.allocatable[snapshot.col["cpu"], feasible] // 1000)
        return scores


class BothForms(NeedsLabelAll):
    def filter(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, i: int) -> Status:
        return Status.success()


class Recorder:
    def __init__(self, name: str, log: list[str], fail: bool = False) -> None:
        self._name, self.log, self.fail = name, log, fail

    @property
    def name(self) -> str:
        return self._name

    def reserve(self, state: CycleState, pod: dict[str, Any], node_name: str) -> Status:
        self.log.append(f"reserve {self._name}")
        return Status.unschedulable("full") if self.fail else Status.success()

    def unreserve(self, state: CycleState, pod: dict[str, Any], node_name: str) -> None:
        self.log.append(f"unreserve {self._name}")


@pytest.mark.parametrize("kind", [NeedsLabel, NeedsLabelAll])
def test_first_rejecting_filter_decides_and_the_fit_error_is_kube_text(kind: type[LabelRule]) -> None:
    snap = Snapshot.build([node("a", labels={"x": "1"}), node("b"), node("c", labels={"y": "1"})])
    fw = Framework([kind("x"), kind("y")])
    res = fw.schedule(CycleState(0), POD, snap)
    assert res.node is None and res.status.code == Code.UNSCHEDULABLE
    assert res.diagnosis["a"].plugin == "NeedsLabel-y"
    assert res.diagnosis["b"].plugin == "NeedsLabel-x"
    assert res.diagnosis["c"].plugin == "NeedsLabel-x"
    assert res.status.message() == "0/3 nodes are available: 1 node(s) lack label y, 2 node(s) lack label x."


def test_fit_error_sorts_count_reason_strings() -> None:
    msg = fit_error_message(12, [Status.unschedulable("b", "a")] * 10 + [Status.unschedulable("z")] * 2)
    assert msg == "0/12 nodes are available: 10 a, 10 b, 2 z."


def test_weights_and_first_in_name_order_among_ties() -> None:
    snap = Snapshot.build([node("c", "8"), node("a", "8"), node("b", "2")])
    for plugin in (CPUScore(), CPUScoreAll()):
        fw = Framework([plugin], {"CPUScore": 3})
        assert fw.schedule(CycleState(0), POD, snap).node == "a"
        total = fw.score_all(CycleState(0), POD, snap, np.arange(3, dtype=np.int64))
        assert total.tolist() == [24, 6, 24]


def test_a_single_feasible_node_is_not_scored() -> None:
    snap = Snapshot.build([node("a", labels={"x": "1"}), node("b")])
    CPUScore.calls = 0
    res = Framework([NeedsLabel("x"), CPUScore()]).schedule(CycleState(0), POD, snap)
    assert (res.node, res.feasible, CPUScore.calls) == ("a", 1, 0)


def test_a_per_node_filter_sees_only_the_rows_still_feasible() -> None:
    snap = Snapshot.build(
        [node("a", labels={"x": "1"}), node("b"), node("c", labels={"x": "1", "y": "1"}), node("d")]
    )
    first, second = NeedsLabelAll("x"), NeedsLabel("y")
    res = Framework([first, second]).schedule(CycleState(0), POD, snap)
    assert second.rows == [0, 2]  # b and d were rejected by the first filter
    assert res.node == "c"
    assert res.diagnosis["a"].plugin == "NeedsLabel-y" and res.diagnosis["b"].plugin == "NeedsLabel-x"


def test_a_per_node_score_is_called_on_the_feasible_rows_only() -> None:
    snap = Snapshot.build([node("a", "8", {"x": "1"}), node("b", "16"), node("c", "2", {"x": "1"})])
    CPUScore.calls = 0
    res = Framework([NeedsLabel("x"), CPUScore()]).schedule(CycleState(0), POD, snap)
    assert (res.node, res.feasible, CPUScore.calls) == ("a", 2, 2)


def test_a_plugin_with_both_forms_is_refused() -> None:
    with pytest.raises(ValueError, match="NeedsLabel-x: implements both filter and filter_all"):
        Framework([BothForms("x")])

    class BothScores(CPUScoreAll):
        def score(
            self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, i: int
        ) -> tuple[int, Status]:
            return 0, Status.success()

    with pytest.raises(ValueError, match="CPUScore: implements both score and score_all"):
        Framework([BothScores()])


def test_reserve_failure_unreserves_everything_in_reverse() -> None:
    log: list[str] = []
    fw = Framework([Recorder("r1", log), Recorder("r2", log, fail=True), Recorder("r3", log)])
    st = fw.reserve(CycleState(0), POD, "a")
    assert st.code == Code.UNSCHEDULABLE and st.plugin == "r2"
    assert log == ["reserve r1", "reserve r2", "unreserve r3", "unreserve r2", "unreserve r1"]


def test_profile_errors_name_the_plugin() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Framework([CPUScore(), CPUScore()])
    with pytest.raises(ValueError, match=r"scoreWeights\.Nope"):
        Framework([CPUScore()], {"Nope": 1})
    with pytest.raises(ValueError, match=r"scoreWeights\.CPUScore=0"):
        Framework([CPUScore()], {"CPUScore": 0})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 64), st.sets(st.sampled_from(["x", "y", "z"]))), min_size=1, max_size=12
    )
)
def test_per_node_plugins_schedule_as_vectorised_ones(spec: list[tuple[int, set[str]]]) -> None:
    nodes = [
        node(f"n{k:02d}", str(cpu), {lab: "1" for lab in labels}) for k, (cpu, labels) in enumerate(spec)
    ]
    snap = Snapshot.build(nodes)
    vectorised = Framework([NeedsLabelAll("x"), NeedsLabelAll("y"), CPUScoreAll()], {"CPUScore": 2})
    per_node = Framework([NeedsLabel("x"), NeedsLabel("y"), CPUScore()], {"CPUScore": 2})
    mixed = Framework([NeedsLabel("x"), NeedsLabelAll("y"), CPUScoreAll()], {"CPUScore": 2})
    want = vectorised.schedule(CycleState(0), POD, snap)
    for fw in (per_node, mixed):
        got = fw.schedule(CycleState(0), POD, snap)
        assert (got.node, got.status, got.diagnosis) == (want.node, want.status, want.diagnosis)


def test_snapshot_refresh_with_a_new_resource_keeps_every_changed_row() -> None:
    from scheduler.framework.snapshot import NodeInfo

    snap = Snapshot.build([node("a"), node("b")])
    a = NodeInfo.of(node("a", "16"), generation=5)
    b = NodeInfo.of(node("b", "32"), generation=6)
    b.allocatable["example.com/gpu"] = 2
    snap.refresh([b, a])  # b brings a new column; a's change must not be lost
    assert "example.com/gpu" in snap.col
    assert snap.allocatable[snap.col["cpu"], snap.index["a"]] == 16000
    assert snap.allocatable[snap.col["example.com/gpu"], snap.index["b"]] == 2
    assert [info.generation for info in snap.infos] == [5, 6]


class CPUScoreEveryRow:
    """The same rule returning every row's score (the contract allows it)."""

    @property
    def name(self) -> str:
        return "CPUScoreEveryRow"

    def score_all(
        self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, feasible: IntArray
    ) -> IntArray:
        scores: IntArray = np.minimum(100, snapshot.allocatable[snapshot.col["cpu"]] // 1000)
        return scores


def test_every_row_and_feasible_row_scores_add_on_the_feasible_rows() -> None:
    snap = Snapshot.build([node("c", "8"), node("a", "4"), node("b", "2")])  # rows a, b, c
    fw = Framework([CPUScore(), CPUScoreEveryRow()], {"CPUScore": 2, "CPUScoreEveryRow": 5})
    feasible = np.array([0, 2], np.int64)  # a and c
    assert fw.score_all(CycleState(0), POD, snap, feasible).tolist() == [4 * 2 + 4 * 5, 8 * 2 + 8 * 5]
    fw = Framework([CPUScoreEveryRow(), CPUScore()])  # the full-length result first
    assert fw.score_all(CycleState(0), POD, snap, feasible).tolist() == [8, 16]


class CountingRandom:
    """A random.Random stand-in that counts draws (and draws from a seeded generator)."""

    def __init__(self, seed: int) -> None:
        self.inner = random.Random(seed)
        self.draws = 0

    def randrange(self, n: int) -> int:
        self.draws += 1
        return self.inner.randrange(n)


def test_ties_are_drawn_uniformly_and_reproducibly() -> None:
    scores = np.array([5, 9, 1, 9, 9, 3], np.int64)  # ties at 1, 3, 4
    picks = [select_best(scores, random.Random(s)) for s in range(3000)]
    counts = {i: picks.count(i) for i in set(picks)}
    assert set(counts) == {1, 3, 4}
    assert all(850 < c < 1150 for c in counts.values()), counts  # 1000 expected each; ~6 sigma
    rng_a, rng_b = random.Random(42), random.Random(42)
    assert [select_best(scores, rng_a) for _ in range(50)] == [select_best(scores, rng_b) for _ in range(50)]
    assert select_best(scores, None) == 1  # no generator: the first in name order


def test_a_draw_only_when_there_is_a_tie() -> None:
    counting = CountingRandom(1)
    assert select_best(np.array([1, 7, 3], np.int64), counting) == 1  # type: ignore[arg-type]
    assert counting.draws == 0
    select_best(np.array([7, 7, 3], np.int64), counting)  # type: ignore[arg-type]
    assert counting.draws == 1


def test_framework_draws_among_tied_nodes() -> None:
    snap = Snapshot.build([node(n) for n in ("a", "b", "c", "d")])
    fw = Framework([CPUScore()], rng=random.Random(3))
    chosen = {fw.schedule(CycleState(0), POD, snap).node for _ in range(200)}
    assert chosen == {"a", "b", "c", "d"}  # identical nodes: every one is drawn, not only "a"


class RejectsAtPreFilter:
    """PreFilter says no (UNSCHEDULABLE_AND_UNRESOLVABLE)."""

    name = "Picky"

    def pre_filter(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot) -> Status:
        return Status.unresolvable("pod has unbound immediate PersistentVolumeClaims", plugin="Picky")


class RecordsPostFilter:
    name = "Recorder"

    def __init__(self) -> None:
        self.seen: dict[str, Status] = {}

    def post_filter(
        self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status:
        self.seen = statuses
        return Status.unschedulable()


def test_a_pre_filter_rejection_is_every_nodes_fit_error_and_post_filter_runs() -> None:
    """As kube-scheduler 1.20: each node gets the PreFilter's status, the message is a FitError."""
    recorder = RecordsPostFilter()
    snap = Snapshot.build([node("a"), node("b"), node("c")])
    res = Framework([RejectsAtPreFilter(), recorder]).schedule(CycleState(0), POD, snap)
    assert res.node is None
    assert (
        res.status.message() == "0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims."
    )
    assert set(recorder.seen) == {"a", "b", "c"}
    assert all(st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for st in recorder.seen.values())


class ErrsAtPreFilter:
    name = "Broken"

    def pre_filter(self, state: CycleState, pod: dict[str, Any], snapshot: Snapshot) -> Status:
        return Status.error("lister failed")


def test_a_pre_filter_error_is_reported_as_it_is() -> None:
    res = Framework([ErrsAtPreFilter()]).schedule(CycleState(0), POD, Snapshot.build([node("a")]))
    assert res.status.code == Code.ERROR and res.status.message() == "lister failed"


def test_ties_are_taken_in_name_order_whatever_the_row_order() -> None:
    def ranks(names: list[str]) -> npt.NDArray[np.int64]:
        ordered = sorted(names)
        return np.array([ordered.index(x) for x in names], np.int64)

    scores = np.array([9, 1, 9, 9], np.int64)
    names = ["d", "a", "b", "c"]  # rows not in name order: the tied nodes in name order are b, c, d
    assert select_best(scores, None, ranks(names)) == 2  # "b", not row 0's "d"
    rows_picked = [names[select_best(scores, random.Random(s), ranks(names))] for s in range(40)]
    assert set(rows_picked) == {"b", "c", "d"}
    shuffled = ["c", "a", "d", "b"]  # the same nodes on other rows, the same scores per node
    by_node = np.array([9, 1, 9, 9], np.int64)
    assert [
        shuffled[select_best(by_node, random.Random(s), ranks(shuffled))] for s in range(40)
    ] == rows_picked
    # the k-th tied name is the one drawn: as sorting the tied names and indexing them
    for s in range(40):
        tied = sorted(n for n, x in zip(names, scores.tolist(), strict=True) if x == 9)
        assert (
            names[select_best(scores, random.Random(s), ranks(names))] == tied[random.Random(s).randrange(3)]
        )


def test_weights_whose_total_could_overflow_are_refused_as_kube() -> None:
    class Scorer:
        name = "S"

        def score_all(self, state: object, pod: object, snapshot: Snapshot, feasible: object) -> object:
            return np.zeros(snapshot.n, np.int64)

    Framework([Scorer()], {"S": (2**63 - 1) // 100})  # type: ignore[list-item]  # exactly fits
    with pytest.raises(ValueError, match="total score of Score plugins could overflow"):
        Framework([Scorer()], {"S": (2**63 - 1) // 100 + 1})  # type: ignore[list-item]
