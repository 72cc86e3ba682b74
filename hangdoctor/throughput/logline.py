"""The Megatron-DeepSpeed per-iteration log line: one dataclass, one formatter.

The field order and number formats follow Megatron-DeepSpeed's `training_log`, e.g.

 iteration        2/      10 | consumed samples:           16 | consumed tokens:          512 | elapsed time per
 iteration (ms): 212.3 | learning rate: 3.000E-04 | global batch size:     8 | lm loss: 1.061380E+01 | grad norm:
 1.234 | num zeros: 0.0 | actual seq length:    32 | number of skipped iterations:   0 | number of nan iterations:
   0 | samples per second: 37.682 | TFLOPs: 0.01 |

(one line in reality). The trainer prints it; hangdoctor's experiment runner parses it back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IterationStats:
    iteration: int
    train_iters: int
    consumed_samples: int
    consumed_tokens: int
    elapsed_ms: float  # wall time of this iteration
    learning_rate: float
    global_batch_size: int
    lm_loss: float
    grad_norm: float | None  # None where the engine does not compute it (Megatron then omits the field)
    seq_length: int
    samples_per_second: float
    tflops: float
    skipped_iterations: int = 0
    nan_iterations: int = 0
    num_zeros: float = 0.0


def format_iteration_line(stats: IterationStats) -> str:
    s = stats
    return (
        f" iteration {s.iteration:8d}/{s.train_iters:8d} |"
        f" consumed samples: {s.consumed_samples:12d} |"
        f" consumed tokens: {s.consumed_tokens:12d} |"
        f" elapsed time per iteration (ms): {s.elapsed_ms:.1f} |"
        f" learning rate: {s.learning_rate:.3E} |"
        f" global batch size: {s.global_batch_size:5d} |"
        f" lm loss: {s.lm_loss:.6E} |"
        + (f" grad norm: {s.grad_norm:.3f} |" if s.grad_norm is not None else "")
        + f" num zeros: {s.num_zeros:.1f} |"
        f" actual seq length: {s.seq_length:5d} |"
        f" number of skipped iterations: {s.skipped_iterations:3d} |"
        f" number of nan iterations: {s.nan_iterations:3d} |"
        f" samples per second: {s.samples_per_second:.3f} |"
        f" TFLOPs: {s.tflops:.2f} |"
    )
