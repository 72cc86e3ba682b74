"""`weightdiff check DIR`: consistency checks inside one moment of one run (one iteration and tag).

- tied copies: a tied parameter (same name on several pipeline stages, e.g. DeepSpeed's tied_modules.embed.*)
  is equal on every stage, for every (tp, dp);
- dp replicas: every parameter is equal on every dp rank of the same (pp, tp);
- tp duplicates: parameters that tensor parallelism replicates (norms, row-parallel biases, non-*Parallel*
  layers; see classify.tp_duplicate_reason) are equal on every tp rank of the same (pp, dp);
- param groups: norm weights, biases, 1-D parameters and the embedding norm must have weight_decay == 0.

Copies are compared by their fingerprints' hashes first; values are read only for copies whose hashes
differ (or when there are no fingerprints, e.g. a checkpoint), to say by how much. Every dump's tensor file is
still checked against its sidecar (size, each tensor's shape and dtype; header only), so a truncated or
mismatched file is an error even where the hashes settle the checks. A copy that could not be read is counted
as not checked, never as equal.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hangdoctor.topology import ParallelDims, describe_ranks
from weightdiff.analysis.classify import no_decay_reason, tp_duplicate_reason
from weightdiff.analysis.compare import Tolerance, compare_tensor
from weightdiff.analysis.findings import Finding, Unchecked
from weightdiff.read.dtypes import itemsize
from weightdiff.analysis.grid import grid_json, infer_dims, placement_rank
from weightdiff.errors import BadInput
from weightdiff.read.sources import Selection
from weightdiff.read.tensor_file import verify_tensor_file
from weightdiff.read.values import open_values
from weightdiff.records import RankDump

TIED, DP, TP, AUDIT = "tied copies", "dp replicas", "tp duplicates", "param groups"
CHECKPOINT_KINDS = ("deepspeed-checkpoint", "megatron-checkpoint")  # one record per (pp, tp), masters beside


@dataclass
class CopyDiff:
    """One copy compared with its reference copy."""

    kind: str
    name: str
    reference: RankDump
    other: RankDump
    max_abs: float | None = None
    fraction: float | None = None
    n_differ: int | None = None
    by_fingerprint: bool = False
    error: str | None = None
    shapes: tuple[list[int], list[int]] | None = None  # (reference, other) when the copies' shapes differ


@dataclass
class CheckReport:
    path: str
    kind: str
    iteration: int | None
    tag: str | None
    ranks: int
    dims: dict | None
    tolerance: Tolerance
    checked: dict[str, int]
    findings: list[Finding]
    not_checked: dict[str, int] = field(default_factory=dict)  # copies that could not be read, per check
    unchecked: list[Unchecked] = field(default_factory=list)  # what a check could not look at, and why
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def describe_selection(self) -> str:
        if self.kind not in ("dumps", *CHECKPOINT_KINDS):
            return f"{self.kind}, the whole model in one record; {self.tolerance.describe()}"
        what = "checkpoint step" if self.kind in CHECKPOINT_KINDS else f"{self.tag}-dump of iteration"
        grid = f", TP={self.dims['tp']} PP={self.dims['pp']} DP={self.dims['dp']}" if self.dims else ""
        ranks = f"{self.ranks} rank{'' if self.ranks == 1 else 's'}"
        return f"{what} {self.iteration}, {ranks}{grid}; {self.tolerance.describe()}"


def _majority(copies: list[RankDump], name: str) -> RankDump:
    """The reference copy: one of the largest group of copies with equal hashes (the lowest coordinate on a
    tie), so that with three or more copies the odd one out is the one reported."""
    hashes = [c.tensors[name].fingerprint.sha256 if c.tensors[name].fingerprint else None for c in copies]
    if None in hashes:
        return copies[0]
    best = max(hashes, key=lambda h: (hashes.count(h), -hashes.index(h)))
    return copies[hashes.index(best)]


def _copy_tasks(dumps: list[RankDump]) -> list[CopyDiff]:
    """Group the copies that must be equal, pick each group's reference, and pair every other copy with it."""
    groups: dict[tuple, list[RankDump]] = {}
    for d in sorted(dumps, key=lambda d: d.key):
        pp, tp, dp = d.key
        for name, meta in d.tensors.items():
            groups.setdefault((DP, name, pp, tp), []).append(d)
            if meta.tie is not None:
                groups.setdefault((TIED, name, tp, dp), []).append(d)
            if tp_duplicate_reason(meta):
                groups.setdefault((TP, name, pp, dp, meta.shape), []).append(d)
    tasks: list[CopyDiff] = []
    for (kind, name, *_), copies in groups.items():
        if len(copies) < 2:
            continue
        ref = _majority(copies, name)
        for other in copies:
            if other is not ref:
                tasks.append(CopyDiff(kind, name, ref, other))
    return tasks


