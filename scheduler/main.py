"""koord-scheduler entry point. Only `--version` works in this increment:
the load-aware scheduler arrives with issue 3.

Imports: argparse, apis.version.
"""

from __future__ import annotations

import argparse
import sys

from apis.version import koord_version


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="koord-scheduler")
    p.add_argument("--version", action="version", version=f"koord-scheduler {koord_version()}")
    p.parse_args(argv)
    print("koord-scheduler: not built yet: the load-aware scheduler arrives with issue 3", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
