"""PNG pictures with matplotlib's Agg backend (no display needed): where in the (pp, tp) grid things differ.

- `diff_heatmap`: per (pp, tp) cell, how many (parameter, dp rank) pairs differ between a/ and b/;
- `check_heatmap`: per (pp, tp) cell, how many copies differ from their reference (tied, dp, tp checks);
- `drift_plot`: one parameter over iterations: the largest difference between its copies, and each copy's norm.
The seed's "all 64 mismatches are on pp=11" is one bright row.

Each picture is written as a PNG at exactly the path given (matplotlib would otherwise add ".png" to a name
without one), through a temporary file and a rename, so a failed write leaves no partial file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from weightdiff.analysis.check_report import CheckReport
from weightdiff.analysis.diff_report import DiffReport
from weightdiff.analysis.drift import DriftReport


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
    top = max(1, max(max(r) for r in values))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * tp + 2.5), max(3.2, 0.35 * pp + 2)), dpi=100)
    image = ax.imshow(values, cmap="Reds", aspect="auto", vmin=0, vmax=top)
    ax.set_xlabel("tp rank")
    ax.set_ylabel("pp stage")
    ax.set_xticks(range(tp))
    ax.set_yticks(range(pp))
    if pp * tp <= 400:
        for p in range(pp):
            for t in range(tp):
                ax.text(t, p, str(values[p][t]), ha="center", va="center", fontsize=8,
                        color="white" if values[p][t] > top / 2 else "black")
    fig.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            fig.savefig(f, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path


def diff_heatmap(report: DiffReport, path: Path) -> Path:
    cells: dict[tuple[int, int], int] = {}
    for pair in report.pairs:
        for d in pair.diffs:
            if d.is_difference:
                cells[(d.coords.pp, d.coords.tp)] = cells.get((d.coords.pp, d.coords.tp), 0) + 1
    title = f"differing (parameter, dp rank) per (pp, tp)\na: {report.a.path}\nb: {report.b.path}"
    return _heatmap(cells, report.dims, title, path)


def check_heatmap(report: CheckReport, path: Path) -> Path:
    cells: dict[tuple[int, int], int] = {}
    for finding in report.findings:
        for pair in finding.pairs:
            coords = pair["other_coords"]
            cells[(coords["pp"], coords["tp"])] = cells.get((coords["pp"], coords["tp"]), 0) + 1
    return _heatmap(cells, report.dims, f"copies differing from their reference\nper (pp, tp): {report.path}", path)


def drift_plot(report: DriftReport, path: Path, *, max_lines: int = 16) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (gap_ax, norm_ax) = plt.subplots(2, 1, figsize=(7, 5.5), dpi=100, sharex=True)
    for tp in sorted({p.tp for p in report.points}):
        points = [p for p in report.points if p.tp == tp and p.max_abs is not None]
        if points:
            gap_ax.plot([p.iteration for p in points], [p.max_abs for p in points], marker="o", label=f"tp={tp}")
    gap_ax.set_ylabel("max |copy - reference|")
    gap_ax.legend(fontsize=7)
    labels = sorted({label for p in report.points for label in p.norms})
    for label in labels[:max_lines]:
        points = [p for p in report.points if label in p.norms]
        norm_ax.plot([p.iteration for p in points], [p.norms[label] for p in points], label=label, linewidth=1)
    norm_ax.set_ylabel("norm of each copy")
    norm_ax.set_xlabel(f"iteration ({report.tag}-dumps)")
    from matplotlib.ticker import MaxNLocator

    norm_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(labels) <= max_lines:
        norm_ax.legend(fontsize=6, ncol=2)
    fig.suptitle(f"{report.name}\n{report.path}", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
