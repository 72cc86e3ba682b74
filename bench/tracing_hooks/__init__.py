"""Hooks that do nothing, for bench/bench_tracing.py --floors: what merely having each kind of hook costs."""
