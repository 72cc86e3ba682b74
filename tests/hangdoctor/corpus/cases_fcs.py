"""First-contact batch S (tenth first-contact round, part S): live cases from public programs and reports on an
accelerate save_state guarded by a racy folder check, ... (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# accelerate save_state under a per-process "already saved?" check (huggingface/accelerate#1950, PR #1760), 3 ranks:
# ranks 0-1 save and wait in wait_for_everyone(); rank 2 checks late, skips, and waits in step 5's DDP all_reduce.
register(LiveCase("fcs_accel_save_state_exists_check", torchrun(3, "fcs_accel_save_state_exists_check.py"), ranks=3,
                  settle=2.0))

# A Graphite push with socket.create_connection() and no timeout (statsite/statsite PR #250, dropwizard/metrics
# PR #4313), 3 ranks: rank 1's relay accepts nothing, rank 1 blocks in connect(); ranks 0 and 2 wait in step 6's
# gradient all_reduce.
register(LiveCase("fcs_graphite_push_connect", torchrun(3, "fcs_graphite_push_connect.py"), ranks=3, settle=2.0))

# A metrics thread and the main thread issuing collectives on the same group (pytorch/pytorch#175145, PR #131895),
# 3 ranks: rank 1's slow batch lets its all_gather go out before its gradient all_reduce; every rank waits in both.
register(LiveCase("fcs_metrics_thread_same_pg", torchrun(3, "fcs_metrics_thread_same_pg.py"), ranks=3, settle=2.0))

# An @record main whose broad except writes an emergency checkpoint (Lightning-AI/pytorch-lightning#6430), 3 ranks:
# rank 2 raises in collate, swallows it and waits in broadcast_object_list(src=0); ranks 0-1 in DDP's all_reduce.
register(LiveCase("fcs_record_except_emergency_ckpt", torchrun(3, "fcs_record_except_emergency_ckpt.py"), ranks=3,
                  settle=2.0))
