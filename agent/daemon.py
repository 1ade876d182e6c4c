"""koordlet entry point. Only `--version` works in this increment:
the node agent (collection, reporting, QoS) arrives with issues 4 and 6.

Imports: argparse, apis.version.
"""

from __future__ import annotations

import argparse
import sys

from apis.version import koord_version


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="koordlet")
    p.add_argument("--version", action="version", version=f"koordlet {koord_version()}")
    p.parse_args(argv)
    print(
        "koordlet: not built yet: the node agent (collection, reporting, QoS) arrives with issues 4 and 6",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
