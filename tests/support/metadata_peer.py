"""A hostile broker for Metadata: a loopback server (real TCP) that answers
every Metadata request with what the test says, however large or absurd.
The client pins ``api_version=(0, 8, 2)``: no ApiVersions, Metadata v0."""
import asyncio
import struct
from typing import Any, Callable, List, Optional, Union

from kiel.protocol.framing import ServerFraming
from kiel.protocol.metadata import (
    BrokerMetadata,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)

#: What the peer answers: a response, or its body already encoded (a large
#: answer is encoded once, before a test measures the client's loop), or
#: ``None`` for no answer at all.
Answer = Callable[[Any, int], Union[MetadataResponse, bytes, Any, None]]


class MetadataPeer:
    """Answers Metadata v0 (and any other request ``answer`` knows) with
    ``answer(request, own_port)``; counts them."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests = 0
        self.server: Any = None
        self._writers: List[asyncio.StreamWriter] = []
        self._handlers: List[asyncio.Task[None]] = []

    async def __aenter__(self) -> "MetadataPeer":
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            framing = ServerFraming()
            self._writers.append(writer)
            task = asyncio.current_task()
            if task is not None:
                self._handlers.append(task)
            try:
                while True:
                    data = await reader.read(65536)
                    if not data:
                        return
                    for header, _api, request in framing.receive_data(data):
                        self.requests += 1
                        response = self.answer(request, self.port)
                        if response is None:
                            continue  # no answer (a Produce with acks 0)
                        if isinstance(response, bytes):
                            writer.write(struct.pack(">ii", len(response) + 4,
                                                     header.correlation_id) + response)
                        else:
                            writer.write(ServerFraming.send_response(
                                header.correlation_id, response))
                        await writer.drain()
            except ConnectionError:
                return  # the client went away
            finally:
                writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()
        for writer in self._writers:  # the handlers see the end of their streams
            writer.close()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        await self.server.wait_closed()

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def answer_with(topics: Optional[List[TopicMetadata]] = None,
                brokers: Optional[List[BrokerMetadata]] = None) -> Answer:
    """An answer listing the peer itself as broker 0 (plus ``brokers``) and ``topics``."""
    def answer(_request: MetadataRequest, port: int) -> MetadataResponse:
        return MetadataResponse([BrokerMetadata(0, "127.0.0.1", port)] + (brokers or []),
                                topics or [])
    return answer


def topic(name: str, partitions: int, first: int = 0) -> TopicMetadata:
    """A topic led by broker 0 with ``partitions`` partitions from id ``first``."""
    return TopicMetadata(0, name, [PartitionMetadata(0, first + i, 0, [0], [0])
                                   for i in range(partitions)])
