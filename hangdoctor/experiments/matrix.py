"""The experiment matrix: configurations x toggles x repeats, from command-line flags or a JSON file.

    --config tp2="--tp 2 --gpus 2" --config pp2="--pp 2 --gpus 2"    # name = the trainer's flags
    --toggle CUDA_LAUNCH_BLOCKING=0,1                                 # an environment variable of every rank
    --toggle=--zero-stage=0,1                                         # a trainer flag
    --repeats 2
    --common "--num-layers 2 --hidden-size 32"                       # flags every configuration shares

A configuration's words are the trainer's flags plus one of the runner's own, `--gpus N` (the run's ranks,
default tp x pp). `--tp/--pp` (or Megatron's long names) give the topology; the runner passes them on, and sets
`--run-dir` itself. The same in JSON (`--spec FILE`):

    {"common": "--num-layers 2", "configs": {"tp2": "--tp 2 --gpus 2"},
     "toggles": {"CUDA_LAUNCH_BLOCKING": [0, 1], "--zero-stage": [0, 1]}, "repeats": 2}

Runs go repeat by repeat (every cell once, then every cell again): a machine whose speed drifts during the
experiment then spreads the drift over every cell instead of favouring the cells that ran first.
Every mistake is a ValueError with a one-line message.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.topology import DEFAULT_ORDER, ParallelDims

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FLAG_NAME = re.compile(r"^--[a-z][a-z0-9-]*$")
CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
TOGGLE_EXAMPLE = "e.g. CUDA_LAUNCH_BLOCKING=0,1 or --toggle=--zero-stage=0,1"
TP_FLAGS = ("--tp", "--tensor-model-parallel-size")
PP_FLAGS = ("--pp", "--pipeline-model-parallel-size")
RUNNER_FLAGS = ("--gpus",)
SET_BY_RUNNER = ("--run-dir",)
SPEC_KEYS = ("common", "configs", "toggles", "repeats")


@dataclass(frozen=True)
class Toggle:
    """One axis of the matrix: an environment variable (NAME) or a trainer flag (--name), and its values."""

    name: str
    values: tuple[str, ...]

    @property
    def is_flag(self) -> bool:
        return self.name.startswith("--")


@dataclass(frozen=True)
class Configuration:
    name: str
    dims: ParallelDims  # tp and pp from the flags, dp = gpus / (tp x pp)
    trainer_args: tuple[str, ...]  # the common flags, then this configuration's, without --gpus/--tp/--pp

    @property
    def gpus(self) -> int:
        return self.dims.world_size


@dataclass(frozen=True)
class RunSpec:
    index: int  # 1-based position in the run order
    config: Configuration
    setting: tuple[tuple[str, str], ...]  # (toggle name, value), in the matrix's toggle order
    repeat: int  # 1-based

    @property
    def name(self) -> str:
        """Folder-safe and sortable, e.g. "03-pp2-CUDA_LAUNCH_BLOCKING=1-r1"."""
        parts = [f"{self.index:02d}", self.config.name]
        parts += [f"{name.lstrip('-')}={value}" for name, value in self.setting]
        parts.append(f"r{self.repeat}")
        return re.sub(r"[^A-Za-z0-9_.=+-]", "_", "-".join(parts))

    @property
    def env(self) -> dict[str, str]:
        return {name: value for name, value in self.setting if not name.startswith("--")}

    @property
    def toggles(self) -> dict[str, str]:
        return dict(self.setting)

    @property
    def flag_words(self) -> list[str]:
        """The flag toggles of this run as words, e.g. ["--zero-stage", "1"]."""
        return [word for name, value in self.setting if name.startswith("--") for word in (name, value)]

    def trainer_args(self, run_dir: Path) -> list[str]:
        """The trainer's flags after the topology flags; flag toggles last, so they win over the same flag."""
        return [*self.config.trainer_args, *self.flag_words, "--run-dir", str(run_dir)]


@dataclass(frozen=True)
class Matrix:
    configs: tuple[Configuration, ...]
    toggles: tuple[Toggle, ...] = ()
    repeats: int = 1

    def runs(self) -> list[RunSpec]:
        settings = list(itertools.product(*[[(t.name, v) for v in t.values] for t in self.toggles]))
        cells = [(config, setting) for config in self.configs for setting in settings]
        order = [(cell, repeat) for repeat in range(1, self.repeats + 1) for cell in cells]
        return [RunSpec(index=i, config=config, setting=tuple(setting), repeat=repeat)
                for i, ((config, setting), repeat) in enumerate(order, start=1)]

    def to_dict(self) -> dict:
        return {
            "configs": [{"name": c.name, "tp": c.dims.tp, "pp": c.dims.pp, "dp": c.dims.dp, "gpus": c.gpus,
                         "trainer_args": list(c.trainer_args)} for c in self.configs],
            "toggles": {t.name: list(t.values) for t in self.toggles},
            "repeats": self.repeats,
        }


def parse_toggle(text: str) -> Toggle:
    """"NAME=v1,v2" (environment) or "--flag=v1,v2" (trainer flag)."""
    name, sep, values_text = text.partition("=")
    if not sep or not name:
        raise ValueError(f"toggle {text!r}: expected NAME=VALUE[,VALUE...], {TOGGLE_EXAMPLE}")
    if not (ENV_NAME.match(name) or FLAG_NAME.match(name)):
        raise ValueError(f"toggle {text!r}: {name!r} is neither an environment variable name (letters, digits, _) "
                         f"nor a trainer flag (--name), {TOGGLE_EXAMPLE}")
    return make_toggle(name, values_text.split(","), text)


