"""PyTorch's Flight Recorder dumps as evidence: read safely, joined per process group, stated in coordinates,
and the same first mismatch as PyTorch's own analyser (torchfrtrace).

The dumps in tests/hangdoctor/data/fr/ were written by fixtures/fr_job.py under torchrun on gloo with
TORCH_FR_BUFFER_SIZE=2000 (each rank dumps torch's pickle and JSON when its collective times out):
- ddp_barrier: 4 ranks of DDP; after step 2 rank 0 alone calls barrier(), ranks 1-3 go on into step 3's backward;
- shape: 3 ranks; rank 1 all_reduces a [2, 2] tensor where the others reduce [4] (same bytes: gloo cannot tell);
- skip_allreduce: 4 ranks in tp groups 0-1 and 2-3; rank 1 skips one all_reduce of its tp group.
"""

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hangdoctor.analysis.sequence import join
from hangdoctor.analysis.verdict import diagnose
from hangdoctor.cli import main
from hangdoctor.formats.flight_recorder import FrError, read_fr
from hangdoctor.formats.load import load_paths
from hangdoctor.identity import TopologyFlags
from hangdoctor.topology import ParallelDims

FR = Path(__file__).parent / "data" / "fr"


def dumps(case: str, suffix: str = "") -> list:
    return [read_fr(p) for p in sorted((FR / case).glob(f"fr_rank_?{suffix}"))]


def test_pickle_and_json_forms_say_the_same():
    pickles, jsons = dumps("skip_allreduce"), dumps("skip_allreduce", ".json")
    assert [d.rank for d in pickles] == [d.rank for d in jsons] == [0, 1, 2, 3]
    for a, b in zip(pickles, jsons):
        assert [(e.group, e.seq, e.op, e.sizes) for e in a.entries] == [(e.group, e.seq, e.op, e.sizes) for e in b.entries]
        assert {g: (t.first, t.codes, t.times) for g, t in a.sequences.items()} == \
            {g: (t.first, t.codes, t.times) for g, t in b.sequences.items()}
    rank1 = pickles[1]
    sequence = {g: [(seq, t.whats[c]) for seq, c in sorted(t.seqs()[0].items())] for g, t in rank1.sequences.items()}
    assert sequence == {"1": [(1, "all_reduce [4 Float]"), (2, "all_reduce [4 Float]")], "0": [(1, "barrier []")]}
    assert rank1.count == 3
    # each group's last entry is kept, the latest (where the rank waits: the barrier of group 0) with its stack
    assert [(e.group, e.seq, e.op) for e in rank1.entries] == [("1", 2, "all_reduce"), ("0", 1, "barrier")]
    assert [e.stack[0].name if e.stack else None for e in rank1.entries] == [None, "barrier"]
    assert rank1.status["1"]["last_enqueued_collective"] == 2


def test_a_skipped_all_reduce_is_named_by_group_sequence_id_and_coordinates():
    [first, *_] = join(dumps("skip_allreduce"), ParallelDims(tp=2, dp=2))
    assert first.name == "tensor-parallel group of dp=0 [ranks 0-1]" and first.axes == ("tp",)
    assert (first.parting.seq, first.parting.kind, first.parting.never) == (3, "missing", [1])
    assert first.parting.issued == {"all_reduce [4 Float]": [0]}
    assert first.last_issued == {0: 3, 1: 2}
    v = diagnose(load_paths([FR / "skip_allreduce"], TopologyFlags(tp=2)))
    assert v.hints[0] == ("tensor-parallel group of dp=0 [ranks 0-1]: dp=0 tp=0 [rank 0] waits in all_reduce #3; "
                          "dp=0 tp=1 [rank 1] never issued #3 and is at barrier #1 in group 0")
    suspect = v.suspects[0]
    assert (suspect.ranks, suspect.kind, suspect.confidence) == ([1], "never-issued", "high")
    assert v.headline.startswith("Flight Recorder dumps of 4/4 ranks; first parting at #3")


