"""The source around the lines each thread stands on, read on the node where the files are. Stdlib only.

py-spy names a Python frame and its line, but not what the line calls: a rank blocked in `handle.wait()`,
`loss.item()` or `time.sleep(5)` (C functions, no Python frame of their own) shows only its caller's line.
That line's text tells the wait apart; the analysis reads it through the wait table's source rules. The lines
of the outer frames say a schedule's phase (`desc="fwd_recv"`), and the loops and `if` branches around them say
which of two ranks is further along (`frame_blocks`).
"""

from __future__ import annotations

import linecache


def innermost_lines(infos: list) -> dict:
    """{"short_file:line": text} for the innermost Python frame of every thread of every sample (py-spy JSON
    only: its frames carry the absolute file name). Files that cannot be read are left out."""
    lines: dict = {}
    for info in infos:
        for sample in info.get("samples", []):
            for thread in sample.get("pyspy_json") or []:
                frames = thread.get("frames") if isinstance(thread, dict) else None
                frame = next((f for f in frames or [] if isinstance(f, dict) and not f.get("module")
                              and str(f.get("filename", "")).endswith(".py")), None)
                if frame is not None:
                    _read_line(frame, lines)
    return lines


def _read_line(frame: dict, lines: dict) -> None:
    """The frame's source line into `lines` under "short_file:line", unless it is there or cannot be read."""
    key = f"{frame.get('short_filename') or frame.get('filename')}:{frame.get('line')}"
    if key not in lines:
        text = linecache.getline(str(frame["filename"]), int(frame.get("line") or 0)).strip()
        if text:
            lines[key] = text[:200]


MAX_LINES = 4000  # source lines sent per node: every Python frame of every main thread, at most this many
BLOCKS_BUDGET_S = 0.5  # seconds spent parsing files for their loops and conditions, outermost frames first


def frame_lines(infos: list) -> dict:
    """{"short_file:line": text} for every Python frame of every sample's threads, innermost frames first (they
    name the wait), then outwards (a schedule's line says its phase), up to MAX_LINES."""
    lines = innermost_lines(infos)
    for frame in _frames(infos, outermost_first=False):
        if len(lines) >= MAX_LINES:
            break
        _read_line(frame, lines)
    return lines


def frame_blocks(infos: list) -> dict:
    """{"short_file:line": {"loops": [[first, last], ...], "conditions": [...], "withs": [...]}}: the loops, the
    branches of `if` statements and the `with` statements that enclose each line of a Python frame (innermost
    last), so that the analysis can tell which of two ranks is further along (analysis/ahead.py), which rank
    holds the lock of a `with` that others wait to enter (analysis/waitgraph.py), and which lock a thread holds
    already (`with_items`: what each `with` enters, as written; analysis/self_lock.py). Files are parsed once each, from
    the outermost frames in (training loops live there), within BLOCKS_BUDGET_S; unreadable files are left out."""
    import ast
    import time

    started = time.monotonic()
    parsed: dict[str, list | None] = {}
    blocks: dict = {}
    for frame in _frames(infos, outermost_first=True):
        path, line = str(frame["filename"]), int(frame.get("line") or 0)
        key = f"{frame.get('short_filename') or path}:{line}"
        if key in blocks or line <= 0:
            continue
        if path not in parsed:
            if time.monotonic() - started > BLOCKS_BUDGET_S:
                continue  # no more parsing; frames of files already parsed still get their blocks
            parsed[path] = _ranges(path, ast)
        ranges = parsed[path]
        if ranges is None:
            continue
        blocks[key] = blocks_at(ranges, line)
    return blocks


def blocks_at(ranges: list, line: int) -> dict:
    """The loops, branches and `with` statements of a file (`ranges_of`) that enclose one line, innermost last."""
    blocks = {kind: sorted([first, last] for k, first, last, *_ in ranges if k == kind and first <= line <= last)
              for kind in ("loops", "conditions", "withs")}
    blocks["loop_vars"] = sorted([first, last, list(names)] for k, first, last, *rest in ranges
                                 if k == "loop_vars" and first <= line <= last for names in rest)
    blocks["tests"] = sorted([first, last, text] for k, first, last, *rest in ranges
                             if k == "tests" and first <= line <= last for text in rest)
    blocks["with_items"] = sorted([first, last, list(items)] for k, first, last, *rest in ranges
                                  if k == "with_items" and first <= line <= last for items in rest)
    return blocks


