"""Rich view of `tracing last`: one block per group of ranks, their open frames as a tree, then last events.

Each open frame shows the line it is at, as py-spy does; a line that is not the executing one says so:
"(last call)" on an innermost frame (the line of its last call of traced code), "(def)" where no line was
recorded (the function's first line)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from tracing.analysis.last import LastGroup, LastReport, RankLast
from tracing.records import DEF, LAST_CALL
from tracing.render.text import clock, event_line, seconds


def _ranks_label(ranks: list[int], folded: str) -> str:
    return f"rank {folded}" if len(ranks) == 1 else f"ranks {folded} ({len(ranks)} ranks)"


def _frames_tree(label: str, frames, truncated: bool) -> Tree:
    tree = Tree(Text(label, style="dim"), guide_style="dim")
    node = tree
    if truncated:
        node = node.add(Text("… (outer frames deeper than the ring's stack slots)", style="dim"))
    for frame in frames:
        note = f" ({frame.line_source})" if frame.line_source in (DEF, LAST_CALL) and not frame.is_c else ""
        node = node.add(Text.assemble((frame.qualname + ("()" if frame.is_c else ""), "bold"), "  ",
                                      (frame.where + note, "dim")))
    return tree


def _group_header(group: LastGroup) -> Text:
    text = Text.assemble((_ranks_label(group.ranks, group.ranks_text), "bold cyan"), " · ",
                         (group.condition, "red" if group.condition in ("dead", "suspended") else "green"))
    if group.silent_s is not None:
        low, high = group.silent_s
        span = seconds(low) if high - low < 0.5 else f"{seconds(low)}-{seconds(high)}"
        text.append(f" · silent for {span}")
    return text


def render_last(report: LastReport, console: Console, all_threads: bool = False) -> None:
    console.print(Text.assemble((f"{len(report.ranks)} rank(s)", "bold"), f" traced in {report.source}, "
                                f"{len(report.groups)} group(s), at {clock(report.now_wall_ns)}"))
    for group in report.groups:
        console.print()
        console.print(_group_header(group))
        console.print(Text("  " + group.summary, style="bold"))
        if group.open_frames:
            console.print(_frames_tree("open frames (outermost first)", group.open_frames, group.frames_truncated))
        if group.last_events:
            console.print(Text(f"last events of rank {group.representative}:", style="dim"))
            base = min(e.depth for e in group.last_events)
            for e in group.last_events:
                console.print(Text("  " + event_line(e, base_depth=base)), soft_wrap=True)
    if all_threads:
        _render_other_threads(report.ranks, console)


def _render_other_threads(ranks: list[RankLast], console: Console) -> None:
    for r in ranks:
        others = [t for t in r.threads if not t.is_main]
        if not others:
            continue
        console.print()
        console.print(Text(f"rank {r.rank}: other threads", style="bold"))
        for t in others:
            label = f"{t.name}: " + (" > ".join(f.qualname for f in t.open_frames) or "no traced frame open")
            console.print(Text("  " + label))
