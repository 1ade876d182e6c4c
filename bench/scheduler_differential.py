"""koord-scheduler against the real kube-scheduler v1.20.2 over many seeds
(docs/testing.md#the-kube-scheduler-oracle): a control plane of its own, both schedulers, and the
differential harness of tests/differential run on seeds `--first` … `--first + --seeds - 1`.

Prints one JSON object: seeds, pods, scheduled, unschedulable, scored_pods, score_comparisons,
plugin_scores and plugin_varied (per kube score plugin: node scores compared, pods whose scores
differed), known (FitError messages matched only through the harness's KNOWN_REASONS), preemptions
(kube preempted and its node and victims were compared), preemption_checks (unschedulable pods whose
preemption was compared), volume_pods_bound, claims_bound (claims kube's PreBind bound),
volume_pods_refused, mismatches (a count), mismatch_details (each: seed, pod, kind, kube, koord,
detail), families, seconds, pods_per_s. Exits 1 when there is a mismatch.
Usage: python bench/scheduler_differential.py [--seeds 50] [--first 1] [--nodes 6] [--bound 6]
       [--pending 12] [--families resources,taints,...]   (run it with `nice -n 10`)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the harness lives under tests/
    sys.path.insert(0, str(REPO))

from koord.localcluster.bootstrap import bootstrap  # noqa: E402
from koord.localcluster.controlplane import ControlPlane  # noqa: E402
from tests.differential.generator import ENABLED, FAMILIES  # noqa: E402
from tests.differential.harness import Differential, Report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=50)
    p.add_argument("--first", type=int, default=1)
    p.add_argument("--nodes", type=int, default=6)
    p.add_argument("--bound", type=int, default=6)
    p.add_argument("--pending", type=int, default=12)
    known = ", ".join(FAMILIES)
    p.add_argument("--families", default=",".join(sorted(ENABLED)),
                   help=f"comma-separated, of: {known} (default: the enabled ones)")  # fmt: skip
    args = p.parse_args(argv)
    families = frozenset(f for f in args.families.split(",") if f)
    total = Report(families=sorted(families))
    t0 = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="koord-diff-") as tmp,
        ControlPlane(state_dir=Path(tmp) / "cp") as cp,
    ):
        api = cp.api_client()
        try:
            bootstrap(api)
        finally:
            api.close()
        with Differential(cp, Path(tmp) / "work", families) as d:
            t0 = time.monotonic()
            for seed in range(args.first, args.first + args.seeds):
                total.add(d.run(seed, nodes=args.nodes, bound=args.bound, pending=args.pending))
    out = total.as_dict()
    seconds = time.monotonic() - t0
    out["seconds"] = round(seconds, 1)
    out["pods_per_s"] = round(total.pods / seconds, 2) if seconds else 0.0
    print(json.dumps(out, indent=1, default=str))
    return 1 if total.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
