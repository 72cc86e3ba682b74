"""One figure per run from its iteration lines: medians after the warm-up, saying which iterations they cover.

The first iterations of a run are slower (allocator warm-up, NCCL set-up, the pipeline filling for the first
time), so they are left out; the report says "median of iterations 3-10" rather than a bare number.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from hangdoctor.throughput.megatron_log import ParsedIteration
from hangdoctor.topology import fold_ranks


@dataclass(frozen=True)
class ThroughputSummary:
    iterations: tuple[int, ...]  # the iterations the medians are taken over
    warmup: int  # how many first iterations were left out
    seconds_per_iteration: float
    tflops: float | None
    samples_per_second: float | None
    tokens_per_second: float | None

    @property
    def label(self) -> str:
        return f"median of iteration{'s' if len(self.iterations) > 1 else ''} {fold_ranks(self.iterations)}"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(parsed: list[ParsedIteration], *, warmup: int = 2) -> ThroughputSummary:
    """Medians over the iterations after the first `warmup` ones; a repeated iteration (several printing ranks,
    a restart) counts once, its last line winning. ValueError when nothing is left to summarise."""
    if warmup < 0:
        raise ValueError(f"warm-up of {warmup} iterations: must be 0 or more")
    by_iteration = {p.iteration: p for p in parsed if p.elapsed_ms is not None}
    if not by_iteration:
        raise ValueError("no Megatron iteration line with an elapsed time in the log")
    ordered = [by_iteration[i] for i in sorted(by_iteration)]
    kept = ordered[warmup:]
    if not kept:
        raise ValueError(
            f"only {len(ordered)} iteration(s) ({fold_ranks(by_iteration)}), all within the warm-up of {warmup}"
        )
    return ThroughputSummary(
        iterations=tuple(p.iteration for p in kept),
        warmup=warmup,
        seconds_per_iteration=statistics.median(p.elapsed_ms for p in kept) / 1000.0,
        tflops=_median([p.tflops for p in kept]),
        samples_per_second=_median([p.samples_per_second for p in kept]),
        tokens_per_second=_median([p.tokens_per_second for p in kept]),
    )