def test_a_lagging_completion_record_does_not_hide_a_skip():
    # seen live (CI, gloo): rank 1's pg_status still said all_reduce #1 completed while it had issued #2 and sat in
    # the world barrier: its last entry is past #2, so it skipped #3; it is not held inside #2
    from hangdoctor.analysis.sequence import suspects_from

    lagging = dumps("skip_allreduce")
    lagging[1].status["1"]["last_completed_collective"] = 1
    found = suspects_from(join(lagging, ParallelDims(tp=2, dp=2)))
    assert [(ranks, kind, sure) for ranks, kind, sure, _ in found][:1] == [([1], "never-issued", "high")]


def test_one_faulty_replica_of_pp2_tp2_dp2_is_named_in_coordinates():
    # our trainer, --fault skip-loss-broadcast:iteration=2,dp=1 --flight-recorder (data/fr/skip_loss_pp2tp2dp2/README.md)
    v = diagnose(load_paths([FR / "skip_loss_pp2tp2dp2"], TopologyFlags(tp=2, pp=2)))
    assert v.hints[0] == ("pipeline groups of dp=1 [ranks 2-3,6-7]: pp=0 dp=1 (all tp) [ranks 2-3] wait in broadcast "
                          "#2; pp=1 dp=1 (all tp) [ranks 6-7] never issued #2 and are at all_reduce #39 in groups 10, 11")
    assert [(s.ranks, s.kind, s.confidence) for s in v.suspects] == [([6, 7], "never-issued", "high")]
    assert v.headline == ("Flight Recorder dumps of 8/8 ranks; first parting at #2 of the pipeline groups of dp=1 "
                          "[ranks 2-3,6-7]")


def test_the_trainers_own_dumps_on_two_stages():
    v = diagnose(load_paths([FR / "skip_loss_pp2"], TopologyFlags(pp=2)))
    assert v.suspects[0].ranks == [1] and v.suspects[0].kind == "never-issued"
    # the loss broadcast's group holds every rank, as the world does: it is named by its own id, not "world"
    assert v.hints[0].startswith("group 5 [ranks 0-1]: pp=0 [rank 0] waits in broadcast #2; pp=1 [rank 1] never issued #2")


def test_ddp_rank_zero_barrier_is_another_op_under_the_same_id():
    v = diagnose(load_paths([FR / "ddp_barrier"], TopologyFlags()))
    [group] = [g for g in v.sequences if g.parting]
    assert group.name == "world [ranks 0-3]" and group.parting.kind == "op"
    assert group.parting.issued == {"barrier []": [0], "all_reduce [81 Float]": [1, 2, 3]}
    assert (v.suspects[0].ranks, v.suspects[0].kind, v.suspects[0].confidence) == ([0], "other-op", "high")


def test_other_sizes_under_the_same_op():
    v = diagnose(load_paths([FR / "shape"], TopologyFlags()))
    [group] = [g for g in v.sequences if g.parting]
    assert (group.parting.seq, group.parting.kind) == (2, "sizes")
    assert v.suspects[0].ranks == [1] and "[2x2 Float]" in v.suspects[0].reason


