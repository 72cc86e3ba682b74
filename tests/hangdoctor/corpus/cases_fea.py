"""Helper fea's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture. A second, fea_nccl_pp_tied_embed_sync_before_send_grad, did not record on
the H100 (record.py did not finish within the 80 s case timeout; not retried, no device time left) and was left out;
its fixture stays (docs/first-contact/batch26-a.md)."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fea_nccl_distopt_gradnorm_skip_reduce_scatter",
                  torchrun(3, "fea_nccl_distopt_gradnorm_skip_reduce_scatter.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
