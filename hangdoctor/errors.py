"""Exit codes and the one error type commands raise; `cli.main` turns it into `Error:`/`Hint:` lines."""

from __future__ import annotations

EXIT_OK = 0  # report complete: every expected rank answered
EXIT_PARTIAL = 1  # report printed, but some ranks did not answer, are missing, or the time bound cut collection short
EXIT_USAGE = 2  # bad command line
EXIT_NOT_FOUND = 3  # nothing to look at: job or processes not found, job not running, no dumps in the input
EXIT_ENVIRONMENT = 4  # cannot collect here: py-spy missing, ptrace denied, srun/pdsh failed, not the job's owner
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """exit codes:
  0  report complete: every expected rank answered
  1  report printed, but some ranks did not answer or are missing (partial)
  2  bad command line
  3  nothing to look at: job/processes not found or not running, no dumps in the input
  4  cannot collect: py-spy missing, ptrace denied, srun/pdsh failed, not the job's owner
"""


class CommandError(Exception):
    """A user-facing failure: one line, an optional hint with the fix, and the exit code."""

    def __init__(self, message: str, hint: str = "", exit_code: int = EXIT_ENVIRONMENT):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code
