"""Per-rank Python call tracing: selective, cheap enough to leave on, and readable after a SIGKILL.

    import tracing
    with tracing.trace(include="deepspeed,trainer", out="traces"):
        train()

or, without touching the program: `python -m tracing run --include deepspeed,trainer -- train.py ...`, or the
HANGDOCTOR_TRACE environment variable (see docs/tracing.md). This package imports neither torch nor rich (rich
only inside the renderers), so it runs under any Python 3.10+ on login nodes and inside hung jobs.
"""

from __future__ import annotations

from tracing.config import DEFAULT_RING, ENV_VAR, TraceConfig
from tracing.identity import RankIdentity, current_identity
from tracing.tee import Tee
from tracing.tracer import Tracer, active_tracer


def trace(include: str | tuple[str, ...] | list[str], *, exclude: str | tuple[str, ...] | list[str] = (),
          out: str = ".", ring: int = DEFAULT_RING, stream: bool = False, start_at: str | None = None,
          c_calls: bool = False, backend: str = "auto") -> Tracer:
    """A tracer, not yet started: use it as a context manager, or call .start() / .stop() / .close()."""
    as_tuple = (lambda v: (v,) if isinstance(v, str) else tuple(v))
    config = TraceConfig(include=as_tuple(include), exclude=as_tuple(exclude), out=out, ring=ring, stream=stream,
                         start_at=start_at, c_calls=c_calls, backend=backend)
    return Tracer(config)


def start(include, **options) -> Tracer:
    """Start tracing now (or at start_at=...); same keywords as trace()."""
    return trace(include, **options).start()


def stop() -> None:
    """Stop the active tracer and close its files (they say "stopped")."""
    tracer = active_tracer()
    if tracer is not None:
        tracer.close()


__all__ = ["DEFAULT_RING", "ENV_VAR", "RankIdentity", "Tee", "TraceConfig", "Tracer", "active_tracer",
           "current_identity", "start", "stop", "trace"]
