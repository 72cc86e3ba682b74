"""When the main threads do not tell the ranks apart, their other threads may.

Every rank's main thread can sit in the same call for a reason none of them shows: an RPC handler that never
returns keeps `rpc.shutdown()` waiting on every rank; a logging thread that holds a lock. The thread that is
stuck then exists on one rank (or a few) and on no other. So, when the main threads give no suspect, each rank's
other threads are compared: a thread in a wait (io, a lock, a communication call, a sleep) whose stack appears on
at most a third of the ranks sets those ranks apart. A thread of one rank only is evidence, not proof (rank 0
often has a helper thread of its own): the suspect is low, and says which thread and where it waits.
"""

from __future__ import annotations

from hangdoctor.analysis.ranks import RankView
from hangdoctor.analysis.suspects import Suspect
from hangdoctor.analysis.waits import Wait, WaitTable
from hangdoctor.model import OK, RankRecord
from hangdoctor.topology import fold_ranks

# the waits that can hold up the rest of the job, most telling first
_WEIGHT = {"io": 0, "p2p": 0, "collective": 0, "barrier": 0, "work-wait": 0, "store": 0, "device-sync": 1,
           "lock": 2, "sleep": 3}


def odd_thread_suspects(records: list[RankRecord], views: dict[int, RankView], table: WaitTable) -> list[Suspect]:
    """Low suspects for the ranks whose other threads wait where no more than a third of the ranks' do."""
    answered = [r for r in records if r.rank in views and views[r.rank].responded]
    if len(answered) < 3:
        return []
    having: dict[tuple, set[int]] = {}
    seen: dict[tuple, tuple[str, Wait, tuple]] = {}
    memo: dict[int, Wait | None] = {}
    for record in answered:
        for thread, wait in _waiting_threads(record, table, memo):
            key = tuple((f.name, f.file) for f in thread.frames if not f.native)
            having.setdefault(key, set()).add(record.rank)
            seen.setdefault(key, (thread.name or f"thread {thread.thread_id}", wait, thread.frames))
    limit = len(answered) // 3
    odd = [(key, ranks) for key, ranks in having.items() if len(ranks) <= limit]
    odd.sort(key=lambda item: (_WEIGHT[seen[item[0]][1].kind], len(item[1]), min(item[1])))
    suspects, named = [], set()
    for key, ranks in odd:
        if ranks & named:
            continue
        named |= ranks
        name, wait, frames = seen[key]
        where = " <- ".join(f.label() for f in [f for f in frames if not f.native][:3])
        who = f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(sorted(ranks))}"
        reason = (f"every rank's main thread is in the same place, and {who} alone ha{'ve' if len(ranks) > 1 else 's'}"
                  f" a thread ({name}) waiting in {wait.op} ({wait.kind}): {where}; what the main threads wait for "
                  f"may be held up there")
        suspects.append(Suspect(sorted(ranks), where, reason, "odd-thread", "low",
                                [{"type": "thread", "text": f"{name}: {where}"}]))
    return suspects


def _waiting_threads(record: RankRecord, table: WaitTable, memo: dict):
    """(thread, wait) for each thread but the main one that waits in a call the table knows (launcher and worker
    rows name what a process is, not a wait)."""
    answered = [s for s in record.samples if s.status == OK and s.threads]
    if not answered:
        return
    sample = answered[-1]
    main = sample.main_thread(record.identity.pid)
    for thread in sample.threads:
        if thread is main or not thread.frames:
            continue
        key = id(thread.frames)
        if key not in memo:
            memo[key] = table.classify(thread.frames)
        wait = memo[key]
        if wait is not None and wait.kind in _WEIGHT:
            yield thread, wait
