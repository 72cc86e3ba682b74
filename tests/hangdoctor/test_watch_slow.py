"""`hangdoctor watch --slow PCT`: the slowdown detector (pure), and the watch beside a running gloo job whose rank 2
is made slower partway: one profile is taken, in a slow-*/ folder, and names rank 2."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from hangdoctor.watch.slowdown import CONFIRM, WARMUP, SlowDetector
from tests.hangdoctor.livejobs import SlowJob, wait_until
from tests.support import PYTHON, REPO, child_env, kill_tree


def feed(detector: SlowDetector, per_iteration: list[float]) -> list:
    """One poll a second; `per_iteration` seconds per iteration for each poll."""
    fired, t, iteration = [], 0.0, 0
    detector.feed(t, iteration)
    for per in per_iteration:
        t += 1.0
        iteration += round(1.0 / per)
        fired.append(detector.feed(t, iteration))
    return fired


def test_it_fires_once_after_confirmed_readings_and_rearms_after_recovery():
    steady, slow = [0.1] * (WARMUP + 2), [0.2] * (CONFIRM + 4)
    fired = feed(SlowDetector(30), steady + slow + [0.1] * 2 + slow)
    hits = [i for i, f in enumerate(fired) if f is not None]
    assert hits == [len(steady) + CONFIRM - 1, len(steady) + len(slow) + 2 + CONFIRM - 1]
    baseline, recent = fired[hits[0]]
    assert baseline == pytest.approx(0.1) and recent == pytest.approx(0.2)


def test_noise_under_the_bound_and_a_single_slow_poll_do_not_fire():
    assert not any(feed(SlowDetector(30), [0.1, 0.11, 0.1, 0.125, 0.1, 0.1, 0.2, 0.1, 0.12, 0.1, 0.1, 0.11]))


def test_a_restarted_run_starts_its_readings_over():
    detector = SlowDetector(30)
    feed(detector, [0.1] * 10)
    assert detector.feed(100.0, 3) is None and detector.last_iteration == 3  # lower: a restart from a checkpoint


def test_watch_profiles_a_job_that_slows_down_once(tmp_path):
    (tmp_path / "job").mkdir()
    job = SlowJob(tmp_path / "job", nproc=4, how="sleep", work=0.05).start()
    out = tmp_path / "watch"
    watcher = subprocess.Popen(
        [PYTHON, "-m", "hangdoctor", "watch", "--pid", *map(str, job.pids.values()), "--log", str(job.times),
         "--iteration-regex", r"^iteration (?P<iteration>\d+) ", "--poll", "0.5", "--stall", "60", "--slow", "40",
         "--profile-seconds", "3", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=REPO, env=child_env(), start_new_session=True)
    try:
        time.sleep(6)  # a baseline of readings
        job.slow(2, 2.0)
        wait_until(lambda: any(out.glob("slow-*/profile.json")), timeout=90, what="the slowdown's profile")
        time.sleep(3)  # still slow: no second profile
        profiles = sorted(out.glob("slow-*/profile.json"))
        assert len(profiles) == 1
        report = json.loads(profiles[0].read_text())
        assert [s["ranks"] for s in report["stragglers"]] == [[2]], report["headline"]
        events = [json.loads(line) for line in (out / "watch.jsonl").read_text().splitlines()]
        slow = [e for e in events if e["event"] == "slow"]
        assert len(slow) == 1 and slow[0]["recent_s"] > 1.4 * slow[0]["baseline_s"]
        assert "SLOW RANK: rank 2" in slow[0]["text"]
    finally:
        kill_tree(watcher.pid)
        watcher.wait(timeout=30)
        job.stop()
