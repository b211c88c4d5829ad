"""An asyncio event loop on a daemon thread of its own, for async clients that serve synchronous callers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

_T = TypeVar("_T")


class LoopThread:
    """An event loop on a daemon thread: connections opened on it live there, so the object that owns
    them serves any caller (synchronous code, or engines on other event loops)."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run ``coro`` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
