"""Slow, not stalled: when the iteration time rises PCT% over its running median (`watch --slow PCT`).

Each poll that saw iterations gives one reading: the seconds per iteration since the previous reading (the time
between the polls over the iterations advanced). The baseline is the median of the readings before the last
`CONFIRM`; the job is slow when each of the last `CONFIRM` readings is PCT% above it. It fires once, then not again
until the iteration time has come back under the bound (a slowdown that lasts is profiled once, not every poll).
At least `WARMUP` readings make a baseline. Pure: the loop feeds it steps and times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from statistics import median

CONFIRM = 3  # consecutive slow readings
WARMUP = 5  # readings before a baseline exists
HISTORY = 60  # readings the running median keeps


@dataclass
class SlowDetector:
    pct: float
    readings: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    last_time: float | None = None
    last_iteration: int | None = None
    armed: bool = True

    def feed(self, now: float, iteration: int | None) -> tuple[float, float] | None:
        """A poll's newest iteration (None: none seen). Returns (baseline, recent) seconds per iteration when the
        job has just become slow, else None."""
        if iteration is None:
            return None
        if self.last_iteration is None or iteration <= self.last_iteration:
            self.last_time, self.last_iteration = now, iteration  # the first reading, or a restart: start over
            return None
        per = (now - self.last_time) / (iteration - self.last_iteration)
        self.last_time, self.last_iteration = now, iteration
        self.readings.append(per)
        if len(self.readings) < WARMUP + CONFIRM:
            return None
        history = list(self.readings)
        baseline, recent = median(history[:-CONFIRM]), history[-CONFIRM:]
        bound = baseline * (1 + self.pct / 100)
        if all(r > bound for r in recent):
            if self.armed:
                self.armed = False
                return baseline, median(recent)
            return None
        if recent[-1] <= bound:
            self.armed = True
        return None
