"""Wait-for graph nodes in words, for the causes' sentences: their ranks, the calls they wait in, their phase."""

from __future__ import annotations

from hangdoctor.analysis.waitgraph import COMMUNICATING, Node
from hangdoctor.topology import fold_ranks


def verb_of(nodes: list[Node], one: str, many: str) -> str:
    return one if len(ranks_of(nodes)) == 1 else many


def doing_of(nodes: list[Node]) -> str:
    labels = sorted({n.label if n.state != COMMUNICATING else "in " + n.label for n in nodes})
    return "; ".join(labels)


def ranks_of(nodes: list[Node]) -> list[int]:
    return sorted(r for n in nodes for r in n.ranks)


def who_of(nodes: list[Node]) -> str:
    ranks = ranks_of(nodes)
    return f"rank{'s' if len(ranks) > 1 else ''} {fold_ranks(ranks)}"


def calls_of(nodes: list[Node]) -> str:
    return ", ".join(sorted({n.place.wait.op if n.place and n.place.wait else n.label for n in nodes}))


def phase_of(node: Node) -> str:
    return node.phase_says or node.label
