"""Backends feed the recorder with call/return events of selected code, each with a different CPython hook.

- `c` (the default wherever it can be built, see tracing/native/): the C hook. On 3.10/3.11 a frame-evaluation
  function (PEP 523): unselected code costs one pointer lookup per frame start; on 3.12+ sys.monitoring with
  its callbacks in C. Selected events are written by C too. Covers every thread. Cannot see C calls before 3.12.
- `monitoring` (Python 3.12+): `sys.monitoring`; an unselected code object gets DISABLE at its first event and
  costs nothing afterwards. Covers every thread.
- `settrace` (before 3.12 the default without the C hook): a global trace function sees each Python call once;
  selected frames get a local trace function with line events turned off, so they alone report their return.
- `setprofile`: sees every call and return, and C calls: used before 3.12 when C calls are wanted.
Before 3.12 the last two trace the thread that starts tracing and the threads started after it: Python offers no
way to hook a thread that is already running (3.12 added threading.settrace_all_threads, used there). CPython drops
their hook on a thread when calling it raises (a RecursionError in deep recursion): hookguard.py puts it back.
The last three are the fallback: `auto` takes them, after one Warning line, when the C hook cannot be built.
"""

from __future__ import annotations

import sys

BACKENDS = ("auto", "c", "monitoring", "settrace", "setprofile")


def resolve_backend(name: str, c_calls: bool) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "monitoring" and sys.version_info < (3, 12):
        raise ValueError("backend 'monitoring' needs Python 3.12 or newer (sys.monitoring)")
    if name == "settrace" and c_calls:
        raise ValueError("backend 'settrace' cannot see C calls; use 'setprofile' or 'auto' with C calls")
    c_sees_c_calls = sys.version_info >= (3, 12)  # the frame-evaluation hook of 3.10/3.11 sees Python frames only
    if name == "c":
        if c_calls and not c_sees_c_calls:
            raise ValueError("backend 'c' sees C calls on Python 3.12+ only; use 'setprofile' or 'auto' with C calls")
        from tracing import native
        if native.load() is None:
            raise ValueError(f"backend 'c' cannot be used with this Python: {native.reason()}")
        return name
    if name != "auto":
        return name
    fallback = "monitoring" if sys.version_info >= (3, 12) else "setprofile" if c_calls else "settrace"
    if c_calls and not c_sees_c_calls:
        return fallback
    from tracing import native
    if native.load() is not None:
        return "c"
    native.warn_fallback(fallback)
    return fallback


def backend_class(name: str):
    """Imported when the tracer is created, before `tracing run` points sys.path at the traced program."""
    if name == "c" and sys.version_info >= (3, 12):
        from tracing.backends.cmonitoring import CMonitoringBackend
        return CMonitoringBackend
    if name == "c":
        from tracing.backends.evalhook import EvalHookBackend
        return EvalHookBackend
    if name == "monitoring":
        from tracing.backends.monitoring import MonitoringBackend
        return MonitoringBackend
    if name == "settrace":
        from tracing.backends.settrace import SettraceBackend
        return SettraceBackend
    from tracing.backends.setprofile import SetprofileBackend
    return SetprofileBackend
