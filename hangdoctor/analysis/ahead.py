"""Which of two ranks is further along in the program, from their stacks: the side that went on.

When two groups of ranks wait for each other in different calls, the one that is *ahead* has passed the call the
other waits in without joining it (it skipped it, or joined something else), so it is the cause; the one behind
waits in the call it skipped. The stacks are compared at their divergence point: the outermost frame they share
(same function and file) where their lines differ. The later line is ahead, in the same pass through that code
(when both lines sit in one loop's body, the other rank may be a pass further: a guess, not sure).

With the source's structure of that function (`blocks`: the loops and conditionals around each line, read by
the collector on the node), two refinements: a line after a loop is ahead of a line inside it (the rank left the
loop early), and when only one of the two calls sits under a condition inside the loop they share (`if rank ==
0: save()`), the rank in that branch took a path the others did not: it is the one off the common path, whatever
the lines' order. Without the source the answer is less sure, and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.model import Frame, Stack

@dataclass(frozen=True)
class Order:
    ahead: int  # 0: the first stack is ahead; 1: the second
    frame: Frame  # the divergence point, as the first stack holds it
    lines: tuple[int, int]
    sure: bool  # from the source's loops and branches (True), or from the lines alone (False)
    why: str
    left_loop: bool = False  # one rank is past a loop the other is still in: the strongest order there is
    by_counter: bool = False  # read from the loop's counter in the two frames' locals (a pass further)
    rank_branch: bool = False  # the side ahead is in a branch whose test names the rank, which the other is not in:
    # ranks are split there by design, and which side is off the path is for the counts to say (causes.py)
    fetching: bool = False  # left_loop, and the side behind is on the loop's own line (`for batch in loader`):
    # taking one more item from its iterator, which the side ahead did not get


def _outermost_first(stack: Stack) -> list[Frame]:
    return [f for f in reversed(stack) if not f.native]


def divergence(a: Stack, b: Stack) -> tuple[Frame, Frame] | None:
    """The outermost pair of frames that name the same function in the same file at different lines."""
    return next(divergences(a, b), None)


def divergences(a: Stack, b: Stack):
    """Every such pair, outermost first, while the two stacks go on through the same functions below it (two
    branches of an `if` that call the same function: `if rank == 0: schedule.step(x) else: schedule.step()`)."""
    for fa, fb in zip(_outermost_first(a), _outermost_first(b)):
        if fa.name != fb.name or fa.file != fb.file:
            return
        if fa.line != fb.line:
            if not (fa.line and fb.line):
                return
            yield fa, fb


def compare(a: Stack, b: Stack, blocks: dict | None = None, locals_a: tuple | None = None,
            locals_b: tuple | None = None) -> Order | None:
    """Which of the two stacks is ahead, or None when the stacks cannot say. `blocks`: {(file, line): {"loops":
    [[first, last], ...], "conditions": [[first, last], ...], "loop_vars": [[first, last, [names]], ...]}},
    innermost last (collector/source.py); `locals_a`/`locals_b`: py-spy --locals of each stack's frames."""
    for fa, fb in divergences(a, b):
        known_a = blocks.get((fa.file, fa.line)) if blocks else None
        known_b = blocks.get((fb.file, fb.line)) if blocks else None
        if not (known_a and known_b and _alternatives(known_a, fa.line, known_b, fb.line)):
            return _compare_at(a, b, fa, fb, blocks, locals_a, locals_b)
    return None  # no divergence, or only between the branches of an if: the two lines have no order


