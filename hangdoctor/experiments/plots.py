"""PNG bar charts of the results, after the seeds' "throughput for different parallelism strategies" figure:
one group of bars per configuration, one bar per toggle setting, the bar at the median over the repeats
that completed, every run a dot on it, and hung or failed runs marked where they stand (a red X with "hung";
at zero when the run hung before giving a figure). matplotlib (Agg) is imported here only.
"""

from __future__ import annotations

import importlib.util

import statistics
from collections.abc import Sequence
from pathlib import Path

from hangdoctor.experiments.results import RunResult
from hangdoctor.experiments.tables import common_label

METRICS = {  # --plot name -> (RunResult field, axis label, file name, title)
    "tokens": ("tokens_per_s", "tokens/s", "throughput.png", "Throughput (tokens/s)"),
    "tflops": ("tflops", "TFLOPs per GPU", "tflops.png", "TFLOPs per GPU"),
    "samples": ("samples_per_s", "samples/s", "samples.png", "Samples/s"),
    "sec": ("sec_per_it", "sec/it", "sec_per_it.png", "Seconds per iteration"),
}
MARKS = {"hung": ("X", "#d62728"), "failed": ("x", "#555555"), "timeout": ("v", "#ff7f0e")}


def setting_label(result: RunResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in result.toggles.items()) or "as configured"


def config_label(config: str, results: Sequence[RunResult]) -> str:
    first = next((r for r in results if r.config == config and r.tp is not None), None)
    if first is None:
        return config
    return f"{config}\nTP={first.tp} PP={first.pp} DP={first.dp}"


def plots_available() -> bool:
    """matplotlib is an extra (`pip install 'hangdoctor[plots]'`): login nodes need no plotting library."""
    return importlib.util.find_spec("matplotlib") is not None


def plot_metric(results: Sequence[RunResult], path: Path, metric: str = "tokens") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    field, axis_label, _, title = METRICS[metric]
    configs = list(dict.fromkeys(r.config for r in results))
    settings = list(dict.fromkeys(setting_label(r) for r in results))
    width = 0.8 / max(1, len(settings))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(configs) * len(settings) + 2.5), 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    top = max([getattr(r, field) or 0.0 for r in results] + [0.0]) or 1.0
    marked: set[str] = set()
    for j, setting in enumerate(settings):
        colour = colours[j % len(colours)]
        for i, config in enumerate(configs):
            runs = [r for r in results if r.config == config and setting_label(r) == setting]
            x = i + (j - (len(settings) - 1) / 2) * width
            good = [getattr(r, field) for r in runs if r.status in ("completed", "log") and getattr(r, field)]
            if good:
                ax.bar(x, statistics.median(good), width * 0.9, color=colour, zorder=2)
                if len(runs) > 1:
                    ax.scatter([x] * len(good), good, s=14, color="black", zorder=3)
            bad = [r for r in runs if r.status in MARKS]
            for r in bad:
                marker, mark_colour = MARKS[r.status]
                y = getattr(r, field) or 0.0
                ax.scatter([x], [y], marker=marker, s=90, color=mark_colour, zorder=4, clip_on=False)
                marked.add(r.status)
            if bad:
                statuses = sorted({r.status for r in bad})
                text = " ".join(f"{sum(r.status == s for r in bad)}/{len(runs)} {s}" if len(runs) > 1 else s
                                for s in statuses)
                base = max([getattr(r, field) or 0.0 for r in bad] + ([statistics.median(good)] if good else []))
                ax.annotate(text, (x, base), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=8,
                            color=MARKS[statuses[0]][1], rotation=90 if len(settings) > 3 else 0)
    ax.set_xticks(range(len(configs)), labels=[config_label(c, results) for c in configs])
    label = common_label(results)
    ax.set_ylabel(axis_label + (f"\n({label})" if label else ""))
    ax.set_ylim(0, top * 1.25)
    ax.set_title(f"{title} for different configurations and toggles")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    handles = [Patch(color=colours[j % len(colours)], label=s) for j, s in enumerate(settings)]
    handles += [Line2D([], [], marker=MARKS[s][0], color=MARKS[s][1], linestyle="", markersize=9, label=s)
                for s in MARKS if s in marked]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
