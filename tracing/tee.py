"""Tee: copies a text stream (stdout, stderr) into a per-rank file, flushed at every end of line.

The seed's version, made safe: the file is opened line-buffered, so every complete line is handed to the OS as
soon as it is written and a `kill -9` loses at most the unfinished last line. Everything the stream offers
(encoding, isatty, fileno, ...) still comes from the original stream.

    sys.stdout = Tee("trace-host-0-1234.txt")          # as in the seed
    tee_std_streams("logs")                              # stdout+stderr -> logs/stdout-{host}-{local_rank}-{pid}.txt
"""

from __future__ import annotations

import os
import sys
from typing import IO

from tracing.identity import RankIdentity, current_identity


class Tee:
    def __init__(self, filename: str | os.PathLike | IO[str], stream: IO[str] | None = None) -> None:
        self.stream = sys.stdout if stream is None else stream
        if hasattr(filename, "write"):
            self.file = filename
            self._owns_file = False
        else:
            self.file = open(filename, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
            self._owns_file = True

    def __getattr__(self, attr: str):
        return getattr(self.stream, attr)

    def write(self, text: str) -> int:
        written = self.stream.write(text)
        if not self.file.closed:
            self.file.write(text)
            if "\n" in text:
                self.file.flush()
        return written

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()
        if not self.file.closed:
            self.file.flush()

    def close(self) -> None:
        """Closes the copy, never the original stream."""
        if self._owns_file and not self.file.closed:
            self.file.close()


def tee_std_streams(directory: str, identity: RankIdentity | None = None, prefix: str = "stdout") -> str:
    """Copy sys.stdout and sys.stderr into one per-rank file; returns its path."""
    identity = identity or current_identity()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, identity.file_name(prefix, "txt"))
    shared = open(path, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
    sys.stdout = Tee(shared, sys.stdout)  # type: ignore[assignment]
    sys.stderr = Tee(shared, sys.stderr)  # type: ignore[assignment]
    return path
