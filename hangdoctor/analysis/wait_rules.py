"""What a frame means: the table of wait kinds, one row per (framework, file, functions), as data.

Adding a framework is adding rows, in frameworks.py (the built-in ones) or in a file of your own (see
`load_rules` and docs/wait-rules.md), never an `if` in the analysis. A row matches a frame when the frame's file contains `file` and its function
name matches `function` (a regular expression, matched in full against the qualified name, e.g.
`FileBaton.wait`, or against its last dotted part, `wait`). Native rows (`native=True`) match the
native frames of `py-spy --native`, on the function name alone.

Kinds:
    collective, p2p, barrier   a communication call (the op is the outermost op-named frame of the call)
    work-wait                  an asynchronous collective's work handle or future being waited on
    ddp-reducer                backward: DDP's gradient all_reduce (ZeRO's, FSDP's reductions) runs inside it
    store                      the c10d store / rendezvous: every rank must arrive (init, new groups)
    device-sync                waiting for the GPU: with NCCL, often for an earlier asynchronous collective
    lock, dataloader, sleep, io   waits that are local to the process
    launcher                   a parent waiting for its workers (torchrun, spawn, deepspeed, accelerate)
    worker                     a helper process of a rank (a DataLoader worker), not a rank itself

Roles: "wait" rows name what the innermost run of matching frames waits in; "layer" rows are transparent
(wrappers inside a call: loggers, decorators) and name nothing; "work" rows are frames that compute inside a
call (the pickling of torch.distributed's object collectives): a rank in them is not waiting, whatever call they
are in, and the wait is read no further out; "process" rows say what the whole process is
and match anywhere in its main stack (a torchrun agent, a DataLoader worker), up to multiprocessing's
`BaseProcess._bootstrap`: below it, a forked child's stack still holds its parent's frames.
Weight: generic rows (threading, queues, sockets, libc) say little; when a run of frames holds several rows,
the outermost row of the highest weight names the wait (a queue under DataLoader's `_get_data` is a
dataloader wait; a work handle under ZeRO-3's `fetch_sub_module` is its parameter all-gather).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from hangdoctor.clicore.inputs import load_json
from hangdoctor.analysis.call_semantics import ROWS, CallRow
from hangdoctor.analysis.frameworks import RULES
from hangdoctor.analysis.wait_rule import KINDLESS_ROLES, WaitRule

_ENV = "HANGDOCTOR_WAIT_RULES"
MAX_RULES_BYTES = 16 << 20
_FIELDS = ("kind", "framework", "file", "function", "op", "native", "says", "sure", "role", "weight", "idle")


def _rows(path: Path) -> list:
    rows = load_json(path, limit=MAX_RULES_BYTES, what="wait rules")  # InputRefused is a ValueError
    if not isinstance(rows, list):
        raise ValueError(f"{path}: wait rules must be a JSON list of objects")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: row {index} is not an object")
    return rows


_CALL_FIELDS = ("schedule", "file", "function", "peers", "phase", "says", "source", "by_line")


def load_call_rows(path: Path) -> list:
    """A user's rows that say whom a call waits for (call_semantics.CallRow: the rows with a "peers" field).
    Raises ValueError with the file and row named."""
    found = []
    for index, row in enumerate(_rows(path)):
        if "peers" not in row:
            continue
        unknown = set(row) - set(_CALL_FIELDS) - {"comment"}
        if unknown:
            raise ValueError(f"{path}: row {index} has unknown fields {sorted(unknown)} (a row with peers takes: "
                             f"{', '.join(_CALL_FIELDS)})")
        missing = [key for key in ("file", "function") if key not in row]
        if missing:
            raise ValueError(f"{path}: row {index} lacks {', '.join(missing)}")
        try:
            found.append(CallRow(**{"schedule": path.name, **{k: row[k] for k in _CALL_FIELDS if k in row}}))
        except (TypeError, ValueError, re.error) as exc:
            raise ValueError(f"{path}: row {index}: {exc}") from None
    return found


def active_call_rows(extra_files: list[Path] | None = None) -> tuple:
    """The user's call rows (files given, then $HANGDOCTOR_WAIT_RULES) before the built-in ones."""
    files = list(extra_files or []) + [Path(p) for p in os.environ.get(_ENV, "").split(os.pathsep) if p]
    user = []
    for path in files:
        user += load_call_rows(path)
    return tuple(user) + ROWS


def load_rules(path: Path) -> list[WaitRule]:
    """A user's rows: a JSON list of objects with the WaitRule fields (kind, framework, file, function required);
    rows with a "peers" field are call rows (load_call_rows). Raises ValueError with the file and row named."""
    rows = _rows(path)
    rules = []
    for index, row in enumerate(rows):
        if "peers" in row:
            continue
        unknown = set(row) - set(_FIELDS) - {"comment"}
        if unknown:
            raise ValueError(f"{path}: row {index} has unknown fields {sorted(unknown)} (known: {', '.join(_FIELDS)})")
        needed = ("framework", "file", "function") if row.get("role") in KINDLESS_ROLES else \
            ("kind", "framework", "file", "function")  # a layer or work row names no kind
        missing = [key for key in needed if key not in row]
        if missing:
            raise ValueError(f"{path}: row {index} lacks {', '.join(missing)}")
        try:
            rules.append(WaitRule(**{key: row[key] for key in _FIELDS if key in row and key != "kind"},
                                  kind=row.get("kind", ""), origin=str(path)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: row {index}: {exc}") from None
    return rules


def active_rules(extra_files: list[Path] | None = None) -> tuple[WaitRule, ...]:
    """The user's rows (files given, then $HANGDOCTOR_WAIT_RULES, colon-separated) before the built-in ones:
    the first row that matches a frame wins, so a user's row can also override a built-in one."""
    files = list(extra_files or []) + [Path(p) for p in os.environ.get(_ENV, "").split(os.pathsep) if p]
    user: list[WaitRule] = []
    for path in files:
        user += load_rules(path)
    return tuple(user) + RULES
