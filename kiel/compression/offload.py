"""Run a decompression off the IOLoop: the one place kiel's decoding crosses
to another thread.

Strategy: cramjam's codecs and zlib release the GIL while they inflate, so a
large payload decompressed in a worker thread leaves the loop free (a 32 MiB
batch takes 20 to 70 ms to inflate, many times the loop's budget). One
worker, shared by the process: decompressions run one at a time (the
consumer decodes one partition at a time anyway), and what is held waiting
is bounded by the callers, who each await their own. The worker only runs
pure functions of bytes that nothing else touches; the result is handed back
to the loop, which alone changes state with it.
"""
import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, TypeVar

__all__ = ["off_loop"]

T = TypeVar("T")

_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:  # two event loops in two threads may ask at once
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kiel-inflate")
        return _pool


async def off_loop(func: Callable[[], T]) -> T:
    """Run ``func()`` in kiel's decompression thread and return its result.

    Args:
        func: a pure function of data no other code changes meanwhile (it
            must not touch the event loop or shared state).

    Returns:
        what ``func`` returned.

    Raises:
        Exception: what ``func`` raised.
    """
    return await asyncio.get_running_loop().run_in_executor(_executor(), func)
