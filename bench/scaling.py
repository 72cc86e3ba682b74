"""The scaling guard's core: time one stage at size N and at 4N in the same run and compare (a ratio).

A stage is a function of a prepared input; `ratio` times it at both sizes, interleaved, repeats the shorter
measurement until each timing is long enough to mean something (the same number of calls at both sizes), and
keeps the fastest of the repeats, so that a shared machine's noise does not move the ratio much. A linear stage
gives about 4 at 4x the input; a quadratic one about 16. No absolute time is ever compared with anything.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

LIMIT = 6.0  # at 4x the input, a ratio above this is not linear (n log n at 4x gives under 5)
# a stage whose call takes under this at 4x the input is reported, not judged: at a millisecond the caches and the
# scheduler move its ratio by more than the limit allows (tracing's last report, 0.7-0.9 -> 3.5-8.2 ms, read 3.5-8.9x
# in runs of the same code), and a quadratic stage crosses it within two doublings
FLOOR_S = 0.020


@dataclass
class Ratio:
    stage: str
    small: float  # seconds per call at N
    large: float  # seconds per call at 4N
    calls: int  # calls per timing

    @property
    def value(self) -> float:
        return self.large / self.small if self.small > 0 else float("inf")

    @property
    def judged(self) -> bool:
        return self.large >= FLOOR_S

    @property
    def ok(self) -> bool:
        return self.value <= LIMIT or not self.judged


def _timed(fn: Callable[[], object], calls: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def ratio(stage: str, small: Callable[[], object], large: Callable[[], object], *, repeats: int = 5,
          min_seconds: float = 0.05) -> Ratio:
    """small/large: the stage on its N and 4N inputs (prepared beforehand, not timed)."""
    calls = 1
    while (once := _timed(small, calls) * calls) < min_seconds and calls < 1 << 16:
        calls = max(calls * 2, int(calls * min_seconds / max(once, 1e-6)))
    best_small = best_large = float("inf")
    for _ in range(repeats):
        best_small = min(best_small, _timed(small, calls))
        best_large = min(best_large, _timed(large, calls))
    return Ratio(stage, best_small, best_large, calls)


def table(title: str, sizes: tuple[str, str], ratios: list[Ratio]) -> str:
    lines = [f"### {title}", "", f"| stage | {sizes[0]} | {sizes[1]} | ratio (limit {LIMIT:g}) |",
             "|---|---:|---:|---:|"]
    for r in ratios:
        lines.append(f"| {r.stage} | {r.small * 1e3:.2f} ms | {r.large * 1e3:.2f} ms | "
                     f"{r.value:.2f}{'' if r.ok else ' **NOT LINEAR**'}"
                     f"{'' if r.judged else f' (under {FLOOR_S * 1e3:g} ms: not judged)'} |")
    return "\n".join(lines)


def verdict_line(ratios: list[Ratio]) -> tuple[int, str]:
    bad = [r for r in ratios if not r.ok]
    if bad:
        return 1, "scaling guard: NOT LINEAR: " + ", ".join(f"{r.stage} {r.value:.1f}x" for r in bad)
    judged = [r for r in ratios if r.judged]
    return 0, (f"scaling guard: every stage linear ({len(judged)} stages judged, {len(ratios) - len(judged)} under "
               f"{FLOOR_S * 1e3:g} ms not; worst ratio {max((r.value for r in judged), default=0):.2f} at 4x the "
               f"input, limit {LIMIT:g})")
