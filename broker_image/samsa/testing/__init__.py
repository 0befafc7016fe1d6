"""In-process brokers for tests: Samsa's own, and users' tests of their Kafka applications.

    async with samsa.testing.broker() as b:
        Producer({"bootstrap.servers": b.bootstrap_servers})

or, with pytest, the ``samsa_broker`` fixture (a broker on a free 127.0.0.1 port in a tmp dir).
``KafkaProxy`` sits between clients and a broker and loses responses on purpose.
"""

from samsa.testing.inprocess import InProcessBroker, broker, free_port
from samsa.testing.proxy import DropProduceResponses, KafkaProxy

__all__ = ["DropProduceResponses", "InProcessBroker", "KafkaProxy", "broker", "free_port"]
