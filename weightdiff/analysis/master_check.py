"""The master-copy check of `weightdiff check` on a checkpoint: each module weight against the optimizer's fp32
master copy of it, rounded to the weight's dtype (as the optimizer rounds it when it writes the weight).

Why it matters after a resume spike: DeepSpeed's ZeRO and bf16 optimizers and Megatron-LM's float16 optimizer
load the module weights and the masters separately. The first step after a resume runs with the loaded
weights; then the optimizer updates its master and writes it over them. So a weight that is not its rounded
master means: an edit made to the weights after the save (a fix, a surgery) is undone from the first step on,
or a master that was corrupted is kept. In a healthy checkpoint every element is equal.

Each master piece (`weightdiff.read.masters`) is compared with the same run of the weight's elements
(`compare_tensor` on flat views, so memory stays at one row block of each); a difference is reported per
parameter and coordinate (pp, tp, and the dp rank whose partition holds the piece) with the index of its first
differing element in the parameter and the count. A tied copy that a stage does not store (DeepSpeed's output
head) is compared with the stored copy it receives at load. What cannot be compared (an unreadable optimizer
file, a piece that cannot be placed, a parameter without a weight) is listed as not checked.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hangdoctor.topology import ParallelDims, describe_ranks
from weightdiff.analysis.compare import Tolerance, compare_tensor, unravel
from weightdiff.analysis.findings import Finding, Unchecked
from weightdiff.errors import BadInput
from weightdiff.read.masters import MasterPiece, MasterSet, MasterValues
from weightdiff.read.values import open_values
from weightdiff.records import RankDump

MASTER = "master copy"
CONSEQUENCE = ("at a resume the first step runs with this weight, then the optimizer writes its master over it: "
               "an edit of the weight is undone, a corrupted master is kept")


@dataclass
class PieceCheck:
    """One master piece compared with the module weight's elements start .. start + numel."""

    piece: MasterPiece
    shape: tuple[int, ...]
    dtype: str  # the module weight's
    n_differ: int = 0
    first_index: list[int] | None = None
    max_abs: float = 0.0
    stored_pp: int | None = None  # the weight compared is this stage's stored copy (a tied copy stored elsewhere)
    error: str | None = None


@dataclass
class MasterOutcome:
    kind: str
    checked: int  # parameters (per pp, tp) whose every element was compared with its master
    findings: list[Finding]
    unchecked: list[Unchecked]
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Flat:
    """The Values interface over one flat run of a tensor: `numel` elements from `start` (row blocks of it)."""

    def __init__(self, flat: Any, start: int, numel: int):
        self.flat, self.start, self.numel = flat, start, numel

    def get(self, name: str) -> Any:
        return self.flat[self.start:self.start + self.numel]

    def rows(self, name: str, a: int, b: int) -> Any:
        return self.flat[self.start + a:self.start + b]


def _weights_of(slices: list[RankDump]) -> dict[tuple[int, int], RankDump]:
    return {(s.coords.pp, s.coords.tp): s for s in slices}


def _stored_copy(slices: dict[tuple[int, int], RankDump], name: str, tp: int) -> RankDump | None:
    held = [s for (_, t), s in sorted(slices.items()) if t == tp and name in s.tensors]
    return held[0] if held else None


def _check_slice(pieces: list[PieceCheck], weights: dict[tuple[int, int], RankDump], masters: MasterSet,
                 tol: Tolerance) -> None:
    """Compare the pieces of one (pp, tp), each with its weight's elements (opened once per weight source)."""
    opened: dict[int, Any] = {}
    values = masters.open()
    try:
        for check in pieces:
            p = check.piece
            source = weights[(p.pp, p.tp)] if check.stored_pp is None else weights[(check.stored_pp, p.tp)]
            try:
                if id(source) not in opened:
                    manager = open_values(source)
                    opened[id(source)] = (manager, manager.__enter__())
                weight = opened[id(source)][1].get(p.name)
                _compare_piece(check, weight, values, tol)
            except BadInput as e:
                check.error = str(e)
    finally:
        values.close()
        for manager, _ in opened.values():
            manager.__exit__(None, None, None)


def _compare_piece(check: PieceCheck, weight: Any, values: MasterValues, tol: Tolerance) -> None:
    p = check.piece
    flat = weight.reshape(-1)
    vd = compare_tensor(_Flat(flat, p.start, p.numel), _Flat(values.flat(p), p.offset, p.numel), p.name,
                        (p.numel,), Tolerance(atol=tol.atol, rtol=tol.rtol, rounded=True), 4, (check.dtype, None))
    check.n_differ, check.max_abs = vd.n_differ, vd.max_abs
    if vd.first_index is not None:
        check.first_index = list(unravel(p.start + vd.first_index[0], check.shape))


