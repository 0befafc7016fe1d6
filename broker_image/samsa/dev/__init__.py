"""Developer tooling beside the broker: pinned jars from Maven Central (Apache Kafka and what is
built on it) in a cache outside the work tree, a launcher for Kafka's own tools and for a real
Apache Kafka on 127.0.0.1, the reference that Samsa is compared against."""
