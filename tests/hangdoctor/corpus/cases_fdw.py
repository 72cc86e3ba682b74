"""Helper fdw's GPU cases: real NCCL hangs, modelled on public threads, to be recorded on a lent GPU machine
(record_gpu.sh); each fixture's docstring names its thread. They cannot run here (`gpu=True`); HD_CORPUS_DRY_RUN=1
runs them on gloo as a check of the fixture."""

from tests.hangdoctor.corpus.cases_gpu import NCCL_ONE_GPU
from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fdw_nccl_pp_send_default_group_recv_pp_group",
                  torchrun(3, "fdw_nccl_pp_send_default_group_recv_pp_group.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
register(LiveCase("fdw_nccl_layerdrop_rank_seed_grad_hooks",
                  torchrun(3, "fdw_nccl_layerdrop_rank_seed_grad_hooks.py"), ranks=3, gpu=True, settle=3.0,
                  start_timeout=90.0, env=NCCL_ONE_GPU))
