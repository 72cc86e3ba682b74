"""attach's contract (hangdoctor/request.py): one set of flags and defaults for attach, watch and the experiment
runner; what a front end passes on (to_argv) is read back the same by attach's own parser; a verdict is read
only when its format says it is one."""

import argparse
import json
import re

import pytest

from hangdoctor.commands import attach
from hangdoctor.request import (VERDICT_FORMAT, AttachRequest, add_arguments, from_namespace, read_verdict,
                                to_argv)
from tests.support import REPO


def attach_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    attach.prepare_parser(parser)
    return parser


@pytest.mark.parametrize("request_", [
    AttachRequest(),
    AttachRequest(samples=3, interval=2.5, timeout=90, dump_timeout=4, native=True, locals=False, nonblocking=True,
                  fr_dir="/tmp/fr dumps"),
])
def test_what_a_front_end_passes_attach_reads_back_the_same(request_):
    args = attach_parser().parse_args(["--local", *to_argv(request_)])
    assert from_namespace(args) == request_


def test_a_prefix_gives_the_experiment_runners_flags_with_the_same_defaults():
    parser = argparse.ArgumentParser()
    add_arguments(parser, prefix="attach-")
    assert from_namespace(parser.parse_args([]), prefix="attach-") == AttachRequest()
    got = from_namespace(parser.parse_args(["--attach-samples", "4", "--no-attach-locals"]), prefix="attach-")
    assert (got.samples, got.locals) == (4, False)


def test_contradicting_flags_are_one_line():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match=r"--samples 5 x --interval 30 needs 120s, more than --timeout 60"):
        from_namespace(parser.parse_args(["--samples", "5", "--interval", "30"]))


def test_a_verdict_is_read_only_when_its_format_says_so():
    assert read_verdict(json.dumps({"format": VERDICT_FORMAT, "headline": "x"}))["headline"] == "x"
    for text, why in (("{", "not JSON"), ("[1]", "a JSON object"),
                      (json.dumps({"format": "hangdoctor-profile/1"}), "format 'hangdoctor-profile/1'")):
        with pytest.raises(ValueError, match=re.escape(why)):
            read_verdict(text)


def test_the_sampling_flags_are_spelt_in_one_module():
    spelt = []
    for package in ("hangdoctor",):  # experiments is hangdoctor/experiments
        for path in (REPO / package).rglob("*.py"):
            for flag in ('"--samples"', '"--interval"', '"--dump-timeout"', '"--attach-samples"'):
                if flag in path.read_text():
                    spelt.append(f"{path.relative_to(REPO)}: {flag}")
    assert spelt == []


def test_experiments_imports_nothing_from_hangdoctor_but_the_contract():
    """Beside itself and the shared helpers that live inside hangdoctor (clicore, topology, throughput)."""
    found = set()
    for path in (REPO / "hangdoctor" / "experiments").rglob("*.py"):
        found |= set(re.findall(r"^\s*(?:from|import) (hangdoctor[\w.]*)", path.read_text(), re.M))
    shared = ("hangdoctor.experiments", "hangdoctor.clicore", "hangdoctor.topology", "hangdoctor.throughput")
    assert {name for name in found if not name.startswith(shared)} == {"hangdoctor.request"}
