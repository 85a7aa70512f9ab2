"""The one place where kazoo's threads meet the IOLoop.

kazoo runs watch callbacks, state listeners and ``*_async`` completions on
its own threads. Nothing in kiel touches loop state from those threads:
everything they deliver is handed to the loop with
:meth:`tornado.ioloop.IOLoop.add_callback`, the only thread-safe IOLoop call,
and runs there. Blocking kazoo calls (``start``, recipe constructors that read
synchronously) run in an executor, never on the loop.
"""

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tornado.ioloop import IOLoop

T = TypeVar("T")


class Bridge:
    """Crosses from kazoo threads to one IOLoop.

    Args:
        loop: the IOLoop to deliver to (default: the current one; create the
            bridge on the loop).
    """

    def __init__(self, loop: "IOLoop | None" = None) -> None:
        self.loop = loop or IOLoop.current()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop. Safe from any thread."""
        self.loop.add_callback(fn, *args)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., None]:
        """A callable for kazoo that re-posts its call to ``fn`` on the loop.

        The wrapper returns ``None`` at once (so a kazoo ``ChildrenWatch`` /
        ``DataWatch`` keeps watching).
        """

        @functools.wraps(fn)
        def posted(*args: Any) -> None:
            self.loop.add_callback(fn, *args)

        return posted

    async def result(self, async_result: Any) -> Any:
        """Await a kazoo ``IAsyncResult`` (from a ``*_async`` call) on the loop.

        Returns:
            its value.

        Raises:
            whatever kazoo raised for it (``NoNodeError``, ``NodeExistsError``,
            ``ConnectionLoss``...); callers translate to kiel errors.
        """
        future: asyncio.Future[Any] = asyncio.get_event_loop().create_future()

        def settle(done: Any) -> None:  # on the loop
            if future.done():
                return
            if done.successful():
                future.set_result(done.value)
            else:
                future.set_exception(done.exception)

        async_result.rawlink(lambda done: self.loop.add_callback(settle, done))
        return await future

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking kazoo call in the default executor and await it."""
        return await asyncio.get_event_loop().run_in_executor(None, functools.partial(fn, *args))
