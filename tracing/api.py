"""The in-program API of tracing (`tracing.trace`, `start`, `stop`), re-exported by the package lazily."""

from __future__ import annotations

from tracing.config import DEFAULT_RING, TraceConfig
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
