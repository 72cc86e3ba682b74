"""How far the per-GPU memory estimate is from what the seeds measured (nvidia-smi peaks, 80GB A100s).

    .venv/bin/python bench/memory_vs_seeds.py

Rows are seeds/002's 181B runs (72 layers, hidden 14336, 64 heads, vocab 250880, seq 2048, fp16, ZeRO-1,
activation checkpointing, 02-21 and 02-25 tables). Prints a markdown table: measured, estimated (model states +
activations), their ratio, and whether the planner's "fits in 80GB" agrees with what happened.
"""

from __future__ import annotations

from hangdoctor.throughput.memory import GB, memory_per_gpu
from hangdoctor.throughput.model_size import ModelShape

SHAPE = ModelShape(layers=72, hidden=14336, heads=64, vocab=250880, seq_length=2048)
# (DP, TP, PP, MBS, GBS, measured GB or None for OOM, table)
ROWS = [
    (4, 8, 12, 1, 2048, 29, "02-21 contenders"), (4, 8, 12, 2, 2048, 37, "02-21 contenders"),
    (4, 8, 12, 4, 2048, 49, "02-21 contenders"), (4, 8, 12, 8, 2048, 69, "02-21 contenders"),
    (8, 8, 6, 1, 2048, 38, "02-21 contenders"), (8, 8, 6, 2, 2048, 44, "02-21 contenders"),
    (8, 8, 6, 4, 2048, 56, "02-21 contenders"),
    (8, 4, 12, 4, 2048, 60, "02-25 tweaking TP"), (8, 4, 12, 2, 2048, 44, "02-25 tweaking TP"),
    (16, 4, 6, 4, 2048, 75, "02-25 tweaking TP"), (16, 4, 6, 2, 2048, 57, "02-25 tweaking TP"),
    (16, 2, 12, 2, 2048, 63, "02-25 tweaking TP"), (32, 2, 6, 2, 2048, None, "02-25 tweaking TP"),
    (32, 2, 6, 1, 2048, None, "02-25 tweaking TP"), (8, 2, 24, 1, 2048, 44, "02-25 tweaking TP"),
    (8, 2, 24, 2, 2048, 53, "02-25 tweaking TP"),
    (8, 8, 6, 4, 2048, 55, "02-25 GBS variations"), (8, 8, 6, 6, 2016, 66, "02-25 GBS variations"),
    (4, 8, 12, 4, 2048, 49, "02-25 GBS variations"), (6, 8, 8, 4, 2016, 52, "02-25 GBS variations"),
    (12, 8, 4, 2, 2016, 53, "02-25 GBS variations"), (12, 8, 4, 4, 2016, 59, "02-25 GBS variations"),
    (24, 8, 2, 1, 2016, 65, "02-25 GBS variations"), (24, 8, 2, 2, 2016, 76, "02-25 GBS variations"),
    (48, 8, 1, 1, 2016, None, "02-25 GBS variations"),
]


def main() -> None:
    print("| table | DP | TP | PP | MBS | measured | states | + act | estimate/measured | fits 80GB, agrees |")
    print("| --- | -: | -: | -: | --: | -------: | -----: | ----: | ----------------: | ----------------- |")
    ratios = []
    for dp, tp, pp, mbs, gbs, measured, table in ROWS:
        est = memory_per_gpu(SHAPE, tp=tp, pp=pp, dp=dp, zero_stage=1, micro_batch_size=mbs,
                             micro_batches=gbs // (mbs * dp)).peak
        total = est.total_bytes / GB
        fits = total <= 80
        agrees = fits == (measured is not None)
        if measured:
            ratios.append(total / measured)
        ratio = f"{total / measured:.2f}" if measured else "-"
        print(f"| {table} | {dp} | {tp} | {pp} | {mbs} | {f'{measured}GB' if measured else 'OOM'} | "
              f"{est.state_bytes / GB:.1f} | {est.activation_bytes / GB:.1f} | {ratio} | "
              f"{'yes' if fits else 'no'}, {'agrees' if agrees else 'DISAGREES'} |")
    print(f"\nestimate/measured over {len(ratios)} measured rows: min {min(ratios):.2f}, max {max(ratios):.2f}, "
          f"median {sorted(ratios)[len(ratios) // 2]:.2f}")


if __name__ == "__main__":
    main()
