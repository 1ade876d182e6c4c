"""A tiny kustomize renderer for koord's own deploy/ tree, so tests (and tools) can render the manifests
without the kustomize or kubectl binaries.

It supports exactly the kustomize features the tree uses, with kustomize v5 semantics:
``resources`` (files and directories holding a kustomization, files only inside the kustomization
root, no cycles), ``namespace``, ``labels`` (``pairs`` on ``metadata.labels`` only), ``images``
(``name``, ``newName``, ``newTag``, ``digest``) and ``patches`` (JSON 6902 operations with a
``target``, and strategic-merge ``$patch: delete`` of a whole object). Transformers run in kustomize's
order (patches, namespace, labels, images) and the output is in kustomize's legacy kind order. Any other
field, or an unsupported form of a supported one, raises ``KustomizeError`` naming it. Manifests are
``dict[str, Any]``, not ``apis.kubeobjects`` types: they are of any kind and patches address any path.

Imports: the standard library, PyYAML and koord.kustomize_objects (the rewrites, the output order).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from koord.kustomize_objects import add_labels, set_images, set_namespace, sort_objects

__all__ = ["KUSTOMIZATION_FILES", "KustomizeError", "build", "dump", "resource_id"]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_API_VERSION = "kustomize.config.k8s.io/v1beta1"
SUPPORTED_FIELDS = frozenset({"apiVersion", "kind", "resources", "namespace", "labels", "images", "patches"})

_LABEL_FIELDS = frozenset({"pairs", "includeSelectors", "includeTemplates"})
_IMAGE_FIELDS = frozenset({"name", "newName", "newTag", "digest"})
_PATCH_FIELDS = frozenset({"path", "patch", "target"})
_TARGET_FIELDS = frozenset({"group", "version", "kind", "name", "namespace"})
_JSON6902_OPS = frozenset({"add", "remove", "replace"})


class KustomizeError(ValueError):
    """The tree cannot be rendered: a missing file, a cycle, or a field this renderer does not support."""


def resource_id(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): what kustomize keeps unique."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), str(meta.get("namespace") or ""),
            str(meta.get("name", "")))  # fmt: skip


def build(path: Path | str) -> list[dict[str, Any]]:
    """Render the kustomization in directory ``path`` (like ``kubectl kustomize path``)."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise KustomizeError(f"{root}: not a directory")
    return sort_objects(_build(root, ()))


def dump(objs: Iterable[Mapping[str, Any]]) -> str:
    """Multi-document YAML of ``objs`` (keys sorted, as kustomize prints them)."""
    return yaml.safe_dump_all([dict(o) for o in objs], sort_keys=True, default_flow_style=False)


# -- loading ------------------------------------------------------------------------------------------------


def _kustomization_file(root: Path) -> Path | None:
    found = [root / name for name in KUSTOMIZATION_FILES if (root / name).is_file()]
    if len(found) > 1:
        raise KustomizeError(f"{root}: more than one kustomization file: {', '.join(p.name for p in found)}")
    return found[0] if found else None


def _load_kustomization(root: Path) -> tuple[Path, dict[str, Any]]:
    path = _kustomization_file(root)
    if path is None:
        raise KustomizeError(f"{root}: no kustomization file (one of {', '.join(KUSTOMIZATION_FILES)})")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise KustomizeError(f"{path}: not YAML: {e}") from e
    if not isinstance(doc, dict):
        raise KustomizeError(f"{path}: not a mapping")
    unsupported = sorted(set(doc) - SUPPORTED_FIELDS)
    if unsupported:
        raise KustomizeError(
            f"{path}: unsupported kustomization field(s) {', '.join(unsupported)} "
            f"(koord.kustomize supports {', '.join(sorted(SUPPORTED_FIELDS))})"
        )
    if doc.get("apiVersion", KUSTOMIZE_API_VERSION) != KUSTOMIZE_API_VERSION:
        raise KustomizeError(f"{path}: apiVersion {doc['apiVersion']!r} (want {KUSTOMIZE_API_VERSION})")
    if doc.get("kind", "Kustomization") != "Kustomization":
        raise KustomizeError(f"{path}: kind {doc['kind']!r} is not supported (only Kustomization)")
    return path, doc


def _load_objects(path: Path) -> list[dict[str, Any]]:
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as e:
        raise KustomizeError(f"{path}: {e}") from e
    objs: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            raise KustomizeError(f"{path}: a document without apiVersion and kind")
        if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
            raise KustomizeError(f"{path}: a {doc['kind']} without metadata.name")
        objs.append(doc)
    return objs


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _list(value: Any, what: str, where: Path) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise KustomizeError(f"{where}: {what} must be a list")
    return value


