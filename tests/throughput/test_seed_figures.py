"""The math module against figures printed in the seeds (file and section named in each test)."""

import pytest

from hangdoctor.throughput.flops import estimated_tflops, megatron_tflops, training_days, training_gpu_hours
from hangdoctor.throughput.memory import BytesPerParam, memory_per_gpu, stage_contents
from hangdoctor.throughput.model_size import ModelShape, block_params, embedding_params, format_params, padded_vocab_size

VOCAB_50K, VOCAB_150K, VOCAB_250K = 50257, 150257, padded_vocab_size(250680, tp=4)


def shape(layers, hidden, vocab, heads=64, seq=2048):
    return ModelShape(layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_length=seq)


# ---- model size: seeds/002 "Existing models" and "Possible 200B models" one-liners -------------------------
@pytest.mark.parametrize("layers, hidden, vocab, printed", [
    (80, 12288, VOCAB_50K, "Model size: 146B, ratio=153"),  # 145B meg-lm
    (96, 16384, VOCAB_50K, "Model size: 310B, ratio=170"),  # 310B meg-lm
    (80, 14336, VOCAB_150K, "Model size: 199B, ratio=179"),  # 199B: 80 x 14336
    (96, 13312, VOCAB_150K, "Model size: 206B, ratio=138"),  # 206B: 96 x 13312
    (106, 12288, VOCAB_250K, "Model size: 195B, ratio=115"),  # "Rebalancing layers"
    (100, 12288, VOCAB_250K, "Model size: 184B, ratio=122"),
    (82, 13312, VOCAB_250K, "Model size: 178B, ratio=162"),
    (94, 13312, VOCAB_250K, "Model size: 203B, ratio=141"),
    (70, 14336, VOCAB_250K, "Model size: 176B, ratio=204"),
])
def test_model_size_one_liners(layers, hidden, vocab, printed):
    assert shape(layers, hidden, vocab).describe() == printed


def test_530b_is_530b_although_the_seed_pasted_the_310b_output():
    # seeds/002 "530B msft" shows "Model size: 310B, ratio=170" under its command: a copy of the 310B output.
    # The command itself gives the table's 530B and ratio 195.
    assert shape(105, 20480, VOCAB_50K).describe() == "Model size: 530B, ratio=195"


@pytest.mark.parametrize("params, printed", [
    (530_000_000_000, "530B"), (7_500_000_000, "7.5B"), (1_300_000_000, "1.3B"), (350_000_000, "350M"),
    (2_500_000, "2.5M"), (210_000, "210K"), (999, "999"), (1_500_000_000_000, "1.5T"),
])
def test_model_size_units_below_a_billion(params, printed):
    """The seeds print sizes in B; a small model must not read "0B"."""
    assert format_params(params) == printed


def test_a_small_model_is_described_in_its_own_unit():
    assert shape(4, 64, 1024, heads=4, seq=128).describe() == "Model size: 274K, ratio=16"
    assert shape(24, 1024, VOCAB_50K, heads=16, seq=1024).describe() == "Model size: 355M, ratio=42"


@pytest.mark.parametrize("hidden, emb_m, emb_mb, per_gpu_m, per_gpu_mb, blk_m, blk_mb, blk_gpu_m, blk_gpu_mb", [
    (12288, 617.56, 11116.04, 77.19, 1389.51, 1812.10, 32617.78, 226.51, 4077.22),  # 145B, TP=8
    (16384, 823.41, 14821.39, 102.93, 1852.67, 3221.44, 57985.89, 402.68, 7248.24),  # 310B, TP=8
])
def test_emb_and_blk_size_prints(hidden, emb_m, emb_mb, per_gpu_m, per_gpu_mb, blk_m, blk_mb, blk_gpu_m, blk_gpu_mb):
    """seeds/002 `emb size: 617.56M/11116.04GB, per gpu 77.19M/1389.51GB`: params in M, x18 bytes. The seed's
    "GB" is really MB (M params x 18 bytes): 617.56M params take 11.1 GB, not 11116 GB."""
    tp, emb, blk = 8, embedding_params(VOCAB_50K, hidden) / 1e6, block_params(hidden) / 1e6
    assert [round(x, 2) for x in (emb, emb * 18, emb / tp, emb * 18 / tp)] == [emb_m, emb_mb, per_gpu_m, per_gpu_mb]
    assert [round(x, 2) for x in (blk, blk * 18, blk / tp, blk * 18 / tp)] == [blk_m, blk_mb, blk_gpu_m, blk_gpu_mb]


# ---- per-GPU memory: seeds/002 "104B topology / memory usage" and "Possible topologies for 200B" -------------
def test_104b_params_and_bytes_per_gpu_with_and_without_embedding():
    est = memory_per_gpu(shape(64, 11600, VOCAB_50K, heads=80), tp=4, pp=32, dp=1)
    assert embedding_params(VOCAB_50K, 11600) // 4 == 145_745_300
    assert block_params(11600) // 4 == 403_717_700
    assert (est.first.blocks, est.first.params_per_gpu, est.first.state_bytes) == (2, 953_180_700, 17_157_252_600)
    assert (est.middle.params_per_gpu, est.middle.state_bytes) == (807_435_400, 14_533_837_200)
    assert est.stages[-1].params_per_gpu == 953_180_700  # the tied copy on the last stage


