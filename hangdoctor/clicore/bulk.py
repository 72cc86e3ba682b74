"""Building a run's worth of small objects with CPython's cyclic garbage collector paused.

Loading 131,072 ranks' stacks, a folder of call rings (an Event per call and return) or a dump set (a record per
tensor) creates millions of objects, none of them in a reference cycle. With the collector on, CPython walks every
object it tracks each time the survivors grow by a quarter, so the time grew faster than the input: at 65,536
ranks a third of hangdoctor's load; from 64 to 256 ranks `tracing diverge` 5.1x, and weightdiff's read of 4,096
tensors 5.7x its read of 1,024 (bench/*_scaling.py measure it; paused: 4.1x and 3.7x). The three tools build,
judge and render with it paused, and switch it back on afterwards. `freeze=True` also moves what was built out
of the collector's sight for good (hangdoctor's one-shot commands); without it a caller that goes on (a test
process) still collects its own cycles among those objects.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
