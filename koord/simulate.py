"""`koord simulate FILE...`: evaluates scenario files (docs/simulate.md format) with the same pure code
the daemons run. One file prints its result object; several print one JSON line each,
`{"file": …, "result": …}` or `{"file": …, "error": …}`. A single bad file exits 2.

Kinds are looked up lazily in KINDS (module path, function name) so a kind's code is imported only
when used. Imports: the standard library; each kind's evaluator on demand.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# kind -> (module, function(scenario: dict) -> result dict)
KINDS: dict[str, tuple[str, str]] = {
    "LoadAwareScheduling": ("scheduler.plugins.loadaware.simulate", "simulate"),
    "Schedule": ("scheduler.simulate", "simulate"),
    "BatchResource": ("manager.noderesource.simulate", "simulate"),
    "CPUSuppress": ("agent.qosmanager.simulate", "simulate_cpu_suppress"),
    "CPUBurst": ("agent.qosmanager.simulate", "simulate_cpu_burst"),
    "MemoryEvict": ("agent.qosmanager.simulate_evict", "simulate_memory"),
    "CPUEvict": ("agent.qosmanager.simulate_evict", "simulate_cpu"),
    "NodeSLO": ("manager.controllers.simulate_nodeslo", "simulate"),
    "ColocationProfile": ("manager.webhook.simulate_profile", "simulate"),
    "Coscheduling": ("scheduler.plugins.coscheduling.scenario", "simulate"),
    "ElasticQuota": ("scheduler.plugins.elasticquota.scenario", "simulate"),
    "JobReservation": ("scheduler.plugins.jobreservation.scenario", "simulate"),
    "Reservation": ("scheduler.plugins.reservation.scenario", "simulate"),
    "CPUSet": ("koord.simulate_cpuset", "simulate"),
    "DeviceShare": ("scheduler.plugins.deviceshare.scenario", "simulate"),
}


class ScenarioError(ValueError):
    """The scenario cannot be evaluated; the message names the field and value."""


def evaluator(kind: object) -> Callable[[dict[str, Any]], dict[str, Any]]:
    if not isinstance(kind, str) or kind not in KINDS:
        raise ScenarioError(f"kind={kind!r}: unknown kind (known: {', '.join(sorted(KINDS))})")
    module, func = KINDS[kind]
    fn: Callable[[dict[str, Any]], dict[str, Any]] = getattr(importlib.import_module(module), func)
    return fn


def simulate_scenario(scenario: object) -> dict[str, Any]:
    if not isinstance(scenario, dict):
        raise ScenarioError(f"scenario: expected a JSON object, got {type(scenario).__name__}")
    return evaluator(scenario.get("kind"))(scenario)


def simulate_file(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ScenarioError(f"{path}: {e.strerror or e}") from None
    try:
        scenario = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{path}: invalid JSON: {e}") from None
    return simulate_scenario(scenario)


def main(files: Sequence[str]) -> int:
    try:
        return _run(files)
    except BrokenPipeError:  # e.g. `koord simulate *.json | head`: the reader left, stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- keeps the interpreter's final flush quiet
        return 0


def _run(files: Sequence[str]) -> int:
    if len(files) == 1:
        try:
            result = simulate_file(files[0])
        except ValueError as e:
            print(f"koord simulate: {e}", file=sys.stderr)
            return 2
        print(json.dumps(result, sort_keys=True))
        return 0
    for f in files:
        try:
            line: dict[str, Any] = {"file": f, "result": simulate_file(f)}
        except ValueError as e:
            line = {"file": f, "error": str(e)}
        print(json.dumps(line, sort_keys=True), flush=True)
    return 0