def test_206b_with_embeddings_counted_as_layers_94_plus_2_over_pp24():
    """seeds/002: "94+2 layers over PP=24 => 4 layers per gpu ... 4*531_671_296 = 2_126_685_184 params * 18 =
    38_280_333_312 bytes"; the first and last stage hold the embedding (500_055_296 per GPU) and 3 blocks."""
    est = memory_per_gpu(shape(94, 13312, VOCAB_150K), tp=4, pp=24, dp=1, embedding_as_layer=True)
    assert embedding_params(VOCAB_150K, 13312) // 4 == 500_055_296
    assert (est.peak.blocks, est.peak.params_per_gpu, est.peak.state_bytes) == (4, 2_126_685_184, 38_280_333_312)
    assert (est.first.blocks, est.first.embeddings) == (3, 1)
    assert est.first.params_per_gpu == 500_055_296 + 3 * 531_671_296
    assert sum(s.blocks for s in est.stages) == 94


def test_206b_one_layer_with_tp2():
    # seeds/002 "with TP=2, PP=48: 1_063_342_592 params per layer, 19_140_166_656 bytes (19GB) per layer"
    assert block_params(13312) // 2 == 1_063_342_592
    assert block_params(13312) // 2 * BytesPerParam().total == 19_140_166_656


def test_199b_tp8_pp10_44gb_and_50gb_on_first_and_last():
    """seeds/002: "80/10 = 8 stages per gpu = 44GB for normal layer gpus and 50GB for the 1st/last gpus due to
    5G embedding" (the seed rounds 44.4 + 4.8 up to 50)."""
    est = memory_per_gpu(shape(80, 14336, VOCAB_150K), tp=8, pp=10, dp=1)
    assert round(est.middle.state_bytes / 1e9) == 44
    assert round((est.first.state_bytes - est.middle.state_bytes) / 1e9, 1) == 4.8
    assert est.first.state_bytes == est.stages[-1].state_bytes > est.middle.state_bytes


def test_zero1_shards_master_weights_and_adam_states_over_dp():
    """seeds/002: DP=2 used far less memory than DP=1 "because of ZeRO-1"."""
    b = BytesPerParam()
    assert (b.total, b.sharded(0), b.sharded(1), b.sharded(2), b.sharded(3)) == (18, 0, 12, 16, 18)
    assert b.per_param(zero_stage=1, dp=2) == 12 and b.per_param(zero_stage=1, dp=4) == 9
    dp1 = memory_per_gpu(shape(80, 14400, VOCAB_250K), tp=8, pp=10, dp=1).peak.state_bytes
    dp2 = memory_per_gpu(shape(80, 14400, VOCAB_250K), tp=8, pp=10, dp=2).peak.state_bytes
    assert dp2 / dp1 == pytest.approx(12 / 18)
    with pytest.raises(ValueError, match="ZeRO stage 4"):
        b.sharded(4)


def test_uneven_pipeline_partition_and_embedding_slots():
    # seeds/002: "78/12=6.5 - ... uneven"; DeepSpeed's balanced partition gives the first stages one more block
    assert [b for b, _ in stage_contents(78, 12)] == [7] * 6 + [6] * 6
    assert stage_contents(4, 1) == [(4, 1)] and stage_contents(4, 1, embedding_as_layer=True) == [(4, 1)]
    assert stage_contents(4, 2, embedding_as_layer=True) == [(2, 1), (2, 1)]


# ---- TFLOPs: seeds/001 perl one-liners and tables --------------------------------------------------------------
@pytest.mark.parametrize("gpus, size_b, gbs, seconds, printed", [
    (64, 48, 1024, 129, "48.7"),  # Megatron, 05-25
    (64, 48, 1024, 217, "29.0"),  # Megatron, 05-26
    (64, 48, 1024, 125, "50.3"),  # Megatron, 05-27
    (64, 48, 1024, 146, "43"),  # Megatron + DeepSpeed 3D
    (64, 48, 768, 127, "37.15"),  # ZeRO, 05-27
    (64, 48, 512, 139.52, "22.54"),  # HF + DeepSpeed ZeRO-3
    (16, 18, 256, 90.5, "26.1"),  # Megatron "Performance", 18B, 05-26
])
def test_seed_perl_tflops_one_liners(gpus, size_b, gbs, seconds, printed):
    """seeds/001 tables, TFLOPs as printed (the seed sometimes truncates, sometimes rounds: within one unit of
    the last printed digit)."""
    value = estimated_tflops(params=size_b * 1e9, seq_length=1024, global_batch_size=gbs,
                             seconds_per_iteration=seconds, num_gpus=gpus)
    decimals = len(printed.partition(".")[2])
    assert abs(value - float(printed)) < 10**-decimals