def ranges_of(source: bytes) -> list | None:
    """`_ranges` of a file's bytes already read, None where they do not parse."""
    import ast

    return _ranges("", ast, source)


def _ranges(path: str, ast, source: bytes | None = None) -> list | None:
    """Every loop's lines, every branch of every if statement and every `with` statement (from its own line: a
    rank waiting to enter it is at that line) in a file, as (kind, first, last); each for-loop also as
    ("loop_vars", first, last, its target names), each `with` also as ("with_items", first, last, what it enters
    as written), each branch as ("tests", first, last, its `if`'s test as
    written, "not ..." for an else, or for what follows an `if` that ends in continue, break, return or raise);
    each function as ("defs", first, last, its name)."""
    try:
        if source is None:
            with open(path, "rb") as handle:
                source = handle.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(("defs", node.lineno, node.end_lineno or node.lineno, node.name))
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            found.append(("loops", node.lineno, node.end_lineno or node.lineno))
            if isinstance(node, (ast.For, ast.AsyncFor)):  # its counter: `for step in ...`, `for i, batch in ...`
                names = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
                found.append(("loop_vars", node.lineno, node.end_lineno or node.lineno, tuple(names)))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            found.append(("withs", node.lineno, node.end_lineno or node.lineno))
            if hasattr(ast, "unparse"):  # what it enters, as written (`self._lock`): a thread's own held locks
                found.append(("with_items", node.lineno, node.end_lineno or node.lineno,
                              tuple(ast.unparse(item.context_expr)[:200] for item in node.items)))
        elif isinstance(node, ast.If):
            test = ast.unparse(node.test) if hasattr(ast, "unparse") else ""  # 3.9+; else unknown: taken as rank-wise
            for index, branch in enumerate((node.body, node.orelse)):
                if branch:
                    last = branch[-1].end_lineno or branch[-1].lineno
                    found.append(("conditions", branch[0].lineno, last))
                    found.append(("tests", branch[0].lineno, last, ("not " if index else "") + test[:200]))
        for body in (getattr(node, name, None) for name in ("body", "orelse", "finalbody")):
            if isinstance(body, list):
                found.extend(_implied_else(body, ast))
    return found


_EXITS = ("Continue", "Break", "Return", "Raise")


def _implied_else(body: list, ast) -> list:
    """`if last: ...; continue` with no else: the statements after it in the same block run only where the test
    failed, an else in all but name (a pipeline's last stage handled first, then every other stage's path)."""
    found = []
    for index, statement in enumerate(body[:-1]):
        if isinstance(statement, ast.If) and not statement.orelse and type(statement.body[-1]).__name__ in _EXITS:
            rest = body[index + 1:]
            first, last = rest[0].lineno, rest[-1].end_lineno or rest[-1].lineno
            test = ast.unparse(statement.test) if hasattr(ast, "unparse") else ""
            found.append(("conditions", first, last))
            found.append(("tests", first, last, "not " + test[:200]))
    return found


def _frames(infos: list, *, outermost_first: bool):
    """The Python frames (py-spy JSON, with absolute file names) of every thread of every sample, once each: the
    main threads' first (where ranks part), then the others'."""
    threads = [(info, t) for info in infos for sample in info.get("samples", []) for t in sample.get("pyspy_json") or []
               if isinstance(t, dict)]
    main = [t for info, t in threads if t.get("os_thread_id") == info.get("pid") or t.get("thread_name") == "MainThread"]
    chosen = {id(t) for t in main}
    seen = set()
    for thread in main + [t for _, t in threads if id(t) not in chosen]:
        frames = [f for f in thread.get("frames") or [] if isinstance(f, dict) and not f.get("module")
                  and str(f.get("filename", "")).endswith(".py")]
        for frame in reversed(frames) if outermost_first else frames:
            key = (frame.get("filename"), frame.get("line"))
            if key not in seen:
                seen.add(key)
                yield frame
