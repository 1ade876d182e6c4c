"""The patch metadata of a Pod for the strategic merge patch (``manager.webhook.strategicmerge``).

Each field that is not simply replaced carries its ``patchStrategy`` / ``patchMergeKey`` struct tags of
k8s.io/api core/v1 (docs/rules/colocation-profile.md#the-patch-field): the lists merged element by
element and their merge keys, and the structs on the way to them. A field absent from a table has no
strategy (a list is replaced, an object merged key by key). ``merge,retainKeys`` is ``merge`` here:
``$retainKeys`` is a directive the patch itself carries.
Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["NO_META", "POD", "Field", "Schema"]


@dataclass(frozen=True)
class Field:
    """A field's patch metadata: ``strategy`` (``merge``: a list merges instead of being replaced;
    ``replace``: an object is replaced instead of merged), the list's ``merge_key`` (none for a list of
    scalars) and the schema of the field's struct or of its list's elements."""

    strategy: str = ""
    merge_key: str = ""
    schema: Mapping[str, Field] = field(default_factory=dict)


Schema = Mapping[str, Field]
NO_META: Final = Field()

OBJECT_META: Final[Schema] = {"ownerReferences": Field("merge", "uid"), "finalizers": Field("merge")}
CONTAINER: Final[Schema] = {
    "ports": Field("merge", "containerPort"),
    "env": Field("merge", "name"),
    "volumeMounts": Field("merge", "mountPath"),
    "volumeDevices": Field("merge", "devicePath"),
}
CONTAINER_STATUS: Final[Schema] = {
    "volumeMounts": Field("merge", "mountPath"),
    "allocatedResourcesStatus": Field("merge", "name"),
}
VOLUME: Final[Schema] = {
    "ephemeral": Field(schema={"volumeClaimTemplate": Field(schema={"metadata": Field(schema=OBJECT_META)})})
}
POD_SPEC: Final[Schema] = {
    "volumes": Field("merge", "name", VOLUME),
    "initContainers": Field("merge", "name", CONTAINER),
    "containers": Field("merge", "name", CONTAINER),
    "ephemeralContainers": Field("merge", "name", CONTAINER),
    "imagePullSecrets": Field("merge", "name"),
    "hostAliases": Field("merge", "ip"),
    "topologySpreadConstraints": Field("merge", "topologyKey"),
    "schedulingGates": Field("merge", "name"),
    "resourceClaims": Field("merge", "name"),
}
POD_STATUS: Final[Schema] = {
    "conditions": Field("merge", "type"),
    "hostIPs": Field("merge", "ip"),
    "podIPs": Field("merge", "ip"),
    "resourceClaimStatuses": Field("merge", "name"),
    "containerStatuses": Field(schema=CONTAINER_STATUS),
    "initContainerStatuses": Field(schema=CONTAINER_STATUS),
    "ephemeralContainerStatuses": Field(schema=CONTAINER_STATUS),
}
POD: Final[Schema] = {
    "metadata": Field(schema=OBJECT_META),
    "spec": Field(schema=POD_SPEC),
    "status": Field(schema=POD_STATUS),
}
