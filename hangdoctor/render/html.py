"""A picture of the merged tree, as STAT draws its graphs: an SVG, alone or in a self-contained HTML page.

Each box is a run of frames that the same ranks share (a chain without branches), headed by its rank count
and folded rank set; boxes where stacks end are coloured by the role of their ranks (render/roles.py: suspect,
unresponsive, progressing, waiting), with a legend; boxes of shared frames are grey. Frame text is wrapped,
never cut (line numbers included); hovering a box shows all its frames. The HTML page adds the verdict and a
table per class (node, ranks, coordinates, pids, state, CPU): one file to attach to a bug report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from hangdoctor.analysis.classes import progress_word
from hangdoctor.analysis.suspects import UNRESPONSIVE_REASONS
from hangdoctor.analysis.tree import TreeNode
from hangdoctor.analysis.verdict import Verdict
from hangdoctor.identity import natural_key
from hangdoctor.render.roles import ROLES, colour, first_role
from hangdoctor.render.text import box_frames, frame_text, pinned_frames, run_lines, stack_lines
from hangdoctor.topology import describe_ranks, fold_ranks

BOX_W, LINE_H, PAD, GAP_X, GAP_Y, CHARS = 430, 15, 6, 24, 42, 64
SHARED = "#555555"  # a box whose frames continue in its children: no stack ends there
MAX_TABLE_NODES = 200  # rows per class table; the JSON report has every rank


@dataclass
class Box:
    title: str
    lines: list[str]
    tooltip: str
    colour: str
    count: int
    children: list["Box"] = field(default_factory=list)
    x: float = 0.0
    y: float = 0.0

    @property
    def height(self) -> float:
        return PAD * 2 + LINE_H * (1 + len(self.lines))


def _wrap(text: str) -> list[str]:
    """Lines of at most CHARS characters, cut at spaces where it can, continuations indented: nothing is lost."""
    lines = []
    while len(text) > CHARS:
        cut = text.rfind(" ", CHARS // 2, CHARS)
        cut = cut if cut > 0 else CHARS
        lines.append(text[:cut])
        text = "    " + text[cut:].lstrip()
    return lines + [text]


def _title(ranks: list[int]) -> str:
    text = f"[{len(ranks)}] {fold_ranks(ranks)}"
    return text if len(text) <= CHARS else text[: CHARS - 1] + "…"  # the whole set is in the tooltip


def build_boxes(verdict: Verdict) -> Box:
    roles = verdict.roles
    class_of = {rank: c for c in verdict.classes for rank in c.ranks}
    threads = ", every thread" if verdict.all_threads else ""
    root = Box(f"{len(verdict.tree.ranks)} ranks{threads}", [], "", SHARED, len(verdict.tree.ranks))
    todo: list[tuple[TreeNode, Box]] = [(child, root) for child in verdict.tree.children]
    while todo:
        node, parent = todo.pop(0)
        if node.frame is None:
            status = node.note.rsplit(": ", 1)[-1]
            box = Box(_title(node.ranks), _wrap(node.note), f"ranks {fold_ranks(node.ranks)}\n"
                      + UNRESPONSIVE_REASONS.get(status, node.note), colour(first_role(node.ranks, roles)),
                      len(node.ranks))
            parent.children.append(box)
            continue
        frames, last = box_frames(node)
        pins = pinned_frames(verdict.classes, last.ends)
        lines = [part for line in run_lines(frames, keep_head=1, keep_tail=4, limit=200, pinned=pins)
                 for part in _wrap(line)]
        for cls in sorted({class_of[r].id: class_of[r] for r in last.ends if r in class_of}.values(), key=lambda c: c.id):
            state = cls.status if cls.status != "ok" else progress_word(cls.progress)
            lines += _wrap(f"» class {cls.id}: {state}" + (f", {cls.wait.op}" if cls.wait else ""))
        tooltip = f"ranks {fold_ranks(node.ranks)}\n" + "\n".join(frame_text(f, 200) for f in frames)
        box = Box(_title(node.ranks), lines, tooltip, colour(first_role(last.ends, roles)) if last.ends else SHARED,
                  len(node.ranks))
        parent.children.append(box)
        todo.extend((child, box) for child in last.children)
    return root


def layout(root: Box) -> tuple[float, float]:
    """Leaves side by side, parents centred over their children, rows as tall as their tallest box."""
    depth_of: dict[int, int] = {}
    order: list[Box] = []
    todo = [(root, 0)]
    while todo:
        box, depth = todo.pop()
        depth_of[id(box)] = depth
        order.append(box)
        todo.extend((child, depth + 1) for child in reversed(box.children))
    rows: dict[int, float] = {}
    for box in order:
        rows[depth_of[id(box)]] = max(rows.get(depth_of[id(box)], 0.0), box.height)
    tops, y = {}, 10.0 + LEGEND_H * len(ROLES_SHOWN)
    for depth in sorted(rows):
        tops[depth] = y
        y += rows[depth] + GAP_Y
    next_x = 10.0
    for box in order:  # pre-order: leaves come left to right
        box.y = tops[depth_of[id(box)]]
        if not box.children:
            box.x = next_x
            next_x += BOX_W + GAP_X
    for box in reversed(order):  # children before their parent
        if box.children:
            box.x = (box.children[0].x + box.children[-1].x) / 2
    return next_x, y


LEGEND_H = 16
ROLES_SHOWN = [*ROLES, "shared"]


def legend_svg() -> list[str]:
    """The key to the colours, at the top left of the picture (`class="legend"`)."""
    items = [(role, *ROLES[role]) for role in ROLES] + [("shared", SHARED, "frames shared by the ranks below")]
    parts = ['<g class="legend">']
    for i, (role, fill, text) in enumerate(items):
        y = 10 + i * LEGEND_H
        parts.append(f'<rect class="legend-{role}" x="10" y="{y}" width="12" height="12" fill="{fill}"/>'
                     f'<text x="28" y="{y + 10}">{escape(text)}</text>')
    parts.append("</g>")
    return parts


def render_svg(verdict: Verdict) -> str:
    root = build_boxes(verdict)
    width, height = layout(root)
    width = max(width, 520.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="monospace" font-size="11">', *legend_svg()]
    todo = [root]
    while todo:
        box = todo.pop()
        for child in box.children:
            stroke = max(1.0, min(8.0, 1 + child.count ** 0.5 / 2))
            parts.append(f'<line x1="{box.x + BOX_W / 2:.0f}" y1="{box.y + box.height:.0f}" '
                         f'x2="{child.x + BOX_W / 2:.0f}" y2="{child.y:.0f}" stroke="#999" stroke-width="{stroke:.1f}"/>')
            todo.append(child)
        parts.append(_box_svg(box))
    parts.append("</svg>")
    return "\n".join(parts)


def _box_svg(box: Box) -> str:
    out = [f'<g><title>{escape(box.title)}\n{escape(box.tooltip)}</title>',
           f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="{BOX_W}" height="{box.height:.0f}" rx="5" '
           f'fill="white" stroke="{box.colour}" stroke-width="2"/>',
           f'<rect x="{box.x:.0f}" y="{box.y:.0f}" width="{BOX_W}" height="{LINE_H + PAD:.0f}" rx="5" '
           f'fill="{box.colour}"/>',
           f'<text x="{box.x + PAD:.0f}" y="{box.y + PAD + 10:.0f}" fill="white" font-weight="bold">'
           f'{escape(box.title)}</text>']
    for i, line in enumerate(box.lines):
        out.append(f'<text x="{box.x + PAD:.0f}" y="{box.y + PAD + 10 + LINE_H * (i + 1):.0f}">{escape(line)}</text>')
    out.append("</g>")
    return "".join(out)


def _node_table(ranks: list[int], verdict: Verdict) -> str:
    """One row per node, as the terminal's class tables: node, ranks, coordinates, pids, state, CPU."""
    by_host: dict[str, list[int]] = {}
    for rank in ranks:
        view = verdict.views.get(rank)
        by_host.setdefault(view.identity.host if view else "?", []).append(rank)
    rows = []
    hosts = sorted(by_host, key=natural_key)
    for host in hosts[:MAX_TABLE_NODES]:
        found = [verdict.views[r] for r in by_host[host] if r in verdict.views]
        states = "".join(sorted({v.state for v in found if v.state})) or "-"
        cpus = [v.cpu_percent for v in found if v.cpu_percent is not None]
        cells = [host, fold_ranks(by_host[host]), describe_ranks(by_host[host], verdict.dims) if verdict.dims else "-",
                 ",".join(str(v.identity.pid) for v in found) or "-", states,
                 f"{sum(cpus) / len(cpus):.0f}" if cpus else "-"]
        rows.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
    if len(hosts) > MAX_TABLE_NODES:
        rows.append(f'<tr><td colspan="6">… {len(hosts) - MAX_TABLE_NODES} more nodes (report.json has every rank)'
                    f'</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("node", "ranks", "coordinates", "pids", "state", "cpu %"))
    return f'<table class="ranks"><tr>{head}</tr>{"".join(rows)}</table>'


def _li(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>" if items else ""


def render_html(verdict: Verdict) -> str:
    places = [f"<b>{escape(fold_ranks(p.ranks))}</b> {escape(p.where)}: {escape(p.position)} "
              f"<i>[{escape(progress_word(p.progress))}]</i>" for p in verdict.places]
    silent = dict(verdict.unresponsive, **({"missing": verdict.missing} if verdict.missing else {}))
    quiet = [f"<b>{escape(fold_ranks(r))}</b> {escape(s)}: {escape(UNRESPONSIVE_REASONS.get(s, s))}"
             for s, r in silent.items()]
    suspects = [f"<b>{escape(fold_ranks(s.ranks))}</b> {escape(s.where)}: {escape(s.reason)}" for s in verdict.suspects]
    roles = verdict.roles
    classes = []
    for c in verdict.classes:
        role = first_role(c.ranks, roles)
        stack = "\n".join(stack_lines(c.stack, innermost=40)) if c.stack else f"(no stack: {c.status})"
        classes.append(
            f'<h3 style="color:{colour(role)}">class {c.id}: {len(c.ranks)} rank{"s" if len(c.ranks) != 1 else ""} '
            f'{escape(fold_ranks(c.ranks))} · {escape(role)}</h3><p>{escape(c.where)} · {escape(c.status)} · '
            f'{escape(progress_word(c.progress))}</p>{_node_table(c.ranks, verdict)}'
            f'<p>stack, innermost frame first:</p><pre>{escape(stack)}</pre>')
    headline_colour = {True: "#b30000", False: "#2a7a2a", None: "#a06000"}[verdict.hung]
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>hangdoctor: {escape(verdict.headline)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} pre{{background:#f6f6f6;padding:.6em;overflow:auto}}
.tree{{overflow:auto;border:1px solid #ddd}} h2{{color:{headline_colour}}}
table{{border-collapse:collapse;font-size:90%}} td,th{{border:1px solid #ddd;padding:2px 6px;text-align:left}}</style></head><body>
<h1>hangdoctor</h1><p>{escape(verdict.source)} · {escape(verdict.dims.describe() if verdict.dims else "topology unknown")}
 · {verdict.samples} sample(s)</p>
<h2>{escape(verdict.headline)}</h2>
<h3>Who is where</h3>{_li(places)}
{"<h3>Did not respond</h3>" + _li(quiet) if quiet else ""}
{"<h3>Suspects</h3>" + _li(suspects) if suspects else ""}
{"<h3>Hints</h3>" + _li([escape(h) for h in verdict.hints]) if verdict.hints else ""}
{"<h3>Warnings</h3>" + _li([escape(w) for w in verdict.warnings]) if verdict.warnings else ""}
<h3>Merged stacks</h3><div class="tree">{render_svg(verdict)}</div>
<h3>Classes</h3>{"".join(classes)}
</body></html>
"""
