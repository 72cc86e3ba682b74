"""Backends feed the recorder with call/return events of selected code, each with a different CPython hook.

- `monitoring` (Python 3.12+): `sys.monitoring`; an unselected code object gets DISABLE at its first event and
  costs nothing afterwards. Covers every thread.
- `settrace` (the default before 3.12): a global trace function sees each Python call once; selected frames get a
  local trace function with line events turned off, so they alone report their return.
- `setprofile`: sees every call and return, and C calls: used before 3.12 when C calls are wanted.
Before 3.12 the last two trace the thread that starts tracing and the threads started after it: Python offers no
way to hook a thread that is already running (3.12 added threading.settrace_all_threads, used there). CPython drops
their hook on a thread when calling it raises (a RecursionError in deep recursion): hookguard.py puts it back.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Container
from dataclasses import dataclass
from types import CodeType, FrameType

BACKENDS = ("auto", "monitoring", "settrace", "setprofile")


@dataclass
class Hooks:
    """What a backend needs from the tracer."""

    cache: dict[CodeType, int]  # code object -> code id, 0 when not selected
    classify: Callable[[CodeType], int]  # fills the cache
    emit: Callable[..., None]  # emit(kind, code_id, None, caller): caller is the frame the call came from
    c_call: Callable[[int, object, object], None]  # (code id, callable, the selected frame that calls it)
    c_return: Callable[[object], None]
    c_function_id: Callable[..., int]  # (callable, receiver or None) -> code id
    c_calls: bool
    on_error: Callable[[BaseException], None]  # a hook failed: stop tracing, never break the program
    resume: Callable[[FrameType | None], bool]  # this thread lost its hook: record a gap, then its open frames
    threads: Container[int]  # idents of the threads that recorded events (hookguard.py watches their hooks)


def resolve_backend(name: str, c_calls: bool) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "monitoring" and sys.version_info < (3, 12):
        raise ValueError("backend 'monitoring' needs Python 3.12 or newer (sys.monitoring)")
    if name == "settrace" and c_calls:
        raise ValueError("backend 'settrace' cannot see C calls; use 'setprofile' or 'auto' with C calls")
    if name != "auto":
        return name
    if sys.version_info >= (3, 12):
        return "monitoring"
    return "setprofile" if c_calls else "settrace"


def backend_class(name: str):
    """Imported when the tracer is created, before `tracing run` points sys.path at the traced program."""
    if name == "monitoring":
        from tracing.backends.monitoring import MonitoringBackend
        return MonitoringBackend
    if name == "settrace":
        from tracing.backends.settrace import SettraceBackend
        return SettraceBackend
    from tracing.backends.setprofile import SetprofileBackend
    return SetprofileBackend
