"""First-contact batch fei (thirtieth first-contact round, part I): live hangs in PyTorch's own distributed stack
(see each case.json): post-local SGD's model averager one call behind on the rank that skipped a loss spike, a
context-parallel ring whose parity schedule cannot pair an odd ring over two groups, a rank still loading its graph
partition while the others wait in init_process_group, a validation generator forked after the OpenMP pool was in
use (torch.multiprocessing.spawn), and a DCP SavePlanner whose create_global_plan (coordinator only) all-reduces."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

# post-localSGD hook + PeriodicModelAverager (the averager's example; pytorch/pytorch PR #60320), rank 1 skips a
# loss-spike step (and the averager call): ranks 0, 2, 3 in the averager's world all_reduce; rank 1 in the next
# backward's subgroup all_reduce.
register(LiveCase("fei_postlocalsgd_spike_skip_averager", torchrun(4, "fei_postlocalsgd_spike_skip_averager.py"),
                  ranks=4, settle=2.0))

# ring attention over 3 ranks, send/recv groups chosen by ring-rank parity (ByteDance-Seed/VeOmni PR #1085 review):
# rank 2 sends to 0 on the main group, rank 0 receives from 2 on the overlap group; rank 1 one rotation further.
register(LiveCase("fei_cp_ring_parity_odd_size", torchrun(3, "fei_cp_ring_parity_odd_size.py"), ranks=3, settle=2.0))

# graph partitions loaded before init_process_group (alibaba/graphlearn-for-pytorch PR #102): rank 2 busy in a
# quadratic dedup of its hub node's edges; ranks 0-1 in init_process_group's rendezvous.
register(LiveCase("fei_graph_partition_load_before_init", torchrun(3, "fei_graph_partition_load_before_init.py"),
                  ranks=3, settle=2.0))

# spawn, rank 0's validation generator forked after the OpenMP pool was used (pytorch/pytorch#41197): the child in
# libgomp, rank 0 in Connection.recv; ranks 1-2 in DDP's gradient all_reduce.
register(LiveCase("fei_spawn_val_bg_generator_fork_after_omp",
                  (PYTHON, "{fixtures}/fei_spawn_val_bg_generator_fork_after_omp.py"), ranks=3, settle=3.0))

# dcp.save with a SavePlanner whose create_global_plan all-reduces a byte count over a metrics group (SavePlanner
# contract: create_global_plan runs on the coordinator only; pytorch/torchtitan#709): rank 0 in the metrics
# all_reduce inside dcp.save; ranks 1-2 in dcp.save's scatter of the global plan.
register(LiveCase("fei_dcp_global_plan_stats_reduce", torchrun(3, "fei_dcp_global_plan_stats_reduce.py"), ranks=3,
                  settle=2.0))
