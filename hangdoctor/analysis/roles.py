"""What each rank is in the verdict: a suspect, unresponsive, progressing, waiting, ...

Computed once per verdict (rank -> role), so that every renderer colours a set of ranks in time linear in the
set: the pictures colour by role, never by class number (colouring by class made innocent ranks red in the
seed-style dumps). A rank takes the first role that applies, in ORDER; a set of ranks (a box where several ranks'
stacks end, a class) takes the first role among its ranks, so a suspect is never hidden behind its neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoctor.analysis.ranks import PROGRESSING, RankView
from hangdoctor.analysis.suspects import Suspect

# the order is the precedence
ORDER = ("suspect", "possible", "unresponsive", "missing", "progressing", "waiting", "unknown")
_RANK = {role: index for index, role in enumerate(ORDER)}


def assign_roles(suspects: list[Suspect], unresponsive: dict[str, list[int]], missing: list[int],
                 views: dict[int, RankView]) -> dict[int, str]:
    roles: dict[int, str] = {}

    def give(ranks: Iterable[int], role: str) -> None:
        for rank in ranks:
            if rank not in roles or _RANK[role] < _RANK[roles[rank]]:
                roles[rank] = role

    for suspect in suspects:
        give(suspect.ranks, "possible" if suspect.confidence == "low" else "suspect")
    for status, ranks in unresponsive.items():
        give(ranks, "missing" if status == "gone" else "unresponsive")
    give(missing, "missing")
    for rank, view in views.items():
        if not view.responded:
            continue
        if view.progress == PROGRESSING or view.activity == "busy":
            give((rank,), "progressing")
        elif view.wait is not None:
            give((rank,), "waiting")
        else:
            give((rank,), "unknown")
    return roles


def first_role(ranks: Iterable[int], roles: dict[int, str]) -> str:
    """The role of a set of ranks: the first, in ORDER, that one of them has. Linear in the set, and it stops at
    the first suspect."""
    best = len(ORDER) - 1
    for rank in ranks:
        best = min(best, _RANK[roles.get(rank, "unknown")])
        if best == 0:
            break
    return ORDER[best]
