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
