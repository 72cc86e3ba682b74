"""First-contact batch fdb (fifteenth first-contact round, part B): live cases from public programs and reports
on a per-process hash() in a cache fingerprint, the tutorial's per-parameter gradient averaging that skips None
gradients, a main-process-only generate under tensor parallelism, functools.cached_property's shared lock (see
each case.json); and one shape case."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# Cache fingerprint from the built-in hash() (salted per process; huggingface/datasets#3178), 3 ranks: rank 0 writes
# its cache and waits in the barrier; ranks 1 and 2 spin without sleeping in while-not-exists for a name never written.
register(LiveCase("fdb_hash_fingerprint_spin", torchrun(3, "fdb_hash_fingerprint_spin.py"), ranks=3, settle=1.5))

# pytorch/tutorials dist_tuto average_gradients with `if p.grad is None: continue`, 3 ranks: rank 1's last batch has
# no task-B sample, it skips head_b's all_reduces and waits in the end-of-epoch barrier; ranks 0 and 2 wait in
# head_b.weight's all_reduce.
register(LiveCase("fdb_avg_grads_skip_none", torchrun(3, "fdb_avg_grads_skip_none.py"), ranks=3, settle=1.5))

# Megatron-style tensor-parallel LM, sample generate under `if is_main_process`, 3 ranks: rank 0 waits in the
# row-parallel all_reduce inside generate; ranks 1 and 2 in the end-of-eval barrier.
register(LiveCase("fdb_tp_generate_main_only", torchrun(3, "fdb_tp_generate_main_only.py"), ranks=3, settle=1.5))

# functools.cached_property's per-property lock shared by every instance (python/cpython#87634), 3 ranks: on rank 1
# the main thread (in shard 0's index getter, lock held, waiting for its download) and the prefetch thread (warming
# shard 1's index, waiting for the lock) deadlock; ranks 0 and 2 wait in step 0's DDP gradient all_reduce.
register(LiveCase("fdb_cached_property_lock", torchrun(3, "fdb_cached_property_lock.py"), ranks=3, settle=2.0))