def make_toggle(name: str, values: list, shown: str) -> Toggle:
    if name in TP_FLAGS + PP_FLAGS + RUNNER_FLAGS + SET_BY_RUNNER:
        raise ValueError(f"toggle {shown!r}: {name} is part of a configuration, not a toggle: use --config")
    texts = [str(v).strip() for v in values]
    if not texts or any(not v for v in texts):
        raise ValueError(f"toggle {shown!r}: every value must be non-empty, {TOGGLE_EXAMPLE}")
    if any("\n" in v for v in texts):
        raise ValueError(f"toggle {shown!r}: a value contains a newline")
    if len(set(texts)) != len(texts):
        raise ValueError(f"toggle {shown!r}: a value is repeated")
    return Toggle(name, tuple(texts))


def _flag_value(words: list[str], i: int, flag: str) -> tuple[str, int]:
    """The value of the flag at words[i] ("--tp 2" or "--tp=2") and the index after it."""
    word = words[i]
    if word.startswith(flag + "="):
        return word[len(flag) + 1:], i + 1
    if i + 1 >= len(words):
        raise ValueError(f"{flag} needs a value")
    return words[i + 1], i + 2


def _positive(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{flag} {value} must be at least 1")
    return value


def split_args(text: str | list | tuple, what: str) -> list[str]:
    if isinstance(text, (list, tuple)):
        return [str(word) for word in text]
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc} in {text!r}") from None


def make_configuration(name: str, args: str | list, common: list[str]) -> Configuration:
    """A configuration from its flags: --gpus/--tp/--pp read (the last one wins) and taken out."""
    if not CONFIG_NAME.match(name):
        raise ValueError(f"configuration name {name!r}: use letters, digits and _.+- (e.g. tp2pp2)")
    words = common + split_args(args, f"configuration {name!r}")
    sizes = {"tp": 1, "pp": 1, "gpus": None}
    order = DEFAULT_ORDER
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        flag = word.split("=", 1)[0]
        try:
            if flag in SET_BY_RUNNER:
                raise ValueError(f"{flag} is set by the runner (one folder per run under --out)")
            if flag in TP_FLAGS + PP_FLAGS + RUNNER_FLAGS:
                value, i = _flag_value(words, i, flag)
                key = "tp" if flag in TP_FLAGS else "pp" if flag in PP_FLAGS else "gpus"
                sizes[key] = _positive(flag, value)
                continue
            if flag == "--parallel-order":
                order, _ = _flag_value(words, i, flag)
        except ValueError as exc:
            raise ValueError(f"configuration {name!r}: {exc}") from None
        kept.append(word)
        i += 1
    gpus = sizes["gpus"] or sizes["tp"] * sizes["pp"]
    try:
        dims = ParallelDims.from_world(gpus, tp=sizes["tp"], pp=sizes["pp"], order=order)
    except ValueError as exc:
        raise ValueError(f"configuration {name!r}: {exc}") from None
    return Configuration(name=name, dims=dims, trainer_args=tuple(kept))


def parse_config(text: str, common: list[str]) -> Configuration:
    """NAME="FLAGS" from the command line."""
    name, sep, args = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--config {text!r}: expected NAME=\"FLAGS\", e.g. --config tp2=\"--tp 2 --gpus 2\"")
    return make_configuration(name.strip(), args, common)


def load_spec(path: Path) -> dict:
    try:
        spec = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: expected a JSON object with {', '.join(SPEC_KEYS)}")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r} (expected {', '.join(SPEC_KEYS)})")
    return spec


def build_matrix(*, configs: Sequence[str] = (), toggles: Sequence[str] = (), repeats: int | None = None,
                 common: str = "", spec: dict | None = None) -> Matrix:
    """The matrix from a JSON spec (optional) and command-line flags, which add to it (repeats: override)."""
    spec = spec or {}
    common_words = split_args(spec.get("common", ""), "common flags") + split_args(common, "--common")
    made: list[Configuration] = []
    spec_configs = spec.get("configs", {})
    if not isinstance(spec_configs, dict):
        raise ValueError("spec: \"configs\" must be an object of name: flags")
    made += [make_configuration(name, args, common_words) for name, args in spec_configs.items()]
    made += [parse_config(text, common_words) for text in configs]
    if not made:
        raise ValueError("no configuration: give at least one --config NAME=\"FLAGS\" (or --spec FILE)")
    names = [c.name for c in made]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ValueError(f"configuration {duplicate!r} is given twice")
    spec_toggles = spec.get("toggles", {})
    if not isinstance(spec_toggles, dict):
        raise ValueError("spec: \"toggles\" must be an object of name: [values]")
    axes: list[Toggle] = []
    for name, values in spec_toggles.items():
        if not (ENV_NAME.match(name) or FLAG_NAME.match(name)):
            raise ValueError(f"toggle {name!r}: neither an environment variable name nor a trainer flag (--name)")
        axes.append(make_toggle(name, values if isinstance(values, list) else [values], name))
    axes += [parse_toggle(text) for text in toggles]
    seen = [t.name for t in axes]
    duplicate = next((n for n in seen if seen.count(n) > 1), None)
    if duplicate:
        raise ValueError(f"toggle {duplicate} is given twice: put all its values in one, e.g. {duplicate}=0,1")
    count = repeats if repeats is not None else spec.get("repeats", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"repeats {count!r} must be a positive integer")
    return Matrix(configs=tuple(made), toggles=tuple(axes), repeats=count)
