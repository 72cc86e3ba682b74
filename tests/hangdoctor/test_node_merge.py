"""The collector's node summary (hangdoctor-node/2): each distinct thread once per node, each rank's sample naming
its threads. It must lose nothing: py-spy's JSON comes back exactly, and the front end reads the same ranks,
samples and stacks from it as from the per-rank form (hangdoctor-node/1) it replaces."""

import copy
import json
from pathlib import Path

from hangdoctor.cli import main
from hangdoctor.collector import compact
from hangdoctor.formats.nodefile import read_node_doc

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).parent / "corpus"
# Recorded per-rank node files: the trainer's pipeline hang (2 samples, one thread per rank) and a torchrun job
# with a launcher, helper threads and --locals (busy_python: 4 processes, 2 threads each).
RECORDED = [DATA / "trainer_pp2dp2_skip_loss_broadcast.node.json", CORPUS / "busy_python/attach/nodes/node1.json",
            DATA / "gloo8_mixed.node.json"]


def _pyspy_json(doc: dict) -> list:
    return [[compact.expand(doc, s, p["pid"]) for s in p["samples"]] for p in doc["processes"]]


def test_merge_gives_back_pyspy_json_exactly_and_stores_each_thread_once():
    for path in RECORDED:
        per_rank = json.loads(path.read_text())
        assert per_rank["format"] == "hangdoctor-node/1"
        merged = compact.merge(copy.deepcopy(per_rank))
        assert merged["format"] == "hangdoctor-node/2"
        assert _pyspy_json(merged) == _pyspy_json(per_rank), path.name
        threads = sum(len(s["threads"]) for p in merged["processes"] for s in p["samples"] if s.get("threads"))
        assert 0 < len(merged["thread_table"]) < threads, path.name  # ranks and samples in the same place share


def test_the_front_end_reads_the_same_ranks_from_either_form():
    for path in RECORDED:
        per_rank = json.loads(path.read_text())
        _, before = read_node_doc(per_rank)
        _, after = read_node_doc(compact.merge(copy.deepcopy(per_rank)))
        assert [(f.pid, f.rank, f.cmdline) for f in after] == [(f.pid, f.rank, f.cmdline) for f in before]
        for a, b in zip(after, before):
            assert a.samples == b.samples, (path.name, a.pid)  # threads: ids, names, frames, locals, state


def test_verdicts_agree_on_both_forms(tmp_path, capsys):
    per_rank = json.loads((DATA / "gloo8_mixed.node.json").read_text())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "n.json").write_text(json.dumps(per_rank))
    (tmp_path / "b" / "n.json").write_text(json.dumps(compact.merge(per_rank)))
    reports = []
    for folder in ("a", "b"):
        main(["analyze", str(tmp_path / folder), "--json"])
        report = json.loads(capsys.readouterr().out)
        reports.append({k: report[k] for k in ("headline", "suspects", "classes", "ranks")})
    assert reports[0] == reports[1]
    assert reports[0]["suspects"], "the recording has a stopped rank and a straggler"


def test_a_newer_node_format_is_one_line_error(tmp_path, capsys):
    doc = json.loads((DATA / "gloo8_mixed.node.json").read_text())
    doc["format"] = "hangdoctor-node/3"
    path = tmp_path / "n.json"
    path.write_text(json.dumps(doc))
    assert main(["analyze", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert "hangdoctor-node/3 is newer than this hangdoctor reads" in err[0] and "Traceback" not in "".join(err)


def test_a_damaged_thread_reference_is_said_not_crashed(tmp_path, capsys):
    doc = compact.merge(json.loads((DATA / "gloo8_mixed.node.json").read_text()))
    samples = len(doc["processes"][0]["samples"])
    doc["processes"][0]["samples"][0]["threads"][0][0] = 10 ** 6  # no such thread in the table
    path = tmp_path / "n.json"
    path.write_text(json.dumps(doc))
    main(["analyze", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    rank = next(r for r in report["ranks"] if r["pid"] == doc["processes"][0]["pid"])
    assert rank["samples"] == samples > 1 and rank["answered"] == samples - 1, "the damaged sample is an error"
