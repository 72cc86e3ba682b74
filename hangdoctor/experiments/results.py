"""One row per run: what happened to it and the figures read from its log, kept as RUN/result.json.

Figures come from the Megatron iteration lines (`throughput.megatron_log`), or the lines the user's
--iteration-regex reads (`throughput.regex_log`), as medians after the warm-up (`throughput.summary`), which
say which iterations they cover ("median of iterations 3-6", and first_measured/last_measured: 3 and 6). A log
no line of which matches gets no figure, and says so. TFLOPs are
recomputed with Megatron's formula (`throughput.flops.megatron_tflops`) from the median sec/it and the run's
shape (the trainer's config.json, or a Megatron log's argument dump): the log prints them with two decimals,
which reads 0.00 for a small model. The printed figure is kept as `tflops_printed`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from hangdoctor.throughput.flops import megatron_tflops
from hangdoctor.throughput.megatron_log import ParsedIteration
from hangdoctor.throughput.regex_log import parse_lines
from hangdoctor.throughput.model_size import model_params, padded_vocab_size
from hangdoctor.throughput.summary import ThroughputSummary, summarize

RESULT_NAME = "result.json"
_ERROR = re.compile(r"\bError: ")


@dataclass
class Shape:
    """What the tables and the TFLOPs need to know about a run's model and batch."""

    gpus: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    mbs: int | None = None
    gbs: int | None = None
    seq_length: int | None = None
    layers: int | None = None
    hidden: int | None = None
    vocab: int | None = None  # padded, as the output layer has it
    checkpointing: bool = False

    @property
    def params(self) -> int | None:
        if None in (self.layers, self.hidden, self.vocab, self.seq_length):
            return None
        return model_params(layers=self.layers, hidden=self.hidden, vocab=self.vocab, seq_length=self.seq_length)


@dataclass
class RunResult:
    run: str  # the run's folder name, e.g. "03-pp2-CUDA_LAUNCH_BLOCKING=1-r1"
    config: str
    index: int = 0
    repeat: int = 1
    toggles: dict[str, str] = field(default_factory=dict)
    launcher: str = ""
    job: str = ""  # "job 12", "torchrun pid 4242", or the log file read
    status: str = ""  # completed, failed, hung, timeout, not started, interrupted, log
    reason: str = ""  # the watchdog's or the launcher's one line
    exit_code: int | None = None
    gpus: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    mbs: int | None = None
    gbs: int | None = None
    seq_length: int | None = None
    params: int | None = None
    last_iteration: int | None = None
    train_iters: int | None = None
    sec_per_it: float | None = None
    tflops: float | None = None
    tflops_printed: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    measured_over: str = ""  # "median of iterations 3-6", or why there is no figure
    first_measured: int | None = None  # the first and last iterations the figures cover
    last_measured: int | None = None
    warmup: int = 2
    verdict: str = ""  # hangdoctor's one-line summary (hung runs)
    verdict_hung: bool | None = None
    verdict_folder: str = ""
    error: str = ""  # the first "Error: ..." line of the log
    stopped: str = ""  # what stopping the run did ("cancelled (CANCELLED)", "killed 3 processes")
    queued_s: float | None = None
    running_s: float | None = None
    run_dir: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, folder: Path) -> None:
        (folder / RESULT_NAME).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> "RunResult":
        return cls.from_dict(json.loads((folder / RESULT_NAME).read_text()))


def shape_from_trainer_config(run_dir: Path) -> Shape | None:
    """The reference trainer's RUN/config.json (written by rank 0 at start), or None."""
    try:
        cfg = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    dims = cfg.get("dims") or {}
    vocab = cfg.get("padded_vocab_size") or cfg.get("vocab_size")
    if vocab and "padded_vocab_size" not in cfg:
        vocab = padded_vocab_size(vocab, tp=cfg.get("tp", 1), divisible_by=cfg.get("make_vocab_size_divisible_by", 1))
    return Shape(gpus=cfg.get("world_size"), tp=dims.get("tp"), pp=dims.get("pp"), dp=dims.get("dp"),
                 mbs=cfg.get("micro_batch_size"), gbs=cfg.get("global_batch_size"), seq_length=cfg.get("seq_length"),
                 layers=cfg.get("num_layers"), hidden=cfg.get("hidden_size"), vocab=vocab,
                 checkpointing=bool(cfg.get("checkpoint_activations")))


