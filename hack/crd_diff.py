"""List the validation differences between two CRD manifests, path by path.

Walks the ``openAPIV3Schema`` of the first version of each CRD and prints, for every property path
(``.spec.a.b``, ``[]`` for array items, ``{}`` for map values), each of the keywords below whose value
differs, and the paths only one side declares. Descriptions are ignored. Lines of a Helm template
(``{{ ... }}``) are dropped before parsing, so a chart's CRD file can be compared as it is.

    python hack/crd_diff.py deploy/crds/slo.koordinator.sh_nodeslos.yaml UPSTREAM.yaml

Exit status 0 when nothing differs, 1 otherwise. docs/crds.md lists the differences koord keeps on
purpose. Imports: the standard library and PyYAML.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import yaml

KEYWORDS: Final = (
    "type",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "default",
    "enum",
    "pattern",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
)


def load_schema(text: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the first CRD in ``text`` (Helm template lines skipped)."""
    plain = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("{{"))
    docs = [d for d in yaml.safe_load_all(plain) if d]
    schema: dict[str, Any] = docs[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def flatten(schema: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    """Path → the compared keywords of the node at that path."""
    out = {path: {k: schema[k] for k in KEYWORDS if k in schema}}
    for name, sub in (schema.get("properties") or {}).items():
        out.update(flatten(sub, f"{path}.{name}"))
    if isinstance(schema.get("items"), dict):
        out.update(flatten(schema["items"], f"{path}[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.update(flatten(schema["additionalProperties"], f"{path}{{}}"))
    return out


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """One line per differing keyword or one-sided path, sorted by path."""
    a, b = flatten(ours), flatten(theirs)
    lines: list[str] = []
    for path in sorted(set(a) | set(b)):
        if path not in b:
            lines.append(f"{path or '(root)'}: only ours {a[path]}")
        elif path not in a:
            lines.append(f"{path or '(root)'}: only theirs {b[path]}")
        else:
            for key in KEYWORDS:
                if a[path].get(key) != b[path].get(key):
                    lines.append(
                        f"{path or '(root)'}: {key} ours={a[path].get(key)!r} theirs={b[path].get(key)!r}"
                    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    ours, theirs = (load_schema(Path(p).read_text()) for p in args)
    lines = differences(ours, theirs)
    for line in lines:
        print(line)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
