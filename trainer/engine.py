"""Build the DeepSpeed pipeline engine: topology, TP groups, the pipeline module, AdamW param groups, ZeRO.

Order of construction, and why:
1. the DeepSpeed topology, from our ParallelDims (one source of truth for rank <-> coordinates);
2. our TP groups: every rank creates every group in the same order (new_group is collective);
3. the PipelineModule, which builds only this stage's layers and the tied-module groups;
4. AdamW param groups, recorded by name BEFORE deepspeed.initialize, because ZeRO-1 then replaces the
   optimizer's groups with flat fp32 partitions (weightdiff's param-group audit needs the real mapping);
5. deepspeed.initialize with torch's AdamW (DeepSpeed's own "Adam" would JIT-compile fused_adam, 121 s);
6. with ZeRO-0, our gradient clipping (grad_clip.py) as AdamW's step pre-hook, in place of DeepSpeed's, whose
   ZeRO-0 global norm is wrong under pipeline parallelism. Its norm group is created before the
   PipelineModule's groups, as every rank's new_group calls must come in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist

from hangdoctor.topology import ParallelDims, RankCoords
from trainer.config import TrainConfig
from trainer.faults import FaultInjector
from trainer.grad_clip import GlobalGradClipper, make_norm_group
from trainer.model import (
    AddLearnedPositions,
    EmbeddingPipe,
    FinalLayerNormPipe,
    GPTShape,
    ParallelTransformerLayerPipe,
    lm_loss,
    tied_attributes,
    tied_head,
)
from trainer.param_groups import build_param_groups
from weightdiff import param_groups_by_name

DS_AXIS = {"tp": "model", "dp": "data", "pp": "pipe"}


@dataclass
class BuiltEngine:
    engine: object  # deepspeed.runtime.pipe.engine.PipelineEngine
    groups_by_name: dict[str, dict]  # parameter name -> its optimizer group's hyperparameters
    shape: GPTShape
    clipper: GlobalGradClipper | None = None  # ZeRO-0 only: our global norm and clipping

    def global_grad_norm(self) -> float | None:
        """The global gradient norm before clipping of the last step: ours with ZeRO-0, DeepSpeed's with ZeRO-1."""
        if self.clipper is not None:
            return self.clipper.last_norm
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else None


def deepspeed_topology(dims: ParallelDims):
    """A ProcessTopology whose rank layout equals ParallelDims' (DeepSpeed lists the slowest axis first)."""
    from deepspeed.runtime.pipe.topology import ProcessTopology

    slow_to_fast = list(reversed(dims.axes))
    return ProcessTopology(axes=[DS_AXIS[a] for a in slow_to_fast], dims=[dims.size(a) for a in slow_to_fast])


def make_tp_group(dims: ParallelDims, coords: RankCoords):
    mine = None
    for ranks in dims.groups("tp"):
        group = dist.new_group(ranks=ranks)
        if coords.rank in ranks:
            mine = group
    return mine


def ds_config(cfg: TrainConfig, dims: ParallelDims) -> dict:
    return {
        "train_batch_size": cfg.global_batch_size,
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps(dims),
        # ZeRO-1 clips in DeepSpeed's ZeRO optimizer (its norm is the true one); ZeRO-0 clips in grad_clip.py
        "gradient_clipping": cfg.clip_grad if cfg.zero_stage == 1 else 0.0,
        "zero_optimization": {"stage": cfg.zero_stage},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


def gpt_layer_specs(shape: GPTShape, tp_group) -> list:
    """The pipeline's layers in order (see trainer/model.py): the tied embedding appears first and last."""
    from deepspeed.pipe import LayerSpec, TiedLayerSpec

    tied = tied_attributes(shape)
    return [
        TiedLayerSpec("embed", EmbeddingPipe, shape, tp_group, tied_weight_attr=tied),
        LayerSpec(AddLearnedPositions, shape),
        *(LayerSpec(ParallelTransformerLayerPipe, shape, i, tp_group) for i in range(shape.layers)),
        LayerSpec(FinalLayerNormPipe, shape),
        TiedLayerSpec("embed", EmbeddingPipe, shape, tp_group, forward_fn=tied_head, tied_weight_attr=tied),
    ]


def build_engine(cfg: TrainConfig, dims: ParallelDims, coords: RankCoords, faults: FaultInjector) -> BuiltEngine:
    import deepspeed
    from deepspeed.pipe import PipelineModule
    from deepspeed.runtime.activation_checkpointing import checkpointing

    shape = GPTShape(vocab=cfg.padded_vocab_size, hidden=cfg.hidden_size, heads=cfg.num_attention_heads,
                     seq=cfg.seq_length, layers=cfg.num_layers, embed_layernorm=cfg.embed_layernorm, seed=cfg.seed)
    tp_group = make_tp_group(dims, coords) if dims.tp > 1 else None
    norm_group = make_norm_group(dims, coords) if cfg.zero_stage == 0 else None
    module = PipelineModule(
        layers=gpt_layer_specs(shape, tp_group),
        topology=deepspeed_topology(dims),
        loss_fn=lm_loss,
        partition_method=cfg.partition_method,
        activation_checkpoint_interval=1 if cfg.checkpoint_activations else 0,
        activation_checkpoint_func=partial(checkpointing.non_reentrant_checkpoint),
        checkpointable_layers=["ParallelTransformerLayerPipe"],
    )
    for param in module.parameters():  # Megatron's default: what is not split is replicated over TP
        if not hasattr(param, "tensor_model_parallel"):
            param.tensor_model_parallel = False
    groups = build_param_groups(module, weight_decay=cfg.weight_decay, rule=faults.param_group_rule())
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)
    groups_by_name = param_groups_by_name(module, optimizer)  # by identity, before ZeRO flattens the groups
    engine, _, _, _ = deepspeed.initialize(model=module, optimizer=optimizer, config=ds_config(cfg, dims))
    clipper = None
    if cfg.zero_stage == 0:
        assert engine.optimizer is optimizer, "ZeRO-0 in fp32 steps the client optimizer itself"
        clipper = GlobalGradClipper(module.parameters(), max_norm=cfg.clip_grad, tp_rank=coords.tp, group=norm_group)
        optimizer.register_step_pre_hook(clipper.step_pre_hook)
    faults.install(engine)
    return BuiltEngine(engine, groups_by_name, shape, clipper)
