"""First-contact batch G (fourth first-contact round, part G): live cases from public reports on a DDP trainer whose
crashed rank cannot exit (a non-daemon thread), ... each hung the way its public thread reports (see each case.json's
source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# lincc-frameworks/hyrax PR #1011 + mlc-ai/pith-train PR #31 in the DDP tutorial trainer, 3 ranks: rank 1 raises on a
# corrupt sample and cannot exit (a non-daemon monitor thread); 0 and 2 wait in DDP's gradient all_reduce.
register(LiveCase("fcg_ddp_crash_nondaemon_exit", torchrun(3, "fcg_ddp_crash_nondaemon_exit.py"), ranks=3,
                  settle=2.0))
