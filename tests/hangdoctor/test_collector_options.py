"""The collector's contract is typed once (collector/options.py): what the front end sends is what the collector
reads, for every field, through the real command line of `collector/__main__.py`."""

import dataclasses
import random

import pytest

from hangdoctor.collector.__main__ import build_parser
from hangdoctor.collector.options import CollectOptions, Selection, from_namespace, to_argv
from hangdoctor.sources.remote import collector_argv


def _random_options(rng: random.Random) -> tuple[CollectOptions, Selection]:
    options = CollectOptions(pyspy=rng.choice(["py-spy", "/opt/py spy/bin/py-spy"]), samples=rng.randint(1, 9),
                             interval=rng.choice([0.0, 0.5, 1.25, 3.0]), native=rng.random() < 0.5,
                             locals=rng.random() < 0.5, nonblocking=rng.random() < 0.5, text=rng.random() < 0.5,
                             dump_timeout=rng.choice([0.1, 10.0, 7.5]), flight_recorder=rng.random() < 0.5,
                             fr_dir=rng.choice([None, "/tmp/fr dumps"]), pyspy_version=rng.choice(["", "0.4.3"]))
    selection = Selection(match=rng.choice([{}, {"SLURM_JOB_ID": "12"}, {"RANK": None, "MASTER_PORT": "29500"}]),
                          pids=rng.choice([[], [4242], [1, 2, 3]]), node=rng.choice([None, "n3"]),
                          all_nodes=rng.random() < 0.5)
    return options, selection


def test_every_field_survives_the_command_line():
    rng = random.Random(7)
    for _ in range(200):
        options, selection = _random_options(rng)
        got_options, got_selection = from_namespace(build_parser().parse_args(to_argv(options, selection)))
        assert got_options == dataclasses.replace(options, timeout=CollectOptions().timeout)  # timeout stays here
        assert got_selection == selection


def test_the_remote_command_carries_them_after_the_collector_path():
    options = CollectOptions(pyspy="/usr/bin/py-spy", samples=3, interval=0.5, locals=True, fr_dir="/tmp/fr",
                             pyspy_version="0.4.3", timeout=90.0)
    argv = collector_argv(options, python="/usr/bin/python3", match={"SLURM_JOB_ID": "7"}, time_limit=88.0,
                          node="n1", chunked=True)
    assert argv[:3] == ["/usr/bin/python3", "-S", argv[2]] and argv[2].endswith("hangdoctor/collector/__main__.py")
    parsed = build_parser().parse_args(argv[3:])
    got, selection = from_namespace(parsed)
    assert (got.samples, got.interval, got.locals, got.fr_dir, got.pyspy) == (3, 0.5, True, "/tmp/fr", "/usr/bin/py-spy")
    assert (selection.match, selection.node, parsed.time_limit, parsed.chunked) == ({"SLURM_JOB_ID": "7"}, "n1", 88.0, True)


@pytest.mark.parametrize("argv, message", [(["--match", "=x"], "expected KEY or KEY=VALUE"),
                                           (["--samples", "0"], "--samples must be >= 1")])
def test_bad_collector_arguments_are_one_line(argv, message):
    with pytest.raises(ValueError, match=message):
        from_namespace(build_parser().parse_args(argv))
