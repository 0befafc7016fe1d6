"""A broker with two listeners tells each client the addresses of the listener it used."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker, free_port


def test_clients_see_the_addresses_of_their_listener(tmp_path: Path) -> None:
    internal, external = free_port(), free_port()
    config = {
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        # "localhost" only on the external side, so the two views can be told apart.
        "advertised.listeners": (
            f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}"
        ),
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    }
    with InProcessBroker(tmp_path, config, port=internal):
        inside = AdminClient({"bootstrap.servers": f"127.0.0.1:{internal}"})
        outside = AdminClient({"bootstrap.servers": f"127.0.0.1:{external}"})
        outside.create_topics([NewTopic("both", 2, 1)])["both"].result(10)
        seen_inside = inside.list_topics(timeout=10)
        seen_outside = outside.list_topics(timeout=10)
        assert [(b.host, b.port) for b in seen_inside.brokers.values()] == [("127.0.0.1", internal)]
        assert [(b.host, b.port) for b in seen_outside.brokers.values()] == [
            ("localhost", external)
        ]
        assert set(seen_outside.topics["both"].partitions) == {0, 1}
