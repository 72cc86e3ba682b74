"""The tracer: wires selection, the recorder (ring and/or stream) and a backend; start, stop, start-at, exit, fork.

Life cycle: new -> (waiting for --start-at) -> tracing <-> stopped -> closed. One tracer can be active per
process. At start the open frames of selected code are recorded as OPEN events (all threads with sys.monitoring,
the current thread otherwise), so a trace that starts late still knows it is "inside train > train_step".
At interpreter exit the files are marked exited; a SIGKILL leaves them marked running, which is how `tracing last`
tells a dead rank from one that finished. A forked child stops tracing at once without touching the parent's
files (they are shared with it). With the sys.settrace/setprofile backends, a thread whose hook CPython dropped (a
RecursionError) gets it back from the backend's HookGuard and `_resume` records a GAP and the frames open then;
a HookWatch thread records the same for it from outside when its frames returned unheard meanwhile.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType

from tracing.backends import backend_class, resolve_backend
from tracing.backends.hooks import Hooks
from tracing.backends.hookwatch import HookWatch
from tracing.config import TraceConfig
from tracing.identity import RankIdentity, current_identity
from tracing.native import load as load_native
from tracing.records import EXITED, OPEN, STOPPED, CodeLocation
from tracing.recorder import Recorder, describe_meta
from tracing.ringwriter import RingWriter
from tracing.selection import Selector, function_matcher, qualname_of
from tracing.streamfile import StreamWriter

_active: Tracer | None = None


def active_tracer() -> Tracer | None:
    return _active


def check_config(config: TraceConfig) -> tuple[Selector, Callable[[CodeType], bool] | None, str]:
    """The checks Tracer() makes before it creates any file (`tracing env` makes them too): the patterns parse,
    start_at names a function, the backend fits this Python. Raises ValueError with a one-line message."""
    selector = Selector(config.include, config.exclude)
    matcher = function_matcher(config.start_at, selector.modules) if config.start_at else None
    return selector, matcher, resolve_backend(config.backend, config.c_calls)


class Tracer:
    def __init__(self, config: TraceConfig, identity: RankIdentity | None = None) -> None:
        self.config = config
        self.identity = identity or current_identity()
        self.selector, self.matcher, self.backend_name = check_config(config)
        self._backend_class = backend_class(self.backend_name)
        self._native = load_native() if self.backend_name == "c" else None  # the C hook writes the events
        out = os.path.abspath(config.out)
        self.ring_path = os.path.join(out, self.identity.file_name("trace", "ring")) if config.ring else None
        self.stream_path = os.path.join(out, self.identity.file_name("trace", "txt")) if config.stream else None
        self.status = "new"
        self.exit_code: int | None = None  # set by `tracing run` so that the exit state carries it
        self._cache: dict[CodeType, int] = {}
        self._recorder: Recorder | None = None
        self._backend = None
        self._begun = False
        self._warned = False
        self._atexit = False
        self._watch: HookWatch | None = None
        self._repair_lock = threading.Lock()  # gaps are recorded by the thread itself or by the watch thread

    @property
    def paths(self) -> list[str]:
        return [p for p in (self.ring_path, self.stream_path) if p]

    # -- life cycle -------------------------------------------------------------------------------------
    def start(self) -> Tracer:
        global _active
        if self.status in ("waiting", "tracing"):
            return self
        if self.status == "closed":
            raise RuntimeError("this tracer was closed; create a new one")
        if _active is not None:
            raise RuntimeError(f"another tracer is already active in this process (writing {_active.paths[0]})")
        if self._recorder is None:
            self._open()
        _active = self
        self._backend = self._backend_class(self._hooks())
        if not self._atexit:
            atexit.register(self._at_exit)
            self._atexit = True
        if self.matcher is not None and not self._begun:
            self.status = "waiting"
            self._backend.wait(self.matcher, self._begin)
        else:
            self._begin(sys._getframe(1))
        return self

    def stop(self) -> None:
        """Pause: no more events until start() again. The files stay open and say "stopped"."""
        if self._halt():
            self._set_state(STOPPED)

    def close(self, exit_code: int | None = None, state: int = STOPPED) -> None:
        if self.status == "closed":
            return
        self._halt()
        self.status = "closed"
        if self._recorder is not None:
            self._set_state(state, exit_code)
            self._recorder.release()
            for sink in (self._recorder.ring, self._recorder.stream):
                if sink is not None:
                    sink.close()

    def __enter__(self) -> Tracer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------------
    def _halt(self) -> bool:
        global _active
        if self.status not in ("waiting", "tracing"):
            return False
        self._backend.end()
        self._backend = None
        self._stop_watch()
        self.status = "stopped"
        if _active is self:
            _active = None
        self._recorder.reset_depths()
        return True

    def _open(self) -> None:
        os.makedirs(os.path.abspath(self.config.out), exist_ok=True)
        t0_mono, t0_wall = time.perf_counter_ns(), time.time_ns()
        meta = describe_meta(self.identity.to_dict(), self.config.to_dict(), self.backend_name, t0_wall, t0_mono)
        ring = stream = None
        if self.ring_path:
            ring = RingWriter(self.ring_path, self.config.ring, meta, t0_mono_ns=t0_mono, t0_wall_ns=t0_wall)
        if self.stream_path:
            stream = StreamWriter(self.stream_path, meta)
        if self._native is not None:
            self._cache = self._native.CodeTable()  # one selection cache, read by C by pointer and by Python
        self._recorder = Recorder(ring, stream, t0_mono_ns=t0_mono, native=self._native,
                                  table=self._cache if self._native is not None else None)
        self._emit = self._recorder.make_emit(self._cache)
        self._c_call, self._c_return = self._recorder.make_c_hooks(self._emit)

    def _hooks(self) -> Hooks:
        return Hooks(cache=self._cache, classify=self._classify, emit=self._emit, c_call=self._c_call,
                     c_return=self._c_return, c_function_id=self._recorder.c_function_id,
                     c_calls=self.config.c_calls, on_error=self._on_error, resume=self._resume,
                     threads=self._recorder.states, writer=self._recorder.writer)

    def _classify(self, code: CodeType) -> int:
        code_id = 0
        if self.selector.selects(code):
            filename = code.co_filename
            loc = CodeLocation(self.selector.module_of(code), qualname_of(code),
                               filename if filename.startswith("<") else os.path.abspath(filename),
                               code.co_firstlineno)
            code_id = self._recorder.define(loc)
        self._cache[code] = code_id
        return code_id

    def _begin(self, frame) -> None:
        """Record the open frames, then turn the events on (with few thread switches in between)."""
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1.0)
        try:
            self._snapshot(frame)
            self._backend.begin()
        finally:
            sys.setswitchinterval(interval)
        self.status = "tracing"
        self._begun = True
        heard = getattr(self._backend, "heard", None)  # the hook backends: CPython may drop their hook
        if heard is not None:
            self._watch = HookWatch(self._recorder.states, heard, self._repair, self._repair_lock)
            self._watch.start()

    def _snapshot(self, frame) -> None:
        tops = dict(sys._current_frames()) if self._backend.covers_all_threads else {}
        tops[threading.get_ident()] = frame
        for ident, top in tops.items():
            selected = self._selected_frames(top)
            if selected:
                self._record_open(self._recorder.new_thread(ident), selected)

    def _selected_frames(self, top) -> list[tuple[object, int]]:
        """(frame, code id) of the selected frames on the stack that ends at top, outermost first."""
        chain = []
        while top is not None:
            chain.append(top)
            top = top.f_back
        cached, classify = self._cache.get, self._backend.classify
        selected = []
        for f in reversed(chain):
            code_id = cached(f.f_code)
            if code_id is None:
                code_id = classify(f.f_code)
            if code_id:
                selected.append((f, code_id))
        return selected

    def _record_open(self, state, selected: list[tuple[object, int]]) -> None:
        for f, code_id in selected:
            self._emit(OPEN, code_id, state, f.f_back)
            self._backend.adopt(f, state)
        if selected:
            self._recorder.note_line(state, selected[-1][0].f_lineno)

    def _resume(self, frame) -> bool:
        """Called on a thread whose hook CPython dropped (backends/hookguard.py), with the innermost frame open
        there: records a GAP and the frames open now. False when this tracer is not tracing any more."""
        with self._repair_lock:
            if self.status != "tracing":
                return False
            selected = self._selected_frames(frame)  # first: it may fail (too deep) before anything is written
            state = self._recorder.states.get(threading.get_ident()) or self._recorder.new_thread()
            self._recorder.mark_gap(state)
            self._record_open(state, selected)
            return True

    def _repair(self, state, top) -> None:
        """From the watch thread (backends/hookwatch.py), for a thread whose hook is gone: the same records."""
        if self.status == "tracing":
            selected = self._selected_frames(top)
            self._recorder.mark_gap(state)
            self._record_open(state, selected)

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _set_state(self, state: int, exit_code: int | None = None) -> None:
        rec = self._recorder
        if rec is None:
            return
        if rec.ring is not None and not rec.ring.buf.closed:
            rec.ring.set_state(state, exit_code)
        if rec.stream is not None and rec.stream.fd >= 0:
            rec.stream.set_state(state, time.time_ns(), exit_code)

    def _on_error(self, error: BaseException) -> None:
        if self.status != "tracing" and self.status != "waiting":
            return  # a late event of another thread while closing
        if not self._warned:
            self._warned = True
            print(f"Warning: hangdoctor tracing stopped after an internal error: {error!r}", file=sys.stderr)
        self.stop()

    def _at_exit(self) -> None:
        self.close(exit_code=self.exit_code, state=EXITED)

    def _forget_in_child(self) -> None:
        global _active
        if self._backend is not None:
            self._backend.end()
            self._backend = None
        self._watch = None  # its thread did not survive the fork
        if self._recorder is not None:
            self._recorder.release()
            for sink in (self._recorder.ring, self._recorder.stream):
                if sink is not None:
                    sink.forget()
        self.status = "closed"
        _active = None


def _after_fork_in_child() -> None:
    if _active is not None:
        _active._forget_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
