"""Injected faults: real failures from the seeds, reproduced inside DeepSpeed's own code paths.

`--fault NAME[:key=value,...]` (repeatable). Each fault acts at one of the pipeline engine's seams, never in
our own loop: no fake hang made with a sleep. docs/faults.md says what a user sees for each one.

    skip-loss-broadcast  PipelineEngine._aggregate_total_loss: the last stage skips its loss broadcast over the
                         pipe group, so the other stages wait in that broadcast (the seed's 320-GPU hang).
    no-tied-grad-reduce  PipelineModule.get_tied_weights_and_groups returns nothing, so _exec_reduce_tied_grads
                         no longer all-reduces the tied embedding's gradients: the two copies drift apart.
    layernorm-alias      parameter grouping uses Megatron's isinstance test against the LayerNorm alias, so the
                         embedding LayerNorm's weight lands in the weight-decay group (BigScience main-8).
    embed-norm-not-saved PipelineModule.load_state_dir re-synchronises only the word embedding: the last stage,
                         which holds no checkpoint file for its tied copy, keeps its embedding LayerNorm at the
                         defaults after a load (BigScience main-4, finding 1).
    straggler            rank R spends S extra seconds of real compute in the forward passes of iterations
                         N .. N+K-1 (slow, not hung: its CPU time grows and its stack moves).
    dead-rank            rank R SIGKILLs itself inside its first forward pass of iteration N.
    sigstop              rank R SIGSTOPs itself inside its first forward pass of iteration N (unresponsive).
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from hangdoctor.topology import ParallelDims, RankCoords, parse_ranks
from trainer.param_groups import Rule, naive_megatron_no_decay, robust_no_decay


@dataclass(frozen=True)
class FaultSpec:
    summary: str
    defaults: dict[str, Any] = field(default_factory=dict)  # allowed options and their defaults
    needs_pipeline: bool = False
    needs_embed_layernorm: bool = False


FAULT_SPECS: dict[str, FaultSpec] = {
    "skip-loss-broadcast": FaultSpec("the last stage skips the loss broadcast at iteration N (hang)",
                                     {"iteration": 2, "dp": None, "ranks": None}, needs_pipeline=True),
    "no-tied-grad-reduce": FaultSpec("tied embedding gradients are not all-reduced between first and last stage",
                                     needs_pipeline=True),
    "layernorm-alias": FaultSpec("the embedding LayerNorm is grouped by an isinstance test against an alias",
                                 needs_embed_layernorm=True),
    "embed-norm-not-saved": FaultSpec("the last stage's embedding LayerNorm does not come back from a checkpoint",
                                      needs_pipeline=True, needs_embed_layernorm=True),
    "straggler": FaultSpec("rank R is slower by S seconds per iteration for K iterations from N",
                           {"rank": 0, "iteration": 2, "seconds": 5.0, "iterations": 1}),
    "dead-rank": FaultSpec("rank R kills itself at iteration N", {"rank": 0, "iteration": 2}),
    "sigstop": FaultSpec("rank R stops itself (SIGSTOP) at iteration N", {"rank": 0, "iteration": 2}),
}


@dataclass(frozen=True)
class Fault:
    name: str
    options: dict[str, Any]


def parse_fault(text: str) -> Fault:
    """"straggler:rank=3,seconds=2" -> Fault. Raises ValueError naming the known faults or options.

    A comma followed by `key=` starts the next option, so rank lists keep theirs: "ranks=4-5,7,iteration=3".
    """
    name, _, rest = text.partition(":")
    name = name.strip()
    if name not in FAULT_SPECS:
        raise ValueError(f"unknown fault {name!r}; known faults: {', '.join(FAULT_SPECS)}")
    spec = FAULT_SPECS[name]
    options = dict(spec.defaults)
    # Commas separate options, and also rank lists: "ranks=5,7,iteration=3" has two options.
    for item in filter(None, (p.strip() for p in re.split(r",(?=\s*[a-z_]+=)", rest))):
        key, sep, value = item.partition("=")
        if not sep or key not in spec.defaults:
            known = ", ".join(spec.defaults) or "none"
            raise ValueError(f"fault {name}: bad option {item!r}; options: {known}")
        try:
            options[key] = float(value) if key == "seconds" else value if key == "ranks" else int(value)
            if key in ("seconds", "iterations", "iteration") and options[key] <= 0:
                raise ValueError(f"fault {name}: option {key}={value} must be positive")
        except ValueError:
            raise ValueError(f"fault {name}: option {key}={value!r} is not a number") from None
    return Fault(name, options)


class FaultInjector:
    """Checks the chosen faults against the run, then installs them into the model and the engine."""

    def __init__(self, texts: list[str], *, dims: ParallelDims, coords: RankCoords, embed_layernorm: bool,
                 forward_passes_per_iteration: int = 1):
        self.faults = [parse_fault(t) for t in texts]
        self.dims, self.coords = dims, coords
        self.forward_passes_per_iteration = forward_passes_per_iteration
        self.iteration = 0  # set by the training loop before each train_batch
        self._fired: set[tuple[str, int]] = set()
        for fault in self.faults:
            self._check(fault, embed_layernorm)

    def _check(self, fault: Fault, embed_layernorm: bool) -> None:
        spec, opts = FAULT_SPECS[fault.name], fault.options
        if spec.needs_pipeline and self.dims.pp == 1:
            raise ValueError(f"fault {fault.name} needs pipeline parallelism: pp=1 has no stages to desynchronise")
        if spec.needs_embed_layernorm and not embed_layernorm:
            raise ValueError(f"fault {fault.name} needs --embed-layernorm")
        if "rank" in opts and not 0 <= opts["rank"] < self.dims.world_size:
            raise ValueError(f"fault {fault.name}: rank={opts['rank']} is outside 0..{self.dims.world_size - 1}")
        if fault.name == "skip-loss-broadcast":
            last = set(self.dims.ranks_where(pp=self.dims.pp - 1))
            if opts["ranks"] is not None:
                bad = [r for r in parse_ranks(opts["ranks"]) if r not in last]
                if bad:
                    raise ValueError(f"fault skip-loss-broadcast: ranks {bad} are not on the last stage pp={self.dims.pp - 1}")
            if opts["dp"] is not None and not 0 <= opts["dp"] < self.dims.dp:
                raise ValueError(f"fault skip-loss-broadcast: dp={opts['dp']} is outside 0..{self.dims.dp - 1}")

    def has(self, name: str) -> bool:
        return any(f.name == name for f in self.faults)

    def param_group_rule(self) -> Rule:
        return naive_megatron_no_decay if self.has("layernorm-alias") else robust_no_decay

    def install(self, engine) -> None:
        if self.has("no-tied-grad-reduce"):
            engine.module.get_tied_weights_and_groups = lambda: []
        if self.has("embed-norm-not-saved"):
            _drop_norm_from_load_sync(engine.module)
        for fault in self.faults:
            if fault.name == "skip-loss-broadcast" and self._skips_broadcast(fault):
                _skip_loss_broadcast_at(engine, self, fault.options["iteration"])
        if any(f.name in ("straggler", "dead-rank", "sigstop") and f.options["rank"] == self.coords.rank for f in self.faults):
            _wrap_forward_pass(engine, self)

    def _skips_broadcast(self, fault: Fault) -> bool:
        c, opts = self.coords, fault.options
        if c.pp != self.dims.pp - 1:
            return False
        if opts["ranks"] is not None:
            return c.rank in parse_ranks(opts["ranks"])
        return opts["dp"] is None or opts["dp"] == c.dp

    def on_forward_pass(self) -> None:
        """Runs inside the engine's ForwardPass instruction on this rank."""
        for fault in self.faults:
            opts = fault.options
            if opts.get("rank") != self.coords.rank:
                continue
            if fault.name == "straggler":
                if opts["iteration"] <= self.iteration < opts["iteration"] + opts["iterations"]:
                    _busy_for(opts["seconds"] / self.forward_passes_per_iteration)
                continue
            key = (fault.name, self.iteration)
            if opts.get("iteration") != self.iteration or key in self._fired:
                continue
            self._fired.add(key)
            if fault.name == "dead-rank":
                os.kill(os.getpid(), signal.SIGKILL)
            elif fault.name == "sigstop":
                os.kill(os.getpid(), signal.SIGSTOP)


