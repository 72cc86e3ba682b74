"""sys.monitoring backend (Python 3.12+): selected code reports its events, unselected code is DISABLEd at once.

PY_START, PY_RESUME and PY_THROW enter a frame; PY_RETURN and PY_YIELD leave it; PY_UNWIND leaves it by an
exception. The first four are local events: returning DISABLE from the callback switches that event off for the
code location for good, so an unselected function costs one callback per event type and then nothing.
PY_THROW and PY_UNWIND cannot be disabled; they only fire when an exception passes through.
With C calls on, selected code objects (and only they) also get local CALL / C_RETURN / C_RAISE events.
"""

from __future__ import annotations

import sys
from types import CodeType, FunctionType, MethodType

from tracing.backends.hooks import Hooks
from tracing.records import CALL, RETURN, UNWIND

M = sys.monitoring
E = M.events
DISABLE = M.DISABLE
MISSING = M.MISSING
TRACE_EVENTS = E.PY_START | E.PY_RESUME | E.PY_THROW | E.PY_RETURN | E.PY_YIELD | E.PY_UNWIND
C_EVENTS = E.CALL | E.C_RETURN | E.C_RAISE
_CALLBACK_EVENTS = (E.PY_START, E.PY_RESUME, E.PY_THROW, E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND, E.CALL,
                    E.C_RETURN, E.C_RAISE)
_PYTHON_CALLABLES = (FunctionType, MethodType)
TOOL_NAME = "hangdoctor-tracing"


class MonitoringBackend:
    name = "monitoring"
    covers_all_threads = True

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.tool: int | None = None
        self._armed: list[CodeType] = []  # code objects given local C-call events

    def _claim_tool(self) -> int:
        if self.tool is None:
            for tool in (4, 3, M.PROFILER_ID, M.COVERAGE_ID, M.DEBUGGER_ID, M.OPTIMIZER_ID):
                if M.get_tool(tool) is None:
                    M.use_tool_id(tool, TOOL_NAME)
                    self.tool = tool
                    break
            else:
                raise RuntimeError("every sys.monitoring tool id is taken by other tools")
        return self.tool

    def classify(self, code: CodeType) -> int:
        code_id = self.hooks.classify(code)
        if code_id and self.hooks.c_calls:
            M.set_local_events(self._claim_tool(), code, C_EVENTS)
            self._armed.append(code)
        return code_id

    def adopt(self, frame, state=None) -> None:
        """A frame found open at the start: nothing to do, sys.monitoring reports its return anyway."""

    def wait(self, matcher, on_match) -> None:
        """Until a matching function is entered, only PY_START is on and every other code object is DISABLEd."""
        tool = self._claim_tool()
        on_error = self.hooks.on_error

        def py_start(code, offset):
            try:
                if matcher(code):
                    on_match(sys._getframe(1))
                    return None
            except Exception as e:  # noqa: BLE001 - a tracer must never break the traced program
                on_error(e)
                return None
            return DISABLE

        M.register_callback(tool, E.PY_START, py_start)
        M.set_events(tool, E.PY_START)

    def begin(self) -> None:
        tool = self._claim_tool()
        hooks = self.hooks
        for event, callback in self._callbacks():
            M.register_callback(tool, event, callback)
        if hooks.c_calls:
            self._register_c_calls(tool)
            for code, code_id in list(hooks.cache.items()):  # selected before a stop/start
                if code_id and code not in self._armed:
                    M.set_local_events(tool, code, C_EVENTS)
                    self._armed.append(code)
        M.set_events(tool, TRACE_EVENTS)
        M.restart_events()  # locations DISABLEd while waiting for --start-at must report again

    def _callbacks(self) -> tuple:
        """(event, callback) for each event of TRACE_EVENTS."""
        hooks = self.hooks
        cache_get = hooks.cache.get
        classify = self.classify
        emit = hooks.emit
        on_error = hooks.on_error
        getframe = sys._getframe

        def enter(code, offset):  # sys._getframe(1): the frame that starts (or resumes); its f_back called it
            try:
                code_id = cache_get(code)
                if code_id is None:
                    code_id = classify(code)
                if code_id:
                    emit(CALL, code_id, None, getframe(1).f_back)
                    return None
            except Exception as e:  # noqa: BLE001
                on_error(e)
                return None
            return DISABLE

        def leave(code, offset, value):
            try:
                code_id = cache_get(code)
                if code_id is None:
                    code_id = classify(code)
                if code_id:
                    emit(RETURN, code_id)
                    return None
            except Exception as e:  # noqa: BLE001
                on_error(e)
                return None
            return DISABLE

        def unwind(code, offset, exc):
            try:
                code_id = cache_get(code)
                if code_id:
                    emit(UNWIND, code_id)
            except Exception as e:  # noqa: BLE001
                on_error(e)

        def throw(code, offset, exc):  # not disableable: no DISABLE here
            try:
                code_id = cache_get(code)
                if code_id is None:
                    code_id = classify(code)
                if code_id:
                    emit(CALL, code_id, None, getframe(1).f_back)
            except Exception as e:  # noqa: BLE001
                on_error(e)

        return ((E.PY_START, enter), (E.PY_RESUME, enter), (E.PY_THROW, throw), (E.PY_RETURN, leave),
                (E.PY_YIELD, leave), (E.PY_UNWIND, unwind))

    def _register_c_calls(self, tool: int) -> None:
        hooks = self.hooks
        c_call, c_return, c_function_id, on_error = hooks.c_call, hooks.c_return, hooks.c_function_id, hooks.on_error

        def call(code, offset, fn, arg0):
            if type(fn) in _PYTHON_CALLABLES:
                return  # a Python callee reports itself through PY_START when it is selected
            try:
                c_call(c_function_id(fn, None if arg0 is MISSING else arg0), fn, sys._getframe(1))
            except Exception as e:  # noqa: BLE001
                on_error(e)

        def c_done(code, offset, fn, arg0):
            try:
                c_return(fn)
            except Exception as e:  # noqa: BLE001
                on_error(e)

        M.register_callback(tool, E.CALL, call)
        M.register_callback(tool, E.C_RETURN, c_done)
        M.register_callback(tool, E.C_RAISE, c_done)

    def end(self) -> None:
        if self.tool is None:
            return
        tool, self.tool = self.tool, None
        M.set_events(tool, 0)
        for code in self._armed:
            M.set_local_events(tool, code, 0)
        self._armed.clear()
        for event in _CALLBACK_EVENTS:
            M.register_callback(tool, event, None)
        M.free_tool_id(tool)
