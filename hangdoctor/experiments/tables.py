"""The results as a pandas DataFrame (CSV), a markdown table in the seeds' style, and a rich table.

The seeds' tables read `| GPUs | Size | DP | TP | PP | MBS | GBS | Sec/it | TFLOPs | Notes |`, right-aligned,
with notes such as "may hang" and a footnote saying what the figure is ("Sec/it throughput at iteration 2").
Here each toggle gets a column, and a hung run's note carries hangdoctor's verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from hangdoctor.experiments.results import RunResult
from hangdoctor.throughput.model_size import format_params

FIGURE_COLUMNS = ("Sec/it", "TFLOPs", "Samples/s", "Tokens/s")
MEGATRON_ONLY = ("Size", "MBS", "GBS", "TFLOPs", "Samples/s", "Tokens/s")  # what a script's own lines rarely give
SHORT_NOTE = 30  # longer notes go below the terminal table


def format_number(value: float | None) -> str:
    """Two decimals from 1 up (the seeds' 189.06, 91.67); three significant digits below, never 0.00."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    decimals = 2 - math.floor(math.log10(abs(value)))
    return f"{value:.{decimals}f}"


def toggle_names(results: Sequence[RunResult]) -> list[str]:
    names: list[str] = []
    for result in results:
        names += [name for name in result.toggles if name not in names]
    return names


def common_label(results: Sequence[RunResult]) -> str | None:
    """The "median of iterations 3-6" most measured runs share (the first in run order on a tie); a run measured
    over other iterations (one that hung early, a shorter log) says so in its note."""
    labels = Counter(r.measured_over for r in results if r.sec_per_it is not None)
    return labels.most_common(1)[0][0] if labels else None


def note(result: RunResult, shared_label: str | None = None) -> str:
    where = (f"after iteration {result.last_iteration}" if result.last_iteration is not None
             else "before the first iteration")
    measured = (f" ({result.measured_over})" if result.sec_per_it is not None and result.measured_over != shared_label
                else "")
    if result.status == "hung":
        return f"hung {where}{measured}: {result.verdict or result.reason}"
    if result.status == "failed":
        return f"failed {where}{measured}: {result.error or result.reason}"
    if result.status in ("timeout", "not started", "interrupted"):
        return f"{result.status}: {result.reason}"
    if result.sec_per_it is not None and result.measured_over != shared_label:
        return result.measured_over
    return "" if result.sec_per_it is not None else result.measured_over


def megatron_figures(results: Sequence[RunResult]) -> bool:
    """Whether any run has a shape or a figure beyond sec/it (Megatron's lines and the trainer's config.json give
    them; a script's own log read with --iteration-regex gives sec/it only, and its table has no empty columns)."""
    return any(v is not None for r in results
               for v in (r.params, r.mbs, r.gbs, r.tflops, r.samples_per_s, r.tokens_per_s))


def table_rows(results: Sequence[RunResult]) -> tuple[list[str], list[list[str]]]:
    """Header and cells, shared by the markdown and the rich table."""
    header, rows = _all_rows(results)
    if megatron_figures(results):
        return header, rows
    kept = [i for i, name in enumerate(header) if name not in MEGATRON_ONLY]
    return [header[i] for i in kept], [[row[i] for i in kept] for row in rows]


def _all_rows(results: Sequence[RunResult]) -> tuple[list[str], list[list[str]]]:
    toggles = toggle_names(results)
    shared = common_label(results)
    header = ["Config", "GPUs", "Size", "DP", "TP", "PP", "MBS", "GBS", *toggles, *FIGURE_COLUMNS, "Notes"]
    rows = []
    for r in results:
        plain = [r.config, r.gpus, format_params(r.params), r.dp, r.tp, r.pp, r.mbs, r.gbs]
        rows.append([
            *("-" if v is None else str(v) for v in plain),
            *(r.toggles.get(name, "-") for name in toggles),
            *(format_number(v) for v in (r.sec_per_it, r.tflops, r.samples_per_s, r.tokens_per_s)),
            note(r, shared),
        ])
    return header, rows


def footnote(results: Sequence[RunResult]) -> str:
    measured = [r for r in results if r.sec_per_it is not None]
    if not measured:
        return "No run printed enough iteration lines to measure."
    shared = common_label(results)
    warmup = measured[0].warmup
    others = any(r.measured_over != shared for r in measured)
    span = f"{shared} of each run" + (" unless its note says otherwise" if others else "")
    left_out = {0: "no warm-up left out", 1: "the first iteration is warm-up"}.get(
        warmup, f"the first {warmup} iterations are warm-up")
    if not megatron_figures(results):
        return f"Sec/it: {span} ({left_out})."
    return (f"Sec/it, TFLOPs, samples/s and tokens/s: {span} ({left_out}). TFLOPs per GPU by Megatron's "
            f"formula (Narayanan et al.) from sec/it and the model's shape; tokens/s = samples/s x sequence length.")


def _md(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def render_markdown(results: Sequence[RunResult], *, title: str = "") -> str:
    header, rows = table_rows(results)
    left = {"Config", "Notes"}
    lines = [f"## {title}", ""] if title else []
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| " + " | ".join(":--" if h in left else "--:" for h in header) + " |")
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    lines += ["", "* " + footnote(results), ""]
    return "\n".join(lines)


def render_table(results: Sequence[RunResult], console: Console, *, title: str = "") -> None:
    """The same table for a terminal: a long note (a verdict) becomes "hung [1]", written out below the table."""
    header, rows = table_rows(results)
    table = Table(title=title or None, title_justify="left", box=box.SIMPLE_HEAD)
    for name in header:
        table.add_column(name, justify="left" if name in ("Config", "Notes") else "right", no_wrap=True)
    status_style = {"hung": "red", "failed": "red", "timeout": "yellow", "not started": "yellow"}
    notes = []
    for result, row in zip(results, rows):
        if len(row[-1]) > SHORT_NOTE:
            notes.append(f"[{len(notes) + 1}] {result.run}: {row[-1]}")
            row[-1] = f"{result.status} [{len(notes)}]"
        table.add_row(*row, style=status_style.get(result.status))
    # Never cut a figure: a table wider than the console is printed at its natural width (the terminal wraps).
    natural = Measurement.get(console, console.options.update(width=100_000), table).maximum
    wide = console if natural <= console.width else Console(
        file=console.file, width=natural, color_system=console.color_system, force_terminal=console.is_terminal,
        highlight=False)
    wide.print(table)
    for line in [*notes, footnote(results)]:
        console.print(line, markup=False, highlight=False)


def csv_rows(results: Sequence[RunResult]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per run, every RunResult field, each toggle in a column of its own; a missing value
    is an empty cell, integers stay integers (standard library only: the csv module writes them)."""
    toggles = toggle_names(results)
    records = []
    for r in results:
        row = r.to_dict()
        row.pop("toggles")
        row.update({name: r.toggles.get(name) for name in toggles})
        records.append(row)
    header = list(dict.fromkeys(key for row in records for key in row))
    cell = lambda value: "" if value is None else str(value)  # noqa: E731
    return header, [[cell(row.get(key)) for key in header] for row in records]
