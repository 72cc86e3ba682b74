"""argparse types for numbers that every bound depends on: positive, finite, and (for rank counts) bounded.

NaN or inf seconds would make every timeout meaningless, and a rank count of 10**12 every loop endless, so
they are refused on the command line, as one `Error: argument --x: ...` line.
"""

from __future__ import annotations

import argparse

MAX_RANKS = 1 << 22  # 4,194,304: 32 times the largest jobs of today; the work of every verb stays bounded


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def non_negative_int(text: str) -> int:
    """A count that may be 0, such as --tail N."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def rank_count(text: str) -> int:
    """A number of ranks or GPUs (or a parallel size): positive and at most MAX_RANKS."""
    value = positive_int(text)
    if value > MAX_RANKS:
        raise argparse.ArgumentTypeError(f"{text!r} is more than {MAX_RANKS:,} ranks")
    return value


def positive_float(text: str) -> float:
    """A positive, finite number (of seconds, of GiB)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number")
    return value
