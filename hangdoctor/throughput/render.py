"""Show a topology plan: a rich table for people, a dict (same fields) for --json. No analysis here."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from hangdoctor.throughput.memory import GB
from hangdoctor.throughput.model_size import format_params
from hangdoctor.throughput.planner import Plan, PlanRow

RULE_NAMES = {
    "dp-integral": "GPUs not divisible by TP x PP",
    "gbs-divisible": "GBS not divisible by MBS x DP",
    "layers-divisible": "layers not divisible by PP",
    "block-per-stage": "fewer layers than stages",
    "heads-divisible": "heads not divisible by TP",
    "hidden-divisible": "hidden not divisible by heads",
    "tp-in-node": "TP across nodes",
    "whole-nodes": "GPUs not a whole number of nodes",
}


def _gb(value: float) -> str:
    """GB with one decimal; below 0.1 GB two significant digits (a small model is not "0.0")."""
    gb = value / GB
    return f"{gb:.1f}" if gb >= 0.1 or gb == 0 else f"{gb:.2g}"


def _params(count: int) -> str:
    """Parameters per GPU as the seeds print them, 7,849M; a small model in its own unit (274K)."""
    return f"{count / 1e6:,.0f}M" if count >= 1e6 else format_params(count)


def row_to_dict(row: PlanRow) -> dict:
    peak = row.memory.peak
    return {
        "tp": row.tp, "pp": row.pp, "dp": row.dp, "mbs": row.mbs, "micro_batches": row.micro_batches,
        "bubble": round(row.bubble, 4),
        "peak_stage": peak.stage,
        "params_per_gpu": peak.params_per_gpu,
        "state_bytes": round(peak.state_bytes),
        "activation_bytes": round(peak.activation_bytes),
        "total_bytes": round(peak.total_bytes),
        "fits": row.fits,
        "hints": [{"rule": f.rule, "message": f.message} for f in row.hints],
    }


def plan_to_dict(plan: Plan) -> dict:
    r = plan.request
    return {
        "model": {"layers": r.shape.layers, "hidden": r.shape.hidden, "heads": r.shape.heads, "vocab": r.shape.vocab,
                  "seq_length": r.shape.seq_length, "params": r.shape.params, "ratio": r.shape.ratio},
        "gpus": r.gpus, "gpus_per_node": r.gpus_per_node, "global_batch_size": r.global_batch_size,
        "zero_stage": r.zero_stage, "embedding_as_layer": r.embedding_as_layer, "gpu_memory_gb": r.gpu_memory_gb,
        "bytes_per_param": r.bytes_per_param.total,
        "model_hints": [{"rule": f.rule, "message": f.message} for f in plan.model_hints],
        "searched": {"tp": list(plan.tps), "mbs": sorted(set(r.micro_batch_sizes))},
        "candidates": plan.candidates,
        "blockers": [{"rule": f.rule, "message": f.message} for f in plan.blockers],
        "rows": [row_to_dict(row) for row in plan.rows],
        "rejected_candidates": plan.rejected_count,
        "rejected": dict(sorted(plan.rejected.items())),
    }


def blocker_text(plan: Plan, rule: str, message: str) -> str:
    r = plan.request
    if rule == "whole-nodes":
        below, above = r.gpus // r.gpus_per_node * r.gpus_per_node, -(-r.gpus // r.gpus_per_node) * r.gpus_per_node
        advice = " or ".join(str(n) for n in (below, above) if n) + " GPUs"
        return f"every topology is rejected: {message} (ask for {advice}, or give --gpus-per-node as allocated)"
    return f"every topology is rejected: {message}"


def print_natural(table: Table, console: Console) -> None:
    """Never cut a figure: a table wider than the console is printed at its natural width (the terminal wraps)."""
    natural = _width(table, console)
    wide = console if natural <= console.width else Console(
        file=console.file, width=natural, color_system=console.color_system, force_terminal=console.is_terminal,
        highlight=False)
    wide.print(table)


HEADERS = ("TP", "PP", "DP", "MBS", "µbatches", "bubble", "params/GPU", "states GB", "act GB", "total GB")


def _width(table: Table, console: Console) -> int:
    return Measurement.get(console, console.options.update(width=100_000), table).maximum


def _plan_table(plan: Plan, rows: list, *, narrow: bool) -> Table:
    """The rows as a table; `narrow` folds it into 80 columns (each header on two lines where it has a space or a
    slash, no vertical rules, the hints column wrapped) without cutting a figure."""
    memory = plan.request.gpu_memory_gb
    headers = [*HEADERS, *([f"fits {memory:g}GB"] if memory is not None else []), "hints"]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True, pad_edge=False) if narrow else Table()
    for name in headers:
        title = name.replace(" ", "\n").replace("/", "\n/").replace("µbatches", "micro-\nbatches") if narrow else name
        wraps = narrow and name == "hints"
        table.add_column(title, justify="left" if name.startswith(("fits", "hints")) else "right", no_wrap=not wraps)
    for row in rows:
        peak = row.memory.peak
        cells = [str(row.tp), str(row.pp), str(row.dp), str(row.mbs), str(row.micro_batches), f"{row.bubble:.0%}",
                 _params(peak.params_per_gpu), _gb(peak.state_bytes),
                 _gb(peak.activation_bytes) if peak.activation_bytes else "-", _gb(peak.total_bytes)]
        if memory is not None:
            cells.append("yes" if row.fits else "[red]no[/red]")
        cells.append(", ".join(f.rule for f in row.hints))
        table.add_row(*cells)
    return table


def render_plan(plan: Plan, console: Console, *, limit: int | None = None) -> None:
    r = plan.request
    console.print(f"{len(plan.rows)} valid topologies of {plan.candidates} for {r.gpus} GPUs ({r.gpus_per_node} per "
                  f"node), GBS {r.global_batch_size}, ZeRO-{r.zero_stage}: {r.shape.describe()}",
                  markup=False, highlight=False)
    for finding in plan.model_hints:
        console.print(f"hint: {finding.message}", markup=False, highlight=False)
    for finding in plan.blockers:
        console.print(blocker_text(plan, finding.rule, finding.message), markup=False, highlight=False)
    shown = plan.rows if limit is None else plan.rows[:limit]
    if plan.rows:
        table = _plan_table(plan, shown, narrow=False)
        if _width(table, console) > console.width:  # fold: two-line headers, no inner rules, hints wrapped
            table = _plan_table(plan, shown, narrow=True)
        print_natural(table, console)
    if limit is not None and len(plan.rows) > limit:
        console.print(f"... {len(plan.rows) - limit} more (--top to show more)")
    tps = ",".join(map(str, plan.tps))
    console.print(f"searched: TP {tps} (within a node of {r.gpus_per_node}, dividing {r.gpus} GPUs) x every PP "
                  f"dividing GPUs/TP x MBS {','.join(map(str, sorted(set(r.micro_batch_sizes))))}",
                  markup=False, highlight=False)
    if plan.rejected:
        reasons = ", ".join(f"{RULE_NAMES.get(rule, rule)} ({n})" for rule, n in sorted(plan.rejected.items(),
                                                                                        key=lambda kv: -kv[1]))
        several = " (a candidate may break several rules)" if sum(plan.rejected.values()) > plan.rejected_count else ""
        console.print(f"rejected {plan.rejected_count} of {plan.candidates}: {reasons}{several}",
                      markup=False, highlight=False)
    console.print("memory is for the busiest stage: model states at "
                  f"{r.bytes_per_param.total} bytes/param with ZeRO-{r.zero_stage} over DP"
                  + (", plus a rough activation estimate" if r.estimate_activations else "")
                  + "; CUDA context and fragmentation not included", markup=False, highlight=False)
