"""Reading a user's file, bounded: one reader for every input file and JSON document of the tools.

- Only regular files are read: a FIFO would block the tool forever and /dev/zero fill its memory. The file is
  opened without blocking and checked again on the open descriptor, so a FIFO swapped in after the check cannot
  block either.
- At most `limit` bytes: a larger file is refused with its size, never read into memory first.
- JSON is strict: `NaN`, `Infinity` and `-Infinity` (Python's json accepts them; no producer of ours writes them)
  are refused, as is nesting deeper than the parser's recursion can follow (a 40 kB file of `[[[[...`).

Every refusal is an `InputRefused` (a ValueError) whose message is one line naming the file; each tool turns it
into its own one-line error. Standard library only, but for orjson where it is installed (a dependency of the
package, absent where a tool's file is copied alone): it parses the large documents (131,072 ranks' node files:
190 MB) 2.6x faster, and whatever it refuses is parsed again by json, so results and messages are json's, but
for an integer beyond 64 bits, which orjson reads as a float (whole-number fields are checked for type and
range where they are read, so such a value is refused either way).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path
from typing import Any

try:
    import orjson
except ImportError:  # the collector copied to a node, or an install without it
    orjson = None


class InputRefused(ValueError):
    """A file or document that is not read, with a one-line reason that names it."""


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


class NotRegular(InputRefused):
    """The path is a folder, a FIFO, a socket or a device. `mode` lets each tool name it in its own words."""

    def __init__(self, path: Path | str, mode: int, message: str = ""):
        self.path, self.mode = path, mode
        super().__init__(message or f"{path}: {_kind(mode)}, not a regular file")


def open_regular(path: Path | str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of a regular file, and its stat: the one way every tool opens a user's file. The
    path is stat'ed first (a socket cannot be opened at all), opened without blocking (a FIFO would wait for a
    writer), and what was opened is checked again (a FIFO swapped in between). NotRegular when it is none;
    OSError when it cannot be opened."""
    first = os.stat(path)
    if not stat.S_ISREG(first.st_mode):
        raise NotRegular(path, first.st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise NotRegular(path, opened.st_mode)
    return fd, opened


def read_bytes(path: Path, *, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most `limit` bytes; `what` names the file's role in the message."""
    try:
        fd, stated = open_regular(path)
    except NotRegular as exc:
        raise NotRegular(path, exc.mode, f"{path}: {_kind(exc.mode)}, not a file; only a regular file is read as "
                                         f"{what}") from None
    except OSError as exc:
        raise InputRefused(f"{path}: cannot read {what} ({_why(exc)})") from None
    with os.fdopen(fd, "rb", buffering=0) as handle:
        try:
            data = _read_up_to(handle, limit + 1, stated.st_size)
        except OSError as exc:
            raise InputRefused(f"{path}: cannot read {what} ({_why(exc)})") from None
    if data is None:  # a file that would block (/proc/kmsg): opened without blocking, it gives nothing
        raise InputRefused(f"{path}: would block (a kernel or device file), not {what}")
    if len(data) > limit:
        raise InputRefused(f"{path}: larger than {limit:,} bytes, too large for {what}")
    return data


def _read_up_to(handle, most: int, size: int) -> bytes | None:
    """At most `most` bytes, read in pieces sized from the file's stated size: one read of `most` bytes would
    allocate all of them for every small file (a 4 GiB bound, 16,384 node files). A file in /proc states 0 and
    holds more; a file that grows is read on up to the bound. None: the first read would block."""
    parts, total, want = [], 0, min(most, size + 1 if size else 1 << 16)
    while total < most:
        part = handle.read(min(want, most - total))
        if part is None and not parts:
            return None
        if not part:
            break
        parts.append(part)
        total += len(part)
        want = max(want, 1 << 20)
    return b"".join(parts)


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if
            stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def read_text(path: Path, *, limit: int, what: str) -> str:
    """read_bytes decoded as UTF-8 (a bad byte becomes U+FFFD: the text is evidence, not refused for it)."""
    return read_bytes(path, limit=limit, what=what).decode("utf-8", "replace")


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes, *, where: str) -> Any:
    """Strict JSON: InputRefused for invalid JSON, non-finite numbers and too deep nesting, named by `where`."""
    if orjson is not None:
        try:
            return orjson.loads(text)  # stricter than json: no NaN, no lone surrogates
        except (orjson.JSONDecodeError, RecursionError):
            pass  # json says why, or reads what orjson cannot
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InputRefused(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:
        raise InputRefused(f"{where}: not valid JSON ({exc})") from None


def load_json(path: Path, *, limit: int, what: str) -> Any:
    """A regular file's strict JSON document (read_bytes, then parse_json)."""
    return parse_json(read_bytes(path, limit=limit, what=what), where=str(path))


_PLAIN = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}


def check_field_types(record: Any) -> None:
    """ValueError naming the first field of a dataclass read from a user's file whose value is not of its
    declared plain type (str, int, bool, float): `"file": 5` is refused here, not deep in the analysis."""
    for f in dataclasses.fields(record):
        allowed = _PLAIN.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))
        if not f.init or allowed is None:
            continue
        value = getattr(record, f.name)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ValueError(f"{f.name} is {value!r}, not a {f.type}")
