"""Per-rank Python call tracing: selective, cheap enough to leave on, and readable after a SIGKILL.

    import tracing
    with tracing.trace(include="deepspeed,trainer", out="traces"):
        train()

or, without touching the program: `python -m tracing run --include deepspeed,trainer -- train.py ...`, or the
HANGDOCTOR_TRACE environment variable (see docs/tracing.md). This package imports neither torch nor rich (rich
only inside the renderers), so it runs under any Python 3.10+ on login nodes and inside hung jobs.
"""

from __future__ import annotations

import importlib

# Loaded on first use, so that `tracing --help` and the readers do not pay for the tracer's imports.
_EXPORTS = {
    "DEFAULT_RING": "tracing.config", "ENV_VAR": "tracing.config", "TraceConfig": "tracing.config",
    "RankIdentity": "tracing.identity", "current_identity": "tracing.identity", "Tee": "tracing.tee",
    "Tracer": "tracing.tracer", "active_tracer": "tracing.tracer",
    "trace": "tracing.api", "start": "tracing.api", "stop": "tracing.api",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tracing' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = sorted(_EXPORTS)
