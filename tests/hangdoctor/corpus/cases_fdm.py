"""First-contact batch fdm (twentieth first-contact round, part A): live cases from public programs and reports
(see each case.json), and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

# DeepSpeed ZeRO-1 resumed from node-local checkpoint folders, 3 ranks on 2 "nodes": rank 2's folder has no
# `latest`, load_checkpoint returns (None, None) and it restarts at step 0; ranks 0-1 resume at step 3, finish
# first and wait in the final save_checkpoint's barrier; rank 2 waits in a later step's gradient all_reduce.
register(LiveCase("fdm_ds_resume_node_local_latest", torchrun(3, "fdm_ds_resume_node_local_latest.py"), ranks=3,
                  env=DS_ENV, settle=2.0))

# HF Trainer with a plateau callback whose on_evaluate broadcasts a stop decision from rank 0 only, 3 ranks: rank 0
# waits in broadcast_object_list; ranks 1-2 wait in the next training step's backward (DDP gradient all_reduce).
register(LiveCase("fdm_hf_trainer_on_evaluate_bcast", torchrun(3, "fdm_hf_trainer_on_evaluate_bcast.py"), ranks=3,
                  settle=2.0))

# DDP trainer whose SIGUSR1 handler flushes a metrics writer under the lock the interrupted write() holds, 3 ranks:
# rank 1 (the only one signalled) deadlocks on its own lock; ranks 0 and 2 wait in the next backward.
register(LiveCase("fdm_signal_handler_log_lock", torchrun(3, "fdm_signal_handler_log_lock.py"), ranks=3,
                  settle=2.0))

# DDP trainer whose rank 0 runs a non-daemon GPU monitor thread stopped only after a final save that raises, 3 ranks
# (lincc-frameworks/hyrax PR #1011): rank 0's interpreter waits in threading._shutdown for the thread; ranks 1-2
# wait in the closing barrier.
register(LiveCase("fdm_monitor_thread_exit_hang", torchrun(3, "fdm_monitor_thread_exit_hang.py"), ranks=3,
                  settle=2.0))


# Shape (pytorch/pytorch#97191, torchrun on 8 GPUs over NCCL, 4 ranks here): rank 0 all-reduces twice as many
# elements as the others; the NCCL all_reduce is enqueued on every rank and never completes; every rank waits in
# torch.cuda.synchronize() (cudaDeviceSynchronize).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fdm_nccl_allreduce_numel_mismatch",
    in_tree("fdm_nccl_allreduce_numel_mismatch",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node=4 --nnodes=1 "
            "hang.py"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fdm_nccl_allreduce_numel_mismatch", str(LAUNCHERS)),
))
