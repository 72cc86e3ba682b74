"""What to trace and where to write it; the same settings travel as CLI flags, API keywords and HANGDOCTOR_TRACE.

    HANGDOCTOR_TRACE="include=deepspeed,trainer;out=/scratch/traces;ring=65536;start_at=train_step"

Keys: include, exclude (comma-separated patterns, see selection.py), out (directory), ring (events kept; 0 turns
the ring off), stream (1 writes the streaming text file), start_at (function), c_calls (1), backend
(auto|c|monitoring|settrace|setprofile), tee (1 copies stdout/stderr into a per-rank file), ranks (e.g. 0-3,8:
only these ranks trace).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from tracing.backends import BACKENDS

ENV_VAR = "HANGDOCTOR_TRACE"
DEFAULT_RING = 65536  # events: 2 MiB of records per rank


@dataclass(frozen=True)
class TraceConfig:
    include: tuple[str, ...]  # patterns of code to follow, e.g. ("deepspeed", "trainer")
    exclude: tuple[str, ...] = ()  # patterns to leave out even when included
    out: str = "."  # directory for the per-rank files
    ring: int = DEFAULT_RING  # call-ring capacity in events; 0 = no ring file
    stream: bool = False  # also write every event as a text line
    start_at: str | None = None  # begin when this function is first entered
    c_calls: bool = False  # record C functions called from selected code
    backend: str = "auto"
    tee: bool = False  # copy stdout and stderr into stdout-{host}-{local_rank}-{pid}.txt (run/env only)
    ranks: str | None = None  # only these ranks trace (env only), e.g. "0-3,8"

    def __post_init__(self) -> None:
        if not [p for item in self.include for p in item.split(",") if p.strip()]:
            raise ValueError("nothing to trace: give at least one include pattern, e.g. deepspeed,trainer")
        if self.ring < 0 or 0 < self.ring < 16:
            raise ValueError(f"ring={self.ring}: give 0 (no ring) or at least 16 events")
        if not self.ring and not self.stream:
            raise ValueError("no output: give a ring size or turn on the stream")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend={self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.ranks is not None:
            from topology import parse_ranks  # pure Python, no torch
            parse_ranks(self.ranks)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    def to_env(self) -> str:
        """The settings as HANGDOCTOR_TRACE text. Raises ValueError when one cannot travel there: what from_env()
        would read back must be these settings, or the tracer would run with others (or refuse, silently)."""
        parts = [f"include={','.join(self.include)}"]
        if self.exclude:
            parts.append(f"exclude={','.join(self.exclude)}")
        parts.append(f"out={self.out}")
        parts.append(f"ring={self.ring}")
        for key in ("stream", "c_calls", "tee"):
            if getattr(self, key):
                parts.append(f"{key}=1")
        if self.start_at:
            parts.append(f"start_at={self.start_at}")
        if self.backend != "auto":
            parts.append(f"backend={self.backend}")
        if self.ranks:
            parts.append(f"ranks={self.ranks}")
        for part in parts:
            key, _, value = part.partition("=")
            if ";" in value:
                raise ValueError(f"{key}={value!r}: ';' separates the settings in {ENV_VAR}, so no value can "
                                 "hold one; choose a name without ';'")
            if key not in ("include", "exclude") and value != value.strip():  # patterns are stripped anyway
                raise ValueError(f"{key}={value!r}: {ENV_VAR} drops leading and trailing spaces; remove them")
        text = ";".join(parts)
        if TraceConfig.from_env(text)._carried() != self._carried():
            raise ValueError(f"these settings do not survive {ENV_VAR}: {text!r}")
        return text

    def _carried(self) -> tuple:
        """What the tracer makes of these settings: patterns split at commas, empty values as None."""
        split = (lambda items: tuple(p.strip() for item in items for p in item.split(",") if p.strip()))
        return (split(self.include), split(self.exclude), self.out, self.ring, self.stream, self.start_at or None,
                self.c_calls, self.backend, self.tee, self.ranks or None)

    @classmethod
    def from_env(cls, text: str) -> TraceConfig:
        values: dict = {}
        for piece in text.split(";"):
            if not piece.strip():
                continue
            key, sep, value = piece.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise ValueError(f"{ENV_VAR}: expected key=value, got {piece.strip()!r}")
            if key in ("include", "exclude"):
                values[key] = tuple(p.strip() for p in value.split(",") if p.strip())
            elif key == "ring":
                if not value.isdigit():
                    raise ValueError(f"{ENV_VAR}: ring={value!r} is not a number of events")
                values[key] = int(value)
            elif key in ("stream", "c_calls", "tee"):
                if value not in ("0", "1", "true", "false", "yes", "no"):
                    raise ValueError(f"{ENV_VAR}: {key}={value!r}; expected 1 or 0")
                values[key] = value in ("1", "true", "yes")
            elif key in ("out", "start_at", "backend", "ranks"):
                values[key] = (value or None) if key in ("start_at", "ranks") else value
            else:
                raise ValueError(f"{ENV_VAR}: unknown key {key!r}; known: include, exclude, out, ring, stream, "
                                 "start_at, c_calls, backend, tee, ranks")
        if "include" not in values:
            raise ValueError(f"{ENV_VAR}: include=... is missing, e.g. include=deepspeed,trainer")
        return cls(**values)
