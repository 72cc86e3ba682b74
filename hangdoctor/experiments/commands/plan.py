"""Plan a 3D topology: list the valid (TP, PP, DP, MBS) for a model on N GPUs, with estimated memory per GPU.

    hangdoctor plan --gpus 384 --gpus-per-node 8 --layers 72 --hidden 14336 --heads 64 \\
        --vocab 250880 --seq-length 2048 --global-batch-size 2048 --gpu-memory 80

TP stays within a node; PP divides the layers (layers + 2 with --embedding-as-layers); GBS divides by MBS x DP;
heads divide by TP. Memory is the busiest stage's model states at 18 bytes/param (ZeRO shards 12 of them over
DP) plus a rough activation estimate; pass the padded vocabulary (Megatron pads to a multiple of 128 x TP).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from hangdoctor.clicore.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, INTERRUPTED_TEXT, CommandError
from hangdoctor.clicore.jsondoc import document
from hangdoctor.clicore.argtypes import positive_float, positive_int, rank_count
from hangdoctor.throughput.model_size import ModelShape
from hangdoctor.throughput.planner import PlanRequest, plan_topologies
from hangdoctor.throughput.render import plan_to_dict, render_plan

EXIT_CODES = {
    EXIT_OK: "some topology is valid (and fits in --gpu-memory, when given)",
    EXIT_PARTIAL: "the table is printed, but no topology is valid, or none fits in --gpu-memory",
    EXIT_USAGE: "bad command line, or an impossible model shape",
    EXIT_INTERRUPTED: INTERRUPTED_TEXT,
}


def _sizes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 1,2,4") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: micro-batch sizes must be positive, e.g. 1,2,4")
    return values


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    hw = parser.add_argument_group("hardware")
    hw.add_argument("--gpus", type=rank_count, required=True, help="GPUs in the job")
    hw.add_argument("--gpus-per-node", type=rank_count, required=True, help="GPUs per node (TP stays within one)")
    hw.add_argument("--gpu-memory", type=positive_float, metavar="GB",
                    help="memory per GPU in GB (e.g. 80): adds a fits column")
    hw.add_argument("--sms", type=positive_int, default=108, help="SMs per GPU for the wave-quantization hint (A100: 108)")
    model = parser.add_argument_group("model")
    model.add_argument("--layers", type=positive_int, required=True)
    model.add_argument("--hidden", type=positive_int, required=True)
    model.add_argument("--heads", type=positive_int, required=True)
    model.add_argument("--vocab", type=positive_int, required=True, help="padded vocabulary size")
    model.add_argument("--seq-length", type=positive_int, required=True)
    run = parser.add_argument_group("training")
    run.add_argument("--global-batch-size", type=positive_int, required=True)
    run.add_argument("--micro-batch-sizes", type=_sizes, default=(1, 2, 4, 8), metavar="1,2,4,8")
    run.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), default=1)
    run.add_argument("--embedding-as-layers", action="store_true",
                     help="DeepSpeed partition_method 'type:transformer|embedding': the 2 embeddings count as layers")
    run.add_argument("--no-activation-checkpointing", action="store_true")
    run.add_argument("--no-activations", action="store_true", help="model states only, no activation estimate")
    out = parser.add_argument_group("output")
    out.add_argument("--top", type=positive_int, default=30, help="rows to show (default 30)")
    out.add_argument("--json", action="store_true", help="every row as JSON on stdout")


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        shape = ModelShape(layers=args.layers, hidden=args.hidden, heads=args.heads, vocab=args.vocab,
                           seq_length=args.seq_length)
        request = PlanRequest(
            shape=shape, gpus=args.gpus, gpus_per_node=args.gpus_per_node, global_batch_size=args.global_batch_size,
            micro_batch_sizes=args.micro_batch_sizes, zero_stage=args.zero_stage,
            embedding_as_layer=args.embedding_as_layers, gpu_memory_gb=args.gpu_memory,
            activation_checkpointing=not args.no_activation_checkpointing,
            estimate_activations=not args.no_activations, sms=args.sms,
        )
    except ValueError as exc:
        raise CommandError(str(exc), hint="see `hangdoctor plan --help`", exit_code=EXIT_USAGE) from None
    plan = plan_topologies(request)
    if args.json:
        # raw: never wrapped or coloured
        out.file.write(json.dumps(document("hangdoctor-plan/1", plan_to_dict(plan)), indent=1) + "\n")
    else:
        render_plan(plan, out, limit=args.top)
    usable = [row for row in plan.rows if row.fits is not False]
    if not usable:
        why = "none fits in memory" if plan.rows else "no topology is valid"
        because = "; ".join(f.message for f in plan.blockers)
        err.print(f"Warning: {why} for {args.gpus} GPUs" + (f": {because}" if because else ""), markup=False,
                  highlight=False, soft_wrap=True)
        return EXIT_PARTIAL
    return EXIT_OK