def test_json_output_carries_the_join(capsys):
    assert main(["analyze", str(FR / "skip_allreduce"), "--tp", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    fr = data["flight_recorder"]
    assert fr["ranks"]["folded"] == "0-3"
    first = fr["groups"][0]
    assert (first["name"], first["parting"]["seq"], first["parting"]["never"]) == (
        "tensor-parallel group of dp=0 [ranks 0-1]", 3, [1])
    assert first["parting"]["now_at"]["1"] == {"group": "0", "seq": 1, "op": "barrier", "p2p": False,
                                               "state": "scheduled"}


# Untrusted input.

class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_and_never_runs(tmp_path, capsys):
    marker = tmp_path / "MARKER"
    folder = tmp_path / "fr"
    shutil.copytree(FR / "skip_allreduce", folder)
    evil = {"version": "2.10", "entries": [_Payload(marker)], "pg_status": {}}
    (folder / "fr_rank_7").write_bytes(pickle.dumps(evil))
    with pytest.raises(FrError, match="only plain data"):
        read_fr(folder / "fr_rank_7")
    assert main(["analyze", str(folder), "--tp", "2"]) == 1  # partial: one file could not be read
    err = capsys.readouterr().err
    assert re.search(r"^Error: .*fr_rank_7: not a readable Flight Recorder pickle", err, re.M)
    assert "Traceback" not in err
    assert not marker.exists(), "the payload ran"


def _shared_references() -> bytes:
    """A few hundred bytes that stand for a tree of 2**60 lists: each level refers twice to the one below."""
    nested: list = []
    for _ in range(60):
        nested = [nested, nested]
    return pickle.dumps({"version": "2.10", "entries": [{"input_sizes": nested}], "pg_status": {}})


def _circular() -> bytes:
    """An entry whose frames list contains itself: any walk that expands it never ends."""
    frames: list = [{"name": "f", "filename": "x.py", "line": 1}]
    frames.append(frames)
    return pickle.dumps({"version": "2.10", "entries": [{"frames": frames}], "pg_status": {}})


def test_the_expanded_size_is_counted_exactly_over_shared_objects():
    """torch's dumps share a frame dict among entries; the size is the tree as walked, each reference expanded,
    counted once per distinct object: the budget decides at exactly that count."""
    from hangdoctor.collector.fr_summary import DecodeError, _check_expanded_size

    frame = {"name": "f", "filename": "x.py", "line": 1}  # 7 nodes: the dict, 3 keys, 3 values
    entry = {"frames": [frame, frame, frame], "input_sizes": [[2, 3]]}  # 1 + 2 keys + (1 + 3 * 7) + (1 + 1 + 2)
    dump = {"entries": [entry, entry]}  # 1 + 1 key + (1 + 2 * 29) = 61
    _check_expanded_size(dump, budget=61)
    with pytest.raises(DecodeError):
        _check_expanded_size(dump, budget=60)


def _seq_span(good: bytes) -> bytes:
    """One entry's collective_seq_id set to 10**15: one code per id would be a string of 10**15 characters."""
    dump = pickle.loads(good)  # our own fixture file
    next(e for e in dump["entries"] if not e.get("is_p2p"))["collective_seq_id"] = 10**15
    return pickle.dumps(dump)


@pytest.mark.timeout(60)  # each damage is refused at once: none may take minutes
@pytest.mark.parametrize("damage", ["truncated", "foreign", "json-shape", "shared-references", "circular",
                                    "binbytes8", "seq-span"])
def test_damaged_and_foreign_files_are_one_error_line_and_the_rest_is_analysed(tmp_path, capsys, damage):
    folder = tmp_path / "fr"
    shutil.copytree(FR / "skip_allreduce", folder)
    good = (folder / "fr_rank_3").read_bytes()
    bad = {"truncated": lambda: good[: len(good) // 2], "foreign": lambda: b"\x89PNG\r\n\x1a\n" + os.urandom(64),
           "json-shape": lambda: b'{"entries": 5, "pg_status": {}}', "shared-references": _shared_references,
           "circular": _circular,
           "binbytes8": lambda: b"\x80\x04\x8e" + (2**64 - 1).to_bytes(8, "little") + b"x.",  # sweep round 2
           "seq-span": lambda: _seq_span(good)}[damage]()
    (folder / "fr_rank_3").write_bytes(bad)
    (folder / "fr_rank_3.json").unlink()
    code = main(["analyze", str(folder), "--tp", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("Error:")]) == 1
    data = json.loads(out)
    assert data["flight_recorder"]["ranks"]["folded"] == "0-2" and data["errors"]
    assert data["flight_recorder"]["groups"][0]["parting"]["seq"] == 3, "the other ranks still tell the story"


# Parity with PyTorch's own analyser.

GROUPS = {"ddp_barrier": {"0": [0, 1, 2, 3]}, "shape": {"0": [0, 1, 2]},
          "skip_allreduce": {"0": [0, 1, 2, 3], "1": [0, 1], "2": [2, 3]}}


def torchfrtrace(case: str, tmp_path: Path) -> tuple[str, int, set[int]]:
    """(group, sequence id, ranks it names) of the first mismatch torchfrtrace reports. torch 2.13 leaves
    pg_config empty for gloo groups and torchfrtrace then fails (KeyError): the copies given to it get the
    groups' members as NCCL dumps carry them (name, desc, ranks), nothing else changed."""
    folder = tmp_path / case
    folder.mkdir()
    files = sorted((FR / case).glob("fr_rank_?"))
    raw = {f.name: pickle.loads(f.read_bytes()) for f in files}  # our own recordings: trusted here
    descs = {e["process_group"][0]: e["process_group"][1] for d in raw.values() for e in d["entries"]}
    for name, data in raw.items():
        data["pg_config"] = {g: {"name": g, "desc": descs.get(g, ""), "ranks": str(r)} for g, r in GROUPS[case].items()}
        (folder / name).write_bytes(pickle.dumps(data))
    exe = Path(sys.executable).with_name("torchfrtrace")
    done = subprocess.run([str(exe), str(folder), "-p", "fr_rank_"], capture_output=True, text=True, timeout=120)
    text = done.stdout + done.stderr
    seq = re.search(r"(?:Not all ranks joining collective, sequence number|Collective sequence number): (\d+)", text)
    assert seq, text[-3000:]
    block = text[seq.start():].split("collective stack trace")[0]
    group = re.search(r"group info: ([^:\n]+)", block)[1]
    named: set[int] = set()
    for match in re.finditer(r"missing ranks: \{([\d, ]+)\}|Culprit rank (\d+)", block):
        named |= {int(x) for x in (match[1] or match[2]).split(",")}
    return group, int(seq[1]), named


@pytest.mark.parametrize("case", sorted(GROUPS))
def test_the_first_mismatch_is_the_one_torchfrtrace_finds(case, tmp_path):
    group, seq, named = torchfrtrace(case, tmp_path)
    ours = next(g for g in join(dumps(case), None) if g.parting)
    assert (ours.group, ours.parting.seq) == (group, seq)
    issued = {frozenset(r) for r in ours.parting.issued.values()}
    sides = issued | {frozenset(ours.parting.never)} if ours.parting.never else issued
    # torchfrtrace names the ranks that differ from its reference (rank 0's entry): one side of our parting
    assert frozenset(named) in sides or frozenset(set(GROUPS[case][group]) - named) in sides


def test_an_unreadable_dump_is_never_read_as_the_collective_being_stuck(tmp_path, capsys):
    """shape: rank 1 reduces [2, 2] where 0 and 2 reduce [4]. With rank 1's file damaged, ranks 0 and 2 agree:
    the verdict must not say that no rank parted and the collective itself is stuck (sweep round 2)."""
    folder = tmp_path / "fr"
    folder.mkdir()
    for rank in (0, 2):
        shutil.copy(FR / "shape" / f"fr_rank_{rank}", folder)
    (folder / "fr_rank_1").write_bytes((FR / "shape" / "fr_rank_1").read_bytes()[:50])
    code = main(["analyze", str(folder), "--json"])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert code == 1 and "Traceback" not in err
    assert data["headline"] == ("Flight Recorder dumps of 2/3 ranks; no parting among the dumps read "
                                "(rank 1: unreadable)")
    assert data["unresponsive"]["no-flight-recorder-dump"]["ranks"] == [1] and not data["missing"]["ranks"]
    assert not any("is stuck" in hint for hint in data["hints"])
    assert any("the dump of rank 1 could not be read, and the parting may be there" in h for h in data["hints"])


def test_dumps_without_entries_compare_nothing(tmp_path, capsys):
    folder = tmp_path / "fr"
    folder.mkdir()
    for rank in range(3):
        dump = pickle.loads((FR / "shape" / f"fr_rank_{rank}").read_bytes())  # our own fixture files
        dump["entries"] = []
        (folder / f"fr_rank_{rank}").write_bytes(pickle.dumps(dump))
    main(["analyze", str(folder), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["headline"].endswith("; the dumps hold no collectives: nothing to compare"), data["headline"]
    assert not any("issued the same collectives" in hint for hint in data["hints"])


def test_a_dump_folder_read_after_the_deadline_names_the_files_it_did_not_read():
    """attach --fr-dir read every dump whatever --timeout said (sweep round 2): past the deadline the files are
    named and left, so the stacks already taken are saved in time."""
    from hangdoctor.collector.fr_summary import summaries_in

    read = summaries_in(str(FR / "skip_allreduce"), {0, 1}, deadline=None)
    assert {rank: "summary" in r for rank, r in read.items()} == {0: True, 1: True}
    late = summaries_in(str(FR / "skip_allreduce"), {0, 1}, deadline=0.0)
    assert all("not read, the collection's deadline came first" in r["error"] for r in late.values())


CORPUS = Path(__file__).parent / "corpus"


def _recorded(case: str):
    return load_paths([CORPUS / case / "attach"], TopologyFlags()).flight_recorder


def test_a_rank_still_inside_the_collective_before_is_not_said_to_have_skipped_the_next():
    # real NCCL (H100): rank 2 is inside all_to_all #9, which ranks 0-1 completed (pg_status); they wait in #10
    from hangdoctor.analysis.sequence import suspects_from

    found = suspects_from(join(_recorded("fdu_nccl_moe_drop_after_split_exchange"), None, 3))
    assert [(ranks, kind, sure) for ranks, kind, sure, _ in found] == [([2], "incomplete", "low")]
    assert "still inside all_to_all #9" in found[0][3] and "which ranks 0-1 completed" in found[0][3]


def test_a_point_to_point_gap_with_no_history_between_the_two_names_both_low():
    # real NCCL: rank 2 posts a send and a recv to rank 0, which never posted anything with rank 2 (a halo's
    # wrong wrap-around, or rank 0's skip); a stage that posted 3 sends against 4 receives has history: high
    from hangdoctor.analysis.p2p_pairs import pair_p2p

    halo, _ = pair_p2p(_recorded("fdu_nccl_halo_last_rank_wraps_to_rank0"))
    assert {(g.late, g.poster, g.history) for g in halo} == {(0, 2, False)}
    pipe, _ = pair_p2p(_recorded("gpu_nccl_pp_skip_send"))
    assert pipe and all(g.history for g in pipe)
    v = diagnose(load_paths([CORPUS / "fdu_nccl_halo_last_rank_wraps_to_rank0" / "attach"], TopologyFlags()))
    assert [(s.ranks, s.kind, s.confidence) for s in v.suspects[:2]] == [([0], "never-issued", "low"),
                                                                        ([2], "wrong-peer", "low")]


def test_an_exchange_posted_on_two_communicators_names_the_side_off_the_jobs_group():
    # real NCCL (H100): stage 0 sends to stage 1 on the default group, stages 1-2 receive on the pipeline group
    # (Megatron-LM#620): the send and the receive never match; rank 1's missing send to rank 2 is not its own gap
    from hangdoctor.analysis.p2p_pairs import pair_p2p

    case = "fdw_nccl_pp_send_default_group_recv_pp_group"
    [cross] = pair_p2p(_recorded(case))[1]
    assert (cross.sender, cross.receiver, cross.send_group, cross.recv_group, cross.off) == (0, 1, "0", "1", [0])
    assert pair_p2p(_recorded("gpu_nccl_pp_skip_send"))[1] == []
    v = diagnose(load_paths([CORPUS / case / "attach"], TopologyFlags()))
    assert [(s.ranks, s.kind, s.confidence) for s in v.suspects] == [([0], "crossed-groups", "medium")]
