"""First-contact batch fer (thirty-fourth first-contact round, part R): live hangs from public reports on PyTorch's
own distributed stack (see each case.json): a hand-written point-to-point pipeline whose gated stage skips the
input-gradient send, a checkpoint resume whose exists() check disagrees between nodes before a broadcast_object_list
on a checkpoint gloo group, a torch.distributed.checkpoint save whose shard write blocks on one rank, and a
Shampoo-style preconditioner refresh looping in eigh retries on one rank, and per-modality DeviceMeshes built on
member ranks only, which leaves the next world group with different names on different ranks."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# pytorch/pytorch#152827: stage 1's input gets no gradient (gate closed), it skips the send back; stage 0 waits in
# recv from stage 1, stages 1-2 in the end-of-step barrier.
register(LiveCase("fer_pp_input_no_grad_skip_send", torchrun(3, "fer_pp_input_no_grad_skip_send.py"),
                  ranks=3, settle=3.0))

# KempnerInstitute/KempnerForge#49: exists() disagrees across nodes; ranks 0-1 in broadcast_object_list on the
# checkpoint group, rank 2 skipped the resume and waits in step 1's DDP all-reduce.
register(LiveCase("fer_resume_exists_divergent_bcast", torchrun(3, "fer_resume_exists_divergent_bcast.py"),
                  ranks=3, settle=3.0))

# NVIDIA-NeMo/RL PR #3504: rank 1's dcp.save shard write blocks in open() (a named pipe standing for a dead hard
# NFS mount); ranks 0 and 2 wait in dcp.save's gather of the write results.
register(LiveCase("fer_dcp_save_rank_write_stalled", torchrun(3, "fer_dcp_save_rank_write_stalled.py"),
                  ranks=3, settle=3.0))

# facebookresearch/optimizers#13: rank 1's preconditioner refresh loops in float64 eigh retries (busy, native);
# ranks 0 and 2 wait in all_gather of the search directions.
register(LiveCase("fer_shampoo_eigh_retry_straggler", torchrun(3, "fer_shampoo_eigh_retry_straggler.py"),
                  ranks=3, settle=3.0))

# cornstarch-org/Cornstarch PR #76: each modality's DeviceMesh built on its member ranks only; the group counters
# diverge and the world gloo group created next has a different name on rank 0 than on ranks 1-2: all in new_group.
register(LiveCase("fer_modality_mesh_members_only", torchrun(3, "fer_modality_mesh_members_only.py"),
                  ranks=3, settle=3.0))
