"""sys.settrace or sys.setprofile, installed on every thread, and whatever was there before put back at the end.

`threading.set{trace,profile}` covers threads started later; on 3.12+ `threading.set*_all_threads` also covers
the running ones. Before 3.12 a thread that is already running cannot be hooked from Python.
"""

from __future__ import annotations

import sys
import threading


class GlobalHook:
    def __init__(self, kind: str) -> None:
        assert kind in ("trace", "profile")
        self.kind = kind
        self._get = getattr(sys, f"get{kind}")
        self._set = getattr(sys, f"set{kind}")
        self._set_new_threads = getattr(threading, f"set{kind}")
        self._set_all_threads = getattr(threading, f"set{kind}_all_threads", None)  # 3.12+
        self._previous: tuple | None = None  # the hook installed before ours, put back by remove()

    def install(self, fn) -> None:
        if self._previous is None:
            self._previous = (self._get(),)
            if self._previous[0] is not None:
                print(f"Warning: hangdoctor tracing replaces this thread's set{self.kind} function (a debugger, "
                      "profiler or coverage?); it is put back when tracing stops", file=sys.stderr)
        if self._set_all_threads is not None:
            self._set_all_threads(fn)
        else:
            self._set_new_threads(fn)
            self._set(fn)

    def set_this_thread(self, fn) -> None:
        self._set(fn)

    def remove(self) -> None:
        if self._set_all_threads is not None:
            self._set_all_threads(None)
        else:
            self._set_new_threads(None)  # type: ignore[arg-type]
            self._set(None)
        if self._previous is not None and self._previous[0] is not None:
            self._set(self._previous[0])