def _build(root: Path, visiting: tuple[Path, ...]) -> list[dict[str, Any]]:
    for seen in visiting:
        if _inside(root, seen):  # as kustomize: a root containing one being built is a cycle
            raise KustomizeError(f"cycle: {root} contains {seen}, which is being built and includes it")
    path, k = _load_kustomization(root)
    objs: list[dict[str, Any]] = []
    for entry in _list(k.get("resources"), "resources", path):
        if not isinstance(entry, str) or "://" in entry or entry.startswith(("github.com/", "git@")):
            raise KustomizeError(
                f"{path}: resource {entry!r}: only local files and directories are supported"
            )
        target = (root / entry).resolve()
        if target.is_dir():
            objs.extend(_build(target, (*visiting, root)))
        elif target.is_file():
            if not _inside(root, target):
                raise KustomizeError(
                    f"{path}: resource {entry!r} is outside the kustomization root {root} "
                    "(kustomize's load restriction: reference its directory instead)"
                )
            objs.extend(_load_objects(target))
        else:
            raise KustomizeError(f"{path}: resource {entry!r} does not exist")
    seen_ids: dict[tuple[str, str, str, str], None] = {}
    for obj in objs:
        rid = resource_id(obj)
        if rid in seen_ids:
            raise KustomizeError(f"{path}: the resource {'/'.join(p for p in rid if p)} appears twice")
        seen_ids[rid] = None
    objs = _apply_patches(root, path, _list(k.get("patches"), "patches", path), objs)
    if k.get("namespace") is not None:
        objs = [set_namespace(o, _str(k["namespace"], "namespace", path)) for o in objs]
    for pairs in [_labels(group, path) for group in _list(k.get("labels"), "labels", path)]:
        objs = [add_labels(o, pairs) for o in objs]
    for image in [_image(spec, path) for spec in _list(k.get("images"), "images", path)]:
        objs = [set_images(o, image) for o in objs]
    return objs


def _str(value: Any, what: str, where: Path) -> str:
    if not isinstance(value, str) or not value:
        raise KustomizeError(f"{where}: {what} must be a non-empty string")
    return value


# -- patches ------------------------------------------------------------------------------------------------


