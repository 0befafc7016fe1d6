"""A small async Kafka client over ``samsa.protocol``: broker to broker, and admin APIs.

Used by the controller (LeaderAndIsr, UpdateMetadata, StopReplica), by followers (Fetch,
OffsetForLeaderEpoch), by brokers talking to the controller (AlterPartition,
ControlledShutdown), and by the CLI and operator for the admin APIs no well-kept client
library covers (ElectLeaders, partition reassignments).
"""

from samsa.client.connection import BrokerConnection, ClientSecurity, ConnectionClosed
from samsa.client.pool import ConnectionPool

__all__ = ["BrokerConnection", "ClientSecurity", "ConnectionClosed", "ConnectionPool"]