def _plan(masters: MasterSet, weights: dict[tuple[int, int], RankDump], unchecked: list[Unchecked],
          where) -> tuple[list[PieceCheck], dict[tuple[int, int, str], int]]:
    """The pieces to compare, each with its weight's shape; parameters that cannot be checked go to
    `unchecked`. Returns the checks and, per (pp, tp, name), the parameter's element count."""
    checks, sizes = [], {}
    by_param: dict[tuple[int, int, str], list[MasterPiece]] = {}
    for p in masters.pieces:
        by_param.setdefault((p.pp, p.tp, p.name), []).append(p)
    names = {(pp, tp, n) for (pp, tp), params in masters.params.items() for n in params} | set(by_param)
    for pp, tp, name in sorted(names):
        slice_ = weights.get((pp, tp))
        if slice_ is None:
            continue  # the slice itself could not be read: reported by the reader
        stored = slice_ if name in slice_.tensors else _stored_copy(weights, name, tp)
        expected = masters.params.get((pp, tp), {}).get(name)
        if stored is None:
            unchecked.append(Unchecked(MASTER, name, where(pp, tp, None), "no module weight of it in the checkpoint"))
            continue
        meta = stored.tensors[name]
        if expected is not None and math.prod(expected) != meta.numel:
            unchecked.append(Unchecked(MASTER, name, where(pp, tp, None),
                                       f"the optimizer's shape {list(expected)} is not the weight's "
                                       f"{list(meta.shape)}"))
            continue
        sizes[(pp, tp, name)] = meta.numel
        for p in by_param.get((pp, tp, name), []):
            checks.append(PieceCheck(piece=p, shape=meta.shape, dtype=meta.dtype,
                                     stored_pp=None if stored is slice_ else stored.coords.pp))
    return checks, sizes


def _coverage(masters: MasterSet, checks: list[PieceCheck], sizes: dict[tuple[int, int, str], int], where,
              unchecked: list[Unchecked]) -> int:
    """Parameters whose every element was compared; the others go to `unchecked` with why."""
    covered: dict[tuple[int, int, str], int] = {}
    failed = set()
    for c in checks:
        key = (c.piece.pp, c.piece.tp, c.piece.name)
        if c.error is None:
            covered[key] = covered.get(key, 0) + c.piece.numel
        else:
            failed.add(key)
            unchecked.append(Unchecked(MASTER, c.piece.name, where(c.piece.pp, c.piece.tp, c.piece.dp), c.error))
    complete = 0
    for key, numel in sizes.items():
        pp, tp, name = key
        if covered.get(key, 0) >= numel and key not in failed:
            complete += 1
        elif key in masters.unplaced:
            unchecked.append(Unchecked(MASTER, name, where(pp, tp, None), masters.unplaced[key]))
        elif key not in failed:
            unread = [why for (upp, utp, _), why in sorted(masters.unread.items()) if (upp, utp) == (pp, tp)]
            why = unread[0] if unread else "no optimizer file holds a piece of it"
            unchecked.append(Unchecked(MASTER, name, where(pp, tp, None),
                                       f"{numel - covered.get(key, 0):,} of {numel:,} elements have no readable "
                                       f"master: {why}"))
    return complete


def _findings(checks: list[PieceCheck], dims: ParallelDims) -> list[Finding]:
    by_name: dict[str, list[PieceCheck]] = {}
    for c in checks:
        if c.error is None and c.n_differ:
            by_name.setdefault(c.piece.name, []).append(c)
    findings = []
    for name, group in by_name.items():
        ranks = sorted({dims.rank(dp=c.piece.dp, pp=c.piece.pp, tp=c.piece.tp) for c in group})
        first = min(group, key=lambda c: (c.piece.pp, c.piece.tp, c.piece.start))
        worst = max(group, key=lambda c: c.max_abs)
        total = sum(c.n_differ for c in group)
        numel = math.prod(first.shape)
        place = describe_ranks([dims.rank(dp=first.piece.dp, pp=first.piece.pp, tp=first.piece.tp)], dims)
        master = "the fp32 master" + ("" if first.dtype == "float32" else f" rounded to {first.dtype}")
        counts = (f"{total:,} of {numel:,} elements differ from {master} (first at index {first.first_index} on "
                  f"{place}, max |diff| {worst.max_abs:.3g})")
        if first.stored_pp is None:
            detail = f"{counts}; {CONSEQUENCE}"
        else:
            detail = (f"this stage stores no weight of its own (DeepSpeed saves a tied module once, on its first "
                      f"stage): the stored pp={first.stored_pp} copy, compared: {counts}; from the first step after a "
                      "resume this stage's copy is its own master again, so the two stages' copies differ")
        findings.append(Finding(
            kind=MASTER, name=name, ranks=ranks, where=describe_ranks(ranks, dims), detail=detail,
            max_abs=worst.max_abs, fraction=total / numel if numel else None,
            pairs=[{"pp": c.piece.pp, "tp": c.piece.tp, "dp": c.piece.dp, "first_index": c.first_index,
                    "n_differ": c.n_differ, "elements": [c.piece.start, c.piece.start + c.piece.numel],
                    "max_abs": c.max_abs, "compared_with_pp": c.stored_pp} for c in group],
        ))
    return sorted(findings, key=lambda f: (-(f.max_abs or 0.0), f.name))


