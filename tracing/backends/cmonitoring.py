"""Backend "c" on Python 3.12+: sys.monitoring, as backends/monitoring.py uses it, with its callbacks in C.

Unselected code is DISABLEd exactly as before and costs nothing; each selected event is written by C
(tracing/native/monitor.c and writer.c) instead of a Python callback, a clock read and a pack_into. Waiting for
--start-at and the C-call events (--c-calls) stay the Python ones of MonitoringBackend: the first runs until one
match, the second writes through the same C writer.
"""

from __future__ import annotations

from tracing import native
from tracing.backends.monitoring import DISABLE, E, MonitoringBackend


class CMonitoringBackend(MonitoringBackend):
    name = "c"

    def _callbacks(self) -> tuple:
        hook = native.load().MonitorHook(self.hooks.writer, self.hooks.cache, self.classify, self.hooks.on_error,
                                         DISABLE)
        return ((E.PY_START, hook.enter), (E.PY_RESUME, hook.enter), (E.PY_THROW, hook.throw),
                (E.PY_RETURN, hook.leave), (E.PY_YIELD, hook.leave), (E.PY_UNWIND, hook.unwind))
