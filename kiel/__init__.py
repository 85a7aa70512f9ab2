"""kiel: a pure-Python Kafka client for Tornado applications."""

__version__ = "0.1.0.dev0"
