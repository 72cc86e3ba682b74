"""The user's own per-rank command (`--program "python my_train.py --tp {tp}"`), filled in for each run.

    {tp} {pp} {dp} {gpus}   the run's configuration (`--config a="--tp 2 --gpus 4"`: 2, 1, 2, 4)
    {run_dir}               the run's own folder (OUT/runs/<run>/)

A configuration's other words (after `--common`'s) and the flag toggles (`--toggle=--lr=0.1,0.2`) follow the
command, flag toggles last; environment toggles go into every rank's environment, as for the reference trainer.
Under torchrun a `python SCRIPT ARGS` command becomes torchrun's script (`torchrun ... SCRIPT ARGS`, run by
torchrun's Python, `--python`), `python -m MODULE ARGS` its module; anything else runs with `--no-python`.
Under sbatch every task runs the command through `srun`. An unknown `{name}` is a ValueError before anything runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from hangdoctor.experiments.matrix import RunSpec

PLACEHOLDERS = ("tp", "pp", "dp", "gpus", "run_dir")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


def check_placeholders(words: list[str] | tuple[str, ...], where: str) -> None:
    for word in words:
        for name in _PLACEHOLDER.findall(word):
            if name not in PLACEHOLDERS:
                raise ValueError(f"{where}: unknown placeholder {{{name}}} (known: "
                                 f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})")


def fill(word: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), word)


@dataclass(frozen=True)
class UserProgram:
    words: tuple[str, ...]  # as the user wrote it, placeholders unfilled

    def command(self, spec: RunSpec, run_dir: Path) -> list[str]:
        """The command every rank of this run runs: filled in, then the configuration's words and flag toggles."""
        return [fill(word, placeholder_values(spec, run_dir)) for word in self.words] + extra_words(spec, run_dir)


def placeholder_values(spec: RunSpec, run_dir: Path) -> dict[str, str]:
    dims = spec.config.dims
    return {"tp": str(dims.tp), "pp": str(dims.pp), "dp": str(dims.dp), "gpus": str(dims.world_size),
            "run_dir": str(run_dir)}


def extra_words(spec: RunSpec, run_dir: Path) -> list[str]:
    """What follows the user's command (or batch script): the configuration's words, filled in, then the flag
    toggles (last, so that they win over the same flag in a configuration)."""
    values = placeholder_values(spec, run_dir)
    return [fill(word, values) for word in spec.config.trainer_args] + spec.flag_words


def parse_program(text: str) -> UserProgram:
    """--program's text; ValueError (one line) when it is empty, unbalanced or names an unknown placeholder."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"--program {text!r}: {exc}") from None
    if not words:
        raise ValueError("--program is empty: give the command every rank runs, e.g. --program \"python train.py\"")
    check_placeholders(words, f"--program {text!r}")
    return UserProgram(tuple(words))


def torchrun_target(command: list[str]) -> list[str]:
    """What follows torchrun's own flags: `python x.py a` -> `x.py a`; `python -m m a` -> `-m m a`; else
    `--no-python CMD...` (a wrapper, a binary, or a Python with options of its own such as -u)."""
    if len(command) >= 2 and _PYTHON.match(Path(command[0]).name):
        if command[1] == "-m" and len(command) >= 3:
            return command[1:]
        if not command[1].startswith("-"):
            return command[1:]
    return ["--no-python", *command]
