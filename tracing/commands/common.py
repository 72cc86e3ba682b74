"""Helpers shared by the verbs: warnings on stderr, a rich console (imported only when used)."""

from __future__ import annotations

import sys

from clicore.errors import CommandError


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"Warning: {warning}", file=sys.stderr)


def console():
    try:
        from rich.console import Console
    except ImportError:
        raise CommandError("the human-readable view needs the 'rich' package", exit_code=1,
                           hint="pip install rich, or use --json") from None
    return Console(highlight=False)