def _apply_patches(
    root: Path, path: Path, patches: Sequence[Any], objs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    for i, spec in enumerate(patches):
        where = f"{path}: patches[{i}]"
        if not isinstance(spec, dict):
            raise KustomizeError(f"{where}: must be a mapping")
        unknown = sorted(set(spec) - _PATCH_FIELDS)
        if unknown:
            raise KustomizeError(f"{where}: unsupported field(s) {', '.join(unknown)}")
        if ("path" in spec) == ("patch" in spec):
            raise KustomizeError(f"{where}: exactly one of path and patch")
        if "path" in spec:
            file = (root / _str(spec["path"], "path", path)).resolve()
            if not _inside(root, file) or not file.is_file():
                raise KustomizeError(f"{where}: patch file {spec['path']!r} missing or outside {root}")
            text = file.read_text()
        else:
            text = _str(spec["patch"], "patch", path)
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise KustomizeError(f"{where}: not YAML: {e}") from e
        target = spec.get("target")
        if isinstance(doc, list):
            if not isinstance(target, dict):
                raise KustomizeError(f"{where}: a JSON 6902 patch needs a target")
            hits = [_matches(o, target, where) for o in objs]
            if not any(hits):
                raise KustomizeError(f"{where}: target {target} matches no resource")
            objs = [_json6902(o, doc, where) if hit else o for o, hit in zip(objs, hits, strict=True)]
        elif isinstance(doc, dict) and doc.get("$patch") == "delete":
            if target is not None:
                raise KustomizeError(f"{where}: a target on a strategic-merge delete is not supported")
            meta = doc.get("metadata") or {}
            rid = (doc.get("apiVersion"), doc.get("kind"), meta.get("namespace"), meta.get("name"))
            kept = [o for o in objs if not _same_object(o, rid)]
            if len(kept) == len(objs):
                raise KustomizeError(
                    f"{where}: $patch: delete of {doc.get('kind')} {meta.get('name')}: no such resource"
                )
            objs = kept
        else:
            raise KustomizeError(
                f"{where}: unsupported patch: koord.kustomize applies JSON 6902 operation lists and "
                "strategic-merge `$patch: delete` only"
            )
    return objs


def _same_object(obj: dict[str, Any], rid: tuple[Any, Any, Any, Any]) -> bool:
    api_version, kind, namespace, name = rid
    meta = obj.get("metadata") or {}
    return (
        obj.get("apiVersion") == api_version
        and obj.get("kind") == kind
        and meta.get("name") == name
        and (namespace is None or meta.get("namespace") == namespace)
    )


def _matches(obj: dict[str, Any], target: Mapping[str, Any], where: str) -> bool:
    unknown = sorted(set(target) - _TARGET_FIELDS)
    if unknown:
        raise KustomizeError(f"{where}: unsupported target field(s) {', '.join(unknown)}")
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    meta = obj.get("metadata") or {}
    have = {"group": group, "version": version, "kind": obj.get("kind"), "name": meta.get("name"),
            "namespace": meta.get("namespace")}  # fmt: skip
    return all(have[k] == v for k, v in target.items())


def _pointer(path: Any, where: str) -> list[str]:
    if not isinstance(path, str) or not path.startswith("/"):
        raise KustomizeError(f"{where}: JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json6902(obj: dict[str, Any], ops: Sequence[Any], where: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for op in ops:
        if not isinstance(op, dict) or op.get("op") not in _JSON6902_OPS:
            name = op.get("op") if isinstance(op, dict) else op
            raise KustomizeError(f"{where}: unsupported JSON 6902 operation {name!r} (add, remove, replace)")
        *parents, last = _pointer(op.get("path"), where)
        node: Any = out
        for part in parents:
            node = _step(node, part, where, op["path"])
        kind = op["op"]
        if kind != "remove" and "value" not in op:
            raise KustomizeError(f"{where}: {kind} {op['path']} has no value")
        value = copy.deepcopy(op.get("value"))
        if isinstance(node, dict):
            if kind != "add" and last not in node:
                raise KustomizeError(f"{where}: {kind} {op['path']}: no such field")
            if kind == "remove":
                del node[last]
            else:
                node[last] = value
        elif isinstance(node, list):
            if kind == "add" and last == "-":
                node.append(value)
                continue
            index = _index(last, len(node) + (1 if kind == "add" else 0), where, op["path"])
            if kind == "add":
                node.insert(index, value)
            elif kind == "remove":
                del node[index]
            else:
                node[index] = value
        else:
            raise KustomizeError(f"{where}: {kind} {op['path']}: parent is not an object or array")
    return out


def _index(part: str, size: int, where: str, path: str) -> int:
    if not part.isdigit() or int(part) >= size:
        raise KustomizeError(f"{where}: {path}: bad array index {part!r}")
    return int(part)


def _step(node: Any, part: str, where: str, path: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            raise KustomizeError(f"{where}: {path}: no field {part!r}")
        return node[part]
    if isinstance(node, list):
        return node[_index(part, len(node), where, path)]
    raise KustomizeError(f"{where}: {path}: {part!r} is below a scalar")


# -- labels, images: checked here, applied by koord.kustomize_objects -------------------------------------


def _labels(group: Any, where: Path) -> dict[str, str]:
    if not isinstance(group, dict):
        raise KustomizeError(f"{where}: labels entries must be mappings")
    unknown = sorted(set(group) - _LABEL_FIELDS)
    if unknown:
        raise KustomizeError(f"{where}: labels: unsupported field(s) {', '.join(unknown)}")
    for flag in ("includeSelectors", "includeTemplates"):
        if group.get(flag):
            raise KustomizeError(f"{where}: labels: {flag}: true is not supported (metadata labels only)")
    pairs = group.get("pairs")
    if not isinstance(pairs, dict) or not all(isinstance(v, str) for v in pairs.values()):
        raise KustomizeError(f"{where}: labels: pairs must map names to strings")
    return {str(k): v for k, v in pairs.items()}


_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _image(spec: Any, where: Path) -> dict[str, str]:
    if not isinstance(spec, dict):
        raise KustomizeError(f"{where}: images entries must be mappings")
    unknown = sorted(set(spec) - _IMAGE_FIELDS)
    if unknown:
        raise KustomizeError(f"{where}: images: unsupported field(s) {', '.join(unknown)}")
    out = {k: str(v) for k, v in spec.items()}
    if not out.get("name"):
        raise KustomizeError(f"{where}: images: an entry without name")
    if "newTag" in out and "digest" in out:
        raise KustomizeError(f"{where}: images: {out['name']}: newTag and digest together are not supported")
    if "digest" in out and not _DIGEST.match(out["digest"]):
        raise KustomizeError(f"{where}: images: {out['name']}: digest must be sha256:<64 hex>")
    return out
