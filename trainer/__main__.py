"""`python -m trainer ...`: run one rank of the reference trainer (under torchrun or srun).

Exit codes: 0 trained (left through os._exit after the exit handlers: see _leave_before_finalisation); 1 this
rank failed at run time (a collective timed out, a peer vanished);
2 bad flags (one line on stderr naming the numbers). A failed rank leaves through os._exit, so that a
process group stuck in its destructor cannot hold the rank alive.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    from trainer.config import parse_config
    from trainer.distributed import identify_process
    from trainer.train import prepare, train

    cfg = parse_config(argv)
    try:
        ident = identify_process()
        ctx = prepare(cfg, ident)
    except ValueError as err:
        if os.environ.get("RANK", "0") == "0":
            print(f"Error: {err}", file=sys.stderr)
        return 2
    try:
        train(ctx)
    except (RuntimeError, ValueError, OSError) as err:
        where = f"rank {ctx.coords.rank} (pp={ctx.coords.pp} dp={ctx.coords.dp} tp={ctx.coords.tp})"
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"Error: {where} at iteration {ctx.iteration}: {first_line}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)
    _leave_before_finalisation()


def _leave_before_finalisation() -> None:
    """Exit 0 without CPython's finalisation. A gloo worker thread may still be freeing the last asynchronous
    broadcast's tensors, which needs the GIL; once finalisation has begun, taking it ends that thread by forced
    unwinding through a destructor, and std::terminate aborts the rank after a good run (SIGABRT, "terminate called
    without an active exception": 1 of 8-30 PP=2 runs here, caught in CI). Exit handlers (tracing's) still run."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
