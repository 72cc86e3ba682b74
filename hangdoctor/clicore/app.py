"""`main(tool, argv) -> int`: the one place where a command line becomes an exit code, for every tool.

A tool is a name, a description and its verbs; a verb is a module with a docstring (its --help), a
`prepare_parser(parser)`, a `run(...)` and `EXIT_CODES = {code: meaning}` (or the tool's shared ones). Only the
chosen verb's module is imported: `hangdoctor attach` does not pay for `experiment`, and `--help` for none.

Every outcome maps to an exit code here: a verb's return value, a `CommandError` (one `Error:` line, a `Hint:`
line, its code), argparse's own exits (a bad command line: one `Error:` line and code 2, never the usage
block; `--help`, `--version`: 0), Ctrl-C (130), a closed pipe (`tracing last DIR | head`: 0), and a module that
an extra installs missing from a light install (one `Error:` line naming the extra, 2: clicore/extras.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

from hangdoctor.clicore import __version__, extras
from hangdoctor.clicore.children import owned
from hangdoctor.clicore.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandError, exit_codes_help


@dataclass(frozen=True)
class Tool:
    name: str  # the program's name, as typed
    description: str
    verbs: Mapping[str, tuple[str, str]]  # verb -> (its module, the one-line summary `--help` lists)
    epilog: str = ""  # the top-level --help epilog, e.g. which exit codes every verb shares
    exit_codes: Mapping[int, str] | None = None  # the codes of a verb module that lists none itself
    default_verb: str | None = None  # `weightdiff A B` means `weightdiff diff A B`
    needs: Mapping[str, tuple[str, ...]] | None = None  # verb -> modules an extra installs that it cannot run without


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are a CommandError (one `Error:` line, a hint, exit code 2) reported where
    every other error is, not argparse's usage block."""

    def error(self, message: str):
        raise CommandError(message, exit_code=EXIT_USAGE, hint=f"see `{self.prog} --help`")


def chosen_verb(tool: Tool, argv: list[str]) -> str | None:
    """The verb on the command line (the first word that is not an option), if it is one of the tool's."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in tool.verbs else None


def with_default_verb(tool: Tool, argv: list[str]) -> list[str]:
    if tool.default_verb and argv and argv[0] not in tool.verbs and not argv[0].startswith("-"):
        return [tool.default_verb, *argv]
    return argv


def build_parser(tool: Tool, verb: str | None = None) -> argparse.ArgumentParser:
    """Every verb is listed; only `verb`'s module is imported and its options added."""
    parser = Parser(prog=tool.name, description=tool.description, epilog=tool.epilog,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{tool.name} {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    for name, (module_name, summary) in tool.verbs.items():
        if name != verb:
            verbs.add_parser(name, help=summary, add_help=False)
            continue
        module = importlib.import_module(module_name)
        codes = getattr(module, "EXIT_CODES", None) or tool.exit_codes or {}
        sub = verbs.add_parser(name, help=summary, description=(module.__doc__ or summary).strip(),
                               epilog=exit_codes_help(dict(codes)) if codes else None,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        module.prepare_parser(sub)
        sub.set_defaults(_module=module)
    return parser


def ensure_streams() -> None:
    """A tool started with stdout or stderr closed (`>&-`, `2>&-`) has None there: what it writes then goes to
    /dev/null, quietly, rather than ending in a traceback. Each tool's main calls this first."""
    import os
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(tool: Tool, argv: list[str], *, call: Callable[[ModuleType, argparse.Namespace], int],
         report: Callable[[str], None] = _stderr) -> int:
    """Parse `argv`, run the chosen verb through `call(module, args)` (the tool passes its consoles there),
    and return the exit code. `report` prints one stderr line (the tool's console, or plain stderr)."""
    ensure_streams()
    argv = with_default_verb(tool, list(argv))
    verb = chosen_verb(tool, argv)
    who = f"{tool.name} {verb}" if verb else tool.name
    try:
        if verb is not None:  # before its module is imported: the light install says what is missing, all of it
            extras.check(who, (tool.needs or {}).get(verb, ()))
        parser = build_parser(tool, verb)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse printed its help or the version
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if getattr(args, "_module", None) is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        # no child of the verb outlives it (clicore/children.py); a verb that runs a user's program in this
        # process (`tracing run`) leaves SIGTERM to that program
        with owned(sigterm=not getattr(args._module, "RUNS_USER_PROGRAM", False)):
            code = call(args._module, args)
    except CommandError as exc:
        report(f"Error: {exc.message}")
        if exc.hint:
            report(f"Hint: {exc.hint}")
        return exc.exit_code
    except ModuleNotFoundError as exc:
        missing = extras.from_import_error(who, exc)
        if missing is None:
            raise
        report(f"Error: {missing.message}")
        return missing.exit_code
    except KeyboardInterrupt:
        report("Error: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (`| head`): what it wanted was printed
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:  # stdout on a full disk (/dev/full) or a dead device, a file a verb did not expect to
        _silence_stdout()   # fail: said once, never a traceback
        import errno
        what = f"{exc.filename}: " if exc.filename else "cannot write the output: " if exc.errno in (
            errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT) else ""
        report(f"Error: {what}{exc.strerror or exc}")
        return EXIT_USAGE
    return EXIT_OK if code is None else code


def _silence_stdout() -> None:
    """After EPIPE, Python would print an error while flushing stdout at exit: point it at /dev/null."""
    import os
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
