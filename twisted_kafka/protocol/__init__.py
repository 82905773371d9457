"""Sans-IO Kafka protocol codec: bytes in, objects out.

Nothing in this package imports Twisted (a test enforces it), so the codec can
be exercised, fuzzed and benchmarked without a reactor.
"""
