"""Find the stack readers' executables: py-spy, and pystack, the second reader (collector/pystack.py); or say how
to get them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from hangdoctor.clicore.errors import EXIT_ENVIRONMENT, CommandError

MISSING_HINT = ("install it with `pip install py-spy` in the environment hangdoctor runs from (it must also be on "
                "the compute nodes, e.g. on a shared file system), or pass --py-spy PATH")


def find_pyspy(explicit: str | None = None, *, required: bool = True) -> str:
    """An absolute path: --py-spy, else py-spy on PATH, else next to this Python (a venv's bin/); "" when none is
    found and not `required` (pystack reads every rank then)."""
    found = _find("py-spy", explicit, MISSING_HINT)
    if not found and required:
        raise CommandError("py-spy not found on PATH nor next to this Python", hint=MISSING_HINT,
                           exit_code=EXIT_ENVIRONMENT)
    return found


def find_pystack(explicit: str | None = None) -> str:
    """pystack's absolute path (--pystack, else on PATH, else next to this Python), or "" (no second reader)."""
    return _find("pystack", explicit, "install it with `pip install 'hangdoctor[pystack]'`, or pass --no-pystack")


def _find(program: str, explicit: str | None, hint: str) -> str:
    if explicit:
        path = shutil.which(explicit) or explicit
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
        why = ("a folder" if os.path.isdir(path) else "a file that is not executable" if os.path.isfile(path) else
               "not a file" if os.path.exists(path) else "no such file")
        raise CommandError(f"{program} not found at {explicit}: {why}", hint=hint, exit_code=EXIT_ENVIRONMENT)
    for candidate in (shutil.which(program), str(Path(sys.executable).parent / program)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return ""


def pyspy_version(path: str) -> str:
    """py-spy's version without running it, when it is the one installed with this Python; else "".

    Read from the name of its `py_spy-X.Y.Z.dist-info` folder: importlib.metadata would cost more than the rest
    of a small attach's start-up."""
    if Path(path).parent != Path(sys.executable).parent:
        return ""
    for folder in sys.path:
        if not folder.endswith("site-packages"):
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.startswith("py_spy-") and name.endswith(".dist-info"):
                return name[len("py_spy-"):-len(".dist-info")]
    return ""  # the collector asks py-spy itself
