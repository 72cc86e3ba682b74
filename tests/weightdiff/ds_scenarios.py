"""Real DeepSpeed runs for weightdiff's tests: run under torchrun (gloo, CPU), PP=2 x DP=2, several scenarios
per launch because a launch costs 10-18 s here.

    torchrun --standalone --nproc-per-node 4 tests/weightdiff/ds_scenarios.py OUT

A tiny GPT-like PipelineModule: a TiedLayerSpec "embed" (word embeddings + an embedding LayerNorm) on the
first stage, blocks, and the same tied module as the head on the last stage (with a forward_fn, so DeepSpeed
writes no layer file for it). ZeRO-1 with torch's AdamW. Scenarios, each with its own engine:

- healthy/  tied attrs include the norm, robust grouping: 2 iterations dumped (before, after) to run1/, saved
            to ckpt/; then a fresh engine (other seed) loads ckpt/ and dumps iteration 3 to run2/, saves ckpt2/.
- seedbug/  BigScience's setup: only word_embeddings.weight is tied, the norm is grouped by an alias-based
            isinstance rule (so it is decayed). Same save / fresh-load / dump sequence as healthy.
- desync/   tied-gradient all-reduce disabled (get_tied_weights_and_groups returns nothing): copies drift;
            the after-dump of iteration 2 on dp=1, pp=0 also gets one element changed (a diverged replica).
            Saved to ckpt/ after iteration 2: the last stage's master of the tied embedding is its own drifted
            copy, not the first stage's stored one.
- bn/       a PipelineModule of Linear, ReLU, BatchNorm1d, Linear, ReLU, Linear (ReLU layers: empty layer
            files; BatchNorm: buffers), the same data on every dp rank: one step dumped to run/, saved to ckpt/.
- zero2/    a plain nn.Module (no pipeline) over all 4 ranks as DP=4, ZeRO stage 2, bf16: two steps, saved to
            ckpt/ (bf16 module weights in mp_rank_00, fp32 master partitions in bf16_zero_pp_rank_{0..3}_*; what
            zero_to_fp32 and ds_to_universal take).
- tied/     a plain nn.Module whose output head is its input embedding (one parameter, two names), over all 4
            ranks as DP=4, ZeRO-1: one step, saved to ckpt/; rank 0 also writes the module's state dict as
            state.pt (torch.save) and as huggingface_hub writes it (hub/: the tied name dropped and declared).
- bf16pp/   a pipeline like bn/'s (a LayerNorm for the BatchNorm) with bf16 and ZeRO stage 0, so DeepSpeed's
            bf16 optimizer (BLOOM's setup): fp32 masters partitioned over dp, no ZeRO param_shapes; two steps,
            saved to ckpt/.

Also writes OUT/groups-rank{R}.json: param_groups_by_name on the DeepSpeed ZeRO optimizer vs on the torch one.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # trap 1: pick the CPU accelerator without a warning

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import weightdiff  # noqa: E402
from tests.weightdiff.models import LayerNorm as AliasLayerNorm  # noqa: E402
from hangdoctor.topology import ParallelDims  # noqa: E402

VOCAB, HIDDEN, SEQ, MICRO, GAS = 32, 16, 8, 2, 2


class EmbedPipe(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)  # a plain torch LayerNorm, as BigScience added for the embedding

    def forward(self, tokens):
        return self.norm(self.word_embeddings(tokens))


def head(module: EmbedPipe, hidden):
    # The norm is unused here; the zero term gives it a gradient, or the tied all-reduce of a norm that is a
    # tied attribute would skip it on this stage only and hang (engine.py `_exec_reduce_tied_grads`).
    logits = F.linear(hidden, module.word_embeddings.weight)
    return logits + 0.0 * (module.norm.weight.sum() + module.norm.bias.sum())


class BlockPipe(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = AliasLayerNorm(HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return x + torch.tanh(self.dense(self.input_layernorm(x)))


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, VOCAB).float(), labels.reshape(-1))


def build(seed: int, *, tie_norm: bool, naive: bool):
    import deepspeed
    from deepspeed.pipe import LayerSpec, PipelineModule, TiedLayerSpec

    torch.manual_seed(seed)
    tied = ["word_embeddings.weight"] + (["norm.weight", "norm.bias"] if tie_norm else [])
    layers = [TiedLayerSpec("embed", EmbedPipe, tied_weight_attr=tied),
              *(LayerSpec(BlockPipe) for _ in range(4)),
              TiedLayerSpec("embed", EmbedPipe, forward_fn=head, tied_weight_attr=tied)]
    model = PipelineModule(layers, loss_fn=loss_fn, num_stages=2, partition_method="uniform")
    decay, no_decay, seen = [], [], set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if naive:
                skip = isinstance(module, AliasLayerNorm) or name == "bias"
            else:
                skip = p.dim() < 2 or any("norm" in c.__name__.lower() for c in type(module).__mro__)
            (no_decay if skip else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-2)  # trap 3: a torch optimizer, not DeepSpeed's fused Adam
    groups = weightdiff.param_groups_by_name(model, opt)
    dp = int(os.environ["WORLD_SIZE"]) // 2
    config = {"train_batch_size": MICRO * GAS * dp, "train_micro_batch_size_per_gpu": MICRO,
              "gradient_accumulation_steps": GAS, "zero_optimization": {"stage": 1}, "steps_per_print": 10**9}
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    return engine, groups, opt


def batches(seed: int):
    g = torch.Generator().manual_seed(seed)
    while True:
        tokens = torch.randint(0, VOCAB, (MICRO, SEQ + 1), generator=g)
        yield tokens[:, :-1], tokens[:, 1:]


def train(engine, groups, coords, out: Path, iterations: range, *, corrupt_last_after=None):
    data = batches(1234 + coords.dp)
    for it in iterations:
        weightdiff.dump(engine.module, iteration=it, tag="before", out=out, coords=coords, param_groups=groups)
        engine.train_batch(data_iter=data)
        if corrupt_last_after and it == iterations[-1] and corrupt_last_after(coords):
            with torch.no_grad():
                w = engine.module.get_parameter("1.dense.weight")
                w[HIDDEN // 2, HIDDEN // 2] += 1e-3
        weightdiff.dump(engine.module, iteration=it, tag="after", out=out, coords=coords, param_groups=groups)


def scenario_save_and_resume(out: Path, coords, *, tie_norm: bool, naive: bool) -> None:
    engine, groups, _ = build(seed=1, tie_norm=tie_norm, naive=naive)
    train(engine, groups, coords, out / "run1", range(1, 3))
    engine.save_checkpoint(str(out / "ckpt"), tag="global_step2")
    fresh, groups2, _ = build(seed=2, tie_norm=tie_norm, naive=naive)  # a new process would start like this
    fresh.load_checkpoint(str(out / "ckpt"))
    train(fresh, groups2, coords, out / "run2", range(3, 4))
    fresh.save_checkpoint(str(out / "ckpt2"), tag="global_step3")


def scenario_buffers(out: Path, coords) -> None:
    import deepspeed
    from deepspeed.pipe import LayerSpec, PipelineModule

    torch.manual_seed(4)
    layers = [LayerSpec(nn.Linear, HIDDEN, HIDDEN), LayerSpec(nn.ReLU), LayerSpec(nn.BatchNorm1d, HIDDEN),
              LayerSpec(nn.Linear, HIDDEN, HIDDEN), LayerSpec(nn.ReLU), LayerSpec(nn.Linear, HIDDEN, 1)]
    model = PipelineModule(layers, loss_fn=lambda y, target: F.mse_loss(y.float(), target), num_stages=2,
                           partition_method="uniform")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    dp = int(os.environ["WORLD_SIZE"]) // 2
    config = {"train_batch_size": MICRO * GAS * dp, "train_micro_batch_size_per_gpu": MICRO,
              "gradient_accumulation_steps": GAS, "zero_optimization": {"stage": 1}, "steps_per_print": 10**9}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    g = torch.Generator().manual_seed(77)  # the same batches on every dp rank: BatchNorm statistics stay equal
    data = iter([(torch.randn(MICRO, HIDDEN, generator=g), torch.randn(MICRO, 1, generator=g)) for _ in range(GAS)])
    engine.train_batch(data_iter=data)
    weightdiff.dump(engine.module, iteration=1, tag="after", out=out / "run", coords=coords)
    engine.save_checkpoint(str(out / "ckpt"), tag="global_step1")


def _config(dp: int, stage: int, bf16: bool = False) -> dict:
    return {"train_batch_size": MICRO * GAS * dp, "train_micro_batch_size_per_gpu": MICRO,
            "gradient_accumulation_steps": GAS, "zero_optimization": {"stage": stage}, "bf16": {"enabled": bf16},
            "steps_per_print": 10**9}


def scenario_zero2_bf16(out: Path) -> None:
    import deepspeed

    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(HIDDEN, 3 * HIDDEN), nn.LayerNorm(3 * HIDDEN), nn.ReLU(), nn.Linear(3 * HIDDEN, 5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    config = _config(torch.distributed.get_world_size(), 2, True)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    g = torch.Generator().manual_seed(100 + torch.distributed.get_rank())
    for _ in range(2):
        for _ in range(GAS):
            x = torch.randn(MICRO, HIDDEN, generator=g).bfloat16()
            engine.backward(engine(x).float().pow(2).mean())
            engine.step()
    engine.save_checkpoint(str(out / "ckpt"), tag="global_step2")


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied, as GPT-2's lm_head and wte

    def forward(self, tokens):
        return self.head(self.norm(self.embed(tokens)))


def scenario_tied_module(out: Path) -> None:
    import deepspeed
    from huggingface_hub import save_torch_state_dict

    torch.manual_seed(7)
    model = TiedLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=_config(torch.distributed.get_world_size(), 1))
    data = batches(900 + torch.distributed.get_rank())
    for _ in range(GAS):
        tokens, labels = next(data)
        engine.backward(loss_fn(engine(tokens), labels))
        engine.step()
    engine.save_checkpoint(str(out / "ckpt"), tag="global_step1")
    if torch.distributed.get_rank() == 0:
        # the module's parameters are views of ZeRO's flat buffer: copy them, keeping the tie as the model has it
        state = {k: v.detach().clone() for k, v in engine.module.state_dict().items() if k != "head.weight"}
        state["head.weight"] = state["embed.weight"]
        torch.save(state, out / "state.pt")
        (out / "hub").mkdir()
        save_torch_state_dict(dict(state), out / "hub")


def scenario_bf16_pipeline(out: Path) -> None:
    import deepspeed
    from deepspeed.pipe import LayerSpec, PipelineModule

    torch.manual_seed(6)
    layers = [LayerSpec(nn.Linear, HIDDEN, HIDDEN), LayerSpec(nn.ReLU), LayerSpec(nn.LayerNorm, HIDDEN),
              LayerSpec(nn.Linear, HIDDEN, HIDDEN), LayerSpec(nn.ReLU), LayerSpec(nn.Linear, HIDDEN, 1)]
    model = PipelineModule(layers, loss_fn=lambda y, target: F.mse_loss(y.float(), target.float()), num_stages=2,
                           partition_method="uniform")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=_config(int(os.environ["WORLD_SIZE"]) // 2, 0, True))
    g = torch.Generator().manual_seed(78)
    batches = [(torch.randn(MICRO, HIDDEN, generator=g).bfloat16(), torch.randn(MICRO, 1, generator=g).bfloat16())
               for _ in range(2 * GAS)]
    data = iter(batches)
    engine.train_batch(data_iter=data)
    engine.train_batch(data_iter=data)
    engine.save_checkpoint(str(out / "ckpt"), tag="global_step2")


def main() -> None:
    out = Path(sys.argv[1])
    import deepspeed

    comm_torch = importlib.import_module("deepspeed.comm.torch")  # trap 2: skip the 70 s shm-op JIT compile
    comm_torch.build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    coords = ParallelDims.from_world(world, tp=1, pp=2).coords(rank)

    # the plain modules first: DeepSpeed keeps the pipeline engines' model-parallel groups after them
    scenario_zero2_bf16(out / "zero2")
    scenario_tied_module(out / "tied")
    scenario_save_and_resume(out / "healthy", coords, tie_norm=True, naive=False)
    scenario_save_and_resume(out / "seedbug", coords, tie_norm=False, naive=True)
    scenario_buffers(out / "bn", coords)

    engine, groups, opt = build(seed=3, tie_norm=True, naive=False)
    engine.module.get_tied_weights_and_groups = lambda: []  # the seed's missing tied-gradient reduction
    train(engine, groups, coords, out / "desync", range(1, 3), corrupt_last_after=lambda c: c.dp == 1 and c.pp == 0)
    engine.save_checkpoint(str(out / "desync" / "ckpt"), tag="global_step2")
    from_ds = weightdiff.param_groups_by_name(engine.module, engine.optimizer)
    (out / f"groups-rank{rank}.json").write_text(json.dumps({"torch": groups, "deepspeed": from_ds}))
    scenario_bf16_pipeline(out / "bf16pp")
    torch.distributed.barrier()
    if rank == 0:
        (out / "done").write_text("ok\n")


if __name__ == "__main__":
    main()
