"""What each rank is in the verdict, as the pictures colour it: a suspect, unresponsive, progressing, waiting.

One colour per role, the same in every picture, with a legend: a reader sees the suspects first whatever the
class numbers are (colouring by class made innocent ranks red in the seed-style dumps). A rank takes the first
role that applies, in ROLES' order; a box where several ranks' stacks end takes the first role among them, so a
suspect is never hidden behind its neighbours.
"""

from __future__ import annotations

from hangdoctor.analysis.ranks import PROGRESSING
from hangdoctor.analysis.verdict import Verdict

# role -> (colour, legend text); the order is the precedence
ROLES = {
    "suspect": ("#d62728", "suspect: the verdict blames these ranks"),
    "possible": ("#e377c2", "possible suspect (low confidence)"),
    "unresponsive": ("#ff7f0e", "did not respond (stopped, D state, py-spy timeout, denied)"),
    "missing": ("#7f7f7f", "missing or exited"),
    "progressing": ("#2ca02c", "progressing or busy: not stuck"),
    "waiting": ("#1f77b4", "waiting for the others"),
    "unknown": ("#bcbd22", "one look only, or outside any known wait"),
}
ORDER = list(ROLES)


def roles_of(verdict: Verdict) -> dict[int, str]:
    roles: dict[int, str] = {}

    def give(ranks, role: str) -> None:
        for rank in ranks:
            if rank not in roles or ORDER.index(role) < ORDER.index(roles[rank]):
                roles[rank] = role

    for suspect in verdict.suspects:
        give(suspect.ranks, "possible" if suspect.confidence == "low" else "suspect")
    for status, ranks in verdict.unresponsive.items():
        give(ranks, "missing" if status == "gone" else "unresponsive")
    give(verdict.missing, "missing")
    for rank, view in verdict.views.items():
        if not view.responded:
            continue
        if view.progress == PROGRESSING or view.activity == "busy":
            give([rank], "progressing")
        elif view.wait is not None:
            give([rank], "waiting")
        else:
            give([rank], "unknown")
    return roles


def first_role(ranks, roles: dict[int, str]) -> str:
    present = {roles.get(r, "unknown") for r in ranks}
    return next((role for role in ORDER if role in present), "unknown")


def colour(role: str) -> str:
    return ROLES[role][0]
