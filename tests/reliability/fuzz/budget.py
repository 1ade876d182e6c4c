"""The fuzz tests' bounded budget: hypothesis settings for a run inside the test suite.

Every fuzz test runs `EXAMPLES` examples per target (`SCENARIO_EXAMPLES` per scenario kind), without a
deadline, derandomized (the same examples on every run, so a failure in CI reproduces) and without the
example database, so the whole module stays well under a minute on a busy 2-core machine.
`KOORD_FUZZ_EXAMPLES=N` scales both up for a longer local run, `KOORD_FUZZ_RANDOM=1` draws fresh
examples; `bench/fuzz.py` is the tool for long runs.
Imports: hypothesis, the standard library.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("KOORD_FUZZ_EXAMPLES", "200"))
SCENARIO_EXAMPLES = max(1, EXAMPLES // 2)


def fuzz_settings(examples: int = EXAMPLES) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=os.environ.get("KOORD_FUZZ_RANDOM") != "1",
        database=None,
        print_blob=True,
        # generating nested documents is slow by design, and the strategies filter a little
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
