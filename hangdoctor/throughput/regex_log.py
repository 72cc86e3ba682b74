"""Iteration lines of any training script, read with the user's regular expression (`--iteration-regex`).

Megatron's lines are read by `megatron_log`; every other script prints its own, and the user says how to read
them with named groups:

    step (?P<iteration>\\d+)/(?P<total>\\d+) .* (?P<ms>[\\d.]+) ms/step
    iteration   the iteration (step) number: a higher one is progress
    ms or s     that iteration's time, in milliseconds or in seconds (what the experiment's figures need)
    total       the iterations planned (optional)
    loss        the loss (optional; shown in the experiment's progress lines)

`hangdoctor watch` needs only the number: the `iteration` group, else the first group, else the digits of the
whole match. `hangdoctor experiment` needs the number and the time: each matching line becomes a
`ParsedIteration` like a Megatron line's, so the same medians (`throughput.summary`) come out of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from hangdoctor.throughput.megatron_log import ParsedIteration, parse_iteration_line

ITERATION, TOTAL, LOSS = "iteration", "total", "loss"
TIME_GROUPS = {"ms": 1.0, "s": 1000.0}  # group name -> milliseconds per unit
ELAPSED_MS = "elapsed time per iteration (ms)"  # the field Megatron's lines carry, so summaries read both alike
EXAMPLE = r"'step (?P<iteration>\d+) .* (?P<ms>[\d.]+) ms'"


def iteration_number(match: re.Match) -> int | None:
    """The iteration a match names: its `iteration` group, else its first group, else the whole match."""
    names = match.re.groupindex
    text = match.group(ITERATION) if ITERATION in names else match.group(1) if match.re.groups else match.group(0)
    digits = re.search(r"\d+", text or "")
    return int(digits.group()) if digits else None


def check_timed(pattern: re.Pattern, where: str = "--iteration-regex") -> None:
    """ValueError (one line) unless the pattern names the iteration and its time."""
    names = pattern.groupindex
    if ITERATION not in names:
        raise ValueError(f"{where} {pattern.pattern!r} has no (?P<iteration>...) group for the iteration number, "
                         f"e.g. {EXAMPLE}")
    times = [name for name in TIME_GROUPS if name in names]
    if len(times) != 1:
        what = "no" if not times else "two"
        raise ValueError(f"{where} {pattern.pattern!r} has {what} group for the iteration time: name one "
                         f"(?P<ms>...) for milliseconds or (?P<s>...) for seconds, e.g. {EXAMPLE}")


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def parse_regex_line(line: str, pattern: re.Pattern) -> ParsedIteration | None:
    """A line the pattern matches, as an iteration (no elapsed time when the time group matched nothing)."""
    match = pattern.search(line)
    if match is None:
        return None
    number = iteration_number(match)
    if number is None:
        return None
    groups = match.groupdict()
    fields: dict[str, str] = {}
    for name, scale in TIME_GROUPS.items():
        value = _number(groups.get(name))
        if value is not None:
            fields[ELAPSED_MS] = repr(value * scale)
    if groups.get(LOSS):
        fields["lm loss"] = groups[LOSS]
    total = groups.get(TOTAL)
    return ParsedIteration(iteration=number, train_iters=int(total) if total and total.isdigit() else 0,
                           prefix=line[:match.start()].strip(), fields=fields)


def parse_line(line: str, pattern: re.Pattern | None) -> ParsedIteration | None:
    """One iteration line: Megatron's without a pattern, else the pattern's."""
    return parse_iteration_line(line) if pattern is None else parse_regex_line(line, pattern)


def parse_lines(lines: Iterable[str] | str, pattern: re.Pattern | None) -> list[ParsedIteration]:
    """Every iteration line of a log (text or lines), in order."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [parsed for parsed in (parse_line(line, pattern) for line in lines) if parsed is not None]
