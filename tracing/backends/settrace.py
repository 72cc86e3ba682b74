"""sys.settrace backend, the default before Python 3.12 where the C hook cannot be built.

The global trace function runs once per Python call and answers from the per-code-object cache. For unselected
code it returns None, so that frame reports nothing more (not even its return). Selected frames get a local trace
function with `f_trace_lines = False`: it hears only their return. Measured against sys.setprofile, which also
calls back on every return and every C call of unselected code, this is the cheaper of the two (see
docs/BENCHMARKS.md). It cannot see C calls; `--c-calls` picks the setprofile backend instead.

Threads: `threading.settrace` covers threads started later; on 3.12+ `threading.settrace_all_threads` covers the
running ones too. Before 3.12 a thread that is already running cannot be hooked from Python.

CPython drops a thread's trace function when calling it raises, as it does at the recursion limit: the
HookGuard (hookguard.py) notices, records a GAP and the frames open then, and installs the function again.
"""

from __future__ import annotations

import sys

from tracing.backends.hooks import Hooks
from tracing.backends.globalhook import GlobalHook
from tracing.backends.hookguard import HookGuard
from tracing.records import CALL, RETURN


class SettraceBackend:
    name = "settrace"
    covers_all_threads = sys.version_info >= (3, 12)

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.classify = hooks.classify
        self.active = False
        self.hook = GlobalHook("trace")
        self._trace, self._local = self._build()
        self.guard = HookGuard(sys.gettrace, sys.settrace, self._resync, hooks.threads)

    def heard(self, frame) -> bool:
        """Will this frame's return be reported? (backends/hookwatch.py compares that with the recorded depth.)"""
        return frame.f_trace is self._local

    def adopt(self, frame, state=None) -> None:
        """A selected frame open at the start: give it the local trace function so that its return is heard."""
        frame.f_trace_lines = False
        frame.f_trace = self._local

    def wait(self, matcher, on_match) -> None:
        seen: dict = {}
        on_error = self.hooks.on_error

        def waiting(frame, event, arg):
            if self.active:  # another thread matched first: switch this one over
                self.hook.set_this_thread(self._trace)
                return self._trace(frame, event, arg)
            code = frame.f_code
            hit = seen.get(code)
            if hit is None:
                try:
                    hit = seen[code] = matcher(code)
                except Exception as e:  # noqa: BLE001 - a tracer must never break the traced program
                    on_error(e)
                    return None
            if hit:
                on_match(frame)  # begins tracing; the snapshot adopts `frame` when it is selected
                return frame.f_trace
            return None

        self.hook.install(waiting)

    def begin(self) -> None:
        self.active = True
        self.hook.install(self._trace)
        self.guard.start()

    def _resync(self, frame, event, arg):
        """The one-shot trace function of a thread whose hook CPython dropped (hookguard.py), called at its next
        Python call: records the gap and the frames open under this call, then traces on with the real one."""
        if not self.active:
            sys.settrace(None)
            return None
        try:
            resumed = self.hooks.resume(frame.f_back)
        except RecursionError:
            return None  # still too deep: the next call tries again
        except Exception as e:  # noqa: BLE001 - a tracer must never break the traced program
            self.hooks.on_error(e)
            return None
        sys.settrace(self._trace if resumed else None)
        return self._trace(frame, event, arg) if resumed else None

    def _build(self):
        hooks = self.hooks
        cache_get, classify, emit, on_error = hooks.cache.get, hooks.classify, hooks.emit, hooks.on_error

        def local(frame, event, arg):
            if event == "return" and self.active:
                try:
                    emit(RETURN, cache_get(frame.f_code) or 0)
                except RecursionError:  # too deep to record: drop the hook; the guard puts it back with a gap
                    sys.settrace(None)
                except Exception as e:  # noqa: BLE001
                    on_error(e)
            return local

        def trace(frame, event, arg):
            code_id = cache_get(frame.f_code)
            if code_id == 0:
                return None  # the common case: unselected code, known already
            if not self.active:  # a thread that still has our hook after stop()
                sys.settrace(None)
                return None
            try:
                if code_id is None:
                    code_id = classify(frame.f_code)
                    if not code_id:
                        return None
                frame.f_trace_lines = False
                emit(CALL, code_id, None, frame.f_back)
                return local
            except RecursionError:  # too deep to record: drop the hook; the guard puts it back with a gap
                sys.settrace(None)
                return None
            except Exception as e:  # noqa: BLE001
                on_error(e)
                return None

        return trace, local

    def end(self) -> None:
        self.active = False
        self.guard.stop()
        self.hook.remove()
