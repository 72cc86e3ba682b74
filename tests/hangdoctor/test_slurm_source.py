"""`attach --jobid`'s reading of each node's step result (no cluster needed; the live tests are in
test_attach_slurm.py)."""

import json

import pytest

from hangdoctor.sources.slurm_job import collector_time_limit, node_document
from slurm.steps import NodeResult

DOC = {"format": "hangdoctor-node/1", "node": "n2", "processes": [], "errors": []}


def result(status="ok", stdout="", stderr="", returncode=0) -> NodeResult:
    return NodeResult("n2", status, returncode, stdout, stderr, 1.0)


def test_the_document_comes_from_the_collectors_stdout():
    assert node_document(result(stdout=json.dumps(DOC) + "\n")) == (DOC, "")
    # py-spy missing: the collector exits 4 but still prints its document, which says why
    missing = dict(DOC, fatal="pyspy-missing")
    assert node_document(result("failed", json.dumps(missing), returncode=4)) == (missing, "")


def test_no_document_says_why():
    doc, why = node_document(result("timeout", stdout='{"format": "hangdoctor-node/1", "no', returncode=None,
                                    stderr="Traceback...\nKeyboardInterrupt"))
    assert doc is None and why == "timeout: its collector printed no readable report: KeyboardInterrupt"
    assert node_document(result("no answer", returncode=None))[1] == "no answer"
    assert node_document(result("failed", stderr="python: can't open file", returncode=2))[1] == \
        "failed (exit 2): python: can't open file"
    assert node_document(result())[1] == "ok: its collector printed no readable report"


def test_the_collector_stops_before_the_step_would_kill_it():
    """Worked by hand: the node's command limit (slurm.steps: the bound less 1.5 s for srun's stop, less 30% of
    that, kept between 1 and 10 s, for the launch), less 1 s so the collector reports before it is killed."""
    assert collector_time_limit(5) == pytest.approx(1.45)  # 5 - 1.5 = 3.5; 30% = 1.05; 3.5 - 1.05 = 2.45; - 1
    assert collector_time_limit(15) == pytest.approx(8.45)  # 13.5; 30% = 4.05; 13.5 - 4.05 = 9.45; - 1
    assert collector_time_limit(60) == pytest.approx(47.5)  # 58.5; 30% = 17.55, capped at 10; 48.5; - 1
    assert collector_time_limit(600) == pytest.approx(587.5)  # 598.5; capped at 10; 588.5; - 1
    assert collector_time_limit(2) == 0.5  # a bound too short to leave a margin: the collector still gets 0.5 s
