"""First-contact batch ffd (fortieth first-contact round, part D): live hangs from PyTorch's own distributed stack
(see each case.json): torchrun with the static rendezvous backend and port 0 (every worker retries the agent's store
on port 0), decentralized gossip averaging over pairwise edge groups walked in each rank's neighbour order (a cycle
of all_reduces across three groups), a HuBERT-style bucketing batch sampler shuffled with a per-rank seed (one rank
gets one batch fewer and meets the end-of-epoch barrier), a multiprocessing Lock held by rank 0 across a barrier the
other ranks can only reach through that lock, and a DataLoader worker left waiting for a sample server's reply that
never comes."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# torchrun --rdzv-backend=static --rdzv-endpoint=localhost:0 (pytorch/pytorch#130656): the agent's store listens on a
# port the kernel picked, the workers are told MASTER_PORT=0; all three ranks in init_process_group's store connect.
register(LiveCase("ffd_torchrun_static_rdzv_port0",
                  (PYTHON, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=3", "--rdzv-backend=static",
                   "--rdzv-endpoint=localhost:0", "--node-rank=0", "{fixtures}/ffd_torchrun_static_rdzv_port0.py"),
                  ranks=3, settle=3.0))

# gossip averaging over the ring's edge groups in each rank's neighbour order (mpi-forum/mpi-issues#859): rank 0 in
# all_reduce on {0,2}, rank 1 on {0,1}, rank 2 on {1,2}: a cycle.
register(LiveCase("ffd_gossip_pair_groups_cyclic_order", torchrun(3, "ffd_gossip_pair_groups_cyclic_order.py"),
                  ranks=3, settle=2.0))

# a bucketing batch sampler shuffled with the per-rank seeded global RNG (pytorch/audio PR #3068): rank 2 (6 batches)
# in the end-of-epoch barrier, ranks 0-1 in their seventh step's DDP backward.
register(LiveCase("ffd_hubert_bucket_sampler_rank_seeded_shuffle",
                  torchrun(3, "ffd_hubert_bucket_sampler_rank_seeded_shuffle.py"), ranks=3, settle=2.0))

# torch.multiprocessing.spawn; a multiprocessing Lock held by rank 0 across its second barrier (pmodels/mpich#1997):
# rank 0 in dist.barrier, ranks 1-2 in the lock's acquire.
register(LiveCase("ffd_spawn_stats_lock_held_across_barrier",
                  (PYTHON, "{fixtures}/ffd_spawn_stats_lock_held_across_barrier.py"), ranks=3, settle=2.0))

# a DataLoader worker waiting for a sample server's reply (pytorch/pytorch#165832): rank 1's worker in socket recv, its
# main process in the DataLoader; ranks 0 and 2 in step 2's DDP backward.
register(LiveCase("ffd_loader_worker_sample_server_no_reply",
                  torchrun(3, "ffd_loader_worker_sample_server_no_reply.py"), ranks=3, settle=3.0))
