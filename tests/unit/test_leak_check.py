"""The suite-wide check of tests/conftest.py: a test that leaves a thread or a child process running
fails and the failure names it; one whose threads and processes end (at once or within the grace),
or that restarts a process a session fixture registered as its own, passes. Run in a separate pytest
process so the leaks are not this test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASES = """
import atexit
import subprocess
import threading
import time

import pytest

stop = threading.Event()
kept = []  # a Popen dropped unwaited is reaped by its finaliser; keep it to leave a zombie
atexit.register(lambda: [p.kill() for p in kept])  # the check names leaks; it does not stop them


def test_leaks_a_thread():
    threading.Thread(target=stop.wait, name="leaky-thread", daemon=True).start()


def test_leaks_a_process():
    kept.append(subprocess.Popen(["sleep", "37"]))


def test_leaves_a_zombie():
    kept.append(subprocess.Popen(["true"]))
    time.sleep(0.3)  # exited; never waited for


def test_cleans_up():
    t = threading.Thread(target=lambda: None, name="joined")
    t.start()
    t.join()
    subprocess.run(["true"], check=True)


def test_threads_stopping_within_the_grace_pass():
    threading.Timer(0.3, lambda: None).start()
    threading.Thread(target=subprocess.run, args=(["sleep", "0.5"],)).start()


@pytest.fixture(scope="session")
def daemon(session_processes):
    box = {"proc": subprocess.Popen(["sleep", "60"])}
    session_processes.append(lambda: [box["proc"].pid])
    yield box
    box["proc"].kill()
    box["proc"].wait()


def test_restarting_a_session_fixtures_process_passes(daemon):
    daemon["proc"].kill()
    daemon["proc"].wait()
    daemon["proc"] = subprocess.Popen(["sleep", "60"])
"""


def test_leaked_threads_and_processes_fail_the_test_that_left_them(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import no_leaked_threads_or_processes, session_processes\n"
    )
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rE", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "6 passed, 3 errors" in text, text
    assert "ERROR test_cases.py::test_leaks_a_thread" in text, text
    assert "thread 'leaky-thread' (daemon=True, target=Event.wait)" in text, text
    assert "ERROR test_cases.py::test_leaks_a_process" in text, text
    assert "sleep 37" in text, text
    assert "ERROR test_cases.py::test_leaves_a_zombie" in text, text
    assert "zombie: true" in text, text
