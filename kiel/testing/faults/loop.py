"""An asyncio loop on a thread of its own, and the one way other threads call into it."""

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as ConcurrentTimeoutError
from typing import Any, Optional

from kiel.exc import HarnessError

__all__ = ["LoopThread"]


async def _wind_down() -> None:
    # What the owner's own shutdown left running (if it timed out) ends here,
    # so that closing the loop leaves no task pending.
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in leftover:
        task.cancel()
    await asyncio.gather(*leftover, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


class LoopThread:
    """Runs an event loop on a daemon thread; :meth:`call` runs coroutines there.

    The test's own loop can be busy or blocked: this one keeps serving.

    Args:
        name: the thread's name.
        timeout: seconds :meth:`call` and :meth:`stop` wait at most.
    """

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def running(self) -> bool:
        """Whether the thread and its loop are up."""
        return self._loop is not None

    def start(self) -> None:
        """Start the thread and its loop (a no-op when running)."""
        if self._loop is not None:
            return
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(loop,), name=self.name,
                                        daemon=True)
        self._thread.start()
        self._loop = loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(_wind_down())
            loop.close()

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the loop and wait for its result (at most ``timeout`` s).

        Returns:
            what ``coro`` returns (its exception is raised here).

        Raises:
            HarnessError: the loop is not running, this is the loop's own
                thread, or ``coro`` did not finish in time.
        """
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            coro.close()
            raise HarnessError(f"{self.name}: not running" if loop is None else
                               f"{self.name}: synchronous calls cannot run on its own thread")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(self.timeout)
        except ConcurrentTimeoutError:
            future.cancel()
            raise HarnessError(f"{self.name}: a call did not finish within {self.timeout} s"
                               ) from None

    def stop(self, last: Coroutine[Any, Any, Any]) -> None:
        """Run ``last`` on the loop, then stop the loop and join the thread.

        Raises:
            HarnessError: ``last`` or the thread did not finish in time.
        """
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            last.close()
            return
        try:
            self.call(last)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(self.timeout)
            self._loop = self._thread = None
        if thread.is_alive():
            raise HarnessError(f"{self.name}: the thread did not end within {self.timeout} s")
