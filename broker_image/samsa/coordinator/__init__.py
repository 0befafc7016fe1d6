"""Consumer groups and committed offsets in __consumer_offsets, producer ids (to come)."""
