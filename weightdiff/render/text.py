"""Rich terminal views of a DiffReport and a CheckReport. They take a Console, so tests render into a string.

Each difference is a two-line entry (what and where; by how much and why it matters) rather than a table
row: parameter names are long, and the entry must stay readable in an 80-column terminal and with grep. So an
entry line is printed whole into a pipe or a file (grep finds it on one line), and on a terminal wrapped at
words, its continuation lines under its own text (`say`).
"""

from __future__ import annotations

import math
import re

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from weightdiff.analysis.check_report import CheckReport, Finding
from weightdiff.analysis.diff_report import DiffReport, ParamSummary
from weightdiff.analysis.drift import DriftReport
from weightdiff.read.whole import KIND_NAMES

VERDICT_STYLES = {"different": "bold red", "same": "bold green"}  # incomplete / not compared: bold yellow


_LEAD = re.compile(r"^\s*(\d+\.\s+)?")  # an entry's indent and its number: what continuation lines hang under


def say(console: Console, line: str) -> None:
    """One entry line (rich markup): whole when not on a terminal, else wrapped with a hanging indent."""
    if not console.is_terminal:
        console.print(line, highlight=False, soft_wrap=True)
        return
    lead = _LEAD.match(line).group(0)
    grid = Table.grid(padding=0)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(lead, Text.from_markup(line[len(lead):]))
    console.print(grid, highlight=False)


