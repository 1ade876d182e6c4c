"""Times the real local control plane: start to /readyz, CRD bootstrap, and stop by PID.

Prints one JSON object: {"runs", "start_s_median", "bootstrap_s_median", "stop_s_median", "start_s_max"}.
Usage: python bench/controlplane.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    runs = max(1, min(ap.parse_args().runs, 10))  # bounded
    start, boot, stop = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        cp = ControlPlane().start()
        t1 = time.perf_counter()
        try:
            api = cp.api_client()
            bootstrap(api)
            api.close()
            t2 = time.perf_counter()
        finally:
            cp.stop()
        t3 = time.perf_counter()
        start.append(t1 - t0)
        boot.append(t2 - t1)
        stop.append(t3 - t2)
    print(
        json.dumps(
            {
                "runs": runs,
                "start_s_median": round(statistics.median(start), 2),
                "bootstrap_s_median": round(statistics.median(boot), 2),
                "stop_s_median": round(statistics.median(stop), 2),
                "start_s_max": round(max(start), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
