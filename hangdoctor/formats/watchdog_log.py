"""NCCL's watchdog lines in a log -> each rank's last collective per process group, as Flight Recorder records.

When a collective times out, torch's NCCL watchdog logs, per rank and process group, how far the rank got:
    [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 9 PG status: last
        enqueued work: 9, last completed work: 8
    [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal ... Last enqueued NCCL work: 8, last completed
        NCCL work: 8.
    [PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.
    [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, ...)
A rank whose last enqueued collective of a group is below another member's never issued the later one: what the
Flight Recorder's sequences say, from the lines a user already has in the log. So each rank becomes an `FrDump`
holding only its last id per group (which collective it was, when the line says), joined with real dumps the
same way (analysis/sequence.py); a real dump of the rank, when given, is kept instead.

The rank inside the brackets is the rank in that process group; the global rank is the line's `[rankN]:` prefix
(TORCH_DISTRIBUTED_DEBUG / torchrun's log prefix) when it has one, else the group rank of the default group.
Lines of other groups without a prefix are left out (their members cannot be placed), and so are lines that
name no group (`[Rank 0] Watchdog caught ...` of older torch: rank 0 of which group?). Lines that show every
member of each group at the same collective are no evidence: none is returned then.
"""

from __future__ import annotations

import re

from hangdoctor.formats.flight_recorder import FrDump, FrEntry, GroupTrace

_PREFIX = re.compile(r"\[rank(\d+)\]:")
_WHO = r"\[(?:PG ID (?P<pgid>\d+) PG GUID (?P<guid>[^\s(\]]+)(?:\((?P<desc>[^)]*)\))?|PG (?P<pg>\d+))? ?Rank (?P<rank>\d+)\]"
_STATUS = re.compile(_WHO + r".*?[Ll]ast enqueued (?:NCCL )?work: (?P<enq>\d+), last completed (?:NCCL )?work: "
                     r"(?P<done>-?\d+)")
_TIMEOUT = re.compile(_WHO + r".*?WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")
_CODE = "c0000000"


def read_watchdog_status(text: str, source: str) -> list[FrDump]:
    """One FrDump per global rank that the log's watchdog lines place, or [] when it has none."""
    last: dict[tuple[int, str], list] = {}  # (rank, group) -> [enqueued, completed, op, desc]
    for line in text.splitlines():
        if "NCCL" not in line and "enqueued" not in line:
            continue
        for pattern in (_STATUS, _TIMEOUT):
            match = pattern.search(line)
            if match is None:
                continue
            group = match["guid"] or match["pg"] or match["pgid"]
            if group is None:  # "[Rank 0]" alone: the rank of some group, which one the line does not say
                continue
            prefix = _PREFIX.search(line[:match.start()])
            if prefix is not None:
                rank = int(prefix.group(1))
            elif group == "0":
                rank = int(match["rank"])
            else:
                continue
            seen = last.setdefault((rank, group), [0, None, "", match["desc"] or ""])
            if pattern is _STATUS:
                seen[0] = max(seen[0], int(match["enq"]))
                seen[1] = int(match["done"])
            else:
                seen[0] = max(seen[0], int(match["seq"]))
                seen[2] = _op(match["op"])
    dumps: dict[int, FrDump] = {}
    for (rank, group), (enqueued, completed, op, desc) in sorted(last.items()):
        if enqueued <= 0:
            continue
        dump = dumps.setdefault(rank, FrDump(rank=rank, source=f"{source} (NCCL watchdog lines)", version="log"))
        dump.sequences[group] = GroupTrace(first=enqueued, codes=_CODE, times="", whats={_CODE: "collective"})
        dump.status[group] = {"last_enqueued_collective": enqueued,
                              **({"last_completed_collective": completed} if completed is not None else {})}
        if desc:
            dump.group_desc[group] = desc
        if op:
            dump.entries.append(FrEntry(group=group, seq=enqueued, p2p=False, op=op, detail="", sizes=(), dtypes=(),
                                        state="scheduled", time_ns=0))
        dump.count += 1
    found = [dumps[r] for r in sorted(dumps)]
    return found if _parted(found) else []


def _parted(dumps: list[FrDump]) -> bool:
    """Some group's members stopped at different collectives: the lines tell ranks apart (else they say nothing a
    verdict could use, and a log of them alone is no dump)."""
    by_group: dict[str, set[int]] = {}
    for dump in dumps:
        for group, trace in dump.sequences.items():
            by_group.setdefault(group, set()).add(trace.first)
    return any(len(firsts) > 1 for firsts in by_group.values())


def _op(op_type: str) -> str:
    """NCCL's OpType (ALLREDUCE, REDUCE_SCATTER, _ALLGATHER_BASE) as torch's collective name."""
    name = op_type.strip("_").lower()
    for word in ("all", "reduce", "gather", "scatter", "to"):
        name = name.replace(word, word + "_")
    return re.sub(r"_+", "_", name).strip("_")