def _compare_at(a: Stack, b: Stack, fa: Frame, fb: Frame, blocks: dict | None, locals_a: tuple | None,
                locals_b: tuple | None) -> Order:
    where = f"{fa.name} ({fa.file})"
    known_a = blocks.get((fa.file, fa.line)) if blocks else None
    known_b = blocks.get((fb.file, fb.line)) if blocks else None
    la, lb = _position(a, fa, known_a), _position(b, fb, known_b)
    later = 0 if la > lb else 1
    counted = _by_counter(fa, fb, known_a, known_b, _locals_of(a, fa, locals_a), _locals_of(b, fb, locals_b))
    if counted is not None and not _rank_branch(known_a, lb) and not _rank_branch(known_b, la) \
            and not _rank_path(a, fa, blocks) and not _rank_path(b, fb, blocks):
        return counted
    if known_a is None or known_b is None:
        return Order(later, fa, (fa.line, fb.line), False,
                     f"{_say(max(la, lb))} of {where} comes after {_say(min(la, lb))}")
    loops_a, loops_b = set(map(tuple, known_a.get("loops", []))), set(map(tuple, known_b.get("loops", [])))
    only_a, only_b = loops_a - loops_b, loops_b - loops_a
    if _in_a_branch(only_a, known_a, lb) or _in_a_branch(only_b, known_b, la):
        only_a = only_b = set()  # a loop in a branch the other line is not in: the other rank may never have run it
    if only_a and not only_b and all(lb > last for _, last in only_a):
        return Order(1, fa, (fa.line, fb.line), True,
                     f"{_say(lb)} of {where} comes after the loop that {_say(la)} is in", True,
                     rank_branch=_named_rank_branch(known_b, la), fetching=la == max(only_a)[0])
    if only_b and not only_a and all(la > last for _, last in only_b):
        return Order(0, fa, (fa.line, fb.line), True,
                     f"{_say(la)} of {where} comes after the loop that {_say(lb)} is in", True,
                     rank_branch=_named_rank_branch(known_a, lb), fetching=lb == max(only_b)[0])
    shared = loops_a & loops_b
    if shared and not only_a and not only_b:
        loop = max(shared)  # the innermost shared loop starts last
        # the branches inside that loop that hold one line and not the other (`if step % 10 == 0:` around both
        # lines is a branch they share, not a path one side took alone)
        cond_a = [c for c in map(tuple, known_a.get("conditions", [])) if loop[0] < c[0] <= loop[1]
                  and not c[0] <= lb <= c[1] and not _other_arm_taken(known_a, c, lb)]
        cond_b = [c for c in map(tuple, known_b.get("conditions", [])) if loop[0] < c[0] <= loop[1]
                  and not c[0] <= la <= c[1] and not _other_arm_taken(known_b, c, la)]
        # a branch whose known test does not name the rank (`else:` of `if dry:`) may be one every rank takes, in
        # the same pass: the others may be past it, so the line order stands (below)
        if bool(cond_a) != bool(cond_b) and _rank_branch(known_a if cond_a else known_b, lb if cond_a else la):
            off, branch = (0, la) if cond_a else (1, lb)
            return Order(off, fa, (fa.line, fb.line), True, rank_branch=_named_rank_branch(known_a if off == 0 else known_b,
                                                                                lb if off == 0 else la),
                         why=f"{_say(branch)} of {where} is in a branch of an if inside the loop "
                         f"(lines {loop[0]}-{loop[1]}) that the others did not take")
    # a branch on the rank (`if dp_rank == 0: stream()`) that holds one line and not the other, outside any loop
    # they share: the ranks in it took a path the others do not take, by design, whatever the lines' order
    in_a, in_b = _named_rank_branch(known_a, lb), _named_rank_branch(known_b, la)
    if in_a != in_b and not shared:
        off, branch = (0, la) if in_a else (1, lb)
        return Order(off, fa, (fa.line, fb.line), True, f"{_say(branch)} of {where} is in a branch on the rank that the others "
                     f"did not take", rank_branch=True)
    # inside a loop both lines share, the rank at the earlier line may be a pass further: the order is a guess
    return Order(later, fa, (fa.line, fb.line), not shared,
                 f"{_say(max(la, lb))} of {where} comes after {_say(min(la, lb))}"
                 + (f" (both in the loop at lines {max(shared)[0]}-{max(shared)[1]})" if shared else ""))


def _position(stack: Stack, frame: Frame, known: dict | None) -> float:
    """Where in its function the frame stands. A frame calling `__exit__` stands on its `with` line (that is the
    line CPython reports while a with statement's block is left), yet it is past every line of the block: with the
    source, its position is just after the block's last line (`with Join(...): for batch in loader: ...`: a rank
    in `Join.__exit__` has left the loop that the others are still in)."""
    if not known:
        return frame.line
    inner = [f for f in stack if not f.native]
    at = next((i for i, f in enumerate(inner) if f is frame), 0)
    if at == 0 or inner[at - 1].name.rsplit(".", 1)[-1] not in ("__exit__", "__aexit__"):
        return frame.line
    ends = [last for first, last in map(tuple, known.get("withs", [])) if first == frame.line]
    return max(ends) + 0.5 if ends else frame.line


