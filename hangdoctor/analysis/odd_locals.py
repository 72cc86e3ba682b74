"""When every rank sits in the same place by the same path, what they carry there may still set one apart.

An NCCL collective whose sizes differ between ranks is enqueued everywhere and never completes: every rank then
waits at the same line (the next `.item()` or `synchronize()`), and the stacks are alike. With `--locals` (attach
reads them), a whole number that one rank holds in one frame where every other rank holds one same value (rank 0's
`numel` 209715200, ranks 1-3's 104857600) sets that rank apart: the same call made with another size, or a counter
a pass off. So does a flag or a process group that one rank holds otherwise (`group: None` on ranks 0-2, a
ProcessGroup of its own on rank 3: the same line's collective on another group; objects compared without their
addresses). Names that differ by design (rank, pid, seed, device, port, a time) are not compared. Evidence, not
proof: low, and only when exactly one rank differs, in one or more names that all point at it.
"""

from __future__ import annotations

import re

from hangdoctor.analysis.places import Place
from hangdoctor.analysis.ranks import STUCK, RankView
from hangdoctor.analysis.suspects import Suspect
from hangdoctor.topology import fold_ranks

_BY_DESIGN = re.compile(r"(?:^|_)(?:rank|ranks|pid|ppid|tid|seed|device|port|addr|address|host|node|gpu|cuda|id|"
                        r"ident|time|now|timestamp|elapsed|start|started|deadline|world|local|fd)(?:_|$)", re.I)
_WHOLE = re.compile(r"-?\d+")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# True/False, None, an object (`<ProcessGroup>` once its address is gone), or a dict of those (a wrapper's
# kwargs: {"group": None} on some ranks, {"group": <ProcessGroup>} on one): no text that varies by design
_ATOM = r"(?:True|False|None|<[\w.]+>)"
_FLAG = re.compile(rf"{_ATOM}|\{{(?:\"\w+\": {_ATOM}(?:, )?)+\}}")


def odd_local_suspects(views: dict[int, RankView], places: list[Place]) -> list[Suspect]:
    answered = [v for v in views.values() if v.responded and v.stack and v.frame_locals]
    if len(answered) < 3 or len([p for p in places if p.ranks]) != 1 or len(answered) < len(places[0].ranks):
        return []
    if not all(v.progress == STUCK or v.wait is not None for v in answered):
        return []  # ranks that move carry whatever they had when sampled
    frames = [[(f.name, f.file, f.line) for f in v.stack] for v in answered]
    if any(stack != frames[0] for stack in frames[1:]):
        return []  # not one path: odd_paths.py reads the parting
    odd: dict[int, list[str]] = {}
    for depth, (name, _, line) in enumerate(frames[0]):
        values: dict[str, dict[int, int]] = {}
        for view in answered:
            known = view.frame_locals[depth] if depth < len(view.frame_locals) else None
            for local, value in (known or {}).items():
                text = str(value).strip()
                if _BY_DESIGN.search(local):
                    continue
                if _WHOLE.fullmatch(text):
                    values.setdefault(local, {})[view.rank] = int(text)
                elif _FLAG.fullmatch(_ADDRESS.sub("", text)):  # a flag, or a group: given (an object) or None
                    values.setdefault(local, {})[view.rank] = _ADDRESS.sub("", text)
        for local, by_rank in values.items():
            if len(by_rank) != len(answered):
                continue
            counts: dict[int, list[int]] = {}
            for rank, value in by_rank.items():
                counts.setdefault(value, []).append(rank)
            if len(counts) != 2:
                continue
            (few, few_ranks), (many, many_ranks) = sorted(counts.items(), key=lambda kv: len(kv[1]))
            if len(few_ranks) == 1 and len(many_ranks) >= 2:
                odd.setdefault(few_ranks[0], []).append(
                    f"`{local}` in {name} (line {line}) is {few} where rank{'s' if len(many_ranks) > 1 else ''} "
                    f"{fold_ranks(sorted(many_ranks))} hold {many}")
    if len(odd) != 1:
        return []  # nobody, or several ranks each odd in something: nothing stands out
    [(rank, found)] = odd.items()
    reason = (f"every rank is in the same place by the same path, but rank {rank}'s {found[0]}"
              f"{f' (and {len(found) - 1} more such)' if len(found) > 1 else ''}: the same call made with another "
              "size, count, flag or process group (on NCCL, a collective whose sizes differ never completes; one on another "
              "group waits for other members), or a counter a pass off")
    return [Suspect([rank], answered[0].stack[0].name, reason, "odd-locals", "low",
                    [{"type": "locals", "text": text} for text in found[:3]])]
