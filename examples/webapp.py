"""A Tornado web application that consumes and produces in its own process.

The shape kiel is built for: one ``tornado.web.Application`` whose IOLoop
answers HTTP requests and, on the same loop, runs a ``GroupedConsumer``
(partitions shared with the other instances of the app through the
brokers' group coordinator, or through ZooKeeper on Kafka 0.8) and a
``Producer``::

    POST /events           body -> produced to the "events" topic (201 once
                           acknowledged; 503 when it could not be: the
                           caller knows, nothing is dropped silently)
    GET  /stats            what this instance consumed (JSON)
    GET  /metrics          the clients' metrics(): Prometheus text with
                           prometheus_client installed, else JSON
    GET  /healthz          200 while the consumer is fetching, 503 (and why)
                           when it is not: the consumer's health rule

A broker outage needs nothing from the app: ``consume()`` rides it out
(retrying inside the client, returning ``[]`` meanwhile) and the consume
loop goes on; ``/healthz`` says 503 while fetches are stalled and 200 again
once they are answered. A ``POST`` during the outage waits for the
producer's retries and answers 201, or 503 when they ran out.

The clients start with the app and stop with it: on SIGTERM (or SIGINT) the
server stops accepting, the consumer finishes what it handed out, commits,
releases its partitions and leaves the group, the producer flushes, then the
process exits 0.

Run it against your own cluster (Kafka 0.9 or later, KRaft included: the
brokers coordinate the group)::

    python examples/webapp.py --brokers kafka1:9092 --port 8888

add ``--zookeeper zk1:2181`` to keep the group in ZooKeeper (Kafka 0.8),

or with no ``--brokers`` to start a real ZooKeeper and an embedded 0.8.2
cluster from ``kiel.testing`` (needs Java and Debian's ``zookeeper``). It
prints one JSON line (``{"port": ..., ...}``) once it serves.
"""

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import Any, Dict, Iterator, Optional, Tuple

import tornado.httpserver
import tornado.netutil
import tornado.web

from kiel import GroupedConsumer, Producer
from kiel.exc import KielError
from kiel.metrics import as_dict

TOPIC = "events"
GROUP = "webapp"


class Stats:
    """What this instance consumed; read by the handlers."""

    def __init__(self) -> None:
        self.consumed = 0
        self.produced = 0
        #: POSTs answered 503: the record was not acknowledged.
        self.refused = 0
        self.last: Optional[str] = None


class Clients:
    """The app's Kafka clients, started and stopped with the app.

    ``zk_hosts``: ``None`` for a group the brokers coordinate, else the
    ZooKeeper the group lives in (Kafka 0.8).
    """

    def __init__(self, brokers: str, zk_hosts: Optional[str], stats: Stats) -> None:
        self.stats = stats
        self.producer = Producer(brokers, linger=0.005)
        group_options: Dict[str, Any] = (
            {"session_timeout": 10.0} if zk_hosts is None
            else {"zk_hosts": zk_hosts, "zk_session_timeout": 6.0})
        self.consumer = GroupedConsumer(
            brokers, GROUP, topics=[TOPIC],
            max_wait_time=0.5, commit_interval=1.0, **group_options,
        )
        self._work: Optional[asyncio.Task[None]] = None
        self._stopping = asyncio.Event()
        self.registry = _registry(self)

    def metrics(self) -> Tuple[str, bytes]:
        """The ``/metrics`` answer: content type and body."""
        if self.registry is not None:
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

            return CONTENT_TYPE_LATEST, generate_latest(self.registry)
        body = {
            "producer": as_dict(self.producer.metrics()),
            "consumer": as_dict(self.consumer.metrics()),
        }
        return "application/json", json.dumps(body).encode()

    async def start(self) -> None:
        await self.producer.connect()
        await self.consumer.connect()  # joined; its partitions owned and fetching
        self._work = asyncio.get_running_loop().create_task(self._consume())

    async def _consume(self) -> None:
        # Asking for more finishes the last batch (auto_finish), so a
        # revocation or close() waits for at most one batch in our hands.
        # No try/except: consume() rides out broker outages itself, and
        # raises only what the app must act on (it then ends the loop, and
        # /healthz says so).
        while not self._stopping.is_set():
            for record in await self.consumer.consume():
                self.stats.consumed += 1
                self.stats.last = (record.value or b"").decode("utf-8", "replace")

    async def stop(self) -> None:
        self._stopping.set()
        if self._work is not None:
            await self._work
        await self.consumer.close()  # commit, release, leave the group
        await self.producer.close()  # flush, then close


