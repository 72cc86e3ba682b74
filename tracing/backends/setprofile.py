"""sys.setprofile backend: every call and return reaches the callback, which answers from the code-object cache.

Used before Python 3.12 when C calls are wanted (the profile hook is the only pre-3.12 hook that reports them),
or on request. Threads: like the settrace backend (see backends/settrace.py).
"""

from __future__ import annotations

import sys

from tracing.backends.hooks import Hooks
from tracing.backends.globalhook import GlobalHook
from tracing.backends.hookguard import HookGuard
from tracing.records import CALL, RETURN


class SetprofileBackend:
    name = "setprofile"
    covers_all_threads = sys.version_info >= (3, 12)

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.classify = hooks.classify
        self.active = False
        self.hook = GlobalHook("profile")
        self._profile = None
        self.guard = HookGuard(sys.getprofile, sys.setprofile, self._resync, hooks.threads)

    def heard(self, frame) -> bool:
        """Will this frame's return be reported? (backends/hookwatch.py compares that with the recorded depth.)"""
        return bool(self.hooks.cache.get(frame.f_code))

    def adopt(self, frame, state=None) -> None:
        """A frame open at the start: the profile hook reports its return without help."""

    def wait(self, matcher, on_match) -> None:
        seen: dict = {}
        on_error = self.hooks.on_error

        def waiting(frame, event, arg):
            if self.active:
                self.hook.set_this_thread(self._profile)
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

        self.hook.install(waiting)

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
                        emit(CALL, code_id, None, frame.f_back)
                elif event == "return":
                    code_id = cache_get(frame.f_code)
                    if code_id:
                        emit(RETURN, code_id)
                elif c_calls:
                    if event == "c_call":
                        if cache_get(frame.f_code):
                            c_call(c_function_id(arg), arg, frame)
                    else:  # c_return, c_exception
                        c_return(arg)
            except RecursionError:  # too deep to record: drop the hook; the guard puts it back with a gap
                sys.setprofile(None)
            except Exception as e:  # noqa: BLE001
                on_error(e)

        self._profile = profile
        self.active = True
        self.hook.install(profile)
        self.guard.start()

    def _resync(self, frame, event, arg) -> None:
        """The one-shot profile function of a thread whose hook CPython dropped (hookguard.py), acting at its
        next Python call: records the gap and the frames open under this call, then profiles on as before."""
        if not self.active:
            sys.setprofile(None)
            return
        if event != "call":
            return  # returns and C calls of frames the gap record will cover
        try:
            resumed = self.hooks.resume(frame.f_back)
        except RecursionError:
            return  # still too deep: the next call tries again
        except Exception as e:  # noqa: BLE001 - a tracer must never break the traced program
            self.hooks.on_error(e)
            return
        sys.setprofile(self._profile if resumed else None)
        if resumed:
            self._profile(frame, event, arg)

    def end(self) -> None:
        self.active = False
        self.guard.stop()
        self.hook.remove()
