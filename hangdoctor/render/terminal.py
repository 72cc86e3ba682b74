"""The verdict on a terminal (rich): the verdict itself, the merged tree, then a table per class.

Takes a Console, so tests render into `Console(file=io.StringIO(), width=100)` and read the text.
"""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from hangdoctor.analysis.classes import RankClass, progress_word, where
from hangdoctor.analysis.suspects import UNRESPONSIVE_REASONS
from hangdoctor.analysis.verdict import Verdict
from hangdoctor.identity import natural_key
from hangdoctor.render.roles import colour, first_role
from hangdoctor.render.text import box_frames, pinned_frames, run_lines, stack_lines
from hangdoctor.topology import fold_ranks


def folded(ranks: list[int], limit: int = 60) -> str:
    text = fold_ranks(ranks)
    return text if len(text) <= limit else text[: limit - 1].rsplit(",", 1)[0] + ",…"


def rank_word(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {folded(ranks)}"


def class_colour(cls: RankClass, roles: dict[int, str]) -> str:
    """The colour of the class's role (render/roles.py), the same as in the HTML picture."""
    return colour(first_role(cls.ranks, roles))


def header(verdict: Verdict) -> Text:
    dims = verdict.dims
    topo = f"{dims.describe()} [{verdict.dims_source}]" if dims else "topology unknown"
    sampling = (f"{verdict.samples} samples {verdict.interval:g}s apart" if verdict.samples > 1 else "1 sample")
    return Text(f"hangdoctor · {verdict.source} · {topo} · {sampling}", style="dim")


def hang(body: Text, indent: int = 2) -> Table:
    """The text indented, its continuation lines too: readable at 80 columns."""
    return labelled([("", body)], indent=indent, gap=0)


def labelled(rows: list[tuple[str | Text, Text]], *, indent: int = 2, gap: int = 2) -> Table:
    """A section's rows as label + text, the text wrapped under itself (a hanging indent): "ranks 0-1" stands
    out on the left and every continuation line starts under the text, not under the label."""
    grid = Table.grid(padding=(0, gap, 0, 0), pad_edge=False, expand=True)
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for label, body in rows:
        grid.add_row(Text.assemble(" " * indent, label), body)
    return grid


def _coords(ranks: list[int], verdict: Verdict) -> str:
    """Where the ranks sit, after their numbers; nothing when the topology is unknown (it would repeat them)."""
    return f"{where(ranks, verdict.dims)}  " if verdict.dims is not None else ""


def verdict_panel(verdict: Verdict) -> Panel:
    style = {True: "bold red", False: "bold green", None: "bold yellow"}[verdict.hung]
    lines: list = [Text(verdict.headline, style=style), Text("")]
    if verdict.places:
        lines.append(Text("Who is where", style="bold"))
        rows = []
        for place in verdict.places:
            state = progress_word(place.progress)
            verb = ("waits in" if len(place.ranks) == 1 else "wait in") if place.wait is not None else \
                ("is" if len(place.ranks) == 1 else "are")
            rows.append((Text(rank_word(place.ranks), "bold"), Text.assemble(
                _coords(place.ranks, verdict), (f"{verb} {place.position}", "cyan"),
                (f"  [{state}, {place.activity}]",
                 "red" if state == "stuck" else "green" if state == "progressing" else "yellow"))))
        lines.append(labelled(rows))
    silent = dict(verdict.unresponsive)
    if verdict.missing:
        silent["missing"] = verdict.missing
    if silent:
        lines.append(Text(f"Did not respond ({len(verdict.responded)}/{verdict.expected} responded)", style="bold"))
        rows = []
        for status, ranks in silent.items():
            hosts = sorted({verdict.views[r].identity.host for r in ranks if r in verdict.views}, key=natural_key)
            on = f"on {', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''}" if hosts else ""
            where_ = " ".join(part for part in (_coords(ranks, verdict).strip(), on) if part)
            rows.append((Text(rank_word(ranks), "bold"), Text.assemble(
                # the state only: why it matters is the suspect's reason, below
                f"{where_}: " if where_ else "", (UNRESPONSIVE_REASONS.get(status, status).split(":")[0], "red"))))
        lines.append(labelled(rows))
    if verdict.suspects:
        lines.append(Text("Suspects", style="bold"))
        rows = []
        for suspect in verdict.suspects:
            colour = {"high": "bold red", "medium": "bold yellow", "low": "dim"}[suspect.confidence]
            rows.append((Text(rank_word(suspect.ranks), "bold red"), Text.assemble(
                _coords(suspect.ranks, verdict), (f"[{suspect.confidence}: {suspect.kind}] ", colour),
                suspect.reason)))
            seen = "; ".join(item["text"] for item in suspect.evidence if item["type"] != "status")
            if seen:
                rows.append(("", Text(f"evidence: {seen}", style="dim")))
        lines.append(labelled(rows))
    if verdict.set_aside:
        lines.append(Text("Set aside (not ranks)", style="bold"))
        groups: dict[tuple[str, str], list] = defaultdict(list)
        for item in verdict.set_aside:
            groups[(item.role, item.why)].append(item)
        for (role, why), items in groups.items():
            pids = ", ".join(f"{a.pid} on {a.host}" for a in items[:4]) + (", …" if len(items) > 4 else "")
            lines.append(hang(Text(f"{len(items)} {role}{'s' if len(items) > 1 else ''}: {why}: pid {pids}",
                                   style="dim")))
    if verdict.hints:
        lines.append(Text("Hints", style="bold"))
        lines.append(labelled([("-", Text(hint, style="yellow")) for hint in verdict.hints], gap=1))
    return Panel(Group(*lines), title="verdict", title_align="left", border_style=style.split()[-1])


def merged_tree(verdict: Verdict) -> Tree:
    colours = {cls.id: class_colour(cls, verdict.roles) for cls in verdict.classes}  # once per class: linear
    colour_of = {rank: colours[cls.id] for cls in verdict.classes for rank in cls.ranks}
    class_of = {rank: cls.id for cls in verdict.classes for rank in cls.ranks}
    root = verdict.tree
    threads = ", every thread" if verdict.all_threads else ""
    tree = Tree(Text(f"merged stacks of {len(root.ranks)} ranks{threads} (outermost frame first)", style="bold"))
    todo = [(child, tree) for child in reversed(root.children)]
    while todo:
        node, parent = todo.pop()
        if node.frame is None:  # ranks without a stack
            parent.add(Text.assemble((f"[{len(node.ranks)}] {folded(node.ranks)}", "bold red"), f"  {node.note}"))
            continue
        frames, last = box_frames(node)
        label = Text.assemble((f"[{len(node.ranks)}] {folded(node.ranks)}", "bold " + colour_of.get(node.ranks[0], "")))
        for line in run_lines(frames, pinned=pinned_frames(verdict.classes, last.ends)):
            label.append("\n" + line)
        if last.ends:
            ids = sorted({class_of[r] for r in last.ends if r in class_of})
            label.append(f"\n» class {', '.join(map(str, ids))}: {rank_word(last.ends)}",
                         style=colour_of.get(last.ends[0], ""))
        branch = parent.add(label)
        todo.extend((child, branch) for child in reversed(last.children))
    return tree


def class_table(cls: RankClass, verdict: Verdict, max_nodes: int) -> Group:
    views = verdict.views
    state = progress_word(cls.progress)
    title = Text.assemble(
        (f"class {cls.id}", "bold " + class_colour(cls, verdict.roles)),
        " · majority" if cls.majority else "",
        f" · {len(cls.ranks)} rank{'s' if len(cls.ranks) != 1 else ''} {folded(cls.ranks)} · ",
        (cls.status if cls.status != "ok" else state, "bold"), f" · {cls.position}")
    table = Table(title=title, title_justify="left", expand=False)
    for column in ("node", "ranks", "coordinates", "pids", "state", "cpu %"):
        table.add_column(column, overflow="fold")
    by_host: dict[str, list[int]] = defaultdict(list)
    for rank in cls.ranks:
        by_host[views[rank].identity.host if rank in views else "?"].append(rank)
    hosts = sorted(by_host, key=natural_key)
    for host in hosts[:max_nodes]:
        ranks = by_host[host]
        found = [views[r] for r in ranks if r in views]
        states = "".join(sorted({v.state for v in found if v.state})) or "-"
        cpus = [v.cpu_percent for v in found if v.cpu_percent is not None]
        pids = ",".join(str(v.identity.pid) for v in found[:6]) + (",…" if len(found) > 6 else "")
        table.add_row(host, folded(ranks, 30), where(ranks, verdict.dims) if verdict.dims else "-", pids or "-",
                      states, f"{sum(cpus) / len(cpus):.0f}" if cpus else "-")
    if len(hosts) > max_nodes:
        table.add_row(f"… {len(hosts) - max_nodes} more nodes", "", "", "", "", "")
    parts = [table]
    if cls.stack:
        parts.append(Text("\n".join(["  stack, innermost frame first:"] + ["    " + line for line in stack_lines(cls.stack)]),
                          style="dim"))
    else:
        first = views.get(cls.ranks[0])
        parts.append(Text(f"  no stack: {first.error if first else cls.status}", style="dim"))
    by_reader: dict[str, list[int]] = defaultdict(list)  # ranks whose stack py-spy did not read (pystack, ...)
    for rank in cls.ranks:
        if rank in views and views[rank].reader not in ("", "py-spy"):
            by_reader[views[rank].reader].append(rank)
    for reader, ranks in sorted(by_reader.items()):
        parts.append(Text(f"  stack by {reader}: {rank_word(ranks)} (py-spy could not)", style="dim"))
    return Group(*parts)


def render_verdict(verdict: Verdict, console: Console, *, max_classes: int = 8, max_nodes: int = 6) -> None:
    console.print(header(verdict))
    console.print(verdict_panel(verdict))
    console.print(merged_tree(verdict))
    console.print()
    for cls in verdict.classes[:max_classes]:
        console.print(class_table(cls, verdict, max_nodes))
        console.print()
    if len(verdict.classes) > max_classes:
        rest = verdict.classes[max_classes:]
        console.print(Text(f"… {len(rest)} more classes ({sum(len(c.ranks) for c in rest)} ranks); "
                           f"--max-classes or --json shows them", style="dim"))
