"""Rich view of `tracing diverge`: the first departure in one line, then where ranks part collective by collective,
then the communication calls some ranks stopped making round by round, then each point where a group of ranks
split, with the common context before it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tracing.analysis.comms import CommDivergence, calls_text
from tracing.analysis.diverge import Divergence, DivergeReport, branch_label
from tracing.analysis.sequence import ROLES, SeqDivergence
from tracing.analysis.last import summarize_frames
from tracing.records import OpenFrame
from tracing.render.text import event_line


def _inside(frames: list[OpenFrame]) -> str:
    return summarize_frames(frames)  # "inside train > … > _aggregate_total_loss > broadcast"


def _render_communication(index: int, d: CommDivergence, console: Console) -> None:
    console.print()
    where = "" if d.function.is_c or not d.function.filename else f"  {d.function.where}"
    console.print(Text.assemble((f"#{index} in round {d.round}", "bold"), f" of {d.anchor}: ", (d.call, "bold"),
                                (where, "dim")), soft_wrap=True)
    for side in d.sides:
        label = branch_label(side.ranks, side.ranks_text)
        counts = f"{calls_text(side.calls)} in round {d.round}, {side.before} in round {d.round - 1}"
        console.print(Text.assemble("  ", (label, "bold cyan"), ": ", (counts, "red" if side.changed else ""),
                                    " (changed)" if side.changed else " (as before)"))
        if side.event is not None:
            console.print(Text("    " + event_line(side.event, indent=False)), soft_wrap=True)
        console.print(Text(f"    now {_inside(side.open_frames)}", style="dim"), soft_wrap=True)


def _render_collective(index: int, d: SeqDivergence, console: Console) -> None:
    console.print()
    if d.kind == ROLES:
        calls = ", ".join(s.call.name for s in d.sides if s.call is not None)
        console.print(Text.assemble((f"#{index} collective #{d.number}", "bold"),
                                    f" of {branch_label(d.ranks, d.ranks_text)}: ",
                                    " and ".join(branch_label(s.ranks, s.ranks_text) for s in d.sides),
                                    f" make different calls from here ({calls}) and all go on: roles by design, "
                                    "each followed apart"), style="dim", soft_wrap=True)
        return
    before = f", after {d.number - 1} alike" if d.number > 1 else ", the first"
    console.print(Text.assemble((f"#{index} collective #{d.number}", "bold"),
                                f" of {branch_label(d.ranks, d.ranks_text)}{before}:"))
    for side in d.sides:
        label = branch_label(side.ranks, side.ranks_text)
        if side.call is None:
            none = "no more collective calls" if d.number > 1 else "no collective call"
            console.print(Text.assemble("  ", (label, "bold cyan"), ": ", (none, "red")))
        else:
            tail = "its last" if side.more == 0 else f"then {calls_text(side.more)} more"
            console.print(Text.assemble("  ", (label, "bold cyan"), ": ", (side.call.name, "bold"),
                                        f" from {side.call.caller or '?'}; ", (tail, "red" if not side.more else "")),
                          soft_wrap=True)
            console.print(Text("    " + event_line(side.call.event, indent=False)), soft_wrap=True)
        console.print(Text(f"    now {_inside(side.open_frames)}", style="dim"), soft_wrap=True)


def _render_divergence(index: int, d: Divergence, console: Console) -> None:
    console.print()
    console.print(Text.assemble((f"#{index} at event {d.position}", "bold"),
                                f" of {branch_label(d.ranks, d.ranks_text)}"))
    if d.context:
        console.print(Text("  common before:", style="dim"))
        for e in d.context:
            console.print(Text("    " + event_line(e, indent=False)), soft_wrap=True)
    for b in d.branches:
        label = branch_label(b.ranks, b.ranks_text)
        if b.stopped:
            console.print(Text.assemble("  ", (label, "bold cyan"), ": ", ("no more events", "red"),
                                        f", {_inside(b.open_frames)}"))
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
        console.print(Text.assemble(("rank " + str(stop.rank), "bold red"),
                                    f" stopped early: its last event is #{stop.last_position}, before the others' "
                                    f"window; {_inside(stop.open_frames)}"))
    if report.identical:
        console.print("The compared ranks made the same calls in the same order.")
        return
    if report.first:
        console.print(Text.assemble(("First departure: ", "bold"), report.first), soft_wrap=True)
    index = 0
    if report.evidence:
        console.print()
        numbered = "from the start of tracing" if report.collectives_from_start else \
            "from the oldest that every rank's ring still holds"
        console.print(Text(f"Collective calls, numbered per rank across its process groups {numbered}:",
                           style="bold"), soft_wrap=True)
        for index, d in enumerate(report.collectives, index + 1):
            _render_collective(index, d, console)
    if report.communication:
        console.print()
        console.print(Text(f"Communication calls that some ranks changed while the others went on, round by round "
                           f"(a round: one call of {report.communication[0].anchor}):", style="bold"), soft_wrap=True)
    for index, d in enumerate(report.communication, index + 1):
        _render_communication(index, d, console)
    if report.divergences and (report.communication or report.evidence):
        console.print()
        console.print(Text("Where the ranks' call sequences part, event by event:", style="bold"))
    for index, d in enumerate(report.divergences, index + 1):
        _render_divergence(index, d, console)
