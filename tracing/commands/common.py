"""Helpers shared by the verbs: count options, warnings on stderr, a rich console (imported only when used)."""

from __future__ import annotations

import argparse
import sys

from clicore.errors import CommandError


def non_negative(text: str) -> int:
    """argparse type of counts such as --tail N."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


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
