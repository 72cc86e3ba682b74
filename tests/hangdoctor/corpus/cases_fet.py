"""First-contact batch fet (thirty-fifth first-contact round, part T): live hangs in PyTorch's own distributed
stack (see each case.json)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# rank-0-only sample generation with an FSDP2 (fully_shard) model (pytorch/pytorch#100069, #152964): rank 0 in the
# root module's parameter all-gather inside generate; ranks 1-2 in the barrier after it.
register(LiveCase("fet_fsdp2_rank0_sample_generate", torchrun(3, "fet_fsdp2_rank0_sample_generate.py"), ranks=3,
                  settle=3.0))

# a custom SavePlanner whose create_global_plan de-duplicates with a list, quadratic in the write items
# (pytorch/pytorch#163548, mosaicml/composer PR #3271): rank 0 (the coordinator) busy in create_global_plan; ranks 1-2
# in dcp.save waiting for the scattered plans. Ranks 1-2 take 4 s (a quiet machine) to 8 s or more (a CI run beside
# two other cases on a slow day, caught still pickling their plans) to reach the scatter; rank 0 stays busy for hours.
register(LiveCase("fet_dcp_custom_planner_quadratic_dedup", torchrun(3, "fet_dcp_custom_planner_quadratic_dedup.py"),
                  ranks=3, settle=12.0))

# a wall-time checkpoint trigger evaluated on each rank's own clock (idaholab/moose PR #26588), dcp.save on a gloo
# checkpoint group: rank 0 (a second later, after its metric logging) in dcp.save's plan gather; ranks 1-2 in the
# next step's DDP gradient all-reduce (world).
register(LiveCase("fet_walltime_ckpt_trigger_rank_local", torchrun(3, "fet_walltime_ckpt_trigger_rank_local.py"),
                  ranks=3, settle=3.0))

# a dataset that evens out shard lengths with an all_reduce in its __iter__, run in DataLoader workers forked after
# init_process_group (meta-pytorch/data#868, #1117): every rank's worker in the all_reduce (the forked gloo process
# group has no threads to run it); every rank in the DataLoader waiting for its first batch.
register(LiveCase("fet_loader_worker_fullsync_collective", torchrun(3, "fet_loader_worker_fullsync_collective.py"),
                  ranks=3, settle=4.0))

# a preprocessing job that hands out documents in scatter_object_list rounds, None both the last round's padding and
# the end marker (bigscience-workshop/Megatron-DeepSpeed PR #55), torch.multiprocessing.spawn: ranks 1-2 in the
# merge's all_gather_object; rank 0 in the end-of-input scatter_object_list.
register(LiveCase("fet_spawn_scatter_rounds_none_sentinel",
                  (PYTHON, "{fixtures}/fet_spawn_scatter_rounds_none_sentinel.py"), ranks=3, settle=3.0))
