"""A real DeepSpeed ZeRO stage 3 run for weightdiff's tests (gloo, CPU): a small model whose parameter sizes do
not divide by the dp size (so the partitions carry padding), one parameter frozen, trained three steps with
torch's AdamW, saved after steps 1 and 3.

    torchrun --standalone --nproc-per-node 2 tests/weightdiff/zero3_save.py OUT
"""

from __future__ import annotations

import importlib
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # trap 1 of shared/notes/deepspeed-cpu.md

import deepspeed  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(31, 15)
        self.fc1 = nn.Linear(15, 23)
        self.norm = nn.LayerNorm(23)
        self.fc2 = nn.Linear(23, 31)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return self.fc2(self.norm(self.fc1(self.emb(x)))) * self.scale[0]


def main() -> None:
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None  # trap 2
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    model = Net()
    model.norm.bias.requires_grad_(False)  # a frozen parameter: ZeRO-3 keeps it in frozen_param_fragments
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)  # trap 3: torch's Adam
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
              "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    g = torch.Generator().manual_seed(5 + torch.distributed.get_rank())
    for step in range(1, 4):
        x = torch.randint(0, 31, (2, 8), generator=g)
        engine.backward(engine(x).float().pow(2).mean())
        engine.step()
        if step in (1, 3):
            engine.save_checkpoint(sys.argv[1], tag=f"global_step{step}")
    torch.distributed.barrier()
    # Leave without CPython's finalisation, as trainer/__main__.py does: a gloo worker thread still freeing the
    # last asynchronous collective's tensors is unwound by force when finalisation takes the GIL, and std::terminate
    # aborts a rank whose checkpoints are written (SIGABRT, "terminate called without an active exception", CI).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
