"""The verdict of `weightdiff a/ b/`: every difference, grouped by parameter and placed in the grid.

Per parameter name, the ranks where it differs are described by coordinates ("pp=1 (all dp)"), and the
parameters are ranked by size: structural changes first (shape, dtype, missing, not saved), then by the
largest absolute difference, then by the fraction of elements that differ. The headline says where all
differences are, e.g. "all 64 differences are on pp=11 (all tp, all dp): tied_modules.embed.norm.weight ...".

The verdict is "different", "same" (every tensor of every pair was compared), "incomplete" (no differences
among what was compared, but some tensors could not be read) or "not compared" (nothing could be read): a
tensor that was not read is never reported as equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoctor.topology import ParallelDims, describe_ranks
from weightdiff.analysis.compare import Tolerance
from weightdiff.analysis.diff import (DIFFERS, DTYPE, MISSING_A, MISSING_B, NOT_SAVED, SHAPE, UNREADABLE, PairResult,
                                      ParamDiff, compare_selections)
from weightdiff.analysis.grid import grid_json, infer_dims, placement_rank
from weightdiff.read.sources import Selection
from weightdiff.records import RankDump

SEVERITY = {SHAPE: 0, MISSING_A: 1, MISSING_B: 1, NOT_SAVED: 2, DTYPE: 3, UNREADABLE: 4, DIFFERS: 5}


@dataclass
class SideInfo:
    path: str
    kind: str
    iteration: int | None
    tag: str | None
    ranks: int


@dataclass
class ParamSummary:
    """One parameter name across all ranks where it differs."""

    name: str
    status: str
    ranks: list[int]
    where: str
    max_abs: float
    mean_abs: float  # the largest per-rank mean
    fraction: float  # the largest per-rank fraction
    n_differ: int
    reset_to: str | None
    module_class: str
    norm: str | None
    note: str
    example: ParamDiff  # the rank with the largest difference
    role: str = "parameter"  # or "buffer"


@dataclass
class DiffReport:
    a: SideInfo
    b: SideInfo
    tolerance: Tolerance
    dims: dict | None
    headline: str
    params: list[ParamSummary]
    informational: list[ParamSummary]
    pairs: list[PairResult]
    only_in_a: list[str]
    only_in_b: list[str]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    verdict: str = "same"  # "different", "same", "incomplete" or "not compared"
    compared_pairs: int = 0
    compared_tensors: int = 0
    unreadable_tensors: int = 0  # in both dumps of a pair, but not read: never counted as equal
    equal_tensors: int = 0
    compared_elements: int = 0
    bytes_read: int = 0

    @property
    def n_differences(self) -> int:
        return sum(len(p.ranks) for p in self.params)

    @property
    def has_differences(self) -> bool:
        """Values, shapes, dtypes or parameters differ. Ranks on one side only are input errors instead."""
        return bool(self.params)


def _side(sel: Selection) -> SideInfo:
    return SideInfo(path=str(sel.path), kind=sel.kind, iteration=sel.iteration, tag=sel.tag, ranks=len(sel.dumps))


def _where(ranks: list[int], dims: ParallelDims | None) -> str:
    return describe_ranks(ranks, dims)


def summarise(diffs: list[ParamDiff], dims: ParallelDims | None, replicated: bool = False) -> list[ParamSummary]:
    by_name: dict[tuple[str, str], list[ParamDiff]] = {}
    for d in diffs:
        by_name.setdefault((d.name, d.status), []).append(d)
    result = []
    for (name, status), group in by_name.items():
        worst = max(group, key=lambda d: (d.max_abs, d.fraction))
        ranks = sorted({placement_rank(d.coords, dims, replicated) for d in group})
        resets = {d.reset_to for d in group}
        result.append(ParamSummary(
            name=name, status=status, ranks=ranks, where=_where(ranks, dims), max_abs=worst.max_abs,
            mean_abs=max(d.mean_abs for d in group), fraction=max(d.fraction for d in group),
            n_differ=sum(d.n_differ for d in group),
            reset_to=resets.pop() if len(resets) == 1 else None, module_class=worst.module_class, norm=worst.norm,
            note=worst.note, example=worst, role=worst.role,
        ))
    result.sort(key=lambda s: (SEVERITY.get(s.status, 9), -s.max_abs, -s.fraction, s.name))
    return result


def _verdict(params: list[ParamSummary], results: list[PairResult], errors: list[str]) -> str:
    """"same" only when everything both sides hold was read and compared: a slice, a rank or a file that could
    not be read (an error) makes it "incomplete"."""
    if params:
        return "different"
    compared = sum(r.n_compared for r in results)
    if compared == 0:
        return "not compared"
    return "incomplete" if errors or any(r.n_unreadable for r in results) else "same"


def _headline(verdict: str, params: list[ParamSummary], dims: ParallelDims | None,
              results: list[PairResult]) -> str:
    n_pairs = len(results)
    compared = sum(r.n_compared for r in results)
    unread = sum(r.n_unreadable for r in results)
    unread_pairs = sum(1 for r in results if r.n_unreadable)
    if verdict == "not compared":
        if not results or not unread:
            return f"no tensors to compare in {n_pairs} rank pairs"
        return (f"nothing could be read: 0 of {compared + unread} tensors in {n_pairs} rank pairs compared "
                "(see the errors on stderr)")
    if verdict == "incomplete" and unread:
        return (f"no differences among the {compared} tensors compared; {unread} tensors in {unread_pairs} of "
                f"{n_pairs} rank pairs could not be read (see the errors on stderr)")
    if verdict == "incomplete":
        return (f"no differences among the {compared} tensors compared in {n_pairs} rank pairs; some of the input "
                "was not compared (see the errors on stderr)")
    if not params:
        return f"no differences in {n_pairs} rank pairs"
    ranks = sorted({r for p in params for r in p.ranks})
    total = sum(len(p.ranks) for p in params)
    names = ", ".join(p.name for p in params[:3]) + (f" and {len(params) - 3} more" if len(params) > 3 else "")
    return f"all {total} differences are on {_where(ranks, dims)}: {names}"


def _nonfinite_warnings(results: list[PairResult], dims: ParallelDims | None, replicated: bool) -> list[str]:
    """Tensors that hold NaN or inf, once per tensor with where: said even when both sides agree bit for bit."""
    where_of: dict[str, list[int]] = {}
    for r in results:
        for line in r.nonfinite:
            where_of.setdefault(line, []).append(placement_rank(r.coords_b, dims, replicated))
    return [f"{line}, on {describe_ranks(sorted(set(ranks)), dims)}" for line, ranks in where_of.items()]


def _rank_list(dumps: list[RankDump], dims: ParallelDims | None) -> list[str]:
    return [f"{d.label()}" for d in dumps]


def build_diff_report(a: Selection, b: Selection, tol: Tolerance, *, jobs: int = 2,
                      trust_fingerprints: bool = False) -> DiffReport:
    results, only_a, only_b = compare_selections(a, b, tol, jobs=jobs, trust_fingerprints=trust_fingerprints)
    dumps = list(a.dumps.values()) + list(b.dumps.values())
    dims = infer_dims(dumps)
    replicated = all(d.replicated_dp for d in dumps)
    all_diffs = [d for r in results for d in r.diffs]
    params = summarise([d for d in all_diffs if d.is_difference], dims, replicated)
    info = summarise([d for d in all_diffs if not d.is_difference], dims, replicated)
    errors = list(a.errors) + list(b.errors)
    for side, missing, other in (("a", only_a, b), ("b", only_b, a)):
        if missing:
            where = describe_ranks([placement_rank(d.coords, dims, replicated) for d in missing], dims)
            other_has = f"{other.tag}-dump of iteration {other.iteration}" if other.kind == "dumps" else "checkpoint"
            errors.append(f"{len(missing)} rank(s) present in {side} only, on {where} "
                          f"(no {other_has} for them in {other.path}); not compared")
    for r in results:
        errors.extend(r.errors)
    errors = list(dict.fromkeys(errors))  # a file shared by several pairs is one line
    verdict = _verdict(params, results, errors)
    return DiffReport(
        a=_side(a), b=_side(b), tolerance=tol,
        dims=grid_json(dims, dumps),
        headline=_headline(verdict, params, dims, results), params=params, informational=info, pairs=results,
        only_in_a=_rank_list(only_a, dims), only_in_b=_rank_list(only_b, dims), errors=errors,
        warnings=list(a.warnings) + list(b.warnings) + _nonfinite_warnings(results, dims, replicated),
        verdict=verdict, compared_pairs=len(results),
        compared_tensors=sum(r.n_compared for r in results), equal_tensors=sum(r.n_equal for r in results),
        unreadable_tensors=sum(r.n_unreadable for r in results),
        compared_elements=sum(r.elements for r in results), bytes_read=sum(r.bytes_read for r in results),
    )
