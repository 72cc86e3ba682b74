"""Exit codes and the one error type commands raise; `cli.main` turns it into `Error:`/`Hint:` lines.

The numbers are shared by every verb; what each one means differs per verb, so every verb module lists its own
`EXIT_CODES = {code: meaning}` and `exit_codes_help` turns that into its --help epilog.
"""

from __future__ import annotations

import textwrap

EXIT_OK = 0  # the verb did all it was asked (attach/analyze: every expected rank answered)
EXIT_PARTIAL = 1  # a result was printed, but it is incomplete (ranks missing, runs hung, nothing fits)
EXIT_USAGE = 2  # bad command line
EXIT_NOT_FOUND = 3  # nothing to look at: job or processes not found, job not running, no dumps or logs in the input
EXIT_ENVIRONMENT = 4  # cannot do it here: py-spy missing, ptrace denied, srun/pdsh/sbatch failed, not the job's owner
EXIT_INTERRUPTED = 130  # Ctrl-C (and, for experiment, SIGTERM/SIGHUP)

USAGE_TEXT = "bad command line (one Error: line and a Hint:)"
INTERRUPTED_TEXT = "interrupted (Ctrl-C)"


def exit_codes_help(codes: dict[int, str]) -> str:
    """The --help epilog of a verb: one line per exit code, in order."""
    return "exit codes:\n" + "".join(textwrap.fill(text, width=78, initial_indent=f"  {code:<3d} ",
                                                   subsequent_indent=" " * 6, break_on_hyphens=False) + "\n"
                                     for code, text in sorted(codes.items()))


class CommandError(Exception):
    """A user-facing failure: one line, an optional hint with the fix, and the exit code."""

    def __init__(self, message: str, hint: str = "", exit_code: int = EXIT_ENVIRONMENT):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
