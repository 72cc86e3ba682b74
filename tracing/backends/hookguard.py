"""Notices that CPython dropped a thread's sys.settrace / sys.setprofile hook, and has it put back.

CPython removes a thread's trace (or profile) function for good when calling it raises. In a deep recursion the
call of the hook is itself what overflows, so a RecursionError that the program catches leaves that thread
untraced, silently, and the frames it leaves afterwards still look open in the ring. Nothing of the tracer runs
on that thread any more, except garbage-collector callbacks: they run on the thread whose allocation started a
collection. So a gc callback checks the thread's hook (`sys.gettrace()`, one C call per collection); when a
traced thread has none, it installs the backend's one-shot `resync` hook. At the thread's next Python call that
records a GAP event and the frames open then, and hands over to the real hook.

The callback itself makes C calls only: a collection may start while CPython formats a RecursionError, where a
deeper Python call could overflow the overflow (a fatal error), and where the stack is too deep to do the work.

When: at the thread's next collection. CPython starts none while an exception propagates, so this is normally
the first container allocation after the program handled the error; with gc disabled, the next gc.collect().
Meanwhile hookwatch.py records the gap from outside if the thread's frames returned unheard. The hooks also
remove themselves when a RecursionError is raised inside them (instead of stopping all tracing), and this guard
repairs that the same way.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Container


class HookGuard:
    def __init__(self, get_hook: Callable[[], object], set_hook: Callable[[object], None], resync: Callable,
                 threads: Container[int]) -> None:
        self._get_hook = get_hook
        self._set_hook = set_hook
        self._resync = resync
        self._threads = threads  # threads that recorded events (the recorder's states)
        self._installers: set[int] = set()  # threads that installed the hook, events or not
        self._get_ident = threading.get_ident

    def start(self) -> None:
        """Called by the thread that installs the hook."""
        self._installers.add(threading.get_ident())
        if self._check not in gc.callbacks:
            gc.callbacks.append(self._check)

    def stop(self) -> None:
        while self._check in gc.callbacks:
            gc.callbacks.remove(self._check)
        self._installers.clear()

    def _check(self, phase: str, info: dict) -> None:
        if phase != "start" or self._get_hook() is not None:
            return  # the common case: this thread has a hook (ours, or one somebody set on purpose)
        ident = self._get_ident()
        if ident in self._threads or ident in self._installers:
            self._set_hook(self._resync)
