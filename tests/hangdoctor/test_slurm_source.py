"""`attach --jobid`'s reading of each node's step result (no cluster needed; the live tests are in
test_attach_slurm.py)."""

import json

from hangdoctor.sources.slurm_job import collector_time_limit, node_document
from slurm.steps import NodeResult, command_time_limit

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
    for timeout in (5, 15, 60, 600):
        assert collector_time_limit(timeout) == command_time_limit(timeout) - 1.0
    assert collector_time_limit(2) == 0.5  # a bound too short to leave a margin: the collector still gets 0.5 s