def _settle_by_fingerprint(task: CopyDiff) -> bool:
    """True when the hashes decide equality (and record it); False when values must be read."""
    fa, fb = task.reference.tensors[task.name].fingerprint, task.other.tensors[task.name].fingerprint
    if fa is None or fb is None:
        return False
    if fa.sha256 == fb.sha256:
        task.n_differ = 0
        return True
    if task.reference.tensor_source is None or task.other.tensor_source is None:
        task.by_fingerprint, task.n_differ = True, -1
        task.max_abs = abs(fa.norm - fb.norm)  # a lower bound of the largest element difference's size
        return True
    return False


def _compare_group(tasks: list[CopyDiff], tol: Tolerance) -> None:
    ref, other = tasks[0].reference, tasks[0].other
    try:
        with open_values(ref) as va, open_values(other) as vb:
            for task in tasks:
                meta = ref.tensors[task.name]
                try:
                    vd = compare_tensor(va, vb, task.name, meta.shape, tol, itemsize(meta.dtype),
                                        (meta.dtype, other.tensors[task.name].dtype))
                except BadInput as e:  # this tensor only; the group's other tensors are still compared
                    task.error = str(e)
                    continue
                task.max_abs, task.fraction, task.n_differ = vd.max_abs, vd.fraction, vd.n_differ
    except BadInput as e:
        for task in tasks:
            task.error = task.error or str(e)


def _run_copy_checks(tasks: list[CopyDiff], tol: Tolerance, jobs: int) -> None:
    groups: dict[tuple[int, int], list[CopyDiff]] = {}
    for task in tasks:
        shape_ref, shape_other = task.reference.tensors[task.name].shape, task.other.tensors[task.name].shape
        if shape_ref != shape_other:
            task.shapes, task.n_differ = (list(shape_ref), list(shape_other)), -1
            continue
        if tol.exact and _settle_by_fingerprint(task):
            continue
        if task.reference.tensor_source is None or task.other.tensor_source is None:
            task.error = (f"{task.other.label()}: {task.name}: no values and no comparable fingerprints")
            continue
        groups.setdefault((id(task.reference), id(task.other)), []).append(task)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda g: _compare_group(g, tol), groups.values()))


def _copy_findings(tasks: list[CopyDiff], dims: ParallelDims | None, replicated: bool) -> list[Finding]:
    grouped: dict[tuple[str, str], list[CopyDiff]] = {}
    for task in tasks:
        if task.error is None and task.n_differ:
            grouped.setdefault((task.kind, task.name), []).append(task)
    findings = []
    for (kind, name), group in grouped.items():
        worst = max(group, key=lambda t: (t.shapes is not None, t.max_abs or 0.0, t.fraction or 0.0))
        ranks = sorted({placement_rank(t.other.coords, dims, replicated) for t in group})
        meta = worst.other.tensors[name]
        axis = {TIED: "pp", DP: "dp", TP: "tp"}[kind]
        if worst.shapes is not None:
            how = f"shape {worst.shapes[1]}, the reference's {worst.shapes[0]}"
        elif worst.by_fingerprint:
            how = "hashes differ (fingerprint-only dumps: values not available)"
        else:
            how = f"max |diff| {worst.max_abs:.3g}, {100 * (worst.fraction or 0):.3g}% of elements differ"
        detail = (f"{len(group)} {'copy differs' if len(group) == 1 else 'copies differ'} from the "
                  f"{axis}={worst.reference.coords.axis(axis)} copy; {how}")
        if kind == TIED and meta.tie is not None:
            detail += (f"; tied module {meta.tie.key!r}" + ("" if meta.tie.synced else
                       ", NOT a tied attribute: DeepSpeed never synchronises or reduces it"))
        if kind == TP:
            detail += f"; expected equal: {tp_duplicate_reason(meta)}"
        findings.append(Finding(
            kind=kind, name=name, ranks=ranks, where=describe_ranks(ranks, dims), detail=detail,
            max_abs=worst.max_abs, fraction=worst.fraction, module_class=meta.module_class, role=meta.role,
            pairs=[{"reference": t.reference.label(), "other": t.other.label(), "max_abs": t.max_abs,
                    "fraction": t.fraction,
                    "other_coords": {"rank": t.other.coords.rank, "pp": t.other.coords.pp, "tp": t.other.coords.tp,
                                     "dp": t.other.coords.dp}} for t in group],
        ))
    return findings


