"""Building a million small objects without the cyclic garbage collector walking them again and again.

Loading 131,072 ranks creates millions of frames, samples and records, none of them in a reference cycle.
CPython's collector runs a full pass each time the surviving objects grow by a quarter: at 65,536 ranks that was
a third of the load time. `analyze` and `attach` build, judge and render with it paused; the objects are then
frozen, so that a later pass (in a test process that goes on) skips them.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
