"""``make demo``: a tour of kiel against ``kiel.testing``.

Until the embedded cluster exists this says what the demo will do and exits
non-zero, so nobody mistakes it for a working demo.
"""
import sys


def main() -> int:
    print(
        "kiel demo (not built yet): it will start a real ZooKeeper and a 3-broker\n"
        "embedded Kafka 0.8.2 cluster with kiel.testing, produce and consume a few\n"
        "thousand messages, and tear everything down."
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
