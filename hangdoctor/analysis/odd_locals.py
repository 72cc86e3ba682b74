"""When every rank sits in the same place by the same path, what they carry there may still set one apart.

An NCCL collective whose sizes differ between ranks is enqueued everywhere and never completes: every rank then
waits at the same line (the next `.item()` or `synchronize()`), and the stacks are alike. With `--locals` (attach
reads them), a whole number that one rank holds in one frame where every other rank holds one same value (rank 0's
`numel` 209715200, ranks 1-3's 104857600) sets that rank apart: the same call made with another size, or a counter
a pass off. So does a flag or a process group that one rank holds otherwise (`group: None` on ranks 0-2, a
ProcessGroup of its own on rank 3: the same line's collective on another group; objects compared without their
addresses). Names that differ by design (rank, pid, seed, device, port, a time) are not compared. Evidence, not
proof: low, and only when exactly one rank differs, in one or more names that all point at it.

A loop's counter (the source's `for rotation in ...`, read by the collector) has a direction: where every rank waits
on point-to-point exchanges (a work handle, a send or receive) at the same line and the counter splits them in two,
the ranks a pass further finished the exchanges the others are still in, and wait for them to post the next: the
ranks behind are the ones named, however many they are.
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
_ADDRESS = re.compile(r" at (?:0x[0-9a-fA-F]+|#\d+)")
# True/False, None, an object (`<ProcessGroup>` once its address is gone), or a dict of those (a wrapper's
# kwargs: {"group": None} on some ranks, {"group": <ProcessGroup>} on one): no text that varies by design
_ATOM = r"(?:True|False|None|<[\w.]+>)"
_FLAG = re.compile(rf"{_ATOM}|\{{(?:\"\w+\": {_ATOM}(?:, )?)+\}}")


_EXCHANGES = ("work-wait", "p2p")


def odd_local_suspects(views: dict[int, RankView], places: list[Place], blocks: dict | None = None) -> list[Suspect]:
    answered = [v for v in views.values() if v.responded and v.stack and v.frame_locals]
    if len(answered) < 3 or len([p for p in places if p.ranks]) != 1 or len(answered) < len(places[0].ranks):
        return []
    if not all(v.progress == STUCK or v.wait is not None for v in answered):
        return []  # ranks that move carry whatever they had when sampled
    frames = [[(f.name, f.file, f.line) for f in v.stack] for v in answered]
    if any(stack != frames[0] for stack in frames[1:]):
        return []  # not one path: odd_paths.py reads the parting
    if blocks and all(v.wait is not None and v.wait.kind in _EXCHANGES for v in answered):
        split = _counter_split(frames[0], answered, blocks)
        if split is not None:
            behind, text = split
            return [Suspect(behind, answered[0].stack[0].name, f"every rank waits on point-to-point exchanges at the "
                            f"same line by the same path, but {text}: the ranks a pass further finished the exchanges "
                            f"these are still in and wait for them to post the next", "odd-locals", "low",
                            [{"type": "locals", "text": text}])]
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


def _counter_split(frames: list, answered: list[RankView], blocks: dict) -> tuple[list[int], str] | None:
    """(the ranks behind, the evidence) where a loop counter of a frame every rank shares (innermost frame and loop
    first) holds two values across the ranks."""
    for depth, (name, file, line) in enumerate(frames):
        known = blocks.get((file, line)) or {}
        for first, _last, names in sorted(known.get("loop_vars", []), reverse=True):
            for var in names:
                by_rank = {}
                for view in answered:
                    held = view.frame_locals[depth] if depth < len(view.frame_locals) else None
                    text = str((held or {}).get(var, "")).strip()
                    if _WHOLE.fullmatch(text):
                        by_rank[view.rank] = int(text)
                if len(by_rank) != len(answered) or len(set(by_rank.values())) != 2:
                    continue
                low, high = sorted(set(by_rank.values()))
                behind = sorted(r for r, v in by_rank.items() if v == low)
                ahead = sorted(r for r, v in by_rank.items() if v == high)
                return behind, (f"`{var}` in {name} (line {line}) is {low} on rank{'s' if len(behind) > 1 else ''} "
                                f"{fold_ranks(behind)} where rank{'s' if len(ahead) > 1 else ''} {fold_ranks(ahead)} "
                                f"hold{'' if len(ahead) > 1 else 's'} {high}, the counter of the loop at line {first}")
    return None
