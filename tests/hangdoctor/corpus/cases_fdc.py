"""First-contact batch fdc (sixteenth first-contact round, part A): live cases from public programs and reports on
a collective in `__del__` run by the garbage collector, a pause/resume Event set only by a signal handler, a
float8-style amax all-reduce on the world group under pipeline parallelism, a DeepSpeed pipeline stage whose data
runs out (see each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

# Collective in __del__ (a shared scratch folder's cleanup barrier), freed by a gc.collect() that only rank 1 runs
# (its decoded-sample cache crosses the budget first), 3 ranks: rank 1 waits in the barrier inside gc.collect();
# ranks 0 and 2 wait in step 4's DDP gradient all_reduce.
register(LiveCase("fdc_gc_del_scratch_barrier", torchrun(3, "fdc_gc_del_scratch_barrier.py"), ranks=3, settle=2.0))

# ichuan/easy_pause_resume-style SIGUSR1/SIGUSR2 pause/resume under torchrun (pytorch/pytorch#154849: torchrun does
# not forward them), 3 ranks: the resume reaches ranks 0 and 1 only; rank 2 waits in Event.wait(), ranks 0 and 1 in
# step 3's DDP gradient all_reduce.
register(LiveCase("fdc_pause_resume_signal_event", torchrun(3, "fdc_pause_resume_signal_event.py"), ranks=3,
                  settle=2.0))

# pytorch/ao PR #933: float8 dynamic-scaling amax all-reduce on the world group under PP=2 x DP=2, 4 ranks: stage 0
# (ranks 0, 1) waits in the amax all_reduce, stage 1 (ranks 2, 3) in recv of the activations.
register(LiveCase("fdc_float8_amax_world_group_pp", torchrun(4, "fdc_float8_amax_world_group_pp.py"), ranks=4,
                  settle=2.0))

# deepspeedai/DeepSpeed#5568 / #5593: DeepSpeed PipelineModule PP=3 with finite per-stage iterators and
# `except StopIteration: break`; the last stage's data runs out one micro-batch early: rank 2 waits in the final
# barrier, ranks 0 and 1 in step 3's pipeline transfers.
register(LiveCase("fdc_ds_pipe_last_stage_data_exhausted", torchrun(3, "fdc_ds_pipe_last_stage_data_exhausted.py"),
                  ranks=3, env=DS_ENV, settle=3.0))


# Shape (NCCL, FSDP2 over 4 GPUs here, 8 in the report): microsoft/dion PR #74, NorMuon's mega-batched all-to-all
# with per-peer chunk sizes taken from each rank's own FSDP2 shard: a (6, D) weight over 4 ranks leaves rank 3 an
# empty shard; every rank waits in megabatch_orthogonalize_async's dist.all_to_all inside optimizer.step().
import shlex  # noqa: E402

from tests.hangdoctor.corpus.cases_shapes import LAUNCHERS, in_tree, shape_env  # noqa: E402
from tests.support import PYTHON  # noqa: E402

register(LiveCase(
    "fdc_dion_normuon_empty_shard_a2a",
    in_tree("fdc_dion_normuon_empty_shard_a2a",
            f"{shlex.quote(PYTHON)} {shlex.quote(str(LAUNCHERS / 'bin' / 'torchrun'))} --nproc_per_node 4 train.py "
            "--optimizer normuon --fsdp-shard 4"),
    ranks=4, shape=True, settle=2.0, env=shape_env("fdc_dion_normuon_empty_shard_a2a", str(LAUNCHERS)),
))
