"""Long fuzz runs of the targets in tests/reliability/fuzz/targets.py (the test suite runs each for a few
hundred examples; this runs them for as many as asked, e.g. 100,000 per target).

Each target runs in chunks of `--chunk` examples, each chunk a fresh hypothesis run with its own seed
(derived from `--seed`), so memory stays flat however long the run. A target stops at its first failure
(hypothesis then shrinks it): the check raised something other than the target's documented errors, or
a round-trip property broke. The minimal failing input, the seed, the traceback and hypothesis's
`@reproduce_failure` blob go to `<--out>/<target>.txt`.

`--exclude-known` leaves out the inputs of a target's known, reported failure (`Target.known`; the test
suite pins each with a strict xfail) so the rest of its input space still gets the full run; the
number left out is printed as `excluded`.

Prints one JSON object per target: target, examples, crashes, seconds, seed (and excluded, reproducer
when they apply). Exits 1 when any target crashed.
Usage: python bench/fuzz.py --examples N [--target NAME] [--seed S] [--chunk 10000] [--exclude-known]
       [--out DIR]
Imports: the standard library, hypothesis, tests.reliability.fuzz (the repo is put on sys.path).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the targets live under tests/
    sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings  # noqa: E402

from tests.reliability.fuzz.targets import TARGETS, Target  # noqa: E402

DEFAULT_OUT = Path("/tmp/koord-fuzz")


@dataclass
class Tally:
    examples: int = 0
    excluded: int = 0
    failing: bool = False
    last_failure: tuple[Any, str] | None = None
    crashes: list[str] = field(default_factory=list)


def _check_counting(target: Target, tally: Tally, exclude_known: bool) -> Any:
    def check(value: Any) -> None:
        if exclude_known and target.known is not None and target.known(value):
            tally.excluded += 1
            return
        if not tally.failing:
            tally.examples += 1
        try:
            target.check(value)
        except Exception as e:
            tally.failing = True  # from here on hypothesis shrinks: those calls are not new examples
            tally.last_failure = (value, "".join(traceback.format_exception(e)))
            raise

    return check


def run_target(target: Target, examples: int, base_seed: int, chunk: int, exclude_known: bool) -> Tally:
    tally = Tally()
    rnd = random.Random(base_seed)
    while tally.examples < examples and not tally.crashes:
        count = min(chunk, examples - tally.examples)
        before = tally.examples
        run = settings(
            max_examples=count,
            deadline=None,
            database=None,
            derandomize=False,
            print_blob=True,
            verbosity=Verbosity.quiet,  # stdout carries the JSON lines only; reports go to the file
            phases=(Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
        )(seed(rnd.getrandbits(64))(given(target.strategy)(_check_counting(target, tally, exclude_known))))
        try:
            run()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            group = e.exceptions if isinstance(e, BaseExceptionGroup) else [e]
            tally.crashes = ["".join(traceback.format_exception(x)) for x in group]
        if tally.examples == before and not tally.crashes:
            break  # hypothesis found nothing new to try: the input space is exhausted
    return tally


def _write_reproducer(out: Path, target: Target, base_seed: int, tally: Tally) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{target.name}.txt"
    lines = [f"target: {target.name}", f"seed: {base_seed}", ""]
    if tally.last_failure is not None:
        value, trace = tally.last_failure
        lines += ["minimal failing input (repr):", repr(value), "", trace]
    lines += ["hypothesis reports:", *tally.crashes]
    path.write_text("\n".join(lines))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--examples", type=int, required=True, help="examples per target")
    ap.add_argument("--target", choices=sorted(TARGETS), help="one target (default: all, one at a time)")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: random, printed)")
    ap.add_argument("--chunk", type=int, default=10_000, help="examples per hypothesis run")
    ap.add_argument("--exclude-known", action="store_true", help="leave out inputs of known failures")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where reproducers are written")
    args = ap.parse_args(argv)
    base_seed = args.seed if args.seed is not None else random.getrandbits(32)
    names = [args.target] if args.target else sorted(TARGETS)
    crashed = False
    for name in names:
        target = TARGETS[name]
        start = time.monotonic()
        tally = run_target(target, args.examples, base_seed, max(1, args.chunk), args.exclude_known)
        result: dict[str, Any] = {
            "target": name,
            "examples": tally.examples,
            "crashes": len(tally.crashes),
            "seconds": round(time.monotonic() - start, 1),
            "seed": base_seed,
        }
        if args.exclude_known:
            result["excluded"] = tally.excluded
        if tally.crashes:
            crashed = True
            result["reproducer"] = str(_write_reproducer(args.out, target, base_seed, tally))
        print(json.dumps(result), flush=True)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
