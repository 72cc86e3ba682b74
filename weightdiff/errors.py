"""The error weightdiff's readers raise, with a one-line message for stderr (commands raise clicore's
CommandError)."""

from __future__ import annotations


class BadInput(Exception):
    """A file or folder that cannot be read as what it claims to be. The message is one line naming it.

    Readers raise it for one rank or one file at a time, so that a caller can report it and go on with the rest.
    """
