"""Helper fdl's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

# two fixtures keep a gloo group beside NCCL (a CPU group for coordination): gloo picks its interface from the
# host name, which a lent machine without a network may not resolve; the loopback, as NCCL_SOCKET_IFNAME does
NCCL_AND_GLOO = {**NCCL_ONE_GPU, "GLOO_SOCKET_IFNAME": "lo"}

register(LiveCase("fdl_nccl_moe_zero_token_rank_skips_all_to_all",
                  torchrun(3, "fdl_nccl_moe_zero_token_rank_skips_all_to_all.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdl_nccl_ddp_uneven_shard_epoch_barrier", torchrun(4, "fdl_nccl_ddp_uneven_shard_epoch_barrier.py"),
                  ranks=4, gpu=True, settle=3.0, start_timeout=90.0, env=NCCL_AND_GLOO))
register(LiveCase("fdl_nccl_fsdp2_skip_masked_microbatch", torchrun(3, "fdl_nccl_fsdp2_skip_masked_microbatch.py"),
                  ranks=3, gpu=True, settle=3.0, start_timeout=90.0, env=NCCL_AND_GLOO))