def test_seed_perl_one_liners_as_written():
    # seeds/003 "HF + Deepspeed Zero 3": the one-liner and the output printed under it (the table: 22.54)
    # perl -le '$ng=64; $ms=48; $gbs=512; $sp=139.52; print $ms*4*2*1024*$gbs / ( $sp * $ng * 1e3)'  ->  22
    assert int(estimated_tflops(params=48e9, seq_length=1024, global_batch_size=512, seconds_per_iteration=139.52,
                                num_gpus=64)) == 22
    # seeds/003 "Megatron": its one-liner ($gbs=1024, $sp=127) has no printed output; worked by hand:
    # 48 x 4 x 2 x 1024 x 1024 = 402,653,184; 127 x 64 x 1e3 = 8,128,000; 402,653,184 / 8,128,000 = 49.539...
    assert estimated_tflops(params=48e9, seq_length=1024, global_batch_size=1024, seconds_per_iteration=127,
                            num_gpus=64) == pytest.approx(49.539, abs=5e-4)


@pytest.mark.parametrize("layers, seconds, gpus, printed", [
    (8, 769.99, 8, 108.47), (80, 844.81, 80, 98.87), (80, 430.21, 160, 97.07),  # fp16, 02-17
    (8, 777.09, 8, 107.48), (80, 853.81, 80, 97.82), (80, 434.14, 160, 96.19),  # bf16, 02-17
])
def test_february_17_iteration_lines_used_the_estimate_with_block_params(layers, seconds, gpus, printed):
    """seeds/002 "Best TFLOPs": the TFLOPs these lines print is the seeds' estimate with params = l(12h^2+13h),
    before Megatron-DeepSpeed PR 251 switched to Narayanan's formula; it matches to 0.05%."""
    value = estimated_tflops(params=layers * block_params(14400), seq_length=2048, global_batch_size=2048,
                             seconds_per_iteration=seconds, num_gpus=gpus)
    assert value == pytest.approx(printed, rel=5e-4)


@pytest.mark.parametrize("layers, hidden, seconds, gpus, printed", [
    (72, 14336, 143.31, 384, 112.49),  # "48 node contenders", 02-21
    (72, 14336, 120.29, 384, 134.02),  # ZeRO_STAGE=1, 02-21
    (80, 13824, 147.04, 320, 135.92),  # 40 nodes, 02-21
    (96, 12288, 142.17, 384, 111.30),  # TP=1 PP=48, 02-25
    (72, 14336, 110.48, 384, 145.92),  # TP=4 PP=12, 02-25
    (72, 14336, 119.53, 384, 134.88),  # TP=2 PP=24, 02-25
])
def test_later_tables_use_megatrons_formula_with_the_padded_vocab(layers, hidden, seconds, gpus, printed):
    """seeds/002 after "TFLOPs calculation improved": Narayanan's formula with checkpointing (factor 4) and the
    250680-token vocabulary padded to 250880."""
    value = megatron_tflops(global_batch_size=2048, seq_length=2048, num_layers=layers, hidden_size=hidden,
                            vocab_size=VOCAB_250K, activation_checkpointing=True, seconds_per_iteration=seconds,
                            num_gpus=gpus)
    assert value == pytest.approx(printed, abs=0.011)


def test_the_improved_formula_reads_about_3_percent_higher():
    # seeds/002: "from here on all the TLOPs reports will be about 3% higher"
    kw = dict(seq_length=2048, global_batch_size=2048, seconds_per_iteration=100.0, num_gpus=384)
    new = megatron_tflops(num_layers=72, hidden_size=14336, vocab_size=VOCAB_250K, activation_checkpointing=True,
                          **{k: v for k, v in kw.items() if k != "seq_length"}, seq_length=2048)
    old = estimated_tflops(params=72 * block_params(14336), **kw)
    assert 1.03 < new / old < 1.045


def test_padded_vocab():
    assert padded_vocab_size(250680, tp=4) == padded_vocab_size(250680, tp=8) == 250880
    assert padded_vocab_size(50257, tp=1) == 50304


def test_train_time_estimates():
    # seeds/002 "Train time estimation" and "Allocated hours sufficiency check"
    assert round(training_days(tokens=300e9, params=200e9, num_gpus=350, tflops_per_gpu=150), 2) == 105.82
    assert round(training_gpu_hours(tokens=300e9, params=200e9, tflops_per_gpu=150), 2) == 888888.89


def test_bad_inputs_are_value_errors():
    with pytest.raises(ValueError, match="must be positive"):
        estimated_tflops(params=1e9, seq_length=1, global_batch_size=1, seconds_per_iteration=0, num_gpus=1)
    with pytest.raises(ValueError, match="layers=0"):
        shape(0, 1024, 100)
