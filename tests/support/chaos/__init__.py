"""A randomized fault suite for the grouped consumer (Jepsen-style).

Many seeded schedules of faults against a group of member *processes*, one
checker. The parts:

* :mod:`tests.support.chaos.member`: the member process (a GroupedConsumer that
  reports what it does as JSON lines on stdout).
* :mod:`tests.support.chaos.schedule`: the seeded schedule generator.
* :mod:`tests.support.chaos.checker`: the history of one schedule and the checker
  (pure: no I/O, tested on hand-made histories).
* :mod:`tests.support.chaos.harness`: runs one schedule against real ZooKeeper and
  the embedded brokers (member processes, fault proxies, the producer, the
  owner-znode sampler), or, in the brokers mode, against a group Tansu
  coordinates (one proxy per member in front of the broker, a sampler of
  the committed offsets), and fills a history.

``tests/consumer/test_group_chaos.py`` drives it; ``docs/guides/testing_faults.rst``
("A randomized suite for groups") says how to run, replay and read it.
"""
