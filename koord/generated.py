"""Shared driver of the repository's code generators (hack/gen_proto.py, hack/gen_crds.py): compare
fresh output with the committed files, write it, and the `--check` command line.

Imports: the standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

Generated = Mapping[Path, bytes | str]


def _text(content: bytes | str) -> str:
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else content


def stale(root: Path, fresh: Generated) -> list[str]:
    """Differences between the committed files below root and fresh output ([] when equal)."""
    problems: list[str] = []
    for name, content in fresh.items():
        path = root / name
        if not path.exists():
            problems.append(f"missing: {name}")
            continue
        committed = path.read_bytes() if isinstance(content, bytes) else path.read_text()
        if committed == content:
            continue
        problems.append(f"differs: {name}")
        diff = difflib.unified_diff(
            _text(committed).splitlines(keepends=True),
            _text(content).splitlines(keepends=True),
            fromfile=f"committed/{name}",
            tofile=f"fresh/{name}",
        )
        problems.extend(line.rstrip("\n") for line in diff)
    return problems


def write(root: Path, fresh: Generated) -> list[Path]:
    """Writes fresh output below root; returns the paths written."""
    written = []
    for name, content in fresh.items():
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        written.append(path)
    return written


def main(
    argv: Sequence[str] | None, *, doc: str | None, what: str, script: str, root: Path,
    generate: Callable[[], Generated],
) -> int:  # fmt: skip
    """`script [--check]`: write the generated files, or exit 1 listing the stale ones."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the committed files differ from a fresh generation"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(root, generate())
        if problems:
            print(f"{what}: stale; run `python {script}`:", file=sys.stderr)
            for line in problems:
                print(line, file=sys.stderr)
            return 1
        print(f"{what}: up to date")
        return 0
    for path in write(root, generate()):
        print(f"wrote {path.relative_to(root)}")
    return 0
