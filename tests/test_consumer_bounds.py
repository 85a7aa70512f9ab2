"""How long consume() waits when the network goes dark under a fetch in
flight: about ``max_wait_time``, never the request's timeout; and nothing is
lost or repeated once the network is back. Tansu behind the fault proxy (it
advertises the proxy, so every connection of the consumer goes through it)."""
import asyncio
import time
from typing import Any, List

import pytest

from kiel.consumer import SingleConsumer
from kiel.consumer.fetcher import ANSWER_GRACE
from tests.conftest import run, unique
from tests.test_broker_groups import produce, proxied_tansu

__all__ = ["proxied_tansu"]  # the fixture, used here

MAX_WAIT = 0.5
# Far above what the bound allows: a consume() that waits for the request's
# timeout is told apart from one that gives up at its own deadline.
REQUEST_TIMEOUT = 40.0


@pytest.mark.slow
def test_consume_returns_at_its_deadline_while_a_fetch_is_stuck_in_the_dark(
    proxied_tansu: Any,
) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("dark"), 1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        sent = await produce(broker.bootstrap, topic, 10, "a")
        async with SingleConsumer(broker.bootstrap, max_wait_time=MAX_WAIT,
                                  request_timeout=REQUEST_TIMEOUT) as consumer:
            got: List[bytes] = []
            while len(got) < 10:
                got += [r.value for r in await consumer.consume(
                    topic, start=SingleConsumer.BEGINNING)]
            # A fetch in flight (held by the broker, nothing new) or the next
            # one sent: either is stuck in the dark.
            await loop.run_in_executor(None, proxy.blackout)
            for _ in range(3):
                started = time.monotonic()
                assert await consumer.consume(topic) == []
                waited = time.monotonic() - started
                # Bounded by its own deadline (max_wait_time and the grace
                # for the answer's way back), with room for a busy machine;
                # the request's timeout is far beyond.
                assert waited < MAX_WAIT + ANSWER_GRACE + 3.0, waited
            await loop.run_in_executor(None, proxy.restore)
            sent += await produce(broker.bootstrap, topic, 5, "b")
            deadline = time.monotonic() + 60
            while len(got) < 15 and time.monotonic() < deadline:
                got += [r.value for r in await consumer.consume(topic)]
            assert got == sent  # nothing lost, nothing twice, in order

    run(main(), timeout=120)
