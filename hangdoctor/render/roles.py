"""The colour of each role (analysis/roles.py), the same in every picture, with a legend: a reader sees the
suspects first whatever the class numbers are."""

from __future__ import annotations

from hangdoctor.analysis.roles import ORDER, first_role

# role -> (colour, legend text), in analysis.roles.ORDER
ROLES = {
    "suspect": ("#d62728", "suspect: the verdict blames these ranks"),
    "possible": ("#e377c2", "possible suspect (low confidence)"),
    "unresponsive": ("#ff7f0e", "did not respond (stopped, D state, py-spy timeout, denied)"),
    "missing": ("#7f7f7f", "missing or exited"),
    "progressing": ("#2ca02c", "progressing or busy: not stuck"),
    "waiting": ("#1f77b4", "waiting for the others"),
    "unknown": ("#bcbd22", "one look only, or outside any known wait"),
}
assert tuple(ROLES) == ORDER

__all__ = ["ROLES", "colour", "first_role"]


def colour(role: str) -> str:
    return ROLES[role][0]
