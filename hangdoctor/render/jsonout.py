"""The verdict as plain JSON-able data: the same fields the terminal report and the HTML page show."""

from __future__ import annotations

from hangdoctor.clicore.jsondoc import document
from hangdoctor.analysis.tree import TreeNode
from hangdoctor.analysis.verdict import Verdict
from hangdoctor.analysis.waits import Wait
from hangdoctor.model import Frame
from hangdoctor.request import VERDICT_FORMAT
from hangdoctor.topology import fold_ranks

FORMAT = VERDICT_FORMAT


def frame_dict(frame: Frame) -> dict:
    return {"name": frame.name, "file": frame.file, "line": frame.line, "native": frame.native}


def wait_dict(wait: Wait | None) -> dict | None:
    if wait is None:
        return None
    return {"op": wait.op, "kind": wait.kind, "label": wait.label, "says": wait.says, "sure": wait.sure,
            "evidence": wait.evidence, "framework": wait.framework, "call": frame_dict(wait.call),
            "caller": frame_dict(wait.caller) if wait.caller else None}


def ranks_dict(ranks: list[int]) -> dict:
    return {"count": len(ranks), "folded": fold_ranks(ranks), "ranks": list(ranks)}


def graph_dict(verdict: Verdict) -> dict | None:
    """The wait-for graph (analysis/waitgraph.py) and the causes read off it (analysis/causes.py)."""
    graph = verdict.graph
    if graph is None:
        return None
    return {
        "nodes": [{"id": n.id, "state": n.state, "where": n.label, "status": n.status or None,
                   "waits_for": n.peers or None, "schedule": n.schedule or None, "phase": n.phase or None,
                   "phase_says": n.phase_says or None, **ranks_dict(n.ranks)} for n in graph.nodes],
        "edges": [{"from": e.waiter, "to": e.target, "strength": e.strength, "evidence": e.evidence,
                   **ranks_dict(e.ranks)} for e in graph.edges],
        "causes": [{"nodes": c.nodes, "confidence": c.confidence, "rule": c.rule, "reason": c.reason,
                    "waiting": fold_ranks(c.waiting), "waiting_count": len(c.waiting), **ranks_dict(c.ranks)}
                   for c in verdict.causes],
    }


def tree_nodes(root: TreeNode) -> list[dict]:
    """The merged tree as a flat list, parents before children (`parent` is an index; the root's is None).

    Flat, because stacks can be thousands of frames deep: nested JSON that deep breaks most JSON readers."""
    nodes: list[dict] = []
    todo: list[tuple[TreeNode, int | None]] = [(root, None)]
    while todo:
        node, parent = todo.pop()
        index = len(nodes)
        nodes.append({"id": index, "parent": parent, "frame": frame_dict(node.frame) if node.frame else None,
                      "note": node.note, "ranks": fold_ranks(node.ranks), "count": len(node.ranks),
                      "ends": fold_ranks(node.ends)})
        todo.extend((child, index) for child in reversed(node.children))
    return nodes


def verdict_to_dict(verdict: Verdict) -> dict:
    dims = verdict.dims
    class_of = {rank: cls.id for cls in verdict.classes for rank in cls.ranks}
    return document(FORMAT, {
        "headline": verdict.headline,
        "hung": verdict.hung,
        "source": verdict.source,
        "samples": verdict.samples,
        "interval": verdict.interval,
        "threads": "all" if verdict.all_threads else "main",  # which threads the tree holds
        "topology": None if dims is None else {"tp": dims.tp, "pp": dims.pp, "dp": dims.dp, "order": dims.order,
                                               "source": verdict.dims_source},
        "expected": verdict.expected,
        "responded": ranks_dict(verdict.responded),
        "unresponsive": {status: ranks_dict(ranks) for status, ranks in verdict.unresponsive.items()},
        "missing": ranks_dict(verdict.missing),
        "places": [
            {"position": p.position, "activity": p.activity, "wait": wait_dict(p.wait), "where": p.where,
             "hosts": p.hosts, "progress": p.progress, **ranks_dict(p.ranks)}
            for p in verdict.places
        ],
        "suspects": [{"kind": s.kind, "confidence": s.confidence, "reason": s.reason, "where": s.where,
                      "evidence": s.evidence, **ranks_dict(s.ranks)} for s in verdict.suspects],
        "set_aside": [{"host": a.host, "pid": a.pid, "role": a.role, "why": a.why, "cmdline": list(a.cmdline)}
                      for a in verdict.set_aside],
        "partial": verdict.partial,
        "native": verdict.native,
        "errors": verdict.errors,
        "flight_recorder": {"ranks": ranks_dict(verdict.flight_recorder_ranks), "groups": [
            {"group": g.group, "desc": g.desc, "name": g.name, "axes": list(g.axes), **ranks_dict(g.ranks),
             "last_issued": {str(r): s for r, s in g.last_issued.items()},
             "last_completed": {str(r): s for r, s in g.last_completed.items()}, "no_dump": g.no_dump,
             "parting": None if g.parting is None else {
                 "seq": g.parting.seq, "kind": g.parting.kind, "issued": g.parting.issued, "never": g.parting.never,
                 "now_at": {str(r): None if e is None else {"group": e.group, "seq": e.seq, "op": e.op, "p2p": e.p2p,
                                                            "state": e.state}
                            for r, e in g.parting.last.items()}}}
            for g in verdict.sequences]} if verdict.flight_recorder_ranks else None,
        "hints": verdict.hints,
        "warnings": verdict.warnings,
        "classes": [
            {"id": c.id, "majority": c.majority, "status": c.status, "position": c.position, "where": c.where,
             "hosts": c.hosts, "progress": c.progress, "states": c.states, "cpu_percent": c.cpu_percent,
             "wait": wait_dict(c.wait), "stack": [frame_dict(f) for f in c.stack], **ranks_dict(c.ranks)}
            for c in verdict.classes
        ],
        "nodes": [{"name": n.name, "ok": n.ok, "error": n.error, "ranks_found": n.ranks_found,
                   "skipped": n.skipped, "seconds": round(n.seconds, 3)} for n in verdict.nodes],
        "ranks": [
            {"rank": v.rank, "host": v.identity.host, "pid": v.identity.pid, "local_rank": v.identity.local_rank,
             "rank_source": v.identity.rank_source,
             "coords": None if v.identity.coords is None else
             {"dp": v.identity.coords.dp, "pp": v.identity.coords.pp, "tp": v.identity.coords.tp},
             "status": v.status, "state": v.state, "cpu_percent": v.cpu_percent, "progress": v.progress,
             "position": v.position, "activity": v.activity if v.responded else None,
             "wait_kind": v.wait.kind if v.wait else None, "active": v.active, "gil": v.gil, "gpu": v.gpu,
             "peer": None if v.peer is None else {"name": v.peer.name, "rank": v.peer.value,
                                                  "frame": frame_dict(v.peer.frame)},
             "helper_wait": None if v.helper is None else {"thread": v.helper[0], **wait_dict(v.helper[1])},
             "class": class_of.get(v.rank), "role": verdict.roles.get(v.rank), "error": v.error, "samples": v.samples, "answered": v.answered,
             "stack_by": v.reader or None}
            for v in sorted(verdict.views.values(), key=lambda v: v.rank)
        ],
        "wait_graph": graph_dict(verdict),
        "tree": tree_nodes(verdict.tree),
    })