def fmt_float(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return "nan" if x != x else ("inf" if x > 0 else "-inf")
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def fmt_fraction(f: float | None) -> str:
    if f is None:
        return "-"
    if f == 0:
        return "0%"
    return f"{100 * f:.2g}%" if 100 * f < 1 else f"{100 * f:.3g}%"


def _side(label: str, side) -> str:
    if side.kind in KIND_NAMES:
        return f"{label}: {side.path} ({KIND_NAMES[side.kind]}, the whole model)"
    if side.kind == "deepspeed-checkpoint":
        return f"{label}: {side.path} (DeepSpeed checkpoint, step {side.iteration}, {side.ranks} (pp, tp) slices)"
    if side.kind == "megatron-checkpoint":
        return (f"{label}: {side.path} (Megatron-LM checkpoint, iteration {side.iteration}, {side.ranks} (pp, tp) "
                "slices)")
    return f"{label}: {side.path} ({side.tag}-dumps of iteration {side.iteration}, {_plural(side.ranks, 'rank')})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _named(name: str, role: str) -> str:
    return f"{name} (buffer)" if role == "buffer" else f"{name} (value)" if role == "value" else name


def _param_lines(i: int, p: ParamSummary) -> list[str]:
    head = (f"{i:>3}. {_named(p.name, p.role)}  [bold]{escape(p.status)}[/] on {escape(p.where)} "
            f"({_plural(len(p.ranks), 'rank')})")
    parts = []
    if p.status in ("differs", "dtype") and not p.example.by_fingerprint:
        parts.append(f"max |a-b| {fmt_float(p.max_abs)}, mean |a-b| {fmt_float(p.mean_abs)}, "
                     f"{fmt_fraction(p.fraction)} of elements differ")
    if p.reset_to:
        parts.append(f"[bold]now all {p.reset_to}: back at a default initialisation[/]")
    if p.example.first_index is not None and p.fraction < 0.5:
        parts.append(f"first at index {p.example.first_index}")
    if p.example.dtype_a and p.example.dtype_b and p.example.dtype_a != p.example.dtype_b:
        parts.append(f"dtype {p.example.dtype_a} -> {p.example.dtype_b}")
    if p.status == "shape":
        parts.append(f"shape {p.example.shape_a} -> {p.example.shape_b}")
    if p.note and "dtype" not in p.note:
        parts.append(escape(p.note))
    parts.append(escape(p.norm) if p.norm else escape(p.module_class or ""))
    detail = "; ".join(x for x in parts if x)
    return [head, "       " + detail] if detail else [head]


def render_diff(report: DiffReport, console: Console, *, limit: int = 40) -> None:
    say(console, escape(_side("a", report.a)))
    say(console, escape(_side("b", report.b)))
    unread = f", {report.unreadable_tensors} could not be read" if report.unreadable_tensors else ""
    say(console, escape(f"compared {_plural(report.compared_pairs, 'rank pair')}, "
                        f"{_plural(report.compared_tensors, 'tensor')}, {report.compared_elements:,} elements "
                        f"({report.tolerance.describe()}); {report.equal_tensors} tensors equal{unread}"))
    style = VERDICT_STYLES.get(report.verdict, "bold yellow")
    console.print(Text(f"{report.verdict.upper()}: ", style=style) + Text(report.headline), highlight=False,
                  soft_wrap=True)
    for i, p in enumerate(report.params[:limit], 1):
        for line in _param_lines(i, p):
            say(console, line)
    if len(report.params) > limit:
        console.print(f"  ... and {len(report.params) - limit} more parameters (--limit N, or --json for all)")
    if report.informational:
        console.print("not differences, for information:")
        for p in report.informational:
            console.print(f"  {_named(p.name, p.role)} on {p.where}: {p.status}: {p.note}", highlight=False,
                          soft_wrap=True)
    for label, ranks in (("a", report.only_in_a), ("b", report.only_in_b)):
        if ranks:
            console.print(f"only in {label}: {', '.join(ranks[:8])}{' ...' if len(ranks) > 8 else ''}",
                          highlight=False, soft_wrap=True)
    if report.errors:
        rest = "nothing else could be compared" if report.verdict == "not compared" else \
            "everything else was compared"
        console.print(f"{_plural(len(report.errors), 'input problem')} (on stderr); {rest}")


def _finding_lines(i: int, f: Finding) -> tuple[str, str]:
    size = ""
    if f.max_abs is not None:
        size = f", max |diff| {fmt_float(f.max_abs)}"
    return (f"{i:>3}. \\[{f.kind}] {_named(f.name, f.role)} on {escape(f.where)}{size}",
            f"       {escape(f.detail)}" + (f"; class {f.module_class}" if f.module_class and f.module_class not in
                                            f.detail else ""))


def render_check(report: CheckReport, console: Console, *, limit: int = 40) -> None:
    say(console, escape(f"{report.path} ({report.describe_selection()})"))
    for kind, count in report.checked.items():
        found = [f for f in report.findings if f.kind == kind]
        unread = report.not_checked.get(kind, 0)
        status = (Text("FAIL", style="bold red") if found else
                  Text("INCOMPLETE", style="bold yellow") if unread else
                  Text("ok  ", style="green") if count else Text("n/a ", style="dim"))
        tail = f", {unread} could not be read (on stderr)" if unread else ""
        counts = f"  {count} checked, {len(found)} finding{'' if len(found) == 1 else 's'}{tail}"
        console.print(Text(f"  {kind:<14}") + status + Text(counts))
    for i, f in enumerate(report.findings[:limit], 1):
        for line in _finding_lines(i, f):
            say(console, line)
    if len(report.findings) > limit:
        console.print(f"  ... and {len(report.findings) - limit} more findings (--limit N, or --json for all)")
    _render_unchecked(report, console, limit)
    for note in report.notes:
        say(console, f"note: {escape(note)}")


def _render_unchecked(report: CheckReport, console: Console, limit: int) -> None:
    """What a check could not look at, one line per (check, reason), with the names and places it concerns."""
    if not report.unchecked:
        return
    groups: dict[tuple[str, str], list] = {}
    for u in report.unchecked:
        groups.setdefault((u.kind, u.reason), []).append(u)
    console.print("not checked (never counted as equal):")
    for (kind, reason), items in list(groups.items())[:limit]:
        names = list(dict.fromkeys(u.name for u in items))
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        places = ", ".join(dict.fromkeys(u.where for u in items))
        say(console, f"  \\[{kind}] {escape(shown)} on {escape(places)}: {escape(reason)}")
    if len(groups) > limit:
        console.print(f"  ... and {len(groups) - limit} more reasons (--json for all)")


def render_drift(report: DriftReport, console: Console) -> None:
    console.print(f"{report.name} in {report.path} ({report.tag}-dumps)", highlight=False, soft_wrap=True)
    console.print(f"{'iteration':>9} {'tp':>3} {'copies':>6} {'distinct':>8} {'max |copy-ref|':>14}  norms (min .. max)")
    for p in report.points:
        norms = list(p.norms.values())
        span = f"{fmt_float(min(norms))} .. {fmt_float(max(norms))}" if norms else "-"
        console.print(f"{p.iteration:>9} {p.tp:>3} {p.copies:>6} {p.distinct:>8} {fmt_float(p.max_abs):>14}  {span}",
                      highlight=False, soft_wrap=True)
    verdict = ("copies DIFFER" if report.drifted else "copies equal at every iteration" if not report.errors else
               "copies equal wherever they could be read (input problems on stderr)")
    console.print(verdict, style="bold red" if report.drifted else "bold green")
