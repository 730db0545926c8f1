"""Benchmarks against a real engine: percolation latency by policy-set size, and governed
search against the same DSL sent directly. Run ``python -m bench.run`` (see README.md)."""
