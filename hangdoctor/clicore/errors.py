"""The one error type every command raises, and the exit codes of all three tools.

`CommandError` is turned into an `Error:` line (and a `Hint:` line) on stderr and its exit code by `app.main`,
in one place. The numbers are shared; what each means differs per verb, so a verb module lists its own
`EXIT_CODES = {code: meaning}` and `exit_codes_help` turns that into the verb's --help epilog.
"""

from __future__ import annotations

import textwrap

EXIT_OK = 0
EXIT_PARTIAL = 1  # a result was printed, but it is incomplete, or it is a finding (differences, divergence)
EXIT_USAGE = 2  # a bad command line
EXIT_NOT_FOUND = 3  # nothing to look at
EXIT_ENVIRONMENT = 4  # cannot do it here (a tool missing, permission denied, a launcher failed)
EXIT_INTERRUPTED = 130  # Ctrl-C

USAGE_TEXT = "bad command line (one Error: line and a Hint:)"
INTERRUPTED_TEXT = "interrupted (Ctrl-C)"


class CommandError(Exception):
    """A user-facing failure: one line, the exit code (always said where it is raised) and an optional hint that
    says how to fix it."""

    def __init__(self, message: str, *, exit_code: int, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint or ""
        self.exit_code = exit_code


def exit_codes_help(codes: dict[int, str]) -> str:
    """The --help epilog of a verb: one line per exit code, in order, folded at 78 columns."""
    return "exit codes:\n" + "".join(textwrap.fill(text, width=78, initial_indent=f"  {code:<3d} ",
                                                   subsequent_indent=" " * 6, break_on_hyphens=False) + "\n"
                                     for code, text in sorted(codes.items()))
