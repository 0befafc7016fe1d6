"""The samsa command: start a broker, and tools for people (topics, produce, consume)."""
