"""The slow-rank report of `attach --profile` (analysis/stragglers.py): as a dict for --json and profile.json,
as text for the terminal (the same data), and as collapsed-stack files for a flame graph viewer.

The folded files (`flame-stragglers.folded`, `flame-others.folded`: one line per distinct stack of every thread,
outermost frame first, then its sample count) open in speedscope (https://www.speedscope.app) or Brendan Gregg's
flamegraph.pl: the two side by side show where the straggler's extra time goes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hangdoctor.analysis.stragglers import ProfileFinding
from hangdoctor.model import Collection

FORMAT = "hangdoctor-profile/1"


def finding_to_dict(finding: ProfileFinding) -> dict:
    return {
        "format": FORMAT,
        "headline": finding.headline,
        "seconds": finding.seconds,
        "rate": finding.rate,
        "stragglers": [{
            "ranks": s.ranks, "coords": s.coords, "hosts": s.hosts, "waited_for": round(s.waited_for, 4),
            "own_wait": round(s.own_wait, 4), "peers_wait": round(s.peers_wait, 4),
            "threshold": round(s.threshold, 4), "group": s.group, "evidence": s.evidence,
            "instead": [{"what": e.what, "share": round(e.share, 4), "peers": round(e.peers, 4)} for e in s.instead],
        } for s in finding.stragglers],
        "where_time_goes": [{"what": what, "share": round(share, 4)} for what, share in finding.where_time_goes],
        "ranks": [{
            "rank": r.rank, "host": r.host, "pid": r.pid, "coords": r.coords, "group": r.group, "samples": r.samples,
            "peer_wait": round(r.peer_wait, 4), "call_wait": round(r.call_wait, 4),
            "shares": {k: round(v, 4) for k, v in r.shares.items()},
            "loader_busy": None if r.loader_busy is None else round(r.loader_busy, 4),
            "loader_samples": r.loader_samples,
            "on_core": None if r.on_core is None else round(r.on_core, 4),
            "core_wait": None if r.core_wait is None else round(r.core_wait, 4),
        } for r in finding.ranks],
        "unprofiled": [{"rank": rank, "why": why} for rank, why in finding.unprofiled],
        "notes": finding.notes,
        "kernel_times": [{
            "group": k.group, "ranks": k.ranks, "compared": k.compared,
            "last_counts": {str(rank): n for rank, n in sorted(k.last_counts.items())},
            "stragglers": [s.rank for s in k.stragglers],
        } for k in finding.kernels],
    }


def render_text(report: dict) -> str:
    """The report dict (finding_to_dict) as text: what --json prints, for a person."""
    lines = [report["headline"], f"profiled {report['seconds']:g}s at {report['rate']} samples/s per rank "
             "(py-spy record --nonblocking: the ranks were not paused)", ""]
    for s in report["stragglers"]:
        lines.append(f"straggler: rank {', '.join(map(str, s['ranks']))}"
                     + (f" ({', '.join(c for c in s['coords'] if c)})" if any(s["coords"]) else "")
                     + f" on {', '.join(s['hosts'])}")
        lines.append(f"  {s['evidence']}")
        if s["instead"]:
            lines.append("  where its time goes instead (its share / its peers' median):")
            lines += [f"    {e['what']}: {e['share']:.0%} / {e['peers']:.0%}" for e in s["instead"]]
        lines.append("")
    for note in report["notes"]:
        lines += [f"note: {note}", ""]
    for k in report["kernel_times"]:
        counts = ", ".join(f"rank {rank} {n}" for rank, n in k["last_counts"].items())
        lines += [f"GPU kernel times, process group {k['group']}: {k['compared']} collectives compared; arrived last: "
                  f"{counts}" + ("" if k["stragglers"] else " (no rank last in most: no GPU straggler)"), ""]
    if report["where_time_goes"]:
        lines.append("where time goes (median over ranks): "
                     + ", ".join(f"{w['what']} {w['share']:.0%}" for w in report["where_time_goes"][:6]))
    lines.append("")
    lines.append(f"{'rank':>6}  {'coords':<16} {'host':<12} {'samples':>7}  {'waits on peers':>14}  shares")
    for r in report["ranks"]:
        shares = ", ".join(f"{k} {v:.0%}" for k, v in list(r["shares"].items())[:4])
        workers = "" if r["loader_busy"] is None else f"; its DataLoader workers busy {r['loader_busy']:.0%}"
        outside = "" if r["call_wait"] == r["peer_wait"] else f"; outside backward {r['call_wait']:.0%}"
        core = "" if r.get("on_core") is None else f"; on a core {r['on_core']:.0%} (kernel's count)"
        lines.append(f"{r['rank']:>6}  {r['coords']:<16} {r['host']:<12} {r['samples']:>7}  {r['peer_wait']:>14.0%}  "
                     f"{shares}{outside}{workers}{core}")
    for u in report["unprofiled"]:
        lines.append(f"{u['rank']:>6}  not profiled: {u['why']}")
    return "\n".join(lines) + "\n"


def write_flame_files(collection: Collection, finding: ProfileFinding, folder: Path) -> list[Path]:
    """One folded file per class (the stragglers, the others); returns the files written."""
    slow = {rank for s in finding.stragglers for rank in s.ranks}
    classes: dict[str, Counter] = {"stragglers": Counter(), "others": Counter()}
    for record in collection.records:
        if record.profile is None:
            continue
        into = classes["stragglers" if record.rank in slow else "others"]
        for stack in record.profile.stacks:
            outer_first = ";".join(f.label() for f in reversed(stack.frames))
            into[f"{stack.thread_name or 'thread'};{outer_first}"] += stack.count
    written = []
    for name, stacks in classes.items():
        if stacks:
            path = folder / f"flame-{name}.folded"
            path.write_text("".join(f"{stack} {count}\n" for stack, count in stacks.most_common()))
            written.append(path)
    return written
