"""Helper fea's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fea_nccl_pp_tied_embed_sync_before_send_grad",
                  torchrun(3, "fea_nccl_pp_tied_embed_sync_before_send_grad.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fea_nccl_distopt_gradnorm_skip_reduce_scatter",
                  torchrun(3, "fea_nccl_distopt_gradnorm_skip_reduce_scatter.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