def first_error(text: str, *, launcher_errors: bool = True) -> str:
    """The first "Error: ..." line (the trainer's, one per failed rank), else (with launcher_errors) the last
    line naming an error, such as srun's "srun: error: n2: task 1: Exited with exit code 1"."""
    lines = text.splitlines()
    for line in lines:
        match = _ERROR.search(line)
        if match:
            return line[match.start():].strip()[:400]
    named = [line.strip() for line in lines if "error" in line.lower()] if launcher_errors else []
    return named[-1][:400] if named else ""


def apply_figures(result: RunResult, parsed: list[ParsedIteration], shape: Shape | None, warmup: int, *,
                  regex: bool = False) -> None:
    """Fill the figures of `result` from its iteration lines (and the shape, for TFLOPs and the table); `regex`:
    the lines were read with the user's --iteration-regex (said when none matched)."""
    shape = shape or Shape()
    for name in ("gpus", "tp", "pp", "dp", "mbs", "gbs", "seq_length"):
        if getattr(shape, name) is not None:
            setattr(result, name, getattr(shape, name))
    result.params = shape.params
    result.warmup = warmup
    if parsed:
        last = max(parsed, key=lambda p: p.iteration)
        result.last_iteration, result.train_iters = last.iteration, last.train_iters or None
        result.gbs = result.gbs or last.global_batch_size
        result.seq_length = result.seq_length or last.seq_length
    timed = [p for p in parsed if p.elapsed_ms is not None]
    if regex and not timed:
        result.measured_over = ("no figure: no line of the log matches --iteration-regex" if not parsed else
                                "no figure: no line matching --iteration-regex has an iteration time")
        return
    try:
        summary = summarize(parsed, warmup=warmup)
    except ValueError as exc:
        result.measured_over = f"no figure: {exc}"
        return
    result.measured_over = summary.label
    result.first_measured, result.last_measured = summary.iterations[0], summary.iterations[-1]
    result.sec_per_it = summary.seconds_per_iteration
    result.tflops_printed = summary.tflops
    result.samples_per_s = summary.samples_per_second
    result.tokens_per_s = summary.tokens_per_second
    result.tflops = _tflops(summary, shape, result) if shape.params else summary.tflops


def _tflops(summary: ThroughputSummary, shape: Shape, result: RunResult) -> float | None:
    gbs, seq, gpus = result.gbs, result.seq_length, result.gpus
    if not (gbs and seq and gpus and summary.seconds_per_iteration > 0):
        return summary.tflops
    return megatron_tflops(global_batch_size=gbs, seq_length=seq, num_layers=shape.layers, hidden_size=shape.hidden,
                           vocab_size=shape.vocab, activation_checkpointing=shape.checkpointing,
                           seconds_per_iteration=summary.seconds_per_iteration, num_gpus=gpus)


def read_log(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def fill_from_run_dir(result: RunResult, run_dir: Path, log_path: Path, warmup: int,
                      pattern: re.Pattern | None = None) -> None:
    """Figures, shape and error line of a run that is over. A run we stopped (hung, timed out) ends with the
    launcher's complaints about the kill ("srun: error: ... Terminated"): only a trainer's Error: line counts."""
    text = read_log(log_path)
    result.error = result.error or first_error(text, launcher_errors=result.status == "failed")
    apply_figures(result, parse_lines(text, pattern), shape_from_trainer_config(run_dir), warmup,
                  regex=pattern is not None)
