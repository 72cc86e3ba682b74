"""Backend "c" on Python 3.10/3.11: the C frame-evaluation hook (PEP 523, tracing/native/evalhook.c).

CPython calls it once per frame start (a call, or a generator resuming). Unselected code costs one pointer lookup
in the selection table and no other change: the interpreter stays on its fast path, where sys.settrace and
sys.setprofile put every frame on the slow one. Selected frames get CALL before they run and RETURN (or UNWIND,
"exc", when an exception leaves them) after, written by C into the ring. All threads are covered, also those
running before the start, and no hook can be lost at a RecursionError (nothing for hookguard.py to repair).

Frames already running at the start are recorded as OPEN and adopted: their return is not heard, but the next
call made under them shows which still run, and the others get their RETURN then (see evalhook.c).
With --start-at, the function's own frame is recorded as a CALL (it has not started when the hook sees it).
"""

from __future__ import annotations

from tracing import native
from tracing.backends.hooks import Hooks


class EvalHookBackend:
    name = "c"
    covers_all_threads = True

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.classify = hooks.classify
        self._hook = native.load().EvalHook(hooks.writer, hooks.cache, hooks.classify, hooks.on_error)

    def adopt(self, frame, state=None) -> None:
        """A selected frame open at the start, just recorded as OPEN for state's thread."""
        self._hook.adopt(frame, state)

    def wait(self, matcher, on_match) -> None:
        self._hook.wait(matcher, on_match)

    def begin(self) -> None:
        self._hook.begin()

    def end(self) -> None:
        self._hook.end()
