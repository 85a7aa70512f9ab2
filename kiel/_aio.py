"""The one wake-up primitive and the one way kiel starts background tasks.

Everything here runs on the IOLoop's thread (kazoo threads reach the loop only
through :mod:`kiel.zookeeper.bridge`).
"""

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any, Optional, TypeVar

log = logging.getLogger("kiel")

T = TypeVar("T")

__all__ = ["Tasks", "Turns", "Wakeup", "spawn", "within"]


async def within(aw: Awaitable[T], timeout: Optional[float]) -> T:
    """Await ``aw`` for at most ``timeout`` seconds; kiel's :func:`asyncio.wait_for`.

    The one difference that matters: a caller cancelled in the same round as
    ``aw`` finishes gets :class:`asyncio.CancelledError`. Before Python 3.12,
    ``asyncio.wait_for`` returned ``aw``'s result there and dropped the cancel,
    so the cancelled caller carried on (a cancelled ``enqueue()`` went on to
    batch its record). What ``aw`` returned or raised is then discarded.

    Args:
        aw: a coroutine or future; cancelled on timeout or when the caller is.
        timeout: seconds, or ``None`` for no bound.

    Returns:
        What ``aw`` returns.

    Raises:
        asyncio.TimeoutError: ``aw`` did not finish within ``timeout`` (it was
            cancelled and has ended).
        asyncio.CancelledError: the caller was cancelled (``aw`` has ended).
        Exception: whatever ``aw`` raises.
    """
    if timeout is None:
        return await aw  # a plain await passes every cancel on
    inner = asyncio.ensure_future(aw)
    try:
        await asyncio.wait((inner,), timeout=timeout)
        if not inner.done():
            inner.cancel()
            # Like asyncio.wait_for: nothing of aw runs after this returns.
            await asyncio.wait((inner,))
            if inner.cancelled():
                raise asyncio.TimeoutError()
    except asyncio.CancelledError:
        if not inner.done():
            inner.cancel()
            await asyncio.wait((inner,))
        if not inner.cancelled():
            inner.exception()  # retrieved: the caller's cancel wins over it
        raise
    return inner.result()


class Wakeup:
    """A signal that wakes whoever is waiting now; later waiters wait for the next one.

    Strategy: an :class:`asyncio.Event` needs a ``clear()`` that races with
    the waiters it should wake; a fresh future per round does not. ``fire()``
    resolves the current round's future and forgets it, so the next
    :meth:`wait` (or :meth:`future`) starts a new round.
    """

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: Optional[asyncio.Future[None]] = None

    def future(self) -> "asyncio.Future[None]":
        """This round's future, for :func:`asyncio.wait` together with others."""
        future = self._future
        if future is None or future.done():
            future = self._future = asyncio.get_running_loop().create_future()
        return future

    def fire(self) -> None:
        """Wake every current waiter (a no-op when nobody waits)."""
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(None)

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the next :meth:`fire`.

        Args:
            timeout: seconds to wait at most (``None``: no bound).

        Returns:
            True if fired, False if the timeout ran out first.
        """
        # Neither way cancels the round's future that other waiters share
        # (when this one times out or is cancelled), and neither drops a
        # cancel that arrives in the round of the fire, as asyncio.wait_for
        # did before Python 3.12. The shield is the cheaper of the two.
        future = self.future()
        if timeout is None:
            await asyncio.shield(future)
            return True
        done, _ = await asyncio.wait((future,), timeout=timeout)
        return bool(done)


class Tasks:
    """A set of background tasks that this owner keeps alive and can stop.

    The event loop holds only weak references to tasks, so a task nobody
    references can vanish mid-flight; a failure in a task nobody awaits is
    otherwise logged only at garbage collection, if at all. Every task started
    here is kept until it ends, and an unexpected exception is logged at once
    with the task's name.

    Args:
        name: prefix for the tasks' names (shows in logs and debuggers).
    """

    def __init__(self, name: str = "kiel") -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self,
        coro: Coroutine[Any, Any, T],
        name: Optional[str] = None,
        *,
        quiet: tuple[type[BaseException], ...] = (),
    ) -> "asyncio.Task[T]":
        """Start ``coro`` as a task owned by this set.

        Args:
            coro: what the task runs.
            name: shown in logs after this set's name (default: the
                coroutine's name).
            quiet: exception types that whoever awaits the task receives and
                handles (e.g. the callers sharing one connect attempt): those
                are not logged here, so such a failure is reported once.

        Returns:
            The task (await it to get its result or exception as usual).
        """
        task = asyncio.get_running_loop().create_task(coro)
        task.set_name(f"{self.name}:{name or getattr(coro, '__name__', 'task')}")
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, quiet))
        return task

    def _done(self, quiet: tuple[type[BaseException], ...], task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        # Retrieving the exception also keeps asyncio from warning that it
        # was never retrieved when no one awaits the task.
        error = task.exception()
        if error is not None and not isinstance(error, quiet):
            log.error("background task %s failed", task.get_name(), exc_info=error)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator["asyncio.Task[Any]"]:
        return iter(list(self._tasks))

    async def cancel(self, timeout: Optional[float] = None) -> None:
        """Cancel every task and wait (at most ``timeout`` s) until they ended."""
        tasks = [t for t in self._tasks if not t.done()]
        current = asyncio.current_task()
        tasks = [t for t in tasks if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


#: Tasks that belong to no client (module-level helpers); kept referenced.
_orphans = Tasks("kiel")


def spawn(coro: Coroutine[Any, Any, T], name: Optional[str] = None) -> "asyncio.Task[T]":
    """Start ``coro`` as a background task that is kept referenced and whose
    failure is logged. Prefer a client's own :class:`Tasks` so ``close()`` can
    cancel it."""
    return _orphans.spawn(coro, name)


#: Seconds of work a long loop does before it gives the IOLoop a turn.
TURN = 0.005


class Turns:
    """Lets a long loop on the IOLoop give the loop a turn every :data:`TURN`
    seconds of its work (per partition of a topic of 100,000, say), so that
    no step of the loop holds it for long.

    Example::

        turns = Turns()
        for i, tp in enumerate(partitions):
            ...
            if not i % 256:  # the clock is read every so many items
                await turns.give()
    """

    __slots__ = ("step", "_since")

    def __init__(self, step: float = TURN) -> None:
        self.step = step
        self._since = time.monotonic()

    async def give(self) -> None:
        """Give the IOLoop a turn if :attr:`step` seconds have passed since the last."""
        if time.monotonic() - self._since >= self.step:
            await asyncio.sleep(0)
            self._since = time.monotonic()
