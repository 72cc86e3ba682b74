"""attach --profile's bound on what sampling costs the job (collector/sampling_cost.py): the model on figures, then
real samplers on real CPU-bound processes that take every core of this machine."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from hangdoctor.collector import profile, sampling_cost
from hangdoctor.collector.sampling_cost import MIN_RATE, SamplingCost
from tests.support import PYTHON, REPO, child_env, run_bounded


# 4 CPU-bound ranks alone on 2 cores: together on a core 1.8 of them, waiting for one 2.2
BUSY = dict(rate=50, cores=2, samplers=0.2, idle=0.0, ranks=1.8, waited=2.2, all_waited=2.2, processes=4)


def test_samplers_on_a_busy_node_lower_the_rate_until_the_cost_fits():
    found = SamplingCost(**BUSY)
    assert found.cost == pytest.approx(0.1)  # bench/stragglers.py measured the trainer 10% slower at 50/s, 2 cores
    rate = sampling_cost.bounded_rate(found, 0.02)
    assert MIN_RATE < rate < 50
    assert found.cost_at(0.2 * rate / 50) <= 0.02 < found.cost_at(0.2 * (rate + 1) / 50)  # the highest that fits
    assert f"sampled at {rate}/s, not 50/s" in sampling_cost.explain(found, rate, 0.02)


def test_ranks_that_never_wait_for_a_core_lose_nothing_and_keep_the_rate():
    spare = SamplingCost(rate=50, cores=96, samplers=0.4, idle=80.0, ranks=8.0, waited=0.0, all_waited=0.1,
                         processes=8)
    assert spare.cost == 0.0 and sampling_cost.bounded_rate(spare, 0.02) == 50
    assert "within the 2% bound" in sampling_cost.explain(spare, 50, 0.02)
    # ranks that mostly sleep, on a node another program keeps busy: when they wake they wait for a core a little
    # longer, a small share of their wall time (the slow-job fixture beside this session's helpers: 4.2% if it
    # were read as bound by its CPU)
    sleepy = SamplingCost(rate=50, cores=2, samplers=0.11, idle=0.0, ranks=0.04, waited=0.13, all_waited=8.21,
                          processes=4)
    assert sleepy.cost < 0.005 and sampling_cost.bounded_rate(sleepy, 0.02) == 50


def test_the_job_gets_only_its_share_of_what_the_samplers_free():
    alone = SamplingCost(**BUSY)
    crowded = SamplingCost(**{**BUSY, "all_waited": 4.4})  # as much waiting again by another program's tasks
    assert crowded.cost == pytest.approx(0.1 / (1.8 + 0.1)) and crowded.cost < alone.cost


def test_the_rate_never_falls_below_the_floor_and_says_the_bound_is_not_met():
    found = SamplingCost(**BUSY)
    assert sampling_cost.bounded_rate(found, 0.0001) == MIN_RATE
    assert "the bound is not met" in sampling_cost.explain(found, MIN_RATE, 0.0001)


def test_a_window_is_read_from_two_snapshots_as_cores():
    before = sampling_cost.CpuSnapshot(idle=100.0, total=1000.0, cores=4, waited=50.0,
                                       processes={1: (10.0, 10.0, 1.0), 2: (20.0, 20.0, 2.0), 3: (5.0, 5.0, 0.0)})
    after = sampling_cost.CpuSnapshot(idle=101.0, total=1004.0, cores=4, waited=51.0,
                                      processes={1: (10.1, 10.1, 1.5), 2: (20.9, 20.9, 2.1), 3: (5.9, 5.9, 0.2)})
    found = sampling_cost.measure(before, after, samplers=[1], job=[2, 3], rate=50, ranks=1)  # 1 s of 4 cores
    assert (found.samplers, found.idle, found.ranks, found.waited) == pytest.approx((0.1, 1.0, 1.8, 0.3))
    assert found.all_waited == pytest.approx(0.5)  # every task's 1.0 but the samplers' own 0.5
    assert found.processes == 1  # one rank, its worker counted with it
    assert sampling_cost.measure(after, after, [1], [2, 3], 50) is None


BURN = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    sum(i * i for i in range(1000))\n"


@pytest.fixture
def every_core_busy():
    """One CPU-bound Python process per core of this machine: the ranks of a job that takes every core."""
    procs = [subprocess.Popen([PYTHON, "-c", BURN]) for _ in range(len(os.sched_getaffinity(0)))]
    time.sleep(1.0)
    yield [proc.pid for proc in procs]
    for proc in procs:
        proc.kill()
        proc.wait()


def test_real_samplers_on_busy_cores_are_started_again_at_a_lower_rate(every_core_busy):
    pyspy = str(REPO / ".venv" / "bin" / "py-spy")
    measured = sampling_cost.snapshot(every_core_busy)
    assert measured is not None and set(measured.processes) == set(every_core_busy)
    assert all(wait > 0 for _, _, wait in measured.processes.values())  # more runnable processes than cores
    # a bound no sampler can meet on busy cores: whatever py-spy takes here is over it
    found = profile.record_all(pyspy, every_core_busy, seconds=3, rate=50, cost_budget=0.0001)
    for result in found.values():
        assert result["status"] == "ok" and result["rate"] < 50 and result["samples"] > 0
        assert "not 50/s" in result["rate_note"] and "--profile-cost" in result["rate_note"]
    unbounded = profile.record_all(pyspy, every_core_busy[:1], seconds=1, rate=50)
    assert next(iter(unbounded.values()))["rate"] == 50 and next(iter(unbounded.values()))["rate_note"] == ""


@pytest.mark.parametrize("cost", ["0", "101", "-1"])
def test_a_profile_cost_out_of_range_is_one_line(cost, tmp_path):
    done = run_bounded([PYTHON, "-m", "hangdoctor", "attach", "--pid", str(os.getpid()), "--profile", "5",
                        "--profile-cost", cost, "--out", str(tmp_path / "out")], timeout=60, env=child_env(), cwd=REPO)
    assert done.returncode == 2 and "--profile-cost" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # the error, and its hint
