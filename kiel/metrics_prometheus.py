"""Export kiel's metrics to Prometheus through ``prometheus_client``.

``pip install kiel[prometheus]``, then register the clients once::

    from prometheus_client import REGISTRY
    from kiel.metrics_prometheus import export

    export(REGISTRY, producer=producer, consumer=consumer)

and serve ``prometheus_client.generate_latest(REGISTRY)`` from a handler of
your Tornado application: each scrape calls the clients' ``metrics()``, which
reads counters the IOLoop changes, so scrape on the IOLoop (a request
handler), not from ``start_http_server``'s thread. Every metric of
:data:`kiel.metrics.METRICS` is exposed with a ``client`` label carrying the
name the client was registered under and a ``group`` label carrying a
grouped consumer's group (empty for the other clients), so a lag alert can
say which group falls behind.
"""

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from kiel.exc import MissingDependencyError
from kiel.metrics import METRICS, GroupedConsumerMetrics, Latency, samples

__all__ = ["KielCollector", "export"]


def _prometheus() -> Any:
    """``prometheus_client.core``, imported on first use.

    Raises:
        MissingDependencyError: prometheus_client is not installed.
    """
    try:
        return importlib.import_module("prometheus_client.core")
    except ImportError as e:
        raise MissingDependencyError(
            "the Prometheus exporter needs prometheus_client: pip install kiel[prometheus]"
        ) from e


class KielCollector:
    """A ``prometheus_client`` collector of kiel clients' ``metrics()``.

    Args:
        clients: the clients by name (the ``client`` label), e.g.
            ``{"producer": producer, "consumer": consumer}``; anything with a
            ``metrics()`` method returning a :class:`kiel.metrics.ClientMetrics`.

    Raises:
        MissingDependencyError: prometheus_client is not installed.
    """

    def __init__(self, clients: Mapping[str, Any]) -> None:
        self._core = _prometheus()
        self.clients = dict(clients)

    def collect(self) -> Iterator[Any]:
        """One scrape: a metric family per metric name, every client's samples in it.

        Returns:
            an iterator of ``prometheus_client`` metric families.
        """
        core = self._core
        by_name: dict[str, list[tuple[tuple[str, ...], Any]]] = {}
        for client_name, client in sorted(self.clients.items()):
            snapshot = client.metrics()
            # Every family has the same leading labels (Prometheus wants one
            # label set per family): "" where the client is in no group.
            group = snapshot.group if isinstance(snapshot, GroupedConsumerMetrics) else ""
            for sample in samples(snapshot):
                by_name.setdefault(sample.name, []).append(
                    ((client_name, group) + sample.labels, sample.value)
                )
        for name, values in by_name.items():
            spec = METRICS[name]
            labels = ["client", "group", *spec.labels]
            doc = f"{spec.help} ({spec.unit})"
            if spec.type == "histogram":
                family = core.HistogramMetricFamily(name, doc, labels=labels)
                for label_values, latency in values:
                    family.add_metric(list(label_values), _buckets(latency), latency.sum)
            elif spec.type == "counter":
                family = core.CounterMetricFamily(name, doc, labels=labels)
                for label_values, value in values:
                    family.add_metric(list(label_values), value)
            else:
                family = core.GaugeMetricFamily(name, doc, labels=labels)
                for label_values, value in values:
                    family.add_metric(list(label_values), value)
            yield family

    def describe(self) -> list[Any]:
        """Nothing up front: the families depend on what the clients saw.

        Returns:
            an empty list (``prometheus_client`` then collects on demand).
        """
        return []


def _buckets(latency: Latency) -> list[tuple[str, int]]:
    return [("+Inf" if le == float("inf") else repr(le), n) for le, n in latency.buckets]


def export(registry: Any, **clients: Any) -> KielCollector:
    """Register a :class:`KielCollector` of ``clients`` in ``registry``.

    Args:
        registry: a ``prometheus_client`` ``CollectorRegistry`` (e.g. ``REGISTRY``).
        **clients: the clients by the name their ``client`` label gets.

    Returns:
        the registered collector (``registry.unregister(it)`` to stop).

    Raises:
        MissingDependencyError: prometheus_client is not installed.
    """
    collector = KielCollector(clients)
    registry.register(collector)
    return collector