def check_masters(masters: MasterSet, slices: list[RankDump], tol: Tolerance, *, jobs: int = 2) -> MasterOutcome:
    """Compare every master piece with its module weight; say what could not be compared."""
    known = slices[0].dims
    dims = ParallelDims(tp=known.tp if known else 1, pp=known.pp if known else 1, dp=max(1, masters.dp_size))

    def where(pp: int, tp: int, dp: int | None) -> str:
        ranks = [dims.rank(dp=d, pp=pp, tp=tp) for d in (range(dims.dp) if dp is None else [dp])]
        return describe_ranks(ranks, dims)

    weights = _weights_of(slices)
    unchecked: list[Unchecked] = [Unchecked(MASTER, "(whole optimizer file)", where(pp, tp, dp), why)
                                  for (pp, tp, dp), why in sorted(masters.unread.items())]
    checks, sizes = _plan(masters, weights, unchecked, where)
    by_slice: dict[tuple[int, int], list[PieceCheck]] = {}
    for c in checks:
        by_slice.setdefault((c.piece.pp, c.piece.tp), []).append(c)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda group: _check_slice(group, weights, masters, tol), by_slice.values()))
    complete = _coverage(masters, checks, sizes, where, unchecked)
    errors = list(masters.errors) + [c.error for c in checks if c.error]
    return MasterOutcome(kind=masters.kind, checked=complete, findings=_findings(checks, dims), unchecked=unchecked,
                         errors=list(dict.fromkeys(errors)), notes=list(masters.notes))


def master_outcome(kind: str, slices: list[RankDump], tol: Tolerance, *, jobs: int = 2) -> MasterOutcome:
    """The master-copy check of a checkpoint of `kind` ("deepspeed-checkpoint", "megatron-checkpoint")."""
    if kind == "megatron-checkpoint":
        from weightdiff.read.megatron_master import read_megatron_masters

        masters = read_megatron_masters(slices)
    else:
        from weightdiff.read.zero_master import read_zero_masters

        masters = read_zero_masters(slices)
    if masters is None and kind != "megatron-checkpoint" and (stage := _zero_stage(slices)):
        return MasterOutcome(kind="", checked=0, findings=[], unchecked=[], notes=[], errors=[
            f"{slices[0].source}: its ds_config says ZeRO stage {stage}, yet it holds no optimizer files "
            "(zero_pp_rank_*_optim_states.pt): the fp32 master copies could not be checked"])
    low = sorted({m.dtype for s in slices for m in s.tensors.values() if m.dtype in ("bfloat16", "float16")
                  and not m.is_buffer})
    if masters is None and kind == "megatron-checkpoint" and low:
        return MasterOutcome(kind="", checked=0, findings=[], unchecked=[], notes=[], errors=[
            f"{slices[0].source}: its weights are {'/'.join(low)}, yet it holds no fp32 master copies (no "
            "fp32_from_fp16_params: saved with --no-save-optim, or the optimizer state was lost): the master copies "
            "could not be checked"])
    if masters is None:
        return MasterOutcome(kind="", checked=0, findings=[], unchecked=[], notes=[
            "no fp32 master copies in this checkpoint (no ZeRO or bf16 optimizer files: in fp32 without ZeRO the "
            "module weights are what the optimizer updates): the master-copy check does not apply"])
    outcome = check_masters(masters, slices, tol, jobs=jobs)
    over = f" over dp={masters.dp_size}" if masters.dp_size > 1 else " (not partitioned over dp)"
    count = f"{len(masters.pieces)} piece" + ("" if len(masters.pieces) == 1 else "s")
    outcome.notes.insert(0, f"master copies: {masters.kind}, {count}{over}")
    return outcome


def _zero_stage(slices: list[RankDump]) -> int:
    """The ZeRO stage a DeepSpeed checkpoint's own ds_config names (0 when none or unreadable): with ZeRO, the
    optimizer files always hold the fp32 masters, so a folder without them lost them."""
    from weightdiff.read.torch_load import safe_load, walk

    mp_file = next(iter(sorted(slices[0].source.glob("mp_rank_*_model_states.pt"))), None) if slices else None
    if mp_file is None:
        return 0
    try:
        stage = walk(safe_load(mp_file, mmap=True), ("ds_config", "zero_optimization", "stage"))
    except BadInput:
        return 0
    return stage if isinstance(stage, int) and stage > 0 else 0
