"""Opening a trace file for reading: regular files only, read with bounded reads.

A FIFO named like a trace file would block open() until a writer comes and read() until it leaves; a device may
never end. Both are refused before anything is read: stat() first, then an O_NONBLOCK open (which returns at
once even for a FIFO) and fstat() of what was really opened, in case the path changed in between.
"""

from __future__ import annotations

import os
import stat

from hangdoctor.clicore.inputs import NotRegular
from hangdoctor.clicore.inputs import open_regular as open_regular_fd

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_CHUNK = 1 << 26  # os.pread reads at most 2 GiB at once


class NotRegularFile(ValueError):
    """The path is not a regular file: the message is one line for the user."""


def _require_regular(path: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    what = next((word for test, word in _KINDS if test(mode)), "not a file")
    raise NotRegularFile(f"{path}: not a regular file but {what}; trace files are regular files")


def open_regular(path: str) -> int:
    """A read-only descriptor of path (clicore.inputs.open_regular); NotRegularFile when it is not a regular
    file, OSError when it cannot open."""
    try:
        return open_regular_fd(path)[0]
    except NotRegular as e:
        _require_regular(path, e.mode)
        raise  # (_require_regular raises for any mode that is no regular file)


def read_at(fd: int, offset: int, size: int) -> bytes:
    """size bytes from offset, or fewer where the file ends first."""
    chunks = []
    while size > 0:
        chunk = os.pread(fd, min(size, _CHUNK), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)
