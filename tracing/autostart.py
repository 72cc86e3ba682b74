"""Start tracing from the HANGDOCTOR_TRACE environment variable (called by tracing/sitedir/sitecustomize.py).

Never breaks the program: bad settings or an unwritable folder give one "Warning:" line on stderr and no tracing.
Skipped: launcher processes (torchrun, deepspeed's launcher, `python -m tracing` itself), ranks outside
`ranks=`, and processes that inherit the same rank from a traced parent (spawned workers): the first traced
process of a rank records its key in HANGDOCTOR_TRACE_OWNER, which its children inherit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from tracing.config import ENV_VAR, TraceConfig
from tracing.identity import current_identity
from hangdoctor.topology.launcher import launcher_in_command

OWNER_VAR = "HANGDOCTOR_TRACE_OWNER"


def is_launcher(orig_argv: list[str]) -> bool:
    """A launcher (topology.launcher's table), or `python -m tracing` itself: never traced."""
    return bool(launcher_in_command(orig_argv, extra_modules=("tracing",)))


def start_from_environment(environ: MutableMapping[str, str] | None = None):
    environ = os.environ if environ is None else environ
    text = environ.get(ENV_VAR, "").strip()
    if not text or is_launcher(list(getattr(sys, "orig_argv", sys.argv))):
        return None
    identity = current_identity(environ)
    key = f"{identity.rank_source}={identity.rank}"
    if environ.get(OWNER_VAR) == key:
        return None
    try:
        config = TraceConfig.from_env(text)
        if config.ranks is not None:
            from hangdoctor.topology import parse_ranks
            if identity.rank not in parse_ranks(config.ranks):
                return None
        from tracing.tracer import Tracer, active_tracer
        if active_tracer() is not None:
            return None
        tracer = Tracer(config, identity)
        if config.tee:
            from tracing.tee import tee_std_streams
            tee_std_streams(config.out, identity)
        tracer.start()
    except (ValueError, OSError, RuntimeError) as e:
        print(f"Warning: {ENV_VAR} is set but tracing is off: {e}", file=sys.stderr)
        return None
    environ[OWNER_VAR] = key
    return tracer
