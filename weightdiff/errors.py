"""The two errors weightdiff's readers and commands raise; each carries a one-line message for stderr."""

from __future__ import annotations

from clicore.errors import CommandError as CoreCommandError


class BadInput(Exception):
    """A file or folder that cannot be read as what it claims to be. The message is one line naming it.

    Readers raise it for one rank or one file at a time, so that a caller can report it and go on with the rest.
    """


class CommandError(CoreCommandError):
    """The shared error type (clicore.errors), with weightdiff's default exit code: 2, bad usage or input.
    To go once every call site says its code."""

    def __init__(self, message: str, *, exit_code: int = 2, hint: str | None = None):
        super().__init__(message, exit_code=exit_code, hint=hint)
