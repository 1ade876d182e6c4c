"""koord-scheduler entry point. Only `--version` works in this increment:
the load-aware scheduler arrives with issue 3.

Imports: argparse and the standard library.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata


def main(argv: list[str] | None = None) -> int:
    try:
        version = metadata.version("koord")
    except metadata.PackageNotFoundError:
        version = "0.0.0+unknown"
    p = argparse.ArgumentParser(prog="koord-scheduler")
    p.add_argument("--version", action="version", version=f"koord-scheduler {version}")
    p.parse_args(argv)
    print("koord-scheduler: not built yet: the load-aware scheduler arrives with issue 3", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
