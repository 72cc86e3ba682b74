"""First-contact batch fef (twenty-ninth first-contact round, part F): live hangs in PyTorch's own distributed stack
(see each case.json): a side TCPStore whose master waits for one client too many, a torch.distributed.pipelining
first stage that runs out of data one step early, dcp.save on one data-parallel replica of a 2-D DeviceMesh, an
all_gather_object that one rank leaves because its object cannot be pickled, and a DataLoader worker forked with a
thread pool whose threads did not come along."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# side TCPStore sized for a reader that no longer runs (pytorch/pytorch PR #111805): rank 0 in the master store's
# constructor waiting for a 4th client; ranks 1-2 in the start barrier.
register(LiveCase("fef_side_store_master_counts_launcher", torchrun(3, "fef_side_store_master_counts_launcher.py"),
                  ranks=3, settle=2.0))

# torch.distributed.pipelining, first stage's loader drop_last=True, other stages count ceil(70/8) steps
# (meta-pytorch/torchrec PR #4605): stage 0 in the end-of-epoch barrier; stages 1-2 in the 9th step's receive.
register(LiveCase("fef_pipelining_first_stage_drop_last", torchrun(3, "fef_pipelining_first_stage_drop_last.py"),
                  ranks=3, settle=2.0))

# dcp.save guarded by mesh["dp"].get_local_rank() == 0 on a 2 x 2 (dp, tp) mesh (pytorch/pytorch#156002): ranks 0-1
# in dcp.save's plan gather (world); ranks 2-3 in the next step's data-parallel gradient all_reduce.
register(LiveCase("fef_dcp_save_first_dp_replica", torchrun(4, "fef_dcp_save_first_dp_replica.py"), ranks=4,
                  settle=2.0))

# a 'safe' all_gather_object helper that swallows the local pickling error (NVIDIA/TensorRT-LLM PR #7507),
# torch.multiprocessing.spawn, 3 ranks: ranks 0, 2 in all_gather_object on the object group; rank 1 in the next
# backward (DDP all_reduce, world group).
register(LiveCase("fef_spawn_gather_object_pickle_error_skipped",
                  (PYTHON, "{fixtures}/fef_spawn_gather_object_pickle_error_skipped.py"), ranks=3, settle=2.0))

# a dataset thread pool created in rank 0's main process before the DataLoader forks its worker
# (rohanpm/more-executors#140, rust-lang/futures-rs#649): rank 0's worker in Future.result, rank 0 in the loader;
# ranks 1-2 in the first backward (DDP all_reduce).
register(LiveCase("fef_loader_fork_decode_pool_rank0_stats", torchrun(3, "fef_loader_fork_decode_pool_rank0_stats.py"),
                  ranks=3, settle=2.0))
