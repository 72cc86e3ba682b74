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


# Shape case (fixtures/corpus/shapes/fcs_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# torchtitan before PR #1342 (pytorch/torchtitan#1342: train.py's finally calls destroy_process_group() even when the
# trainer raised; a rank that raised while the others are in collectives blocks in it), 4 GPUs on one node: rank 2's
# data loading raises at step 10 and it blocks in destroy_process_group; ranks 0, 1 and 3 wait on the GPU in the logged
# loss reduction's .item(). Launcher: torchrun (-m torchtitan.train).
register(LiveCase(
    "fcs_torchtitan_destroy_pg_on_error",
    in_tree("fcs_torchtitan_destroy_pg_on_error",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 "
            "--rdzv_backend c10d --rdzv_endpoint localhost:0 -m torchtitan.train "
            "--job.config_file ./train_configs/llama3_8b.toml"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fcs_torchtitan_destroy_pg_on_error", str(LAUNCHERS)),
))