def _say(position: float) -> str:
    """A position of `_position`, in words."""
    return f"line {position}" if position == int(position) else f"the end of the with block (line {int(position)})"


def _other_arm_taken(known: dict, condition: tuple, other_line: int) -> bool:
    """The condition is an `else:` arm (its test is "not ...") and the other line comes after it: the other rank
    took the `if` arm of that statement and went on (`if rank == 0: a() elif last: b() else: c()` dispatches each
    rank to one arm), so being in this arm puts a rank on no path the others skipped."""
    tests = {(t[0], t[1]): t[2] for t in known.get("tests", [])}
    return tests.get(tuple(condition[:2]), "").startswith("not ") and other_line > condition[1]


def _alternatives(known_a: dict, la: int, known_b: dict, lb: int) -> bool:
    """The two lines sit in the two branches of one `if` (`if rank == 0: step(x) else: step()`): one rank took
    one, the other the other; neither line comes after the other in any run, so their order says nothing (the
    functions both branches call may still say, one level down)."""
    def branches(known: dict, line: int, other: int) -> set:
        return {t[2] for t in known.get("tests", []) if t[0] <= line <= t[1] and not t[0] <= other <= t[1]}
    mine, theirs = branches(known_a, la, lb), branches(known_b, lb, la)
    return any(f"not {test}" in theirs for test in mine) or any(f"not {test}" in mine for test in theirs)


def pass_further(a: Stack, b: Stack, blocks: dict | None, locals_a: tuple | None, locals_b: tuple | None) -> int | None:
    """Which stack is a pass further through a loop both are in, by the loop's counter in the locals alone (0: the
    first, 1: the second), whatever branches the lines sit in; None where no counter says."""
    for fa, fb in divergences(a, b):
        known_a = blocks.get((fa.file, fa.line)) if blocks else None
        known_b = blocks.get((fb.file, fb.line)) if blocks else None
        counted = _by_counter(fa, fb, known_a, known_b, _locals_of(a, fa, locals_a), _locals_of(b, fb, locals_b))
        if counted is not None:
            return counted.ahead
    return None


def one_pass(a: Stack, b: Stack, blocks: dict | None, locals_a: tuple | None, locals_b: tuple | None) -> bool:
    """Neither stack can be a pass further than the other: every frame they share, down to the one where they
    part, is known from the source, and each loop around both its lines has a counter (`for step in ...`) that
    the two frames' locals hold alike. A line in no loop runs once per call of its function: both are then in the
    same call made from it (one engine step, not this step and the next)."""
    if not blocks:
        return False
    outer_a = [(i, f) for i, f in reversed(list(enumerate(a))) if not f.native]
    outer_b = [(i, f) for i, f in reversed(list(enumerate(b))) if not f.native]
    for (ia, fa), (ib, fb) in zip(outer_a, outer_b):
        if (fa.name, fa.file) != (fb.name, fb.file):
            return False
        known_a, known_b = blocks.get((fa.file, fa.line)), blocks.get((fb.file, fb.line))
        if known_a is None or known_b is None:
            return False
        shared = [tuple(loop) for loop in known_a.get("loops", []) if loop in known_b.get("loops", [])]
        counters = {(v[0], v[1]): v[2] for v in known_a.get("loop_vars", [])}
        vars_a = locals_a[ia] if locals_a and ia < len(locals_a) else None
        vars_b = locals_b[ib] if locals_b and ib < len(locals_b) else None
        for loop in shared:
            names = counters.get(loop, [])
            if not (vars_a and vars_b and any(_whole(vars_a.get(n)) is not None
                                              and _whole(vars_a.get(n)) == _whole(vars_b.get(n)) for n in names)):
                return False
        if fa.line != fb.line:
            return True
    return False


