"""A picture of the merged tree, as STAT draws its graphs: an SVG, alone or in a self-contained HTML page.

Each box is a run of frames that the same ranks share (a chain without branches), headed by its rank count
and folded rank set; boxes where stacks end are coloured by their class. Hovering a box shows all its
frames. The HTML page adds the verdict and the class tables: one file to attach to a bug report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from hangdoctor.analysis.classes import progress_word
from hangdoctor.analysis.suspects import UNRESPONSIVE_REASONS
from hangdoctor.analysis.tree import TreeNode
from hangdoctor.analysis.verdict import Verdict
from hangdoctor.render.text import (PALETTE, STATUS_COLOURS, box_frames, frame_text, pinned_frames, run_lines,
                                    stack_lines)
from topology import fold_ranks

BOX_W, LINE_H, PAD, GAP_X, GAP_Y, CHARS = 430, 15, 6, 24, 42, 64


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


def _clip(text: str) -> str:
    return text if len(text) <= CHARS else text[: CHARS - 1] + "…"


def _ranks(ranks: list[int]) -> str:
    return _clip(f"[{len(ranks)}] {fold_ranks(ranks)}")


def build_boxes(verdict: Verdict) -> Box:
    colour_of = {rank: PALETTE[(c.id - 1) % len(PALETTE)] for c in verdict.classes for rank in c.ranks}
    class_of = {rank: c for c in verdict.classes for rank in c.ranks}
    threads = ", every thread" if verdict.all_threads else ""
    root = Box(f"{len(verdict.tree.ranks)} ranks{threads}", [], "", "#444444", len(verdict.tree.ranks))
    todo: list[tuple[TreeNode, Box]] = [(child, root) for child in verdict.tree.children]
    while todo:
        node, parent = todo.pop(0)
        if node.frame is None:
            status = node.note.rsplit(": ", 1)[-1]
            box = Box(_ranks(node.ranks), [_clip(node.note)], UNRESPONSIVE_REASONS.get(status, node.note),
                      STATUS_COLOURS.get(status, "#b30000"), len(node.ranks))
            parent.children.append(box)
            continue
        frames, last = box_frames(node)
        colour = colour_of.get(last.ends[0], "#888888") if last.ends else "#888888"
        pins = pinned_frames(verdict.classes, last.ends)
        lines = [_clip(line) for line in run_lines(frames, keep_head=1, keep_tail=4, limit=CHARS, pinned=pins)]
        for cls in sorted({class_of[r].id: class_of[r] for r in last.ends if r in class_of}.values(), key=lambda c: c.id):
            state = cls.status if cls.status != "ok" else progress_word(cls.progress)
            lines.append(_clip(f"» class {cls.id}: {state}" + (f", {cls.wait.op}" if cls.wait else "")))
        tooltip = "\n".join(frame_text(f, 200) for f in frames)
        box = Box(_ranks(node.ranks), lines, tooltip, colour, len(node.ranks))
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
    tops, y = {}, 10.0
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


def render_svg(verdict: Verdict) -> str:
    root = build_boxes(verdict)
    width, height = layout(root)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="monospace" font-size="11">']
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


def _li(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>" if items else ""


def render_html(verdict: Verdict) -> str:
    places = [f"<b>{escape(fold_ranks(p.ranks))}</b> {escape(p.where)}: {escape(p.position)} "
              f"<i>[{escape(progress_word(p.progress))}]</i>" for p in verdict.places]
    silent = dict(verdict.unresponsive, **({"missing": verdict.missing} if verdict.missing else {}))
    quiet = [f"<b>{escape(fold_ranks(r))}</b> {escape(s)}: {escape(UNRESPONSIVE_REASONS.get(s, s))}"
             for s, r in silent.items()]
    suspects = [f"<b>{escape(fold_ranks(s.ranks))}</b> {escape(s.where)}: {escape(s.reason)}" for s in verdict.suspects]
    classes = []
    for c in verdict.classes:
        colour = PALETTE[(c.id - 1) % len(PALETTE)]
        stack = "\n".join(stack_lines(c.stack, innermost=40)) if c.stack else f"(no stack: {c.status})"
        classes.append(
            f'<h3 style="color:{colour}">class {c.id}{" (majority)" if c.majority else ""}: {len(c.ranks)} ranks '
            f'{escape(fold_ranks(c.ranks))}</h3><p>{escape(c.where)} · {escape(c.status)} · '
            f'{escape(progress_word(c.progress))} · nodes {escape(", ".join(c.hosts[:8]))}'
            f'{" …" if len(c.hosts) > 8 else ""}</p><pre>{escape(stack)}</pre>')
    colour = {True: "#b30000", False: "#2a7a2a", None: "#a06000"}[verdict.hung]
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>hangdoctor: {escape(verdict.headline)}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} pre{{background:#f6f6f6;padding:.6em;overflow:auto}}
.tree{{overflow:auto;border:1px solid #ddd}} h2{{color:{colour}}}</style></head><body>
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
