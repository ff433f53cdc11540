"""Benchmarks: latency breakdown, quality with and without a judge, streaming with drift."""
