"""First-contact batch Q (ninth first-contact round, part Q): live cases from public programs and reports on an
evaluation collective queued behind a stuck upload on a one-worker ThreadPoolExecutor, two process groups used in
a different order on one rank, ... (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# ThreadPoolExecutor evaluation with an all_reduce (pytorch/pytorch#115861), 3 ranks: rank 2's single worker is
# stuck in a log upload (socket recv), its evaluation never runs; ranks 0-1's workers wait in the all_reduce.
register(LiveCase("fcq_threadpool_eval_collective", torchrun(3, "fcq_threadpool_eval_collective.py"), ranks=3,
                  settle=2.0))

# Two groups issued in a rank-divergent order (meta-pytorch/torchrec#4149), 3 ranks: rank 2 waits in the replicate
# group's all_reduce, ranks 0-1 in the shard group's all_to_all_single.
register(LiveCase("fcq_pg_order_two_groups", torchrun(3, "fcq_pg_order_two_groups.py"), ranks=3, settle=2.0))
