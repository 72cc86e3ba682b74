"""Helper fdu's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fdu_nccl_halo_last_rank_wraps_to_rank0",
                  torchrun(3, "fdu_nccl_halo_last_rank_wraps_to_rank0.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdu_nccl_moe_drop_after_split_exchange",
                  torchrun(3, "fdu_nccl_moe_drop_after_split_exchange.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
