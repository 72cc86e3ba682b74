"""One view per rank: its final status, the stack it sits in, the call it waits in, and whether it moved.

Across repeated samples (`--samples K --interval S`) a rank whose main-thread stack never changes is
"stuck"; one whose stack changed is "progressing" (slow, not hung). With a single answered sample it is
"unknown". The stack shown for a rank is its last answered one (else the last one read at all).
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoctor.analysis.waits import Wait, find_wait, innermost_python
from hangdoctor.model import OK, Frame, RankIdentity, RankRecord, Sample, Stack

STUCK, PROGRESSING, UNKNOWN = "stuck", "progressing", "unknown"


@dataclass(slots=True)
class RankView:
    identity: RankIdentity
    status: str  # the last sample's status
    stack: Stack  # main thread, innermost first; () when nothing could be read
    wait: Wait | None
    progress: str  # STUCK, PROGRESSING or UNKNOWN
    state: str = ""
    cpu_percent: float | None = None
    error: str = ""
    answered: int = 0  # samples that answered
    samples: int = 0

    @property
    def rank(self) -> int:
        return self.identity.rank

    @property
    def responded(self) -> bool:
        return self.status == OK

    @property
    def position(self) -> str:
        """Where the rank is, coarsely enough that peers in the same call share it."""
        if self.wait is not None:
            return self.wait.label
        frame = innermost_python(self.stack)
        return f"outside any collective, in {frame.name} ({frame.file})" if frame else "no stack"

    @property
    def innermost(self) -> Frame | None:
        return innermost_python(self.stack)


def main_stack(sample: Sample, pid: int) -> Stack:
    thread = sample.main_thread(pid)
    return thread.frames if thread is not None else ()


def progress_of(stacks: list[Stack]) -> str:
    if len(stacks) < 2:
        return UNKNOWN
    first = stacks[0]
    return STUCK if all(s is first or s == first for s in stacks[1:]) else PROGRESSING


def view_rank(record: RankRecord, waits: dict[int, Wait | None] | None = None) -> RankView:
    """`waits` memoises find_wait per interned stack (id -> Wait), shared across ranks."""
    pid = record.identity.pid
    samples = record.samples
    answered = [s for s in samples if s.status == OK]
    stacks = [main_stack(s, pid) for s in answered]
    last = samples[-1] if samples else None
    if stacks:
        stack = stacks[-1]
    else:
        readable = [s for s in samples if s.threads]
        stack = main_stack(readable[-1], pid) if readable else ()
    cpus = [s.cpu_percent for s in samples if s.cpu_percent is not None]
    return RankView(
        identity=record.identity, status=last.status if last else "missing", stack=stack,
        wait=_wait(stack, waits), progress=progress_of(stacks),
        state=last.state if last else "", cpu_percent=round(sum(cpus) / len(cpus), 1) if cpus else None,
        error=last.error if last else "", answered=len(answered), samples=len(samples),
    )


def _wait(stack: Stack, memo: dict[int, Wait | None] | None) -> Wait | None:
    if not stack:
        return None
    if memo is None:
        return find_wait(stack)
    key = id(stack)
    if key not in memo:
        memo[key] = find_wait(stack)
    return memo[key]
