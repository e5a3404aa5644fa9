"""Throughput benchmarks: how much goes through, and what still works under load."""
