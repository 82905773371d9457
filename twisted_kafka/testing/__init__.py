"""A real Kafka broker for tests (docs/testing.md)."""
