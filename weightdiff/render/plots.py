"""PNG pictures with matplotlib's Agg backend (no display needed): where in the (pp, tp) grid things differ.

- `diff_heatmap`: per (pp, tp) cell, how many (parameter, dp rank) pairs differ between a/ and b/;
- `check_heatmap`: per (pp, tp) cell, how many copies differ from their reference (tied, dp, tp checks).
The seed's "all 64 mismatches are on pp=11" is one bright row.
"""

from __future__ import annotations

from pathlib import Path

from weightdiff.analysis.check_report import CheckReport
from weightdiff.analysis.diff_report import DiffReport


def _grid(report_dims: dict | None, cells: dict[tuple[int, int], int]) -> tuple[int, int]:
    pp = max([report_dims["pp"] if report_dims else 1] + [p + 1 for p, _ in cells])
    tp = max([report_dims["tp"] if report_dims else 1] + [t + 1 for _, t in cells])
    return pp, tp


def _heatmap(cells: dict[tuple[int, int], int], dims: dict | None, title: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pp, tp = _grid(dims, cells)
    values = [[cells.get((p, t), 0) for t in range(tp)] for p in range(pp)]
    fig, ax = plt.subplots(figsize=(max(3.0, 0.6 * tp + 2), max(2.5, 0.35 * pp + 1.5)), dpi=100)
    image = ax.imshow(values, cmap="Reds", aspect="auto", vmin=0, vmax=max(1, max(max(r) for r in values)))
    ax.set_xlabel("tp rank")
    ax.set_ylabel("pp stage")
    ax.set_xticks(range(tp))
    ax.set_yticks(range(pp))
    if pp * tp <= 400:
        for p in range(pp):
            for t in range(tp):
                ax.text(t, p, str(values[p][t]), ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def diff_heatmap(report: DiffReport, path: Path) -> Path:
    cells: dict[tuple[int, int], int] = {}
    for pair in report.pairs:
        for d in pair.diffs:
            if d.is_difference:
                cells[(d.coords.pp, d.coords.tp)] = cells.get((d.coords.pp, d.coords.tp), 0) + 1
    title = f"differing (parameter, dp) per (pp, tp)\na: {report.a.path}  b: {report.b.path}"
    return _heatmap(cells, report.dims, title, path)


def check_heatmap(report: CheckReport, path: Path) -> Path:
    cells: dict[tuple[int, int], int] = {}
    for finding in report.findings:
        for pair in finding.pairs:
            coords = pair["other_coords"]
            cells[(coords["pp"], coords["tp"])] = cells.get((coords["pp"], coords["tp"]), 0) + 1
    return _heatmap(cells, report.dims, f"copies differing from their reference per (pp, tp)\n{report.path}", path)
