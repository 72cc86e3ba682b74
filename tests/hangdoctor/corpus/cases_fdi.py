"""Helper fdi's GPU cases: real NCCL hangs, modelled on public threads, recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fdi_nccl_rank0_eval_metric_reduce", torchrun(3, "fdi_nccl_rank0_eval_metric_reduce.py"), ranks=3,
                  gpu=True, settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdi_nccl_new_group_nonmember_skips", torchrun(3, "fdi_nccl_new_group_nonmember_skips.py"),
                  ranks=3, gpu=True, settle=3.0, start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdi_nccl_gather_object_empty_rank_skips",
                  torchrun(3, "fdi_nccl_gather_object_empty_rank_skips.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
