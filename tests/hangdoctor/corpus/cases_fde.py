"""First-contact batch fde (seventeenth first-contact round, part A): live cases from public programs and reports on
a collective awaited through an asyncio executor on a rank whose event loop is blocked, a rank that builds one
layer fewer from a stale cached config under per-parameter gradient all_reduce, a DDP communication hook with a
rank-conditional extra all_reduce (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# asyncio trainer awaiting dist.all_reduce through loop.run_in_executor (cisco-open/pymultiworld PR #52), 3 ranks:
# rank 1's metrics-push coroutine blocks its event loop in a synchronous socket recv; ranks 0 and 2 wait in the
# all_reduce on their executor threads (main threads in the event loop's epoll).
register(LiveCase("fde_asyncio_executor_blocked_loop", torchrun(3, "fde_asyncio_executor_blocked_loop.py"), ranks=3,
                  settle=2.0))

# Tutorial average_gradients (one all_reduce per parameter), 3 ranks: rank 2 reads a stale cached config and builds
# 3 layers where the others build 4; it finishes its 3 steps and waits in the pre-checkpoint barrier; ranks 0 and 1
# wait in step 2's third all_reduce.
register(LiveCase("fde_stale_config_layer_fewer", torchrun(3, "fde_stale_config_layer_fewer.py"), ranks=3,
                  settle=2.0))

# DDP comm hook that, on rank 0 only and on logging steps, runs an extra all_reduce of the bucket's squared gradients
# before the bucket's allreduce (pytorch/pytorch#75031's extra reduction in a hook, rank-conditional), 3 ranks:
# rank 0 waits in step 3's backward (its last bucket allreduce), ranks 1 and 2 in the pre-checkpoint barrier.
register(LiveCase("fde_ddp_comm_hook_rank0_grad_stats", torchrun(3, "fde_ddp_comm_hook_rank0_grad_stats.py"),
                  ranks=3, settle=2.0))

# Non-reentrant activation checkpointing over two task heads holding collectives (head A: all_reduce, head B:
# all_gather), per-task backward passes in an order shuffled with random.Random(seed + rank) (PCGrad-style), 3 ranks
# (ByteDance-Seed/VeOmni#979's recompute-order desync): ranks 0 and 1 recompute head A first and wait in its
# all_reduce; rank 2 recomputes head B first and waits in its all_gather.
register(LiveCase("fde_ckpt_recompute_task_order", torchrun(3, "fde_ckpt_recompute_task_order.py"), ranks=3,
                  settle=2.0))


# Shape (torch.compile under torchrun, 2 ranks here; one process in the report): pytorch/pytorch#162199, Inductor's
# compile-worker pool cleaned up after a cold start: at interpreter exit every rank waits in the atexit handler
# shutdown_compile_workers -> SubprocPool.shutdown -> process.wait(300) for its compile-worker sidecar, which is
# still warming its worker pool.
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fde_inductor_atexit_pool_shutdown",
    in_tree("fde_inductor_atexit_pool_shutdown",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --standalone "
            "--nproc_per_node=2 train.py"),
    ranks=2, shape=True, settle=3.0, env=shape_env("fde_inductor_atexit_pool_shutdown", str(LAUNCHERS)),
))
