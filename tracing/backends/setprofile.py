"""sys.setprofile backend: every call and return reaches the callback, which answers from the code-object cache.

Used before Python 3.12 when C calls are wanted (the profile hook is the only pre-3.12 hook that reports them),
or on request. Threads: like the settrace backend (see backends/settrace.py).
"""

from __future__ import annotations

import sys
import threading

from tracing.backends import Hooks
from tracing.records import CALL, RETURN


class SetprofileBackend:
    name = "setprofile"
    covers_all_threads = sys.version_info >= (3, 12)

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.classify = hooks.classify
        self.active = False
        self._previous: tuple | None = None  # the hook installed before ours, put back at the end
        self._profile = None

    def _install(self, fn) -> None:
        if self._previous is None:
            self._previous = (sys.getprofile(),)
            if self._previous[0] is not None:
                print("Warning: hangdoctor tracing replaces this thread's setprofile function (a debugger, profiler or "
                      "coverage?); it is put back when tracing stops", file=sys.stderr)
        if sys.version_info >= (3, 12):
            threading.setprofile_all_threads(fn)
        else:
            threading.setprofile(fn)
            sys.setprofile(fn)

    def adopt(self, frame) -> None:
        """A frame open at the start: the profile hook reports its return without help."""

    def wait(self, matcher, on_match) -> None:
        seen: dict = {}
        on_error = self.hooks.on_error

        def waiting(frame, event, arg):
            if self.active:
                sys.setprofile(self._profile)
                return
            if event != "call":
                return
            code = frame.f_code
            hit = seen.get(code)
            if hit is None:
                try:
                    hit = seen[code] = matcher(code)
                except Exception as e:  # noqa: BLE001 - a tracer must never break the traced program
                    on_error(e)
                    return
            if hit:
                on_match(frame)

        self._install(waiting)

    def begin(self) -> None:
        hooks = self.hooks
        cache_get, classify, emit, on_error = hooks.cache.get, hooks.classify, hooks.emit, hooks.on_error
        c_calls, c_call, c_return, c_function_id = hooks.c_calls, hooks.c_call, hooks.c_return, hooks.c_function_id

        def profile(frame, event, arg):
            if not self.active:
                sys.setprofile(None)
                return
            try:
                if event == "call":
                    code = frame.f_code
                    code_id = cache_get(code)
                    if code_id is None:
                        code_id = classify(code)
                    if code_id:
                        emit(CALL, code_id)
                elif event == "return":
                    code_id = cache_get(frame.f_code)
                    if code_id:
                        emit(RETURN, code_id)
                elif c_calls:
                    if event == "c_call":
                        if cache_get(frame.f_code):
                            c_call(c_function_id(arg), arg)
                    else:  # c_return, c_exception
                        c_return(arg)
            except Exception as e:  # noqa: BLE001
                on_error(e)

        self._profile = profile
        self.active = True
        self._install(profile)

    def end(self) -> None:
        self.active = False
        if sys.version_info >= (3, 12):
            threading.setprofile_all_threads(None)
        else:
            threading.setprofile(None)  # type: ignore[arg-type]
            sys.setprofile(None)
        if self._previous is not None and self._previous[0] is not None:
            sys.setprofile(self._previous[0])
