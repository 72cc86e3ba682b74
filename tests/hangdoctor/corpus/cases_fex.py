"""First-contact batch fex (thirty-seventh first-contact round, part X): live hangs in PyTorch's own distributed
stack and programs built directly on it (see each case.json): a row-sharded embedding whose id exchange one rank
skips on an empty batch, a pipeline's per-key tagged tensor-dict exchange that drops a None value, a lease ledger
whose weakref.finalize release runs under gc.collect() inside the lock it needs, a peer-metadata key in the job's
TCPStore that one rank never writes, and an atexit barrier that one rank never reaches because its interpreter
first joins a non-daemon thread."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# row-sharded table on sharding groups {0,1} and {2,3}, DDP dense tower on the world; rank 1's empty id batch skips
# the exchange (meta-pytorch/torchrec#2773, NVIDIA/recsys-examples PR #349): rank 0 in all_to_all_single on {0,1};
# ranks 1-3 in DDP's backward all_reduce.
register(LiveCase("fex_sparse_empty_skip_a2a_two_groups", torchrun(4, "fex_sparse_empty_skip_a2a_two_groups.py"),
                  ranks=4, settle=2.0))

# per-key tagged send/recv of a tensor dict between pipeline stages, None values skipped by the sender
# (meta-pytorch/torchcomms PR #2991): stage 0 in send(tag=2); stage 1 in recv(tag=1); stage 2 in recv from stage 1.
register(LiveCase("fex_pp_tensor_dict_tag_key_dropped", torchrun(3, "fex_pp_tensor_dict_tag_key_dropped.py"),
                  ranks=3, settle=2.0))

# weakref.finalize release run by gc.collect() inside the ledger lock it needs (kirodotdev/KiroCrew PR #11245),
# torch.multiprocessing.spawn, 3 ranks: rank 2 in release (self-deadlock); ranks 0-1 in DDP's backward all_reduce.
register(LiveCase("fex_spawn_lease_finalizer_gc_lock",
                  (PYTHON, "{fixtures}/fex_spawn_lease_finalizer_gc_lock.py"), ranks=3, settle=2.0))

# peer metadata in the job's TCPStore, the rank with nothing to register never writes its key
# (ai-dynamo/nixl PR #1155): ranks 0, 2 in store.wait; rank 1 in the start barrier.
register(LiveCase("fex_store_peer_metadata_key_skipped", torchrun(3, "fex_store_peer_metadata_key_skipped.py"),
                  ranks=3, settle=2.0))

# atexit barrier + destroy_process_group, rank 2's non-daemon uploader thread never told to stop
# (python/cpython PR #116982): rank 2 in threading._shutdown; ranks 0-1 in the atexit barrier.
register(LiveCase("fex_atexit_barrier_behind_nondaemon_thread",
                  torchrun(3, "fex_atexit_barrier_behind_nondaemon_thread.py"), ranks=3, settle=2.0))