def _audit(dumps: list[RankDump], dims: ParallelDims | None, replicated: bool) -> tuple[list[Finding], int, list[str]]:
    flagged: dict[str, tuple[list[int], str, dict, str]] = {}
    checked = 0
    with_groups = [d for d in dumps if any(m.group is not None for m in d.tensors.values())]
    notes = []
    if not with_groups:
        notes.append("no optimizer-group metadata: param-group audit skipped (pass param_groups= or optimizer= "
                     "to weightdiff.dump; a checkpoint needs its zero_pp_rank_0_* optimizer files)")
    for d in with_groups:
        for name, meta in d.tensors.items():
            if meta.group is None:
                continue
            checked += 1
            reason = no_decay_reason(meta)
            decay = meta.group.get("weight_decay", 0) or 0
            if reason and isinstance(decay, (int, float)) and decay > 0:
                entry = flagged.setdefault(name, ([], reason, meta.group, meta.module_class))
                entry[0].append(placement_rank(d.coords, dims, replicated))
    findings = []
    for name, (ranks, reason, group, cls) in flagged.items():
        label = group.get("name") or group.get("group")
        index = f", group {label!r}" if isinstance(label, str) else ""
        findings.append(Finding(kind=AUDIT, name=name, ranks=sorted(ranks), where=describe_ranks(ranks, dims),
                                detail=f"decayed (weight_decay={group['weight_decay']}{index}) but {reason}",
                                module_class=cls))
    return findings, checked, notes


def _verify_tensor_files(dumps: list[RankDump], jobs: int) -> list[str]:
    """One line per tensor file that does not match its sidecar (header only: no tensor data is read)."""
    def verify(dump: RankDump) -> list[str]:
        if not isinstance(dump.tensor_source, Path):
            return []
        try:
            return list(verify_tensor_file(dump.tensor_source, dump.tensors).values())
        except BadInput as e:
            return [str(e)]

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [line for lines in pool.map(verify, dumps) for line in lines]


def build_check_report(sel: Selection, tol: Tolerance, *, jobs: int = 2) -> CheckReport:
    dumps = list(sel.dumps.values())
    if sel.kind == "deepspeed-checkpoint":
        from weightdiff.read.zero_files import with_optimizer_groups

        dumps = [with_optimizer_groups(d) for d in dumps]
    dims = infer_dims(dumps)
    replicated = all(d.replicated_dp for d in dumps)
    file_errors = _verify_tensor_files(dumps, jobs)
    tasks = _copy_tasks(dumps)
    _run_copy_checks(tasks, tol, jobs)
    counts = {kind: sum(1 for t in tasks if t.kind == kind and t.error is None) for kind in (TIED, DP, TP)}
    unread = {kind: sum(1 for t in tasks if t.kind == kind and t.error is not None) for kind in (TIED, DP, TP)}
    findings = _copy_findings(tasks, dims, replicated)
    audit, audited, notes = _audit(dumps, dims, replicated)
    order = {TIED: 0, DP: 1, TP: 2, AUDIT: 3}
    findings = sorted(findings, key=lambda f: (order[f.kind], -(f.max_abs or 0.0), f.name)) + audit
    checked = {TIED: counts[TIED], DP: counts[DP], TP: counts[TP], AUDIT: audited}
    errors = list(sel.errors) + file_errors + [t.error for t in tasks if t.error]
    unchecked: list[Unchecked] = []
    if sel.whole:
        notes.append("one copy of each tensor: there are no tied copies, replicas or tp duplicates to compare")
    if sel.kind in CHECKPOINT_KINDS:
        notes.append("a checkpoint holds one copy per (pp, tp) and no tied head copy: dp replicas and tied "
                     "copies cannot be checked in it; dump the weights for that")
        from weightdiff.analysis.master_check import MASTER, master_outcome

        master = master_outcome(sel.kind, dumps, tol, jobs=jobs)
        checked[MASTER] = master.checked
        findings += master.findings
        unchecked = master.unchecked
        unread[MASTER] = len({(u.name, u.where) for u in unchecked})
        notes += master.notes
        errors += master.errors
    return CheckReport(
        path=str(sel.path), kind=sel.kind, iteration=sel.iteration, tag=sel.tag, ranks=len(dumps),
        dims=grid_json(dims, dumps), tolerance=tol, checked=checked, findings=findings,
        not_checked={k: n for k, n in unread.items() if n}, unchecked=unchecked,
        notes=notes, errors=list(dict.fromkeys(errors)), warnings=list(sel.warnings),
    )
