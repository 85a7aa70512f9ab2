"""kiel for PySpark: Kafka 0.8.x topics as a Spark data source (format ``kiel``).

Install with ``pip install kiel[spark]`` (pyspark >= 4.2 and pyarrow) on the
driver and on every executor, then::

    from kiel.spark import KielDataSource
    spark.dataSource.register(KielDataSource)

kiel's core never imports this package. See ``docs/guides/spark.rst``.
"""
from kiel.exc import MissingDependencyError

try:
    import pyarrow  # noqa: F401

    # Read limits and Trigger.AvailableNow for Python sources: pyspark >= 4.2.
    from pyspark.sql.streaming.datasource import ReadMinRows  # noqa: F401
except ImportError as e:  # the optional extra is missing: say what to install
    raise MissingDependencyError(
        f"kiel.spark needs pyspark >= 4.2 and pyarrow: pip install 'kiel[spark]' ({e})"
    ) from e

from kiel.spark.datasource import HAS_READ_LIMITS, SCHEMA, KielDataSource  # noqa: E402
from kiel.spark.kafka import DataLossError  # noqa: E402

__all__ = ["DataLossError", "HAS_READ_LIMITS", "KielDataSource", "SCHEMA"]
