"""Plain-text pieces shared by the views: clock times, durations and one-line events (no rich needed)."""

from __future__ import annotations

import datetime

from tracing.records import GAP, GAP_TEXT, Event


def clock(wall_ns: int) -> str:
    return datetime.datetime.fromtimestamp(wall_ns / 1e9).strftime("%H:%M:%S.%f")[:-3]


def seconds(value: float) -> str:
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def event_line(e: Event, indent: bool = True, base_depth: int = 0) -> str:
    if e.kind == GAP:  # its depth is that of the frames recorded open before it, not a frame of its own
        return f"{clock(e.wall_ns)}  {e.word:<5} {GAP_TEXT}"
    pad = "  " * min(max(e.depth - base_depth, 0), 20) if indent else ""
    return f"{clock(e.wall_ns)}  {e.word:<5} {pad}{e.loc.qualname}  {e.loc.where}"
