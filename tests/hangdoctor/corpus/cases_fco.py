"""First-contact batch O (eighth first-contact round, part O): live cases from public programs and reports on an
FSDP2 full state dict fetched on rank 0 only, a Lightning callback's barrier behind a per-rank condition, a logging
HTTPHandler whose stalled request holds the handler's lock, and a rank waiting in os.waitpid for a forked upload child
that never exits; and a shape case from a public thread (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# FSDP2 checkpoint written the DDP way (pytorch/pytorch#73383, #134095), 3 ranks: rank 0 alone calls
# get_model_state_dict(full_state_dict=True) and waits in the DTensor all-gather; ranks 1-2 wait in dist.barrier().
register(LiveCase("fco_fsdp2_rank0_full_state_dict", torchrun(3, "fco_fsdp2_rank0_full_state_dict.py"), ranks=3,
                  settle=2.0))

# Lightning Callback.on_train_batch_end with strategy.barrier() behind a condition on the rank's own batch
# (huggingface/transformers#17478's shape), 3 ranks: rank 1 waits in the barrier; ranks 0 and 2 went on to batch 3.
register(LiveCase("fco_lightning_cb_rank_barrier", torchrun(3, "fco_lightning_cb_rank_barrier.py"), ranks=3,
                  settle=3.0))

# logging.handlers.HTTPHandler + a heartbeat thread (NousResearch/hermes-agent#58636, Parsl/parsl#493), 3 ranks:
# rank 2's heartbeat holds the handler's lock in a request that is never answered, its main thread waits for the lock;
# ranks 0 and 1 wait in DDP's gradient all_reduce.
register(LiveCase("fco_log_http_handler_lock", torchrun(3, "fco_log_http_handler_lock.py"), ranks=3, settle=2.0))

# Background checkpoint upload in a forked child (MLPA-DKU/GazeEstimation utils/mp_test.py, pytorch/pytorch#45042),
# 3 ranks: rank 0 waits in os.waitpid for its upload child (stuck in socket recv); ranks 1-2 in DDP's all_reduce.
register(LiveCase("fco_fork_upload_waitpid", torchrun(3, "fco_fork_upload_waitpid.py"), ranks=3, settle=2.0))


# Shape case (fixtures/corpus/shapes/fco_*; see cases_shapes.py for the mechanism).
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import in_tree, shape_env, tree  # noqa: E402
from tests.support import PYTHON  # noqa: E402

# FujitsuPolycom/sparkring#224 (vLLM V1 multiproc executor, TP4: EngineCore blocks for ever in
# MultiprocExecutor.get_response / _wait_for_response for a step result that never arrives, while all Worker_TP
# processes idle in worker_busy_loop's dequeue for their next work item: a step response lost between a worker and
# the scheduler) with the EngineCore frames of vllm-project/vllm#50835: `vllm serve MODEL --tensor-parallel-size 4`;
# no rank did anything different.
register(LiveCase(
    "fco_vllm_mp_lost_step_response",
    in_tree("fco_vllm_mp_lost_step_response",
            f"{shlex.quote(PYTHON)} {shlex.quote(tree('fco_vllm_mp_lost_step_response') + '/bin/vllm')} "
            "serve Qwen/Qwen3-32B --tensor-parallel-size 4"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fco_vllm_mp_lost_step_response"),
))
