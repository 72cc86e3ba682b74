"""What to trace and where to write it; the same settings travel as CLI flags, API keywords and HANGDOCTOR_TRACE.

    HANGDOCTOR_TRACE="include=deepspeed,trainer;out=/scratch/traces;ring=65536;start_at=train_step"

Keys: include, exclude (comma-separated patterns, see selection.py), out (directory), ring (events kept; 0 turns
the ring off), stream (1 writes the streaming text file), start_at (function), c_calls (1), backend
(auto|c|monitoring|settrace|setprofile), tee (1 copies stdout/stderr into a per-rank file), ranks (e.g. 0-3,8:
only these ranks trace).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from tracing.backends import BACKENDS

ENV_VAR = "HANGDOCTOR_TRACE"
DEFAULT_RING = 65536  # events: 2 MiB of records per rank


@dataclass(frozen=True)
class TraceConfig:
    include: tuple[str, ...]  # patterns of code to follow, e.g. ("deepspeed", "trainer")
    exclude: tuple[str, ...] = ()  # patterns to leave out even when included
    out: str = field(default=".", metadata={"shown": True})  # directory for the per-rank files
    ring: int = field(default=DEFAULT_RING, metadata={"shown": True, "unit": "events"})  # call-ring capacity; 0 = none
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
            from hangdoctor.topology import parse_ranks  # pure Python, no torch
            parse_ranks(self.ranks)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    def to_env(self) -> str:
        """The settings as HANGDOCTOR_TRACE text (each field that differs from its default, as its codec writes it).
        Raises ValueError when one cannot travel there: what from_env() reads back must be these settings, or the
        tracer would run with others (or refuse, silently)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.default is not MISSING and value == f.default and not f.metadata.get("shown"):
                continue  # a default is left out, except those a reader of `tracing env` should see
            text = _CODECS[_kind(f)][0](value)
            if ";" in text:
                raise ValueError(f"{f.name}={text!r}: ';' separates the settings in {ENV_VAR}, so no value can "
                                 "hold one; choose a name without ';'")
            if _kind(f) != "patterns" and text != text.strip():  # patterns are stripped anyway
                raise ValueError(f"{f.name}={text!r}: {ENV_VAR} drops leading and trailing spaces; remove them")
            parts.append(f"{f.name}={text}")
        text = ";".join(parts)
        if TraceConfig.from_env(text)._carried() != self._carried():
            raise ValueError(f"these settings do not survive {ENV_VAR}: {text!r}")
        return text

    def _carried(self) -> tuple:
        """What the tracer makes of these settings: patterns split at commas, empty values as None."""
        return tuple(_CODECS[_kind(f)][1](_CODECS[_kind(f)][0](getattr(self, f.name)), f) for f in fields(self))

    @classmethod
    def from_env(cls, text: str) -> TraceConfig:
        known = {f.name: f for f in fields(cls)}
        values: dict = {}
        for piece in text.split(";"):
            if not piece.strip():
                continue
            key, sep, value = piece.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise ValueError(f"{ENV_VAR}: expected key=value, got {piece.strip()!r}")
            if key not in known:
                raise ValueError(f"{ENV_VAR}: unknown key {key!r}; known: {', '.join(known)}")
            values[key] = _CODECS[_kind(known[key])][1](value, known[key])
        if "include" not in values:
            raise ValueError(f"{ENV_VAR}: include=... is missing, e.g. include=deepspeed,trainer")
        return cls(**values)


def _kind(f) -> str:
    """How a field travels in HANGDOCTOR_TRACE, from its type: patterns, count, flag, text or optional text."""
    return {"tuple[str, ...]": "patterns", "int": "count", "bool": "flag", "str": "text",
            "str | None": "optional"}[str(f.type)]


def _count(value: str, f) -> int:
    if not value.isdigit():
        unit = f.metadata.get("unit")
        raise ValueError(f"{ENV_VAR}: {f.name}={value!r} is not a number{' of ' + unit if unit else ''}")
    return int(value)


def _flag(value: str, f) -> bool:
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise ValueError(f"{ENV_VAR}: {f.name}={value!r}; expected 1 or 0")
    return value in ("1", "true", "yes")


# kind -> (write a value as text, read it back from text): one codec per kind, every field through it
_CODECS = {
    "patterns": (lambda v: ",".join(v), lambda t, k: tuple(p.strip() for p in t.split(",") if p.strip())),
    "count": (str, _count),
    "flag": (lambda v: "1" if v else "0", _flag),
    "text": (str, lambda t, k: t),
    "optional": (lambda v: v or "", lambda t, k: t or None),
}
