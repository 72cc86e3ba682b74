"""Rich view of `tracing diverge`: each point where a group of ranks split, with the common context before it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tracing.analysis.diverge import Divergence, DivergeReport
from tracing.render.text import event_line


def _branch_label(ranks: list[int], folded: str) -> str:
    return f"rank {folded}" if len(ranks) == 1 else f"ranks {folded}"


def _render_divergence(index: int, d: Divergence, console: Console) -> None:
    console.print()
    console.print(Text.assemble((f"#{index} at event {d.position}", "bold"), f" of {_branch_label(d.ranks, d.ranks_text)}"))
    if d.context:
        console.print(Text("  common before:", style="dim"))
        for e in d.context:
            console.print(Text("    " + event_line(e, indent=False)), soft_wrap=True)
    for b in d.branches:
        label = _branch_label(b.ranks, b.ranks_text)
        if b.stopped:
            where = " > ".join(f.qualname for f in b.open_frames) or "no traced frame open"
            console.print(Text.assemble("  ", (label, "bold cyan"), ": ", ("no more events", "red"), f", inside {where}"))
            continue
        console.print(Text.assemble("  ", (label, "bold cyan"), ":"))
        for e in b.events:
            console.print(Text("    " + event_line(e, indent=False)), soft_wrap=True)


def render_diverge(report: DivergeReport, console: Console) -> None:
    if report.start is None:
        console.print(f"Fewer than two ranks with events in thread {report.thread}: nothing to compare.")
        return
    console.print(Text.assemble(("Compared", "bold"), f" the {report.thread} thread of {len(report.ranks)} ranks "
                                f"in {report.source} from event {report.start} on."))
    for stop in report.early:
        where = " > ".join(f.qualname for f in stop.open_frames) or "no traced frame open"
        console.print(Text.assemble(("rank " + str(stop.rank), "bold red"),
                                    f" stopped early: its last event is #{stop.last_position}, before the others' "
                                    f"window; inside {where}"))
    if not report.divergences:
        console.print("The compared ranks made the same calls in the same order." if not report.early else "")
        return
    first = report.divergences[0]
    sizes = sorted(len(b.ranks) for b in first.branches)
    if sizes[0] < sizes[-1]:
        minority = min(first.branches, key=lambda b: len(b.ranks))
        what = f"{_branch_label(minority.ranks, minority.ranks_text)} left the others"
    else:
        what = " and ".join(_branch_label(b.ranks, b.ranks_text) for b in first.branches) + " part ways"
    console.print(Text.assemble(("First departure: ", "bold"), f"event {first.position}, {what}."))
    for index, d in enumerate(report.divergences, 1):
        _render_divergence(index, d, console)
