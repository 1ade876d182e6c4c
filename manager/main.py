"""koord-manager entry point (composition root). So far it serves the MetricHub gRPC service; the
controllers, leader election and the embedded scheduler join it in later increments.

Imports: argparse, signal, apis.version, manager.metrichub.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from apis.version import koord_version
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore

DEFAULT_HUB_ADDR = "0.0.0.0:9317"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-manager", description="koord-manager: SLO controllers and the MetricHub"
    )
    p.add_argument("--version", action="version", version=f"koord-manager {koord_version()}")
    p.add_argument(
        "--hub-addr", default=DEFAULT_HUB_ADDR, help=f"MetricHub gRPC listen address ({DEFAULT_HUB_ADDR})"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        server, port = serve(HubStore(), args.hub_addr)
    except (OSError, RuntimeError) as e:
        print(f"koord-manager: --hub-addr={args.hub_addr}: {e}", file=sys.stderr)
        return 1
    print(f"koord-manager {koord_version()}: MetricHub listening on port {port}", flush=True)
    stop.wait()
    server.stop(grace=5).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
