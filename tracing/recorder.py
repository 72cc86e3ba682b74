"""Turns (kind, code id) events from a backend into ring records and/or stream lines, keeping per-thread depth.

This is the hot path: `make_emit()` builds one closure over local variables, so a selected call costs a dict
lookup for the thread, a clock read and one `pack_into` into the shared mapping (plus one small write for the
thread's open-frame stack), or one formatted line and one write(2) for the stream. The stack write of a call also
carries the line its caller is at (ringformat.py): the backend hands over the frame the call came from, and the
nearest selected frame at or above it (one or two f_back steps, each a cache lookup) gives its f_lineno.

With the C hook (backend "c", tracing/native/) the same work is done by its C writer: emit is the writer's, the
thread states are its ThreadState objects (the same attributes), and event numbers come from it, so events
written here (gaps, lines) and in C share one sequence.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping

from tracing import ringformat as fmt
from tracing.records import C_CALL, C_RETURN, CALL, GAP, GAP_LOCATION, KIND_WORDS, OPEN, CodeLocation
from tracing.ringwriter import RingWriter
from tracing.streamfile import MAX_INDENT, StreamWriter, location_text

OVERFLOW_THREAD = 255  # thread slot recorded for threads beyond the ring's max_threads
CALLER_HOPS = 32  # f_back steps taken to find the selected caller of a call before its line is left unrecorded
_IS_ENTER = tuple(k in (CALL, C_CALL, OPEN) for k in range(8))
_WORDS = tuple(f"{KIND_WORDS.get(k, '?'):<6}" for k in range(8))
_INDENT = tuple(" " * i for i in range(MAX_INDENT + 1))


class ThreadState:
    __slots__ = ("index", "depth", "count", "stack_off", "limit", "cstack")

    def __init__(self, index: int, stack_off: int, limit: int) -> None:
        self.index = index
        self.depth = 0
        self.count = 0
        self.stack_off = stack_off
        self.limit = limit  # depths below this have a stack slot in the ring
        self.cstack: list[tuple[object, int]] = []  # open C calls: (callable, code id)


class Recorder:
    def __init__(self, ring: RingWriter | None, stream: StreamWriter | None, *, t0_mono_ns: int, native=None,
                 table: Mapping | None = None) -> None:
        """native: the C hook's module, to write through its Writer; table: its CodeTable (the selection)."""
        self.ring = ring
        self.stream = stream
        self.t0_mono_ns = t0_mono_ns
        self.locations: list[CodeLocation] = [CodeLocation("", "<unknown>", "", 0)]  # index = code id
        self.stream_names: list[str] = [location_text(self.locations[0])]
        self.states: dict[int, ThreadState] = {}
        self._lock = threading.Lock()
        self._c_ids: dict[tuple, int] = {}
        self._next_seq = itertools.count().__next__  # event numbers, shared by emit() and mark_gap()
        self._state_type = ThreadState
        self.writer = None  # the C writer, when native
        if native is not None:
            self.writer = native.Writer(
                ring.buf if ring is not None else None, ring.capacity if ring is not None else 1,
                ring.records_off if ring is not None else 0, t0_mono_ns, stream.fd if stream is not None else -1,
                self.stream_names, table, self.new_thread)
            self._next_seq = self.writer.next_seq
            self._state_type = native.ThreadState

    # -- rare paths: new code locations and new threads ---------------------------------------------------
    def define(self, loc: CodeLocation) -> int:
        """Every call that can fail (a RecursionError in deep recursion) comes before the first change, so that a
        failed define leaves no hole in the code ids of the ring's string table."""
        name = location_text(loc)
        payload = fmt.encode_location(loc.module, loc.qualname, loc.filename, loc.lineno, loc.is_c)
        with self._lock:
            code_id = len(self.locations)
            if self.ring is not None:
                self.ring.define(code_id, payload)  # strings_end moves last: a retry writes the same entry again
            self.locations.append(loc)
            self.stream_names.append(name)
            return code_id

    def c_function_id(self, fn: object, first_arg: object = None) -> int:
        """A code id for a C callable, keyed by its name and what it is bound to. first_arg (the receiver, when
        the backend knows it) names the class of pybind11 methods, whose __self__ is an internal record."""
        owner = _c_owner(fn, first_arg)
        name = getattr(fn, "__name__", None) or type(fn).__name__
        if owner is None or isinstance(owner, (types.ModuleType, type)):
            key = (name, owner if owner is not None else fn)
        else:
            key = (name, type(owner))
        try:
            code_id = self._c_ids.get(key)
        except TypeError:  # an unhashable callable
            key = (name, type(fn))
            code_id = self._c_ids.get(key)
        if code_id is None:
            module, qualname = c_function_name(fn, owner)
            code_id = self._c_ids[key] = self.define(CodeLocation(module, qualname, "", 0, is_c=True))
        return code_id

    def new_thread(self, ident: int | None = None) -> ThreadState:
        ident = threading.get_ident() if ident is None else ident
        with self._lock:
            state = self.states.get(ident)
            if state is not None:
                return state
            thread = threading._active.get(ident)  # type: ignore[attr-defined]  # no lookup that creates threads
            name = thread.name if thread is not None else f"thread-{ident}"
            native_id = getattr(thread, "native_id", None) or 0
            is_main = ident == threading.main_thread().ident
            index, stack_off, limit = len(self.states), -1, 0
            if self.ring is not None:
                claimed = self.ring.add_thread(ident, native_id, name, is_main)
                if claimed is None:
                    index = OVERFLOW_THREAD
                else:
                    index, stack_off = claimed
                    limit = self.ring.max_depth
            if self.stream is not None:
                self.stream.add_thread(index, ident, native_id, name, is_main)
            state = self.states[ident] = self._state_type(index, stack_off, limit)
            return state

    def mark_gap(self, st: ThreadState) -> None:
        """This thread's hook was lost and is back: write a GAP event (its depth: the frames recorded open before)
        and forget its open frames; the caller records the frames open now as OPEN events."""
        n = self._next_seq()
        count = st.count
        st.count = count + 1
        t = time.perf_counter_ns() - self.t0_mono_ns
        d, st.depth = st.depth, 0
        st.cstack.clear()
        if self.ring is not None:
            ring = self.ring
            if st.limit:
                fmt.U32.pack_into(ring.buf, st.stack_off, 0)
            fmt.RECORD.pack_into(ring.buf, ring.records_off + (n % ring.capacity) * 32, n, t, 0, min(d, 0xFFFF), GAP,
                                 st.index, count & 0xFFFFFFFF, n & 0xFFFFFFFF)
            ring.note_gap()
        if self.stream is not None and self.stream.fd >= 0:
            self.stream.write_line(f"{t / 1e9:.6f} {st.index} {d} {_WORDS[GAP]} {GAP_LOCATION.qualname}")

    def note_line(self, st: ThreadState, line: int | None) -> None:
        """Record the line the thread's innermost open frame is at (the snapshot of open frames knows it)."""
        d = st.depth - 1
        if self.ring is not None and 0 <= d < st.limit and line:
            fmt.U32.pack_into(self.ring.buf, st.stack_off + fmt.ENTRY_SIZE * d + 4, line)

    def release(self) -> None:
        """Before the ring's mapping and the stream file close: the C writer lets go of both."""
        if self.writer is not None:
            self.writer.release()

    def reset_depths(self) -> None:
        """After a stop: the next start records the open frames afresh, so every stack starts empty."""
        for state in self.states.values():
            state.depth = 0
            state.cstack.clear()
            if state.limit and self.ring is not None and not self.ring.buf.closed:
                fmt.U32.pack_into(self.ring.buf, state.stack_off, 0)

    # -- the hot path -------------------------------------------------------------------------------------
    def make_emit(self, selected: Mapping | None = None) -> Callable[..., None]:
        """emit(kind, code_id, state=None, caller=None): record one event for the calling thread (or for `state`).

        caller, for an event that enters a frame: the frame it was entered from (a Python call: the new frame's
        f_back; a C call: the calling frame). selected maps code objects to code ids (0: not selected); the
        nearest frame at or above caller whose code is selected is the new frame's parent, and its f_lineno
        goes into the parent's stack entry: the line the parent is executing."""
        if self.writer is not None:
            return self.writer.emit  # the same, in C (its selection is the table it was given)
        states_get = self.states.get
        new_thread = self.new_thread
        get_ident = threading.get_ident
        clock = time.perf_counter_ns
        t0 = self.t0_mono_ns
        next_seq = self._next_seq
        is_enter = _IS_ENTER
        ring, stream = self.ring, self.stream
        buf = ring.buf if ring is not None else None
        capacity = ring.capacity if ring is not None else 1
        records_off = ring.records_off if ring is not None else 0
        pack_record = fmt.RECORD.pack_into
        pack_first, pack_push = fmt.PUSH_FIRST.pack_into, fmt.PUSH.pack_into
        pack_u32 = fmt.U32.pack_into
        entry = fmt.ENTRY_SIZE
        is_selected = (selected if selected is not None else {}).get
        hops = CALLER_HOPS  # read when tracing starts
        fd = stream.fd if stream is not None else -1
        write = os.write
        names = self.stream_names
        words, indent = _WORDS, _INDENT

        def emit(kind: int, code_id: int, st: ThreadState | None = None, caller=None) -> None:
            if st is None:
                st = states_get(get_ident())
                if st is None:
                    st = new_thread()
            d = st.depth
            if is_enter[kind]:
                st.depth = d + 1
                if d < st.limit:
                    if d:
                        if caller is not None and is_selected(caller.f_code):  # the common case: no walk
                            line = caller.f_lineno or 0
                        else:
                            line = _caller_line(caller, is_selected, hops)
                        pack_push(buf, st.stack_off + entry * d - 4, line, code_id, 0, 0)
                    else:
                        pack_first(buf, st.stack_off, code_id, 0, 0)
            else:
                if d == 0:
                    return  # leaving a frame that was open before tracing saw this thread
                d -= 1
                st.depth = d
                if d < st.limit:
                    pack_u32(buf, st.stack_off + entry * d, 0)
            n = next_seq()
            count = st.count
            st.count = count + 1
            t = clock() - t0
            if buf is not None:
                pack_record(buf, records_off + (n % capacity) * 32, n, t, code_id, d, kind, st.index,
                            count & 0xFFFFFFFF, n & 0xFFFFFFFF)
            if fd >= 0:
                write(fd, f"{t / 1e9:.6f} {st.index} {d} {words[kind]} "
                          f"{indent[d if d < MAX_INDENT else MAX_INDENT]}{names[code_id]}\n".encode())

        return emit

    def make_c_hooks(self, emit: Callable[..., None]) -> tuple[Callable, Callable]:
        """c_call(code_id, fn, caller) and c_return(fn): C calls are matched by identity so that stray returns are
        ignored; caller is the selected frame that makes the call (its line is recorded, see make_emit)."""
        states_get = self.states.get
        get_ident = threading.get_ident
        new_thread = self.new_thread

        def c_call(code_id: int, fn: object, caller=None) -> None:
            st = states_get(get_ident()) or new_thread()
            st.cstack.append((fn, code_id))
            emit(C_CALL, code_id, st, caller)

        def c_return(fn: object) -> None:
            st = states_get(get_ident())
            if st is not None and st.cstack and st.cstack[-1][0] is fn:
                emit(C_RETURN, st.cstack.pop()[1], st)

        return c_call, c_return


