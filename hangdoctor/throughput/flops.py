"""TFLOPs per GPU, the way Megatron-LM and Megatron-DeepSpeed report it.

Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"), eq. 3:

    F = 24 * c * B * s * l * h^2 * (1 + s / (6h) + V / (16 l h))

with c = 3 (forward + backward) or c = 4 when activations are recomputed (activation checkpointing runs the
forward twice). Megatron-DeepSpeed's `throughput_calculator` divides F by (seconds per iteration * GPUs * 1e12).
"""

from __future__ import annotations


def megatron_flops_per_iteration(
    *,
    global_batch_size: int,
    seq_length: int,
    num_layers: int,
    hidden_size: int,
    vocab_size: int,
    activation_checkpointing: bool,
) -> float:
    """Model FLOPs of one iteration (forward and backward, plus the recomputed forward when checkpointing)."""
    factor = 4 if activation_checkpointing else 3
    s, l, h, v = seq_length, num_layers, hidden_size, vocab_size
    return 24 * factor * global_batch_size * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))


def megatron_tflops(
    *,
    global_batch_size: int,
    seq_length: int,
    num_layers: int,
    hidden_size: int,
    vocab_size: int,
    activation_checkpointing: bool,
    seconds_per_iteration: float,
    num_gpus: int,
) -> float:
    """TFLOPs per GPU, as printed in Megatron's `TFLOPs:` field."""
    if seconds_per_iteration <= 0 or num_gpus <= 0:
        raise ValueError(f"seconds per iteration ({seconds_per_iteration}) and GPUs ({num_gpus}) must be positive")
    flops = megatron_flops_per_iteration(
        global_batch_size=global_batch_size,
        seq_length=seq_length,
        num_layers=num_layers,
        hidden_size=hidden_size,
        vocab_size=vocab_size,
        activation_checkpointing=activation_checkpointing,
    )
    return flops / (seconds_per_iteration * num_gpus * 1e12)


def estimated_tflops(
    *,
    params: float,
    seq_length: int,
    global_batch_size: int,
    seconds_per_iteration: float,
    num_gpus: int,
    activation_checkpointing: bool = True,
) -> float:
    """The seeds' estimate: params x (4 or 3) x 2 x seq x GBS / (time x GPUs), in TFLOPs per GPU.

    2 FLOPs per parameter per token forward, x3 with backward, x4 when activation checkpointing runs the forward
    a second time. The seeds' perl one-liner writes it with the model size in billions:
    `$ms*4*2*1024*$gbs / ($sp * $ng * 1e3)`. Megatron-DeepSpeed printed this estimate until PR 251 (Feb 2022),
    with params = l(12h^2 + 13h); Narayanan's formula (`megatron_tflops`) reads about 3-4% higher.
    """
    if seconds_per_iteration <= 0 or num_gpus <= 0:
        raise ValueError(f"seconds per iteration ({seconds_per_iteration}) and GPUs ({num_gpus}) must be positive")
    factor = 4 if activation_checkpointing else 3
    return params * factor * 2 * seq_length * global_batch_size / (seconds_per_iteration * num_gpus * 1e12)


def training_gpu_hours(*, tokens: float, params: float, tflops_per_gpu: float, activation_checkpointing: bool = True) -> float:
    """GPU hours to train on `tokens` at a sustained `tflops_per_gpu`: (4 or 3) x 2 x tokens x params / TFLOPs.

    The seeds: `8*300*200_000_000/150/3600` = 888,888.89 hours for 300B tokens, a 200B model, 150 TFLOPs.
    """
    if tflops_per_gpu <= 0:
        raise ValueError(f"TFLOPs per GPU ({tflops_per_gpu}) must be positive")
    factor = 4 if activation_checkpointing else 3
    return factor * 2 * tokens * params / (tflops_per_gpu * 1e12) / 3600


def training_days(*, tokens: float, params: float, num_gpus: int, tflops_per_gpu: float,
                  activation_checkpointing: bool = True) -> float:
    """Wall-clock days on `num_gpus` GPUs; the seeds: 105.82 days on 350 GPUs at 150 TFLOPs (300B tokens, 200B)."""
    if num_gpus <= 0:
        raise ValueError(f"GPUs ({num_gpus}) must be positive")
    hours = training_gpu_hours(tokens=tokens, params=params, tflops_per_gpu=tflops_per_gpu,
                               activation_checkpointing=activation_checkpointing)
    return hours / num_gpus / 24
