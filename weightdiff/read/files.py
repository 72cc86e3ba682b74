"""The one way weightdiff opens what it reads: regular files only, checked with os.stat before opening and
read with a size bound.

A FIFO, a device, a socket or a folder in place of a dump file, a symlink loop, or a file too large for what
it claims to be becomes a one-line `BadInput` naming the path, instead of a read that never returns or a
traceback. Every reader (sidecars, tensor files, DeepSpeed checkpoints) goes through here.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from hangdoctor.clicore.inputs import NotRegular
from hangdoctor.clicore.inputs import open_regular as open_regular_fd
from weightdiff.errors import BadInput

KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def one_line(e: BaseException) -> str:
    """An exception's message cut to its first line (at most 300 characters)."""
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def why(e: OSError) -> str:
    """An OSError as a few words: "a symlink loop", "permission denied"."""
    if e.errno == errno.ELOOP:
        return "a symlink loop"
    return (e.strerror or type(e).__name__).lower()


def kind_of(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def require_folder(path: Path) -> Path:
    """`path` if it is a folder that can be listed; otherwise BadInput saying what it is instead."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such folder") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot open ({why(e)})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: not a folder (give the folder that holds the dumps or the checkpoint)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise BadInput(f"{path}: cannot list this folder (permission denied)")
    return path


def require_regular_file(path: Path) -> os.stat_result:
    """os.stat of `path` when it is a regular file (links followed); otherwise BadInput. Call before opening."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({why(e)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{path}: {kind_of(st.st_mode)}, not a regular file; only regular files are read")
    return st


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading (clicore.inputs.open_regular: stat first, a non-blocking open checked
    again with fstat, so a FIFO swapped in between cannot block either)."""
    require_regular_file(path)
    try:
        fd, _ = open_regular_fd(path)
    except NotRegular as e:
        raise BadInput(f"{path}: {kind_of(e.mode)}, not a regular file; only regular files are read") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({why(e)})") from None
    return os.fdopen(fd, "rb")


def read_bounded(path: Path, *, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most `limit` bytes (`what` names it in the error)."""
    with open_regular(path) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise BadInput(f"{path}: cannot read ({why(e)})") from None
    if len(data) > limit:
        raise BadInput(f"{path}: larger than {limit:,} bytes, too large for {what}")
    return data


def read_at(f: BinaryIO, path: Path, offset: int, size: int) -> bytes:
    """Exactly `size` bytes at `offset` of an open file, or BadInput (truncated, I/O error)."""
    try:
        f.seek(offset)
        data = f.read(size)
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({why(e)})") from None
    if len(data) != size:
        raise BadInput(f"{path}: truncated (ends before byte {offset + size:,})")
    return data
