"""koordlet entry point. Only `--version` works in this increment:
the node agent (collection, reporting, QoS) arrives with issues 4 and 6.

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
    p = argparse.ArgumentParser(prog="koordlet")
    p.add_argument("--version", action="version", version=f"koordlet {version}")
    p.parse_args(argv)
    print(
        "koordlet: not built yet: the node agent (collection, reporting, QoS) arrives with issues 4 and 6",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
