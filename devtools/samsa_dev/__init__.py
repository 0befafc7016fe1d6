"""Samsa's development tooling, never shipped with the broker (its own workspace member).

- ``jars``, ``kafka``, ``connect``: Apache Kafka's pinned jar sets from Maven Central, a
  launcher for Kafka's own tools and for a real Apache Kafka on 127.0.0.1 (the reference that
  Samsa is compared against), and a Kafka Connect worker;
- ``programs``: the client matrix's Go and Node programs;
- ``kube``: the Kubernetes control plane built from source, its nodes, and the tests' harness;
- ``pki``: certificates for the tests;
- ``protocol_doc`` and ``differences``: docs/protocol.md and the differences it lists.

The command line is ``samsa-dev`` (``cli``).
"""
