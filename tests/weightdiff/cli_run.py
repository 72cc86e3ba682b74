"""The weightdiff command run in-process, as the tests of the newer formats call it: never a traceback."""

from __future__ import annotations

import io

from rich.console import Console

from weightdiff.cli import main


def run_cli(argv: list[str]) -> tuple[int, str, str, list[str]]:
    """(exit code, stdout, stderr, stderr's `Error:` lines)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=Console(file=out, width=200), err=Console(file=err, width=400))
    assert "Traceback" not in err.getvalue() and "Traceback" not in out.getvalue()
    return code, out.getvalue(), err.getvalue(), [line for line in err.getvalue().splitlines()
                                                  if line.startswith("Error: ")]
