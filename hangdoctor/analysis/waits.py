"""Name what a stack waits in, from the table of wait kinds (wait_rules.py): a collective, a device sync, a lock.

A stack (innermost frame first) is read outwards from its innermost frame. The run of frames that the table
knows (native frames never end it) is the call; the first Python frame outside it is the caller:

    broadcast <- PipelineEngine._aggregate_total_loss (deepspeed/runtime/pipe/engine.py)

Within the run, the outermost row of the highest weight names the kind (a queue under DataLoader's
`_get_data` is a dataloader wait), the surest first: FSDP's reduce-scatter inside backward is a collective, not
the guess that backward waits for DDP's reducer. For communication the op is the outermost op-named frame of the run (the
API the caller used: deepspeed.comm's `broadcast` over torch's), unless the row names its own op (ZeRO-3's
`fetch_sub_module` is an all_gather). A stack the table does not know may still be named by the source text
of its innermost line, when the collector could read it (`h.wait()`, `loss.item()`).

What the whole process is (a torchrun agent, a spawn parent, a DataLoader worker) is read from "process" rows,
anywhere in its main stack: `process_role`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoctor.analysis.frameworks import OP_NAMES, SOURCE_RULES
from hangdoctor.analysis.call_semantics import ROWS
from hangdoctor.analysis.wait_rule import COMM_KINDS, WaitRule
from hangdoctor.analysis.wait_rules import active_call_rows, active_rules
from hangdoctor.model import Frame, Stack
from hangdoctor.topology.comm_calls import GENERIC_COLLECTIVES

_SURE_ORDER = {"high": 0, "medium": 1, "low": 2}
_GENERIC_HOMES = ("torch/distributed/", "deepspeed/comm/")  # where a bare reduce/gather/scatter is that op


@dataclass(frozen=True, slots=True)
class Wait:
    """What a rank waits in, and how we know."""

    op: str  # e.g. "broadcast", "recv", "barrier", "backward", "synchronize", "FileBaton"
    kind: str  # a kind of wait_rules.KINDS
    caller: Frame | None  # first Python frame outside the call
    call: Frame  # the frame that names the op (or the innermost frame the table knows)
    says: str = ""  # what it waits on, in words
    sure: str = "high"  # how sure the frames make us: high, medium, low
    evidence: str = "frame"  # "frame" (a Python frame), "native" (a C/C++ frame) or "source" (the line's text)
    framework: str = ""
    idle: bool = False  # its row is a worker's loop waiting for its next task (wait_rule.WaitRule.idle)

    @property
    def label(self) -> str:
        """Same for every rank in the same call from the same function, whatever the line numbers."""
        if self.caller is None:
            return f"{self.op} ({self.call.file})"
        return f"{self.op} <- {self.caller.name} ({self.caller.file})"

    @property
    def communicates(self) -> bool:
        return self.kind in COMM_KINDS


class WaitTable:
    """The rules, with each frame's first matching row memoised (frames are interned: thousands of ranks share
    a handful of frame objects)."""

    def __init__(self, rules: tuple[WaitRule, ...], call_rows: tuple | None = None):
        self.call_rows = call_rows if call_rows is not None else ROWS  # whom a call waits for (call_semantics.py)
        self.rules = tuple(r for r in rules if r.role != "process")
        self.process_rules = tuple(r for r in rules if r.role == "process")
        self._row: dict[Frame, WaitRule | None] = {}
        self._role: dict[Frame, WaitRule | None] = {}
        self._stack_role: dict[int, tuple[Stack, WaitRule | None]] = {}  # id(stack) -> (stack, role): once per stack

    def row(self, frame: Frame) -> WaitRule | None:
        try:
            return self._row[frame]
        except KeyError:
            found = self._row[frame] = next(
                (r for r in self.rules if r.matches(frame.name, frame.file, frame.native)), None)
            return found

    def process_role(self, frames: Stack) -> WaitRule | None:
        """The "process" row that matches any frame of this stack (launcher, worker), or None."""
        known = self._stack_role.get(id(frames))
        if known is not None and known[0] is frames:
            return known[1]
        found = self._process_role(frames)
        self._stack_role[id(frames)] = (frames, found)  # the stack is kept alive with it: its id stays its own
        return found

    def _process_role(self, frames: Stack) -> WaitRule | None:
        for frame in frames:
            if frame.file.startswith(("multiprocessing/process.py", "multiprocess/process.py")) \
                    and "_bootstrap" in frame.name:
                return None  # a forked child: what lies below are its parent's frames
            try:
                found = self._role[frame]
            except KeyError:
                found = self._role[frame] = next(
                    (r for r in self.process_rules if r.matches(frame.name, frame.file, frame.native)), None)
            if found is not None:
                return found
        return None

    def classify(self, frames: Stack, source: dict | None = None) -> Wait | None:
        """The wait this stack is in, or None. `source`: {(file, line): text} of lines the collector read."""
        voters: list[tuple[int, WaitRule]] = []
        end = -1  # index of the outermost Python frame of the call
        for index, frame in enumerate(frames):
            rule = self.row(frame)
            if frame.native:
                if rule is not None and rule.role == "wait":
                    voters.append((index, rule))
                continue
            if rule is not None and rule.role == "work":
                break  # computing inside the call (pickling its objects): not waiting in it
            if rule is None:
                if _decorator_between(frames, index, self.row):
                    continue  # a decorator's wrapper inside the call (typing_extensions' @deprecated): transparent
                break
            end = index
            if rule.role == "wait":
                voters.append((index, rule))
        if not voters:
            return _from_source(frames, source)
        caller = next((f for f in frames[end + 1:] if not f.native), None)
        weight = max(rule.weight for _, rule in voters)
        strongest = [(i, r) for i, r in voters if r.weight == weight]
        surest = min(_SURE_ORDER[r.sure] for _, r in strongest)  # a frame that is the collective outranks a guess
        index, rule = max(((i, r) for i, r in strongest if _SURE_ORDER[r.sure] == surest), key=lambda item: item[0])
        sure = min((r.sure for _, r in voters if r.kind == rule.kind), key=_SURE_ORDER.__getitem__)
        call, op, kind = frames[index], rule.op, rule.kind
        if not op and rule.kind in COMM_KINDS:
            named = [i for i in range(end + 1) if not frames[i].native and _base(frames[i].name) in OP_NAMES]
            # reduce, gather and scatter name those rooted ops only in torch.distributed and deepspeed.comm: a
            # framework's `gather` elsewhere is whatever it calls (accelerate's is an all_gather)
            named = [i for i in named if _base(frames[i].name) not in GENERIC_COLLECTIVES
                     or frames[i].file.startswith(_GENERIC_HOMES)] or named
            if named:
                call = frames[named[-1]]
                op = _base(call.name)
        if kind == "collective" and not rule.op and any(r.kind == "barrier" for _, r in voters):
            kind = "barrier"  # a framework's sync (Lightning's reduce) that blocks in a barrier
        op = op or (_base(call.name) if _base(call.name) in OP_NAMES else rule.kind)
        return Wait(op=op, kind=kind, caller=caller, call=call, says=rule.says, sure=sure,
                    evidence="native" if call.native else "frame", framework=rule.framework,
                    idle=rule.idle)


def _from_source(frames: Stack, source: dict | None) -> Wait | None:
    if not source:
        return None
    first = next((f for f in frames if not f.native), None)
    text = source.get((first.file, first.line)) if first is not None else None
    if not text:
        return None
    for kind, pattern, op, says in SOURCE_RULES:
        if re.search(pattern, text):  # the line itself makes the C call: it is the caller
            return Wait(op=op, kind=kind, caller=first, call=first, says=f"{says}: `{text.strip()[:80]}`",
                        sure="medium", evidence="source", framework="source line")
    return None


_WRAPPER_NAMES = frozenset({"wrapper", "wrapped", "wrapped_fn", "wrapper_function", "_wrapper", "inner", "decorated",
                            "decorate_context", "_fn", "wrapped_func"})


def _decorator_between(frames: Stack, index: int, row) -> bool:
    """frames[index], a frame the table does not know, is a decorator's wrapper closure (`f.<locals>.wrapper`) and
    the next Python frame out is one the table does know: the call goes on through it, whichever library
    decorated it."""
    name = frames[index].name
    if "<locals>." not in name or _base(name) not in _WRAPPER_NAMES:
        return False
    outer = next((f for f in frames[index + 1:] if not f.native), None)
    return outer is not None and row(outer) is not None


def _base(name: str) -> str:
    """"TorchBackend.broadcast" -> "broadcast"; "_exception_logger.<locals>.wrapper" -> "wrapper"."""
    return name.rsplit(".", 1)[-1]


def innermost_python(frames: Stack) -> Frame | None:
    return next((f for f in frames if not f.native), frames[0] if frames else None)


_default: WaitTable | None = None


def default_table() -> WaitTable:
    """The built-in rows, after the user's from $HANGDOCTOR_WAIT_RULES (read once)."""
    global _default
    if _default is None:
        _default = WaitTable(active_rules(), active_call_rows())
    return _default


def find_wait(frames: Stack, table: WaitTable | None = None) -> Wait | None:
    """The wait this stack is in, by the default table."""
    return (table or default_table()).classify(frames)
