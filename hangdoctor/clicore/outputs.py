"""Where a command may write: never onto what it reads, never over evidence already collected, and a results
folder held by one writer at a time.

Collected evidence is often the only copy (taken minutes before the job died), so one rule holds for every
output path of every tool (`--html`, `--svg`, `--png`, `-o`, `--out`):
- it is not one of the command's inputs (the same file, through a link or a relative path);
- it is not an existing file inside an input folder (a node file of an attach folder, a tracing ring);
- a results folder (`attach --out`) is held with an exclusive lock for the whole run: a second writer is refused at
  once, and the lock goes with the process, so a crashed run leaves nothing stale behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from pathlib import Path

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError

_held: list[int] = []  # lock descriptors, kept open until the process ends


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop: not provably outside
        return True


def refuse_overwrite(output: Path, inputs: Iterable[Path], flag: str) -> None:
    """Raise a one-line CommandError when writing `output` would replace an input or a file inside an input folder."""
    for source in inputs:
        if _same(output, source) or output.resolve() == source.resolve():
            raise CommandError(f"{flag} {output} is an input of this command: writing it would replace it",
                               hint=f"give {flag} a new path", exit_code=EXIT_USAGE)
        if output.exists() and _inside(output, source):
            raise CommandError(f"{flag} {output} would replace a file inside the input folder {source}",
                               hint=f"give {flag} a path outside {source}", exit_code=EXIT_USAGE)


def hold_folder(folder: Path, flag: str) -> None:
    """Take `folder` (it exists) for this process alone, until it ends: a second writer gets a one-line error."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise CommandError(f"cannot open {flag} {folder}: {exc.strerror or exc}", hint=f"give {flag} a writable "
                           "folder", exit_code=EXIT_USAGE) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise CommandError(f"{flag} {folder} is being written by another run now",
                           hint=f"give {flag} a new folder (by default each run makes its own)",
                           exit_code=EXIT_USAGE) from None
    _held.append(fd)
