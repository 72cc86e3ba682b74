"""First-contact batch G (fourth first-contact round, part G): live cases from public reports on a DDP trainer whose
crashed rank cannot exit (a non-daemon thread), ... each hung the way its public thread reports (see each case.json's
source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# lincc-frameworks/hyrax PR #1011 + mlc-ai/pith-train PR #31 in the DDP tutorial trainer, 3 ranks: rank 1 raises on a
# corrupt sample and cannot exit (a non-daemon monitor thread); 0 and 2 wait in DDP's gradient all_reduce.
register(LiveCase("fcg_ddp_crash_nondaemon_exit", torchrun(3, "fcg_ddp_crash_nondaemon_exit.py"), ranks=3,
                  settle=2.0))

# drisspg/transformer_nuggets PR #46 + pytorch/torchtitan#652 in the minGPT DDP trainer, 3 ranks: rank 1's loss is NaN,
# its NaN detector calls torch.distributed.breakpoint(rank=1) under --local-ranks-filter 0; 0 and 2 wait in backward.
# `sleep` piped into torchrun stands for the terminal nobody types into (the ranks inherit it as stdin; pdb reads it).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.live import FIXTURES  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fcg_ddp_nan_breakpoint_filtered",
    ("sh", "-c", f"sleep 330 | exec {shlex.quote(PYTHON)} -m torch.distributed.run --standalone --nproc-per-node=3 "
                 f"--local-ranks-filter 0 {shlex.quote(str(FIXTURES / 'fcg_ddp_nan_breakpoint_filtered.py'))}"),
    ranks=3, settle=2.0,
))
