"""Parse Megatron-LM and Megatron-DeepSpeed iteration lines back into numbers (the inverse of logline.py).

Lines as the seeds show them, with or without a launcher prefix:

    [default7]: iteration 2/ 250000 | consumed samples: 384 | consumed tokens: 786432 | elapsed time per
    iteration (ms): 5350.0 | learning rate: 3.000E-07 | global batch size: 192 | lm loss: 1.119602E+01 | ...
    | samples per second: 35.888 | TFLOPs: 48.77 |
     iteration        2/   95367 | ... | elapsed time per iteration (s): 769.99 | ... | loss scale: 4096.0 | ...

- the prefix is whatever precedes "iteration N/M |": `[default7]:`, srun's `3: `, a `[date time]` stamp;
- elapsed time comes in ms or s and is normalised to ms;
- every `key: value` field is kept in `fields`, known or not (`loss scale`, `curriculum seqlen`, ...);
- a line cut short (a killed job's last line) keeps the fields that are complete and says `complete=False`;
- tokens/s = samples/s x sequence length, the sequence length being `actual seq length` when printed, else
  consumed tokens / consumed samples (2048 for the seed's lines).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from hangdoctor.throughput.logline import IterationStats

_HEAD = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_ELAPSED = re.compile(r"^elapsed time per iteration \((ms|s)\)$")
_TFLOPS_KEYS = ("TFLOPs", "throughput per GPU (TFLOP/s/GPU)")


@dataclass(frozen=True)
class ParsedIteration:
    iteration: int
    train_iters: int
    prefix: str  # launcher prefix, e.g. "[default7]:"; "" when none
    fields: dict[str, str] = field(repr=False)  # every "key: value" in line order, raw text
    complete: bool = True  # False when the line was cut before its final " |"

    def number(self, key: str) -> float | None:
        """A field as a float (None when absent or not a number)."""
        try:
            return float(self.fields[key])
        except (KeyError, ValueError):
            return None

    def _int(self, key: str) -> int | None:
        value = self.number(key)
        return int(value) if value is not None and math.isfinite(value) else None

    @property
    def elapsed_ms(self) -> float | None:
        for key, value in self.fields.items():
            match = _ELAPSED.match(key)
            if match:
                try:
                    seconds_or_ms = float(value)
                except ValueError:
                    return None
                return seconds_or_ms * (1000.0 if match.group(1) == "s" else 1.0)
        return None

    @property
    def consumed_samples(self) -> int | None:
        return self._int("consumed samples")

    @property
    def consumed_tokens(self) -> int | None:
        return self._int("consumed tokens")

    @property
    def global_batch_size(self) -> int | None:
        return self._int("global batch size")

    @property
    def lm_loss(self) -> float | None:
        return self.number("lm loss")

    @property
    def samples_per_second(self) -> float | None:
        return self.number("samples per second")

    @property
    def tflops(self) -> float | None:
        return next((v for v in (self.number(k) for k in _TFLOPS_KEYS) if v is not None), None)

    @property
    def seq_length(self) -> int | None:
        """`actual seq length`, else consumed tokens / consumed samples when both are printed."""
        printed = self._int("actual seq length")
        if printed:
            return printed
        samples, tokens = self.consumed_samples, self.consumed_tokens
        if samples and tokens and tokens % samples == 0:
            return tokens // samples
        return None

    @property
    def tokens_per_second(self) -> float | None:
        sps, seq = self.samples_per_second, self.seq_length
        return sps * seq if sps is not None and seq else None

    def to_stats(self) -> IterationStats:
        """The trainer's IterationStats; ValueError naming the missing fields when the line lacks some."""
        values = {
            "consumed_samples": self.consumed_samples, "consumed_tokens": self.consumed_tokens,
            "elapsed_ms": self.elapsed_ms, "learning_rate": self.number("learning rate"),
            "global_batch_size": self.global_batch_size, "lm_loss": self.lm_loss,
            "seq_length": self.seq_length, "samples_per_second": self.samples_per_second, "tflops": self.tflops,
        }
        missing = [name for name, value in values.items() if value is None]
        if missing:
            raise ValueError(f"iteration {self.iteration}: the line has no {', '.join(missing)}")
        return IterationStats(
            iteration=self.iteration, train_iters=self.train_iters, grad_norm=self.number("grad norm"),
            skipped_iterations=self._int("number of skipped iterations") or 0,
            nan_iterations=self._int("number of nan iterations") or 0,
            num_zeros=self.number("num zeros") or 0.0, **values,
        )


def parse_iteration_line(line: str) -> ParsedIteration | None:
    """One iteration line, or None when the line is something else (or too short to hold an iteration)."""
    match = _HEAD.search(line)
    if not match:
        return None
    body = line[match.end():].rstrip("\r\n")
    complete = body.rstrip().endswith("|")
    pieces = body.split("|")
    if not complete:
        pieces = pieces[:-1]  # the last piece may be cut mid-value: drop it
    fields = {}
    for piece in pieces:
        key, sep, value = piece.partition(":")
        if sep and key.strip() and value.strip():
            fields[key.strip()] = value.strip()
    return ParsedIteration(
        iteration=int(match.group(1)), train_iters=int(match.group(2)), prefix=line[:match.start()].strip(),
        fields=fields, complete=complete,
    )


def parse_log(lines: Iterable[str] | str) -> list[ParsedIteration]:
    """Every iteration line of a log (text or lines), in order; other lines are skipped."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    return [parsed for parsed in map(parse_iteration_line, lines) if parsed is not None]
