"""SLURM node lists in pure Python, for when `scontrol show hostnames` is not at hand.

    expand_nodelist("jean-zay-iam[01-05,07],gpu[1-2]")
        -> ["jean-zay-iam01", ..., "jean-zay-iam05", "jean-zay-iam07", "gpu1", "gpu2"]
    compress_nodelist(["n1", "n2", "n3", "n7"]) -> "n[1-3,7]"

Zero padding follows SLURM: a range is printed with the width of its lower bound ("[08-11]" -> 08 09 10 11,
"[8-11]" -> 8 9 10 11). Several bracket groups in one name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2).
A malformed list raises ValueError with a one-line message that quotes the list.
"""

from __future__ import annotations

import itertools
import re

MAX_NODES = 1_000_000  # "n[1-999999999]" is a typo, not a cluster
_DIGITS = re.compile(r"^(.*?)(\d+)$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets; check that brackets are balanced and not nested."""
    items, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            if depth:
                raise ValueError(f"bad node list {text!r}: nested '['")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError(f"bad node list {text!r}: ']' without '['")
            depth = 0
        elif ch == "," and not depth:
            items.append("".join(current))
            current = []
            continue
        current.append(ch)
    if depth:
        raise ValueError(f"bad node list {text!r}: '[' is never closed")
    items.append("".join(current))
    return items


def _expand_ranges(spec: str, text: str) -> list[str]:
    """"01-05,07" -> ["01", ..., "05", "07"]."""
    values = []
    for piece in spec.split(","):
        lo, sep, hi = piece.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad node list {text!r}: {piece!r} is not a number or a range like 01-05")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"bad node list {text!r}: range {piece!r} runs backwards")
        if last - first >= MAX_NODES:
            raise ValueError(f"bad node list {text!r}: range {piece!r} has more than {MAX_NODES:,} nodes")
        values.extend(str(n).zfill(len(lo)) for n in range(first, last + 1))
    return values


def _expand_one(item: str, text: str) -> list[str]:
    parts = re.split(r"\[([^\]]*)\]", item)  # literal, ranges, literal, ranges, ..., literal
    choices = []
    for i, part in enumerate(parts):
        if i % 2:
            choices.append(_expand_ranges(part, text))
        elif part:
            if any(c.isspace() for c in part):
                raise ValueError(f"bad node list {text!r}: whitespace in {part!r}")
            choices.append([part])
    return ["".join(combo) for combo in itertools.product(*choices)]


def expand_nodelist(text: str) -> list[str]:
    """All host names of a SLURM node list, in order, duplicates kept as SLURM keeps them."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"bad node list {text!r}: empty")
    text = text.strip()
    names: list[str] = []
    for item in _split_top_level(text):
        if not item:
            raise ValueError(f"bad node list {text!r}: empty name between commas")
        names.extend(_expand_one(item, text))
        if len(names) > MAX_NODES:
            raise ValueError(f"bad node list {text!r}: more than {MAX_NODES:,} nodes")
    return names


def compress_nodelist(names: list[str] | tuple[str, ...]) -> str:
    """The shortest usual spelling: names grouped by prefix (in order of first appearance), numbers folded into
    ranges that keep each name's zero padding. expand_nodelist(compress_nodelist(x)) has the same names."""
    by_prefix: dict[str, list[str]] = {}
    plain: dict[str, None] = {}
    for name in names:
        if not name or any(c in name for c in "[],") or any(c.isspace() for c in name):
            raise ValueError(f"bad node name {name!r}")
        match = _DIGITS.match(name)
        if match:
            by_prefix.setdefault(match.group(1), []).append(match.group(2))
        else:
            plain.setdefault(name, None)
    parts = list(plain)
    for prefix, numbers in by_prefix.items():
        ranges = _fold_numbers(sorted(set(numbers), key=lambda d: (int(d), len(d))))
        if len(ranges) == 1 and "-" not in ranges[0]:
            parts.append(prefix + ranges[0])
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def _fold_numbers(digits: list[str]) -> list[str]:
    """["01", "02", "03", "07"] -> ["01-03", "07"]: a run continues while the next name is prev+1 at the run's width."""
    ranges, run = [], []
    for d in digits:
        if run and int(d) == int(run[-1]) + 1 and d == str(int(d)).zfill(len(run[0])):
            run.append(d)
            continue
        if run:
            ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [d]
    if run:
        ranges.append(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ranges
