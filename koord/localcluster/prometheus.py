"""A local Prometheus server (Debian's ``prometheus`` binary) scraping the koord daemons: renders a
prometheus.yml with static targets, runs ``prometheus`` as a child process on 127.0.0.1 (a free port, a
data folder under the given state folder), waits for ``/-/ready``, answers instant queries through the
HTTP API and is stopped by PID (SIGTERM, wait, SIGKILL). Used by the integration tests of the Grafana
dashboards (``deploy/grafana/``) and by ``koord up`` when the binary is installed.

Imports: standard library and koord.localcluster only.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from koord.localcluster.controlplane import free_ports
from koord.localcluster.procs import spawn_logged

__all__ = ["Prometheus", "PrometheusError", "find_prometheus", "render_config"]


class PrometheusError(RuntimeError):
    """Prometheus did not start, or a query failed; the message carries the detail."""


def find_prometheus() -> str | None:
    """The ``prometheus`` binary on PATH (Debian: /usr/bin/prometheus), or None."""
    return shutil.which("prometheus")


def _duration(seconds: float) -> str:
    """A Prometheus duration ("1s", "250ms")."""
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def render_config(targets: Sequence[tuple[str, str]], interval_s: float = 1.0) -> str:
    """prometheus.yml (as JSON, which is YAML): one scrape job per distinct job name, its static targets
    in the given order, ``scrape_interval`` = ``scrape_timeout`` = ``interval_s``."""
    jobs: dict[str, list[str]] = {}
    for job, address in targets:
        jobs.setdefault(job, []).append(address)
    interval = _duration(interval_s)
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": addresses}]}
            for job, addresses in jobs.items()
        ],
    }
    return json.dumps(config, indent=2) + "\n"


class Prometheus:
    """``Prometheus(state_dir, [("koordlet", "127.0.0.1:9316"), ...]).start(30)``; ``query("up")``;
    ``stop()``. Listens on 127.0.0.1 only; its TSDB lives in ``state_dir/prometheus-data``."""

    def __init__(self, state_dir: Path, targets: Sequence[tuple[str, str]], interval_s: float = 1.0) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.state_dir = Path(state_dir)
        self.targets = list(targets)
        self.interval_s = interval_s
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The HTTP base URL (``http://127.0.0.1:PORT``); valid after ``start``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "prometheus.log"

    def start(self, timeout: float = 30.0) -> Prometheus:
        """Write the config, start the server and wait until ``/-/ready`` answers 200."""
        binary = find_prometheus()
        if binary is None:
            raise PrometheusError("prometheus is not installed (Debian: apt-get install prometheus)")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        config = self.state_dir / "prometheus.yml"
        config.write_text(render_config(self.targets, self.interval_s))
        data = self.state_dir / "prometheus-data"
        data.mkdir(exist_ok=True)
        [self.port] = free_ports(1)
        self._proc = spawn_logged(
            self.log_path,
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d",
            ],
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self._proc.returncode}:\n{self._tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise PrometheusError(f"prometheus not ready within {timeout}s:\n{self._tail()}")

    def _tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as r:
                body = json.loads(r.read().decode())
        except urllib.error.HTTPError as e:  # 400/422: a bad expression; the body says why
            try:
                body = json.loads(e.read().decode())
            except ValueError:
                raise PrometheusError(f"{path}: HTTP {e.code}") from e
        except (OSError, ValueError) as e:
            raise PrometheusError(f"{path}: {e}") from e
        if body.get("status") != "success":
            raise PrometheusError(f"{path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query at now: the result list (vector samples ``{"metric": {...}, "value": [t, v]}``;
        a scalar or string result comes back as a one-element list)."""
        data = self._get("/api/v1/query", {"query": expr})
        result = data.get("result")
        if data.get("resultType") in ("scalar", "string"):
            return [{"metric": {}, "value": result}]
        return list(result or [])

    def targets_up(self) -> dict[str, bool]:
        """``"job/host:port"`` → whether the last scrape of that target succeeded (False before the
        first scrape)."""
        data = self._get("/api/v1/targets", {"state": "active"})
        return {
            f"{t['labels'].get('job', '')}/{t['labels'].get('instance', '')}": t.get("health") == "up"
            for t in data.get("activeTargets", [])
        }

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server, wait up to ``timeout`` s, then SIGKILL it."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
