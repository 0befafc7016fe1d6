"""One module per API key: request to response; errors become Kafka error codes."""
