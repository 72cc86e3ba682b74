"""When silence becomes a stall, and when a stall clears. Pure: the caller gives the time.

Before the first sign of progress the bound is `startup` (a rendezvous or a first step that never ends). After
it, the bound is `stall` when given; else it is derived from the run itself: `factor` times the median time
between the signs seen so far (iteration lines come every log interval), never under `floor`. One slow step
is then no stall, and a long checkpoint save that clears is recorded as "resumed after N s", not reported twice.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

DERIVE_AFTER = 3  # intervals needed before a bound is derived from them (until then: startup)


@dataclass
class StallClock:
    startup: float  # seconds from the start of the watch (or of the job running) to the first sign
    stall: float | None = None  # fixed bound after the first sign; None: derived
    factor: float = 10.0
    floor: float = 120.0
    started: float = 0.0
    last: float | None = None  # when the last sign came
    intervals: list[float] = field(default_factory=list)
    stalled_since: float | None = None  # when the current stall was declared (None: not stalled)

    def bound(self) -> float:
        """Seconds of silence that make a stall now."""
        if self.last is None:
            return self.startup
        if self.stall is not None:
            return self.stall
        if len(self.intervals) < DERIVE_AFTER:
            return max(self.startup, self.floor)
        return max(self.floor, self.factor * statistics.median(self.intervals[-50:]))

    def progress(self, now: float) -> float | None:
        """A sign of progress at `now`. Returns how long the stall it clears lasted (None if none was declared)."""
        if self.last is not None and self.stalled_since is None:
            self.intervals.append(now - self.last)
        cleared = None if self.stalled_since is None else now - (self.last if self.last is not None else self.started)
        self.last, self.stalled_since = now, None
        return cleared

    def silent_for(self, now: float) -> float:
        return now - (self.last if self.last is not None else self.started)

    def check(self, now: float) -> bool:
        """True once, when the silence passes the bound; then False until progress clears the stall."""
        if self.stalled_since is not None or self.silent_for(now) <= self.bound():
            return False
        self.stalled_since = now
        return True
