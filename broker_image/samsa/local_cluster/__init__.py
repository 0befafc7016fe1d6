"""Local clusters on one machine: a real ZooKeeper and broker processes on 127.0.0.1.

Used by `samsa local up|down|status`, by `make demo`, and by the tests' cluster fixtures.
"""

from samsa.local_cluster.zookeeper import (
    ZooKeeperNotInstalled,
    ZooKeeperServer,
    zookeeper_classpath,
)

__all__ = ["ZooKeeperNotInstalled", "ZooKeeperServer", "zookeeper_classpath"]
