"""Rows from logs that already exist (`hangdoctor experiment --logs a.log b.log`): the seeds' workflow of
reading Megatron logs after the fact, without launching anything.

The shape comes from Megatron's argument dump when the log has one
(`  tensor_model_parallel_size ...................... 8`, with or without a launcher prefix) and its
"padded vocab" line, else from the
reference trainer's config.json next to the log; the figures from the iteration lines, as for a run.
"""

from __future__ import annotations

import re
from pathlib import Path

from hangdoctor.experiments.results import RunResult, Shape, apply_figures, first_error, shape_from_trainer_config
from hangdoctor.throughput.regex_log import parse_lines

_ARG = re.compile(r"(?:^|\s)([a-z][a-z0-9_]*) \.{2,} (\S.*?)\s*$")
_PADDED = re.compile(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")


def megatron_arguments(text: str) -> dict[str, str]:
    """Megatron's "arguments" block as name -> raw value (the first value of each name wins). The dump comes
    before the tokenizer pads the vocabulary (it says `padded_vocab_size ... None`): the size comes from the
    later line " > padded vocab (size: 250680) with 200 dummy tokens (new size: 250880)"."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = _ARG.search(line)
        if match:
            found.setdefault(match.group(1), match.group(2))
            continue
        padded = _PADDED.search(line)
        if padded and not found.get("padded_vocab_size", "").isdigit():
            found["padded_vocab_size"] = padded.group(1)
    return found


def _int(args: dict[str, str], *names: str) -> int | None:
    for name in names:
        try:
            return int(args[name])
        except (KeyError, ValueError):
            continue
    return None


def shape_from_arguments(args: dict[str, str]) -> Shape | None:
    if not args:
        return None
    tp = _int(args, "tensor_model_parallel_size") or 1
    pp = _int(args, "pipeline_model_parallel_size") or 1
    gpus = _int(args, "world_size")
    dp = _int(args, "data_parallel_size") or (gpus // (tp * pp) if gpus and gpus % (tp * pp) == 0 else None)
    checkpointing = args.get("checkpoint_activations") == "True" or args.get("recompute_granularity") == "full"
    return Shape(gpus=gpus, tp=tp, pp=pp, dp=dp, mbs=_int(args, "micro_batch_size"),
                 gbs=_int(args, "global_batch_size"), seq_length=_int(args, "seq_length"),
                 layers=_int(args, "num_layers"), hidden=_int(args, "hidden_size"),
                 vocab=_int(args, "padded_vocab_size"), checkpointing=checkpointing)


def result_from_log(path: Path, *, warmup: int, index: int = 0, name: str = "",
                    pattern: re.Pattern | None = None) -> RunResult:
    """One row for one log; ValueError (one line, naming the file) when it cannot be read or has no figure."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    parsed = parse_lines(text, pattern)
    if not parsed:
        what = ("is empty" if not text.strip() else "has no Megatron iteration line" if pattern is None
                else "has no line matching --iteration-regex")
        raise ValueError(f"{path} {what}: nothing to measure")
    result = RunResult(run=name or path.stem, config=name or path.stem, index=index, launcher="log", job=str(path), status="log",
                       error=first_error(text), run_dir=str(path.parent))
    shape = shape_from_arguments(megatron_arguments(text)) or shape_from_trainer_config(path.parent)
    apply_figures(result, parsed, shape, warmup, regex=pattern is not None)
    if result.sec_per_it is None:
        raise ValueError(f"{path}: {result.measured_over.removeprefix('no figure: ')}")
    return result
