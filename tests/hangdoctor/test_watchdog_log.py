"""NCCL's watchdog lines in a log are read as each rank's last collective (formats/watchdog_log.py), on a real
timeout recorded on an H100 (data/nccl_timeout_h100/README.md: rank 1 never issued all_reduce #9), and the
Flight Recorder dumps torch's watchdog wrote there are read beside it."""

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from hangdoctor.cli import main
from hangdoctor.formats.watchdog_log import read_watchdog_status

DATA = Path(__file__).parent / "data" / "nccl_timeout_h100"


def analyze(*paths) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", *map(str, paths), "--json"], out=Console(file=out, width=200),
                err=Console(file=err, width=200))
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.parametrize("variant", ["plain", "timing"])
def test_the_log_alone_names_the_rank_that_never_issued_the_collective(variant):
    code, verdict, err = analyze(DATA / variant / "job.log")
    first = verdict["suspects"][0]
    assert (first["folded"], first["kind"], first["confidence"]) == ("1", "never-issued", "high")
    assert "read the NCCL watchdog's last collective of ranks 0-1" in err
    assert not any(s["confidence"] in ("high", "medium") and 0 in s["ranks"] for s in verdict["suspects"])


@pytest.mark.parametrize("variant", ["plain", "timing"])
def test_torchs_own_dumps_are_kept_over_the_log_lines(variant):
    code, verdict, err = analyze(DATA / variant / "job.log", DATA / variant / "fr")
    first = verdict["suspects"][0]
    assert (first["folded"], first["kind"]) == ("1", "never-issued")
    assert "all_reduce #9" in " ".join(verdict["hints"])  # the dump names the op; the log lines only its number


def test_lines_that_name_no_group_or_tell_no_rank_apart_are_no_evidence():
    old = ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=95636, "
           "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25611880 milliseconds before timing out.\n"
           "[E ProcessGroupNCCL.cpp:458] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=63754, "
           "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25611530 milliseconds before timing out.\n")
    assert read_watchdog_status(old, "x") == []  # "[Rank 0]" of which group? (these are two groups' ranks)
    same = "".join(f"[rank{r}]:[E ProcessGroupNCCL.cpp:1894] [PG ID 4 PG GUID 21 Rank {r % 2}] Timeout at NCCL work: "
                   f"4421, last enqueued NCCL work: 4421, last completed NCCL work: 4420.\n" for r in (2, 3))
    assert read_watchdog_status(same, "x") == []


def test_a_subgroups_lines_are_placed_by_their_global_prefix():
    text = ("[rank2]:[E508 ProcessGroupNCCL.cpp:1894] [PG ID 4 PG GUID 21 Rank 0] Timeout at NCCL work: 4421, last "
            "enqueued NCCL work: 4421, last completed NCCL work: 4420.\n"
            "[rank3]:[E508 ProcessGroupNCCL.cpp:1894] [PG ID 4 PG GUID 21 Rank 1] Received a dump signal due to a "
            "collective timeout from rank 2 ... Last enqueued NCCL work: 4420, last completed NCCL work: 4420.\n"
            "[E508 ProcessGroupNCCL.cpp:1894] [PG ID 4 PG GUID 21 Rank 1] Timeout at NCCL work: 9, last enqueued "
            "NCCL work: 9, last completed NCCL work: 8.\n")  # no prefix, not the default group: left out
    dumps = read_watchdog_status(text, "x")
    assert [(d.rank, d.status["21"]["last_enqueued_collective"]) for d in dumps] == [(2, 4421), (3, 4420)]