def _busy_for(seconds: float) -> None:
    """Real work, like a throttled device: unlike a hung rank, CPU time grows while the rank is slow."""
    end = time.monotonic() + seconds
    x = torch.full((64, 64), 0.01)
    while time.monotonic() < end:
        x = torch.tanh(x @ x)


def _skip_loss_broadcast_at(engine, injector: FaultInjector, iteration: int) -> None:
    import deepspeed.comm as ds_comm  # the module engine.py calls as `dist`

    aggregate = engine._aggregate_total_loss

    def aggregate_total_loss_without_broadcast():
        if injector.iteration != iteration:
            return aggregate()
        real_broadcast = ds_comm.broadcast
        ds_comm.broadcast = lambda *args, **kwargs: None
        try:
            return aggregate()
        finally:
            ds_comm.broadcast = real_broadcast

    engine._aggregate_total_loss = aggregate_total_loss_without_broadcast


def _drop_norm_from_load_sync(module) -> None:
    load_state_dir = module.load_state_dir

    def load_state_dir_syncing_only_word_embeddings(*args, **kwargs):
        saved = {key: comm["weight_attr"] for key, comm in module.tied_comms.items()}
        for comm in module.tied_comms.values():
            comm["weight_attr"] = [a for a in comm["weight_attr"] if not a.startswith("norm.")]
        try:
            return load_state_dir(*args, **kwargs)
        finally:
            for key, attrs in saved.items():
                module.tied_comms[key]["weight_attr"] = attrs

    module.load_state_dir = load_state_dir_syncing_only_word_embeddings


def _wrap_forward_pass(engine, injector: FaultInjector) -> None:
    from deepspeed.runtime.pipe import schedule

    instructions = dict(engine._INSTRUCTION_MAP)
    forward_pass = instructions[schedule.ForwardPass]

    def exec_forward_pass_with_faults(self, buffer_id):
        injector.on_forward_pass()
        return forward_pass(self, buffer_id)

    instructions[schedule.ForwardPass] = exec_forward_pass_with_faults
    engine._INSTRUCTION_MAP = instructions
