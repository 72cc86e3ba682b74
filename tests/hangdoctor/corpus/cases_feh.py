"""First-contact batch feh (twenty-ninth first-contact round, part H): live hangs from public reports (see each
case.json): a group coordinator that hands a global rank to a broadcast expecting a group-local source (vllm-omni),
a dataset-creation path planner that never returns on a walled-in goal (PONI), and a streaming dataset's node-local
barrier named by a random prefix that one rank draws differently (mosaicml/streaming)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# metadata broadcast given the global source rank as a group-local src (vllm-project/vllm-omni PR #6264), SP groups
# {0,2} {1,3}: rank 1 in the tensor broadcast on SP group {1,3}; ranks 0, 2, 3 in the world shutdown barrier.
register(LiveCase("feh_sp_group_bcast_meta_global_src", torchrun(4, "feh_sp_group_bcast_meta_global_src.py"),
                  ranks=4, settle=2.0))

# plan_path() walking a distance field that never reaches a walled-in goal (srama2512/PONI#18): rank 2 busy in
# plan_path; ranks 0-1 in the all_gather of the example counts.
register(LiveCase("feh_nav_dataset_plan_path_walled_goal", torchrun(3, "feh_nav_dataset_plan_path_walled_goal.py"),
                  ranks=3, settle=2.0))

# the streaming dataset's node-local barrier named by a random prefix, rank 0 drawing once more before it
# (mosaicml/streaming#145, PR #147): every rank polling (sleep) its prefix's barrier, rank 0 alone on its own.
register(LiveCase("feh_streaming_shm_prefix_rank0_extra_draw",
                  torchrun(3, "feh_streaming_shm_prefix_rank0_extra_draw.py"), ranks=3, settle=2.0))
