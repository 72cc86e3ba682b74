"""Deterministic synthetic token data: any topology sees the same global batch at the same iteration.

Sample i is an arithmetic progression modulo the vocabulary, tokens[t] = (start + step * t) % vocab, with
start and step drawn from a generator seeded by (seed, i): learnable (loss falls from ln V), and a function
of nothing but the seed and the sample index.

Global batch of iteration it (0-based) = samples [it * GBS, (it + 1) * GBS). Data-parallel replica d takes
the contiguous slice of GAS * MBS samples starting at it * GBS + d * GAS * MBS, in micro-batches of MBS.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

MAX_STEP = 4


def sample_tokens(index: int, *, seed: int, seq_length: int, vocab_size: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed * 7_919 + index)
    start = int(torch.randint(vocab_size, (1,), generator=generator))
    step = int(torch.randint(1, MAX_STEP + 1, (1,), generator=generator))
    return (start + step * torch.arange(seq_length + 1)) % vocab_size  # (S + 1,)


def micro_batch(first_sample: int, size: int, *, seed: int, seq_length: int, vocab_size: int):
    """(inputs, labels), each (size, S): labels are the inputs shifted by one token."""
    tokens = torch.stack([sample_tokens(first_sample + k, seed=seed, seq_length=seq_length, vocab_size=vocab_size)
                          for k in range(size)])
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def replica_micro_batches(*, start_iteration: int, dp_rank: int, dp_size: int, micro_batch_size: int,
                          grad_accum_steps: int, seed: int, seq_length: int, vocab_size: int) -> Iterator:
    """Endless micro-batches for one data-parallel replica, from iteration `start_iteration` (0-based) on."""
    global_batch = micro_batch_size * grad_accum_steps * dp_size
    iteration = start_iteration
    while True:
        base = iteration * global_batch + dp_rank * grad_accum_steps * micro_batch_size
        for m in range(grad_accum_steps):
            yield micro_batch(base + m * micro_batch_size, micro_batch_size, seed=seed, seq_length=seq_length,
                              vocab_size=vocab_size)
        iteration += 1


def global_micro_batches(iteration: int, *, global_batch_size: int, micro_batch_size: int, seed: int,
                         seq_length: int, vocab_size: int) -> list:
    """All micro-batches of one global batch, for the single-process reference."""
    base = iteration * global_batch_size
    return [micro_batch(base + k, micro_batch_size, seed=seed, seq_length=seq_length, vocab_size=vocab_size)
            for k in range(0, global_batch_size, micro_batch_size)]
