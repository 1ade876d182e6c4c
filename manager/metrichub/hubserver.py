"""The running MetricHub's handle (manager.metrichub.server's ``serve`` returns it): a grpc.aio server on
its own event loop thread, stopped like a grpc.Server — open RPCs cancelled after the grace period, every
task and async generator closed on the loop's own thread before the loop closes.
Imports: asyncio, the standard library.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

__all__ = ["HubServer"]


class HubServer:
    """A grpc.aio server running in its own thread, stopped like a grpc.Server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server: Any, thread: threading.Thread,
                 finished: threading.Event) -> None:  # fmt: skip
        self._loop = loop
        self._server = server
        self._thread = thread
        self._finished = finished

    def stop(self, grace: float | None) -> threading.Event:
        """Stops the server (cancelling open RPCs after `grace` seconds). The event is set once the loop
        thread has ended: every RPC task cancelled and awaited, every async generator closed, the loop
        closed. grpc's poller thread ends when the last aio object is freed; one freed on another thread
        while the loop still runs can leave the poller waiting on a completion queue for good."""
        server, self._server = self._server, None
        if server is None or self._loop.is_closed() or not self._loop.is_running():
            return self._finished
        loop = self._loop

        async def shutdown() -> None:
            try:
                await server.stop(grace)
            finally:
                rest = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
                for task in rest:
                    task.cancel()
                await asyncio.gather(*rest, return_exceptions=True)
                await loop.shutdown_asyncgens()
                loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: its thread ends on its own
            asyncio.run_coroutine_threadsafe(shutdown(), loop)
        return self._finished

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()
