"""Helper fdo's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture. A third, fdo_nccl_tp_broadcast_data_exhausted, never reached its
hang's ready markers on the H200 within 90 s and was left out with its fixture (docs/BENCHMARKS.md)."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fdo_nccl_zero_local_overflow_skips_all_gather",
                  torchrun(3, "fdo_nccl_zero_local_overflow_skips_all_gather.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdo_nccl_early_stop_rank0_breaks_before_flag",
                  torchrun(3, "fdo_nccl_early_stop_rank0_breaks_before_flag.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
