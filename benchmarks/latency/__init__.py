"""Latency benchmarks: how long one call waits, and what it costs on the wire."""
