"""Everything an experiment leaves in its folder besides the runs: written again after every run, so an
interrupted experiment still has its tables.

    OUT/matrix.json    the matrix as it was run
    OUT/results.csv    one row per run, every field of RunResult, a column per toggle
    OUT/results.json   the same rows as JSON (what --json prints)
    OUT/results.md     the seeds-style markdown table
    OUT/throughput.png tokens/s per configuration and toggle (and tflops.png, ...: one per --plot metric), when
                       matplotlib is installed (the `plots` extra); the tables are written without it
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from hangdoctor.clicore.jsondoc import document
from hangdoctor.experiments.plots import METRICS, plot_metric, plots_available
from hangdoctor.experiments.results import RESULT_NAME, RunResult
from hangdoctor.experiments.tables import csv_rows, render_markdown


def load_results(out: Path) -> list[RunResult]:
    """Every RUN/result.json under OUT/runs/, in run order (unreadable ones are skipped)."""
    results = []
    for path in sorted((out / "runs").glob(f"*/{RESULT_NAME}")):
        try:
            results.append(RunResult.load(path.parent))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(results, key=lambda r: (r.index, r.run))


def results_json(results: Sequence[RunResult]) -> str:
    return json.dumps(document("hangdoctor-experiment/1", {"runs": [r.to_dict() for r in results]}), indent=1) + "\n"


def output_names(metrics: Sequence[str] = ("tokens", "tflops")) -> list[str]:
    """The files write_outputs writes in its folder."""
    return ["results.csv", "results.json", "results.md", *(METRICS[m][2] for m in metrics)]


def write_outputs(results: Sequence[RunResult], out: Path, *, title: str = "", metrics: Sequence[str] = ("tokens",
                  "tflops")) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    header, rows = csv_rows(results)
    with open(out / "results.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    (out / "results.json").write_text(results_json(results))
    (out / "results.md").write_text(render_markdown(results, title=title))
    written += [out / "results.csv", out / "results.json", out / "results.md"]
    for metric in metrics if plots_available() else ():
        written.append(plot_metric(results, out / METRICS[metric][2], metric))
    return written
