"""What a backend needs from the tracer, in one record (the backends' interface: see backends/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from types import CodeType, FrameType


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
    writer: object = None  # backend "c": the recorder's C writer (tracing.native), which its hooks write through
