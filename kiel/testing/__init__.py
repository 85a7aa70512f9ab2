"""Real parts for tests: a ZooKeeper launcher and an embedded Kafka 0.8.2 cluster.

Shipped with kiel so applications can test against the same parts we do.
"""
