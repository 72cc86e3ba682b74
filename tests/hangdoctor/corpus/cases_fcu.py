"""First-contact batch U (twelfth first-contact round, part U): four live cases from public programs and reports
(a multiprocessing.Pool whose worker the OOM killer took, accelerate's batch dispatcher over a stalled stream, an
endless iterator over an empty data shard, a spawn job's result queue read after join) and one NCCL shape (a
barrier skipped by a rank that exits); see each case.json."""

import shlex

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# DDP evaluation scoring with multiprocessing.Pool(2).map on every rank (python/cpython#96062,
# huggingface/datasets#5976), 3 ranks: rank 1's pool worker is SIGKILLed on the oversized sample and Pool.map waits
# for ever; ranks 0 and 2 wait in the all_reduce of the metric sums.
register(LiveCase("fcu_eval_pool_worker_oom_killed", torchrun(3, "fcu_eval_pool_worker_oom_killed.py"), ranks=3,
                  settle=3.0))

# accelerate's DataLoaderDispatcher (dispatch_batches, the default for an IterableDataset) over a streamed dataset
# (huggingface/datasets#5123), 3 ranks: process 0's read of the stream blocks in recv when the server goes silent;
# processes 1 and 2 wait in _fetch_batches' broadcast_object_list.
register(LiveCase("fcu_accel_dispatch_stream_stall", torchrun(3, "fcu_accel_dispatch_stream_stall.py"), ranks=3,
                  settle=2.0))

# long-video-gan's get_infinite_data_iter over each rank's share of the partitions (NVlabs/long-video-gan#4), 3
# ranks, 2 partitions: rank 2's share is empty and its endless iterator spins without yielding; ranks 0-1 wait in
# DDP's gradient all_reduce.
register(LiveCase("fcu_infinite_iter_empty_shard", torchrun(3, "fcu_infinite_iter_empty_shard.py"), ranks=3,
                  settle=2.0))

# torch.multiprocessing.spawn returning rank 0's gathered predictions through a Queue the parent reads only after
# join (jonatanjacobsson/ifcpipeline#28, rwth-i6/returnn#1499), 3 ranks: rank 0 cannot exit (its exit joins the
# queue's feeder, blocked in the pipe write), ranks 1-2 exited, the parent waits in ProcessContext.join.
register(LiveCase("fcu_spawn_result_queue_join_first", (PYTHON, "{fixtures}/fcu_spawn_result_queue_join_first.py"),
                  ranks=3, settle=8.0))

# Shape (NCCL, 4 GPUs): pytorch/pytorch#138322's program under torchrun: ranks 0-2 call barrier(), rank 3 skips it
# and exits; ranks 0-2 block in the barrier's wait on the GPU, the agent waits for them (rank 3 is not dumped).
register(LiveCase(
    "fcu_nccl_barrier_skip_rank_exits",
    in_tree("fcu_nccl_barrier_skip_rank_exits",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 "
            "barrier_test.py"),
    ranks=4, shape=True, settle=3.0, env=shape_env("fcu_nccl_barrier_skip_rank_exits", str(LAUNCHERS)),
))
