"""A thread that waits to take a lock its own outer frames already hold: a self-deadlock.

A `threading.Lock` is not re-entrant: the thread that holds it and asks for it again waits for ever (an `RLock`
counts its owner's entries instead). The stacks show the two places: the innermost frame waits to enter `with E:`
(or calls `E.acquire(`), and a frame further out on the same thread is inside a `with E:` block, E written the
same way: a callback run inline under the lock (a future's `set_result`, a hook fired by the call it wraps), or a
property read by a method that holds the object's lock. Read from the `with` statements the collector parses
around each frame (`with_items`: attach, or the job's code read beside dumps); without them nothing is said.

The text alone cannot tell two objects' locks apart: `self._lock` in two methods of one class is read as one lock
(a method calling another method of the same object, the usual shape), in methods of two classes as two; a name
that is not an attribute of `self` is read as one lock within one file.
"""

from __future__ import annotations

import re

from hangdoctor.model import Frame, Stack

_ACQUIRE = re.compile(r"([\w.\[\]]+)\.acquire\(")


def held_by_own_thread(stack: Stack, blocks: dict, source: dict | None = None) -> str | None:
    """What to say when the stack (innermost first) waits for a lock an outer frame of it holds, else None."""
    python = [frame for frame in stack if not frame.native]
    index = 0
    while index < len(python) and python[index].name.endswith(("__enter__", "acquire")):
        index += 1  # a lock class's own Python frames (multiprocessing's): the caller's line is what it takes
    wanted = _entering(python[index], blocks, source) if index < len(python) else None
    if wanted is None:
        return None
    inner = python[index]
    for outer in python[index + 1:]:
        for first, last, items in (blocks.get((outer.file, outer.line)) or {}).get("with_items") or ():
            if first < outer.line <= last and wanted in items and _same_owner(inner, outer, wanted):
                return (f"its own thread already holds `{wanted}`: {outer.name} ({outer.file}:{outer.line}) is "
                        f"inside the `with {wanted}:` of line {first}, and a threading.Lock taken again by the "
                        f"thread that holds it waits for ever (a self-deadlock; an RLock would not)")
    return None


def _entering(frame: Frame, blocks: dict, source: dict | None) -> str | None:
    """What the frame waits to take: the `with` that starts at its line, or the lock its line acquires."""
    for first, _, items in (blocks.get((frame.file, frame.line)) or {}).get("with_items") or ():
        if first == frame.line and len(items) == 1:
            return items[0]
    found = _ACQUIRE.search((source or {}).get((frame.file, frame.line), ""))
    return found.group(1) if found else None


def _same_owner(inner: Frame, outer: Frame, lock: str) -> bool:
    if lock.startswith("self."):
        return _class_of(inner) is not None and _class_of(inner) == _class_of(outer) and inner.file == outer.file
    return inner.file == outer.file


def _class_of(frame: Frame) -> str | None:
    """The class a method's qualified name starts with (`Meter.value`, `Monitor.hook.<locals>.record`)."""
    head, dot, _ = frame.name.partition(".")
    return head if dot and head != "<locals>" else None
