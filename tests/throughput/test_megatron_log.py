"""Megatron log lines as the seeds print them: launcher prefixes, ms or s, unknown fields, cut lines, tokens/s."""

import dataclasses

import pytest

from hangdoctor.throughput.logline import IterationStats, format_iteration_line
from hangdoctor.throughput.megatron_log import parse_iteration_line, parse_log
from hangdoctor.throughput.summary import summarize

# seeds/000: the Jean Zay parallelism search, one rank's line with torchrun's launcher prefix
SEED_000 = ("[default7]: iteration 2/ 250000 | consumed samples: 384 | consumed tokens: 786432 | elapsed time per "
            "iteration (ms): 5350.0 | learning rate: 3.000E-07 | global batch size: 192 | lm loss: 1.119602E+01 | "
            "grad norm: 18.118 | num zeros: 0.0 | actual seq length: 2048 | number of skipped iterations: 0 | "
            "number of nan iterations: 0 | samples per second: 35.888 | TFLOPs: 48.77 |")
# seeds/002: the 20B fp16 run on one node; seconds, a loss scale, no "actual seq length"
SEED_002_FP16 = (" iteration        2/   95367 | consumed samples:         4096 | consumed tokens:      8388608 | "
                 "elapsed time per iteration (s): 769.99 | learning rate: 3.787E-06 | global batch size:  2048 | "
                 "lm loss: 6.384045E+01 | loss scale: 4096.0 | grad norm: 15906.210 | num zeros: 0.0 | number of "
                 "skipped iterations:   0 | number of nan iterations:   0 | samples per second: 2.660 | TFLOPs: 108.47 |")


def test_seed_000_line_with_launcher_prefix():
    p = parse_iteration_line(SEED_000)
    assert (p.prefix, p.iteration, p.train_iters, p.complete) == ("[default7]:", 2, 250000, True)
    assert (p.consumed_samples, p.consumed_tokens, p.global_batch_size) == (384, 786432, 192)
    assert (p.elapsed_ms, p.samples_per_second, p.tflops, p.seq_length) == (5350.0, 35.888, 48.77, 2048)
    assert p.lm_loss == pytest.approx(11.19602)


def test_tokens_per_second_is_samples_per_second_times_seq_length():
    # The seed writes "35.888 * 2048 = 73 498,644"; the product is 73,498.624.
    assert parse_iteration_line(SEED_000).tokens_per_second == pytest.approx(73_498.624)


def test_seed_002_line_in_seconds_with_unknown_fields():
    p = parse_iteration_line(SEED_002_FP16)
    assert p.prefix == "" and p.elapsed_ms == pytest.approx(769_990.0)
    assert p.fields["loss scale"] == "4096.0" and p.number("loss scale") == 4096.0  # unknown fields are kept
    assert p.seq_length == 2048  # no "actual seq length": consumed tokens / consumed samples
    assert p.tokens_per_second == pytest.approx(2.660 * 2048)
    assert list(p.fields)[:3] == ["consumed samples", "consumed tokens", "elapsed time per iteration (s)"]


def test_megatron_lm_line_with_timestamp_and_throughput_per_gpu():
    line = (" [2024-05-01 10:00:00] iteration      100/  500000 | consumed samples:        51200 | elapsed time per "
            "iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 150.2 | learning rate: 1.000000E-04 | "
            "global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.345 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |")
    p = parse_iteration_line(line)
    assert p.prefix == "[2024-05-01 10:00:00]" and p.iteration == 100
    assert (p.tflops, p.elapsed_ms, p.seq_length, p.tokens_per_second) == (150.2, 1234.5, None, None)


def test_cut_line_keeps_complete_fields_only():
    p = parse_iteration_line(SEED_000[: SEED_000.index("samples per second: 35") + len("samples per second: 35")])
    assert not p.complete
    assert p.samples_per_second is None and p.tflops is None and p.elapsed_ms == 5350.0
    assert parse_iteration_line("[default0]: iteration 7/ 10 | consumed sam") .fields == {}
    assert parse_iteration_line("[default0]: iteration 7/") is None  # not even the header


def test_non_iteration_lines_are_skipped():
    text = "\n".join(["using world size: 8", SEED_000, "[default7]: saving checkpoint at iteration 2", "",
                      SEED_002_FP16, "iteration without numbers |"])
    assert [p.iteration for p in parse_log(text)] == [2, 2]


def stats(**kw) -> IterationStats:
    base = dict(iteration=3, train_iters=6, consumed_samples=24, consumed_tokens=768, elapsed_ms=212.3,
                learning_rate=3.0e-4, global_batch_size=8, lm_loss=10.6138, grad_norm=1.234, seq_length=32,
                samples_per_second=37.682, tflops=0.01, skipped_iterations=0, nan_iterations=1, num_zeros=0.0)
    base.update(kw)
    return IterationStats(**base)


def test_round_trip_with_the_trainers_formatter():
    original = stats()
    parsed = parse_iteration_line("[default3]:" + format_iteration_line(original))
    assert parsed.prefix == "[default3]:" and parsed.to_stats() == original


def test_round_trip_without_grad_norm():
    original = stats(grad_norm=None)
    line = format_iteration_line(original)
    assert "grad norm" not in line
    assert parse_iteration_line(line).to_stats() == original


def test_to_stats_names_what_a_line_lacks():
    cut = (SEED_000.replace("| TFLOPs: 48.77 |", "|").replace("actual seq length: 2048 | ", "")
           .replace("consumed tokens: 786432 | ", ""))
    with pytest.raises(ValueError) as info:
        parse_iteration_line(cut).to_stats()
    assert str(info.value) == "iteration 2: the line has no consumed_tokens, seq_length, tflops"


def test_summary_skips_warmup_and_says_which_iterations():
    lines = [format_iteration_line(stats(iteration=i, elapsed_ms=ms, tflops=t))
             for i, ms, t in [(1, 900.0, 0.01), (2, 500.0, 0.02), (3, 200.0, 0.05), (4, 210.0, 0.04),
                              (5, 190.0, 0.06), (6, 220.0, 0.03)]]
    summary = summarize(parse_log(lines), warmup=2)
    assert summary.iterations == (3, 4, 5, 6) and summary.label == "median of iterations 3-6"
    assert summary.seconds_per_iteration == pytest.approx(0.205) and summary.tflops == pytest.approx(0.045)
    assert summary.tokens_per_second == pytest.approx(37.682 * 32)


def test_summary_counts_an_iteration_printed_by_several_ranks_once():
    a = parse_iteration_line("[default0]:" + format_iteration_line(stats(iteration=3, elapsed_ms=100.0)))
    b = parse_iteration_line("[default7]:" + format_iteration_line(stats(iteration=3, elapsed_ms=300.0)))
    summary = summarize([a, b], warmup=0)
    assert summary.iterations == (3,) and summary.seconds_per_iteration == pytest.approx(0.3)


@pytest.mark.parametrize("lines, warmup, fragment", [
    ([], 2, "no Megatron iteration line"),
    (["hello", "world"], 0, "no Megatron iteration line"),
    ([SEED_000], 2, "only 1 iteration(s) (2), all within the warm-up of 2"),
])
def test_empty_or_too_short_logs_are_one_line_errors(lines, warmup, fragment):
    with pytest.raises(ValueError) as info:
        summarize(parse_log(lines), warmup=warmup)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_parsed_iteration_is_a_plain_dataclass():
    p = parse_iteration_line(SEED_000)
    assert dataclasses.asdict(p)["fields"]["TFLOPs"] == "48.77"
