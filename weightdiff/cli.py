"""The `weightdiff` command: `weightdiff a/ b/` (diff is the default verb) and `weightdiff check DIR`.

`main(argv) -> int` parses, runs one verb, and turns a CommandError into `Error:`/`Hint:` lines on stderr
and its exit code, in this one place. A usage error (an unknown flag, a numeric option that is not finite or
out of range, an output path that cannot be written) is a CommandError too: one line, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rich.console import Console

from weightdiff.commands import VERBS
from weightdiff.commands.common import EXIT_CODES
from weightdiff.errors import BadInput, CommandError


class Parser(argparse.ArgumentParser):
    """argparse, except that a usage error raises CommandError (one `Error:` line) instead of printing the
    usage and exiting. Subcommand parsers are of the same class."""

    def error(self, message: str):
        raise CommandError(message, exit_code=2, hint=f"{self.prog} --help")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="weightdiff", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Find weights that changed across a save/load, desynchronised tied or replicated copies, "
                    "and norms or biases in the weight-decay group, from per-rank dumps, DeepSpeed "
                    "checkpoints, torch.save files, HF safetensors or torch.distributed.checkpoint "
                    "folders.\n\n  weightdiff A/ B/            same as: weightdiff diff A/ B/\n"
                    "  weightdiff check DIR\n  weightdiff drift DIR NAME",
        epilog=EXIT_CODES)
    verbs = parser.add_subparsers(dest="verb", metavar="{diff,check,drift}")
    for verb in VERBS:
        module = importlib.import_module(f"weightdiff.commands.{verb}")
        doc = module.__doc__ or ""
        sub = verbs.add_parser(verb, help=doc.strip().splitlines()[0], description=doc,
                               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES)
        module.prepare_parser(sub)
        sub.set_defaults(run=module.run)
    return parser


def _with_default_verb(argv: list[str]) -> list[str]:
    if argv and argv[0] not in VERBS and not argv[0].startswith("-"):
        return ["diff", *argv]
    return argv


def main(argv: list[str] | None = None, *, out: Console | None = None, err: Console | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or Console(highlight=False)
    err = err or Console(stderr=True, highlight=False)
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(_with_default_verb(argv))
        except SystemExit as e:  # argparse: --help or --version, already printed
            return int(e.code or 0)
        if getattr(args, "run", None) is None:
            parser.print_help()
            return 2
        return args.run(args, out, err)
    except CommandError as e:
        err.print(f"Error: {e}", highlight=False, soft_wrap=True, markup=False)
        if e.hint:
            err.print(f"Hint: {e.hint}", highlight=False, soft_wrap=True, markup=False)
        return e.exit_code
    except BadInput as e:  # a reader's one-line error that no verb turned into a CommandError
        err.print(f"Error: {e}", highlight=False, soft_wrap=True, markup=False)
        return 2
    except KeyboardInterrupt:
        err.print("Error: interrupted")
        return 130


def console_script() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_script()
