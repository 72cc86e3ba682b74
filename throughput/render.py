"""Show a topology plan: a rich table for people, a dict (same fields) for --json. No analysis here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from throughput.memory import GB
from throughput.planner import Plan, PlanRow

RULE_NAMES = {
    "dp-integral": "GPUs not divisible by TP x PP",
    "gbs-divisible": "GBS not divisible by MBS x DP",
    "layers-divisible": "layers not divisible by PP",
    "block-per-stage": "fewer layers than stages",
    "heads-divisible": "heads not divisible by TP",
    "hidden-divisible": "hidden not divisible by heads",
    "tp-in-node": "TP across nodes",
    "whole-nodes": "GPUs not whole nodes",
}


def _gb(value: float) -> str:
    return f"{value / GB:.1f}"


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
        "rows": [row_to_dict(row) for row in plan.rows],
        "rejected": dict(sorted(plan.rejected.items())),
    }


def render_plan(plan: Plan, console: Console, *, limit: int | None = None) -> None:
    r = plan.request
    title = (f"{len(plan.rows)} valid topologies of {plan.candidates} for {r.gpus} GPUs ({r.gpus_per_node} per node), "
             f"GBS {r.global_batch_size}, ZeRO-{r.zero_stage}: {r.shape.describe()}")
    for finding in plan.model_hints:
        console.print(f"hint: {finding.message}", markup=False, highlight=False)
    table = Table(title=title, title_justify="left")
    for name in ("TP", "PP", "DP", "MBS", "µbatches", "bubble", "params/GPU", "states GB", "act GB", "total GB"):
        table.add_column(name, justify="right")
    if r.gpu_memory_gb is not None:
        table.add_column(f"fits {r.gpu_memory_gb:g}GB")
    table.add_column("hints")
    shown = plan.rows if limit is None else plan.rows[:limit]
    for row in shown:
        peak = row.memory.peak
        cells = [str(row.tp), str(row.pp), str(row.dp), str(row.mbs), str(row.micro_batches), f"{row.bubble:.0%}",
                 f"{peak.params_per_gpu / 1e6:,.0f}M", _gb(peak.state_bytes),
                 _gb(peak.activation_bytes) if peak.activation_bytes else "-", _gb(peak.total_bytes)]
        if r.gpu_memory_gb is not None:
            cells.append("yes" if row.fits else "[red]no[/red]")
        cells.append(", ".join(f.rule for f in row.hints))
        table.add_row(*cells)
    console.print(table)
    if limit is not None and len(plan.rows) > limit:
        console.print(f"... {len(plan.rows) - limit} more (--top to show more)")
    if plan.rejected:
        reasons = ", ".join(f"{RULE_NAMES.get(rule, rule)} ({n})" for rule, n in sorted(plan.rejected.items(),
                                                                                        key=lambda kv: -kv[1]))
        console.print(f"rejected: {reasons}")
    console.print("memory is for the busiest stage: model states at "
                  f"{r.bytes_per_param.total} bytes/param with ZeRO-{r.zero_stage} over DP"
                  + (", plus a rough activation estimate" if r.estimate_activations else "")
                  + "; CUDA context and fragmentation not included")
