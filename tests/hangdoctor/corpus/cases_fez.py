"""First-contact batch fez (thirty-eighth first-contact round, part Z): live hangs from PyTorch's own distributed
stack (see each case.json): a sharding planner busy on rank 0 while the plan's broadcast_object_list waits, a
two-stage pipeline on a (dp, pp) DeviceMesh whose point-to-point peers are stage indices used as global ranks, an
optimizer-in-backward hook that waits for an EMA lock held by an idle snapshot thread, tensor-parallel sampling with
a different seed on every rank (one rank leaves the decode loop first), and an ordered per-epoch report whose token
the last rank passes back to rank 0."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# torchrec-style collective_plan (meta-pytorch/torchrec PR #696): rank 0 busy in an exhaustive placement search;
# ranks 1-2 in broadcast_object_list waiting for its plan.
register(LiveCase("fez_torchrec_planner_exhaustive_rank0", torchrun(3, "fez_torchrec_planner_exhaustive_rank0.py"),
                  ranks=3, settle=2.0))

# (dp, pp) DeviceMesh, stage +- 1 used as global peers (pytorch/pytorch PR #140460): rank 2 in send to 1, rank 3 in
# recv from 0; ranks 0-1 in the dp-group gradient all_reduce.
register(LiveCase("fez_mesh_pp_stage_index_as_global_peer", torchrun(4, "fez_mesh_pp_stage_index_as_global_peer.py"),
                  ranks=4, settle=2.0))

# optimizer step in backward (pytorch/tutorials optimizer_step_in_backward_tutorial): rank 0's hook waits for the EMA
# lock its snapshot thread holds while idle; ranks 1-2 in the next parameter's all_reduce inside backward.
register(LiveCase("fez_optim_in_backward_ema_lock", torchrun(3, "fez_optim_in_backward_ema_lock.py"), ranks=3,
                  settle=2.0))

# TP sampling with a per-rank seed (openai/gpt-oss#270): rank 0 drew EOS first and waits in gather_object; ranks 1-2
# in the next decode step's row-parallel all_reduce (functional collective wait).
register(LiveCase("fez_tp_generate_rank_local_sampling", torchrun(3, "fez_tp_generate_rank_local_sampling.py"),
                  ranks=3, settle=2.0))

# rank-ordered report with a token ring that wraps to rank 0 (hpc/ior PR #535): rank 2 in send to rank 0; ranks 0-1
# in the next epoch's DDP backward.
register(LiveCase("fez_rank_order_report_token_wraps", torchrun(3, "fez_rank_order_report_token_wraps.py"), ranks=3,
                  settle=2.0))
