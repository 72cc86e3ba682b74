"""Helper fds's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture (both mismatches abort on gloo; HD_FDS_NO_FAULT=1 lets them complete)."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fds_nccl_metric_state_float64_all_reduce",
                  torchrun(3, "fds_nccl_metric_state_float64_all_reduce.py"), ranks=3, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fds_nccl_flat_grads_skip_none_expert",
                  torchrun(3, "fds_nccl_flat_grads_skip_none_expert.py"), ranks=3, gpu=True,
                  settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
