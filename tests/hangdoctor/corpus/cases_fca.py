"""First-contact batch A (PyTorch and DeepSpeed examples): live cases on CPU/gloo, collected to measure hangdoctor
on hangs its rules were not shaped by. Each fixture names its public source and thread in its docstring."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

DS_ENV = {"DS_ACCELERATOR": "cpu"}

register(LiveCase("fca_ds_pipe_eval_last_rank", torchrun(4, "fca_ds_pipe_eval_last_rank.py"), ranks=4, env=DS_ENV,
                  settle=2.0))
register(LiveCase("fca_ds_zero2_save_rank0", torchrun(3, "fca_ds_zero2_save_rank0.py"), ranks=3, env=DS_ENV,
                  settle=2.0))
register(LiveCase("fca_tp_full_tensor_log", torchrun(4, "fca_tp_full_tensor_log.py"), ranks=4, settle=2.0))
register(LiveCase("fca_p2p_wrong_src", torchrun(4, "fca_p2p_wrong_src.py"), ranks=4, settle=2.0))
register(LiveCase("fca_fsdp2_microbatch_count", torchrun(3, "fca_fsdp2_microbatch_count.py"), ranks=3, settle=2.0))
register(LiveCase("fca_rpc_ps_blocking_handler", torchrun(4, "fca_rpc_ps_blocking_handler.py"), ranks=4, settle=3.0))
