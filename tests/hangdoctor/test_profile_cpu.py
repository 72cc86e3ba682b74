"""`attach --profile` reads each rank's time on a core from the kernel (per-thread schedstat, over the profile's
window) beside py-spy's samples: exact where the samples are a sample. A rank that computes more than its peers is
named when its few samples (a rate bounded by the samplers' cost) put its peers' wait for it under the noise bar;
never where the samples say the opposite beyond their noise, never for a sliver of extra work in a job that mostly
sleeps. Real processes
for the collector; synthetic profiles for the analysis's decisions."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from hangdoctor.analysis.stragglers import find_stragglers
from hangdoctor.collector import profile
from hangdoctor.formats.profile import frame_from_label
from hangdoctor.model import OK, Collection, CpuTime, ProfiledStack, RankIdentity, RankProfile, RankRecord
from tests.support import PYTHON, REPO, child_env, run_bounded

STEP = ["<module> (t.py:9)", "step (t.py:4)"]
IN_ALL_REDUCE = ["<module> (t.py:10)", "all_reduce (torch/distributed/distributed_c10d.py:2800)"]


def _rank(rank: int, waiting: int, on_core: float | None, samples: int = 180, core_wait: float = 0.25,
          own: tuple[str, int] | None = None) -> RankRecord:
    """A rank sampled `samples` times (9/s for 20 s: the rate the samplers' cost bound kept for the reference trainer
    on 2 cores), `waiting` of them in the all_reduce; its main thread on a core `on_core` of the 20 s and waiting for
    one `core_wait` of them."""
    def stack(labels: list[str]) -> tuple:
        return tuple(frame_from_label(label) for label in reversed(labels))
    elsewhere = own[1] if own else 0  # samples in a frame of the rank's own (`own`: its label and count)
    stacks = (ProfiledStack(10 + rank, "MainThread", stack(IN_ALL_REDUCE), waiting),
              ProfiledStack(10 + rank, "MainThread", stack(STEP), samples - waiting - elsewhere),
              *([ProfiledStack(10 + rank, "MainThread", stack(["<module> (t.py:9)", own[0]]), elsewhere)] if own else []))
    cpu = None if on_core is None else CpuTime(seconds=20.0, on_core=20 * on_core, waiting=20 * core_wait,
                                               all_on_core=20 * on_core + 1)
    return RankRecord(RankIdentity(rank=rank, host="n1", pid=10 + rank),
                      profile=RankProfile(status=OK, rate=9, seconds=20.0, samples=samples, stacks=stacks, cpu=cpu))


def _named(*ranks: RankRecord) -> list[list[int]]:
    return [s.ranks for s in find_stragglers(Collection(records=list(ranks))).stragglers]


def test_a_rank_that_computes_more_is_named_where_its_few_samples_alone_cannot_tell():
    # the shape bench/stragglers.py kept for the reference trainer at 9/s: rank 2 slowed by 10% of compute waits
    # 34% against its peers' 40% (a 6% gap under the noise bar of 180 samples), and runs on a core 48% against 40%
    peers = [_rank(r, 72, c) for r, c in ((0, 0.40), (1, 0.41), (3, 0.40))]
    finding = find_stragglers(Collection(records=[*peers, _rank(2, 61, 0.48)]))
    assert [s.ranks for s in finding.stragglers] == [[2]]
    first = finding.stragglers[0]
    assert first.waited_for < first.threshold  # the samples alone would not have named it
    assert "its main thread ran on a core 48% of the time, its peers' 40% (median): it computes 20% more" \
        in first.evidence
    assert [r.on_core for r in finding.ranks] == pytest.approx([0.40, 0.41, 0.48, 0.40])
    # the same samples without the kernel's counts (an older collector's file): nobody
    assert _named(*[_rank(r, w, None) for r, w in ((0, 72), (1, 72), (2, 61), (3, 72))]) == []


def test_more_work_against_the_samples_direction_or_a_sliver_of_it_names_nobody():
    # the samples say its peers did not wait for it, beyond their noise (it waited far longer than they did): more
    # CPU is then not a straggler's (work nobody waits for)
    assert _named(*[_rank(r, 72, 0.40) for r in range(3)], _rank(3, 110, 0.48)) == []
    # within the samples' noise either way (two ranks of one pipeline stage, one peer: its few samples put it level
    # with its peer), the kernel's count decides: it computes 20% more
    assert _named(_rank(0, 72, 0.40), _rank(1, 74, 0.48)) == [[1]]
    # a job that sleeps through its steps: rank 0 prints a line more each step (1% of the time on a core against
    # 0.5%: twice as much, yet a sliver of the wall time), its gap in the samples' noise
    assert _named(_rank(0, 66, 0.010), *[_rank(r, 72, 0.005) for r in (1, 2, 3)]) == []


def test_a_straggler_that_computes_no_more_is_said_to_be_held_up_off_the_cpu():
    # a sleeping straggler (the samples name it by themselves): the kernel's count says it does no more work
    finding = find_stragglers(Collection(records=[*[_rank(r, 72, 0.40) for r in range(3)], _rank(3, 20, 0.40)]))
    assert [s.ranks for s in finding.stragglers] == [[3]]
    assert "no more work than theirs, no less CPU; what holds it up is off the CPU" in finding.stragglers[0].evidence


def test_a_rank_that_waits_for_its_own_core_is_named_where_its_peers_have_cores_to_spare():
    # one rank per core (a launcher's CPU binding): another process on rank 1's core; it does the same work as its
    # peer and waits for its core 10% of the time against 1%, its samples level with its peer's (one peer: no spread)
    finding = find_stragglers(Collection(records=[_rank(0, 72, 0.40, core_wait=0.01),
                                                  _rank(1, 68, 0.40, core_wait=0.10)]))
    assert [s.ranks for s in finding.stragglers] == [[1]]
    assert "it waited for a core 10% of the time, its peers 1%: other work on its node takes its CPU" \
        in finding.stragglers[0].evidence
    # the same excess where the ranks contend for the cores themselves (4 ranks on 2 cores: each waits for one a
    # quarter of the time or more, the shares swing by 15 points): nobody
    assert _named(*[_rank(r, 72, 0.40, core_wait=0.30) for r in range(3)], _rank(3, 70, 0.40, core_wait=0.39)) == []
    # a sliver more than its peer: nobody; its peer plainly waiting less than it did (beyond the samples' noise):
    # not it (the samples name the peer, which it waited for)
    assert _named(_rank(0, 72, 0.40, core_wait=0.01), _rank(1, 72, 0.40, core_wait=0.04)) == []
    assert _named(_rank(0, 60, 0.40, core_wait=0.01), _rank(1, 110, 0.40, core_wait=0.10)) == [[0]]


def test_time_in_code_its_peers_never_run_names_a_rank_their_shared_wait_cannot():
    # the reference trainer's sleeping straggler at 10/s (bench/stragglers.py --how sleep): its peers wait 74% of
    # 200 samples, it 69% (under the noise bar), and 10% of its samples sit in a frame no peer is ever seen in
    peers = [_rank(r, 148, 0.40, samples=200) for r in (0, 1, 2)]
    slow = _rank(3, 138, 0.40, samples=200, own=("hook (inject.py:114)", 20))
    finding = find_stragglers(Collection(records=[*peers, slow]))
    assert [s.ranks for s in finding.stragglers] == [[3]]
    assert "it spent 10% of its samples in work in hook (inject.py:114), where its peers were seen 0%" in \
        finding.stragglers[0].evidence
    # the same extra share in code every rank runs (a layer's forward: the scheduler's noise on busy cores): nobody
    shared = [_rank(r, 148, 0.40, samples=200, own=("forward (model.py:78)", 4)) for r in (0, 1, 2)]
    assert _named(*shared, _rank(3, 138, 0.40, samples=200, own=("forward (model.py:78)", 24))) == []
    # its own frame, but its peers waited no more than it did: nobody
    assert _named(*peers, _rank(3, 148, 0.40, samples=200, own=("hook (inject.py:114)", 20))) == []


BUSY = "import time\nend = time.time() + 30\nwhile time.time() < end:\n    sum(i * i for i in range(1000))\n"


@pytest.fixture
def busy_and_idle():
    procs = [subprocess.Popen([PYTHON, "-c", code]) for code in (BUSY, "import time; time.sleep(30)")]
    time.sleep(1.0)
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def test_the_collector_reads_each_ranks_time_on_a_core_over_the_window(busy_and_idle):
    busy, idle = busy_and_idle
    started = time.time()
    found = profile.record_all(str(REPO / ".venv" / "bin" / "py-spy"), [busy, idle], seconds=2, rate=20)
    cpu = {pid: found[pid]["cpu"] for pid in (busy, idle)}
    assert all(1.5 <= c["seconds"] <= 4 and started <= c["since"] <= started + 2 for c in cpu.values()), cpu
    # the busy loop ran on a core for most of the window (less only what it waited for one), the sleeper not at all
    assert cpu[busy]["on_core"] + cpu[busy]["waiting"] >= 0.8 * cpu[busy]["seconds"], cpu
    assert cpu[idle]["on_core"] < 0.05 and cpu[idle]["all_on_core"] >= cpu[idle]["on_core"], cpu


def test_a_damaged_cpu_record_in_a_node_file_is_refused_with_the_reason(tmp_path):
    node = {"format": "hangdoctor-node/2", "node": "n1", "frame_table": [], "thread_table": [],
            "profile_frames": ["f (a.py:1)"],
            "processes": [{"pid": 10, "rank": 0, "world_size": 1, "cmdline": ["python"], "samples": [],
                           "profile": {"status": "ok", "rate": 50, "seconds": 2, "samples": 3,
                                       "stacks": [[10, "MainThread", [0], 3]],
                                       "cpu": {"seconds": 2, "on_core": -1, "waiting": 0, "all_on_core": 0}}}]}
    path = tmp_path / "n1.json"
    path.write_text(json.dumps(node))
    result = run_bounded([PYTHON, "-m", "hangdoctor", "analyze", str(path), "--profile"], timeout=30, env=child_env())
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert "damaged hangdoctor node file" in result.stderr and "cpu is not" in result.stderr
