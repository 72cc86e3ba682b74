"""The experiment matrix: configurations x toggles x repeats from flags and JSON, run order, names, bad input."""

import json

import pytest

from hangdoctor.experiments.matrix import build_matrix, load_spec, parse_toggle
from hangdoctor.topology import ParallelDims


def test_configurations_toggles_and_repeats_make_every_run_in_repeat_major_order(tmp_path):
    matrix = build_matrix(configs=['tp2=--tp 2 --gpus 4', 'pp2="--pp=2"'], common="--num-layers 2 --tp 1",
                          toggles=["CUDA_LAUNCH_BLOCKING=0,1", "--zero-stage=0,1"], repeats=2)
    tp2, pp2 = matrix.configs
    assert tp2.dims == ParallelDims(tp=2, pp=1, dp=2) and tp2.trainer_args == ("--num-layers", "2")
    assert pp2.dims == ParallelDims(tp=1, pp=2, dp=1)  # --gpus defaults to tp x pp; the config's --pp=2 wins
    runs = matrix.runs()
    assert len(runs) == 2 * 2 * 2 * 2 and [r.index for r in runs] == list(range(1, 17))
    assert [r.repeat for r in runs] == [1] * 8 + [2] * 8  # every cell once, then again
    assert runs[0].name == "01-tp2-CUDA_LAUNCH_BLOCKING=0-zero-stage=0-r1"
    assert runs[5].name == "06-pp2-CUDA_LAUNCH_BLOCKING=0-zero-stage=1-r1"
    assert runs[5].env == {"CUDA_LAUNCH_BLOCKING": "0"}
    assert runs[5].toggles == {"CUDA_LAUNCH_BLOCKING": "0", "--zero-stage": "1"}
    assert runs[5].trainer_args(tmp_path) == ["--num-layers", "2", "--zero-stage", "1", "--run-dir", str(tmp_path)]
    assert len({r.name for r in runs}) == 16


def test_flag_toggle_comes_last_so_it_wins_over_the_same_flag_in_a_configuration(tmp_path):
    run = build_matrix(configs=["z=--zero-stage 1"], toggles=["--zero-stage=0"]).runs()[0]
    assert run.trainer_args(tmp_path)[:4] == ["--zero-stage", "1", "--zero-stage", "0"]


def test_json_spec_and_flags_add_up(tmp_path):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"common": ["--num-layers", "2"], "configs": {"a": "--gpus 2"},
                                "toggles": {"NCCL_ALGO": ["Ring", "Tree"], "--zero-stage": [0, 1]}, "repeats": 3}))
    matrix = build_matrix(configs=["b=--tp 2"], toggles=["CUDA_LAUNCH_BLOCKING=1"], spec=load_spec(path))
    assert [c.name for c in matrix.configs] == ["a", "b"] and matrix.repeats == 3
    assert [(t.name, t.values) for t in matrix.toggles] == [
        ("NCCL_ALGO", ("Ring", "Tree")), ("--zero-stage", ("0", "1")), ("CUDA_LAUNCH_BLOCKING", ("1",))]
    assert len(matrix.runs()) == 2 * 2 * 2 * 1 * 3
    assert build_matrix(configs=["b=--tp 2"], spec=load_spec(path), repeats=1).repeats == 1  # the flag overrides


@pytest.mark.parametrize("text, expected", [
    ("CUDA_LAUNCH_BLOCKING", "expected NAME=VALUE[,VALUE...]"),
    ("=0,1", "expected NAME=VALUE[,VALUE...]"),
    ("1CUDA=0,1", "neither an environment variable name"),
    ("CUDA LAUNCH=0", "neither an environment variable name"),
    ("-x=1", "neither an environment variable name"),
    ("CUDA_LAUNCH_BLOCKING=", "every value must be non-empty"),
    ("CUDA_LAUNCH_BLOCKING=0,,1", "every value must be non-empty"),
    ("CUDA_LAUNCH_BLOCKING=1,1", "a value is repeated"),
    ("--tp=1,2", "part of a configuration"),
    ("--run-dir=a,b", "part of a configuration"),
])
def test_unknown_toggle_syntax_is_one_line(text, expected):
    with pytest.raises(ValueError) as err:
        parse_toggle(text)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, expected", [
    (dict(configs=[]), "no configuration"),
    (dict(configs=["tp2"]), 'expected NAME="FLAGS"'),
    (dict(configs=["a b=--tp 2"]), "configuration name 'a b'"),
    (dict(configs=["a=--tp 2 --gpus 3"]), "configuration 'a': world size 3 is not divisible by tp=2 x pp=1"),
    (dict(configs=["a=--tp"]), "configuration 'a': --tp needs a value"),
    (dict(configs=["a=--gpus two"]), "configuration 'a': --gpus 'two' is not an integer"),
    (dict(configs=["a=--pp 0"]), "configuration 'a': --pp 0 must be at least 1"),
    (dict(configs=["a=--run-dir x"]), "--run-dir is set by the runner"),
    (dict(configs=["a=--fault 'oops"]), "configuration 'a': No closing quotation"),
    (dict(configs=["a=", "a=--tp 2"]), "configuration 'a' is given twice"),
    (dict(configs=["a="], toggles=["X=0", "X=1"]), "toggle X is given twice"),
    (dict(configs=["a="], repeats=0), "repeats 0 must be a positive integer"),
])
def test_bad_matrices_are_one_line(kwargs, expected):
    with pytest.raises(ValueError) as err:
        build_matrix(**{"toggles": [], **kwargs})
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("{", "not JSON"),
    ("[1]", "expected a JSON object"),
    ('{"configs": {}, "toggle": {}}', "unknown key 'toggle'"),
])
def test_bad_spec_files_are_one_line(tmp_path, text, expected):
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=expected):
        load_spec(path)
    with pytest.raises(ValueError, match="cannot read"):
        load_spec(tmp_path / "missing.json")