def _registry(clients: Clients) -> Any:
    """A Prometheus registry exporting the clients, or None without prometheus_client."""
    try:
        from prometheus_client import CollectorRegistry

        from kiel.metrics_prometheus import export
    except ImportError:  # the extra is optional: /metrics answers JSON instead
        return None
    registry = CollectorRegistry()
    export(registry, producer=clients.producer, consumer=clients.consumer)
    return registry


class EventsHandler(tornado.web.RequestHandler):
    def initialize(self, clients: Clients, stats: Stats) -> None:
        self.clients = clients
        self.stats = stats

    async def post(self) -> None:
        try:
            meta = await self.clients.producer.produce(TOPIC, self.request.body)
        except KielError as e:
            # Not acknowledged (the producer's retries ran out in an outage,
            # or its buffer is full): the caller is told, and may send again.
            self.stats.refused += 1
            self.set_status(503)
            self.finish({"error": str(e), "retry": True})
            return
        self.stats.produced += 1
        self.set_status(201)
        self.finish({"partition": meta.partition, "offset": meta.offset})


class StatsHandler(tornado.web.RequestHandler):
    def initialize(self, clients: Clients, stats: Stats) -> None:
        self.clients = clients
        self.stats = stats

    def get(self) -> None:
        self.finish({
            "consumed": self.stats.consumed,
            "produced": self.stats.produced,
            "refused": self.stats.refused,
            "last": self.stats.last,
            "member": self.clients.consumer.member_id,
            "partitions": sorted(tp.partition for tp in self.clients.consumer.assignment()),
        })


class MetricsHandler(tornado.web.RequestHandler):
    def initialize(self, clients: Clients, stats: Stats) -> None:
        self.clients = clients

    def get(self) -> None:
        # On the IOLoop, like the clients: the snapshot reads their counters.
        content_type, body = self.clients.metrics()
        self.set_header("Content-Type", content_type)
        self.finish(body)


class HealthHandler(tornado.web.RequestHandler):
    def initialize(self, clients: Clients, stats: Stats) -> None:
        self.clients = clients

    def get(self) -> None:
        # The consumer's health rule: unhealthy when it has partitions and
        # no fetch was answered for a while, an outage has lasted, or the
        # group's coordinator stopped answering (see the consumer guides).
        reason = self.clients.consumer.unhealthy()
        if reason is not None:
            self.set_status(503)
            self.finish(f"unhealthy: {reason}\n")
            return
        self.finish("ok\n")


def make_app(clients: Clients, stats: Stats) -> tornado.web.Application:
    shared: Dict[str, Any] = {"clients": clients, "stats": stats}
    return tornado.web.Application([
        (r"/events", EventsHandler, shared),
        (r"/stats", StatsHandler, shared),
        (r"/metrics", MetricsHandler, shared),
        (r"/healthz", HealthHandler, shared),
    ])


async def serve(brokers: str, zk_hosts: Optional[str], port: int) -> None:
    stats = Stats()
    clients = Clients(brokers, zk_hosts, stats)
    await clients.start()
    server = tornado.httpserver.HTTPServer(make_app(clients, stats))
    sockets = tornado.netutil.bind_sockets(port, "127.0.0.1")
    server.add_sockets(sockets)
    print(json.dumps({"port": sockets[0].getsockname()[1], "member": clients.consumer.member_id}),
          flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    # Graceful: stop taking requests, let in-flight ones finish, then the clients.
    server.stop()
    await server.close_all_connections()
    await clients.stop()
    print(json.dumps({"stopped": True, "consumed": stats.consumed}), flush=True)


@contextlib.contextmanager
def local_cluster() -> Iterator[Dict[str, str]]:
    """A real ZooKeeper and an embedded 0.8.2 cluster, for trying the app out."""
    from kiel.testing.broker import EmbeddedCluster
    from kiel.testing.zookeeper import ZooKeeperServer

    with ZooKeeperServer() as zookeeper:
        zk_hosts = f"{zookeeper.hosts}/webapp"
        with EmbeddedCluster(brokers=3, zookeeper=zk_hosts, topics={TOPIC: 4}) as cluster:
            yield {"brokers": cluster.bootstrap, "zookeeper": zk_hosts}


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", help="bootstrap brokers (default: start kiel.testing)")
    parser.add_argument("--zookeeper", help="ZooKeeper hosts the group coordinates in "
                        "(Kafka 0.8); without it the brokers coordinate the group")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (default: any free one)")
    args = parser.parse_args(argv)
    if args.brokers:
        asyncio.run(serve(args.brokers, args.zookeeper, args.port))
        return 0
    with local_cluster() as parts:
        print(json.dumps(parts), flush=True)
        asyncio.run(serve(parts["brokers"], parts["zookeeper"], args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
