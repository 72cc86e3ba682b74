"""How one parameter's copies move apart over iterations (`weightdiff drift DIR NAME`).

For every dumped iteration (one tag), all ranks that hold the parameter under the same tp rank and shape are
copies that should be equal (tied copies on several stages, dp replicas). Per iteration: the number of
distinct values among them (by hash), each copy's norm, and the largest element difference from the
reference copy (the lowest rank), read from the values when the dumps have them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from weightdiff.analysis.compare import Tolerance, compare_tensor
from weightdiff.read.dtypes import itemsize
from weightdiff.errors import BadInput
from weightdiff.read.sources import scan, select
from weightdiff.read.values import open_values
from weightdiff.read.whole import KIND_NAMES


@dataclass
class DriftPoint:
    iteration: int
    tp: int
    copies: int
    distinct: int
    norms: dict[str, float]  # rank label -> norm
    max_abs: float | None  # largest |copy - reference| over copies; None without values


@dataclass
class DriftReport:
    path: str
    name: str
    tag: str
    points: list[DriftPoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        return any(p.distinct > 1 for p in self.points)


def build_drift_report(path: Path, name: str, *, tag: str | None = None, jobs: int = 2) -> DriftReport:
    scanned = scan(path)
    first = select(path, tag=tag, which="first", prefer_tag="after", jobs=jobs, scanned=scanned)
    if first.kind != "dumps":
        what = KIND_NAMES.get(first.kind, first.kind.replace("-", " "))  # "deepspeed-checkpoint" -> words
        raise BadInput(f"{path}: a {what} holds one moment; drift needs a folder of dumps")
    report = DriftReport(path=str(path), name=name, tag=first.tag or "")
    for iteration in first.iterations:
        try:
            sel = select(path, iteration=iteration, tag=first.tag, jobs=jobs, scanned=scanned)
        except BadInput as e:
            report.errors.append(str(e))
            continue
        report.errors.extend(sel.errors)
        holders = sorted((d for d in sel.dumps.values() if name in d.tensors), key=lambda d: d.coords.rank)
        for tp in sorted({d.coords.tp for d in holders}):
            copies = [d for d in holders if d.coords.tp == tp]
            metas = [d.tensors[name] for d in copies]
            hashes = {m.fingerprint.sha256 for m in metas if m.fingerprint}
            norms = {d.label(): m.fingerprint.norm for d, m in zip(copies, metas) if m.fingerprint}
            report.points.append(DriftPoint(iteration=iteration, tp=tp, copies=len(copies),
                                            distinct=len(hashes) if hashes else 0, norms=norms,
                                            max_abs=_max_gap(copies, name, report.errors)))
    report.errors = list(dict.fromkeys(report.errors))
    if not report.points:
        raise BadInput(f"{path}: no {report.tag}-dump holds a parameter named {name!r}")
    return report


def _max_gap(copies, name: str, errors: list[str]) -> float | None:
    ref = copies[0]
    if ref.tensor_source is None or len(copies) < 2:
        return None if ref.tensor_source is None else 0.0
    worst = 0.0
    try:
        with open_values(ref) as va:
            for other in copies[1:]:
                if other.tensor_source is None or other.tensors[name].shape != ref.tensors[name].shape:
                    continue
                with open_values(other) as vb:
                    meta = ref.tensors[name]
                    vd = compare_tensor(va, vb, name, meta.shape, Tolerance(), itemsize(meta.dtype),
                                        (meta.dtype, other.tensors[name].dtype))
                    worst = max(worst, vd.max_abs)
    except BadInput as e:
        errors.append(str(e))
        return None
    return worst
