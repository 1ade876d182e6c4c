"""``koord simulate`` kind ``CPUSet`` (docs/rules/scheduler-nodenumaresource.md#koord-simulate-kind-cpuset):
dispatches on ``operation`` — ``takeCPUs``, ``preFilter`` and ``filter`` to the scheduler's
NodeNUMAResource evaluator, ``containerCPUSet`` to the koordlet's cpuset rule. Each side is imported only
when used. Imports: the standard library, koord.simulate (ScenarioError); the evaluators on demand.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final

from koord.simulate import ScenarioError

# operation -> (module, function(scenario) -> result)
OPERATIONS: Final[dict[str, tuple[str, str]]] = {
    "takeCPUs": ("scheduler.plugins.nodenumaresource.scenario", "simulate"),
    "preFilter": ("scheduler.plugins.nodenumaresource.scenario", "simulate"),
    "filter": ("scheduler.plugins.nodenumaresource.scenario", "simulate"),
    "containerCPUSet": ("agent.topology.cpusetrule", "simulate_container_cpuset"),
}


def simulate(scenario: dict[str, Any]) -> dict[str, Any]:
    operation = scenario.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ScenarioError(f"operation={operation!r}: must be one of {', '.join(OPERATIONS)}")
    module, func = OPERATIONS[operation]
    try:
        fn: Callable[[dict[str, Any]], dict[str, Any]] = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError):
        raise ScenarioError(f"operation={operation!r}: {module}.{func} is not available") from None
    try:
        return fn(scenario)
    except ScenarioError:
        raise
    except ValueError as e:
        raise ScenarioError(str(e)) from None