def _caller_line(frame, is_selected, hops: int) -> int:
    """The line of the nearest selected frame at or above frame, within hops f_back steps; 0 if none."""
    while frame is not None and hops > 0:
        if is_selected(frame.f_code):
            return frame.f_lineno or 0
        frame, hops = frame.f_back, hops - 1
    return 0


def _c_owner(fn: object, first_arg: object) -> object:
    owner = getattr(fn, "__self__", None)
    if owner is not None and type(owner).__name__.startswith("pybind11_detail_function_record"):
        return first_arg  # None when the backend cannot see the receiver (setprofile)
    return owner


def c_function_name(fn: object, owner: object) -> tuple[str, str]:
    """(module, qualname) of a C callable bound to owner (see _c_owner)."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if isinstance(owner, types.ModuleType):  # a module-level builtin such as len
        return owner.__name__, name
    if isinstance(owner, type):  # a class method of a C type
        return owner.__module__, f"{owner.__qualname__}.{name}"
    if owner is not None:  # a method bound to an instance, e.g. torch's Work.wait
        return type(owner).__module__, f"{type(owner).__qualname__}.{name}"
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or name
    return module, name if qualname.startswith("pybind11_detail") else qualname


def describe_meta(identity: dict, config: dict, backend: str, t0_wall_ns: int, t0_mono_ns: int) -> dict:
    """The header both file formats carry: who wrote it, with which settings, and the clock base."""
    return {
        "identity": identity, "config": config, "backend": backend, "t0_wall_ns": t0_wall_ns,
        "t0_mono_ns": t0_mono_ns, "python": sys.version.split()[0], "format": "hangdoctor-trace",
    }

