"""First-contact batch B: live cases from public example programs of PyTorch Lightning, HF accelerate and
torch.distributed.pipelining, and shape cases from public threads (vLLM, SGLang, Megatron, verl/OpenRLHF,
torchtitan), each hung the way a public thread reports (see each case.json's source and thread)."""

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun

register(LiveCase("fcb_lightning_log_dir", torchrun(3, "fcb_lightning_log_dir.py"), ranks=3, settle=2.0))
