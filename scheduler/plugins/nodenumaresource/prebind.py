"""PreBind's annotations (docs/rules/scheduler-nodenumaresource.md#prebind): the ``resource-status`` of an
allocation and the ``resource-spec`` written back when the pod's annotation misses the policy used.
Pure. Imports: the standard library, apis (cpuset, numa), this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.cpuset import format_cpuset
from apis.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    BIND_DEFAULT,
    ResourceSpec,
    ResourceStatus,
    format_resource_spec,
    format_resource_status,
    parse_resource_spec,
)
from scheduler.plugins.nodenumaresource.cpuset_alloc import bind_policy_used
from scheduler.plugins.nodenumaresource.prefilter import PodState


def annotations_after(
    annotations: Mapping[str, Any], st: PodState, cpus: frozenset[int], node_policy: str, bind: bool
) -> dict[str, Any]:
    """A new annotations dict: ``resource-status`` with the canonical cpuset, and for a binding pod the
    ``resource-spec`` write-back."""
    out = dict(annotations)
    if bind:
        spec = spec_write_back(out, st, node_policy)
        if spec is not None:
            out[ANNOTATION_RESOURCE_SPEC] = spec
    out[ANNOTATION_RESOURCE_STATUS] = format_resource_status(ResourceStatus(format_cpuset(cpus)))
    return out


def spec_write_back(annotations: Mapping[str, Any], st: PodState, node_policy: str) -> str | None:
    """The new ``resource-spec`` text when the pod's annotation misses the policy used, else None
    (docs/rules/scheduler-nodenumaresource.md#prebind)."""
    policy, required = bind_policy_used(st.required_policy, st.preferred_policy, node_policy)
    try:
        spec = parse_resource_spec(annotations)
    except ValueError:
        return None
    req, pref, excl = (
        spec.required_cpu_bind_policy,
        spec.preferred_cpu_bind_policy,
        spec.preferred_cpu_exclusive_policy,
    )
    write = False
    if required and req in ("", BIND_DEFAULT):
        req, write = policy, True
    if pref == BIND_DEFAULT:
        pref, write = policy, True
    if req == "" and pref == "" and policy:
        pref, write = policy, True
    return format_resource_spec(ResourceSpec(req, pref, excl)) if write else None
