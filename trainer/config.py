"""The trainer's configuration: one dataclass, its command line (Megatron's flag names), its validation.

Every user mistake is a ValueError whose one-line message names the numbers involved; `trainer.__main__`
prints it as `Error: ...` and exits 2.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hangdoctor.topology import DEFAULT_ORDER, ParallelDims

PARTITION_METHODS = ("uniform", "parameters", "type:transformer", "type:transformer|embedding")


@dataclass
class TrainConfig:
    # parallelism (dp is derived from the world size, as in Megatron)
    tp: int = 1  # tensor-model-parallel size
    pp: int = 1  # pipeline-model-parallel size
    parallel_order: str = DEFAULT_ORDER  # fastest-varying axis first
    zero_stage: int = 1  # ZeRO stage: 0 or 1 (DeepSpeed refuses 2/3 with pipeline parallelism)
    # model
    num_layers: int = 4
    hidden_size: int = 64
    num_attention_heads: int = 4
    seq_length: int = 32
    vocab_size: int = 128  # padded up to a multiple of make_vocab_size_divisible_by * tp
    make_vocab_size_divisible_by: int = 8
    embed_layernorm: bool = False  # a LayerNorm right after the word embedding (BigScience's --embed-layernorm)
    partition_method: str = "type:transformer"  # "type:transformer|embedding" counts the embeddings as layers
    checkpoint_activations: bool = False  # recompute each transformer layer's forward in backward
    # optimisation
    micro_batch_size: int = 2
    global_batch_size: int = 8
    train_iters: int = 10
    lr: float = 1e-3
    weight_decay: float = 0.1
    clip_grad: float = 1.0
    seed: int = 1234
    # run
    run_dir: str = "runs/default"
    save_interval: int = 0  # save a checkpoint every K iterations (0: never)
    resume: bool = False  # load the latest checkpoint of run_dir/checkpoints before training
    pg_timeout: float = 600.0  # seconds before a collective that never completes raises (ends a hang)
    log_interval: int = 1
    faults: list[str] = field(default_factory=list)  # NAME[:key=value,...], see trainer/faults.py
    dump_weights: list[str] = field(default_factory=list)  # subset of ["before", "after"]
    dump_interval: int = 1  # dump at iterations where iteration % dump_interval == 0
    dump_mode: str = "full"  # "full" (exact tensors + fingerprints) or "fingerprint"
    flight_recorder: str = ""  # folder for PyTorch Flight Recorder dumps, written when training fails ("": off)
    fr_buffer_size: int = 0  # Flight Recorder entries kept per rank (0: TORCH_FR_BUFFER_SIZE if set, else 2000)

    def dims(self, world_size: int) -> ParallelDims:
        return ParallelDims.from_world(world_size, tp=self.tp, pp=self.pp, order=self.parallel_order)

    @property
    def padded_vocab_size(self) -> int:
        multiple = self.make_vocab_size_divisible_by * self.tp
        return -(-self.vocab_size // multiple) * multiple

    def validate(self, world_size: int) -> ParallelDims:
        """Check every constraint against the world size; return the topology. Raises ValueError."""
        dims = self.dims(world_size)
        if self.zero_stage not in (0, 1):
            raise ValueError(f"--zero-stage {self.zero_stage}: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only")
        if self.partition_method not in PARTITION_METHODS:
            raise ValueError(f"--partition-method {self.partition_method!r}: expected one of {', '.join(PARTITION_METHODS)}")
        counted = self.num_layers + (2 if self.partition_method == "type:transformer|embedding" else 0)
        if counted % self.pp:
            what = f"{self.num_layers} layers + 2 embeddings" if counted != self.num_layers else f"{self.num_layers} layers"
            raise ValueError(f"{what} = {counted} is not divisible by pipeline-parallel size pp={self.pp}")
        if counted // self.pp < 1:
            raise ValueError(f"{counted} layers over pp={self.pp} stages leaves a stage without layers")
        if self.num_attention_heads % self.tp:
            raise ValueError(f"{self.num_attention_heads} attention heads are not divisible by tensor-parallel size tp={self.tp}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden size {self.hidden_size} is not divisible by {self.num_attention_heads} attention heads")
        if (4 * self.hidden_size) % self.tp:
            raise ValueError(f"ffn size 4 x {self.hidden_size} is not divisible by tp={self.tp}")
        if self.global_batch_size % (self.micro_batch_size * dims.dp):
            raise ValueError(
                f"global batch size {self.global_batch_size} is not divisible by micro batch size "
                f"{self.micro_batch_size} x dp={dims.dp} = {self.micro_batch_size * dims.dp}"
            )
        if self.dump_mode not in ("full", "fingerprint"):
            raise ValueError(f"--dump-mode {self.dump_mode!r}: expected full or fingerprint")
        bad_tags = [t for t in self.dump_weights if t not in ("before", "after")]
        if bad_tags:
            raise ValueError(f"--dump-weights {','.join(self.dump_weights)}: expected before, after or both")
        if self.fr_buffer_size < 0:
            raise ValueError(f"--fr-buffer-size {self.fr_buffer_size} must not be negative")
        if self.fr_buffer_size and not self.flight_recorder:
            raise ValueError(f"--fr-buffer-size {self.fr_buffer_size} needs --flight-recorder DIR")
        if self.flight_recorder and Path(self.flight_recorder).exists() and not Path(self.flight_recorder).is_dir():
            raise ValueError(f"--flight-recorder {self.flight_recorder}: exists and is not a folder")
        for name, value in (("--train-iters", self.train_iters), ("--pg-timeout", self.pg_timeout),
                            ("--dump-interval", self.dump_interval), ("--log-interval", self.log_interval)):
            if value <= 0:
                raise ValueError(f"{name} {value} must be positive")
        return dims

    def gradient_accumulation_steps(self, dims: ParallelDims) -> int:
        return self.global_batch_size // (self.micro_batch_size * dims.dp)

    def write_json(self, path: Path, **extra) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**asdict(self), **extra}, indent=2, sort_keys=True) + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trainer",
        description="Reference 3D-parallel GPT trainer on DeepSpeed's pipeline engine (run it under torchrun or srun).",
        epilog="Exit codes: 0 trained; 1 a rank failed (e.g. a collective timed out); 2 bad flags.",
    )
    d = TrainConfig()
    par = p.add_argument_group("parallelism")
    par.add_argument("--tensor-model-parallel-size", "--tp", dest="tp", type=int, default=d.tp)
    par.add_argument("--pipeline-model-parallel-size", "--pp", dest="pp", type=int, default=d.pp)
    par.add_argument("--parallel-order", default=d.parallel_order, help="rank order, fastest axis first (default tp-dp-pp)")
    par.add_argument("--zero-stage", type=int, default=d.zero_stage)
    m = p.add_argument_group("model")
    m.add_argument("--num-layers", type=int, default=d.num_layers)
    m.add_argument("--hidden-size", type=int, default=d.hidden_size)
    m.add_argument("--num-attention-heads", type=int, default=d.num_attention_heads)
    m.add_argument("--seq-length", type=int, default=d.seq_length)
    m.add_argument("--vocab-size", type=int, default=d.vocab_size)
    m.add_argument("--make-vocab-size-divisible-by", type=int, default=d.make_vocab_size_divisible_by)
    m.add_argument("--embed-layernorm", action="store_true")
    m.add_argument("--partition-method", default=d.partition_method, help=" | ".join(PARTITION_METHODS))
    m.add_argument("--checkpoint-activations", action="store_true")
    o = p.add_argument_group("optimisation")
    o.add_argument("--micro-batch-size", type=int, default=d.micro_batch_size)
    o.add_argument("--global-batch-size", type=int, default=d.global_batch_size)
    o.add_argument("--train-iters", type=int, default=d.train_iters)
    o.add_argument("--lr", type=float, default=d.lr)
    o.add_argument("--weight-decay", type=float, default=d.weight_decay)
    o.add_argument("--clip-grad", type=float, default=d.clip_grad)
    o.add_argument("--seed", type=int, default=d.seed)
    r = p.add_argument_group("run")
    r.add_argument("--run-dir", default=d.run_dir)
    r.add_argument("--save-interval", type=int, default=d.save_interval)
    r.add_argument("--resume", action="store_true")
    r.add_argument("--pg-timeout", type=float, default=d.pg_timeout, help="seconds; a hung collective raises after this")
    r.add_argument("--log-interval", type=int, default=d.log_interval)
    r.add_argument("--fault", dest="faults", action="append", default=[], metavar="NAME[:key=value,...]",
                   help="inject a fault (repeatable); see docs/faults.md")
    r.add_argument("--dump-weights", default="", help="before,after: weightdiff dumps around each iteration")
    r.add_argument("--dump-interval", type=int, default=d.dump_interval)
    r.add_argument("--dump-mode", default=d.dump_mode, choices=("full", "fingerprint"))
    r.add_argument("--flight-recorder", default=d.flight_recorder, metavar="DIR",
                   help="record collectives with PyTorch's Flight Recorder; each rank writes DIR/fr_rank_<rank> "
                        "(and .json) when training fails, e.g. when a collective times out")
    r.add_argument("--fr-buffer-size", type=int, default=d.fr_buffer_size, metavar="N",
                   help="Flight Recorder entries per rank (default: TORCH_FR_BUFFER_SIZE, else 2000)")
    return p


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    args = build_parser().parse_args(argv)
    values = vars(args)
    values["dump_weights"] = [t.strip() for t in values["dump_weights"].split(",") if t.strip()]
    return TrainConfig(**values)
