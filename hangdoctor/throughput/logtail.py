"""The complete lines a growing log gained since the last call, as `tail -F` follows it.

A line still being written waits for its newline. A log that shrinks (truncated, `> train.log`) or is replaced
(rotated: another inode at the same path) is read again from its start, and `events` says so once. A carriage
return ends a line too (a progress bar redrawn in place), and an unfinished line is kept to its last MAX_LINE
bytes. Only a regular file is read (a FIFO at the path would block forever), at most `CHUNK` bytes per call, so
a huge backlog is taken in steps and every call is bounded.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CHUNK = 8 << 20
MAX_LINE = 1 << 20  # bytes of an unfinished line kept
BACKLOG = 64 << 10  # bytes before the start that a tail started at the end keeps (its last lines, `before`)


class LogTail:
    def __init__(self, path: Path, *, from_end: bool = False):
        self.path = path
        self.offset = 0
        self.inode: tuple[int, int] | None = None
        self.partial = b""
        self.events: list[str] = []  # what happened to the file: "truncated", "rotated", "not a regular file"
        self.before: list[str] = []  # from_end: the complete lines just before the start, oldest first
        self.before_mtime: float | None = None  # and the file's modification time then (time.time()'s clock)
        if from_end:  # a watch that starts beside a running job: its past lines are not news, only context
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                return
            try:
                info = os.fstat(fd)
                if stat.S_ISREG(info.st_mode):
                    self.offset, self.inode = info.st_size, (info.st_dev, info.st_ino)
                    start = max(0, info.st_size - BACKLOG)
                    os.lseek(fd, start, os.SEEK_SET)
                    data = os.read(fd, info.st_size - start)
                    lines = data.replace(b"\r", b"\n").split(b"\n")[1 if start else 0:-1]  # whole lines only
                    self.before = [line.decode("utf-8", errors="replace") for line in lines]
                    self.before_mtime = info.st_mtime
            finally:
                os.close(fd)

    def new_lines(self) -> list[str]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:  # not there (yet: sbatch creates it when the job starts; or gone for a moment)
            return []
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                if "not a regular file" not in self.events:
                    self.events.append("not a regular file")
                return []
            inode = (info.st_dev, info.st_ino)
            if self.inode is not None and inode != self.inode:
                self.events.append("rotated")
                self.offset, self.partial = 0, b""
            elif info.st_size < self.offset:
                self.events.append("truncated")
                self.offset, self.partial = 0, b""
            self.inode = inode
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = os.read(fd, CHUNK)
        finally:
            os.close(fd)
        self.offset += len(data)
        # tqdm and its kin redraw one line with "\r": each redraw is a line (a "\r\n" cut between two reads
        # gives one empty line more, which nothing matches)
        *lines, partial = (self.partial + data).replace(b"\r", b"\n").split(b"\n")
        self.partial = partial[-MAX_LINE:]  # a line that never ends is kept to its last MAX_LINE bytes
        return [line.decode("utf-8", errors="replace") for line in lines]

    def take_events(self) -> list[str]:
        events, self.events = self.events, []
        return events
