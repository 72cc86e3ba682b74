"""A watch thread for the hook backends: finds traced threads whose hook is gone and whose frames returned unheard.

hookguard.py puts a dropped hook back at the thread's next garbage collection, but a thread may never run one
(gc disabled, or other threads' allocations start every collection) and may hang right after the error. Then
the ring would claim that frames that returned are still open. Once a second this thread compares, for each
traced thread, the depth the recorder holds with the frames the hook still hears on its real stack (sys.
_current_frames()): more recorded than heard means returns were missed, which only a lost hook does. It then
has the gap and the frames open now recorded on that thread's behalf; it cannot put the hook back from outside
(before 3.12 no thread can set another's), hookguard.py still does that.

Races: the watched thread writes nothing while its hook is gone, and its own repair (hookguard's resync) takes
the same lock; a thread found inside the tracer's own code is left for the next round.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_CLI_FILES = ("cli.py", "__main__.py")  # with commands/: below the traced program, never inside a hook
INTERVAL_S = 1.0


class HookWatch:
    def __init__(self, states: dict, heard: Callable[[FrameType], bool],
                 repair: Callable[[object, FrameType | None], None], lock: threading.Lock) -> None:
        self._states = states  # ident -> the recorder's ThreadState
        self._heard = heard  # does the hook report this frame's return?
        self._repair = repair  # record a gap and the frames open under top, for that thread's state
        self._lock = lock
        self._own: dict[CodeType, bool] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="hangdoctor-tracing-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()  # the thread ends within one interval; nobody waits for it

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a tracer must never break the traced program
                pass

    def check(self) -> int:
        """One pass over the traced threads; returns how many gaps it recorded."""
        me, repaired = threading.get_ident(), 0
        tops = sys._current_frames()
        for ident, state in list(self._states.items()):
            if ident == me or not self._missed_returns(state, tops.get(ident)):
                continue
            with self._lock:  # the thread's own repair (hookguard.py) takes it too: look again, then write
                top = sys._current_frames().get(ident)
                if self._missed_returns(state, top):
                    self._repair(state, top)
                    repaired += 1
        return repaired

    def _missed_returns(self, state, top: FrameType | None) -> bool:
        """More frames recorded open than the hook would hear return: returns went unheard (a thread that ended
        has none open). False while the thread is inside the tracer, maybe between an event and its record."""
        chain = []
        while top is not None and len(chain) < 100_000:
            chain.append(top)
            top = top.f_back
        if any(self._in_tracer(f.f_code) for f in chain):
            return False
        heard = sum(1 for f in chain if self._heard(f))
        return state.depth - len(state.cstack) > heard  # open C calls have no frame

    def _in_tracer(self, code: CodeType) -> bool:
        """Code of the tracer's hooks and recorder; not the CLI that runs the program (`tracing run`)."""
        own = self._own.get(code)
        if own is None:
            path = "" if code.co_filename.startswith("<") else os.path.abspath(code.co_filename)
            relative = path[len(_OWN_DIR):] if path.startswith(_OWN_DIR) else None
            own = self._own[code] = relative is not None and relative not in _CLI_FILES and not relative.startswith(
                "commands" + os.sep)
        return own