def _locals_of(stack: Stack, frame: Frame, frame_locals: tuple | None) -> dict | None:
    if not frame_locals:
        return None
    for index, candidate in enumerate(stack):
        if candidate is frame:
            return frame_locals[index] if index < len(frame_locals) else None
    return None


def _by_counter(fa: Frame, fb: Frame, known_a: dict | None, known_b: dict | None, vars_a: dict | None,
                vars_b: dict | None) -> Order | None:
    """A loop both lines are in, whose counter (`for step in ...`) the two frames' locals hold with different
    values: the rank with the higher value is a pass further through that loop, whatever the lines' order (one
    rank skipped a call and went on into the next step). The innermost such loop decides."""
    if not (known_a and known_b and vars_a and vars_b):
        return None
    shared = [tuple(v[:2]) for v in known_a.get("loop_vars", []) if v in known_b.get("loop_vars", [])]
    names = {tuple(v[:2]): v[2] for v in known_a.get("loop_vars", [])}
    for loop in sorted(shared, reverse=True):  # the innermost shared loop starts last
        for name in names[loop]:
            va, vb = _whole(vars_a.get(name)), _whole(vars_b.get(name))
            if va is None or vb is None or va == vb:
                continue
            ahead = 0 if va > vb else 1
            return Order(ahead, fa, (fa.line, fb.line), True, f"its `{name}` is {max(va, vb)} where the others' is "
                         f"{min(va, vb)}: a pass further through the loop at line {loop[0]} of {fa.name} ({fa.file})",
                         True, True)
    return None


def _whole(value) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.lstrip("-").isdigit() else None


def _in_a_branch(loops: set, known: dict, other_line: int) -> bool:
    """Some loop of `loops` sits inside a branch of an `if` (`if rank == 0: for ...: recv()`) that does not hold the
    other line: the other rank may have taken the other branch and never been in that loop, so being past it says
    nothing."""
    branches = [tuple(c) for c in known.get("conditions", [])]
    return any(first <= loop[0] and loop[1] <= last and not first <= other_line <= last
               for loop in loops for first, last in branches)


# an `if` whose test names the rank: a branch only some ranks take by design (`if rank == 0: save()`)
RANK_WORDS = re.compile(r"\b(?:\w+_)?rank(?:_zero)?\b|\bget_\w*rank\b|"  # dp_rank, get_data_parallel_rank, ...
                         r"\b(?:rank|local_rank|global_rank|node_rank|get_rank|rank_zero|is_rank_zero|is_main|is_master|"
                         r"is_main_process|is_local_main_process|is_world_process_zero|is_global_zero|is_local_zero|"
                         r"process_index|local_process_index|is_first_stage|is_last_stage|master_process|main_process)\b")


def _rank_branch(known: dict | None, other_line: int, *, unknown_counts: bool = True) -> bool:
    """The line sits in a branch the other line is not in, and the branch's test names the rank, or (with
    `unknown_counts`) its test is not known (a collector that did not read them): a loop's counter then says
    nothing of who is off the path, since the ranks outside the branch went on by design."""
    if not known:
        return False
    tests = {(t[0], t[1]): t[2] for t in known.get("tests", [])}
    for first, last in map(tuple, known.get("conditions", [])):
        if first <= other_line <= last:
            continue
        test = tests.get((first, last))
        if (test is None and unknown_counts) or (test is not None and RANK_WORDS.search(test)):
            return True
    return False


def _named_rank_branch(known: dict | None, other_line: int) -> bool:
    """The same, for a test that is known and names the rank (`else:` of `if accelerator.is_main_process:`)."""
    return _rank_branch(known, other_line, unknown_counts=False)


def _rank_path(stack: Stack, frame: Frame, blocks: dict | None) -> bool:
    """Some frame called from the divergence point down to the wait sits in a branch whose test names the rank
    (`def save(): if rank == 0: consolidate()`): that side is on a path only some ranks take by design."""
    if not blocks:
        return False
    for inner in stack:
        if inner is frame:
            return False
        known = blocks.get((inner.file, inner.line)) if not inner.native else None
        if known and any(RANK_WORDS.search(t[2]) for t in known.get("tests", [])):
            return True
    return False
