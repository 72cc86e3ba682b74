"""Workloads for bench/bench_tracing.py, each in modules of its own so that selection can tell them apart."""
