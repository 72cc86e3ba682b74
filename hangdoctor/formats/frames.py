"""Interned frames and stacks: identical frames from thousands of ranks become one object.

Native frames that are bare addresses ("0x7f53578a3f16 (libc.so.6)") differ between processes (address
space layout randomisation); they are renamed "??" so that ranks in the same place merge.
"""

from __future__ import annotations

import re

from hangdoctor.model import Frame, Stack

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_frames: dict[tuple, Frame] = {}
_stacks: dict[tuple, Stack] = {}  # ids of interned frames -> stack (interned frames live as long as _frames)


MAX_NAME = 1000  # characters of a function or file name kept: a 20 MiB name is damage, and every view wraps it


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_NAME else f"{text[:MAX_NAME]}…[{len(text) - MAX_NAME:,} more characters]"


def frame(name: str, file: str, line: int, native: bool) -> Frame:
    if native and _ADDRESS.match(name):
        name = "??"
    if len(name) > MAX_NAME or len(file) > MAX_NAME:
        name, file = _bounded(name), _bounded(file)
    key = (name, file, line, native)
    found = _frames.get(key)
    if found is None:
        found = _frames[key] = Frame(name=name, file=file, line=line, native=native)
    return found


def stack(frames: list[Frame] | tuple[Frame, ...]) -> Stack:
    """The one tuple for these frames. Keyed by the frames' ids: interned frames are unique objects."""
    key = tuple(map(id, frames))
    found = _stacks.get(key)
    if found is None:
        found = _stacks[key] = tuple(frames)
    return found


def looks_native(file: str) -> bool:
    """A location that is not Python source: a shared object or executable, e.g. libc.so.6, python3.11."""
    return not file.endswith((".py", ".pyx", ".pyw")) and not file.startswith("<")
