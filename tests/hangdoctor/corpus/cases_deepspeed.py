"""Live corpus cases with DeepSpeed and FSDP on CPU/gloo: ZeRO-3, FSDP2, and a job under the `deepspeed` launcher."""

import socket
from pathlib import Path

from tests.hangdoctor.corpus.live import LiveCase, register, torchrun
from tests.support import PYTHON

DS_ENV = {"DS_ACCELERATOR": "cpu"}


def _free_port() -> str:
    """The `deepspeed` runner has no standalone mode: give it a port nobody holds now (its default is 29500)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


register(LiveCase("zero3_skip_forward", torchrun(2, "zero3_skip_forward.py"), ranks=2, env=DS_ENV))
register(LiveCase("fsdp_skip_step", torchrun(2, "fsdp_skip_step.py"), ranks=2))
# The runner script (.venv/bin/deepspeed) starts `python -m deepspeed.launcher.launch`, which starts the 3 ranks.
register(LiveCase("deepspeed_launcher",
                  (str(Path(PYTHON).with_name("deepspeed")), "--num_gpus", "3", "--master_port", _free_port(),
                   "{fixtures}/deepspeed_launcher.py"), ranks=3, env=DS_ENV))
