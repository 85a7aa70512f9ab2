"""Tests of kiel.zookeeper: groups ZooKeeper coordinates, and the ZooKeeper session."""
