"""ClusterColocationProfile (config.koordinator.sh/v1alpha1, cluster-scoped) as typed dataclasses.

The spec's fields and Go JSON names are upstream's
(docs/rules/colocation-profile.md#the-clustercolocationprofile-crd); the codec is ``apis.gojson``, so
the CRD schema (``apis.crds``) is derived from these types.
``parse_profile`` decodes a raw CR object and raises ``ColocationProfileError`` naming the JSON path and
the value when a field has the wrong JSON type or ``qosClass`` is not one of the five classes (objects
the API server's schema would have refused). What upstream only finds out while mutating a pod is kept
for the mutation, so it can behave as upstream does there:

* a selector is decoded but not validated here: ``ProfileSelector.error`` records why Kubernetes'
  ``LabelSelectorAsSelector`` would fail (docs/rules/colocation-profile.md#which-profiles-match-a-pod);
* ``probability`` keeps any string (``"abc"`` fails only when the profile is applied);
* ``patch`` keeps any JSON value (a non-object fails only when it is applied).

Imports: the standard library and apis (constants, gojson, gojson_base, gojson_collections, gojson_kinds,
labelselector). Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from apis import constants as c
from apis.gojson import GoStruct, StructKind, jf, validate
from apis.gojson_base import DecodeError, FieldError, Kind
from apis.gojson_collections import MapKind
from apis.gojson_kinds import AnyKind, EnumKind, IntKind, IntOrStrKind, ObjectKind, StrKind
from apis.labelselector import LabelSelector, LabelSelectorError, Requirement

__all__ = [
    "QOS_CLASSES",
    "ClusterColocationProfile",
    "ClusterColocationProfileSpec",
    "ColocationProfileError",
    "ProfileSelector",
    "parse_profile",
]

QOS_CLASSES: Final = ("LSE", "LSR", "LS", "BE", "SYSTEM")


class ColocationProfileError(ValueError):
    """A profile object that cannot be decoded; ``path`` is the JSON path (``spec.qosClass``)."""

    def __init__(self, path: str, reason: str, value: object) -> None:
        super().__init__(f"{path or '<root>'}: {reason} (got {value!r:.120})")
        self.path = path
        self.reason = reason
        self.value = value


@dataclass(frozen=True)
class ProfileSelector:
    """A decoded ``metav1.LabelSelector`` as the webhook evaluates it (koord-manager's fast path).

    Only ``matchLabels`` (non-empty) and no ``matchExpressions``: the pairs are compared as written,
    never validated. Otherwise the selector is Kubernetes' ``LabelSelectorAsSelector``, which checks
    keys, values and operators: ``error`` says why it fails (``None`` when it is valid).
    """

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()
    error: str | None = None

    def is_empty(self) -> bool:
        """True for ``{}``: nothing to match, so every label set matches."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Every matchLabels pair and every expression holds (meaningless when ``error`` is set)."""
        return LabelSelector(self.match_labels, self.match_expressions).matches(labels)

    def to_dict(self) -> dict[str, Any]:
        return LabelSelector(self.match_labels, self.match_expressions).to_dict()


def _go_lookup(data: Mapping[str, Any], name: str) -> Any:
    """Go encoding/json key lookup: the exact key, else a case-insensitive one."""
    if name in data:
        return data[name]
    for key, value in data.items():
        if isinstance(key, str) and key.lower() == name.lower():
            return value
    return None


class ProfileSelectorKind(Kind):
    """``*metav1.LabelSelector`` decoded into a ``ProfileSelector``: JSON type errors are decode errors,
    semantic errors are recorded in ``ProfileSelector.error``."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        try:
            parsed = LabelSelector.from_dict(raw)
        except LabelSelectorError as exc:
            if exc.type_error:
                where = f"{path}.{exc.field}" if exc.field else path
                errs.append(FieldError(where, exc.value, exc.message))
                return old
            return self._invalid(raw, str(exc))
        return ProfileSelector(parsed.match_labels, parsed.match_expressions)

    @staticmethod
    def _invalid(raw: Mapping[str, Any], error: str) -> ProfileSelector:
        # The types are right (from_dict checks them before the semantics), so both parts decode.
        labels = {
            str(k): "" if v is None else str(v) for k, v in (_go_lookup(raw, "matchLabels") or {}).items()
        }
        exprs = [e if isinstance(e, Mapping) else {} for e in _go_lookup(raw, "matchExpressions") or []]
        requirements = tuple(
            Requirement(
                str(_go_lookup(e, "key") or ""),
                str(_go_lookup(e, "operator") or ""),
                tuple("" if v is None else str(v) for v in _go_lookup(e, "values") or []),
            )
            for e in exprs
        )
        # The fast path (matchLabels only) never validates, so it cannot fail.
        fast = not requirements and bool(labels)
        return ProfileSelector(labels, requirements, None if fast else error)

    def encode(self, value: Any) -> Any:
        return value.to_dict()

    def openapi(self) -> dict[str, Any]:
        def string() -> dict[str, Any]:  # a fresh node each time: no YAML anchors in the CRD file
            return {"type": "string"}

        requirement = {
            "type": "object",
            "properties": {
                "key": string(),
                "operator": string(),
                "values": {"type": "array", "items": string()},
            },
            "required": ["key", "operator"],
        }
        return {
            "type": "object",
            "properties": {
                "matchExpressions": {"type": "array", "items": requirement},
                "matchLabels": {"type": "object", "additionalProperties": string()},
            },
        }


_STRING_MAP: Final = MapKind(StrKind(nullable=False))


@dataclass(frozen=True)
class ClusterColocationProfileSpec(GoStruct):
    """What a profile selects and what it writes into each selected pod (upstream's field order)."""

    namespace_selector: ProfileSelector | None = jf("namespaceSelector", ProfileSelectorKind())
    selector: ProfileSelector | None = jf("selector", ProfileSelectorKind())
    probability: int | str | None = jf("probability", IntOrStrKind())
    qos_class: str | None = jf("qosClass", StrKind(), enum=QOS_CLASSES)
    priority_class_name: str | None = jf("priorityClassName", StrKind())
    # The API server does not enforce the int32 format: the bounds make it refuse what Go cannot decode.
    koordinator_priority: int | None = jf(
        "koordinatorPriority", IntKind(32), crd_minimum=-(2**31), crd_maximum=2**31 - 1
    )
    labels: dict[str, str] | None = jf("labels", _STRING_MAP)
    annotations: dict[str, str] | None = jf("annotations", _STRING_MAP)
    label_keys_mapping: dict[str, str] | None = jf("labelKeysMapping", _STRING_MAP)
    annotation_keys_mapping: dict[str, str] | None = jf("annotationKeysMapping", _STRING_MAP)
    label_suffixes: dict[str, str] | None = jf("labelSuffixes", _STRING_MAP)
    scheduler_name: str | None = jf("schedulerName", StrKind())
    patch: Any = jf("patch", AnyKind())


@dataclass(frozen=True)
class ClusterColocationProfile(GoStruct):
    """A whole ClusterColocationProfile; ``metadata`` is kept verbatim, ``status`` is always empty."""

    metadata: dict[str, Any] = jf("metadata", ObjectKind(pointer=False))
    spec: ClusterColocationProfileSpec = jf(
        "spec",
        StructKind(ClusterColocationProfileSpec, pointer=False),
        default_factory=ClusterColocationProfileSpec,
    )
    status: dict[str, Any] | None = jf("status", ObjectKind())
    api_version: str = jf(
        "apiVersion", EnumKind((c.CONFIG_API_VERSION,)), default_factory=lambda: c.CONFIG_API_VERSION
    )
    kind: str = jf(
        "kind",
        EnumKind((c.CLUSTER_COLOCATION_PROFILE_KIND,)),
        default_factory=lambda: c.CLUSTER_COLOCATION_PROFILE_KIND,
    )

    _JSON_ORDER: ClassVar[tuple[str, ...]] = ("apiVersion", "kind")

    @property
    def name(self) -> str:
        """``metadata.name`` (``""`` when absent)."""
        name = self.metadata.get("name", "")
        return name if isinstance(name, str) else ""

    @property
    def skip_update_resources(self) -> bool:
        """The profile's own annotation ``config.koordinator.sh/skip-update-resources`` is present (any
        value). A copy in ``spec.annotations`` does not count: it only lands on the pod."""
        annotations = self.metadata.get("annotations")
        return isinstance(annotations, Mapping) and c.ANNOTATION_SKIP_UPDATE_RESOURCES in annotations


def parse_profile(obj: Any, path: str = "") -> ClusterColocationProfile:
    """Decode a ClusterColocationProfile object (``apiVersion``/``kind`` may be omitted); raises
    ColocationProfileError for the first bad field."""
    if not isinstance(obj, Mapping):
        raise ColocationProfileError(path, "expected a ClusterColocationProfile object", obj)
    raw = dict(obj)
    raw.setdefault("apiVersion", c.CONFIG_API_VERSION)
    raw.setdefault("kind", c.CLUSTER_COLOCATION_PROFILE_KIND)
    try:
        profile = ClusterColocationProfile.from_dict(raw, path)
    except DecodeError as e:
        first = e.errors[0]
        raise ColocationProfileError(first.path, first.message, first.value) from None
    problems = validate(profile.spec, _join(path, "spec"))
    if problems:
        raise ColocationProfileError(problems[0].path, problems[0].message, problems[0].value)
    annotations = profile.metadata.get("annotations")
    if annotations is not None and not isinstance(annotations, Mapping):
        raise ColocationProfileError(_join(path, "metadata.annotations"), "must be an object", annotations)
    return profile


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
