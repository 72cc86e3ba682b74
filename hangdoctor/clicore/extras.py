"""The light install (`pip install hangdoctor`, no extras) answers: a verb that needs a module an extra brings says
which, in one `Error:` line with exit 2, never a traceback.

    Error: weightdiff diff needs numpy: pip install 'hangdoctor[train]'

Two ways in, both through `app.main`: a tool declares what each verb needs before anything of it is imported
(`Tool.needs`, checked with `find_spec`, which imports nothing), and a module of `EXTRA_OF` that turns out
missing later, at an import inside a verb (weightdiff reads a .pt file with torch, draws --png with matplotlib),
is said the same way. The names here are pyproject.toml's extras.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from hangdoctor.clicore.errors import EXIT_USAGE, CommandError

EXTRA_OF = {  # top-level module -> the extra that installs it (pyproject.toml's [project.optional-dependencies])
    "numpy": "train",
    "torch": "train",
    "safetensors": "train",
    "deepspeed": "train",
    "matplotlib": "plots",
    "ray": "ray",
}


def missing(modules: Iterable[str]) -> list[str]:
    """The modules of `modules` that this Python cannot import (looked up, not imported)."""
    absent = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install of it counts as missing
            found = False
        if not found:
            absent.append(name)
    return absent


def needs_error(who: str, modules: list[str], *, hint: str | None = None) -> CommandError:
    """`who needs a and b: pip install 'hangdoctor[x,y]'` as a usage error (exit 2)."""
    names = modules[0] if len(modules) == 1 else f"{', '.join(modules[:-1])} and {modules[-1]}"
    extras = sorted({EXTRA_OF[m] for m in modules if m in EXTRA_OF})
    install = f": pip install 'hangdoctor[{','.join(extras)}]'" if extras else " (not installed)"
    return CommandError(f"{who} needs {names}{install}", exit_code=EXIT_USAGE, hint=hint)


def check(who: str, modules: Iterable[str], *, hint: str | None = None) -> None:
    """Raise needs_error naming every module of `modules` that is missing here."""
    absent = missing(modules)
    if absent:
        raise needs_error(who, absent, hint=hint)


def from_import_error(who: str, exc: ImportError) -> CommandError | None:
    """The one-line error for a missing module that an extra brings; None for any other import failure (a bug
    of ours, or a module no extra provides: those keep their traceback)."""
    top = (getattr(exc, "name", None) or "").split(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or top not in EXTRA_OF:
        return None
    return needs_error(who, [top])
